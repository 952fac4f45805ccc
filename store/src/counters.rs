//! Per-tenant counters: six signed 64-bit values per ordinal, ord 0 being
//! the node aggregate, and five cumulative totals ([`Total`]) per ordinal.
//!
//! The six [`Field`]s are levels: each equals a fold of the row families
//! (`store check` compares them, `store repair` rebuilds them). The
//! [`Total`]s count transitions since the ordinal's first one (rows
//! accepted, delivered, retried, dead-lettered; hooks unrouted): no fold can recompute them,
//! so `store check` only checks that they decode, `store repair` never
//! writes them, and the format 2 -> 3 migration starts them at 0. They only
//! ever move up: the only deltas the transitions give them are positive.
//!
//! Invariants:
//! - A counter is only ever changed by a merge operand (a signed delta),
//!   never read-modify-written, so concurrent writers cannot lose a count.
//! - Every delta for a real ordinal is mirrored into ord 0 by
//!   [`CounterDeltas::merge_ops`], the one place that turns deltas into
//!   writes; the node aggregate is therefore always the sum of the tenants.
//! - Deltas commit in the same `WriteBatch` as the row changes they count.
//!
//! Values are 8-byte little-endian two's-complement integers, combined by the
//! [`I64_ADD`] merge operator: bit-for-bit the behaviour of RocksDB's built-in
//! `uint64add` (wrapping 64-bit addition of little-endian fixed64 values), so
//! another binding may open the family with `merge_operator=uint64add`.

use std::collections::BTreeMap;

use rocksdb::MergeOperands;

/// Name the counters family's merge operator is registered under.
pub const I64_ADD: &str = "ankusa.i64add";

/// A counter field; the discriminant is the byte stored in the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Field {
    /// Due rows of kind 0 (first attempt, revival, recovery).
    Pending = 1,
    /// Due rows of kind 1 (retry waiting out its backoff).
    Scheduled = 2,
    /// Rows being delivered.
    Inflight = 3,
    /// Dead rows (the DLQ).
    Dead = 4,
    /// Sum of the sizes of every delivery row that exists.
    Bytes = 5,
    /// Archive obligations not yet settled.
    ArchivePending = 6,
}

impl Field {
    pub const ALL: [Field; 6] = [
        Field::Pending,
        Field::Scheduled,
        Field::Inflight,
        Field::Dead,
        Field::Bytes,
        Field::ArchivePending,
    ];

    pub fn from_u8(b: u8) -> Option<Field> {
        Field::ALL.into_iter().find(|f| *f as u8 == b)
    }

    pub fn name(self) -> &'static str {
        match self {
            Field::Pending => "pending",
            Field::Scheduled => "scheduled",
            Field::Inflight => "inflight",
            Field::Dead => "dead",
            Field::Bytes => "bytes",
            Field::ArchivePending => "archive_pending",
        }
    }

    pub fn parse(s: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.name() == s)
    }
}

/// The six counters of one ordinal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub pending: i64,
    pub scheduled: i64,
    pub inflight: i64,
    pub dead: i64,
    pub bytes: i64,
    pub archive_pending: i64,
}

impl Counters {
    pub fn get(&self, f: Field) -> i64 {
        match f {
            Field::Pending => self.pending,
            Field::Scheduled => self.scheduled,
            Field::Inflight => self.inflight,
            Field::Dead => self.dead,
            Field::Bytes => self.bytes,
            Field::ArchivePending => self.archive_pending,
        }
    }

    pub fn get_mut(&mut self, f: Field) -> &mut i64 {
        match f {
            Field::Pending => &mut self.pending,
            Field::Scheduled => &mut self.scheduled,
            Field::Inflight => &mut self.inflight,
            Field::Dead => &mut self.dead,
            Field::Bytes => &mut self.bytes,
            Field::ArchivePending => &mut self.archive_pending,
        }
    }

    /// Counts one due row of `kind` and `size`, as the transitions count
    /// it (the fold of `store check` and `store repair`).
    pub(crate) fn count_due(&mut self, kind: crate::values::Kind, size: u32) {
        match kind {
            crate::values::Kind::First => self.pending += 1,
            crate::values::Kind::Retry => self.scheduled += 1,
        }
        self.bytes += i64::from(size);
    }

    /// Rows waiting to be delivered (due now or later).
    pub fn queued(&self) -> i64 {
        self.pending + self.scheduled
    }

    pub fn is_zero(&self) -> bool {
        *self == Counters::default()
    }
}

/// The field byte of the node's count of quarantined rows (ord 0 only).
/// Not a [`Field`]: it has no per-tenant value, is no part of a tenant's
/// [`Counters`], and `store check` compares it with the `Q` rows it counts.
pub const QUARANTINED: u8 = 7;

/// A cumulative total: the number of transitions of one kind an ordinal
/// has seen. The discriminant is the field byte stored in the key, after
/// [`QUARANTINED`]. Not a [`Field`]: a total is not a fold of the rows, and
/// the code that compares or rebuilds counters from a fold iterates
/// [`Field::ALL`] only, so it cannot touch a total.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Total {
    /// Delivery rows ingested (one per hook and sink).
    Accepted = 8,
    /// Rows a sink accepted.
    Delivered = 9,
    /// Failed attempts scheduled for another one.
    Retried = 10,
    /// Rows moved to the DLQ.
    DeadLettered = 11,
    /// Hooks accepted that owed no sink a row: their event type matched no
    /// sink's `events` (or every sink of the source is retired). Counted
    /// in hooks, the others in rows.
    Unrouted = 12,
}

impl Total {
    pub const ALL: [Total; 5] = [
        Total::Accepted,
        Total::Delivered,
        Total::Retried,
        Total::DeadLettered,
        Total::Unrouted,
    ];

    pub fn from_u8(b: u8) -> Option<Total> {
        Total::ALL.into_iter().find(|t| *t as u8 == b)
    }

    pub fn name(self) -> &'static str {
        match self {
            Total::Accepted => "accepted",
            Total::Delivered => "delivered",
            Total::Retried => "retried",
            Total::DeadLettered => "dead_lettered",
            Total::Unrouted => "unrouted",
        }
    }
}

/// The cumulative totals of one ordinal. A stored value that is
/// negative (only a damaged store holds one) reads as 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub accepted: u64,
    pub delivered: u64,
    pub retried: u64,
    pub dead_lettered: u64,
    pub unrouted: u64,
}

impl Totals {
    pub fn get(&self, t: Total) -> u64 {
        match t {
            Total::Accepted => self.accepted,
            Total::Delivered => self.delivered,
            Total::Retried => self.retried,
            Total::DeadLettered => self.dead_lettered,
            Total::Unrouted => self.unrouted,
        }
    }

    pub fn get_mut(&mut self, t: Total) -> &mut u64 {
        match t {
            Total::Accepted => &mut self.accepted,
            Total::Delivered => &mut self.delivered,
            Total::Retried => &mut self.retried,
            Total::DeadLettered => &mut self.dead_lettered,
            Total::Unrouted => &mut self.unrouted,
        }
    }

    /// A stored value as a total (negative: 0).
    pub(crate) fn set_stored(&mut self, t: Total, v: i64) {
        *self.get_mut(t) = u64::try_from(v).unwrap_or(0);
    }
}

/// Deltas accumulated by the transitions of one batch, coalesced per
/// (ordinal, field). Only [`CounterDeltas::merge_ops`] turns them into writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CounterDeltas {
    deltas: BTreeMap<(u32, Field), i64>,
    /// Increments of the cumulative totals: unsigned, so a total can only
    /// move up.
    totals: BTreeMap<(u32, Total), u64>,
    /// Change of the node's quarantined-row count ([`QUARANTINED`]).
    quarantined: i64,
    /// Due rows put (+1) and deleted (-1) per delivery row `(seq, sink)`:
    /// the rows waiting per sink. A row's sink is named by its hook's
    /// source, which no due key holds, so [`crate::Store::commit`] resolves
    /// what does not net to zero (a park moves a row without changing any
    /// count) through [`CounterDeltas::sink_ops`].
    due_moves: BTreeMap<(u64, u16), i64>,
    /// Sources of the hooks this batch ingests, so their rows resolve
    /// without a read.
    sources: BTreeMap<u64, String>,
}

impl CounterDeltas {
    pub fn add(&mut self, ord: u32, field: Field, delta: i64) {
        if delta == 0 {
            return;
        }
        let e = self.deltas.entry((ord, field)).or_insert(0);
        *e = e.wrapping_add(delta);
        if *e == 0 {
            self.deltas.remove(&(ord, field));
        }
    }

    /// Counts `n` transitions of kind `t` for `ord`.
    pub fn add_total(&mut self, ord: u32, t: Total, n: u64) {
        if n == 0 {
            return;
        }
        let e = self.totals.entry((ord, t)).or_insert(0);
        *e = e.saturating_add(n);
    }

    /// This batch's increment of `ord`'s total `t` (before mirroring).
    pub fn total(&self, ord: u32, t: Total) -> u64 {
        self.totals.get(&(ord, t)).copied().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.deltas.is_empty()
            && self.totals.is_empty()
            && self.quarantined == 0
            && self.due_moves.is_empty()
    }

    /// A due row of delivery row `(seq, sink)` put (`+1`) or deleted (`-1`).
    pub(crate) fn add_due_move(&mut self, seq: u64, sink: u16, delta: i64) {
        let e = self.due_moves.entry((seq, sink)).or_insert(0);
        *e = e.wrapping_add(delta);
        if *e == 0 {
            self.due_moves.remove(&(seq, sink));
        }
    }

    /// Hook `seq`, written by this batch, came through `source`.
    pub(crate) fn note_source(&mut self, seq: u64, source: &str) {
        self.sources.insert(seq, source.to_owned());
    }

    /// This batch's net change of the rows waiting per `(source, sink)`,
    /// each hook's source read once through `source_of` unless the batch
    /// ingests it. A hook `source_of` cannot name (gone, or undecodable)
    /// counts nowhere, as in the fold ([`crate::sinks::fold_waiting`]).
    pub(crate) fn sink_deltas(
        &self,
        mut source_of: impl FnMut(u64) -> crate::error::Result<Option<String>>,
    ) -> crate::error::Result<BTreeMap<(String, u16), i64>> {
        let mut out: BTreeMap<(String, u16), i64> = BTreeMap::new();
        let mut last: Option<(u64, Option<String>)> = None;
        for (&(seq, sink), &delta) in &self.due_moves {
            let source = match (&last, self.sources.get(&seq)) {
                (_, Some(s)) => Some(s.clone()),
                (Some((s, src)), None) if *s == seq => src.clone(),
                (_, None) => {
                    let src = source_of(seq)?;
                    last = Some((seq, src.clone()));
                    src
                }
            };
            if let Some(source) = source {
                let e = out.entry((source, sink)).or_insert(0);
                *e = e.wrapping_add(delta);
            }
        }
        out.retain(|_, d| *d != 0);
        Ok(out)
    }

    pub fn add_quarantined(&mut self, delta: i64) {
        self.quarantined = self.quarantined.wrapping_add(delta);
    }

    pub fn quarantined(&self) -> i64 {
        self.quarantined
    }

    pub fn iter(&self) -> impl Iterator<Item = ((u32, Field), i64)> + '_ {
        self.deltas.iter().map(|(k, v)| (*k, *v))
    }

    pub fn absorb(&mut self, other: &CounterDeltas) {
        for ((ord, f), d) in other.iter() {
            self.add(ord, f, d);
        }
        for (&(ord, t), &n) in &other.totals {
            self.add_total(ord, t, n);
        }
        self.add_quarantined(other.quarantined);
        for (&(seq, sink), &d) in &other.due_moves {
            self.add_due_move(seq, sink, d);
        }
        for (seq, source) in &other.sources {
            self.note_source(*seq, source);
        }
    }

    /// The merge operands to write: one per (ordinal, field) with a non-zero
    /// delta, plus the node aggregate (ord 0) per field; likewise for the
    /// totals. A total's increment is written as a positive i64 (an
    /// increment above `i64::MAX` is clamped: no batch comes near it).
    pub fn merge_ops(&self) -> Vec<([u8; 5], [u8; 8])> {
        let mut node: BTreeMap<Field, i64> = BTreeMap::new();
        let mut node_totals: BTreeMap<Total, u64> = BTreeMap::new();
        let mut out = Vec::with_capacity(self.deltas.len() + self.totals.len() + 10);
        for (&(ord, field), &delta) in &self.deltas {
            if ord != 0 {
                let e = node.entry(field).or_insert(0);
                *e = e.wrapping_add(delta);
            }
            out.push((
                crate::keys::counter_key(ord, field as u8),
                delta.to_le_bytes(),
            ));
        }
        for (field, delta) in node {
            if delta != 0 {
                out.push((
                    crate::keys::counter_key(0, field as u8),
                    delta.to_le_bytes(),
                ));
            }
        }
        for (&(ord, t), &n) in &self.totals {
            if ord != 0 {
                let e = node_totals.entry(t).or_insert(0);
                *e = e.saturating_add(n);
            }
            out.push((crate::keys::counter_key(ord, t as u8), total_operand(n)));
        }
        for (t, n) in node_totals {
            out.push((crate::keys::counter_key(0, t as u8), total_operand(n)));
        }
        if self.quarantined != 0 {
            out.push((
                crate::keys::counter_key(0, QUARANTINED),
                self.quarantined.to_le_bytes(),
            ));
        }
        out
    }
}

fn total_operand(n: u64) -> [u8; 8] {
    i64::try_from(n).unwrap_or(i64::MAX).to_le_bytes()
}

/// Decodes a stored counter value. A value of the wrong width counts as 0,
/// as RocksDB's `uint64add` does, rather than failing every read of a
/// tenant; `store check` reports such a value.
pub fn decode_value(b: &[u8]) -> Option<i64> {
    <[u8; 8]>::try_from(b).ok().map(i64::from_le_bytes)
}

/// The merge operator. Must never panic and never return `None` (either
/// would take the database down), so malformed operands count as 0.
pub fn i64_add(_key: &[u8], existing: Option<&[u8]>, operands: &MergeOperands) -> Option<Vec<u8>> {
    let mut acc = existing.and_then(decode_value).unwrap_or(0);
    for op in operands {
        acc = acc.wrapping_add(decode_value(op).unwrap_or(0));
    }
    Some(acc.to_le_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_coalesce_and_mirror_into_node() {
        let mut d = CounterDeltas::default();
        d.add(3, Field::Pending, 2);
        d.add(3, Field::Pending, -1);
        d.add(4, Field::Pending, 5);
        d.add(4, Field::Bytes, 10);
        d.add(4, Field::Bytes, -10);
        let ops = d.merge_ops();
        let find = |ord: u32, f: Field| {
            ops.iter()
                .find(|(k, _)| *k == crate::keys::counter_key(ord, f as u8))
                .map(|(_, v)| i64::from_le_bytes(*v))
        };
        assert_eq!(find(3, Field::Pending), Some(1));
        assert_eq!(find(4, Field::Pending), Some(5));
        assert_eq!(find(0, Field::Pending), Some(6));
        assert_eq!(find(4, Field::Bytes), None, "zero deltas are not written");
        assert_eq!(ops.len(), 3);
    }

    #[test]
    fn totals_mirror_into_node_and_only_count_up() {
        let mut d = CounterDeltas::default();
        d.add_total(3, Total::Delivered, 2);
        d.add_total(4, Total::Delivered, 1);
        d.add_total(4, Total::Accepted, 0);
        let mut other = CounterDeltas::default();
        other.add_total(3, Total::Delivered, 5);
        d.absorb(&other);
        assert_eq!(d.total(3, Total::Delivered), 7);
        let ops = d.merge_ops();
        let find = |ord: u32, t: Total| {
            ops.iter()
                .find(|(k, _)| *k == crate::keys::counter_key(ord, t as u8))
                .map(|(_, v)| i64::from_le_bytes(*v))
        };
        assert_eq!(find(3, Total::Delivered), Some(7));
        assert_eq!(find(4, Total::Delivered), Some(1));
        assert_eq!(find(0, Total::Delivered), Some(8));
        assert_eq!(
            find(4, Total::Accepted),
            None,
            "nothing counted, nothing written"
        );
        assert!(ops.iter().all(|(_, v)| i64::from_le_bytes(*v) > 0));
        assert_eq!(ops.len(), 3);
    }

    #[test]
    fn total_fields_follow_the_quarantine_count_and_meet_no_field() {
        for t in Total::ALL {
            assert!(t as u8 > QUARANTINED);
            assert_eq!(Field::from_u8(t as u8), None);
            assert_eq!(Total::from_u8(t as u8), Some(t));
        }
        assert_eq!(Total::from_u8(QUARANTINED), None);
    }

    #[test]
    fn field_names_round_trip() {
        for f in Field::ALL {
            assert_eq!(Field::parse(f.name()), Some(f));
            assert_eq!(Field::from_u8(f as u8), Some(f));
        }
        assert_eq!(Field::from_u8(0), None);
    }
}
