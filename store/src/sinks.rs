//! The sink catalog: which sinks the node delivers to, as the daemon last
//! booted or reloaded with them, so a console or command line on a stopped store can
//! name sinks (and resolve `source/name` to a position) without the
//! daemon's configuration.
//!
//! It is also the record of which positions a source has ever used. A
//! delivery row, a stored sink limit, a pause and a dead row name a sink by
//! its position, so a position once given to a sink is never given to
//! another: a sink taken out of the configuration stays here as a
//! tombstone ([`SinkState::Dropped`]), and a source taken out keeps its
//! tombstones, so the same id added back later starts after them.
//!
//! Invariants: written only by the daemon, at boot and at each reload,
//! replacing the whole catalog in one batch, tombstones included; at most
//! [`MAX_SINKS`] entries; the URL is kept as its scheme, host and port
//! only, since a path or query may carry a secret, and as a SHA-256 digest
//! of the whole URL, which says whether a sink that changed its name is
//! the same endpoint without keeping the URL.
//!
//! Key: `m:sink:` source:str16 index:u16. Value (version 2): `2:u8
//! name:str16 endpoint:str16 state:u8 url_digest:[32]`; version 1 (`1:u8
//! name:str16 endpoint:str16`, written before tombstones) reads as a live
//! sink with no digest.

use std::ops::ControlFlow;

use crate::batch::Batch;
use crate::codec::{put_str16, Reader};
use crate::error::{DecodeError, Result};
use crate::schema::Family;
use crate::store::{Dir, Store};

const PREFIX: &[u8] = b"m:sink:";
const V1: u8 = 1;
const V2: u8 = 2;

/// One sink of one source: the source's id and the sink's position in its
/// `[[sources.sinks]]` list (the `sink` of its rows). The one name for a
/// sink across the store, the operator core and the console; `source/sink`
/// when displayed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SinkRef {
    pub source: String,
    pub sink: u16,
}

impl SinkRef {
    pub fn new(source: impl Into<String>, sink: u16) -> SinkRef {
        SinkRef {
            source: source.into(),
            sink,
        }
    }
}

impl std::fmt::Display for SinkRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.source, self.sink)
    }
}

/// Entries the catalog holds at most.
pub const MAX_SINKS: usize = 10_000;

/// Where a sink is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkState {
    /// Configured: new hooks owe it rows (those its `events` take).
    Live,
    /// Configured with `retired = true`: it delivers what waits for it and
    /// takes no new hook.
    Retired,
    /// Taken out of the configuration: a tombstone that keeps its position
    /// from any later sink. Nothing is delivered to it; its dead rows stay
    /// listed under its name.
    Dropped,
}

impl SinkState {
    fn code(self) -> u8 {
        match self {
            SinkState::Live => 0,
            SinkState::Retired => 1,
            SinkState::Dropped => 2,
        }
    }

    fn of(code: u8) -> Option<SinkState> {
        match code {
            0 => Some(SinkState::Live),
            1 => Some(SinkState::Retired),
            2 => Some(SinkState::Dropped),
            _ => None,
        }
    }
}

/// One sink as the daemon knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkEntry {
    pub source: String,
    /// Position in the source's list (the `sink` of its delivery rows):
    /// given once, never to another sink.
    pub index: u16,
    /// The configured name, or the position as text.
    pub name: String,
    /// `scheme://host[:port]` of its URL.
    pub endpoint: String,
    pub state: SinkState,
    /// SHA-256 of its whole URL; `None` in an entry an earlier release
    /// wrote.
    pub url_digest: Option<[u8; 32]>,
}

impl SinkEntry {
    /// A configured sink that takes new hooks, with no URL digest.
    pub fn live(
        source: impl Into<String>,
        index: u16,
        name: impl Into<String>,
        endpoint: impl Into<String>,
    ) -> SinkEntry {
        SinkEntry {
            source: source.into(),
            index,
            name: name.into(),
            endpoint: endpoint.into(),
            state: SinkState::Live,
            url_digest: None,
        }
    }

    /// The sink this entry describes.
    pub fn sink_ref(&self) -> SinkRef {
        SinkRef::new(self.source.clone(), self.index)
    }

    pub fn dropped(&self) -> bool {
        self.state == SinkState::Dropped
    }
}

fn bounds() -> (Vec<u8>, Vec<u8>) {
    let lo = PREFIX.to_vec();
    let mut hi = PREFIX.to_vec();
    if let Some(last) = hi.last_mut() {
        *last += 1;
    }
    (lo, hi)
}

fn key(source: &str, index: u16) -> Vec<u8> {
    let mut k = PREFIX.to_vec();
    put_str16(&mut k, source);
    k.extend_from_slice(&index.to_be_bytes());
    k
}

fn decode(k: &[u8], v: &[u8]) -> std::result::Result<SinkEntry, DecodeError> {
    let rest = k
        .strip_prefix(PREFIX)
        .ok_or_else(|| DecodeError::new("sink key", "missing m:sink: prefix"))?;
    let mut r = Reader::new(rest, "sink key");
    let source = r.str16()?;
    let index = r.u16()?;
    r.finish()?;
    let mut r = Reader::new(v, "sink value");
    let version = r.u8()?;
    let name = r.str16()?;
    let endpoint = r.str16()?;
    let (state, url_digest) = match version {
        V1 => (SinkState::Live, None),
        V2 => {
            let state = SinkState::of(r.u8()?)
                .ok_or_else(|| DecodeError::new("sink value", "unknown sink state"))?;
            let mut digest = [0u8; 32];
            for b in &mut digest {
                *b = r.u8()?;
            }
            (state, Some(digest))
        }
        _ => return Err(DecodeError::new("sink value", "unknown version")),
    };
    r.finish()?;
    Ok(SinkEntry {
        source,
        index,
        name,
        endpoint,
        state,
        url_digest,
    })
}

/// Replaces the catalog with `entries` in one synced batch.
pub fn replace(store: &Store, entries: &[SinkEntry]) -> Result<()> {
    let mut b = Batch::new();
    let (lo, hi) = bounds();
    b.delete_range(Family::Meta, lo, hi);
    for e in entries.iter().take(MAX_SINKS) {
        let mut v = vec![V2];
        put_str16(&mut v, &e.name);
        put_str16(&mut v, &e.endpoint);
        v.push(e.state.code());
        v.extend_from_slice(&e.url_digest.unwrap_or([0; 32]));
        b.put(Family::Meta, key(&e.source, e.index), v);
    }
    store.commit(b, true)
}

/// The catalog, by source then position.
pub fn catalog(store: &Store) -> Result<Vec<SinkEntry>> {
    let (lo, hi) = bounds();
    let mut out = Vec::new();
    store.scan(Family::Meta, &lo, &hi, Dir::Forward, |k, v| {
        out.push(decode(k, v)?);
        Ok(if out.len() >= MAX_SINKS {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })?;
    Ok(out)
}

/// How operators see a sink, everywhere: `SOURCE/NAME`, with its configured
/// name (which is its position when it has none), and `SOURCE/NAME
/// (dropped)` for a tombstone. A sink the catalog does not hold (a store no
/// daemon has catalogued) is named by its position.
pub fn display(catalog: &[SinkEntry], source: &str, index: u16) -> String {
    match catalog
        .iter()
        .find(|e| e.source == source && e.index == index)
    {
        Some(e) if e.dropped() => format!("{source}/{} (dropped)", e.name),
        Some(e) => format!("{source}/{}", e.name),
        None => format!("{source}/{index}"),
    }
}

/// Whether the catalog says `source`'s sink at `index` was dropped.
pub fn is_dropped(catalog: &[SinkEntry], source: &str, index: u16) -> bool {
    catalog
        .iter()
        .any(|e| e.source == source && e.index == index && e.dropped())
}

/// Resolves `source/sink`, where `sink` is a configured name or a
/// position, against the catalog. `None` when the catalog has no such sink
/// (a position is still accepted when the catalog is empty: a store no
/// daemon has booted on since sinks were catalogued). A name a configured
/// sink has is that sink, even when a dropped one had it before.
pub fn resolve(catalog: &[SinkEntry], source: &str, sink: &str) -> Option<SinkEntry> {
    let named = |e: &&SinkEntry| e.source == source && e.name == sink;
    if let Some(e) = catalog
        .iter()
        .filter(named)
        .find(|e| !e.dropped())
        .or_else(|| catalog.iter().find(named))
    {
        return Some(e.clone());
    }
    let index: u16 = sink.parse().ok()?;
    match catalog
        .iter()
        .find(|e| e.source == source && e.index == index)
    {
        Some(e) => Some(e.clone()),
        None if catalog.is_empty() => Some(SinkEntry::live(
            source,
            index,
            index.to_string(),
            String::new(),
        )),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sink_is_found_by_name_or_position() {
        let cat = vec![
            SinkEntry::live("shop", 0, "billing", "https://b.example"),
            SinkEntry::live("shop", 1, "1", "http://x:8080"),
        ];
        assert_eq!(resolve(&cat, "shop", "billing").unwrap().index, 0);
        assert_eq!(resolve(&cat, "shop", "0").unwrap().name, "billing");
        assert_eq!(resolve(&cat, "shop", "1").unwrap().index, 1);
        assert!(resolve(&cat, "shop", "2").is_none());
        assert!(resolve(&cat, "other", "0").is_none());
        assert_eq!(resolve(&[], "any", "3").unwrap().index, 3);
        assert!(resolve(&[], "any", "name").is_none());
    }

    #[test]
    fn the_catalog_is_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let e = |s: &str, i: u16| SinkEntry {
            url_digest: Some([7; 32]),
            ..SinkEntry::live(s, i, i.to_string(), "http://h")
        };
        replace(&store, &[e("a", 0), e("a", 1), e("b", 0)]).unwrap();
        assert_eq!(catalog(&store).unwrap().len(), 3);
        let tomb = SinkEntry {
            state: SinkState::Dropped,
            ..e("c", 1)
        };
        replace(&store, &[e("c", 0), tomb.clone()]).unwrap();
        assert_eq!(catalog(&store).unwrap(), vec![e("c", 0), tomb]);
    }

    #[test]
    fn a_version_1_entry_reads_as_a_live_sink_without_a_digest() {
        let mut v = vec![V1];
        put_str16(&mut v, "billing");
        put_str16(&mut v, "https://b.example");
        let e = decode(&key("shop", 3), &v).unwrap();
        assert_eq!(
            e,
            SinkEntry::live("shop", 3, "billing", "https://b.example")
        );
        v[0] = 9;
        assert!(
            decode(&key("shop", 3), &v).is_err(),
            "an unknown version is refused"
        );
    }

    #[test]
    fn a_dropped_sink_is_shown_as_dropped_and_its_name_yields_to_a_live_one() {
        let gone = SinkEntry {
            state: SinkState::Dropped,
            ..SinkEntry::live("s", 1, "b", "http://h")
        };
        let cat = vec![
            SinkEntry::live("s", 0, "a", "http://h"),
            gone,
            SinkEntry::live("s", 2, "b", "http://h"),
        ];
        assert_eq!(display(&cat, "s", 1), "s/b (dropped)");
        assert_eq!(display(&cat, "s", 2), "s/b");
        assert_eq!(resolve(&cat, "s", "b").unwrap().index, 2);
        assert!(is_dropped(&cat, "s", 1) && !is_dropped(&cat, "s", 2));
        assert_eq!(resolve(&cat[..2], "s", "b").unwrap().index, 1);
    }
}
