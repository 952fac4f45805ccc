//! Every state change of a delivery row, as batch operations *with* their
//! counter deltas.
//!
//! This module owns the index layout's write side. Invariants:
//! - Only this module can encode `D`, `F`, `X` and `A` keys (see `enc`,
//!   which is private), so no other code can write a due row.
//! - Every function that writes a due row writes its active marker in the
//!   same batch ([`put_due`] is the single place that does either).
//! - Every function records its counter deltas in the batch; the batch
//!   mirrors them into ord 0 and turns them into merge operands on commit.
//!   Ingest, delivered, retry and dead-letter also count themselves in the
//!   tenant's cumulative totals ([`Total`]), in the same batch; revive,
//!   recovery, purge, archive and the migration count in none.
//! - Row moves are delete-old + put-new in one batch, so a row always has
//!   exactly one index key.
//! - Active markers are deleted only by [`cleanup_markers`], the dispatcher's
//!   delete-then-verify step, and by [`unpark_chunk`] for the parked second
//!   only (which the cleanup never reaches), under the row lock.
//!
//! Row lifecycle (`pending`/`scheduled` are due rows of kind 0/1):
//!
//! ```text
//! ingest -> due(0) --claim--> inflight --delivered--> (gone; hook reclaimable)
//!                               |  \--retry--> due(1) --claim--> inflight ...
//!                               |  \--dead_letter--> dead --revive--> due(0)
//!           inflight --recover_inflight (boot)--> due(0)
//!           due/dead --purge--> (gone)
//!           due --park (sink paused)--> due at PARKED_AT --unpark--> due(now)
//! ```

mod enc;

use std::collections::HashSet;
use std::ops::ControlFlow;

use crate::batch::Batch;
use crate::counters::{Field, Total};
use crate::error::Result;
use crate::keys::{
    bounds, bucket_of, delivery_key, hook_key, meta, prefix, ActiveKey, DeadByTenantKey, DeadKey,
    DueKey, InflightKey,
};
use crate::pauses::PARKED_AT;
use crate::quarantine::{Counted, QuarantinedRow, Undecodable};
use crate::rows::{DeadRow, DueRow, InflightRow};
use crate::schema::Family;
use crate::store::{Dir, Store};
use crate::values::{
    encode_size, ArchiveValue, DeadValue, DedupeValue, DeliveryRow, DueValue, Envelope, Kind,
};

/// Rows per purge/recovery chunk: one synced batch each.
pub const CHUNK: usize = 500;

pub use crate::queries::VISIT_MAX;
// A purge chunk must fit in the keys it may look at.
const _: () = assert!(VISIT_MAX >= CHUNK);

fn pending_field(kind: Kind) -> Field {
    match kind {
        Kind::First => Field::Pending,
        Kind::Retry => Field::Scheduled,
    }
}

/// Writes a due row and its active marker. The single place either is
/// written, which is what makes "no due row without a marker" structural.
fn put_due(b: &mut Batch, ord: u32, at: u64, seq: u64, sink: u16, size: u32, kind: Kind) -> DueRow {
    let key = DueKey { ord, at, seq, sink };
    b.put(
        Family::Index,
        enc::due(&key),
        DueValue { size, kind }.encode(),
    );
    let bucket = bucket_of(at);
    if b.markers.insert((bucket, ord)) {
        b.put(
            Family::Index,
            enc::active(&ActiveKey { bucket, ord }),
            Vec::new(),
        );
    }
    b.count(ord, pending_field(kind), 1);
    b.move_due(seq, sink, 1);
    DueRow {
        ord,
        at,
        seq,
        sink,
        size,
        kind,
    }
}

fn delete_due(b: &mut Batch, row: &DueRow) {
    let key = DueKey {
        ord: row.ord,
        at: row.at,
        seq: row.seq,
        sink: row.sink,
    };
    b.delete(Family::Index, enc::due(&key));
    b.count(row.ord, pending_field(row.kind), -1);
    b.move_due(row.seq, row.sink, -1);
}

fn delete_inflight(b: &mut Batch, row: &InflightRow) {
    let key = InflightKey {
        ord: row.ord,
        seq: row.seq,
        sink: row.sink,
    };
    b.delete(Family::Index, enc::inflight(&key));
    b.count(row.ord, Field::Inflight, -1);
}

fn delete_dead(b: &mut Batch, row: &DeadRow) {
    b.delete(
        Family::Index,
        enc::dead(&DeadKey {
            at: row.at,
            seq: row.seq,
            sink: row.sink,
        }),
    );
    b.delete(
        Family::Index,
        enc::dead_by_tenant(&DeadByTenantKey {
            ord: row.ord,
            at: row.at,
            seq: row.seq,
            sink: row.sink,
        }),
    );
    b.count(row.ord, Field::Dead, -1);
}

/// Removes the delivery row of (seq, sink) and notes the hook for reclaim.
fn drop_delivery(b: &mut Batch, ord: u32, seq: u64, sink: u16, size: u32) {
    b.delete(Family::Deliveries, delivery_key(seq, sink).to_vec());
    b.put(
        Family::Index,
        enc::seq_key(prefix::CLEARED, seq),
        Vec::new(),
    );
    b.count(ord, Field::Bytes, -i64::from(size));
}

/// The sink positions a hook owes a delivery row to: a source's first 64
/// positions at most (the configuration's bound), as a bit set so that a
/// hook can skip a position (a retired sink keeps its place in the list but
/// takes no new hooks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SinkSet(u64);

impl SinkSet {
    /// Positions one hook can owe rows to at most.
    pub const MAX: u16 = 64;

    /// Positions `0..n` (`n` capped at [`SinkSet::MAX`]).
    pub fn first(n: u16) -> SinkSet {
        match n {
            0 => SinkSet(0),
            n if n >= Self::MAX => SinkSet(u64::MAX),
            n => SinkSet((1u64 << n) - 1),
        }
    }

    /// These positions (those past [`SinkSet::MAX`] are left out).
    pub fn of(positions: impl IntoIterator<Item = u16>) -> SinkSet {
        positions
            .into_iter()
            .fold(SinkSet(0), |set, p| match 1u64.checked_shl(u32::from(p)) {
                Some(bit) if p < Self::MAX => SinkSet(set.0 | bit),
                _ => set,
            })
    }

    /// This set without position `sink` (a no-op past [`SinkSet::MAX`]).
    pub fn without(self, sink: u16) -> SinkSet {
        match 1u64.checked_shl(u32::from(sink)) {
            Some(bit) if sink < Self::MAX => SinkSet(self.0 & !bit),
            _ => self,
        }
    }

    pub fn contains(self, sink: u16) -> bool {
        sink < Self::MAX && self.0 & (1u64 << sink) != 0
    }

    pub fn len(self) -> u16 {
        // At most 64: always fits.
        self.0.count_ones() as u16
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The positions, in order.
    pub fn iter(self) -> impl Iterator<Item = u16> {
        (0..Self::MAX).filter(move |&s| self.contains(s))
    }
}

/// A hook to accept: one delivery row per sink of `sinks`, all due at
/// `envelope.received_at`.
#[derive(Debug, Clone)]
pub struct IngestHook<'a> {
    pub seq: u64,
    pub ord: u32,
    pub envelope: &'a Envelope,
    /// The sink positions it owes rows to.
    pub sinks: SinkSet,
    /// Whether an archive obligation is recorded.
    pub archive: bool,
    /// When the idempotency key (if the envelope has one) stops deduping.
    pub dedupe_expires_at: Option<u64>,
}

/// Accepts a hook: the envelope, its delivery rows, their due rows and
/// markers, the archive obligation and the dedupe entry.
pub fn ingest(b: &mut Batch, h: &IngestHook<'_>) -> Vec<DueRow> {
    let size = h.envelope.charged_size();
    let at = h.envelope.received_at;
    b.put(Family::Hooks, hook_key(h.seq).to_vec(), h.envelope.encode());
    b.note_source(h.seq, &h.envelope.source_id);
    b.put(
        Family::Meta,
        meta::NEXT_SEQ.to_vec(),
        h.seq.saturating_add(1).to_be_bytes().to_vec(),
    );
    b.tally(h.ord, Total::Accepted, u64::from(h.sinks.len()));
    if h.sinks.is_empty() {
        // Owed to no sink (its type matched none, or every sink is
        // retired): the reclaim marker is put now, as the last delivery
        // would have put it, so the reclaim frees the hook once nothing
        // else (the archive) owes it.
        b.tally(h.ord, Total::Unrouted, 1);
        b.put(
            Family::Index,
            enc::seq_key(prefix::CLEARED, h.seq),
            Vec::new(),
        );
    }
    let mut rows = Vec::with_capacity(usize::from(h.sinks.len()));
    for sink in h.sinks.iter() {
        b.put(
            Family::Deliveries,
            delivery_key(h.seq, sink).to_vec(),
            DeliveryRow::new(h.ord, size).encode(),
        );
        b.count(h.ord, Field::Bytes, i64::from(size));
        rows.push(put_due(b, h.ord, at, h.seq, sink, size, Kind::First));
    }
    if h.archive {
        b.put(
            Family::Index,
            enc::seq_key(prefix::ARCHIVE, h.seq),
            ArchiveValue { size, ord: h.ord }.encode().to_vec(),
        );
        b.count(h.ord, Field::ArchivePending, 1);
    }
    if let (Some(key), Some(expires_at)) = (&h.envelope.idempotency_key, h.dedupe_expires_at) {
        let tenant = &h.envelope.tenant;
        b.put(
            Family::Index,
            crate::keys::dedupe_key(tenant, key),
            DedupeValue {
                seq: h.seq,
                expires_at,
            }
            .encode()
            .to_vec(),
        );
        b.put(
            Family::Index,
            crate::keys::expiry_key(expires_at, tenant, key),
            Vec::new(),
        );
    }
    rows
}

/// Due -> inflight. The marker stays: the dispatcher cleans it up.
pub fn claim(b: &mut Batch, row: &DueRow) -> InflightRow {
    delete_due(b, row);
    let key = InflightKey {
        ord: row.ord,
        seq: row.seq,
        sink: row.sink,
    };
    b.put(
        Family::Index,
        enc::inflight(&key),
        encode_size(row.size).to_vec(),
    );
    b.count(row.ord, Field::Inflight, 1);
    InflightRow {
        ord: row.ord,
        seq: row.seq,
        sink: row.sink,
        size: row.size,
    }
}

/// Inflight -> gone: the sink accepted it.
pub fn delivered(b: &mut Batch, row: &InflightRow) {
    delete_inflight(b, row);
    b.tally(row.ord, Total::Delivered, 1);
    drop_delivery(b, row.ord, row.seq, row.sink, row.size);
}

/// Inflight -> due (kind 1) at `at`, with the updated delivery row (its
/// attempt already recorded by the caller).
pub fn retry(b: &mut Batch, row: &InflightRow, delivery: &DeliveryRow, at: u64) -> DueRow {
    delete_inflight(b, row);
    b.tally(row.ord, Total::Retried, 1);
    b.put(
        Family::Deliveries,
        delivery_key(row.seq, row.sink).to_vec(),
        delivery.encode(),
    );
    put_due(b, row.ord, at, row.seq, row.sink, row.size, Kind::Retry)
}

/// Inflight -> dead at `at`: the `x` row (node-wide DLQ order) and its
/// by-tenant companion `X`.
pub fn dead_letter(
    b: &mut Batch,
    row: &InflightRow,
    delivery: &DeliveryRow,
    at: u64,
    source_id: &str,
    event_type: Option<&str>,
) -> DeadRow {
    delete_inflight(b, row);
    b.tally(row.ord, Total::DeadLettered, 1);
    b.put(
        Family::Deliveries,
        delivery_key(row.seq, row.sink).to_vec(),
        delivery.encode(),
    );
    let dead = DeadRow {
        ord: row.ord,
        at,
        seq: row.seq,
        sink: row.sink,
        source_id: source_id.to_owned(),
        // The node-local form: the stored string is never shown (readers
        // derive the public id from the seq), and this one needs no node.
        hook_id: crate::values::HookId(row.seq).public(None),
        event_type: event_type.map(str::to_owned),
    };
    put_dead(b, &dead);
    dead
}

fn put_dead(b: &mut Batch, dead: &DeadRow) {
    b.put(
        Family::Index,
        enc::dead(&DeadKey {
            at: dead.at,
            seq: dead.seq,
            sink: dead.sink,
        }),
        DeadValue {
            source_id: dead.source_id.clone(),
            hook_id: dead.hook_id.clone(),
            ord: dead.ord,
            event_type: dead.event_type.clone(),
        }
        .encode(),
    );
    b.put(
        Family::Index,
        enc::dead_by_tenant(&DeadByTenantKey {
            ord: dead.ord,
            at: dead.at,
            seq: dead.seq,
            sink: dead.sink,
        }),
        Vec::new(),
    );
    b.count(dead.ord, Field::Dead, 1);
}

/// Dead -> due (kind 0) at `at`: a replay. `size` is the delivery row's.
pub fn revive(b: &mut Batch, dead: &DeadRow, size: u32, at: u64) -> DueRow {
    delete_dead(b, dead);
    put_due(b, dead.ord, at, dead.seq, dead.sink, size, Kind::First)
}

/// Inflight -> due (kind 0) at `at`: boot recovery of rows whose delivery
/// outcome was never recorded.
pub fn recover_inflight(b: &mut Batch, row: &InflightRow, at: u64) -> DueRow {
    delete_inflight(b, row);
    put_due(b, row.ord, at, row.seq, row.sink, row.size, Kind::First)
}

/// Due -> parked: the row of a paused sink moves to due time
/// [`PARKED_AT`] with its kind (so its counters and attempts do not
/// change) and a marker in that second, which no tick reaches.
pub fn park(b: &mut Batch, row: &DueRow) -> DueRow {
    delete_due(b, row);
    put_due(b, row.ord, PARKED_AT, row.seq, row.sink, row.size, row.kind)
}

/// Where an unpark walk has got: the tenant it is in and the last parked
/// row it looked at there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UnparkCursor {
    pub ord: u32,
    pub after: Option<(u64, u16)>,
}

/// What one unpark chunk did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unparked {
    /// Rows made due again.
    pub rows: u64,
    /// Whether the walk has passed every parked row.
    pub done: bool,
}

/// The tenants with a parked-row marker, from `from` on, at most `limit`.
fn parked_tenants(store: &Store, from: u32, limit: usize) -> Result<Vec<u32>> {
    let bucket = bucket_of(PARKED_AT);
    let lo = enc::active(&ActiveKey { bucket, ord: from });
    let (_, hi) = bounds::active_upto(bucket);
    let mut out = Vec::new();
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        out.push(ActiveKey::decode(k)?.ord);
        Ok(if out.len() >= limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })?;
    Ok(out)
}

/// One synced chunk of an unpark: walks parked rows (of `only` when it
/// names a tenant, else of every tenant with parked rows) from `cursor`,
/// makes due at `now` those `pick(ord, seq, sink)` accepts, at most
/// [`CHUNK`] rows and [`VISIT_MAX`] keys, and commits them with `extra`'s
/// operations (the job record). A tenant whose parked rows are all gone has
/// its parked-second marker deleted in the same batch: the dispatcher's
/// cleanup never visits that second, and the caller holds the row lock, so
/// no park can race the check. `pick` errors stop the chunk.
pub fn unpark_chunk(
    store: &Store,
    only: Option<u32>,
    cursor: &mut UnparkCursor,
    now: u64,
    mut pick: impl FnMut(u32, u64, u16) -> Result<bool>,
    extra: impl FnOnce(&mut Batch, &Unparked, &UnparkCursor),
) -> Result<Unparked> {
    store.require_writable()?;
    let mut b = Batch::new();
    let mut next = *cursor;
    let mut out = Unparked::default();
    let mut visited = 0usize;
    let ords = match only {
        Some(o) if o >= next.ord => {
            if parked_tenants(store, o, 1)?.first() == Some(&o) {
                vec![o]
            } else {
                Vec::new()
            }
        }
        Some(_) => Vec::new(),
        None => parked_tenants(store, next.ord, VISIT_MAX)?,
    };
    let mut stopped = false;
    for ord in ords {
        if ord != next.ord {
            next = UnparkCursor { ord, after: None };
        }
        let lo = match next.after {
            Some((seq, sink)) => {
                let mut k = bounds::tenant_full(prefix::DUE, ord, PARKED_AT, seq, sink);
                k.push(0);
                k
            }
            None => bounds::tenant_at(prefix::DUE, ord, PARKED_AT),
        };
        let (_, hi) = bounds::tenant(prefix::DUE, ord);
        let mut left = false;
        let mut end_of_tenant = true;
        let mut err = None;
        store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
            if out.rows as usize >= CHUNK || visited >= VISIT_MAX {
                end_of_tenant = false;
                return Ok(ControlFlow::Break(()));
            }
            visited += 1;
            let row = match DueRow::decode(k, v) {
                Ok(r) => r,
                // An undecodable parked row stays where it is, counted as
                // left so its marker stays: `store check` names it and
                // `store repair` quarantines it.
                Err(_) => {
                    left = true;
                    return Ok(ControlFlow::Continue(()));
                }
            };
            next.after = Some((row.seq, row.sink));
            match pick(ord, row.seq, row.sink) {
                Ok(true) => {
                    delete_due(&mut b, &row);
                    put_due(&mut b, ord, now, row.seq, row.sink, row.size, row.kind);
                    out.rows += 1;
                }
                Ok(false) => left = true,
                Err(e) => {
                    err = Some(e);
                    return Ok(ControlFlow::Break(()));
                }
            }
            Ok(ControlFlow::Continue(()))
        })?;
        if let Some(e) = err {
            return Err(e);
        }
        if !end_of_tenant {
            stopped = true;
            break;
        }
        // Every parked row of this tenant was walked in this chunk or an
        // earlier one; if none is left, neither is the reason for its marker.
        if !left && !parked_left_before(store, ord, cursor)? {
            b.delete(
                Family::Index,
                enc::active(&ActiveKey {
                    bucket: bucket_of(PARKED_AT),
                    ord,
                }),
            );
        }
        // The next tenant.
        match ord.checked_add(1) {
            Some(n) => {
                next = UnparkCursor {
                    ord: n,
                    after: None,
                }
            }
            None => {
                next.after = None;
                break;
            }
        }
        if visited >= VISIT_MAX || out.rows as usize >= CHUNK {
            stopped = true;
            break;
        }
    }
    out.done = !stopped
        && match only {
            Some(_) => true,
            None => parked_tenants(store, next.ord, 1)?.is_empty(),
        };
    extra(&mut b, &out, &next);
    store.commit(b, true)?;
    *cursor = next;
    Ok(out)
}

/// What a bounded search of the parked rows found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParkedFind {
    /// The first parked row `pick` accepted.
    pub row: Option<DueRow>,
    /// Whether the search passed the last parked row (the cursor is back at
    /// the start).
    pub done: bool,
}

/// Looks for one parked row that `pick(row)` accepts, from `cursor`, reading
/// at most `visit` rows; the cursor moves past what was read so the next
/// search goes on from there. Read only: the caller claims the row (a
/// parked row is a due row, so [`claim`] takes it; its parked-second marker
/// stays until an unpark walk finds the tenant has no parked row left).
/// `pick` errors stop the search.
pub fn find_parked(
    store: &Store,
    cursor: &mut UnparkCursor,
    visit: usize,
    mut pick: impl FnMut(&DueRow) -> Result<bool>,
) -> Result<ParkedFind> {
    let mut out = ParkedFind::default();
    let mut seen = 0usize;
    let ords = parked_tenants(store, cursor.ord, visit.max(1))?;
    for ord in ords {
        if ord != cursor.ord {
            *cursor = UnparkCursor { ord, after: None };
        }
        let lo = match cursor.after {
            Some((seq, sink)) => {
                let mut k = bounds::tenant_full(prefix::DUE, ord, PARKED_AT, seq, sink);
                k.push(0);
                k
            }
            None => bounds::tenant_at(prefix::DUE, ord, PARKED_AT),
        };
        let (_, hi) = bounds::tenant(prefix::DUE, ord);
        let mut err = None;
        let mut full = false;
        store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
            if seen >= visit {
                full = true;
                return Ok(ControlFlow::Break(()));
            }
            seen += 1;
            // An undecodable row is `store check`'s to name; skip it.
            let Ok(row) = DueRow::decode(k, v) else {
                return Ok(ControlFlow::Continue(()));
            };
            cursor.after = Some((row.seq, row.sink));
            match pick(&row) {
                Ok(true) => {
                    out.row = Some(row);
                    Ok(ControlFlow::Break(()))
                }
                Ok(false) => Ok(ControlFlow::Continue(())),
                Err(e) => {
                    err = Some(e);
                    Ok(ControlFlow::Break(()))
                }
            }
        })?;
        if let Some(e) = err {
            return Err(e);
        }
        if out.row.is_some() || full {
            return Ok(out);
        }
        match ord.checked_add(1) {
            Some(n) => {
                *cursor = UnparkCursor {
                    ord: n,
                    after: None,
                }
            }
            None => break,
        }
        if seen >= visit {
            return Ok(out);
        }
    }
    if parked_tenants(store, cursor.ord, 1)?.is_empty() || cursor.ord == u32::MAX {
        *cursor = UnparkCursor::default();
        out.done = true;
    }
    Ok(out)
}

/// Whether a parked row of `ord` that this chunk did not walk remains
/// (rows before where the chunk started, which an earlier chunk kept).
fn parked_left_before(store: &Store, ord: u32, started: &UnparkCursor) -> Result<bool> {
    let Some((seq, sink)) = started.after.filter(|_| started.ord == ord) else {
        return Ok(false);
    };
    let lo = bounds::tenant_at(prefix::DUE, ord, PARKED_AT);
    let mut hi = bounds::tenant_full(prefix::DUE, ord, PARKED_AT, seq, sink);
    hi.push(0);
    let mut any = false;
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |_, _| {
        any = true;
        Ok(ControlFlow::Break(()))
    })?;
    Ok(any)
}

/// Removes a due row and its delivery row (a purge).
pub fn purge_due(b: &mut Batch, row: &DueRow) {
    delete_due(b, row);
    drop_delivery(b, row.ord, row.seq, row.sink, row.size);
}

/// Removes a dead row and its delivery row (a purge). `size` is the
/// delivery row's.
pub fn purge_dead(b: &mut Batch, dead: &DeadRow, size: u32) {
    delete_dead(b, dead);
    drop_delivery(b, dead.ord, dead.seq, dead.sink, size);
}

/// Settles (the hook was archived) or drops (archiving gave up) an archive
/// obligation. Both make the hook reclaimable once no row owes it.
pub fn archive_settle(b: &mut Batch, seq: u64, v: &ArchiveValue) {
    b.delete(Family::Index, enc::seq_key(prefix::ARCHIVE, seq));
    b.put(
        Family::Index,
        enc::seq_key(prefix::CLEARED, seq),
        Vec::new(),
    );
    b.count(v.ord, Field::ArchivePending, -1);
}

/// Deletes a hook no delivery row and no archive obligation owes any more.
/// Callers use [`reclaim_pass`], which checks that.
fn reclaim(b: &mut Batch, seq: u64) {
    b.delete(Family::Hooks, hook_key(seq).to_vec());
    b.delete(Family::Index, enc::seq_key(prefix::CLEARED, seq));
}

/// Format 2 -> 3: files an old due row under its tenant. Used only by the
/// migration, which deletes the old key in the same batch.
pub fn migrate_due(
    b: &mut Batch,
    ord: u32,
    at: u64,
    seq: u64,
    sink: u16,
    size: u32,
    kind: Kind,
) -> DueRow {
    b.count(ord, Field::Bytes, i64::from(size));
    put_due(b, ord, at, seq, sink, size, kind)
}

/// Format 2 -> 3: files an old inflight row under its tenant.
pub fn migrate_inflight(b: &mut Batch, ord: u32, seq: u64, sink: u16, size: u32) -> InflightRow {
    let key = InflightKey { ord, seq, sink };
    b.put(
        Family::Index,
        enc::inflight(&key),
        encode_size(size).to_vec(),
    );
    b.count(ord, Field::Inflight, 1);
    b.count(ord, Field::Bytes, i64::from(size));
    InflightRow {
        ord,
        seq,
        sink,
        size,
    }
}

/// Format 2 -> 3: rewrites an old dead row with its ordinal and companion.
pub fn migrate_dead(b: &mut Batch, dead: &DeadRow, size: u32) {
    put_dead(b, dead);
    b.count(dead.ord, Field::Bytes, i64::from(size));
}

/// Format 2 -> 3: rewrites an old archive obligation with its ordinal.
pub fn migrate_archive(b: &mut Batch, seq: u64, v: &ArchiveValue) {
    b.put(
        Family::Index,
        enc::seq_key(prefix::ARCHIVE, seq),
        v.encode().to_vec(),
    );
    b.count(v.ord, Field::ArchivePending, 1);
}

/// Which of a tenant's rows a purge removes. Inflight rows are never purged:
/// their delivery is under way and its outcome will be recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct PurgeKinds {
    /// Due rows, first attempts and retries alike.
    pub pending: bool,
    pub dead: bool,
}

/// Rows removed by a purge (so far).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct PurgeCount {
    pub pending: u64,
    pub scheduled: u64,
    pub dead: u64,
}

impl PurgeCount {
    pub fn total(&self) -> u64 {
        self.pending + self.scheduled + self.dead
    }
    fn add(&mut self, o: PurgeCount) {
        self.pending += o.pending;
        self.scheduled += o.scheduled;
        self.dead += o.dead;
    }
}

/// One chunk of a tenant purge: at most [`CHUNK`] rows, one synced commit.
/// Returns what it removed and whether the tenant has nothing left of the
/// requested kinds. Idempotent: calling it again after a crash resumes.
pub fn purge_tenant_step(store: &Store, ord: u32, kinds: PurgeKinds) -> Result<(PurgeCount, bool)> {
    let mut from_start = PurgeCursor::default();
    purge_tenant_chunk(
        store,
        ord,
        kinds,
        u64::MAX,
        &mut from_start,
        |_, _, _, _| {},
    )
}

/// Where a purge has got to in the tenant's due (`D`) and dead (`X`)
/// ranges. The next chunk seeks past the last key it visited instead of
/// stepping again over the tombstones of every row purged so far, which
/// would make a large purge quadratic. A row that becomes due (or dead)
/// behind the cursor after the purge passed is kept: it was inflight, or
/// of the other kind, when the purge went by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PurgeCursor {
    /// The last due key visited (`at`, `seq`, `sink`).
    pub due_after: Option<(u64, u64, u16)>,
    pub due_done: bool,
    /// The last dead key visited (`at`, `seq`, `sink`).
    pub dead_after: Option<(u64, u64, u16)>,
    pub dead_done: bool,
}

/// A tenant range's scan start: its beginning, or just past `after`.
fn resume_at(p: u8, ord: u32, after: Option<(u64, u64, u16)>) -> Vec<u8> {
    match after {
        Some((at, seq, sink)) => {
            let mut k = bounds::tenant_full(p, ord, at, seq, sink);
            k.push(0);
            k
        }
        None => bounds::tenant(p, ord).0,
    }
}

/// One chunk of a tenant purge that leaves hooks newer than `max_seq`
/// alone, so a purge of a tenant that keeps receiving hooks ends, and
/// continues from `cursor` (advanced only when the chunk commits). `extra`
/// adds to the chunk's batch before it commits (a job's progress record),
/// given what the chunk removes, the cursor after it, and whether it is the
/// last.
pub fn purge_tenant_chunk(
    store: &Store,
    ord: u32,
    kinds: PurgeKinds,
    max_seq: u64,
    cursor: &mut PurgeCursor,
    extra: impl FnOnce(&mut Batch, &PurgeCount, &PurgeCursor, bool),
) -> Result<(PurgeCount, bool)> {
    store.require_writable()?;
    let mut b = Batch::new();
    let mut n = PurgeCount::default();
    let mut next = *cursor;
    let mut taken = 0usize;
    if kinds.pending && !next.due_done {
        let lo = resume_at(prefix::DUE, ord, next.due_after);
        let (_, hi) = bounds::tenant(prefix::DUE, ord);
        let mut stopped = false;
        let mut visited = 0usize;
        store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
            if taken >= CHUNK || visited >= VISIT_MAX {
                stopped = true;
                return Ok(ControlFlow::Break(()));
            }
            visited += 1;
            let row = match DueRow::decode(k, v) {
                Ok(r) => r,
                Err(error) => {
                    // A bad row must not stop the purge (it would stop at it
                    // on every retry): it goes to the quarantine in this
                    // chunk's batch. The time is only the record's note.
                    let bad = Undecodable {
                        key: k.to_vec(),
                        value: v.to_vec(),
                        error,
                    };
                    let size = crate::quarantine::delivery_of(k)
                        .and_then(|(seq, sink)| crate::queries::delivery(store, seq, sink).ok())
                        .flatten()
                        .map(|d| d.size);
                    quarantine_due(&mut b, &bad, size, crate::system_now_ms());
                    if let Ok(key) = DueKey::decode(k) {
                        next.due_after = Some((key.at, key.seq, key.sink));
                    }
                    return Ok(ControlFlow::Continue(()));
                }
            };
            next.due_after = Some((row.at, row.seq, row.sink));
            if row.seq > max_seq {
                return Ok(ControlFlow::Continue(()));
            }
            purge_due(&mut b, &row);
            match row.kind {
                Kind::First => n.pending += 1,
                Kind::Retry => n.scheduled += 1,
            }
            taken += 1;
            Ok(ControlFlow::Continue(()))
        })?;
        next.due_done = !stopped;
    }
    if kinds.dead && !next.dead_done && taken < CHUNK {
        let want = CHUNK - taken;
        let (dead, last, end) =
            crate::queries::dead_keys_of_tenant(store, ord, max_seq, next.dead_after, want)?;
        if let Some(last) = last {
            next.dead_after = Some(last);
        }
        next.dead_done = end;
        if !dead.is_empty() {
            let xkeys: Vec<Vec<u8>> = dead.iter().map(|k| enc::dead(&k.dead_key())).collect();
            let values = store.multi_get(Family::Index, &xkeys)?;
            let dkeys: Vec<Vec<u8>> = dead
                .iter()
                .map(|k| delivery_key(k.seq, k.sink).to_vec())
                .collect();
            let drows = store.multi_get(Family::Deliveries, &dkeys)?;
            for ((key, xv), dr) in dead.iter().zip(values).zip(drows) {
                let (source_id, hook_id) = match xv {
                    Some(v) => {
                        let v = DeadValue::decode(&v)?;
                        (v.source_id, v.hook_id)
                    }
                    None => (String::new(), String::new()),
                };
                let size = match dr {
                    Some(v) => DeliveryRow::decode(&v)?.size,
                    None => 0,
                };
                let row = DeadRow::from_parts(
                    key,
                    DeadValue {
                        source_id,
                        hook_id,
                        ord,
                        event_type: None,
                    },
                    store.node(),
                );
                purge_dead(&mut b, &row, size);
                n.dead += 1;
            }
        }
    }
    let done = (!kinds.pending || next.due_done) && (!kinds.dead || next.dead_done);
    extra(&mut b, &n, &next, done);
    store.commit(b, true)?;
    *cursor = next;
    Ok((n, done))
}

/// Purges a tenant's rows of the given kinds in chunks, reporting progress
/// after each chunk.
pub fn purge_tenant(
    store: &Store,
    ord: u32,
    kinds: PurgeKinds,
    mut progress: impl FnMut(&PurgeCount),
) -> Result<PurgeCount> {
    let mut total = PurgeCount::default();
    let mut cursor = PurgeCursor::default();
    loop {
        let (n, done) =
            purge_tenant_chunk(store, ord, kinds, u64::MAX, &mut cursor, |_, _, _, _| {})?;
        total.add(n);
        progress(&total);
        if done {
            return Ok(total);
        }
    }
}

/// Moves a row of the index family aside into the quarantine (see
/// [`crate::quarantine`]): deletes it, records it under `Q`, takes off the
/// counters what `counted` says it was counted as, and counts it.
fn quarantine(
    b: &mut Batch,
    key: &[u8],
    value: &[u8],
    reason: &str,
    ord: u32,
    counted: Counted,
    now: u64,
) -> QuarantinedRow {
    let row = QuarantinedRow {
        key: key.to_vec(),
        at: now,
        ord,
        counted,
        reason: reason.to_owned(),
        value: value.to_vec(),
    };
    b.delete(Family::Index, key.to_vec());
    b.put(Family::Index, row.q_key(), row.encode_value());
    if let Some(f) = counted.field {
        b.count(ord, f, -1);
    }
    b.count(ord, Field::Bytes, -i64::from(counted.size));
    b.count_quarantined(1);
    // Logged where every quarantine is made (dispatcher, purge, repair,
    // migration), with the key an operator passes to `store quarantine`.
    tracing::error!(
        key = %crate::quarantine::to_hex(key),
        ord,
        reason,
        "row does not decode: moved to the quarantine"
    );
    row
}

/// Quarantines a due row that does not decode. What it was counted as comes
/// from whatever part of it decodes: the ordinal from the key; the size from
/// the value, else `size_hint` (its delivery row's); the kind from the value,
/// else a first attempt. A key that is not a due key at all was never
/// counted, and nothing is taken off.
pub fn quarantine_due(
    b: &mut Batch,
    bad: &Undecodable,
    size_hint: Option<u32>,
    now: u64,
) -> QuarantinedRow {
    let reason = bad.error.to_string();
    let Ok(key) = DueKey::decode(&bad.key) else {
        let ord = bad
            .key
            .get(1..5)
            .and_then(|o| <[u8; 4]>::try_from(o).ok())
            .map_or(0, u32::from_be_bytes);
        let none = Counted {
            field: None,
            size: 0,
        };
        return quarantine(b, &bad.key, &bad.value, &reason, ord, none, now);
    };
    let (size, kind) = match <[u8; 5]>::try_from(bad.value.as_slice()) {
        Ok(v) => (
            u32::from_be_bytes([v[0], v[1], v[2], v[3]]),
            Kind::from_u8(v[4]).unwrap_or(Kind::First),
        ),
        Err(_) => (size_hint.unwrap_or(0), Kind::First),
    };
    let counted = Counted {
        field: Some(pending_field(kind)),
        size,
    };
    b.move_due(key.seq, key.sink, -1);
    quarantine(b, &bad.key, &bad.value, &reason, key.ord, counted, now)
}

/// Quarantines an old (format 2) row the migration cannot move: nothing was
/// counted for it yet.
pub(crate) fn quarantine_uncounted(
    b: &mut Batch,
    key: &[u8],
    value: &[u8],
    reason: &str,
    now: u64,
) -> QuarantinedRow {
    let none = Counted {
        field: None,
        size: 0,
    };
    quarantine(b, key, value, reason, 0, none, now)
}

/// Drops a quarantined row for good: its `Q` row, its count, and the
/// delivery row its key names (if any), so reclaim can collect the hook.
pub fn drop_quarantined(b: &mut Batch, row: &QuarantinedRow) {
    b.delete(Family::Index, row.q_key());
    b.count_quarantined(-1);
    if let Some((seq, sink)) = crate::quarantine::delivery_of(&row.key) {
        drop_delivery(b, row.ord, seq, sink, 0);
    }
}

/// `store repair` only: the marker of a due row's second, where it is
/// missing (repair found the row; the marker is what it derives).
pub(crate) fn repair_marker(b: &mut Batch, ord: u32, bucket: u64) {
    b.put(
        Family::Index,
        enc::active(&ActiveKey { bucket, ord }),
        Vec::new(),
    );
}

/// `store repair` only: a counter brought to its fold. A delta on a tenant
/// is mirrored into the node, like every transition's.
pub(crate) fn repair_counter(b: &mut Batch, ord: u32, field: Field, delta: i64) {
    b.count(ord, field, delta);
}

/// `store repair` only: the reclaim marker of a hook nothing owes.
pub(crate) fn repair_cleared(b: &mut Batch, seq: u64) {
    b.put(
        Family::Index,
        enc::seq_key(prefix::CLEARED, seq),
        Vec::new(),
    );
}

/// Boot recovery: every inflight row back to due (kind 0) at `now`, in
/// synced chunks. Returns the number of rows recovered.
pub fn recover_all_inflight(store: &Store, now: u64) -> Result<u64> {
    recover_inflight_except(store, now, &HashSet::new())
}

/// Every inflight row except those in `held` (`(seq, sink)`: the rows
/// whose delivery is in progress in this process) back to due at `now`, in
/// synced chunks. At boot nothing is held; a running dispatcher passes what
/// it delivers, after an outcome it could not record or a store reopen left
/// rows inflight that nobody delivers. Returns the number of rows moved.
pub fn recover_inflight_except(store: &Store, now: u64, held: &HashSet<(u64, u16)>) -> Result<u64> {
    store.require_writable()?;
    let (lo, hi) = bounds::family(prefix::INFLIGHT);
    let mut start = lo;
    let mut total = 0u64;
    loop {
        let mut rows = Vec::new();
        let mut seen = 0usize;
        let mut last = None;
        store.scan(Family::Index, &start, &hi, Dir::Forward, |k, v| {
            let r = InflightRow::decode(k, v)?;
            seen += 1;
            if !held.contains(&(r.seq, r.sink)) {
                rows.push(r);
            }
            last = Some(k.to_vec());
            Ok(if seen >= CHUNK {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        })?;
        let mut b = Batch::new();
        for r in &rows {
            recover_inflight(&mut b, r, now);
        }
        store.commit(b, true)?;
        total += rows.len() as u64;
        match last {
            // Resume strictly after the last key seen: the rows moved are
            // tombstones now, and re-seeking from the start would walk them.
            Some(mut k) if seen >= CHUNK => {
                k.push(0);
                start = k;
            }
            _ => return Ok(total),
        }
    }
}

/// Result of one marker cleanup.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cleanup {
    /// Markers deleted.
    pub deleted: Vec<u64>,
    /// Markers put back because a due row turned up in their second.
    pub restored: Vec<u64>,
    /// The marker of the tenant's first due row, put because it was missing
    /// (a cleanup interrupted between its delete and its verify).
    pub healed: Option<u64>,
}

/// Delete-then-verify cleanup of a tenant's stale active markers, run only by
/// the dispatcher after it claimed from the tenant.
///
/// `scanned` are the buckets of this tenant's markers that the tick saw;
/// `floor` (ms) is a time before which the tenant has no due row (the start
/// of its oldest marker's second), where the search for its first due row
/// starts. A marker is stale when its second is before both the tenant's
/// first due row and the current second. Deleted markers are then verified:
/// any deleted second that holds a due row (a writer committed one
/// concurrently) gets its marker back. Writers only ever put markers, so
/// whichever way a concurrent commit interleaves with the delete, the row
/// keeps a marker.
///
/// The delete and the verify are two writes, and a crash or an error between
/// them can leave a due row without its marker. So the cleanup also puts the
/// marker of the tenant's first due row when it is missing: a tenant the
/// dispatcher visits can lose at most the markers *after* its first row, and
/// each of those rows is the first row when its turn comes. A tenant whose
/// every marker was lost is found at boot by [`repair_markers`].
pub fn cleanup_markers(
    store: &Store,
    ord: u32,
    scanned: &[u64],
    floor: u64,
    now: u64,
) -> Result<Cleanup> {
    let visit = MarkerVisit {
        ord,
        scanned,
        from: crate::queries::DueFrom::At(floor),
    };
    let mut done = cleanup_markers_of(store, std::slice::from_ref(&visit), now)?;
    Ok(done.pop().unwrap_or_default())
}

/// One tenant's part of a cleanup: see [`cleanup_markers`].
#[derive(Debug, Clone, Copy)]
pub struct MarkerVisit<'a> {
    pub ord: u32,
    pub scanned: &'a [u64],
    /// Where the search for the tenant's first due row starts: no due row
    /// of the tenant sorts before it (a row committed there meanwhile gets
    /// its marker back from the verify, like any concurrent writer's).
    pub from: crate::queries::DueFrom,
}

/// [`cleanup_markers`] for the tenants of a whole tick, with their deletes
/// in one commit: a commit per tenant waited for the ingest writer's fsync
/// each time, and with a thousand tenants visited a tick took 80 ms of
/// which most was waiting (issue 19). The verify follows the one delete,
/// as for one tenant. Returns one [`Cleanup`] per visit, in order.
pub fn cleanup_markers_of(
    store: &Store,
    visits: &[MarkerVisit<'_>],
    now: u64,
) -> Result<Vec<Cleanup>> {
    let found = cleanup_delete(store, visits, now)?;
    store.fault("cleanup.after_delete")?;
    let mut out = Vec::with_capacity(visits.len());
    for (v, (deleted, first)) in visits.iter().zip(found) {
        let restored = cleanup_verify(store, v.ord, &deleted)?;
        let healed = match first {
            Some(at) => heal_marker(store, v.ord, bucket_of(at))?,
            None => None,
        };
        out.push(Cleanup {
            deleted,
            restored,
            healed,
        });
    }
    Ok(out)
}

/// Step 1-2 of [`cleanup_markers`]: find and delete the stale markers of
/// every visit, in one commit. Returns, per visit, them and the due time
/// of the tenant's first due row.
pub(crate) fn cleanup_delete(
    store: &Store,
    visits: &[MarkerVisit<'_>],
    now: u64,
) -> Result<Vec<(Vec<u64>, Option<u64>)>> {
    store.require_writable()?;
    store.fault("cleanup.before_delete")?;
    let now_bucket = bucket_of(now);
    let mut b = Batch::new();
    let mut out = Vec::with_capacity(visits.len());
    for v in visits {
        let first = crate::queries::first_due_time(store, v.ord, v.from)?;
        let limit = first.map_or(now_bucket, |at| bucket_of(at).min(now_bucket));
        let mut stale: Vec<u64> = v.scanned.iter().copied().filter(|&b| b < limit).collect();
        stale.sort_unstable();
        stale.dedup();
        for &bucket in &stale {
            b.delete(
                Family::Index,
                enc::active(&ActiveKey { bucket, ord: v.ord }),
            );
        }
        out.push((stale, first));
    }
    if out.iter().any(|(stale, _)| !stale.is_empty()) {
        store.commit(b, false)?;
    }
    Ok(out)
}

/// Whether tenant `ord` has its active marker in second `bucket`.
pub(crate) fn marker_exists(store: &Store, ord: u32, bucket: u64) -> Result<bool> {
    Ok(store
        .get(Family::Index, &enc::active(&ActiveKey { bucket, ord }))?
        .is_some())
}

/// Checks, over due rows read in key order, that each (tenant, second) has
/// its active marker: one point read per second, not per row (a tenant's
/// rows come in time order). Shared by `store check` and `store repair`.
#[derive(Debug, Default)]
pub(crate) struct SecondMarkers {
    last: Option<(u32, u64)>,
}

impl SecondMarkers {
    /// `Some(second)` when `row` is the first of its tenant's second and
    /// that second has no marker.
    pub(crate) fn missing(&mut self, store: &Store, row: &DueRow) -> Result<Option<u64>> {
        let second = (row.ord, bucket_of(row.at));
        if self.last == Some(second) {
            return Ok(None);
        }
        self.last = Some(second);
        Ok((!marker_exists(store, row.ord, second.1)?).then_some(second.1))
    }
}

/// Whether hook `seq` has a reclaim marker (`store repair`).
pub(crate) fn cleared_exists(store: &Store, seq: u64) -> Result<bool> {
    Ok(store
        .get(Family::Index, &enc::seq_key(prefix::CLEARED, seq))?
        .is_some())
}

/// Whether the `x` key of a dead row exists (`store check`'s pairing).
pub(crate) fn dead_exists(store: &Store, k: &DeadKey) -> Result<bool> {
    Ok(store.get(Family::Index, &enc::dead(k))?.is_some())
}

/// Whether the `X` key of a dead row exists (`store check`'s pairing).
pub(crate) fn dead_by_tenant_exists(store: &Store, k: &DeadByTenantKey) -> Result<bool> {
    Ok(store.get(Family::Index, &enc::dead_by_tenant(k))?.is_some())
}

/// Puts the marker of `bucket` for `ord` if it is missing. Returns the
/// bucket when it put one.
fn heal_marker(store: &Store, ord: u32, bucket: u64) -> Result<Option<u64>> {
    if marker_exists(store, ord, bucket)? {
        return Ok(None);
    }
    let mut b = Batch::new();
    b.put(
        Family::Index,
        enc::active(&ActiveKey { bucket, ord }),
        Vec::new(),
    );
    store.commit(b, false)?;
    Ok(Some(bucket))
}

/// Boot-time repair of the active index: every tenant whose counters say it
/// has due rows gets the marker of its first due row back if it lost it (a
/// crash between a cleanup's delete and its verify, or a power loss that
/// kept the delete and not the verify). Costs one counters read per tenant
/// and a seek per tenant with work, never a walk of the rows; together with
/// the cleanup's own heal ([`cleanup_markers`]) every due row is reached.
/// Returns the tenants whose marker it put back. Synced.
///
/// The markers are looked up [`REPAIR_CHUNK`] at a time in one batched
/// read: a point read per tenant, in ordinal order, hit a different table
/// file's filter block on each read, and with a block cache smaller than the
/// store each of those (megabytes, checksummed on every load) was evicted
/// before its next use. On a 10^6-row store of 10^5 tenants with `cache =
/// 64 MiB` boot spent 30 s here (issue 19, measured with `perf`).
pub fn repair_markers(store: &Store) -> Result<Vec<u32>> {
    store.require_writable()?;
    let mut with_work = Vec::new();
    crate::queries::each_tenant_counters(store, |ord, c| {
        if c.queued() > 0 {
            with_work.push(ord);
        }
    })?;
    let mut healed = Vec::new();
    let mut b = Batch::new();
    for chunk in with_work.chunks(REPAIR_CHUNK) {
        let mut firsts = Vec::with_capacity(chunk.len());
        for &ord in chunk {
            if let Some(first) = crate::queries::first_due_at(store, ord, 0)? {
                firsts.push(ActiveKey {
                    bucket: bucket_of(first),
                    ord,
                });
            }
        }
        let keys: Vec<Vec<u8>> = firsts.iter().map(enc::active).collect();
        for ((k, key), found) in firsts
            .iter()
            .zip(&keys)
            .zip(store.multi_get(Family::Index, &keys)?)
        {
            if found.is_none() {
                b.put(Family::Index, key.clone(), Vec::new());
                healed.push(k.ord);
            }
        }
    }
    store.commit(b, true)?;
    Ok(healed)
}

/// Tenants whose markers [`repair_markers`] looks up in one batched read.
pub const REPAIR_CHUNK: usize = 4_096;

/// Step 3 of [`cleanup_markers`]: put back the marker of any deleted second
/// that holds a due row now.
pub(crate) fn cleanup_verify(store: &Store, ord: u32, deleted: &[u64]) -> Result<Vec<u64>> {
    let mut restored = Vec::new();
    for &bucket in deleted {
        let lo = bounds::tenant_at(prefix::DUE, ord, bucket.saturating_mul(1000));
        let hi = bounds::tenant_at(
            prefix::DUE,
            ord,
            bucket.saturating_add(1).saturating_mul(1000),
        );
        let mut any = false;
        store.scan(Family::Index, &lo, &hi, Dir::Forward, |_, _| {
            any = true;
            Ok(ControlFlow::Break(()))
        })?;
        if any {
            restored.push(bucket);
        }
    }
    if !restored.is_empty() {
        let mut b = Batch::new();
        for &bucket in &restored {
            b.put(
                Family::Index,
                enc::active(&ActiveKey { bucket, ord }),
                Vec::new(),
            );
        }
        store.commit(b, false)?;
    }
    Ok(restored)
}

/// Reclaims hooks that no delivery row and no archive obligation owes,
/// looking at up to `limit` cleared markers. Returns hooks deleted.
pub fn reclaim_pass(store: &Store, limit: usize) -> Result<u64> {
    let (reclaimed, still_owed) = reclaim_delete(store, limit)?;
    reclaim_verify(store, &still_owed)?;
    Ok(reclaimed)
}

/// First half of [`reclaim_pass`]: reclaims the hooks nobody owes and
/// deletes the cleared marker of those still owed (a remaining row, or the
/// archive settle, puts a fresh one when it goes). Returns the hooks
/// reclaimed and the seqs whose marker it deleted.
pub(crate) fn reclaim_delete(store: &Store, limit: usize) -> Result<(u64, Vec<u64>)> {
    store.require_writable()?;
    let (lo, hi) = bounds::family(prefix::CLEARED);
    let mut seqs = Vec::new();
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        seqs.push(crate::keys::decode_seq_key(
            k,
            prefix::CLEARED,
            "cleared key",
        )?);
        Ok(if seqs.len() >= limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })?;
    let mut b = Batch::new();
    let mut reclaimed = 0;
    let mut still_owed = Vec::new();
    for seq in seqs {
        if owed(store, seq)? {
            b.delete(Family::Index, enc::seq_key(prefix::CLEARED, seq));
            still_owed.push(seq);
        } else {
            reclaim(&mut b, seq);
            reclaimed += 1;
        }
    }
    store.commit(b, false)?;
    Ok((reclaimed, still_owed))
}

/// Second half of [`reclaim_pass`], delete-then-verify: an owner that
/// released a hook between the read and the delete put its marker *before*
/// the delete, which just erased it. So every hook whose marker was deleted
/// is checked again, and gets its marker back if nothing owes it any more;
/// an owner releasing after this check puts its own.
pub(crate) fn reclaim_verify(store: &Store, deleted: &[u64]) -> Result<Vec<u64>> {
    let mut restore = Batch::new();
    let mut restored = Vec::new();
    for &seq in deleted {
        if !owed(store, seq)? {
            restore.put(
                Family::Index,
                enc::seq_key(prefix::CLEARED, seq),
                Vec::new(),
            );
            restored.push(seq);
        }
    }
    store.commit(restore, false)?;
    Ok(restored)
}

/// Whether a delivery row or an archive obligation still owes hook `seq`.
pub(crate) fn owed(store: &Store, seq: u64) -> Result<bool> {
    let (dlo, dhi) = bounds::deliveries_of(seq);
    let mut owed = false;
    store.scan(Family::Deliveries, &dlo, &dhi, Dir::Forward, |_, _| {
        owed = true;
        Ok(ControlFlow::Break(()))
    })?;
    Ok(owed
        || store
            .get(Family::Index, &enc::seq_key(prefix::ARCHIVE, seq))?
            .is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::StoreError;
    use crate::tenants::TenantAllocator;

    fn ingest_at(store: &Store, alloc: &mut TenantAllocator, tenant: &str, at: u64) -> DueRow {
        let mut b = Batch::new();
        let res = alloc.resolve(store, [tenant], &mut b).unwrap();
        let env = Envelope {
            received_at: at,
            source_id: "s".into(),
            tenant: tenant.into(),
            idempotency_key: None,
            event_type: None,
            headers: vec![],
            body: vec![1],
        };
        let seq = store.next_seq().unwrap();
        let rows = ingest(
            &mut b,
            &IngestHook {
                seq,
                ord: res.ord(tenant, 10).unwrap(),
                envelope: &env,
                sinks: SinkSet::first(1),
                archive: false,
                dedupe_expires_at: None,
            },
        );
        store.commit(b, true).unwrap();
        alloc.committed(res);
        rows[0]
    }

    /// Reclaim's delete-then-verify, driven step by step: the last row of a
    /// hook is delivered after the pass saw it owed but before its marker
    /// delete. Without the verify the hook keeps no marker and is never
    /// reclaimed.
    #[test]
    fn reclaim_does_not_lose_a_hook_released_during_its_pass() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let mut alloc = TenantAllocator::load(&store, 10).unwrap();
        // One hook, two sinks: deliver sink 0 (cleared marker), keep sink 1.
        let mut b = Batch::new();
        let res = alloc.resolve(&store, ["a"], &mut b).unwrap();
        let env = Envelope {
            received_at: 1,
            source_id: "s".into(),
            tenant: "a".into(),
            idempotency_key: None,
            event_type: None,
            headers: vec![],
            body: vec![1],
        };
        let rows = ingest(
            &mut b,
            &IngestHook {
                seq: 1,
                ord: res.ord("a", 10).unwrap(),
                envelope: &env,
                sinks: SinkSet::first(2),
                archive: false,
                dedupe_expires_at: None,
            },
        );
        store.commit(b, true).unwrap();
        alloc.committed(res);
        let mut b = Batch::new();
        let f0 = claim(&mut b, &rows[0]);
        let f1 = claim(&mut b, &rows[1]);
        delivered(&mut b, &f0);
        store.commit(b, false).unwrap();

        // The pass reads the hook as owed (sink 1) and deletes its marker,
        // while sink 1's delivery commits in between (its marker put lands
        // before the pass's delete, modelled by committing it first: the
        // pass's batch was built from the earlier read).
        let mut b = Batch::new();
        delivered(&mut b, &f1);
        let (lo, hi) = bounds::family(prefix::CLEARED);
        let mut seqs = Vec::new();
        store
            .scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
                seqs.push(crate::keys::decode_seq_key(k, prefix::CLEARED, "c").unwrap());
                Ok(ControlFlow::Continue(()))
            })
            .unwrap();
        assert_eq!(seqs, vec![1]);
        assert!(owed(&store, 1).unwrap());
        store.commit(b, false).unwrap();
        let mut del = Batch::new();
        del.delete(Family::Index, enc::seq_key(prefix::CLEARED, 1));
        store.commit(del, false).unwrap();

        assert_eq!(
            reclaim_verify(&store, &[1]).unwrap(),
            vec![1],
            "the marker must come back"
        );
        assert_eq!(
            reclaim_pass(&store, 10).unwrap(),
            1,
            "and the next pass reclaims the hook"
        );
        assert!(crate::queries::hook(&store, 1).unwrap().is_none());
        let rep = crate::check::run(&store, |_, _| {}).unwrap();
        assert!(rep.ok(), "{:#?}", rep.mismatches);
    }

    /// The delete-then-verify argument, driven step by step: a writer's
    /// commit lands between the cleanup's delete and its verify, into two of
    /// the deleted seconds (both behind the tenant's first due row at delete
    /// time). Both markers must come back, not only the earliest.
    #[test]
    fn verify_restores_every_marker_deleted_under_a_concurrent_commit() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let mut alloc = TenantAllocator::load(&store, 10).unwrap();
        let r3 = ingest_at(&store, &mut alloc, "a", 3_000);
        let r5 = ingest_at(&store, &mut alloc, "a", 5_000);
        ingest_at(&store, &mut alloc, "a", 90_000);
        let mut b = Batch::new();
        claim(&mut b, &r3);
        claim(&mut b, &r5);
        store.commit(b, false).unwrap();

        let visit = MarkerVisit {
            ord: r3.ord,
            scanned: &[3, 5],
            from: crate::queries::DueFrom::At(0),
        };
        let (deleted, _) = cleanup_delete(&store, &[visit], 100_000).unwrap().remove(0);
        assert_eq!(deleted, vec![3, 5]);
        ingest_at(&store, &mut alloc, "a", 3_100);
        ingest_at(&store, &mut alloc, "a", 5_100);
        let restored = cleanup_verify(&store, r3.ord, &deleted).unwrap();
        assert_eq!(restored, vec![3, 5]);
        let rep = crate::check::run(&store, |_, _| {}).unwrap();
        assert!(rep.ok(), "{:#?}", rep.mismatches);
    }

    fn has_marker(store: &Store, ord: u32, bucket: u64) -> bool {
        store
            .get(Family::Index, &enc::active(&ActiveKey { bucket, ord }))
            .unwrap()
            .is_some()
    }

    /// What a cleanup stopped between its delete and its verify leaves when
    /// a writer's commit landed between the cleanup's read and its delete: a
    /// due row (second 3) whose marker is gone, the tenant still known by a
    /// later marker (second 90). The next cleanup of the tenant puts it back,
    /// even when it does not look at second 3 at all.
    #[test]
    fn a_cleanup_puts_back_the_missing_marker_of_the_first_due_row() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let mut alloc = TenantAllocator::load(&store, 10).unwrap();
        let r3 = ingest_at(&store, &mut alloc, "a", 3_100);
        ingest_at(&store, &mut alloc, "a", 90_000);
        let mut b = Batch::new();
        b.delete(
            Family::Index,
            enc::active(&ActiveKey {
                bucket: 3,
                ord: r3.ord,
            }),
        );
        store.commit(b, false).unwrap();
        assert!(!crate::check::run(&store, |_, _| {}).unwrap().ok());

        let c = cleanup_markers(&store, r3.ord, &[90], 0, 100_000).unwrap();
        assert_eq!(c.healed, Some(3));
        assert!(has_marker(&store, r3.ord, 3));
        let rep = crate::check::run(&store, |_, _| {}).unwrap();
        assert!(rep.ok(), "{:#?}", rep.mismatches);
    }

    /// A fault between the delete and the verify: the cleanup returns the
    /// error with the delete committed and nothing verified. A tenant whose
    /// every marker is gone is found again by the boot repair, from its
    /// counters, and only it.
    #[test]
    fn the_boot_repair_finds_a_tenant_whose_every_marker_was_lost() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let mut alloc = TenantAllocator::load(&store, 10).unwrap();
        let lost = ingest_at(&store, &mut alloc, "lost", 3_000);
        let kept = ingest_at(&store, &mut alloc, "kept", 4_000);
        // "lost" has a stale marker (second 2) and its row's marker (3);
        // the row's is lost the way a crashed cleanup loses it.
        let mut b = Batch::new();
        b.put(
            Family::Index,
            enc::active(&ActiveKey {
                bucket: 2,
                ord: lost.ord,
            }),
            Vec::new(),
        );
        b.delete(
            Family::Index,
            enc::active(&ActiveKey {
                bucket: 3,
                ord: lost.ord,
            }),
        );
        store.commit(b, false).unwrap();
        store.arm_fault("cleanup.after_delete", Some(crate::faults::Action::Error));
        let err = cleanup_markers(&store, lost.ord, &[2], 0, 100_000).unwrap_err();
        assert!(
            matches!(err, StoreError::Fault("cleanup.after_delete")),
            "{err}"
        );
        assert!(!has_marker(&store, lost.ord, 2), "the delete was committed");
        assert!(!has_marker(&store, lost.ord, 3));

        let healed = repair_markers(&store).unwrap();
        assert_eq!(healed, vec![lost.ord]);
        assert!(has_marker(&store, lost.ord, 3));
        assert!(has_marker(&store, kept.ord, 4));
        assert_eq!(repair_markers(&store).unwrap(), Vec::<u32>::new());
        let rep = crate::check::run(&store, |_, _| {}).unwrap();
        assert!(rep.ok(), "{:#?}", rep.mismatches);
    }

    /// The cleanup's search for the tenant's first due row starts at the
    /// floor the dispatcher knows, so it does not step over the tombstones
    /// of the rows just claimed at the head of the tenant's range (it did,
    /// on every tick, until a compaction).
    #[test]
    fn the_cleanup_skips_no_tombstones_below_its_floor() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let mut alloc = TenantAllocator::load(&store, 10).unwrap();
        let rows: Vec<DueRow> = (0..400u64)
            .map(|i| ingest_at(&store, &mut alloc, "a", 1_000 + i * 100))
            .collect();
        let mut b = Batch::new();
        for r in &rows[..399] {
            claim(&mut b, r);
        }
        store.commit(b, false).unwrap();
        let last = rows[399];
        let floor = bucket_of(last.at) * 1000;
        let second = [bucket_of(last.at)];
        let (done, skipped) = crate::tombstones::skipped_by(|| {
            cleanup_markers(&store, last.ord, &second, floor, 100_000)
        });
        done.unwrap();
        let (done, unbounded) = crate::tombstones::skipped_by(|| {
            cleanup_markers(&store, last.ord, &second, 0, 100_000)
        });
        done.unwrap();
        assert!(
            unbounded >= 300,
            "the unbounded search steps over tombstones ({unbounded})"
        );
        assert!(
            skipped < 20,
            "the floored search stepped over {skipped} tombstones"
        );
    }
}
