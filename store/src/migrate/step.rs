//! The migration's steps: [`Migration`] builds a step (old rows read from
//! the cursor, their format 3 replacements, counter deltas and ordinals in
//! one batch), writes it synced, and `run` pipelines building the next
//! step with writing this one, strictly in order.

use super::{old_history, plan, put_delivery, Consumed, Cursor, Lookup, Phase, STEP_ROWS};
use crate::batch::Batch;
use crate::error::{DecodeError, Result, StoreError};
use crate::keys::{self, bounds, meta, prefix, DeadKey, V2DueKey, V2InflightKey};
use crate::rows::DeadRow;
use crate::schema::{Family, FORMAT};
use crate::store::{Dir, Store};
use crate::tenants::{Resolution, TenantAllocator};
use crate::transitions;
use crate::values::{decode_size, ArchiveValue, Attempt, DeadValue, Kind};
use std::collections::HashMap;
use std::ops::ControlFlow;

/// A running migration: the cursor and the single ordinal allocator.
pub struct Migration<'a> {
    store: &'a Store,
    cursor: Cursor,
    alloc: TenantAllocator,
    /// Tenants past `tenants.max` (logged; the migration completes anyway).
    pub over_limit: u32,
    max: u32,
    /// The tenant resolution of the step being built, applied to the
    /// allocator only after the step's batch is durable.
    pending: Option<Resolution>,
    step_rows: usize,
    /// Set when a pipelined run failed and the state it had built ahead
    /// could not be reloaded from the store: the migration must be started
    /// again.
    stale: bool,
}

/// A step built but not yet written.
struct Prepared {
    batch: Batch,
    next: Cursor,
    res: Option<Resolution>,
    consumed: Vec<Consumed>,
    moved: usize,
}

/// What a migration keeps on its store handle between steps, so a caller
/// that starts a [`Migration`] per step (the console) reads the lookup once
/// too.
#[derive(Default)]
pub(crate) struct HandleState {
    /// The hooks' tenants and the old delivery rows (see [`Lookup`]).
    lookup: Option<Lookup>,
    /// Whether the migration's family options are applied on this handle.
    tuned: bool,
}

/// What [`Migration::step`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepOutcome {
    /// Moved this many rows; more to do.
    Moved(usize),
    /// The store is format 3 now.
    Finished,
}

impl<'a> Migration<'a> {
    /// Starts (or resumes) the migration of a store opened with
    /// [`Store::open_any_format`]. `now` is the start time used to classify
    /// due rows as first attempts or retries; a resumed migration keeps the
    /// original start time. `tenants_max` is only used to report overage.
    pub fn start(store: &'a Store, now: u64, tenants_max: u32) -> Result<Self> {
        store.require_writable()?;
        let p = plan(store)?;
        let cursor = match p.resume {
            Some(c) => c,
            None => {
                let c = Cursor {
                    phase: Phase::Due,
                    started_at: now,
                    done: [0; 4],
                    total: p.rows,
                    last_key: Vec::new(),
                };
                // Record the start before moving anything, so the totals and
                // the start time survive an interruption in the first step.
                let mut b = Batch::new();
                b.put(Family::Meta, meta::MIGRATING_3.to_vec(), c.encode());
                store.commit(b, true)?;
                c
            }
        };
        set_tuning(store, cursor.phase == Phase::Due)?;
        Ok(Self {
            store,
            cursor,
            alloc: TenantAllocator::load(store, u32::MAX - 1)?,
            over_limit: 0,
            max: tenants_max,
            pending: None,
            step_rows: STEP_ROWS,
            stale: false,
        })
    }

    /// Smaller steps (tests that interrupt between every pair of steps).
    pub fn with_step_rows(mut self, n: usize) -> Self {
        self.step_rows = n.max(1);
        self
    }

    pub fn cursor(&self) -> &Cursor {
        &self.cursor
    }

    /// Runs one step: at most [`STEP_ROWS`] rows, one synced write.
    pub fn step(&mut self) -> Result<StepOutcome> {
        self.check_stale()?;
        if self.cursor.phase == Phase::Finish {
            self.finish()?;
            return Ok(StepOutcome::Finished);
        }
        let taken = with_state(self.store, |st| st.lookup.take());
        let mut lookup = match taken {
            Some(l) => l,
            None => Lookup::read(self.store, self.cursor.phase < Phase::Archive)?,
        };
        let out = self.step_with(&mut lookup);
        // Kept even after a failed step: the lookup only learns what a step
        // consumed once its batch is durable.
        with_state(self.store, |st| st.lookup = Some(lookup));
        out
    }

    fn step_with(&mut self, lookup: &mut Lookup) -> Result<StepOutcome> {
        let p = self.prepare(lookup)?;
        self.store.commit(p.batch, true)?;
        let moved = p.moved;
        self.learn(p.res, &p.consumed, p.next, lookup)?;
        Ok(StepOutcome::Moved(moved))
    }

    /// Builds the next step from `self.cursor`: its batch (operations in
    /// key order, cursor included) and what it will have done once durable.
    fn prepare(&mut self, lookup: &mut Lookup) -> Result<Prepared> {
        let phase = self.cursor.phase;
        let (lo, hi) = bounds::family(phase.prefix());
        let start = if self.cursor.last_key.is_empty() {
            lo
        } else {
            let mut k = self.cursor.last_key.clone();
            k.push(0);
            k
        };
        let mut rows: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        self.store
            .scan(Family::Index, &start, &hi, Dir::Forward, |k, v| {
                rows.push((k.to_vec(), v.to_vec()));
                Ok(if rows.len() >= self.step_rows {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                })
            })?;
        let mut next = self.cursor.clone();
        let moved = rows.len();
        let mut b = Batch::new();
        b.sinks_uncounted = true;
        let mut consumed = Vec::new();
        if moved == 0 {
            next.phase = phase.next();
            next.last_key.clear();
        } else {
            consumed = self.move_rows(phase, &rows, lookup, &mut b)?;
            next.done[phase.index()] += moved as u64;
            if let (Some((first, _)), Some((last, _))) = (rows.first(), rows.last()) {
                if matches!(phase, Phase::Due | Phase::Inflight) {
                    // The moved `d`/`f` keys are exactly the keys from the
                    // first to the last one read (the scan read every key in
                    // between, and nothing else writes): one range tombstone
                    // removes them, as a point delete per key would, at the
                    // cost of one memtable insert instead of one per row.
                    let mut end = last.clone();
                    end.push(0);
                    b.delete_range(Family::Index, first.clone(), end);
                }
                next.last_key = last.clone();
            }
        }
        b.put(Family::Meta, meta::MIGRATING_3.to_vec(), next.encode());
        // move_rows resolved tenants into `b`; the allocator learns them in
        // `learn`: after the write in `step`, before the next step is built
        // in `run` (which writes a step that allocates before building on).
        let res = self.pending.take();
        // Memtable inserts in key order reuse the skiplist's last insert
        // position instead of searching from the top for every key. A stable
        // sort keeps the order of operations on one key, and a step's
        // operations on different keys commute (its one range delete covers
        // old keys only, which no other operation of the step writes).
        b.ops.sort_by(|x, y| (x.fam, &x.key).cmp(&(y.fam, &y.key)));
        Ok(Prepared {
            batch: b,
            next,
            res,
            consumed,
            moved,
        })
    }

    /// Takes in what a step did: its new ordinals, the delivery rows it
    /// consumed, its cursor (and, past the due phase, the usual options).
    fn learn(
        &mut self,
        res: Option<Resolution>,
        consumed: &[Consumed],
        next: Cursor,
        lookup: &mut Lookup,
    ) -> Result<()> {
        if let Some(res) = res {
            self.alloc.committed(res);
        }
        lookup.consumed(consumed);
        if next.phase != self.cursor.phase {
            // The due phase is done: the compaction it deferred runs in the
            // background while the other phases move their rows.
            set_tuning(self.store, next.phase == Phase::Due)?;
        }
        self.cursor = next;
        Ok(())
    }

    /// Runs steps until finished, calling `progress` after each durable one.
    ///
    /// Pipelined: while one step's batch is written and synced on a second
    /// thread, the next step is built from the state the first will leave.
    /// Writes stay one synced batch per step, in order, each started only
    /// once the previous one is durable, so what an interruption leaves is
    /// what [`Migration::step`] would leave. Building ahead means learning a
    /// step's ordinals and consumed rows before it is durable; if a write
    /// fails, that state is thrown away and reloaded from the store.
    pub fn run(&mut self, mut progress: impl FnMut(&Cursor)) -> Result<()> {
        self.check_stale()?;
        let out = self.run_pipelined(&mut progress);
        if out.is_err() {
            self.reload();
        }
        out
    }

    fn run_pipelined(&mut self, progress: &mut impl FnMut(&Cursor)) -> Result<()> {
        let store = self.store;
        let mut lookup = match with_state(store, |st| st.lookup.take()) {
            Some(l) => l,
            None if self.cursor.phase == Phase::Finish => Lookup::empty(),
            None => Lookup::read(store, self.cursor.phase < Phase::Archive)?,
        };
        std::thread::scope(|scope| -> Result<()> {
            // The write in flight and the cursor it makes durable.
            let mut writing: Option<(std::thread::ScopedJoinHandle<'_, Result<()>>, Cursor)> = None;
            loop {
                if self.cursor.phase == Phase::Finish {
                    if let Some((w, c)) = writing.take() {
                        join(w)?;
                        progress(&c);
                    }
                    // Free the lookup (about 30 bytes a row) before the
                    // finish waits for its compaction and `store check` runs.
                    drop(std::mem::replace(&mut lookup, Lookup::empty()));
                    self.finish()?;
                    progress(&self.cursor);
                    return Ok(());
                }
                let p = self.prepare(&mut lookup)?;
                // A step that allocates ordinals is written before the next
                // is built: the allocator may look a tenant up in the store
                // (its cache is bounded), and must find those rows there.
                let allocates = p.res.as_ref().is_some_and(|r| !r.fresh().is_empty());
                self.learn(p.res, &p.consumed, p.next, &mut lookup)?;
                if let Some((w, c)) = writing.take() {
                    join(w)?;
                    progress(&c);
                }
                let batch = p.batch;
                let w = scope.spawn(move || store.commit(batch, true));
                if allocates {
                    join(w)?;
                    progress(&self.cursor);
                } else {
                    writing = Some((w, self.cursor.clone()));
                }
            }
        })
    }

    /// After a failed pipelined run: the cursor, ordinals and lookup it had
    /// learned ahead may describe writes that never happened, so they are
    /// read again from the store.
    fn reload(&mut self) {
        with_state(self.store, |st| st.lookup = None);
        self.pending = None;
        let cursor = match self.store.get(Family::Meta, meta::MIGRATING_3) {
            Ok(Some(b)) => Cursor::decode(&b).ok(),
            _ => None,
        };
        let alloc = TenantAllocator::load(self.store, u32::MAX - 1).ok();
        match (cursor, alloc) {
            (Some(c), Some(a)) => {
                self.cursor = c;
                self.alloc = a;
            }
            _ => self.stale = true,
        }
    }

    fn check_stale(&self) -> Result<()> {
        if self.stale {
            return Err(StoreError::MigrationInProgress {
                path: self.store.path().to_path_buf(),
                target: FORMAT,
            });
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        let mut b = Batch::new();
        let (lo, hi) = bounds::family(prefix::V2_DUE);
        b.delete_range(Family::Index, lo, hi);
        let (lo, hi) = bounds::family(prefix::V2_INFLIGHT);
        b.delete_range(Family::Index, lo, hi);
        b.put(
            Family::Meta,
            meta::FORMAT.to_vec(),
            FORMAT.to_be_bytes().to_vec(),
        );
        b.delete(Family::Meta, meta::MIGRATING_3.to_vec());
        self.store.commit(b, true)?;
        // Format 3 now: drop the lookup, and wait for the compaction the
        // migration deferred, so its cost is part of the migration's.
        with_state(self.store, |st| st.lookup = None);
        set_tuning(self.store, false)?;
        self.store.wait_for_compactions()?;
        let allocated = self.alloc_next().saturating_sub(1);
        if allocated > self.max {
            self.over_limit = allocated - self.max;
            tracing::warn!(
                tenants = allocated,
                max = self.max,
                "the store holds more tenants than tenants.max; existing tenants are kept, new ones will be refused"
            );
        }
        Ok(())
    }

    fn alloc_next(&self) -> u32 {
        self.store.next_ord().unwrap_or(1)
    }
}

impl Migration<'_> {
    /// Builds a step's operations into `b`; returns the lookup's delivery
    /// rows it consumed, to be marked once the batch is durable.
    fn move_rows(
        &mut self,
        phase: Phase,
        rows: &[(Vec<u8>, Vec<u8>)],
        lookup: &mut Lookup,
        b: &mut Batch,
    ) -> Result<Vec<Consumed>> {
        // (seq, sink) per row, in order; `None` for a key that does not
        // decode (quarantined below, never a reason to stop the migration).
        let mut parsed: Vec<Option<(u64, u16)>> = Vec::with_capacity(rows.len());
        for (k, _) in rows {
            let key = match phase {
                Phase::Due => V2DueKey::decode(k).map(|d| (d.seq, d.sink)),
                Phase::Inflight => V2InflightKey::decode(k).map(|f| (f.seq, f.sink)),
                Phase::Dead => DeadKey::decode(k).map(|x| (x.seq, x.sink)),
                Phase::Archive | Phase::Finish => {
                    keys::decode_seq_key(k, prefix::ARCHIVE, "archive key").map(|seq| (seq, 0))
                }
            };
            parsed.push(key.ok());
        }
        // Each row's interned tenant, and the distinct tenants in first-sight
        // order (= key order), which is the order ordinals are allocated in.
        let row_tenant = parsed
            .iter()
            .map(|p| match p {
                Some((seq, _)) => lookup.tenant(self.store, *seq),
                None => Ok(INVALID),
            })
            .collect::<Result<Vec<u32>>>()?;
        let mut slot_of: HashMap<u32, usize> = HashMap::new();
        let mut distinct: Vec<u32> = Vec::new();
        for t in row_tenant.iter().filter(|t| **t != INVALID) {
            slot_of.entry(*t).or_insert_with(|| {
                distinct.push(*t);
                distinct.len() - 1
            });
        }
        let res = self.alloc.resolve(
            self.store,
            distinct.iter().map(|t| lookup.tenant_name(*t)),
            b,
        )?;
        let mut consumed = Vec::new();
        let ords = distinct
            .iter()
            .map(|t| res.ord(lookup.tenant_name(*t), u32::MAX - 1))
            .collect::<Result<Vec<u32>>>()?;
        let now = self.cursor.started_at;
        for (((k, v), parsed), t) in rows.iter().zip(&parsed).zip(&row_tenant) {
            let Some((seq, sink)) = parsed else {
                transitions::quarantine_uncounted(
                    b,
                    k,
                    v,
                    &format!("{} key does not decode", phase.name()),
                    now,
                );
                continue;
            };
            let (seq, sink) = (*seq, *sink);
            let old = if phase == Phase::Archive {
                None
            } else {
                lookup.delivery(self.store, seq, sink, &mut consumed)?
            };
            // The lookup keeps no history (it would cost the history's bytes
            // per row); a row that was attempted reads its own.
            let history = match old {
                Some((_, attempts)) if attempts > 0 => old_history(self.store, seq, sink)?,
                _ => Vec::new(),
            };
            // A row that cannot be filed under its tenant, or whose value does
            // not decode, is quarantined (a row filed under `default` would
            // be visible to a token scoped to `default`). Its delivery row is
            // kept, rewritten, for the operator.
            let moved = if *t == INVALID {
                Err("the hook's envelope is unreadable or names an invalid tenant id".to_owned())
            } else {
                let ord = slot_of
                    .get(t)
                    .and_then(|i| ords.get(*i))
                    .copied()
                    .ok_or(StoreError::TenantLimit { max: u32::MAX - 1 })?;
                self.move_row(phase, k, v, (seq, sink), ord, old, history.clone(), b)
                    .map_err(|e| e.to_string())
            };
            if let Err(reason) = moved {
                transitions::quarantine_uncounted(b, k, v, &reason, now);
                if phase != Phase::Archive {
                    let size = old.map_or(0, |o| o.0);
                    put_delivery(b, seq, sink, 0, size, old, history, None);
                }
            }
        }
        self.pending = Some(res);
        Ok(consumed)
    }
}

impl Migration<'_> {
    /// One old row's format 3 replacement, or the decode error that sends it
    /// to the quarantine instead (nothing is added to `b` then).
    #[allow(clippy::too_many_arguments)]
    fn move_row(
        &self,
        phase: Phase,
        k: &[u8],
        v: &[u8],
        (seq, sink): (u64, u16),
        ord: u32,
        old: Option<(u32, u16)>,
        history: Vec<Attempt>,
        b: &mut Batch,
    ) -> std::result::Result<(), DecodeError> {
        match phase {
            Phase::Due => {
                let key = V2DueKey::decode(k)?;
                let size = decode_size(v)?;
                let kind = if key.at > self.cursor.started_at {
                    Kind::Retry
                } else {
                    Kind::First
                };
                put_delivery(b, seq, sink, ord, size, old, history, None);
                transitions::migrate_due(b, ord, key.at, seq, sink, size, kind);
            }
            Phase::Inflight => {
                let size = decode_size(v)?;
                put_delivery(b, seq, sink, ord, size, old, history, None);
                transitions::migrate_inflight(b, ord, seq, sink, size);
            }
            Phase::Dead => {
                let key = DeadKey::decode(k)?;
                let (source_id, hook_id) = DeadValue::decode_v2(v)?;
                let size = old.map_or(0, |o| o.0);
                put_delivery(b, seq, sink, ord, size, old, history, Some(key.at));
                let dead = DeadRow {
                    ord,
                    at: key.at,
                    seq: key.seq,
                    sink: key.sink,
                    source_id,
                    hook_id,
                    event_type: None,
                };
                transitions::migrate_dead(b, &dead, size);
            }
            Phase::Archive | Phase::Finish => {
                let size = decode_size(v)?;
                transitions::migrate_archive(b, seq, &ArchiveValue { size, ord });
            }
        }
        Ok(())
    }
}

/// The interned tenant of a hook that cannot be filed under any tenant: its
/// envelope does not decode, or names a tenant id ingest would refuse.
pub(super) const INVALID: u32 = u32::MAX;

/// Applies the migration's family options ([`crate::schema::migration_options`])
/// while the due phase runs (`on`), and lifts them otherwise; a no-op when
/// they already are as asked.
fn set_tuning(store: &Store, on: bool) -> Result<()> {
    with_state(store, |st| {
        if st.tuned != on {
            store.set_migration_options(on)?;
            st.tuned = on;
        }
        Ok(())
    })
}

/// Waits for a step's write; a panic in it is a bug and stays a panic.
fn join(w: std::thread::ScopedJoinHandle<'_, Result<()>>) -> Result<()> {
    match w.join() {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Runs `f` on this handle's [`HandleState`], made on first use. The store
/// keeps it opaque (the handle sits below the migration built on it); a
/// slot holding anything else is replaced by a fresh state, which costs only
/// a re-read of the lookup.
fn with_state<R>(store: &Store, f: impl FnOnce(&mut HandleState) -> R) -> R {
    // The state is a cache and a flag: a panic elsewhere cannot leave it
    // half-updated in a way that matters.
    let mut slot = store
        .migration
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !slot.as_ref().is_some_and(|b| b.is::<HandleState>()) {
        *slot = Some(Box::new(HandleState::default()));
    }
    match slot.as_mut().and_then(|b| b.downcast_mut::<HandleState>()) {
        Some(st) => f(st),
        // Unreachable after the line above; a fresh state is still right.
        None => f(&mut HandleState::default()),
    }
}
