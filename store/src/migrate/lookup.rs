//! The migration's lookup of the old hooks' tenants and delivery rows, read
//! once in key order and kept on the store handle, so a step's rows (random
//! in seq) cost a memory lookup each rather than a random block read; it
//! answers exactly as the per-row reads it replaces.

use super::{DEAD_BEFORE_UPGRADE, INVALID};
use crate::batch::Batch;
use crate::error::Result;
use crate::keys;
use crate::schema::Family;
use crate::store::{Dir, Store};
use crate::tenants::{validate_id, DEFAULT_TENANT};
use crate::values::{v2, Attempt, DeliveryRow, Envelope};
use std::collections::HashMap;
use std::ops::ControlFlow;

/// What a step needs from the hooks and deliveries families, read once in
/// key order.
///
/// Rows come due in time order, which is random by seq: looking their hooks
/// and delivery rows up per step costs a random block read per row, and the
/// share of those that miss the block cache grows with the store, so the
/// time per row grew with the store. Two sequential scans before the first
/// step cost the same per row at any size (about 30 bytes of memory per
/// row). It is a cache that answers exactly as the reads it replaces:
/// - hooks never change, and a seq it does not hold is read from the store;
/// - nothing but the migration writes while it runs, and a delivery row it
///   has rewritten (format 3) reads as absent, as a format 2 decode of the
///   rewritten row would: a step marks the rows it consumed once its batch
///   is durable, and a row it does not hold is read from the store.
pub(crate) struct Lookup {
    /// Interned tenant ids; `tenants[0]` is `default`.
    tenants: Vec<String>,
    interned: HashMap<String, u32>,
    /// One entry per hook, ascending by seq, and where a seq falls.
    hooks: Vec<HookEntry>,
    hook_index: SeqIndex,
    /// Format 2 delivery rows of those hooks in key order: hook `i`'s are
    /// `deliveries[hooks[i].first..hooks[i + 1].first]` (the last hook's run
    /// to the end). Empty when read for the archive phase, which needs none.
    deliveries: Vec<OldDelivery>,
    /// Delivery rows not held here that a step rewrote: read again, they
    /// would not decode as format 2, and the write may not be durable yet
    /// when a pipelined run builds the next step.
    consumed_outside: std::collections::HashSet<(u64, u16)>,
}

/// A delivery row a step rewrites: one held by the lookup, or one read from
/// the store.
#[derive(Debug, Clone, Copy)]
pub(super) enum Consumed {
    Row(usize),
    Outside(u64, u16),
}

/// A hook's seq, tenant and first delivery row, side by side: a lookup
/// touches one cache line for all three.
#[derive(Debug, Clone, Copy)]
pub(super) struct HookEntry {
    seq: u64,
    tenant: u32,
    first: u32,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct OldDelivery {
    size: u32,
    sink: u16,
    attempts: u16,
    consumed: bool,
}

impl Lookup {
    pub(super) fn empty() -> Self {
        Self {
            tenants: vec![DEFAULT_TENANT.to_owned()],
            interned: HashMap::new(),
            hooks: Vec::new(),
            hook_index: SeqIndex::new(&[]),
            deliveries: Vec::new(),
            consumed_outside: Default::default(),
        }
    }

    pub(super) fn read(store: &Store, with_deliveries: bool) -> Result<Self> {
        let mut l = Self::empty();
        let mut hooks = Vec::new();
        store.scan(Family::Hooks, &[], &[0xFF; 9], Dir::Forward, |k, v| {
            if let Ok(seq) = keys::decode_hook_key(k) {
                let tenant = l.intern(v);
                hooks.push(HookEntry {
                    seq,
                    tenant,
                    first: 0,
                });
            }
            Ok(ControlFlow::Continue(()))
        })?;
        if with_deliveries {
            // Both scans are in seq order: walk the hooks alongside. A row
            // whose hook is gone is left out, and read from the store if a
            // step asks for it.
            let mut h = 0usize;
            let mut deliveries = Vec::new();
            store.scan(
                Family::Deliveries,
                &[],
                &[0xFF; 11],
                Dir::Forward,
                |k, v| {
                    // Rows an interrupted run already rewrote are format 3 and
                    // do not decode as format 2: no step asks for them.
                    let (Ok((seq, sink)), Ok((size, attempts))) =
                        (keys::decode_delivery_key(k), v2::decode_delivery(v))
                    else {
                        return Ok(ControlFlow::Continue(()));
                    };
                    while hooks.get(h).is_some_and(|e: &HookEntry| e.seq < seq) {
                        h += 1;
                        if let Some(e) = hooks.get_mut(h) {
                            e.first = u32::try_from(deliveries.len()).unwrap_or(u32::MAX);
                        }
                    }
                    if hooks.get(h).is_some_and(|e| e.seq == seq) {
                        deliveries.push(OldDelivery {
                            size,
                            sink,
                            attempts,
                            consumed: false,
                        });
                    }
                    Ok(ControlFlow::Continue(()))
                },
            )?;
            // Hooks after the last delivery row start at the end.
            let end = u32::try_from(deliveries.len()).unwrap_or(u32::MAX);
            for e in hooks.iter_mut().skip(h + 1) {
                e.first = end;
            }
            deliveries.shrink_to_fit();
            l.deliveries = deliveries;
        }
        hooks.shrink_to_fit();
        let seqs: Vec<u64> = hooks.iter().map(|e| e.seq).collect();
        l.hook_index = SeqIndex::new(&seqs);
        l.hooks = hooks;
        Ok(l)
    }

    /// The interned tenant of a hook's envelope: `default` (0) for one with
    /// no tenant, [`INVALID`] for one that does not decode or whose tenant id
    /// ingest would refuse.
    pub(super) fn intern(&mut self, envelope: &[u8]) -> u32 {
        let Ok(name) = Envelope::decode_tenant(envelope) else {
            return INVALID;
        };
        if let Some(&i) = self.interned.get(&name) {
            return i;
        }
        let i = if name.is_empty() {
            0
        } else if validate_id(&name).is_ok() {
            self.tenants.push(name.clone());
            u32::try_from(self.tenants.len() - 1).unwrap_or(INVALID)
        } else {
            INVALID
        };
        self.interned.insert(name, i);
        i
    }

    /// Index of a hook's entry.
    fn hook(&self, seq: u64) -> Option<usize> {
        let r = self.hook_index.find(&self.hooks, |e| e.seq, seq);
        (!r.is_empty()).then_some(r.start)
    }

    /// The interned tenant a hook's rows file under; a hook that is gone
    /// files them under `default`.
    pub(super) fn tenant(&mut self, store: &Store, seq: u64) -> Result<u32> {
        if let Some(e) = self.hook(seq).and_then(|i| self.hooks.get(i)) {
            return Ok(e.tenant);
        }
        Ok(match store.get(Family::Hooks, &keys::hook_key(seq))? {
            Some(v) => self.intern(&v),
            None => 0,
        })
    }

    pub(super) fn tenant_name(&self, t: u32) -> &str {
        self.tenants
            .get(t as usize)
            .map_or(DEFAULT_TENANT, String::as_str)
    }

    /// The old delivery row's (size, attempts), or `None` if it is gone,
    /// does not decode, or was consumed by an earlier step. Rows found here
    /// are pushed to `consumed`.
    pub(super) fn delivery(
        &self,
        store: &Store,
        seq: u64,
        sink: u16,
        consumed: &mut Vec<Consumed>,
    ) -> Result<Option<(u32, u16)>> {
        let found = self.hook(seq).and_then(|i| {
            let from = self.hooks.get(i)?.first as usize;
            let to = self
                .hooks
                .get(i + 1)
                .map_or(self.deliveries.len(), |e| e.first as usize);
            let p = self
                .deliveries
                .get(from..to)?
                .iter()
                .position(|d| d.sink == sink)?;
            Some(from + p)
        });
        if let Some(d) = found.and_then(|i| self.deliveries.get(i).map(|d| (i, d))) {
            consumed.push(Consumed::Row(d.0));
            return Ok((!d.1.consumed).then_some((d.1.size, d.1.attempts)));
        }
        consumed.push(Consumed::Outside(seq, sink));
        if self.consumed_outside.contains(&(seq, sink)) {
            return Ok(None);
        }
        Ok(store
            .get(Family::Deliveries, &keys::delivery_key(seq, sink))?
            .and_then(|b| v2::decode_delivery(&b).ok()))
    }

    /// Marks delivery rows a durable step rewrote.
    pub(super) fn consumed(&mut self, rows: &[Consumed]) {
        for c in rows {
            match *c {
                Consumed::Row(i) => {
                    if let Some(d) = self.deliveries.get_mut(i) {
                        d.consumed = true;
                    }
                }
                Consumed::Outside(seq, sink) => {
                    self.consumed_outside.insert((seq, sink));
                }
            }
        }
    }
}

/// Finds the entries of a seq in an ascending list of seqs in constant time
/// for the usual (dense) seqs: the seq range is cut into at most as many
/// buckets as there are entries, and each bucket records where its first
/// entry is, so a lookup searches one bucket.
pub(super) struct SeqIndex {
    base: u64,
    shift: u32,
    /// `starts[b]`: index of the first entry in bucket `b` or later;
    /// one more element than there are buckets.
    pub(super) starts: Vec<u32>,
}

impl SeqIndex {
    pub(super) fn new(seqs: &[u64]) -> Self {
        let (Some(&first), Some(&last)) = (seqs.first(), seqs.last()) else {
            return Self {
                base: 0,
                shift: 0,
                starts: vec![0],
            };
        };
        let n = seqs.len() as u64;
        let span = last - first;
        let mut shift = 0u32;
        while (span >> shift) >= n && shift < 63 {
            shift += 1;
        }
        let buckets = usize::try_from((span >> shift) + 1).unwrap_or(usize::MAX);
        let mut starts = Vec::with_capacity(buckets + 1);
        for (i, s) in seqs.iter().enumerate() {
            let b = usize::try_from((s - first) >> shift).unwrap_or(usize::MAX);
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            while starts.len() <= b {
                starts.push(i);
            }
        }
        starts.push(u32::try_from(seqs.len()).unwrap_or(u32::MAX));
        Self {
            base: first,
            shift,
            starts,
        }
    }

    /// The index range of `seq`'s entries in `items`, ascending by `key`
    /// (empty if none).
    pub(super) fn find<T>(
        &self,
        items: &[T],
        key: impl Fn(&T) -> u64,
        seq: u64,
    ) -> std::ops::Range<usize> {
        let Some(off) = seq.checked_sub(self.base) else {
            return 0..0;
        };
        let b = usize::try_from(off >> self.shift).unwrap_or(usize::MAX);
        let (Some(&lo), Some(&hi)) = (self.starts.get(b), self.starts.get(b.saturating_add(1)))
        else {
            return 0..0;
        };
        let (lo, hi) = (lo as usize, hi as usize);
        let Some(bucket) = items.get(lo..hi) else {
            return 0..0;
        };
        let from = bucket.partition_point(|s| key(s) < seq);
        let to = bucket.partition_point(|s| key(s) <= seq);
        lo + from..lo + to
    }
}

/// The history of a format 2 delivery row (empty when it is gone or does
/// not decode as format 2).
pub(super) fn old_history(store: &Store, seq: u64, sink: u16) -> Result<Vec<Attempt>> {
    Ok(store
        .get(Family::Deliveries, &keys::delivery_key(seq, sink))?
        .and_then(|b| v2::decode_delivery_full(&b).ok())
        .map(|(_, _, h)| h)
        .unwrap_or_default())
}

/// What the old release's delivery row becomes. A dead row is found from its
/// delivery row by the time of the last attempt (the dead-letter time), so a
/// dead row whose history does not end at its dead-letter time (the old
/// release kept none, or fewer) gets a note at that time: without it the DLQ
/// detail and a replay by id could not find the row.
#[allow(clippy::too_many_arguments)]
pub(super) fn put_delivery(
    b: &mut Batch,
    seq: u64,
    sink: u16,
    ord: u32,
    size: u32,
    old: Option<(u32, u16)>,
    history: Vec<Attempt>,
    dead_at: Option<u64>,
) {
    let mut row = DeliveryRow::new(ord, size);
    row.attempts = old.map_or(0, |o| o.1);
    let keep = history.len().saturating_sub(DeliveryRow::HISTORY);
    row.history = history.into_iter().skip(keep).collect();
    if let Some(at) = dead_at {
        if row.last().map(|a| a.at) != Some(at) {
            row.note(at, 0, DEAD_BEFORE_UPGRADE);
        }
    }
    b.put(
        Family::Deliveries,
        keys::delivery_key(seq, sink).to_vec(),
        row.encode(),
    );
}
