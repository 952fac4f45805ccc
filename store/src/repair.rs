//! `store repair`: on a stopped store, rebuild what derives from the rows
//! and quarantine what cannot be decoded, so that `store check` passes.
//!
//! What it derives, and from what:
//! - an undecodable due row goes to the quarantine (`crate::quarantine`),
//!   taken off the counters it was counted in;
//! - every due row's second gets its active marker;
//! - every counter (per tenant and the node) is brought to the fold of the
//!   index, with merge deltas, like every other counter write;
//! - a hook that no delivery row and no archive obligation owes, and that
//!   has no reclaim marker, gets one (reclaim then collects it).
//!
//! A dry run computes exactly the same plan and writes nothing. Memory is
//! bounded by tenants (the fold), never by rows: every family is read in
//! key order and each row is looked at once. Repair refuses a store a daemon
//! holds (it opens the store as its one writer).

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use serde::Serialize;

use crate::batch::Batch;
use crate::counters::{Counters, Field};
use crate::error::Result;
use crate::keys::{self, bounds, prefix, DeadKey};
use crate::quarantine::{self, Undecodable};
use crate::rows::{DueRow, InflightRow};
use crate::schema::Family;
use crate::store::{Dir, Store};
use crate::transitions;
use crate::values::{ArchiveValue, DeadValue, DeliveryRow};

/// Most items of each kind listed in a report; the rest are counted.
pub const MAX_LISTED: usize = 100;

/// One counter brought to its fold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CounterFix {
    pub ord: u32,
    pub field: &'static str,
    pub stored: i64,
    pub folded: i64,
}

/// One row sent to the quarantine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuarantineFix {
    /// The row's key, hex.
    pub key: String,
    pub reason: String,
}

/// What a repair changed (or, dry, would change).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RepairReport {
    pub dry_run: bool,
    pub quarantined: u64,
    pub quarantined_rows: Vec<QuarantineFix>,
    /// `(ord, second)` of every marker put back.
    pub markers: u64,
    pub marker_list: Vec<(u32, u64)>,
    pub counters: u64,
    pub counter_list: Vec<CounterFix>,
    /// Hooks owed by nothing that got a reclaim marker.
    pub reclaimable: u64,
    /// Per-sink waiting counts set to their fold (with one more for
    /// marking a store an earlier release wrote as counted).
    pub sink_counts: u64,
    /// Rows that do not decode and that repair cannot place (outside the
    /// due index): `store check` still reports them.
    pub unrepaired: Vec<QuarantineFix>,
}

impl RepairReport {
    pub fn changes(&self) -> u64 {
        self.quarantined + self.markers + self.counters + self.reclaimable + self.sink_counts
    }
}

fn listed<T>(v: &mut Vec<T>, item: T) {
    if v.len() < MAX_LISTED {
        v.push(item);
    }
}

/// Rows per synced commit.
const CHUNK: usize = 10_000;

/// Repairs `store` (writes nothing when `dry_run`). `now` stamps quarantine
/// records; `progress` gets a phase name and the rows seen in it.
pub fn run(
    store: &Store,
    dry_run: bool,
    now: u64,
    mut progress: impl FnMut(&str, u64),
) -> Result<RepairReport> {
    store.require_writable()?;
    let mut rep = RepairReport {
        dry_run,
        ..RepairReport::default()
    };
    let mut b = Batch::new();
    let flush = |b: &mut Batch, force: bool| -> Result<()> {
        if !dry_run && (force || b.len() >= CHUNK) {
            store.commit(std::mem::take(b), true)?;
        } else if dry_run {
            *b = Batch::new();
        }
        Ok(())
    };

    // Due rows: quarantine the undecodable, fold the rest, and put back the
    // marker of every second that has rows (rows of a tenant come in time
    // order, so one marker read per tenant and second).
    let mut fold: BTreeMap<u32, Counters> = BTreeMap::new();
    let mut seconds = transitions::SecondMarkers::default();
    let (lo, hi) = bounds::family(prefix::DUE);
    let mut n = 0u64;
    let mut bad = Vec::new();
    let mut missing = Vec::new();
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
        n += 1;
        match DueRow::decode(k, v) {
            Ok(r) => {
                fold.entry(r.ord).or_default().count_due(r.kind, r.size);
                if let Some(second) = seconds.missing(store, &r)? {
                    missing.push((r.ord, second));
                }
            }
            Err(error) => bad.push(Undecodable {
                key: k.to_vec(),
                value: v.to_vec(),
                error,
            }),
        }
        if n.is_multiple_of(100_000) {
            progress("due", n);
        }
        Ok(ControlFlow::Continue(()))
    })?;
    for u in &bad {
        // A dry run only lists: the quarantine logs each row it moves.
        if !dry_run {
            let size = quarantine::delivery_of(&u.key)
                .and_then(|(seq, sink)| crate::queries::delivery(store, seq, sink).ok().flatten())
                .map(|d| d.size);
            let q = transitions::quarantine_due(&mut b, u, size, now);
            // The counters are rebuilt from the fold below, which no longer
            // sees this row: undo what the quarantine took off, or it would
            // count twice.
            undo_counted(&mut b, &q);
        }
        rep.quarantined += 1;
        listed(
            &mut rep.quarantined_rows,
            QuarantineFix {
                key: quarantine::to_hex(&u.key),
                reason: u.error.to_string(),
            },
        );
        flush(&mut b, false)?;
    }
    for (ord, second) in missing {
        transitions::repair_marker(&mut b, ord, second);
        rep.markers += 1;
        listed(&mut rep.marker_list, (ord, second));
        flush(&mut b, false)?;
    }
    progress("due", n);

    // Inflight, dead and archive rows: the rest of the fold.
    let (lo, hi) = bounds::family(prefix::INFLIGHT);
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
        match InflightRow::decode(k, v) {
            Ok(r) => {
                let c = fold.entry(r.ord).or_default();
                c.inflight += 1;
                c.bytes += i64::from(r.size);
            }
            Err(e) => listed(&mut rep.unrepaired, unrepaired(k, &e.to_string())),
        }
        Ok(ControlFlow::Continue(()))
    })?;
    progress("inflight", 0);
    let (lo, hi) = bounds::family(prefix::DEAD);
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
        match (DeadKey::decode(k), DeadValue::decode(v)) {
            (Ok(key), Ok(val)) => {
                let c = fold.entry(val.ord).or_default();
                c.dead += 1;
                if let Some(row) = store
                    .get(Family::Deliveries, &keys::delivery_key(key.seq, key.sink))?
                    .and_then(|b| DeliveryRow::decode(&b).ok())
                {
                    c.bytes += i64::from(row.size);
                }
            }
            (Err(e), _) | (_, Err(e)) => listed(&mut rep.unrepaired, unrepaired(k, &e.to_string())),
        }
        Ok(ControlFlow::Continue(()))
    })?;
    progress("dead", 0);
    let (lo, hi) = bounds::family(prefix::ARCHIVE);
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
        match ArchiveValue::decode(v) {
            Ok(a) => fold.entry(a.ord).or_default().archive_pending += 1,
            Err(e) => listed(&mut rep.unrepaired, unrepaired(k, &e.to_string())),
        }
        Ok(ControlFlow::Continue(()))
    })?;

    // Counters: every tenant's to its fold (mirrored into the node), then
    // whatever the node still lacks.
    let mut stored: BTreeMap<u32, Counters> = BTreeMap::new();
    crate::queries::each_tenant_counters(store, |ord, c| {
        stored.insert(ord, *c);
    })?;
    let node_stored = crate::queries::node_counters(store)?;
    let mut node_after = node_stored;
    let mut node_fold = Counters::default();
    let ords: std::collections::BTreeSet<u32> = fold.keys().chain(stored.keys()).copied().collect();
    for ord in ords {
        let f = fold.get(&ord).copied().unwrap_or_default();
        let s = stored.get(&ord).copied().unwrap_or_default();
        for field in Field::ALL {
            *node_fold.get_mut(field) += f.get(field);
            let d = f.get(field) - s.get(field);
            if d != 0 {
                transitions::repair_counter(&mut b, ord, field, d);
                *node_after.get_mut(field) += d;
                rep.counters += 1;
                listed(
                    &mut rep.counter_list,
                    CounterFix {
                        ord,
                        field: field.name(),
                        stored: s.get(field),
                        folded: f.get(field),
                    },
                );
            }
        }
        flush(&mut b, false)?;
    }
    for field in Field::ALL {
        let d = node_fold.get(field) - node_after.get(field);
        if d != 0 {
            transitions::repair_counter(&mut b, 0, field, d);
            rep.counters += 1;
            listed(
                &mut rep.counter_list,
                CounterFix {
                    ord: 0,
                    field: field.name(),
                    stored: node_stored.get(field),
                    folded: node_fold.get(field),
                },
            );
        }
    }
    flush(&mut b, false)?;
    progress("counters", 0);

    // Hooks nothing owes and nothing will reclaim, a page at a time.
    let mut after: Option<u64> = None;
    loop {
        let mut page = Vec::new();
        let lo = after.map_or_else(Vec::new, |s| keys::hook_key(s.saturating_add(1)).to_vec());
        store.scan(Family::Hooks, &lo, &[0xFF; 9], Dir::Forward, |k, _| {
            if let Ok(seq) = keys::decode_hook_key(k) {
                page.push(seq);
            }
            Ok(if page.len() >= CHUNK {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        })?;
        for &seq in &page {
            if !owed_or_cleared(store, seq)? {
                transitions::repair_cleared(&mut b, seq);
                rep.reclaimable += 1;
            }
        }
        flush(&mut b, false)?;
        match page.last() {
            Some(&last) if page.len() >= CHUNK => after = Some(last),
            _ => break,
        }
    }
    flush(&mut b, true)?;

    // Rows waiting per sink: after the quarantine above took its rows off,
    // so the fold and the counts agree on them.
    progress("sinks", 0);
    if dry_run {
        let counted = crate::waiting::counted(store)?;
        let folded = crate::waiting::fold_waiting(store)?;
        let stored = crate::waiting::stored_waiting(store, |_| {})?;
        rep.sink_counts =
            crate::waiting::differences(&folded, &stored).len() as u64 + u64::from(!counted);
    } else {
        let counted = crate::waiting::counted(store)?;
        rep.sink_counts = crate::waiting::recount_waiting(store)?.corrected + u64::from(!counted);
    }
    progress("done", n);
    Ok(rep)
}

fn unrepaired(k: &[u8], reason: &str) -> QuarantineFix {
    QuarantineFix {
        key: quarantine::to_hex(k),
        reason: reason.to_owned(),
    }
}

/// Gives back what a quarantine took off the counters (the fold, which no
/// longer sees the row, is what the counters are set to afterwards).
fn undo_counted(b: &mut Batch, q: &quarantine::QuarantinedRow) {
    if let Some(f) = q.counted.field {
        transitions::repair_counter(b, q.ord, f, 1);
    }
    transitions::repair_counter(b, q.ord, Field::Bytes, i64::from(q.counted.size));
}

/// Whether a delivery row, an archive obligation or a reclaim marker already
/// accounts for hook `seq`.
fn owed_or_cleared(store: &Store, seq: u64) -> Result<bool> {
    Ok(transitions::owed(store, seq)? || transitions::cleared_exists(store, seq)?)
}
