//! Tenant ordinals: dense `u32`s assigned at commit in first-sight order and
//! never reused.
//!
//! Invariants:
//! - Ordinal 0 is the node aggregate; tenants get 1, 2, 3, ...
//! - `t ord -> id` and `n id -> ord` are written together with `m:next_ord`
//!   in the same batch as the first rows that use the ordinal, so an ordinal
//!   is never visible without its rows or the other way round.
//! - Only one [`TenantAllocator`] writes (the daemon's writer, the fixture,
//!   the migration). Its cache is bounded and learns only committed ordinals.
//! - An erased tenant keeps its `t` row with an empty value (a tombstone):
//!   its ordinal is never handed out again.

use std::collections::HashMap;
use std::ops::ControlFlow;

use crate::batch::Batch;
use crate::codec::Reader;
use crate::counters::{Counters, Totals};
use crate::error::{Result, StoreError};
use crate::keys::{self, bounds, meta, prefix};
use crate::schema::Family;
use crate::store::{Dir, Store};

/// Default `tenants.max`.
pub const DEFAULT_MAX: u32 = 1_000_000;
/// Entries in the writer's cache before it is cleared whole.
pub const CACHE_CAPACITY: usize = 65_536;
/// The tenant of a hook that names none.
pub const DEFAULT_TENANT: &str = "default";
/// Longest tenant id in bytes.
pub const MAX_ID_LEN: usize = 128;

/// Checks a tenant id against the one rule ingest, the admin API, the
/// configuration and the migration share (docs/delivery.md, "Tenant ids"):
/// 1 to 128 bytes of UTF-8 in Unicode normal form C, with no character that
/// can make two different ids read the same on an operator's screen:
/// - no control characters (dedupe keys also use NUL as a separator);
/// - no format characters (general category Cf: zero-width spaces and
///   joiners, bidi overrides and isolates, the byte order mark) and no
///   other default-ignorable code points (variation selectors, Hangul
///   fillers): they are invisible, or reorder what is around them;
/// - no line or paragraph separators and no whitespace but the ASCII space,
///   and not that at either end (`acme` and `acme ` would read the same);
/// - no private-use characters (they draw as whatever a font decides).
///
/// Normal form C makes `é` written as one code point and as `e` + U+0301
/// one id instead of two that look identical. Look-alikes across scripts
/// (a Cyrillic `а` for a Latin `a`) are not caught: ids that come from
/// untrusted input are safest in ASCII.
pub fn validate_id(id: &str) -> Result<()> {
    let refuse = |why: String| Err(StoreError::InvalidTenant(why));
    if id.is_empty() {
        return refuse("tenant id is empty".into());
    }
    if id.len() > MAX_ID_LEN {
        return refuse(format!(
            "tenant id is {} bytes, the limit is {MAX_ID_LEN}",
            id.len()
        ));
    }
    if let Some(c) = id.chars().find(|&c| refused_char(c)) {
        return refuse(format!(
            "tenant id contains U+{:04X}, a control, invisible, direction-changing, \
             private-use or non-ASCII whitespace character",
            u32::from(c)
        ));
    }
    if id.starts_with(' ') || id.ends_with(' ') {
        return refuse("tenant id starts or ends with a space".into());
    }
    if !unicode_normalization::is_nfc(id) {
        return refuse("tenant id is not in Unicode normal form C (NFC)".into());
    }
    Ok(())
}

/// Format characters (Cf) and default-ignorable code points, from the
/// Unicode 15.1 character database (`UnicodeData.txt` and the
/// Default_Ignorable_Code_Point property), merged into ranges.
const INVISIBLE: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
];

fn refused_char(c: char) -> bool {
    let u = u32::from(c);
    c.is_control()
        || (c.is_whitespace() && c != ' ')
        || INVISIBLE.iter().any(|&(lo, hi)| (lo..=hi).contains(&u))
        || (0xE000..=0xF8FF).contains(&u)
        || u >= 0xF0000
}

fn decode_ord(b: &[u8]) -> Result<u32> {
    let mut r = Reader::new(b, "tenant ordinal");
    let v = r.u32()?;
    r.finish()?;
    Ok(v)
}

/// The ordinal of a tenant id, if it has one.
pub fn ord_of(store: &Store, id: &str) -> Result<Option<u32>> {
    match store.get(Family::Tenants, &keys::ord_by_tenant_key(id))? {
        Some(b) => Ok(Some(decode_ord(&b)?)),
        None => Ok(None),
    }
}

/// What the `t` row of an ordinal says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Name {
    Live(String),
    /// The tenant was erased; the ordinal stays retired.
    Erased,
}

/// The tenant id of an ordinal.
pub fn name_of(store: &Store, ord: u32) -> Result<Option<Name>> {
    match store.get(Family::Tenants, &keys::tenant_by_ord_key(ord))? {
        None => Ok(None),
        Some(b) if b.is_empty() => Ok(Some(Name::Erased)),
        Some(b) => String::from_utf8(b)
            .map(|s| Some(Name::Live(s)))
            .map_err(|_| crate::error::DecodeError::new("tenant id", "not UTF-8").into()),
    }
}

/// Number of ordinals ever allocated (erased ones included).
pub fn allocated(store: &Store) -> Result<u32> {
    Ok(store.next_ord()?.saturating_sub(1))
}

/// A tenant with its counters and cumulative totals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantInfo {
    pub ord: u32,
    pub id: String,
    pub counters: Counters,
    /// Absent in the JSON of a release before the totals: zeros.
    pub totals: Totals,
}

/// Tenants in ordinal order after `after` (exclusive), at most `limit`,
/// with their counters. Erased tenants are skipped. Cost: one range scan of
/// `limit` rows plus ten point reads per tenant.
pub fn page(store: &Store, after: Option<u32>, limit: usize) -> Result<Vec<TenantInfo>> {
    let start = after.map_or(Some(1), |a| a.checked_add(1));
    let Some(start) = start else {
        return Ok(Vec::new());
    };
    let lo = keys::tenant_by_ord_key(start).to_vec();
    let (_, hi) = bounds::family(prefix::TENANT_BY_ORD);
    let mut found = Vec::new();
    store.scan(Family::Tenants, &lo, &hi, Dir::Forward, |k, v| {
        let ord = keys::decode_tenant_by_ord_key(k)?;
        if !v.is_empty() {
            let id = String::from_utf8(v.to_vec())
                .map_err(|_| crate::error::DecodeError::new("tenant id", "not UTF-8"))?;
            found.push((ord, id));
        }
        Ok(if found.len() >= limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })?;
    let ords: Vec<u32> = found.iter().map(|(o, _)| *o).collect();
    let tallies = crate::queries::tallies_many(store, &ords)?;
    Ok(found
        .into_iter()
        .zip(tallies)
        .map(|((ord, id), (counters, totals))| TenantInfo {
            ord,
            id,
            counters,
            totals,
        })
        .collect())
}

/// How a batch's tenants resolved: ordinals for known and newly allocated
/// tenants, and the refusals. Apply it with [`TenantAllocator::committed`]
/// only after the batch that carries it committed.
#[derive(Debug, Default)]
pub struct Resolution {
    ords: HashMap<String, u32>,
    refused: Vec<String>,
    fresh: Vec<(String, u32)>,
    next_ord: u32,
}

impl Resolution {
    /// The ordinal of a tenant, or [`StoreError::TenantLimit`] if it was
    /// refused.
    pub fn ord(&self, tenant: &str, max: u32) -> Result<u32> {
        self.ords
            .get(tenant)
            .copied()
            .ok_or(StoreError::TenantLimit { max })
    }

    pub fn refused(&self) -> &[String] {
        &self.refused
    }

    /// Tenants first seen in this batch, with their new ordinals.
    pub fn fresh(&self) -> &[(String, u32)] {
        &self.fresh
    }
}

/// The writer's ordinal allocator with its bounded cache.
#[derive(Debug)]
pub struct TenantAllocator {
    cache: HashMap<String, u32>,
    capacity: usize,
    next_ord: u32,
    max: u32,
}

impl TenantAllocator {
    /// Loads `m:next_ord`. `max` is `tenants.max`.
    pub fn load(store: &Store, max: u32) -> Result<Self> {
        Ok(Self {
            cache: HashMap::new(),
            capacity: CACHE_CAPACITY,
            next_ord: store.next_ord()?,
            max,
        })
    }

    /// A smaller cache, for tests of the eviction path.
    pub fn with_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity.max(1);
        self
    }

    pub fn max(&self) -> u32 {
        self.max
    }

    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    /// Resolves the distinct tenants of a batch: cache hits, then one
    /// multi-get of the misses, then new ordinals (in the order given, which
    /// is first-sight order) whose `t`, `n` and `m:next_ord` puts go into
    /// `batch`. A new tenant past `max` is refused; an existing one never is.
    pub fn resolve<'a>(
        &self,
        store: &Store,
        tenants: impl IntoIterator<Item = &'a str>,
        batch: &mut Batch,
    ) -> Result<Resolution> {
        let mut res = Resolution {
            next_ord: self.next_ord,
            ..Resolution::default()
        };
        let mut misses: Vec<&str> = Vec::new();
        for t in tenants {
            if res.ords.contains_key(t) || misses.contains(&t) {
                continue;
            }
            match self.cache.get(t) {
                Some(&o) => {
                    res.ords.insert(t.to_owned(), o);
                }
                None => misses.push(t),
            }
        }
        if misses.is_empty() {
            return Ok(res);
        }
        let keys: Vec<Vec<u8>> = misses.iter().map(|t| keys::ord_by_tenant_key(t)).collect();
        let found = store.multi_get(Family::Tenants, &keys)?;
        for (t, v) in misses.into_iter().zip(found) {
            match v {
                Some(b) => {
                    res.ords.insert(t.to_owned(), decode_ord(&b)?);
                }
                None => {
                    validate_id(t)?;
                    if res.next_ord.saturating_sub(1) >= self.max {
                        res.refused.push(t.to_owned());
                        continue;
                    }
                    let ord = res.next_ord;
                    res.next_ord = ord.checked_add(1).ok_or(StoreError::OrdinalsExhausted)?;
                    batch.put(
                        Family::Tenants,
                        keys::tenant_by_ord_key(ord).to_vec(),
                        t.as_bytes().to_vec(),
                    );
                    batch.put(
                        Family::Tenants,
                        keys::ord_by_tenant_key(t),
                        ord.to_be_bytes().to_vec(),
                    );
                    res.ords.insert(t.to_owned(), ord);
                    res.fresh.push((t.to_owned(), ord));
                }
            }
        }
        if !res.fresh.is_empty() {
            batch.put(
                Family::Meta,
                meta::NEXT_ORD.to_vec(),
                res.next_ord.to_be_bytes().to_vec(),
            );
        }
        Ok(res)
    }

    /// Learns a resolution after its batch committed. Not calling it (the
    /// commit failed) leaves the allocator as before, so the next batch
    /// allocates the same ordinals again: nothing was written.
    pub fn committed(&mut self, res: Resolution) {
        self.next_ord = self.next_ord.max(res.next_ord);
        for (t, o) in res.ords {
            if self.cache.len() >= self.capacity {
                self.cache.clear();
            }
            self.cache.insert(t, o);
        }
    }
}

/// Tenants with counters, sorted by one counter descending (ties by
/// ordinal), at most `limit`. Reads the counters family only (never a fold
/// of the row families), keeping a bounded top-`limit` set.
pub fn top_by(
    store: &Store,
    field: crate::counters::Field,
    limit: usize,
) -> Result<Vec<TenantInfo>> {
    Ok(top_by_after(store, field, None, limit)?.0)
}

/// Where a ranking page ended: the last (counter value, ordinal) picked.
pub type RankCursor = (i64, u32);

/// [`top_by`] resumed after a (value, ordinal) cursor: only tenants that
/// sort strictly after it (a smaller value, or the same value and a larger
/// ordinal). Same cost as [`top_by`]: one scan of the counters family. Also
/// returns the cursor of the next page when this one was full: the last
/// tenant picked, even when it was erased and is not in the list (so a
/// page shortened by erased tenants never ends the listing early).
pub fn top_by_after(
    store: &Store,
    field: crate::counters::Field,
    after: Option<(i64, u32)>,
    limit: usize,
) -> Result<(Vec<TenantInfo>, Option<RankCursor>)> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    if limit == 0 {
        return Ok((Vec::new(), None));
    }
    let mut heap: BinaryHeap<Reverse<(i64, Reverse<u32>)>> = BinaryHeap::new();
    let lo = keys::counter_key(1, 0).to_vec();
    let hi = vec![0xFF; 6];
    store.scan(Family::Counters, &lo, &hi, Dir::Forward, |k, v| {
        let (ord, f) = keys::decode_counter_key(k)?;
        if f == field as u8 {
            let value = crate::counters::decode_value(v).unwrap_or(0);
            if let Some((av, ao)) = after {
                if value > av || (value == av && ord <= ao) {
                    return Ok(ControlFlow::Continue(()));
                }
            }
            heap.push(Reverse((value, Reverse(ord))));
            if heap.len() > limit {
                heap.pop();
            }
        }
        Ok(ControlFlow::Continue(()))
    })?;
    let mut picked: Vec<(i64, u32)> = heap
        .into_iter()
        .map(|Reverse((v, Reverse(o)))| (v, o))
        .collect();
    picked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let next = if picked.len() == limit {
        picked.last().copied()
    } else {
        None
    };
    let ords: Vec<u32> = picked.iter().map(|p| p.1).collect();
    let tallies = crate::queries::tallies_many(store, &ords)?;
    let mut out = Vec::with_capacity(ords.len());
    for (ord, (counters, totals)) in ords.into_iter().zip(tallies) {
        if let Some(Name::Live(id)) = name_of(store, ord)? {
            out.push(TenantInfo {
                ord,
                id,
                counters,
                totals,
            });
        }
    }
    Ok((out, next))
}

// ---------------------------------------------------------------------------
// Bounded reads for the console (appended; see docs/console.md).

/// Tenants whose id starts with `prefix`, in id order, strictly after the id
/// `after`, at most `limit`, with their counters. One range scan of the `n`
/// keys `n prefix ..= n prefix 0xFF` (0xFF never occurs in UTF-8, so every id
/// with the prefix sorts below it) plus ten point reads per tenant: the cost
/// is the page, whatever the number of tenants. Case-sensitive: ids are
/// bytes. Erased tenants have no `n` row and never appear.
pub fn by_prefix(
    store: &Store,
    prefix: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<TenantInfo>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let mut lo = keys::ord_by_tenant_key(prefix);
    if let Some(a) = after {
        // Strictly after `a`: its key followed by 0x00 is the next key up.
        let mut k = keys::ord_by_tenant_key(a);
        k.push(0);
        if k > lo {
            lo = k;
        }
    }
    let mut hi = keys::ord_by_tenant_key(prefix);
    hi.push(0xFF);
    let mut found = Vec::new();
    store.scan(Family::Tenants, &lo, &hi, Dir::Forward, |k, v| {
        let id = keys::decode_ord_by_tenant_key(k)?;
        found.push((decode_ord(v)?, id));
        Ok(if found.len() >= limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })?;
    let ords: Vec<u32> = found.iter().map(|(o, _)| *o).collect();
    let tallies = crate::queries::tallies_many(store, &ords)?;
    Ok(found
        .into_iter()
        .zip(tallies)
        .map(|((ord, id), (counters, totals))| TenantInfo {
            ord,
            id,
            counters,
            totals,
        })
        .collect())
}

#[cfg(test)]
mod console_query_tests {
    use super::*;
    use crate::transitions::{self, IngestHook, SinkSet};
    use crate::values::Envelope;

    fn store_with(rows: &[(&str, u64)]) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::create_or_open(&dir.path().join("s")).expect("store");
        let mut alloc = TenantAllocator::load(&store, DEFAULT_MAX).expect("alloc");
        let mut b = Batch::new();
        let res = alloc
            .resolve(&store, rows.iter().map(|r| r.0), &mut b)
            .expect("resolve");
        for (i, (t, at)) in rows.iter().enumerate() {
            let env = Envelope {
                received_at: *at,
                source_id: "s".into(),
                tenant: (*t).into(),
                idempotency_key: None,
                event_type: None,
                headers: Vec::new(),
                body: b"{}".to_vec(),
            };
            transitions::ingest(
                &mut b,
                &IngestHook {
                    seq: i as u64 + 1,
                    ord: res.ord(t, DEFAULT_MAX).expect("ord"),
                    envelope: &env,
                    sinks: SinkSet::first(1),
                    archive: false,
                    dedupe_expires_at: None,
                },
            );
        }
        store.commit(b, true).expect("commit");
        alloc.committed(res);
        (dir, store)
    }

    #[test]
    fn by_prefix_pages_in_id_order_and_never_leaves_the_prefix() {
        let names = ["acme", "acme-eu", "acme-us", "acmf", "ac", "beta", "acme2"];
        let rows: Vec<(&str, u64)> = names.iter().map(|n| (*n, 1_000)).collect();
        let (_d, s) = store_with(&rows);
        let ids = |v: Vec<TenantInfo>| v.into_iter().map(|t| t.id).collect::<Vec<_>>();
        assert_eq!(
            ids(by_prefix(&s, "acme", None, 10).expect("page")),
            ["acme", "acme-eu", "acme-us", "acme2"]
        );
        assert_eq!(
            ids(by_prefix(&s, "acme", None, 2).expect("page")),
            ["acme", "acme-eu"]
        );
        assert_eq!(
            ids(by_prefix(&s, "acme", Some("acme-eu"), 2).expect("page")),
            ["acme-us", "acme2"]
        );
        assert!(by_prefix(&s, "acme", Some("acme2"), 2)
            .expect("page")
            .is_empty());
        assert!(by_prefix(&s, "zz", None, 5).expect("page").is_empty());
        // An empty prefix lists everyone in id order; counters come along.
        let all = by_prefix(&s, "", None, 100).expect("page");
        assert_eq!(all.len(), names.len());
        let acme = all.iter().find(|t| t.id == "acme").expect("acme");
        assert_eq!(acme.counters.pending, 1);
        assert_eq!(Some(acme.ord), ord_of(&s, "acme").expect("ord"));
    }

    #[test]
    fn active_within_stops_at_the_limit_or_the_budget() {
        // Tenant a has rows in 5 distinct seconds, b in 1.
        let rows = [
            ("a", 1_000),
            ("a", 2_000),
            ("b", 2_500),
            ("a", 3_000),
            ("a", 4_000),
            ("a", 5_000),
        ];
        let (_d, s) = store_with(&rows);
        let now = 10_000;
        let w = crate::queries::active_within(&s, now, 10, 100).expect("walk");
        assert!(w.complete);
        assert_eq!(w.tenants.len(), 2);
        assert_eq!(w.markers_walked, 6);
        let w = crate::queries::active_within(&s, now, 1, 100).expect("walk");
        assert_eq!(w.tenants.len(), 1);
        assert_eq!(w.markers_walked, 1);
        let w = crate::queries::active_within(&s, now, 10, 2).expect("walk");
        assert!(!w.complete, "the budget stopped the walk");
        assert_eq!(w.markers_walked, 2);
        // Markers sort by (second, ordinal): a@1s, a@2s, then b@2s.
        assert_eq!(w.tenants.len(), 1);
    }

    #[test]
    fn due_window_counts_count_each_window_capped_and_skip_empty_ones() {
        // Tenant t: 1 row in [0,10), 5 rows in [20,30), none in [10,20),
        // 2 rows in [30, MAX). Tenant u: nothing due.
        let mut rows = vec![("t", 5)];
        rows.extend([21, 22, 23, 24, 25].map(|a| ("t", a)));
        rows.extend([("t", 40), ("t", 1_000_000), ("u2", 7)]);
        let (_d, s) = store_with(&rows);
        let t = ord_of(&s, "t").expect("ord").expect("t");
        let u2 = ord_of(&s, "u2").expect("ord").expect("u2");
        let edges = [0, 10, 20, 30, u64::MAX];
        let c = crate::queries::due_window_counts(&s, &[t, 999, u2], &edges, 8).expect("counts");
        assert_eq!(c[0], [1, 0, 5, 2]);
        assert_eq!(c[1], [0, 0, 0, 0], "an unknown ordinal has no rows");
        assert_eq!(c[2], [1, 0, 0, 0]);
        // Capped: 5 rows with cap 3 read as 4 ("more than 3").
        let c = crate::queries::due_window_counts(&s, &[t], &edges, 3).expect("counts");
        assert_eq!(c[0], [1, 0, 4, 2]);
        // Windows that start after 0 ignore older rows.
        let c = crate::queries::due_window_counts(&s, &[t], &[20, 30, 50], 8).expect("counts");
        assert_eq!(c[0], [5, 1]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_would_read_like_another_are_refused() {
        for ok in ["acme", "tenant-000001", "Zürich", "東京", "a b", "café"] {
            assert!(validate_id(ok).is_ok(), "{ok:?} refused");
        }
        for bad in [
            "",
            "acme\u{200B}",     // zero-width space
            "\u{202E}emca",     // right-to-left override
            "ac\u{2066}me",     // left-to-right isolate
            "acme\u{FEFF}",     // byte order mark
            "acme\u{00AD}",     // soft hyphen
            "acme\u{FE0F}",     // variation selector
            "acme\u{E0061}",    // tag character
            "\u{3164}acme",     // Hangul filler
            "acme\u{00A0}corp", // no-break space
            "acme\u{2028}",     // line separator
            "acme ",
            " acme",
            "acme\t",
            "acme\u{85}",
            "acme\u{E000}", // private use
            "cafe\u{301}",  // not NFC: `é` decomposed
        ] {
            assert!(validate_id(bad).is_err(), "{bad:?} accepted");
        }
        assert!(validate_id(&"a".repeat(MAX_ID_LEN)).is_ok());
        assert!(validate_id(&"a".repeat(MAX_ID_LEN + 1)).is_err());
    }

    #[test]
    fn the_invisible_table_is_sorted_and_disjoint() {
        for w in INVISIBLE.windows(2) {
            assert!(w[0].0 <= w[0].1 && w[0].1 < w[1].0, "{w:x?}");
        }
    }
}
