//! The format 2 → 3 migration.
//!
//! A migration is a sequence of *steps*. A step reads at most [`STEP_ROWS`]
//! old rows from where the previous step stopped, and returns one batch
//! holding their format 3 replacements, the counter deltas that seed the
//! per-tenant counters, any new tenant ordinals, and the new cursor. The
//! batch commits in one synced write, so a migration killed at any point
//! (Ctrl-C, `kill -9`, power loss) resumes from its last cursor with nothing
//! counted twice.
//!
//! Invariants:
//! - The cursor (`m:migrating:3`) records the phase and the last old key
//!   moved; a step seeks to just after it, never to the family's start (the
//!   moved keys are tombstones, and re-walking them would make the migration
//!   quadratic).
//! - New prefixes (`D`, `F`, `X`, `A`) never collide with old ones (`d`,
//!   `f`), so a half-migrated range never holds two layouts under one prefix.
//!   `x` and `a` keep their keys and get new values in place; the cursor says
//!   which side of it is new.
//! - Ordinals are allocated once, in first-sight order, by the migration's
//!   single allocator; past `tenants.max` the migration still completes (the
//!   cap refuses new tenants at ingest; it never strands existing rows).
//! - The format stamp changes in the same write as the last step.
//! - [`Migration::run`] builds the next step while the previous one is
//!   written on a second thread, but writes strictly in order, each only
//!   after the previous is durable, so an interruption leaves exactly what
//!   [`Migration::step`] would. A step that allocates ordinals is written
//!   before the next is built; a failed write discards what was built ahead
//!   and reloads the cursor and the allocator from the store.
//! - A step deletes the old `d`/`f` keys it moved with one range delete from
//!   the first to the last key it read: the scan read every key in between
//!   and nothing else writes, so the old family after each step is what
//!   point deletes would leave.
//! - The hooks' tenants and the old delivery rows are read once, in key
//!   order, into a lookup kept on the store handle (see `Lookup`); it
//!   answers exactly as the per-row reads it replaces, which keeps rows
//!   random in seq from costing a random block read each.
//! - A step's operations are written in key order (a stable sort: operations
//!   on one key keep their order), which changes nothing but the cost of the
//!   memtable inserts.
//! - During the due phase, and on the migration's handle only, the index
//!   and deliveries families do not compact automatically and use small
//!   memtables ([`crate::schema::migration_options`]); the finish waits for
//!   the deferred compaction, so the migration's time includes it.
//!
//! Phases: 1 due (`d`), 2 inflight (`f`), 3 dead (`x`), 4 archive (`a`),
//! 5 finish (delete what is left of the old `d` and `f` ranges, stamp 3).

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::Path;

use serde::Serialize;

use crate::batch::Batch;
use crate::codec::{put_bytes16, Reader};
use crate::error::{DecodeError, Result, StoreError};
use crate::keys::{self, bounds, meta, prefix, DeadKey, V2DueKey, V2InflightKey};
use crate::rows::DeadRow;
use crate::schema::{Family, FORMAT, FORMAT_V2};
use crate::store::{probe, Dir, Store};
use crate::tenants::{validate_id, Resolution, TenantAllocator, DEFAULT_TENANT};
use crate::transitions;
use crate::values::{
    decode_size, v2, ArchiveValue, Attempt, DeadValue, DeliveryRow, Envelope, Kind,
};

/// Old rows per step (one synced write each). Each step waits for one
/// fsync of the write-ahead log (about 2 MB at this size), which on a busy
/// disk costs milliseconds: at 10^6 rows 16,384 measured 15-25% faster than
/// 4,096, and 65,536 no faster than 16,384.
pub const STEP_ROWS: usize = 16384;

/// The history note of a dead row whose last attempt the old release did
/// not keep.
pub const DEAD_BEFORE_UPGRADE: &str =
    "dead-lettered before the upgrade to format 3 (the old release kept no detail of this attempt)";

/// The one-line description `--dry-run` prints.
pub const DESCRIPTION: &str =
    "2 -> 3: re-key due/inflight/dead by tenant ordinal, seed per-tenant counters";

/// A migration phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Due = 1,
    Inflight = 2,
    Dead = 3,
    Archive = 4,
    Finish = 5,
}

impl Phase {
    pub const ROWS: [Phase; 4] = [Phase::Due, Phase::Inflight, Phase::Dead, Phase::Archive];

    fn from_u8(b: u8) -> Result<Phase, DecodeError> {
        match b {
            1 => Ok(Phase::Due),
            2 => Ok(Phase::Inflight),
            3 => Ok(Phase::Dead),
            4 => Ok(Phase::Archive),
            5 => Ok(Phase::Finish),
            o => Err(DecodeError::new(
                "migration cursor",
                format!("unknown phase {o}"),
            )),
        }
    }

    fn next(self) -> Phase {
        match self {
            Phase::Due => Phase::Inflight,
            Phase::Inflight => Phase::Dead,
            Phase::Dead => Phase::Archive,
            Phase::Archive | Phase::Finish => Phase::Finish,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Phase::Due => "due",
            Phase::Inflight => "inflight",
            Phase::Dead => "dead",
            Phase::Archive => "archive",
            Phase::Finish => "finish",
        }
    }

    fn prefix(self) -> u8 {
        match self {
            Phase::Due => prefix::V2_DUE,
            Phase::Inflight => prefix::V2_INFLIGHT,
            Phase::Dead => prefix::DEAD,
            Phase::Archive => prefix::ARCHIVE,
            Phase::Finish => prefix::V2_DUE,
        }
    }

    fn index(self) -> usize {
        (self as usize).saturating_sub(1).min(3)
    }
}

/// Where a migration stands; stored at `m:migrating:3`.
///
/// Layout: `1:u8 phase:u8 started_at:u64 done:u64×4 total:u64×4
/// last_key:bytes16` (an empty `last_key` means "from the phase's start").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cursor {
    pub phase: Phase,
    /// When the migration started (ms): due rows later than this become
    /// retries (kind 1), earlier ones first attempts.
    pub started_at: u64,
    /// Rows moved per phase (due, inflight, dead, archive).
    pub done: [u64; 4],
    /// Rows counted per phase when the migration started.
    pub total: [u64; 4],
    #[serde(skip)]
    pub last_key: Vec<u8>,
}

impl Cursor {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(80 + self.last_key.len());
        out.push(1);
        out.push(self.phase as u8);
        out.extend_from_slice(&self.started_at.to_be_bytes());
        for v in self.done.iter().chain(self.total.iter()) {
            out.extend_from_slice(&v.to_be_bytes());
        }
        put_bytes16(&mut out, &self.last_key);
        out
    }

    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(b, "migration cursor");
        r.expect_u8(1)?;
        let phase = Phase::from_u8(r.u8()?)?;
        let started_at = r.u64()?;
        let mut done = [0u64; 4];
        let mut total = [0u64; 4];
        for d in &mut done {
            *d = r.u64()?;
        }
        for t in &mut total {
            *t = r.u64()?;
        }
        let last_key = r.bytes16()?.to_vec();
        r.finish()?;
        Ok(Self {
            phase,
            started_at,
            done,
            total,
            last_key,
        })
    }

    pub fn rows_done(&self) -> u64 {
        self.done.iter().sum()
    }

    pub fn rows_total(&self) -> u64 {
        self.total.iter().sum()
    }
}

/// What a migration would do, counted exactly (a key scan, no values).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub from: u32,
    pub to: u32,
    pub description: &'static str,
    /// Rows per phase: due, inflight, dead, archive.
    pub rows: [u64; 4],
    /// Set when a previous run was interrupted: where it stands.
    pub resume: Option<Cursor>,
}

/// The state of a store with respect to this migration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Status {
    /// Format 2, not started.
    Needed,
    /// Started and interrupted (or running elsewhere).
    InProgress { cursor: Cursor },
    /// Already format 3.
    Done,
}

/// Reads a store's migration status without taking its lock.
pub fn status(path: &Path) -> Result<Status> {
    let p = probe(path)?;
    if let Some(c) = p.cursor {
        return Ok(Status::InProgress {
            cursor: Cursor::decode(&c)?,
        });
    }
    match p.format {
        Some(f) if f == FORMAT_V2 => Ok(Status::Needed),
        Some(f) if f == FORMAT => Ok(Status::Done),
        Some(f) if f > FORMAT => Err(StoreError::FormatNewer {
            path: path.to_path_buf(),
            found: f,
            supported: FORMAT,
        }),
        _ => Err(StoreError::Unstamped {
            path: path.to_path_buf(),
        }),
    }
}

fn count_prefix(store: &Store, p: u8) -> Result<u64> {
    let (lo, hi) = bounds::family(p);
    let mut n = 0u64;
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |_, _| {
        n += 1;
        Ok(ControlFlow::Continue(()))
    })?;
    Ok(n)
}

/// Counts what the migration will move. `store` is opened with
/// [`Store::open_any_format`].
pub fn plan(store: &Store) -> Result<Plan> {
    let resume = match store.get(Family::Meta, meta::MIGRATING_3)? {
        Some(b) => Some(Cursor::decode(&b)?),
        None => None,
    };
    let format = store.format()?;
    if resume.is_none() && format != Some(FORMAT_V2) {
        return Err(match format {
            Some(f) if f > FORMAT => StoreError::FormatNewer {
                path: store.path().to_path_buf(),
                found: f,
                supported: FORMAT,
            },
            Some(_) => StoreError::NothingToMigrate {
                path: store.path().to_path_buf(),
            },
            None => StoreError::Unstamped {
                path: store.path().to_path_buf(),
            },
        });
    }
    let rows = match &resume {
        // After the due and inflight phases the old prefixes shrink, so the
        // totals recorded at the start are the ones to report.
        Some(c) => c.total,
        None => [
            count_prefix(store, prefix::V2_DUE)?,
            count_prefix(store, prefix::V2_INFLIGHT)?,
            count_prefix(store, prefix::DEAD)?,
            count_prefix(store, prefix::ARCHIVE)?,
        ],
    };
    Ok(Plan {
        from: FORMAT_V2,
        to: FORMAT,
        description: DESCRIPTION,
        rows,
        resume,
    })
}

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
const INVALID: u32 = u32::MAX;

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
enum Consumed {
    Row(usize),
    Outside(u64, u16),
}

/// A hook's seq, tenant and first delivery row, side by side: a lookup
/// touches one cache line for all three.
#[derive(Debug, Clone, Copy)]
struct HookEntry {
    seq: u64,
    tenant: u32,
    first: u32,
}

#[derive(Debug, Clone, Copy)]
struct OldDelivery {
    size: u32,
    sink: u16,
    attempts: u16,
    consumed: bool,
}

impl Lookup {
    fn empty() -> Self {
        Self {
            tenants: vec![DEFAULT_TENANT.to_owned()],
            interned: HashMap::new(),
            hooks: Vec::new(),
            hook_index: SeqIndex::new(&[]),
            deliveries: Vec::new(),
            consumed_outside: Default::default(),
        }
    }

    fn read(store: &Store, with_deliveries: bool) -> Result<Self> {
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
    fn intern(&mut self, envelope: &[u8]) -> u32 {
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
    fn tenant(&mut self, store: &Store, seq: u64) -> Result<u32> {
        if let Some(e) = self.hook(seq).and_then(|i| self.hooks.get(i)) {
            return Ok(e.tenant);
        }
        Ok(match store.get(Family::Hooks, &keys::hook_key(seq))? {
            Some(v) => self.intern(&v),
            None => 0,
        })
    }

    fn tenant_name(&self, t: u32) -> &str {
        self.tenants
            .get(t as usize)
            .map_or(DEFAULT_TENANT, String::as_str)
    }

    /// The old delivery row's (size, attempts), or `None` if it is gone,
    /// does not decode, or was consumed by an earlier step. Rows found here
    /// are pushed to `consumed`.
    fn delivery(
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
    fn consumed(&mut self, rows: &[Consumed]) {
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
struct SeqIndex {
    base: u64,
    shift: u32,
    /// `starts[b]`: index of the first entry in bucket `b` or later;
    /// one more element than there are buckets.
    starts: Vec<u32>,
}

impl SeqIndex {
    fn new(seqs: &[u64]) -> Self {
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
    fn find<T>(&self, items: &[T], key: impl Fn(&T) -> u64, seq: u64) -> std::ops::Range<usize> {
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
fn old_history(store: &Store, seq: u64, sink: u16) -> Result<Vec<Attempt>> {
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
fn put_delivery(
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

#[cfg(test)]
mod tests;
