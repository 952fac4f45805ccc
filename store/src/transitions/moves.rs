//! The row moves of a delivery's life: ingest writes a hook's due rows,
//! claim makes one in flight, and an attempt's outcome settles it
//! (delivered, retry, dead letter); revive brings a dead row back.
//!
//! Each move deletes the old index key and writes the new one in the same
//! batch, with its counter deltas and, for ingest, delivered, retry and
//! dead letter, the tenant's cumulative totals.

use super::{delete_dead, delete_due, delete_inflight, drop_delivery, enc, put_due};
use crate::batch::Batch;
use crate::counters::{Field, Total};
use crate::keys::{delivery_key, hook_key, meta, prefix, DeadByTenantKey, DeadKey, InflightKey};
use crate::rows::{DeadRow, DueRow, InflightRow};
use crate::schema::Family;
use crate::values::{
    encode_size, ArchiveValue, DeadValue, DedupeValue, DeliveryRow, Envelope, Kind,
};

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

pub(super) fn put_dead(b: &mut Batch, dead: &DeadRow) {
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
