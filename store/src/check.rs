//! `store check`: the counters compared with a fold of the row families,
//! markers, row/index pairing and ordinals, as a typed report.
//!
//! This is the one place allowed to fold whole families: it is an offline
//! (or follower) audit, never part of a request or a refresh. Memory is
//! bounded by tenants, not rows: rows are streamed, and what pairs rows of
//! two families is a point read of the other side (see [`run`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::ControlFlow;

use serde::Serialize;

use crate::counters::{decode_value, Counters, Field};
use crate::error::Result;
use crate::keys::{self, bounds, prefix, ActiveKey, DeadByTenantKey, DeadKey, InflightKey};
use crate::rows::DueRow;
use crate::schema::Family;
use crate::store::{Dir, Store};
use crate::values::{decode_size, ArchiveValue, DeadValue, DeliveryRow};

/// One inconsistency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Mismatch {
    /// A counter differs from the fold.
    Counter {
        ord: u32,
        field: &'static str,
        stored: i64,
        folded: i64,
    },
    /// A due row whose second has no active marker.
    MissingMarker {
        ord: u32,
        at: u64,
        seq: u64,
        sink: u16,
    },
    /// An index row with no delivery row.
    MissingDelivery {
        index: &'static str,
        seq: u64,
        sink: u16,
    },
    /// A delivery row with no index row, or with more than one.
    DeliveryIndexCount { seq: u64, sink: u16, count: u32 },
    /// A delivery row whose ordinal differs from its index row's.
    WrongOrdinal {
        seq: u64,
        sink: u16,
        index_ord: u32,
        row_ord: u32,
    },
    /// `x` without `X` or the other way round.
    DeadPair {
        at: u64,
        seq: u64,
        sink: u16,
        has_x: bool,
        has_big_x: bool,
    },
    /// An ordinal used by a row or a counter but never allocated.
    UnknownOrdinal { ord: u32, used_by: &'static str },
    /// `t` and `n` rows disagree.
    OrdinalMap { ord: u32, detail: String },
    /// An ordinal at or past `m:next_ord`.
    OrdinalPastNext { ord: u32, next_ord: u32 },
    /// The node's quarantined-row counter differs from the `Q` rows.
    QuarantineCount { stored: i64, counted: i64 },
    /// The rows waiting for a sink differ from the fold
    /// ([`crate::waiting`]).
    SinkWaiting {
        source: String,
        sink: u16,
        stored: i64,
        folded: i64,
    },
    /// A key or value that does not decode.
    Undecodable {
        family: &'static str,
        detail: String,
    },
}

/// What `store check` found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    pub tenants: u64,
    pub due_rows: u64,
    pub inflight_rows: u64,
    pub dead_rows: u64,
    pub delivery_rows: u64,
    pub markers: u64,
    /// Rows in the quarantine (not a mismatch: each was counted out when it
    /// was moved there; `ankusa store quarantine list` shows them).
    pub quarantined: u64,
    pub mismatches: Vec<Mismatch>,
    /// Mismatches beyond the reported ones (the list is capped).
    pub more_mismatches: u64,
}

/// Most mismatches listed; the rest are counted.
pub const MAX_LISTED: usize = 1000;

impl CheckReport {
    pub fn ok(&self) -> bool {
        self.mismatches.is_empty() && self.more_mismatches == 0
    }
    fn push(&mut self, m: Mismatch) {
        if self.mismatches.len() < MAX_LISTED {
            self.mismatches.push(m);
        } else {
            self.more_mismatches += 1;
        }
    }
}

/// Per-tenant fingerprint of a set of `(seq, sink)` pairs: how many, and a
/// wrapping sum of a mix of each (a sum, unlike a xor, does not cancel a
/// pair counted twice). The index side and the delivery side of a tenant
/// must agree; memory is one entry per tenant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Pairs {
    count: u64,
    sum: u64,
}

impl Pairs {
    fn add(&mut self, seq: u64, sink: u16) {
        self.count += 1;
        self.sum = self.sum.wrapping_add(mix(seq, sink));
    }
}

/// splitmix64 of the pair: spreads neighbouring pairs over the whole range.
fn mix(seq: u64, sink: u16) -> u64 {
    let mut z = seq ^ (u64::from(sink) << 48) ^ 0x9E37_79B9_7F4A_7C15;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Runs every check. `progress` is called with a phase name and rows seen.
///
/// Memory is bounded by tenants: every family is read once in key order,
/// and what pairs rows across families (a due row and its marker, an index
/// row and its delivery row, `x` and `X`) is a point read of the other side,
/// plus a per-tenant fingerprint ([`Pairs`]) for "each delivery row has
/// exactly one index row". Only when a tenant's fingerprints disagree are
/// that tenant's pairs collected, to name the rows.
pub fn run(store: &Store, mut progress: impl FnMut(&str, u64)) -> Result<CheckReport> {
    let mut rep = CheckReport::default();
    let mut fold: BTreeMap<u32, Counters> = BTreeMap::new();
    // By the ordinal of the delivery row each index row found.
    let mut index_pairs: HashMap<u32, Pairs> = HashMap::new();

    // Active markers: counted (each due row looks its own up).
    let (lo, hi) = bounds::family(prefix::ACTIVE);
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        match ActiveKey::decode(k) {
            Ok(_) => rep.markers += 1,
            Err(e) => rep.push(Mismatch::Undecodable {
                family: "index/A",
                detail: e.to_string(),
            }),
        }
        Ok(ControlFlow::Continue(()))
    })?;

    // An index row's delivery row: present, of the same ordinal (unless the
    // row is quarantined, whose tenant may be unknown). Returns its size.
    let mut pair = |rep: &mut CheckReport,
                    index: &'static str,
                    ord: Option<u32>,
                    seq: u64,
                    sink: u16|
     -> Result<Option<u32>> {
        let row = store
            .get(Family::Deliveries, &keys::delivery_key(seq, sink))?
            .map(|b| DeliveryRow::decode(&b));
        match row {
            None => {
                rep.push(Mismatch::MissingDelivery { index, seq, sink });
                Ok(None)
            }
            // Reported by the delivery scan.
            Some(Err(_)) => Ok(None),
            Some(Ok(row)) => {
                if let Some(ord) = ord.filter(|o| *o != row.ord) {
                    rep.push(Mismatch::WrongOrdinal {
                        seq,
                        sink,
                        index_ord: ord,
                        row_ord: row.ord,
                    });
                }
                index_pairs.entry(row.ord).or_default().add(seq, sink);
                Ok(Some(row.size))
            }
        }
    };

    // Due rows.
    let (lo, hi) = bounds::family(prefix::DUE);
    let mut n = 0u64;
    let mut seconds = crate::transitions::SecondMarkers::default();
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
        match DueRow::decode(k, v) {
            Ok(r) => {
                fold.entry(r.ord).or_default().count_due(r.kind, r.size);
                if seconds.missing(store, &r)?.is_some() {
                    rep.push(Mismatch::MissingMarker {
                        ord: r.ord,
                        at: r.at,
                        seq: r.seq,
                        sink: r.sink,
                    });
                }
                pair(&mut rep, "D", Some(r.ord), r.seq, r.sink)?;
            }
            Err(e) => rep.push(Mismatch::Undecodable {
                family: "index/D",
                detail: e.to_string(),
            }),
        }
        n += 1;
        if n.is_multiple_of(100_000) {
            progress("due", n);
        }
        Ok(ControlFlow::Continue(()))
    })?;
    rep.due_rows = n;

    // Inflight rows.
    let (lo, hi) = bounds::family(prefix::INFLIGHT);
    let mut n = 0u64;
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
        match (InflightKey::decode(k), decode_size(v)) {
            (Ok(key), Ok(size)) => {
                let c = fold.entry(key.ord).or_default();
                c.inflight += 1;
                c.bytes += i64::from(size);
                pair(&mut rep, "F", Some(key.ord), key.seq, key.sink)?;
            }
            (Err(e), _) | (_, Err(e)) => rep.push(Mismatch::Undecodable {
                family: "index/F",
                detail: e.to_string(),
            }),
        }
        n += 1;
        Ok(ControlFlow::Continue(()))
    })?;
    rep.inflight_rows = n;
    progress("inflight", n);

    // Dead rows: each `x` with its `X` and its delivery row (whose size the
    // dead row owes), then each `X` with its `x`.
    let (lo, hi) = bounds::family(prefix::DEAD);
    let mut n = 0u64;
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
        match (DeadKey::decode(k), DeadValue::decode(v)) {
            (Ok(key), Ok(val)) => {
                fold.entry(val.ord).or_default().dead += 1;
                let big = DeadByTenantKey {
                    ord: val.ord,
                    at: key.at,
                    seq: key.seq,
                    sink: key.sink,
                };
                if !crate::transitions::dead_by_tenant_exists(store, &big)? {
                    rep.push(Mismatch::DeadPair {
                        at: key.at,
                        seq: key.seq,
                        sink: key.sink,
                        has_x: true,
                        has_big_x: false,
                    });
                }
                if let Some(size) = pair(&mut rep, "x", Some(val.ord), key.seq, key.sink)? {
                    fold.entry(val.ord).or_default().bytes += i64::from(size);
                }
            }
            (Err(e), _) | (_, Err(e)) => rep.push(Mismatch::Undecodable {
                family: "index/x",
                detail: e.to_string(),
            }),
        }
        n += 1;
        Ok(ControlFlow::Continue(()))
    })?;
    rep.dead_rows = n;
    let (lo, hi) = bounds::family(prefix::DEAD_BY_TENANT);
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        match DeadByTenantKey::decode(k) {
            Ok(key) => {
                if !crate::transitions::dead_exists(store, &key.dead_key())? {
                    rep.push(Mismatch::DeadPair {
                        at: key.at,
                        seq: key.seq,
                        sink: key.sink,
                        has_x: false,
                        has_big_x: true,
                    });
                }
            }
            Err(e) => rep.push(Mismatch::Undecodable {
                family: "index/X",
                detail: e.to_string(),
            }),
        }
        Ok(ControlFlow::Continue(()))
    })?;
    progress("dead", rep.dead_rows);

    // Quarantined rows: each keeps the delivery row its key names.
    let (lo, hi) = bounds::family(prefix::QUARANTINE);
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
        match crate::quarantine::QuarantinedRow::decode(k, v) {
            Ok(q) => {
                rep.quarantined += 1;
                if let Some((seq, sink)) = crate::quarantine::delivery_of(&q.key) {
                    pair(&mut rep, "Q", None, seq, sink)?;
                }
            }
            Err(e) => rep.push(Mismatch::Undecodable {
                family: "index/Q",
                detail: e.to_string(),
            }),
        }
        Ok(ControlFlow::Continue(()))
    })?;

    // Archive obligations.
    let (lo, hi) = bounds::family(prefix::ARCHIVE);
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |_, v| {
        match ArchiveValue::decode(v) {
            Ok(a) => fold.entry(a.ord).or_default().archive_pending += 1,
            Err(e) => rep.push(Mismatch::Undecodable {
                family: "index/a",
                detail: e.to_string(),
            }),
        }
        Ok(ControlFlow::Continue(()))
    })?;

    // Delivery rows: per tenant, the same pairs as the index rows found.
    let mut delivery_pairs: HashMap<u32, Pairs> = HashMap::new();
    let mut n = 0u64;
    store.scan(
        Family::Deliveries,
        &[],
        &[0xFF; 11],
        Dir::Forward,
        |k, v| {
            match (keys::decode_delivery_key(k), DeliveryRow::decode(v)) {
                (Ok((seq, sink)), Ok(row)) => {
                    delivery_pairs.entry(row.ord).or_default().add(seq, sink);
                }
                (Err(e), _) | (_, Err(e)) => rep.push(Mismatch::Undecodable {
                    family: "deliveries",
                    detail: e.to_string(),
                }),
            }
            n += 1;
            if n.is_multiple_of(100_000) {
                progress("deliveries", n);
            }
            Ok(ControlFlow::Continue(()))
        },
    )?;
    rep.delivery_rows = n;
    let mut unpaired: Vec<u32> = delivery_pairs
        .iter()
        .filter(|(o, p)| index_pairs.get(o) != Some(p))
        .map(|(o, _)| *o)
        .collect();
    unpaired.sort_unstable();
    for ord in unpaired {
        name_unpaired(store, ord, &mut rep)?;
    }
    // Ordinals both ways.
    let next_ord = store.next_ord()?;
    let mut by_ord: BTreeMap<u32, Option<String>> = BTreeMap::new();
    let (lo, hi) = bounds::family(prefix::TENANT_BY_ORD);
    store.scan(Family::Tenants, &lo, &hi, Dir::Forward, |k, v| {
        match keys::decode_tenant_by_ord_key(k) {
            Ok(ord) => {
                let name = if v.is_empty() {
                    None
                } else {
                    Some(String::from_utf8_lossy(v).into_owned())
                };
                by_ord.insert(ord, name);
            }
            Err(e) => rep.push(Mismatch::Undecodable {
                family: "tenants/t",
                detail: e.to_string(),
            }),
        }
        Ok(ControlFlow::Continue(()))
    })?;
    let mut named: BTreeSet<u32> = BTreeSet::new();
    let (lo, hi) = bounds::family(prefix::ORD_BY_TENANT);
    store.scan(Family::Tenants, &lo, &hi, Dir::Forward, |k, v| {
        match (keys::decode_ord_by_tenant_key(k), <[u8; 4]>::try_from(v)) {
            (Ok(id), Ok(b)) => {
                let ord = u32::from_be_bytes(b);
                named.insert(ord);
                match by_ord.get(&ord) {
                    Some(Some(name)) if *name == id => {}
                    Some(Some(name)) => rep.push(Mismatch::OrdinalMap {
                        ord,
                        detail: format!("n says {id:?}, t says {name:?}"),
                    }),
                    Some(None) => rep.push(Mismatch::OrdinalMap {
                        ord,
                        detail: format!("n row for {id:?} points at an erased ordinal"),
                    }),
                    None => rep.push(Mismatch::OrdinalMap {
                        ord,
                        detail: format!("n row for {id:?} has no t row"),
                    }),
                }
            }
            _ => rep.push(Mismatch::Undecodable {
                family: "tenants/n",
                detail: "bad n row".into(),
            }),
        }
        Ok(ControlFlow::Continue(()))
    })?;
    for (&ord, name) in &by_ord {
        if ord == 0 || ord >= next_ord {
            rep.push(Mismatch::OrdinalPastNext { ord, next_ord });
        }
        if name.is_some() && !named.contains(&ord) {
            rep.push(Mismatch::OrdinalMap {
                ord,
                detail: "t row has no n row".into(),
            });
        }
    }
    rep.tenants = by_ord.values().filter(|n| n.is_some()).count() as u64;

    // Counters: every stored counter equals the fold, and the node equals
    // the sum; every ordinal in use was allocated.
    let mut stored: BTreeMap<u32, Counters> = BTreeMap::new();
    let mut quarantined = 0i64;
    store.scan(Family::Counters, &[], &[0xFF; 6], Dir::Forward, |k, v| {
        match keys::decode_counter_key(k) {
            Ok((0, crate::counters::QUARANTINED)) => quarantined = decode_value(v).unwrap_or(0),
            // A cumulative total is no fold of the rows: only its encoding
            // is checked (8 bytes, never negative, as it only counts up).
            Ok((ord, f)) if crate::counters::Total::from_u8(f).is_some() => {
                let bad = match decode_value(v) {
                    None => Some(format!("{} bytes, not 8", v.len())),
                    Some(n) if n < 0 => Some(format!("negative ({n})")),
                    Some(_) => None,
                };
                if let Some(why) = bad {
                    rep.push(Mismatch::Undecodable {
                        family: "counters",
                        detail: format!("ord {ord} total field {f}: {why}"),
                    });
                }
            }
            Ok((ord, f)) => match (Field::from_u8(f), decode_value(v)) {
                (Some(field), Some(val)) => *stored.entry(ord).or_default().get_mut(field) = val,
                _ => rep.push(Mismatch::Undecodable {
                    family: "counters",
                    detail: format!("ord {ord} field {f}"),
                }),
            },
            Err(e) => rep.push(Mismatch::Undecodable {
                family: "counters",
                detail: e.to_string(),
            }),
        }
        Ok(ControlFlow::Continue(()))
    })?;
    if quarantined != rep.quarantined as i64 {
        rep.push(Mismatch::QuarantineCount {
            stored: quarantined,
            counted: rep.quarantined as i64,
        });
    }
    let mut node = Counters::default();
    for c in fold.values() {
        for f in Field::ALL {
            *node.get_mut(f) += c.get(f);
        }
    }
    fold.insert(0, node);
    let ords: BTreeSet<u32> = fold.keys().chain(stored.keys()).copied().collect();
    for ord in ords {
        if ord != 0 && !by_ord.contains_key(&ord) {
            let used_by = if fold.get(&ord).is_some_and(|c| !c.is_zero()) {
                "rows"
            } else {
                "counters"
            };
            if used_by == "rows" || stored.get(&ord).is_some_and(|c| !c.is_zero()) {
                rep.push(Mismatch::UnknownOrdinal { ord, used_by });
            }
        }
        let s = stored.get(&ord).copied().unwrap_or_default();
        let f = fold.get(&ord).copied().unwrap_or_default();
        for field in Field::ALL {
            if s.get(field) != f.get(field) {
                rep.push(Mismatch::Counter {
                    ord,
                    field: field.name(),
                    stored: s.get(field),
                    folded: f.get(field),
                });
            }
        }
    }
    // Rows waiting per sink, once the store is counted (an earlier
    // release's store is counted by the daemon's next boot).
    if crate::waiting::counted(store)? {
        progress("sinks", 0);
        let folded = crate::waiting::fold_waiting(store)?;
        let mut bad = Vec::new();
        let stored = crate::waiting::stored_waiting(store, |d| bad.push(d))?;
        for detail in bad {
            rep.push(Mismatch::Undecodable {
                family: "counters",
                detail,
            });
        }
        for (s, stored, folded) in crate::waiting::differences(&folded, &stored) {
            rep.push(Mismatch::SinkWaiting {
                source: s.source,
                sink: s.sink,
                stored,
                folded,
            });
        }
    }
    progress("done", rep.delivery_rows);
    Ok(rep)
}

/// Names the delivery rows of tenant `ord` that do not pair with exactly
/// one index row, once its fingerprints disagreed: collects the tenant's
/// index pairs (its own ranges, and quarantined rows whose delivery row is
/// its), then reads the delivery rows of that tenant. Memory: that tenant's
/// rows; time: one more read of the delivery rows.
fn name_unpaired(store: &Store, ord: u32, rep: &mut CheckReport) -> Result<()> {
    let mut seen: HashMap<(u64, u16), u32> = HashMap::new();
    let mut count = |seq: u64, sink: u16| *seen.entry((seq, sink)).or_insert(0) += 1;
    let (lo, hi) = bounds::tenant(prefix::DUE, ord);
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        if let Ok(key) = keys::DueKey::decode(k) {
            count(key.seq, key.sink);
        }
        Ok(ControlFlow::Continue(()))
    })?;
    let (lo, hi) = bounds::tenant(prefix::INFLIGHT, ord);
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        if let Ok(key) = InflightKey::decode(k) {
            count(key.seq, key.sink);
        }
        Ok(ControlFlow::Continue(()))
    })?;
    let (lo, hi) = bounds::tenant(prefix::DEAD_BY_TENANT, ord);
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        if let Ok(key) = DeadByTenantKey::decode(k) {
            if crate::transitions::dead_exists(store, &key.dead_key())? {
                count(key.seq, key.sink);
            }
        }
        Ok(ControlFlow::Continue(()))
    })?;
    let (lo, hi) = bounds::family(prefix::QUARANTINE);
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        let named = k
            .get(1..)
            .and_then(crate::quarantine::delivery_of)
            .filter(|(seq, sink)| {
                store
                    .get(Family::Deliveries, &keys::delivery_key(*seq, *sink))
                    .ok()
                    .flatten()
                    .and_then(|b| DeliveryRow::decode(&b).ok())
                    .is_some_and(|d| d.ord == ord)
            });
        if let Some((seq, sink)) = named {
            count(seq, sink);
        }
        Ok(ControlFlow::Continue(()))
    })?;
    store.scan(
        Family::Deliveries,
        &[],
        &[0xFF; 11],
        Dir::Forward,
        |k, v| {
            if let (Ok((seq, sink)), Ok(row)) =
                (keys::decode_delivery_key(k), DeliveryRow::decode(v))
            {
                if row.ord == ord {
                    let n = seen.get(&(seq, sink)).copied().unwrap_or(0);
                    if n != 1 {
                        rep.push(Mismatch::DeliveryIndexCount {
                            seq,
                            sink,
                            count: n,
                        });
                    }
                }
            }
            Ok(ControlFlow::Continue(()))
        },
    )?;
    Ok(())
}

/// Folded counters of one tenant (tests and diagnostics; O(tenant's rows)).
pub fn fold_tenant(store: &Store, ord: u32) -> Result<Counters> {
    let mut c = Counters::default();
    let (lo, hi) = bounds::tenant(prefix::DUE, ord);
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
        let r = DueRow::decode(k, v)?;
        c.count_due(r.kind, r.size);
        Ok(ControlFlow::Continue(()))
    })?;
    let (lo, hi) = bounds::tenant(prefix::INFLIGHT, ord);
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |_, v| {
        c.inflight += 1;
        c.bytes += i64::from(decode_size(v)?);
        Ok(ControlFlow::Continue(()))
    })?;
    let (lo, hi) = bounds::tenant(prefix::DEAD_BY_TENANT, ord);
    let mut dead = Vec::new();
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        dead.push(DeadByTenantKey::decode(k)?);
        Ok(ControlFlow::Continue(()))
    })?;
    c.dead = dead.len() as i64;
    for k in dead {
        if let Some(row) = crate::queries::delivery(store, k.seq, k.sink)? {
            c.bytes += i64::from(row.size);
        }
    }
    let (lo, hi) = bounds::family(prefix::ARCHIVE);
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |_, v| {
        if ArchiveValue::decode(v)?.ord == ord {
            c.archive_pending += 1;
        }
        Ok(ControlFlow::Continue(()))
    })?;
    Ok(c)
}
