//! The sink catalog: which sinks the node delivers to, as the daemon last
//! booted or reloaded with them, so a console or command line on a stopped store can
//! name sinks (and resolve `source/name` to a position) without the
//! daemon's configuration.
//!
//! Invariants: written only by the daemon, at boot and at each reload,
//! replacing the whole catalog in one batch; at most [`MAX_SINKS`] entries; the URL is kept as
//! its scheme, host and port only, since a path or query may carry a
//! secret.
//!
//! Key: `m:sink:` source:str16 index:u16. Value (version 1): `1:u8
//! name:str16 endpoint:str16`.

use std::ops::ControlFlow;

use crate::batch::Batch;
use crate::codec::{put_str16, Reader};
use crate::error::{DecodeError, Result};
use crate::schema::Family;
use crate::store::{Dir, Store};

const PREFIX: &[u8] = b"m:sink:";
const V1: u8 = 1;

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

/// One sink as the daemon knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkEntry {
    pub source: String,
    /// Position in the source's `[[sources.sinks]]` list (the `sink` of
    /// its delivery rows).
    pub index: u16,
    /// The configured name, or the position as text.
    pub name: String,
    /// `scheme://host[:port]` of its URL.
    pub endpoint: String,
}

impl SinkEntry {
    /// The sink this entry describes.
    pub fn sink_ref(&self) -> SinkRef {
        SinkRef::new(self.source.clone(), self.index)
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
    r.expect_u8(V1)?;
    let name = r.str16()?;
    let endpoint = r.str16()?;
    r.finish()?;
    Ok(SinkEntry {
        source,
        index,
        name,
        endpoint,
    })
}

/// Replaces the catalog with `entries` in one synced batch.
pub fn replace(store: &Store, entries: &[SinkEntry]) -> Result<()> {
    let mut b = Batch::new();
    let (lo, hi) = bounds();
    b.delete_range(Family::Meta, lo, hi);
    for e in entries.iter().take(MAX_SINKS) {
        let mut v = vec![V1];
        put_str16(&mut v, &e.name);
        put_str16(&mut v, &e.endpoint);
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
/// name (which is its position when it has none). A sink the catalog does
/// not hold (removed from the configuration, or a store no daemon has
/// catalogued) is named by its position.
pub fn display(catalog: &[SinkEntry], source: &str, index: u16) -> String {
    match catalog
        .iter()
        .find(|e| e.source == source && e.index == index)
    {
        Some(e) => format!("{source}/{}", e.name),
        None => format!("{source}/{index}"),
    }
}

/// Resolves `source/sink`, where `sink` is a configured name or a
/// position, against the catalog. `None` when the catalog has no such sink
/// (a position is still accepted when the catalog is empty: a store no
/// daemon has booted on since sinks were catalogued).
pub fn resolve(catalog: &[SinkEntry], source: &str, sink: &str) -> Option<SinkEntry> {
    if let Some(e) = catalog
        .iter()
        .find(|e| e.source == source && e.name == sink)
    {
        return Some(e.clone());
    }
    let index: u16 = sink.parse().ok()?;
    match catalog
        .iter()
        .find(|e| e.source == source && e.index == index)
    {
        Some(e) => Some(e.clone()),
        None if catalog.is_empty() => Some(SinkEntry {
            source: source.to_owned(),
            index,
            name: index.to_string(),
            endpoint: String::new(),
        }),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sink_is_found_by_name_or_position() {
        let cat = vec![
            SinkEntry {
                source: "shop".into(),
                index: 0,
                name: "billing".into(),
                endpoint: "https://b.example".into(),
            },
            SinkEntry {
                source: "shop".into(),
                index: 1,
                name: "1".into(),
                endpoint: "http://x:8080".into(),
            },
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
            source: s.into(),
            index: i,
            name: i.to_string(),
            endpoint: "http://h".into(),
        };
        replace(&store, &[e("a", 0), e("a", 1), e("b", 0)]).unwrap();
        assert_eq!(catalog(&store).unwrap().len(), 3);
        replace(&store, &[e("c", 0)]).unwrap();
        assert_eq!(catalog(&store).unwrap(), vec![e("c", 0)]);
    }
}
