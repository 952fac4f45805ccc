//! Rows waiting per sink: how many due rows (first attempts, retries and
//! parked rows alike) each `(source, sink)` has, so the sinks screen and
//! `ankusa sinks list` answer "how much is queued for this endpoint" with
//! one read, in any mode, on any size of store.
//!
//! A due key names its tenant, hook and sink position but not the hook's
//! source, so the count cannot live beside the tenant's counters. Instead
//! every transition records the due rows it puts and deletes per delivery
//! row in its batch, and [`crate::Store::commit`] turns what does not net
//! to zero into merge operands on the sink's key, reading each hook's
//! source once (none for a hook the batch ingests itself). Invariants:
//! - Once [`meta::WAITING_COUNTED`] is present, every stored count equals
//!   [`fold_waiting`] (`store check` compares them; `store repair`
//!   rebuilds them). Counts are merge operands in the batch of the rows
//!   they count, so concurrent writers lose none.
//! - A store created by this release is counted from its first commit. One
//!   an earlier release wrote (or the format 2 -> 3 migration, which skips
//!   the hook reads) is counted by [`recount_waiting`], which the daemon
//!   runs at boot before anything else writes; until then readers get
//!   `None`, never a wrong number.
//! - A row whose hook cannot be read counts nowhere, in the fold as in the
//!   transitions.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use crate::batch::Batch;
use crate::counters::decode_value;
use crate::error::Result;
use crate::keys::{self, bounds, meta, prefix, DueKey, SINK_COUNTER};
use crate::schema::Family;
use crate::sinks::SinkRef;
use crate::store::{Dir, Store};
use crate::values::Envelope;

/// Rows waiting per sink.
pub type Waiting = BTreeMap<SinkRef, i64>;

/// Whether the counts are complete ([`meta::WAITING_COUNTED`]).
pub fn counted(store: &Store) -> Result<bool> {
    Ok(store.get(Family::Meta, meta::WAITING_COUNTED)?.is_some())
}

/// Rows waiting for each of `sinks`, in order, with one multi-get; `None`
/// when the store has not been counted yet.
pub fn waiting(store: &Store, sinks: &[SinkRef]) -> Result<Option<Vec<i64>>> {
    if !counted(store)? {
        return Ok(None);
    }
    let keys: Vec<Vec<u8>> = sinks
        .iter()
        .map(|s| keys::sink_counter_key(&s.source, s.sink))
        .collect();
    let values = store.multi_get(Family::Counters, &keys)?;
    Ok(Some(
        values
            .iter()
            .map(|v| v.as_deref().and_then(decode_value).unwrap_or(0))
            .collect(),
    ))
}

/// Every stored per-sink count (a sink with no key reads as 0 elsewhere).
/// An undecodable key or value is reported through `bad`.
pub fn stored_waiting(store: &Store, mut bad: impl FnMut(String)) -> Result<Waiting> {
    let lo = SINK_COUNTER.to_vec();
    let hi = vec![0xFF; SINK_COUNTER.len() + 3];
    let mut out = Waiting::new();
    store.scan(Family::Counters, &lo, &hi, Dir::Forward, |k, v| {
        match (keys::decode_sink_counter_key(k), decode_value(v)) {
            (Ok((source, sink)), Some(n)) => {
                out.insert(SinkRef { source, sink }, n);
            }
            (Ok((source, sink)), None) => {
                bad(format!("sink {source}/{sink}: {} bytes, not 8", v.len()))
            }
            (Err(e), _) => bad(e.to_string()),
        }
        Ok(ControlFlow::Continue(()))
    })?;
    Ok(out)
}

/// How much [`fold_waiting_bounded`] holds at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoldBounds {
    /// Due rows resolved per multi-get of their hooks (at least 1).
    pub rows_per_read: usize,
    /// Hooks whose source is remembered between reads (at least
    /// `rows_per_read`, so one read's hooks always fit).
    pub cache: usize,
}

impl FoldBounds {
    /// What `store check`, `store repair` and the boot recount use: 4,096
    /// remembered hooks are about 100 KiB.
    pub const DEFAULT: Self = Self {
        rows_per_read: 1024,
        cache: 4096,
    };
}

/// The counts from the rows: one walk of the due index, each hook's source
/// read once (a hook's due rows are mostly neighbours, and a small cache
/// covers the rest). Memory: the result, bounded by the sinks, and the
/// cache. A due key that does not decode counts nowhere (the quarantine
/// takes it); `store check` reports it on its own.
pub fn fold_waiting(store: &Store) -> Result<Waiting> {
    fold_waiting_bounded(store, FoldBounds::DEFAULT)
}

/// [`fold_waiting`] under other bounds; the result never depends on them
/// (the property tests fold with tiny ones to prove it).
///
/// The cache only saves reads: a full cache is emptied *before* a read's
/// hooks are chosen, so every row of the read finds its hook afterwards.
/// Emptying it after the choice dropped the hooks of rows that had been
/// cached, and those rows counted nowhere: the drift `store check` reported
/// on every store of a few thousand hooks (issue 35) was the fold's, not the
/// stored counts'.
pub fn fold_waiting_bounded(store: &Store, limits: FoldBounds) -> Result<Waiting> {
    let per_read = limits.rows_per_read.max(1);
    let cache_max = limits.cache.max(per_read);
    let (lo, hi) = bounds::family(prefix::DUE);
    let mut out = Waiting::new();
    let mut cache: BTreeMap<u64, Option<String>> = BTreeMap::new();
    let mut rows: Vec<(u64, u16)> = Vec::with_capacity(per_read);
    let flush = |rows: &mut Vec<(u64, u16)>,
                 cache: &mut BTreeMap<u64, Option<String>>,
                 out: &mut Waiting|
     -> Result<()> {
        if cache.len() + rows.len() > cache_max {
            cache.clear();
        }
        let wanted: Vec<u64> = {
            let mut w: Vec<u64> = rows
                .iter()
                .map(|r| r.0)
                .filter(|s| !cache.contains_key(s))
                .collect();
            w.sort_unstable();
            w.dedup();
            w
        };
        if !wanted.is_empty() {
            let hook_keys: Vec<Vec<u8>> =
                wanted.iter().map(|s| keys::hook_key(*s).to_vec()).collect();
            let found = store.multi_get(Family::Hooks, &hook_keys)?;
            for (seq, v) in wanted.into_iter().zip(found) {
                let source = v.and_then(|v| Envelope::decode_source(&v).ok());
                cache.insert(seq, source);
            }
        }
        for (seq, sink) in rows.drain(..) {
            if let Some(Some(source)) = cache.get(&seq) {
                *out.entry(SinkRef::new(source.clone(), sink)).or_insert(0) += 1;
            }
        }
        Ok(())
    };
    let mut err = None;
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        if let Ok(key) = DueKey::decode(k) {
            rows.push((key.seq, key.sink));
        }
        if rows.len() >= per_read {
            if let Err(e) = flush(&mut rows, &mut cache, &mut out) {
                err = Some(e);
                return Ok(ControlFlow::Break(()));
            }
        }
        Ok(ControlFlow::Continue(()))
    })?;
    if let Some(e) = err {
        return Err(e);
    }
    flush(&mut rows, &mut cache, &mut out)?;
    Ok(out)
}

/// Rows of `sink` being delivered: one walk of the in-flight index, which
/// the dispatcher bounds (`[dispatch] max_inflight`), each hook's source
/// read once. With [`waiting`], what a sink is still owed: a reload or a
/// boot lets a sink leave only when both are 0.
pub fn inflight_for(store: &Store, sink: &SinkRef) -> Result<i64> {
    let (lo, hi) = bounds::family(prefix::INFLIGHT);
    let mut seqs = Vec::new();
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        if let Ok(key) = keys::InflightKey::decode(k) {
            if key.sink == sink.sink {
                seqs.push(key.seq);
            }
        }
        Ok(ControlFlow::Continue(()))
    })?;
    seqs.sort_unstable();
    seqs.dedup();
    let mut n = 0;
    for chunk in seqs.chunks(256) {
        let hook_keys: Vec<Vec<u8>> = chunk.iter().map(|s| keys::hook_key(*s).to_vec()).collect();
        for v in store
            .multi_get(Family::Hooks, &hook_keys)?
            .into_iter()
            .flatten()
        {
            if Envelope::decode_source(&v).is_ok_and(|s| s == sink.source) {
                n += 1;
            }
        }
    }
    Ok(n)
}

/// Rows owed to `sink`: due ([`waiting`], or the fold's count on a store not
/// counted yet) and in flight ([`inflight_for`]).
pub fn owed(store: &Store, sink: &SinkRef) -> Result<i64> {
    let due = match waiting(store, std::slice::from_ref(sink))? {
        Some(v) => v.first().copied().unwrap_or(0),
        None => fold_waiting(store)?.get(sink).copied().unwrap_or(0),
    };
    Ok(due + inflight_for(store, sink)?)
}

/// The sinks whose stored count differs from the fold, with both (a
/// missing key reads as 0): what `store check` reports, `store repair`
/// counts and a recount corrects.
pub fn differences(folded: &Waiting, stored: &Waiting) -> Vec<(SinkRef, i64, i64)> {
    let keys: std::collections::BTreeSet<&SinkRef> = folded.keys().chain(stored.keys()).collect();
    keys.into_iter()
        .filter_map(|k| {
            let (s, f) = (
                stored.get(k).copied().unwrap_or(0),
                folded.get(k).copied().unwrap_or(0),
            );
            (s != f).then(|| (k.clone(), s, f))
        })
        .collect()
}

/// What a recount did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recount {
    /// Sinks with rows waiting.
    pub sinks: u64,
    /// Rows waiting, over every sink.
    pub rows: u64,
    /// Stored counts that differed from the fold (and were set to it).
    pub corrected: u64,
}

/// Sets every per-sink count to the fold and marks the store counted, in
/// one synced batch. The fold and the write are two steps: the caller
/// makes sure nothing else writes meanwhile (the daemon at boot, before its
/// writer and dispatcher; `store repair` on a stopped store).
pub fn recount_waiting(store: &Store) -> Result<Recount> {
    store.require_writable()?;
    let folded = fold_waiting(store)?;
    let stored = stored_waiting(store, |_| {})?;
    let mut b = Batch::new();
    let mut report = Recount {
        corrected: differences(&folded, &stored).len() as u64,
        ..Recount::default()
    };
    for (s, n) in &folded {
        report.sinks += 1;
        report.rows += u64::try_from(*n).unwrap_or(0);
        b.put(
            Family::Counters,
            keys::sink_counter_key(&s.source, s.sink),
            n.to_le_bytes().to_vec(),
        );
    }
    // A sink nothing waits for any more reads 0, not a stale count. Put, not
    // delete: nothing merges concurrently here, and a put keeps the key
    // readable as a plain 8-byte value.
    for s in stored.keys() {
        if !folded.contains_key(s) {
            b.put(
                Family::Counters,
                keys::sink_counter_key(&s.source, s.sink),
                0i64.to_le_bytes().to_vec(),
            );
        }
    }
    b.put(Family::Meta, meta::WAITING_COUNTED.to_vec(), Vec::new());
    store.commit(b, true)?;
    Ok(report)
}
