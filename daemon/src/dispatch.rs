//! The dispatcher: the tick loop that turns due rows into deliveries, and
//! the reclaim task.
//!
//! Each tick ([`plan_tick`] then [`Dispatcher::claim`]):
//! 1. the [`ActiveSet`], refreshed by a walk of the recent seconds of the
//!    active index (the whole index every [`RESYNC_MS`]): the tenants with a
//!    marker at or before now, oldest first, at most `scan_tenants`, quiet
//!    ones left out (nothing changed for them; see `ActiveSet::wake`);
//! 2. their head rows (from the oldest marker or the skip point, up to now),
//!    at most `scan_rows` each and never more than the tenant's remaining
//!    room, read in the scheduler's order until as many tenants have a row
//!    ready as the tick may claim rows (`Scheduler::standing`);
//! 3. the fair scheduler (`ankusa-fairness`) picks how many head rows to
//!    take from whom under the tick's row limit (also bounded by the global
//!    room) and byte budget;
//! 4. all chosen rows go due -> inflight in **one** commit;
//! 5. stale markers of every visited tenant are cleaned (delete-then-verify,
//!    `transitions::cleanup_markers`), so a tenant whose work is all in the
//!    future stops occupying the scan window;
//! 6. each claimed row is delivered on its own task.
//!
//! Steps 2 to 4 keep the bounds: the global `max_inflight` and bytes, the
//! per-tenant cap, and `per_sink` ([`super::sink_room`]): a row of a sink
//! at its bound is not claimed (it would hold a node slot while waiting for
//! the sink); the visit walks past it to the tenant's rows for other sinks
//! and remembers where the run of such rows ends ([`Skip`]).
//!
//! A half-open circuit breaker ([`super::breaker`]) gets one parked row of
//! its sink claimed in step 4's commit, its probe: the dispatcher stays the
//! only claimer, and the probe counts inflight like any row.
//!
//! Invariants:
//! - The dispatcher is the only task that claims rows and the only one that
//!   deletes active markers. Rows it claimed are counted in [`Inflight`]
//!   until their outcome is committed (or recording it failed), which is
//!   what the per-tenant cap and the global bound are measured against.
//! - A tick's store work is bounded by what it may claim: `scan_tenants`
//!   tenants and `scan_rows` rows each, plus their markers; no fold of the
//!   backlog or of idle tenants. Between resyncs, it reads the tenants
//!   written to since the last tick, those a sink's room grants a walk, and
//!   in tag order only as many more as the free room can use.
//! - Outcomes are committed by the recorder ([`super::recorder`]), in
//!   groups; a row leaves [`Inflight`] after its group's commit returned.
//! - Shutdown stops claiming first; deliveries in flight get
//!   `drain_timeout` to finish, and any row still inflight after that is
//!   returned to due by the next boot (at least once, never lost).
//! - The scheduler groups tenants by nothing (group 0): the source of a
//!   tenant's head row would need a hook read per tenant per tick.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_fairness::{Config, HeadRow, Limits, RowKind, Scheduler, TenantHead};
use ankusa_store::pauses::Paused;
use ankusa_store::quarantine::Undecodable;
use ankusa_store::queries::DueFrom;
use ankusa_store::transitions::UnparkCursor;
use ankusa_store::{queries, transitions, Batch, DueRow, InflightRow, Kind, Store, StoreError};
use std::ops::ControlFlow;
use tokio::sync::{watch, Notify};

use super::breaker;
pub use super::config::DispatchSettings;
use super::delivery::{Deliverer, Ended};
use super::error::DaemonError;
use super::metrics::Metrics;
use super::recorder::Recorder;
pub use super::sink_room::{SinkKey, SinkMap, SinkRoom};
use super::{Settings, SharedClock};

/// Rows this process has claimed and not yet recorded, per tenant.
#[derive(Debug, Default)]
pub struct Inflight {
    by_tenant: Mutex<HashMap<u32, u32>>,
    /// Rows in flight per sink: what `per_sink` bounds at claim time.
    by_sink: Mutex<HashMap<SinkKey, u32>>,
    /// `(seq, sink)` of every row whose delivery is in progress here, with
    /// the sink it counts against.
    rows: Mutex<HashMap<(u64, u16), Option<SinkKey>>>,
    total: AtomicU64,
    /// Body bytes of the rows in flight: what `max_inflight_bytes` bounds.
    bytes: AtomicU64,
    idle: Notify,
}

/// A lock of the in-flight maps, past a poisoning: a panic elsewhere while
/// one was held left counts that are still the best there are, and an empty
/// map would lift every per-tenant and per-sink cap at once.
fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Inflight {
    fn add(&self, row: &InflightRow, sink: Option<SinkKey>) {
        *locked(&self.by_tenant).entry(row.ord).or_insert(0) += 1;
        if let Some(k) = sink {
            *locked(&self.by_sink).entry(k).or_insert(0) += 1;
        }
        locked(&self.rows).insert((row.seq, row.sink), sink);
        self.bytes.fetch_add(u64::from(row.size), Ordering::SeqCst);
        self.total.fetch_add(1, Ordering::SeqCst);
    }

    fn done(&self, row: &InflightRow) {
        let ord = row.ord;
        let sink = locked(&self.rows).remove(&(row.seq, row.sink)).flatten();
        if let Some(k) = sink {
            let mut m = locked(&self.by_sink);
            if let Some(c) = m.get_mut(&k) {
                *c = c.saturating_sub(1);
                if *c == 0 {
                    m.remove(&k);
                }
            }
        }
        {
            let mut m = locked(&self.by_tenant);
            if let Some(c) = m.get_mut(&ord) {
                *c = c.saturating_sub(1);
                if *c == 0 {
                    m.remove(&ord);
                }
            }
        }
        self.bytes.fetch_sub(u64::from(row.size), Ordering::SeqCst);
        if self.total.fetch_sub(1, Ordering::SeqCst) <= 1 {
            self.idle.notify_waiters();
        }
    }

    pub fn total(&self) -> u64 {
        self.total.load(Ordering::SeqCst)
    }

    /// Body bytes of the rows in flight.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::SeqCst)
    }

    fn snapshot(&self) -> HashMap<u32, u32> {
        locked(&self.by_tenant).clone()
    }

    fn sinks(&self) -> HashMap<SinkKey, u32> {
        locked(&self.by_sink).clone()
    }

    /// The rows being delivered now.
    fn held(&self) -> HashSet<(u64, u16)> {
        locked(&self.rows).keys().copied().collect()
    }

    async fn wait_idle(&self) {
        loop {
            let n = self.idle.notified();
            if self.total() == 0 {
                return;
            }
            n.await;
        }
    }
}

/// What one tick decided: the rows to claim per tenant and the markers
/// seen per tenant (for the cleanup).
#[derive(Debug, Default)]
pub struct TickPlan {
    pub visited: usize,
    /// Per tenant, the rows to claim and the sink each counts against.
    pub claims: Vec<Vec<(DueRow, Option<SinkKey>)>>,
    /// Per tenant whose head up to a row is claimed by `claims`, that row
    /// (`ActiveSet::cleared`, once the claim is committed).
    pub cleared: Vec<(u32, (u64, u64, u16))>,
    pub markers: Vec<Visit>,
    /// Due rows met that do not decode: the claim quarantines them.
    pub bad: Vec<Undecodable>,
    /// Due rows of a paused sink: the claim parks them.
    pub park: Vec<DueRow>,
}

/// One visited tenant, as its marker cleanup needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visit {
    pub ord: u32,
    /// The start (ms) of the second the set knew the tenant by: nothing of
    /// its is due before it.
    pub floor: u64,
    /// Where the cleanup's search for its first due row starts: the
    /// visit's start, or after the rows the tick claims from it.
    pub from: DueFrom,
    /// Marker seconds seen since the last visit (cleanup candidates).
    pub seconds: Vec<u64>,
}

impl TickPlan {
    pub fn rows(&self) -> usize {
        self.claims.iter().map(Vec::len).sum()
    }
}

/// Seconds behind the last walk's "now" that the next walk reads again
/// while the store records no due writes (the dispatcher's watch was
/// lost): a marker committed late (a slow group commit) for a second the
/// walk had already passed is still seen. While it records them, the walk
/// starts at the last walk's second and the record brings such a tenant in. Every tick walks this many seconds of every
/// tenant's markers, and a tenant with rows waiting in each second (a slow
/// sink's) keeps a marker in each: at 60 s and 1,000 such tenants a tick
/// read 60,000 markers and took 110 ms, so deliveries waited for ticks
/// (issue 19). A commit is late by its fsync, milliseconds; a row committed
/// later than this (a stalled disk) brings its tenant in through the store's
/// record of due writes ([`ActiveSet::wake`]), and the full walk
/// ([`RESYNC_MS`]) is the backstop.
pub const WINDOW_SLACK_S: u64 = 5;
/// The shortest time between two ticks started by finished deliveries:
/// a slot freed by a delivery is claimed for within this (plus the tick),
/// and a burst of completions costs one tick, not one each.
pub const REFILL_GAP: Duration = Duration::from_millis(2);

/// How often the whole active index is walked again, to resync the set with
/// anything the windows could have missed and to clean stale markers.
pub const RESYNC_MS: u64 = 30_000;

/// The dispatcher's view of the active index, kept across ticks.
///
/// Walking every marker up to now each tick costs one key per tenant and
/// due second: about 400k keys (75 ms in a release build) on a store with
/// an hour of backlog over 1,000 tenants. A marker budget would starve a
/// light tenant queued behind deep backlogs, so instead the set remembers
/// each active tenant's oldest marker second and each tick walks only the
/// recent seconds ([`WINDOW_SLACK_S`] before the last walk, up to now):
/// writers put markers at the second of the row they write, which is
/// "now" for ingest, revival and recovery, and a future second for retries
/// (read when now reaches it); a late commit for a second already walked
/// is reported by the store's record of due writes ([`ActiveSet::wake`]).
/// Every [`RESYNC_MS`] the whole index is walked again. Invariant: a known tenant's second is never later than its
/// first due row's (markers only lower it; a visit sets it to the first row
/// it read), so `due_for_tenant` from it misses nothing.
#[derive(Debug, Default)]
pub struct ActiveSet {
    oldest: HashMap<u32, u64>,
    /// Marker seconds seen per tenant since its last visit (what marker
    /// cleanup looks at).
    seen: HashMap<u32, std::collections::BTreeSet<u64>>,
    walked_to: Option<u64>,
    full_at: u64,
    /// Where each tenant's run of rows for full sinks ends (see [`Skip`]).
    skip: HashMap<u32, Skip>,
    /// Per sink, the last tenant whose head was walked again for it: the
    /// next grants start after it (see [`ActiveSet::grant_heads`]).
    granted_after: HashMap<SinkKey, u32>,
    /// Tenants left out of the visits until something changes for them.
    /// See [`ActiveSet::wake`].
    quiet: HashMap<u32, Quiet>,
    /// The store generation and pauses the quiet tenants were judged under.
    judged: Option<(u64, Paused)>,
    /// Per tenant, the last row of its head a tick claimed: no due row of
    /// the tenant sorts at or before it but those written since, which the
    /// record of due writes reports ([`ActiveSet::wake`] drops the point
    /// then). Visits and marker cleanups start after it. Why: a tenant's
    /// rows due in one second share its floor, and a walk from the floor
    /// stepped over the tombstone of every row claimed before it; a lone
    /// tenant draining a backlog posted within a second spent 44% of the
    /// daemon's CPU doing so, and its drain slowed as it went (issue 19).
    cleared: HashMap<u32, (u64, u64, u16)>,
    /// Markers the last walk read (what `refresh` costs).
    walked: usize,
}

/// A tenant's head that waits for a full sink: every due row of the tenant
/// at or before (`at`, `seq`, `sink`) belongs to sink `waits`. A visit
/// starts after it instead of walking those rows again, unless that sink
/// has room and grants the tenant a walk of its head
/// ([`ActiveSet::grant_heads`]); each walk reads at most `scan_rows` rows,
/// so a visit reads at most twice that. One sink only: a walk granted by a
/// sink's room starts at the tenant's oldest row, so a run that mixed a
/// slow sink's long backlog with rows of a sink full for a moment hid the
/// latter behind the former's first `scan_rows` rows until the resync
/// (issue 19). A row can be written before a skip point: a hook's due time
/// is taken when it is received, before its commit, so a tick may set the
/// point past it first. The record of due writes carries each tenant's
/// earliest written key, and any row written before a point drops it
/// ([`ActiveSet::wake`]), whatever put it there (a late commit, a clock that
/// stepped back, rows returned to due with their old times). The points are
/// also dropped at every full resync, whenever stranded rows are returned,
/// and on every tick while the store records nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    at: u64,
    seq: u64,
    sink: u16,
    waits: SinkKey,
}

impl Skip {
    fn over(row: &DueRow, k: SinkKey) -> Skip {
        Skip {
            at: row.at,
            seq: row.seq,
            sink: row.sink,
            waits: k,
        }
    }

    fn after(&self) -> DueFrom {
        DueFrom::After {
            at: self.at,
            seq: self.seq,
            sink: self.sink,
        }
    }
}

impl ActiveSet {
    fn refresh(&mut self, store: &Store, now: u64, paused: &Paused) -> Result<(), StoreError> {
        let recorded = self.wake(store, now, paused);
        let now_b = ankusa_store::keys::bucket_of(now);
        let from = match self.walked_to {
            // While the store records its due writes, a row committed for a
            // second the walks passed brings its tenant in through the
            // record (`wake`), so the walk starts at the last one's second
            // (read again: a row due later in it may have been written
            // after). Re-reading WINDOW_SLACK_S more seconds of every
            // tenant's markers each tick was two thirds of a tick's CPU in
            // `bench delivery` (issue 19).
            Some(w) if now.saturating_sub(self.full_at) < RESYNC_MS && recorded => w,
            Some(w) if now.saturating_sub(self.full_at) < RESYNC_MS => {
                w.saturating_sub(WINDOW_SLACK_S)
            }
            _ => {
                self.oldest.clear();
                self.seen.clear();
                self.forget_heads();
                self.full_at = now;
                0
            }
        };
        let (oldest, seen, walked) = (&mut self.oldest, &mut self.seen, &mut self.walked);
        *walked = 0;
        queries::markers_between(store, from, now_b, |ord, b| {
            *walked += 1;
            let e = oldest.entry(ord).or_insert(b);
            if b < *e {
                *e = b;
            }
            note_seen(seen.entry(ord).or_default(), b);
        })?;
        self.walked_to = Some(now_b);
        Ok(())
    }

    /// Quiet tenants: a visit read every row of the tenant due then and
    /// found none that may go (each waits for a full sink, or is parked),
    /// so visiting it again finds nothing new until one of these happens,
    /// each of which wakes it (or every quiet tenant):
    /// - a due row of it is written: ingest, a retry, a row returned or
    ///   revived ([`Store::take_due_writes`], taken before this tick reads);
    /// - its next due row comes due (`until`);
    /// - a sink it waits for has room and grants it a visit
    ///   ([`ActiveSet::grant_heads`]);
    /// - the pauses change (a row of a newly paused sink must be parked;
    ///   skip points are dropped too), the store is reopened, rows are
    ///   returned, the tick fails, or the full resync comes round.
    ///
    /// With a slow sink, every tenant keeps rows for it, and visiting all of
    /// them each tick to claim the few slots that freed was what held
    /// delivery to 0.55-0.64x of ingest (issue 19): a tick now visits the
    /// tenants written to since the last one and those a sink grants.
    ///
    /// Returns whether the store recorded its due writes (it does unless
    /// the dispatcher's watch was lost).
    fn wake(&mut self, store: &Store, now: u64, paused: &Paused) -> bool {
        let gen = store.generation();
        let written = store.take_due_writes();
        let recorded = written.is_some();
        // A row due by now enters the set at its second here, not only when
        // a walk meets its marker: a commit that lands more than
        // WINDOW_SLACK_S after the row's due time (a stalled disk) put its
        // marker in a second the walks had passed, and its tenant waited
        // for the resync. Rows due later are met by the walk of their
        // second.
        let now_b = ankusa_store::keys::bucket_of(now);
        for (&o, k) in written.iter().flatten() {
            let b = ankusa_store::keys::bucket_of(k.at);
            if b <= now_b {
                let e = self.oldest.entry(o).or_insert(b);
                if b < *e {
                    *e = b;
                }
                note_seen(self.seen.entry(o).or_default(), b);
            }
        }
        if !self
            .judged
            .as_ref()
            .is_some_and(|(g, p)| *g == gen && p == paused)
        {
            // A newly paused sink's rows behind a skip point are parked only
            // by a walk that reads them; a reopen may have returned rows.
            self.forget_heads();
            self.judged = Some((gen, paused.clone()));
            return recorded;
        }
        match written {
            Some(written) => {
                for (o, k) in written {
                    self.quiet.remove(&o);
                    if self
                        .cleared
                        .get(&o)
                        .is_some_and(|&c| (k.at, k.seq, k.sink) <= c)
                    {
                        self.cleared.remove(&o);
                    }
                    // A row due before the skip point: its due time was
                    // taken before a tick walked past it, and it committed
                    // after. Visits start after the point, so without this
                    // the row waited for the slow sink's room or the
                    // resync.
                    if self
                        .skip
                        .get(&o)
                        .is_some_and(|s| (k.at, k.seq, k.sink) <= (s.at, s.seq, s.sink))
                    {
                        self.skip.remove(&o);
                    }
                }
                self.quiet.retain(|_, q| q.until > now);
            }
            None => self.forget_heads(),
        }
        recorded
    }

    /// Drops every skip point, quiet tenant and cleared point: the next
    /// visits read every head again from its oldest second.
    fn forget_heads(&mut self) {
        self.skip.clear();
        self.quiet.clear();
        self.cleared.clear();
    }

    /// Where a visit of the tenant's head starts: after its cleared point
    /// when that is past `floor` (ms), else at `floor`.
    fn start(&self, ord: u32, floor: u64) -> DueFrom {
        match self.cleared.get(&ord) {
            Some(&(at, seq, sink)) if at >= floor => DueFrom::After { at, seq, sink },
            _ => DueFrom::At(floor),
        }
    }

    /// Tenants left out of the visits now (see [`ActiveSet::wake`]).
    pub fn quiet(&self) -> usize {
        self.quiet.len()
    }

    /// The `limit` tenants waiting longest (oldest second, then ordinal),
    /// paused tenants left out: they take no place in the window and are
    /// not offered to the scheduler, like a tenant with nothing ready.
    /// Quiet tenants are left out too unless a sink granted them a walk.
    fn pick(
        &self,
        limit: usize,
        paused: &Paused,
        granted: &HashSet<u32>,
    ) -> Vec<queries::ActiveTenant> {
        let mut all: Vec<(u64, u32)> = self
            .oldest
            .iter()
            .filter(|(&o, _)| {
                !paused.tenant(o) && (!self.quiet.contains_key(&o) || granted.contains(&o))
            })
            .map(|(&o, &b)| (b, o))
            .collect();
        if all.len() > limit {
            all.select_nth_unstable(limit);
            all.truncate(limit);
        }
        all.sort_unstable();
        all.into_iter()
            .map(|(bucket, ord)| queries::ActiveTenant { ord, bucket })
            .collect()
    }

    /// What a visit learned: the tenant's first due row's second, or that
    /// nothing is due now (it leaves the set until a marker brings it back).
    fn visited(&mut self, ord: u32, first_due: Option<u64>) -> Vec<u64> {
        match first_due {
            Some(b) => {
                self.oldest.insert(ord, b);
            }
            None => {
                self.oldest.remove(&ord);
                self.skip.remove(&ord);
                self.quiet.remove(&ord);
                self.cleared.remove(&ord);
            }
        }
        self.seen
            .remove(&ord)
            .map(|s| s.into_iter().collect())
            .unwrap_or_default()
    }

    /// The tenants visited this tick because a sink they wait for has
    /// room: the sink of their skip point (its rows before the point are
    /// walked again), or, for a quiet tenant, any sink its rows wait for
    /// (paused tenants left out). A sink with room `r` grants at most
    /// `max(2r, GRANT_MIN)` visits, in turn over its waiting tenants (by
    /// ordinal, after the last one it granted): walking every waiting head
    /// whenever a slow sink frees one slot read the whole run of each
    /// (1,000 tenants x 64 rows a tick) to hand out a few rows.
    fn grant_heads(&mut self, paused: &Paused, sinks: &SinkRoom<'_>) -> HashSet<u32> {
        let mut waiting: HashMap<SinkKey, Vec<u32>> = HashMap::new();
        let waits = self.skip.iter().map(|(&o, k)| (o, k.waits)).chain(
            self.quiet
                .iter()
                .flat_map(|(&o, q)| q.waits.iter().map(move |&k| (o, k))),
        );
        for (ord, k) in waits {
            if sinks.room(k) > 0 && self.oldest.contains_key(&ord) && !paused.tenant(ord) {
                waiting.entry(k).or_default().push(ord);
            }
        }
        let mut out = HashSet::new();
        for (sink, mut ords) in waiting {
            // A quiet tenant's skip sink is among its waits too.
            ords.sort_unstable();
            ords.dedup();
            let budget = (2 * sinks.room(sink) as usize).max(GRANT_MIN);
            let after = self.granted_after.get(&sink).copied();
            // In turn: the ordinals after the last granted first, then
            // from the lowest.
            ords.sort_unstable_by_key(|&o| (after.is_some_and(|a| o <= a), o));
            ords.truncate(budget);
            if let Some(&last) = ords.last() {
                self.granted_after.insert(sink, last);
            }
            out.extend(ords);
        }
        out
    }

    /// Brings a tenant back for the next tick from `bucket` at the latest:
    /// its cleanup failed, possibly between deleting markers and verifying
    /// them, so the set must not forget it (the next cleanup puts back the
    /// marker of its first due row).
    fn revisit(&mut self, ord: u32, bucket: u64) {
        let e = self.oldest.entry(ord).or_insert(bucket);
        if bucket < *e {
            *e = bucket;
        }
    }
}

/// What a quiet tenant waits for (see [`ActiveSet::wake`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Quiet {
    /// When its next due row comes due (ms; `u64::MAX` for none).
    until: u64,
    /// The full sinks its due rows wait for.
    waits: Vec<SinkKey>,
}

/// How long a tenant whose rows a damaged table file holds is left out of
/// the ticks before it is read again (a row written for it wakes it
/// sooner): every read of the damaged block fails until the store is
/// restored.
pub const DAMAGED_RETRY_MS: u64 = 30_000;

/// Head walks a sink with room grants a tick at least (see
/// [`ActiveSet::grant_heads`]).
pub const GRANT_MIN: usize = 8;

/// Marker seconds kept per tenant between visits at most. The walk meets a
/// marker for every second a tenant has rows in, so without a cap the set
/// held every (tenant, second) of the backlog (a full resync walks them
/// all): memory grew with the rows waiting. Only the earliest seconds
/// matter: a cleanup deletes markers before the tenant's first due row,
/// and a later second's marker is almost always at or after it. A marker
/// left out stays until a walk meets it again after the tenant's next
/// visit (a stale marker costs one empty visit; never a missed row, since
/// the cleanup deletes only what it verifies has no row).
pub const SEEN_MAX: usize = 32;

/// Adds `second` to a tenant's seen markers, keeping the [`SEEN_MAX`]
/// earliest.
fn note_seen(set: &mut std::collections::BTreeSet<u64>, second: u64) {
    if set.len() >= SEEN_MAX {
        match set.last() {
            Some(&last) if second < last => {
                set.remove(&last);
            }
            _ => return,
        }
    }
    set.insert(second);
}

/// What a visit read of a tenant's head.
#[derive(Debug, Default)]
struct Head {
    /// Rows that may be claimed now, in due order.
    rows: Vec<DueRow>,
    /// The second of the tenant's first due row, if it has one now.
    first: Option<u64>,
    /// Where the run of rows for full sinks that starts its head ends.
    skip: Option<Skip>,
    /// Whether the visit's last walk read every row due by now (it stopped
    /// short of its key budget): with no row that may go, the tenant is
    /// quiet ([`ActiveSet::wake`]).
    complete: bool,
    /// The full sinks of the rows that must wait.
    waits: Vec<SinkKey>,
    /// How many of `rows` the walk from the visit's start met before any
    /// row that may not go: if the tick claims them, nothing of the tenant
    /// is left before the last (see `ActiveSet::cleared`).
    lead: usize,
    /// Whether the walk under way still counts into `lead`.
    lead_open: bool,
}

impl Head {
    fn wait(&mut self, k: SinkKey) {
        if !self.waits.contains(&k) {
            self.waits.push(k);
        }
    }
}

/// How a visit treats a row it meets.
enum Met {
    /// A paused sink's: set aside for parking.
    Park,
    /// A sink at its bound: stays due.
    Full(SinkKey),
    /// May be claimed now.
    Ready,
}

/// One visit of a tenant's head, under the tick's budgets.
struct HeadWalk<'a, 'b> {
    store: &'a Store,
    now: u64,
    /// Rows the tenant may still take (its ceiling minus its rows in flight).
    room: usize,
    /// The tick's byte budget (the first row goes even if it is larger).
    bytes: u64,
    /// Rows one walk reads at most (`scan_rows`).
    keys: usize,
    sinks: &'a mut SinkRoom<'b>,
    paused: &'a Paused,
    bad: &'a mut Vec<Undecodable>,
    park: &'a mut Vec<DueRow>,
}

impl HeadWalk<'_, '_> {
    fn classify(&mut self, ord: u32, r: &DueRow) -> Result<Met, StoreError> {
        // Rows of a paused sink are set aside for parking, so they neither
        // go out nor keep the tenant's other sinks waiting behind them.
        if !self.paused.is_empty()
            && self.paused.may_cover(r.sink)
            && queries::hook_source(self.store, r.seq)?
                .is_some_and(|src| self.paused.row(ord, &src, r.sink))
        {
            return Ok(Met::Park);
        }
        Ok(match self.sinks.full(self.store, r)? {
            Some(k) => Met::Full(k),
            None => Met::Ready,
        })
    }

    /// Reads the tenant's head: from its skip point, after walking the
    /// rows before it again when `open` (a sink they wait for has room and
    /// granted this tenant a walk), or from `floor` when it has none, taking the rows that may go now and extending the run of
    /// rows that must wait while it is unbroken.
    ///
    /// `start` is where the tenant's head begins (its floor, or after the
    /// rows claimed before), `floor` the start of its oldest second.
    fn visit(
        &mut self,
        ord: u32,
        start: DueFrom,
        floor: u64,
        skip: Option<&Skip>,
        open: bool,
    ) -> Result<Head, StoreError> {
        let mut head = Head::default();
        let mut used = 0u64;
        let from = match skip {
            None => {
                head.lead_open = true;
                let run = self.walk(ord, start, None, &mut head, &mut used, true)?;
                head.lead_open = false;
                // A head of nothing but rows that wait: read on past them
                // once in this visit rather than a tick later.
                match (&head.skip, run.unbroken && run.met >= self.keys) {
                    (Some(k), true) => k.after(),
                    _ => {
                        head.complete = run.met < self.keys;
                        return Ok(head);
                    }
                }
            }
            Some(k) => {
                // Not walked, the rows before the point are taken to be
                // there still; walked and none met, the point is void.
                head.lead_open = open;
                let before = !open
                    || self
                        .walk(
                            ord,
                            start,
                            Some((k.at, k.seq, k.sink)),
                            &mut head,
                            &mut used,
                            false,
                        )?
                        .met
                        > 0;
                head.lead_open = false;
                if before {
                    head.first = head.first.or(Some(ankusa_store::keys::bucket_of(floor)));
                    head.skip = Some(k.clone());
                    if !open {
                        head.wait(k.waits);
                    }
                }
                k.after()
            }
        };
        if head.rows.len() < self.room {
            head.complete = self.walk(ord, from, None, &mut head, &mut used, true)?.met < self.keys;
        }
        Ok(head)
    }

    /// One walk from `from` (up to `upto` inclusive when given), extending
    /// the head's skip point over rows that wait while `extend` and no row
    /// that may go was met.
    fn walk(
        &mut self,
        ord: u32,
        from: DueFrom,
        upto: Option<(u64, u64, u16)>,
        head: &mut Head,
        used: &mut u64,
        extend: bool,
    ) -> Result<Walked, StoreError> {
        let mut met = 0usize;
        let mut run = extend;
        let mut err = None;
        let mut rows = Vec::new();
        // Read first, then classified: classifying may read hooks.
        queries::visit_due(self.store, ord, from, self.now, self.keys, self.bad, |r| {
            if upto.is_some_and(|u| (r.at, r.seq, r.sink) > u) {
                return ControlFlow::Break(());
            }
            rows.push(r);
            ControlFlow::Continue(())
        })?;
        for r in rows {
            met += 1;
            if head.first.is_none() {
                head.first = Some(ankusa_store::keys::bucket_of(r.at));
            }
            let met = self.classify(ord, &r);
            if !matches!(met, Ok(Met::Ready)) {
                head.lead_open = false;
            }
            match met {
                Err(e) => {
                    err = Some(e);
                    break;
                }
                Ok(Met::Park) => self.park.push(r),
                Ok(Met::Full(k)) => {
                    head.wait(k);
                    // A skip point covers one sink's rows (see `Skip`): a
                    // row of another full sink ends the run.
                    if run && head.skip.as_ref().is_none_or(|s| s.waits == k) {
                        head.skip = Some(Skip::over(&r, k));
                    } else {
                        run = false;
                    }
                }
                Ok(Met::Ready) => {
                    run = false;
                    let next = *used + u64::from(r.size);
                    if !head.rows.is_empty() && next > self.bytes {
                        break;
                    }
                    *used = next;
                    head.rows.push(r);
                    head.lead += usize::from(head.lead_open);
                    if head.rows.len() >= self.room {
                        break;
                    }
                }
            }
        }
        match err {
            Some(e) => Err(e),
            None => Ok(Walked { met, unbroken: run }),
        }
    }
}

/// What one walk met.
struct Walked {
    /// Rows read.
    met: usize,
    /// Whether every row read waits (or is parked): the skip point covers
    /// them all.
    unbroken: bool,
}

/// The read side of a tick: active tenants, their head rows, the
/// scheduler's choice. No row writes; what `bench dispatch-tick` measures.
#[allow(clippy::too_many_arguments)]
pub fn plan_tick(
    store: &Store,
    sched: &mut Scheduler,
    set: &mut ActiveSet,
    now: u64,
    s: &DispatchSettings,
    inflight: &HashMap<u32, u32>,
    global_inflight: u64,
    global_bytes: u64,
    paused: &Paused,
    sinks: &mut SinkRoom<'_>,
) -> Result<TickPlan, StoreError> {
    set.refresh(store, now, paused)?;
    let granted = set.grant_heads(paused, sinks);
    let mut order = set.pick(s.scan_tenants, paused, &granted);
    let room = (s.max_inflight as u64).saturating_sub(global_inflight);
    // Bytes, like rows, are bounded in flight and not only per tick: refill
    // ticks start whenever a delivery ends, so a per-tick budget alone never
    // binds, rows are claimed far ahead of what the sinks take, and the order
    // they then go out in is the sink queue's, not the scheduler's (the issue 15
    // byte split fell to 0.555/0.445 that way). Bounded in flight, each tick
    // claims what deliveries freed, in tag order; nothing free, nothing claimed.
    let limits = Limits {
        rows: u32::try_from(room).unwrap_or(u32::MAX).min(s.tick_rows),
        bytes: s
            .tick_bytes
            .min(s.max_inflight_bytes.saturating_sub(global_bytes)),
    };
    // Read in the scheduler's order, and stop once as many tenants have a
    // row ready as the tick may claim rows: nobody later in the order would
    // get one ([`Scheduler::standing`]). When the node is behind, every
    // tenant has rows ready, and reading all of them to claim the hundred
    // rows that freed made ticks of 40-50 ms that could not catch up
    // (issue 19). Tenants granted a walk by a sink's room are read anyway.
    order.sort_by_cached_key(|a| sched.standing(a.ord, 0));
    let mut ready = 0u32;
    let mut active = Vec::with_capacity(order.len());
    let mut visits: Vec<Visit> = Vec::with_capacity(order.len());
    let mut bad = Vec::new();
    let mut park = Vec::new();
    let mut due: Vec<Vec<DueRow>> = Vec::with_capacity(order.len());
    let mut heads: Vec<Vec<HeadRow>> = Vec::with_capacity(order.len());
    let mut leads: Vec<usize> = Vec::with_capacity(order.len());
    for a in order {
        if ready >= limits.rows && !granted.contains(&a.ord) {
            continue;
        }
        active.push(a);
        let busy = inflight.get(&a.ord).copied().unwrap_or(0);
        // Up to the ceiling, not the cap: a tenant may borrow slots nobody
        // else is waiting for (the scheduler decides whether it does).
        let room = s.tenant_ceiling().saturating_sub(busy) as usize;
        // Every due row has a marker in its second, so nothing is due
        // before the tenant's oldest marker: start the range there and skip
        // the tombstones of rows already claimed, or after the last row a
        // tick claimed, past the tombstones inside that second too.
        let floor = a.bucket.saturating_mul(1000);
        let start = set.start(a.ord, floor);
        let head = if room == 0 {
            // A tenant at its cap keeps its place.
            Head {
                first: Some(a.bucket),
                skip: set.skip.get(&a.ord).cloned(),
                ..Head::default()
            }
        } else {
            let mut walk = HeadWalk {
                store,
                now,
                room,
                bytes: s.tick_bytes,
                keys: s.scan_rows,
                sinks: &mut *sinks,
                paused,
                bad: &mut bad,
                park: &mut park,
            };
            let bad_before = walk.bad.len();
            let skip = set.skip.get(&a.ord);
            // Walked again before its skip point when that sink has room
            // (a quiet tenant may be visited for another sink it waits for).
            let open =
                granted.contains(&a.ord) && skip.is_some_and(|k| walk.sinks.room(k.waits) > 0);
            let mut head = match walk.visit(a.ord, start, floor, skip, open) {
                Ok(head) => head,
                // A damaged block under this tenant's rows fails every visit
                // of it: set it aside and serve the others, so one damaged
                // file does not stop the node's every delivery. The store
                // has recorded the damage (readiness, /metrics).
                Err(StoreError::Damaged { .. }) => {
                    active.pop();
                    set.quiet.insert(
                        a.ord,
                        Quiet {
                            until: now.saturating_add(DAMAGED_RETRY_MS),
                            waits: Vec::new(),
                        },
                    );
                    continue;
                }
                Err(e) => return Err(e),
            };
            head.complete &= walk.bad.len() == bad_before;
            if walk.bad.len() != bad_before {
                // Where a row that does not decode sat among the rows read
                // is not known here: nothing is taken to be cleared.
                head.lead = 0;
            }
            head
        };
        if head.complete && head.rows.is_empty() && head.first.is_some() {
            // Everything due waits: nothing to read again before its next
            // row comes due or something changes (see `ActiveSet::wake`).
            let until =
                queries::first_due_at(store, a.ord, now.saturating_add(1))?.unwrap_or(u64::MAX);
            set.quiet.insert(
                a.ord,
                Quiet {
                    until,
                    waits: head.waits,
                },
            );
        } else {
            set.quiet.remove(&a.ord);
        }
        // With room and nothing met, nothing is due now: the tenant leaves
        // the set until a marker brings it back.
        let (rows, first, lead) = (head.rows, head.first, head.lead);
        match head.skip {
            Some(k) => {
                set.skip.insert(a.ord, k);
            }
            None => {
                set.skip.remove(&a.ord);
            }
        }
        let mut markers = set.visited(a.ord, first);
        if markers.is_empty() {
            // Cleanup still looks at the second the set knew it by.
            markers.push(a.bucket);
        }
        visits.push(Visit {
            ord: a.ord,
            floor,
            from: start,
            seconds: markers,
        });
        leads.push(lead);
        heads.push(
            rows.iter()
                .map(|r| HeadRow {
                    due_at: r.at,
                    seq: r.seq,
                    size: r.size,
                    kind: match r.kind {
                        Kind::First => RowKind::First,
                        Kind::Retry => RowKind::Retry,
                    },
                })
                .collect(),
        );
        ready += u32::from(!rows.is_empty());
        due.push(rows);
    }
    let input: Vec<TenantHead<'_>> = active
        .iter()
        .zip(&heads)
        .map(|(a, rows)| TenantHead {
            tenant: a.ord,
            group: 0,
            weight: 1,
            cap: Some(s.per_tenant),
            inflight: inflight.get(&a.ord).copied().unwrap_or(0),
            rows,
        })
        .collect();
    let plan = sched.plan(now, &input, limits);
    let index: HashMap<u32, usize> = active.iter().enumerate().map(|(i, a)| (a.ord, i)).collect();
    let mut claims = Vec::with_capacity(plan.len());
    let mut cleared = Vec::new();
    for c in plan {
        if let Some(&i) = index.get(&c.tenant) {
            // The scheduler counts rows per tenant; the sinks' room is what
            // is left after the tenants before it in this tick took theirs
            // (a row of a sink filled meanwhile stays due; the tenant's next
            // rows take its place).
            let want = c.rows as usize;
            let mut took = Vec::with_capacity(want.min(due[i].len()));
            for r in &due[i] {
                if took.len() >= want {
                    break;
                }
                if let Some(k) = sinks.take(store, r)? {
                    took.push((*r, k));
                }
            }
            // The rows met first from the visit's start, as far as this
            // tick claims each of them: once committed, the tenant has no
            // due row up to the last.
            let mut taken = took.iter().map(|(r, _)| (r.seq, r.sink));
            let last = due[i]
                .iter()
                .take(leads[i])
                .take_while(|r| taken.next() == Some((r.seq, r.sink)))
                .last();
            if let Some(r) = last {
                cleared.push((c.tenant, (r.at, r.seq, r.sink)));
                if let Some(v) = visits.get_mut(i) {
                    v.from = DueFrom::After {
                        at: r.at,
                        seq: r.seq,
                        sink: r.sink,
                    };
                }
            }
            claims.push(took);
        }
    }
    Ok(TickPlan {
        visited: active.len(),
        claims,
        cleared,
        markers: visits,
        bad,
        park,
    })
}

/// The running dispatcher and reclaim task.
pub struct DispatchHandle {
    stop: watch::Sender<bool>,
    ticker: tokio::task::JoinHandle<()>,
    reclaimer: tokio::task::JoinHandle<()>,
    inflight: Arc<Inflight>,
    drain: Duration,
}

impl DispatchHandle {
    /// Stops claiming, then waits up to `drain_timeout` for deliveries in
    /// flight. Returns how many were still running (left inflight for the
    /// next boot to recover).
    pub async fn shutdown(self) -> u64 {
        let _ = self.stop.send(true);
        let _ = self.ticker.await;
        let _ = self.reclaimer.await;
        let _ = tokio::time::timeout(self.drain, self.inflight.wait_idle()).await;
        let left = self.inflight.total();
        if left > 0 {
            tracing::warn!(
                rows = left,
                "deliveries still running at shutdown; boot recovery returns them to due"
            );
        }
        left
    }
}

/// The tick loop's state.
pub struct Dispatcher {
    store: Arc<Store>,
    clock: SharedClock,
    settings: DispatchSettings,
    metrics: Arc<Metrics>,
    sched: Arc<Mutex<(Scheduler, ActiveSet)>>,
    inflight: Arc<Inflight>,
    /// The configured sinks, for counting rows in flight per sink.
    sinks: SinkMap,
    deliverer: Arc<Deliverer>,
    /// The store generation and unrecorded count the last stranded-row
    /// sweep covered.
    swept: Mutex<(u64, u64)>,
    /// Signalled when a delivery ends: its slot is refilled at once.
    freed: Notify,
}

impl Dispatcher {
    pub fn new(
        store: Arc<Store>,
        clock: SharedClock,
        settings: &Settings,
        metrics: Arc<Metrics>,
    ) -> Result<Self, DaemonError> {
        let d = settings.dispatch.clone();
        let recorder = Recorder::start(store.clone())
            .map_err(DaemonError::io("cannot start the outcome recorder thread"))?;
        let deliverer = Deliverer::new(
            store.clone(),
            clock.clone(),
            metrics.clone(),
            &settings.sources,
            d.per_sink,
            recorder,
        )
        .map_err(DaemonError::Client)?;
        // Boot returned every inflight row to due: nothing is stranded yet.
        let swept = (
            store.generation(),
            metrics.dispatch.unrecorded.load(Ordering::SeqCst),
        );
        // The quiet tenants' wake-up (`ActiveSet::wake`) needs to know
        // whose due rows were written between two ticks.
        store.watch_due_writes();
        let sched = Scheduler::new(Config {
            // Remember as many tenants as the node may have, bounded anyway.
            max_tenants: (settings.writer.tenants_max as usize).min(1_000_000),
            spare: Some(d.spare()),
            ..Config::default()
        });
        Ok(Self {
            store,
            clock,
            settings: d,
            metrics,
            sched: Arc::new(Mutex::new((sched, ActiveSet::default()))),
            inflight: Arc::new(Inflight::default()),
            sinks: SinkMap::new(&settings.sources),
            deliverer: Arc::new(deliverer),
            swept: Mutex::new(swept),
            freed: Notify::new(),
        })
    }

    /// Starts the tick loop and the reclaim task; both stop when `stop`
    /// turns true (or on [`DispatchHandle::shutdown`]).
    pub fn start(self, mut external: watch::Receiver<bool>) -> DispatchHandle {
        let (stop_tx, stop_rx) = watch::channel(false);
        let inflight = self.inflight.clone();
        let drain = self.settings.drain_timeout;
        let reclaimer = tokio::spawn(reclaim_loop(
            self.store.clone(),
            self.metrics.clone(),
            self.settings.reclaim_interval,
            self.settings.reclaim_batch,
            stop_rx.clone(),
            external.clone(),
        ));
        let me = Arc::new(self);
        let mut stop = stop_rx;
        let ticker = tokio::spawn(async move {
            let mut every = tokio::time::interval(me.settings.tick);
            let mut last = Instant::now();
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let refill = tokio::select! {
                    _ = every.tick() => false,
                    _ = me.freed.notified(), if me.settings.refill => true,
                    _ = stop.wait_for(|s| *s) => break,
                    _ = external.wait_for(|s| *s) => break,
                };
                if refill {
                    // Deliveries that finish together are refilled by one
                    // tick: at most one refill per REFILL_GAP.
                    let wait = REFILL_GAP.saturating_sub(last.elapsed());
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                    me.metrics.dispatch.refills.fetch_add(1, Ordering::Relaxed);
                }
                last = Instant::now();
                me.clone().tick().await;
            }
        });
        DispatchHandle {
            stop: stop_tx,
            ticker,
            reclaimer,
            inflight,
            drain,
        }
    }

    /// One tick: plan and claim on a blocking thread (store I/O), then
    /// spawn the deliveries.
    async fn tick(self: Arc<Self>) {
        let started = Instant::now();
        let me = self.clone();
        let claimed = tokio::task::spawn_blocking(move || me.claim()).await;
        let m = &self.metrics.dispatch;
        let rows = match claimed {
            Ok(Ok((visited, rows))) => {
                m.tenants_visited
                    .fetch_add(visited as u64, Ordering::Relaxed);
                rows
            }
            Ok(Err(e)) => {
                m.tick_errors.fetch_add(1, Ordering::Relaxed);
                tracing::error!(error = %e, "dispatch tick failed; retrying next tick");
                self.forget_heads();
                Vec::new()
            }
            Err(e) => {
                m.tick_errors.fetch_add(1, Ordering::Relaxed);
                tracing::error!(error = %e, "dispatch tick panicked");
                self.forget_heads();
                Vec::new()
            }
        };
        m.rows_claimed
            .fetch_add(rows.len() as u64, Ordering::Relaxed);
        for row in rows {
            self.clone().spawn_delivery(row);
        }
        let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        m.tick_us_sum.fetch_add(us, Ordering::Relaxed);
        m.tick_seconds.observe(std::time::Duration::from_micros(us));
        m.last_tick_us.store(us, Ordering::Relaxed);
        m.ticks.fetch_add(1, Ordering::Relaxed);
    }

    /// After a failed tick: the tenants written to that it took from the
    /// store are not recorded anywhere else, so none stays quiet on what
    /// it learned.
    fn forget_heads(&self) {
        self.sched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .1
            .forget_heads();
    }

    /// Plans, claims in one commit, cleans markers. Returns the tenants
    /// visited and the claimed rows.
    fn claim(&self) -> Result<(usize, Vec<InflightRow>), StoreError> {
        let now = self.clock.now_ms();
        // From planning (which reads the due rows) to the claim's commit: a
        // purge must not delete a row this tick is about to claim.
        let rows_guard = ankusa_ops::rowlock::hold();
        let returned = self.release_stranded(now);
        let paused = Paused::load(&self.store)?;
        self.note_pauses(&paused);
        let cap = u32::try_from(self.settings.per_sink).unwrap_or(u32::MAX);
        let mut sinks = SinkRoom::new(&self.sinks, cap, self.inflight.sinks());
        let plan = {
            // A panic while planning leaves tags that are merely stale; keep
            // dispatching rather than stopping delivery for good.
            let mut state = self
                .sched
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let (sched, set) = &mut *state;
            if returned {
                // Returned rows are due now under their old sequence
                // numbers, so they may sort before a skip point.
                set.forget_heads();
            }
            let plan = plan_tick(
                &self.store,
                sched,
                set,
                now,
                &self.settings,
                &self.inflight.snapshot(),
                self.inflight.total(),
                self.inflight.bytes(),
                &paused,
                &mut sinks,
            )?;
            self.metrics
                .dispatch
                .tenants_quiet
                .store(set.quiet() as u64, Ordering::Relaxed);
            plan
        };
        let probes = self.find_probes(now, &paused);
        let mut out = Vec::with_capacity(plan.rows() + probes.len());
        if plan.rows() > 0 || !plan.bad.is_empty() || !plan.park.is_empty() || !probes.is_empty() {
            let mut b = Batch::new();
            for r in &plan.park {
                transitions::park(&mut b, r);
            }
            let mut claimed = Vec::with_capacity(plan.rows() + probes.len());
            for rows in &plan.claims {
                for (r, sink) in rows {
                    claimed.push((transitions::claim(&mut b, r), *sink));
                }
            }
            for (src, sink, _, row) in &probes {
                claimed.push((transitions::claim(&mut b, row), self.sinks.key(src, *sink)));
            }
            // Under the same row lock and in the same commit as the claim.
            for u in &plan.bad {
                let size = ankusa_store::quarantine::delivery_of(&u.key)
                    .and_then(|(seq, sink)| {
                        queries::delivery(&self.store, seq, sink).ok().flatten()
                    })
                    .map(|d| d.size);
                transitions::quarantine_due(&mut b, u, size, now);
            }
            self.store.commit(b, false)?;
            if !plan.cleared.is_empty() {
                let mut state = self
                    .sched
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                state.1.cleared.extend(plan.cleared.iter().copied());
            }
            self.metrics
                .dispatch
                .quarantined
                .fetch_add(plan.bad.len() as u64, Ordering::Relaxed);
            self.metrics
                .dispatch
                .parked
                .fetch_add(plan.park.len() as u64, Ordering::Relaxed);
            for (src, sink, cursor, row) in &probes {
                self.metrics
                    .breakers
                    .searched(src, *sink, *cursor, Some(row.seq), false, now);
            }
            for (r, sink) in claimed {
                self.inflight.add(&r, sink);
                self.metrics
                    .dispatch
                    .inflight
                    .fetch_add(1, Ordering::Relaxed);
                out.push(r);
            }
        }
        drop(rows_guard);
        // After the claim, so the seconds just emptied are cleaned now. A
        // failed cleanup must not cost the rows this tick already claimed
        // (they are counted inflight and only a delivery brings the count
        // down), so it is logged and its tenants are visited again.
        let m = &self.metrics.dispatch;
        let visits: Vec<transitions::MarkerVisit<'_>> = plan
            .markers
            .iter()
            .map(|v| transitions::MarkerVisit {
                ord: v.ord,
                scanned: &v.seconds,
                from: v.from,
            })
            .collect();
        match transitions::cleanup_markers_of(&self.store, &visits, now) {
            Ok(done) => {
                for (v, c) in plan.markers.iter().zip(done) {
                    m.markers_deleted
                        .fetch_add(c.deleted.len() as u64, Ordering::Relaxed);
                    m.markers_restored
                        .fetch_add(c.restored.len() as u64, Ordering::Relaxed);
                    if let Some(b) = c.healed {
                        m.markers_healed.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(ord = v.ord, second = b, "put back a missing marker");
                    }
                }
            }
            Err(e) => {
                m.cleanup_errors.fetch_add(1, Ordering::Relaxed);
                tracing::error!(error = %e, "marker cleanup failed; its tenants are visited again");
                let mut state = self
                    .sched
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                for v in &plan.markers {
                    let back = v.seconds.iter().copied().fold(v.floor / 1000, u64::min);
                    state.1.revisit(v.ord, back);
                }
            }
        }
        Ok((plan.visited, out))
    }

    /// One parked row for each half-open breaker: a row of its sink that
    /// no other pause holds (a paused tenant, or the tenant's own pause of
    /// the sink), read at most [`breaker::SEARCH_VISIT`] rows a sink.
    /// Claimed in the tick's commit, under the row lock, like any row.
    fn find_probes(&self, now: u64, paused: &Paused) -> Vec<(String, u16, UnparkCursor, DueRow)> {
        let breakers = &self.metrics.breakers;
        if breakers.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (src, sink, mut cursor) in breakers.probes_wanted(now) {
            let found =
                transitions::find_parked(&self.store, &mut cursor, breaker::SEARCH_VISIT, |r| {
                    Ok(r.sink == sink
                        && !paused.tenant(r.ord)
                        && !paused.tenant_sink(r.ord, &src, sink)
                        && queries::hook_source(&self.store, r.seq)?.is_some_and(|s| s == src))
                });
            match found {
                Ok(f) => match f.row {
                    Some(row) => out.push((src, sink, cursor, row)),
                    None => breakers.searched(&src, sink, cursor, None, f.done, now),
                },
                Err(e) => {
                    tracing::warn!(source = %src, sink, error = %e, "cannot look for a probe row; next tick")
                }
            }
        }
        out
    }

    fn note_pauses(&self, p: &Paused) {
        let (t, s, ts) = p.counts();
        let g = &self.metrics.dispatch.paused;
        g[0].store(t as u64, Ordering::Relaxed);
        g[1].store(s as u64, Ordering::Relaxed);
        g[2].store(ts as u64, Ordering::Relaxed);
    }

    /// Returns to due the inflight rows nobody here delivers, when there
    /// can be some: after an outcome that could not be recorded, or after the
    /// store was reopened (a claim whose commit failed may have reached the
    /// WAL). Runs under the row lock, before planning, so no claim is half
    /// done; a failure is retried next tick.
    /// Whether rows went back to due.
    fn release_stranded(&self, now: u64) -> bool {
        let m = &self.metrics.dispatch;
        let want = (self.store.generation(), m.unrecorded.load(Ordering::SeqCst));
        let mut swept = self
            .swept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *swept == want {
            return false;
        }
        match transitions::recover_inflight_except(&self.store, now, &self.inflight.held()) {
            Ok(n) => {
                *swept = want;
                if n > 0 {
                    m.stranded_released.fetch_add(n, Ordering::Relaxed);
                    tracing::warn!(
                        rows = n,
                        "returned inflight rows nobody was delivering to due"
                    );
                }
                n > 0
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot return stranded inflight rows yet; next tick");
                false
            }
        }
    }

    fn spawn_delivery(self: Arc<Self>, row: InflightRow) {
        tokio::spawn(async move {
            let ended = self.deliverer.deliver(row).await;
            // Out of the held set before an unrecorded outcome is counted:
            // the count is what makes the next tick return the row to due,
            // and a held row would be skipped.
            self.inflight.done(&row);
            self.metrics.breakers.settled(row.seq, row.sink);
            // The freed slot is offered to the scheduler now, not at the
            // next periodic tick.
            self.freed.notify_one();
            let m = &self.metrics.dispatch;
            match ended {
                Ended::Delivered => m.delivered.fetch_add(1, Ordering::Relaxed),
                Ended::Retried => m.retried.fetch_add(1, Ordering::Relaxed),
                Ended::Dead => m.dead.fetch_add(1, Ordering::Relaxed),
                Ended::Unrecorded => m.unrecorded.fetch_add(1, Ordering::SeqCst),
            };
            m.inflight.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Periodically deletes hooks no row owes any more.
async fn reclaim_loop(
    store: Arc<Store>,
    metrics: Arc<Metrics>,
    interval: Duration,
    batch: usize,
    mut stop: watch::Receiver<bool>,
    mut external: watch::Receiver<bool>,
) {
    let mut every = tokio::time::interval(interval);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
            _ = external.wait_for(|s| *s) => return,
        }
        let s = store.clone();
        match tokio::task::spawn_blocking(move || transitions::reclaim_pass(&s, batch)).await {
            Ok(Ok(n)) => {
                metrics.dispatch.reclaimed.fetch_add(n, Ordering::Relaxed);
            }
            Ok(Err(e)) => tracing::error!(error = %e, "reclaim pass failed; retrying"),
            Err(e) => tracing::error!(error = %e, "reclaim pass panicked"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_store::transitions::IngestHook;
    use ankusa_store::Envelope;

    /// A panic while a map of the in-flight accounting was locked must
    /// not lift the caps: the counts stay what they were, and later rows
    /// are still counted and released.
    #[test]
    fn the_inflight_counts_survive_a_poisoned_lock() {
        let f = Inflight::default();
        let sink = SinkKey { source: 0, sink: 0 };
        let row = |seq| InflightRow {
            ord: 7,
            seq,
            sink: 0,
            size: 10,
        };
        f.add(&row(1), Some(sink));
        f.add(&row(2), Some(sink));
        std::thread::scope(|s| {
            let _ = s
                .spawn(|| {
                    let _held = (f.by_tenant.lock(), f.by_sink.lock(), f.rows.lock());
                    panic!("a panic while the in-flight maps are held");
                })
                .join();
        });
        assert!(f.by_tenant.is_poisoned() && f.by_sink.is_poisoned() && f.rows.is_poisoned());
        assert_eq!(f.snapshot().get(&7), Some(&2), "the tenant's count is kept");
        assert_eq!(f.sinks().get(&sink), Some(&2), "the sink's count is kept");
        assert_eq!(f.held().len(), 2);
        f.add(&row(3), Some(sink));
        f.done(&row(1));
        assert_eq!(f.snapshot().get(&7), Some(&2));
        assert_eq!(f.sinks().get(&sink), Some(&2));
        assert_eq!(f.total(), 2);
    }

    fn due_at(store: &Store, seq: u64, ord: u32, at: u64) {
        hooks_with_sinks(store, seq..seq + 1, ord, at, 1);
    }

    /// Hooks `seqs` of tenant `ord` due at `at`, each owed to `sinks` sinks
    /// of source `s`.
    fn hooks_with_sinks(store: &Store, seqs: std::ops::Range<u64>, ord: u32, at: u64, sinks: u16) {
        let mut b = Batch::new();
        for seq in seqs {
            let env = Envelope {
                received_at: at,
                source_id: "s".into(),
                tenant: format!("t{ord}"),
                idempotency_key: None,
                headers: vec![],
                body: vec![1],
            };
            transitions::ingest(
                &mut b,
                &IngestHook {
                    seq,
                    ord,
                    envelope: &env,
                    sinks,
                    archive: false,
                    dedupe_expires_at: None,
                },
            );
        }
        store.commit(b, true).unwrap();
    }

    /// One tick's plan with `inflight` rows in flight per sink and the
    /// default settings (per_sink 64, scan_rows 64).
    fn plan_with(
        store: &Store,
        set: &mut ActiveSet,
        map: &SinkMap,
        now: u64,
        inflight: &[(SinkKey, u32)],
    ) -> Vec<(u32, u64, u16)> {
        claimed(&plan_paused(
            store,
            set,
            map,
            now,
            inflight,
            &Paused::default(),
        ))
    }

    fn plan_paused(
        store: &Store,
        set: &mut ActiveSet,
        map: &SinkMap,
        now: u64,
        inflight: &[(SinkKey, u32)],
        paused: &Paused,
    ) -> TickPlan {
        let s = DispatchSettings::default();
        let mut sched = Scheduler::new(Config::default());
        let cap = u32::try_from(s.per_sink).unwrap();
        let mut room = SinkRoom::new(map, cap, inflight.iter().copied().collect());
        plan_tick(
            store,
            &mut sched,
            set,
            now,
            &s,
            &HashMap::new(),
            0,
            0,
            paused,
            &mut room,
        )
        .unwrap()
    }

    /// Commits a plan's claims as the tick would.
    fn commit_claims(store: &Store, plan: &TickPlan) {
        let mut b = Batch::new();
        for (r, _) in plan.claims.iter().flatten() {
            transitions::claim(&mut b, r);
        }
        store.commit(b, false).unwrap();
    }

    fn claimed(plan: &TickPlan) -> Vec<(u32, u64, u16)> {
        plan.claims
            .iter()
            .flatten()
            .map(|(r, _)| (r.ord, r.seq, r.sink))
            .collect()
    }

    /// A fresh store that records its due writes, as the dispatcher asks.
    fn watched_store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        store.watch_due_writes();
        (dir, store)
    }

    const SINK0: SinkKey = SinkKey { source: 0, sink: 0 };

    /// Issue 19: a sink at `per_sink` held every node slot, because its rows
    /// were claimed and then waited for the sink. Its rows now stay due, and
    /// the tenant's rows for its other sinks behind more than `scan_rows` of
    /// them still go out in the same tick.
    #[test]
    fn a_full_sink_leaves_its_rows_due_and_the_tenants_other_sinks_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let now = 10_000_000;
        let map = SinkMap::of([("s", 2)]);
        // 100 rows for sink 0 only, then 5 hooks for both sinks.
        hooks_with_sinks(&store, 1..101, 1, now - 5_000, 1);
        hooks_with_sinks(&store, 101..106, 1, now - 4_000, 2);
        let mut set = ActiveSet::default();
        let full = [(SINK0, 64)];
        let got = plan_with(&store, &mut set, &map, now, &full);
        let want: Vec<(u32, u64, u16)> = (101..106).map(|seq| (1, seq, 1)).collect();
        assert_eq!(got, want, "only sink 1's rows, none of the full sink's");
        // The next visit starts after the run of sink 0's rows; with room
        // again, sink 0's oldest rows go first.
        assert!(set.skip.contains_key(&1));
        let got = plan_with(&store, &mut set, &map, now, &[(SINK0, 61)]);
        assert_eq!(got, vec![(1, 1, 0), (1, 2, 0), (1, 3, 0)]);
    }

    /// Issue 19: a tenant whose due rows all wait for a full sink is not
    /// visited again until something changes for it: a row written for
    /// it, its next row coming due, the pauses changing, a sink granting
    /// it a walk. Each wake-up is checked by what the next tick claims.
    #[test]
    fn a_tenant_whose_rows_all_wait_is_visited_again_only_when_something_changes() {
        let (_dir, store) = watched_store();
        let now = 10_000_000;
        let map = SinkMap::of([("s", 2)]);
        let full = [(SINK0, 64)];
        // Tenant 1: ten rows for sink 0 only (full), and a hook for both
        // sinks due five seconds from now.
        hooks_with_sinks(&store, 1..11, 1, now - 2_000, 1);
        hooks_with_sinks(&store, 11..12, 1, now + 5_000, 2);
        let mut set = ActiveSet::default();
        let tick_paused =
            |set: &mut ActiveSet, at: u64, inflight: &[(SinkKey, u32)], p: &Paused| {
                plan_paused(&store, set, &map, now + at, inflight, p)
            };
        let tick = |set: &mut ActiveSet, at: u64, inflight: &[(SinkKey, u32)]| {
            tick_paused(set, at, inflight, &Paused::default())
        };
        let plan = tick(&mut set, 0, &full);
        assert_eq!((plan.visited, plan.rows()), (1, 0));
        assert_eq!(set.quiet(), 1);
        // Nothing changed: not visited.
        let plan = tick(&mut set, 1_000, &full);
        assert_eq!(plan.visited, 0, "a quiet tenant is not read again");
        // A row written for it (sink 1 has room) wakes it.
        hooks_with_sinks(&store, 20..21, 1, now + 1_500, 2);
        let plan = tick(&mut set, 2_000, &full);
        assert_eq!(claimed(&plan), vec![(1, 20, 1)]);
        // Claimed (as the commit would), the tenant is quiet again, until
        // its future row comes due.
        commit_claims(&store, &plan);
        let plan = tick(&mut set, 3_000, &full);
        assert_eq!((plan.visited, plan.rows(), set.quiet()), (1, 0, 1));
        let plan = tick(&mut set, 4_000, &full);
        assert_eq!(plan.visited, 0);
        let plan = tick(&mut set, 5_000, &full);
        assert_eq!(
            claimed(&plan),
            vec![(1, 11, 1)],
            "woken when its next row came due"
        );
        commit_claims(&store, &plan);
        // Quiet again (only sink 0's rows left): pausing sink 0 wakes it,
        // and all its rows of sink 0, behind its skip point too, are met
        // to be parked.
        let plan = tick(&mut set, 6_000, &full);
        assert_eq!((plan.visited, plan.park.len(), set.quiet()), (1, 0, 1));
        let plan = tick(&mut set, 6_200, &full);
        assert_eq!(plan.visited, 0);
        let mut b = Batch::new();
        ankusa_store::pauses::put(
            &mut b,
            &ankusa_store::pauses::Pause {
                scope: ankusa_store::pauses::Scope::sink("s", 0),
                at: now,
                origin: ankusa_store::pauses::Origin::Operator,
                by: "test".into(),
            },
        )
        .unwrap();
        store.commit(b, true).unwrap();
        let paused = Paused::load(&store).unwrap();
        let plan = tick_paused(&mut set, 6_500, &full, &paused);
        assert_eq!((plan.visited, plan.park.len()), (1, 12));
        // Back without the pause, sink 0 with room grants it a walk.
        let plan = tick(&mut set, 7_000, &full);
        assert_eq!(plan.rows(), 0);
        let plan = tick(&mut set, 7_500, &full);
        assert_eq!(plan.visited, 0);
        let plan = plan_paused(
            &store,
            &mut set,
            &map,
            now + 8_000,
            &[(SINK0, 62)],
            &Paused::default(),
        );
        assert_eq!(claimed(&plan), vec![(1, 1, 0), (1, 2, 0)]);
    }

    /// A store that does not record its due writes leaves no tenant quiet.
    #[test]
    fn without_the_record_of_writes_every_active_tenant_is_visited() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let now = 10_000_000;
        let map = SinkMap::of([("s", 2)]);
        hooks_with_sinks(&store, 1..11, 1, now - 2_000, 1);
        let mut set = ActiveSet::default();
        let full = [(SINK0, 64)];
        for t in 0..3 {
            let plan = plan_paused(&store, &mut set, &map, now + t, &full, &Paused::default());
            assert_eq!(plan.visited, 1);
        }
    }

    /// Found by `bench delivery` (issue 19): a sink that was full for a
    /// moment (a healthy one, in a burst) had its rows taken into a skip
    /// point behind a slow sink's long run; a walk granted by its room
    /// started from the tenant's oldest row and read only the slow sink's
    /// rows, so its rows waited for the 30 s resync. A skip point now
    /// covers one sink's rows only, and a tenant waiting for a sink is
    /// visited when that sink has room.
    #[test]
    fn rows_of_a_sink_full_for_a_moment_go_out_once_it_has_room() {
        let (_dir, store) = watched_store();
        let now = 10_000_000;
        let map = SinkMap::of([("s", 2)]);
        let sink1 = SinkKey { source: 0, sink: 1 };
        // 100 rows for sink 0 (slow), then 5 hooks for both sinks.
        hooks_with_sinks(&store, 1..101, 1, now - 5_000, 1);
        hooks_with_sinks(&store, 101..106, 1, now - 4_000, 2);
        let mut set = ActiveSet::default();
        let both_full = [(SINK0, 64), (sink1, 64)];
        assert_eq!(plan_with(&store, &mut set, &map, now, &both_full), vec![]);
        assert_eq!(
            plan_with(&store, &mut set, &map, now + 10, &both_full),
            vec![]
        );
        let got = plan_with(
            &store,
            &mut set,
            &map,
            now + 20,
            &[(SINK0, 64), (sink1, 10)],
        );
        let want: Vec<(u32, u64, u16)> = (101..106).map(|seq| (1, seq, 1)).collect();
        assert_eq!(got, want);
    }

    /// Found by `no_due_row_waits_for_the_resync`: a hook's due time is
    /// taken before its commit, so a tick can set a tenant's skip point
    /// past a row that is committed just after it. That row, for a sink
    /// with room, sat hidden before the point, its tenant quiet, until the
    /// slow sink had room or the resync came 30 s later. A row written
    /// before a tenant's skip point now drops the point.
    #[test]
    fn a_row_committed_late_before_a_skip_point_goes_out_while_the_slow_sink_stays_full() {
        let (_dir, store) = watched_store();
        let now = 10_000_000;
        let map = SinkMap::of([("s", 2)]);
        let full = [(SINK0, 64)];
        hooks_with_sinks(&store, 1..4, 1, now - 1_000, 1);
        let mut set = ActiveSet::default();
        assert_eq!(plan_with(&store, &mut set, &map, now, &full), vec![]);
        assert!(set.skip.contains_key(&1) && set.quiet() == 1);
        // Received (and so due) before the rows of the skip point, committed
        // after the tick.
        hooks_with_sinks(&store, 4..5, 1, now - 1_500, 2);
        assert_eq!(
            plan_with(&store, &mut set, &map, now + 10, &full),
            vec![(1, 4, 1)]
        );
    }

    /// Found by `no_due_row_waits_for_the_resync`: a hook committed more
    /// than [`WINDOW_SLACK_S`] after it was received (a disk that stalled)
    /// has its marker in a second the walks had passed, and a tenant with
    /// nothing else due was not visited until the resync. The record of
    /// due writes now brings the tenant in from the row's second.
    #[test]
    fn a_row_committed_seconds_after_its_due_time_is_claimed_without_the_resync() {
        let (_dir, store) = watched_store();
        let now = 10_000_000;
        let map = SinkMap::of([("s", 1)]);
        let mut set = ActiveSet::default();
        assert_eq!(plan_with(&store, &mut set, &map, now, &[]), vec![]);
        due_at(&store, 1, 1, now - 8_000);
        assert_eq!(
            plan_with(&store, &mut set, &map, now + 10, &[]),
            vec![(1, 1, 0)]
        );
    }

    /// Issue 19: a tick reads tenants in the scheduler's order and stops
    /// once as many have a row ready as it may claim rows. Fairness holds
    /// across ticks: the tenants served first stand later in the order, so
    /// the next tick reads (and serves) the others.
    #[test]
    fn a_tick_reads_as_many_ready_tenants_as_it_may_claim_in_the_schedulers_order() {
        let (_dir, store) = watched_store();
        let now = 10_000_000;
        let map = SinkMap::of([("s", 1)]);
        for t in 1..=50u32 {
            let base = u64::from(t) * 100;
            hooks_with_sinks(&store, base..base + 5, t, now - 1_000, 1);
        }
        let s = DispatchSettings {
            max_inflight: 10,
            ..DispatchSettings::default()
        };
        let mut sched = Scheduler::new(Config::default());
        let mut set = ActiveSet::default();
        let mut served: Vec<std::collections::BTreeSet<u32>> = Vec::new();
        for tick in 0..5u64 {
            let cap = u32::try_from(s.per_sink).unwrap();
            let mut room = SinkRoom::new(&map, cap, HashMap::new());
            let plan = plan_tick(
                &store,
                &mut sched,
                &mut set,
                now + tick,
                &s,
                &HashMap::new(),
                0,
                0,
                &Paused::default(),
                &mut room,
            )
            .unwrap();
            assert_eq!(plan.visited, 10, "tick {tick}: read only what it may claim");
            assert_eq!(plan.rows(), 10);
            let tenants: std::collections::BTreeSet<u32> =
                plan.claims.iter().flatten().map(|(r, _)| r.ord).collect();
            assert_eq!(tenants.len(), 10, "one row each: {tenants:?}");
            // Delivered at once: committed, nothing left in flight.
            commit_claims(&store, &plan);
            served.push(tenants);
        }
        let all: std::collections::BTreeSet<u32> = served.iter().flatten().copied().collect();
        assert_eq!(
            all.len(),
            50,
            "five ticks served fifty different tenants: {served:?}"
        );
    }

    /// A tick takes no more rows of a sink than its room, over all tenants.
    #[test]
    fn a_tick_takes_at_most_a_sinks_room_over_all_tenants() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let now = 10_000_000;
        let map = SinkMap::of([("s", 2)]);
        for t in 1..=4u32 {
            let base = u64::from(t) * 100;
            hooks_with_sinks(&store, base..base + 10, t, now - 1_000, 2);
        }
        let mut set = ActiveSet::default();
        let got = plan_with(&store, &mut set, &map, now, &[(SINK0, 61)]);
        assert_eq!(got.iter().filter(|c| c.2 == 0).count(), 3, "{got:?}");
        assert_eq!(got.iter().filter(|c| c.2 == 1).count(), 40, "{got:?}");
    }

    /// A sink with room grants head walks in turn over the tenants waiting
    /// for it, a bounded number a tick, never the same ones every tick.
    #[test]
    fn a_sink_with_room_grants_head_walks_in_turn() {
        let map = SinkMap::of([("s", 2)]);
        let mut set = ActiveSet::default();
        let active: Vec<queries::ActiveTenant> = (1..=20u32)
            .map(|ord| queries::ActiveTenant { ord, bucket: 1 })
            .collect();
        for a in &active {
            set.oldest.insert(a.ord, a.bucket);
            set.skip.insert(
                a.ord,
                Skip {
                    at: 1,
                    seq: 1,
                    sink: 0,
                    waits: SINK0,
                },
            );
        }
        let room = SinkRoom::new(&map, 64, [(SINK0, 63)].into_iter().collect());
        let mut tick = || {
            let mut g: Vec<u32> = set
                .grant_heads(&Paused::default(), &room)
                .into_iter()
                .collect();
            g.sort_unstable();
            g
        };
        assert_eq!(tick(), (1..=8).collect::<Vec<_>>());
        assert_eq!(tick(), (9..=16).collect::<Vec<_>>());
        assert_eq!(tick(), vec![1, 2, 3, 4, 17, 18, 19, 20]);
        // A full sink grants nothing.
        let full = SinkRoom::new(&map, 64, [(SINK0, 64)].into_iter().collect());
        assert!(set.grant_heads(&Paused::default(), &full).is_empty());
    }

    fn ords(set: &ActiveSet) -> Vec<u32> {
        set.pick(100, &Paused::default(), &HashSet::new())
            .iter()
            .map(|a| a.ord)
            .collect()
    }

    #[test]
    fn a_tenant_keeps_only_its_earliest_marker_seconds_between_visits() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let now = 10_000_000;
        // Tenant 1 has rows in 200 seconds: the set keeps the first
        // SEEN_MAX of them, however many there are.
        for i in 0..200u64 {
            due_at(&store, 1 + i, 1, now - 300_000 + i * 1000);
        }
        let mut set = ActiveSet::default();
        set.refresh(&store, now, &Paused::default()).unwrap();
        let first = (now - 300_000) / 1000;
        let want: Vec<u64> = (0..SEEN_MAX as u64).map(|i| first + i).collect();
        assert_eq!(set.visited(1, Some(first)), want);
        // A second earlier than all kept pushes out the latest.
        let mut kept: std::collections::BTreeSet<u64> = want.iter().copied().collect();
        note_seen(&mut kept, first - 1);
        assert_eq!(kept.len(), SEEN_MAX);
        assert_eq!(kept.first(), Some(&(first - 1)));
        assert!(!kept.contains(&(first + SEEN_MAX as u64 - 1)));
    }

    #[test]
    fn the_active_set_walks_a_window_and_resyncs_with_the_whole_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let now = 10_000_000;
        // Tenant 1 has waited an hour; tenant 2 is due now.
        due_at(&store, 1, 1, now - 3_600_000);
        due_at(&store, 2, 2, now);
        let mut set = ActiveSet::default();
        set.refresh(&store, now, &Paused::default()).unwrap();
        assert_eq!(ords(&set), vec![1, 2], "oldest first");
        // A new row: its marker is in the window, found by the next walk. A
        // newer marker of a known tenant never moves it later.
        due_at(&store, 3, 3, now + 50);
        due_at(&store, 5, 1, now + 60);
        set.refresh(&store, now + 100, &Paused::default()).unwrap();
        assert_eq!(ords(&set), vec![1, 2, 3]);
        assert_eq!(
            set.pick(1, &Paused::default(), &HashSet::new())[0].bucket,
            (now - 3_600_000) / 1000
        );
        // A marker written late for a second far behind the window is not
        // in the window...
        due_at(&store, 4, 4, now - (WINDOW_SLACK_S + 60) * 1000);
        set.refresh(&store, now + 200, &Paused::default()).unwrap();
        assert!(!ords(&set).contains(&4));
        // ...and is found by the next whole walk, in its place.
        set.refresh(&store, now + RESYNC_MS, &Paused::default())
            .unwrap();
        assert_eq!(ords(&set), vec![1, 4, 2, 3]);
        // A visit that finds nothing due takes the tenant out; its markers
        // come back to cleanup once, then nothing is remembered.
        let seen = set.visited(2, None);
        assert_eq!(seen, vec![now / 1000]);
        assert_eq!(ords(&set), vec![1, 4, 3]);
        assert!(set.visited(2, None).is_empty());
        // A visit that found rows moves the tenant to its first row's second.
        set.visited(1, Some(now / 1000 - 10));
        assert_eq!(ords(&set), vec![4, 1, 3]);
    }

    /// Issue 19: while the store records its due writes, a tick's walk of
    /// the active index reads the markers from the last walk's second on,
    /// not [`WINDOW_SLACK_S`] seconds more of every tenant's: with 1,000
    /// tenants keeping a marker in every second (a slow sink's backlog) the
    /// re-read was two thirds of a tick's CPU. A row committed late for a
    /// second already walked still brings its tenant in, through the record.
    #[test]
    fn a_recording_store_is_walked_from_the_last_walks_second() {
        let now = 1_800_000_000_000;
        for watched in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::create_or_open(&dir.path().join("s")).unwrap();
            if watched {
                store.watch_due_writes();
            }
            // 50 tenants with a row in each of the last 7 seconds.
            let mut seq = 1;
            for ord in 1..=50u32 {
                for back in 0..7u64 {
                    due_at(&store, seq, ord, now - back * 1000);
                    seq += 1;
                }
            }
            let mut set = ActiveSet::default();
            set.refresh(&store, now, &Paused::default()).unwrap();
            assert_eq!(set.walked, 350, "the first walk reads every marker");
            set.refresh(&store, now + 100, &Paused::default()).unwrap();
            let want = if watched { 50 } else { 300 };
            assert_eq!(set.walked, want, "watched: {watched}");
            // Tenant 60's row, received 10 s ago, commits now.
            due_at(&store, seq, 60, now - 10_000);
            set.refresh(&store, now + 200, &Paused::default()).unwrap();
            assert_eq!(
                ords(&set).contains(&60),
                watched,
                "a late row's tenant comes in through the record (watched: {watched})"
            );
        }
    }

    /// A marker cleanup that fails after the tick's claim: the claimed row
    /// is still handed out for delivery and counted inflight (it used to be
    /// dropped, left inflight until a restart with the count never coming
    /// down), and the tenant stays in the set for the next tick.
    #[test]
    fn a_failed_cleanup_keeps_the_rows_its_tick_claimed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::create_or_open(&dir.path().join("s")).unwrap());
        let settings = super::super::config::Settings::parse(
            "[store]\npath = \"s\"\n[[sources]]\nid = \"s\"\n[[sources.sinks]]\nurl = \"http://127.0.0.1:9/\"\n",
            std::path::Path::new("ankusa.toml"),
            dir.path(),
        )
        .unwrap();
        let now = 1_800_000_000_000;
        due_at(&store, 1, 7, now - 5_000);
        // Tenant 8: a stale marker (its row at now - 3 s already claimed)
        // and a retry due in a minute: its visit finds nothing due now.
        due_at(&store, 2, 8, now - 3_000);
        due_at(&store, 3, 8, now + 60_000);
        let mut b = Batch::new();
        let head = ankusa_store::queries::first_due(&store, 8)
            .unwrap()
            .unwrap();
        transitions::claim(&mut b, &head);
        store.commit(b, false).unwrap();
        let metrics = Arc::new(Metrics::default());
        let clock = crate::clock::FakeClock::at(now);
        let d = Dispatcher::new(store.clone(), clock, &settings, metrics.clone()).unwrap();
        store.arm_fault(
            "cleanup.before_delete",
            Some(ankusa_store::faults::Action::Error),
        );
        let (_, rows) = d.claim().unwrap();
        assert_eq!(rows.len(), 1, "the claimed row is delivered");
        assert_eq!(d.inflight.total(), 1);
        assert_eq!(metrics.dispatch.cleanup_errors.load(Ordering::Relaxed), 1);
        let state = d.sched.lock().unwrap();
        assert_eq!(
            ords(&state.1),
            vec![7, 8],
            "a tenant whose cleanup failed is visited again"
        );
    }

    #[test]
    fn rows_nobody_delivers_go_back_to_due_and_rows_in_delivery_never_do() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::create_or_open(&dir.path().join("s")).unwrap());
        let settings = super::super::config::Settings::parse(
            "[store]\npath = \"s\"\n[[sources]]\nid = \"s\"\n[[sources.sinks]]\nurl = \"http://127.0.0.1:9/\"\n",
            std::path::Path::new("ankusa.toml"),
            dir.path(),
        )
        .unwrap();
        let now = 1_800_000_000_000;
        due_at(&store, 1, 7, now - 5_000);
        let metrics = Arc::new(Metrics::default());
        let clock = crate::clock::FakeClock::at(now);
        let d = Dispatcher::new(store.clone(), clock, &settings, metrics.clone()).unwrap();
        let (_, rows) = d.claim().unwrap();
        assert_eq!(rows.len(), 1);
        // Its delivery ends without its outcome recorded (as spawn_delivery
        // does it): the row is inflight in the store and nobody delivers it.
        d.inflight.done(&rows[0]);
        metrics.dispatch.unrecorded.fetch_add(1, Ordering::SeqCst);
        let (_, again) = d.claim().unwrap();
        assert_eq!(again.len(), 1, "the stranded row is due again and claimed");
        assert_eq!(
            metrics.dispatch.stranded_released.load(Ordering::Relaxed),
            1
        );
        // A reopen asks for a sweep too, and the row now in delivery is
        // left to its delivery.
        store.reopen(Duration::from_secs(5)).unwrap();
        let (_, third) = d.claim().unwrap();
        assert!(third.is_empty(), "the row in delivery was taken from it");
        assert_eq!(
            metrics.dispatch.stranded_released.load(Ordering::Relaxed),
            1
        );
        assert_eq!(
            ankusa_store::queries::node_counters(&store)
                .unwrap()
                .inflight,
            1
        );
    }

    /// What a step of [`no_due_row_waits_for_the_resync`] does.
    #[derive(Debug, Clone)]
    enum Step {
        /// `hooks` hooks of a tenant, each owed to sinks `0..sinks`, due
        /// `late` ms before now: received before a tick that read a later
        /// clock, committed after it (by milliseconds, or seconds when the
        /// disk stalled).
        Ingest {
            ord: u32,
            hooks: u64,
            sinks: u16,
            late: u64,
        },
        Tick,
        /// The `i`-th delivery in flight (modulo) succeeds.
        Deliver(usize),
        /// The `i`-th delivery in flight fails and is due again in `after` ms.
        Retry(usize, u64),
        /// The `i`-th delivery in flight ends with its outcome unrecorded:
        /// the row stays inflight and the next tick returns it to due.
        Lose(usize),
        /// The `i`-th delivery in flight fails for good: dead-lettered.
        Dead(usize),
        /// Every dead row is replayed, due `late` ms before now (the job
        /// read its clock before its commit).
        Replay(u64),
        /// An operator pauses a sink: the walks park its rows.
        Pause(u16),
        /// Every pause is lifted and every parked row made due again, as
        /// the resume job does.
        Resume,
        Advance(u64),
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (1u32..5, 1u64..6, 1u16..4, prop_oneof![3 => 0u64..400, 1 => 5_000u64..9_000]).prop_map(|(ord, hooks, sinks, late)| Step::Ingest { ord, hooks, sinks, late }),
            5 => Just(Step::Tick),
            3 => any::<usize>().prop_map(Step::Deliver),
            2 => (any::<usize>(), 0u64..4_000).prop_map(|(i, after)| Step::Retry(i, after)),
            1 => any::<usize>().prop_map(Step::Lose),
            1 => any::<usize>().prop_map(Step::Dead),
            1 => (0u64..400).prop_map(Step::Replay),
            1 => (0u16..3).prop_map(Step::Pause),
            1 => Just(Step::Resume),
            2 => (1u64..700).prop_map(Step::Advance),
        ]
    }

    /// A dispatcher as the daemon runs it, with deliveries ended by hand.
    struct Rig {
        _dir: tempfile::TempDir,
        store: Arc<Store>,
        clock: Arc<crate::clock::FakeClock>,
        metrics: Arc<Metrics>,
        d: Dispatcher,
        flying: Vec<InflightRow>,
        dead: Vec<(ankusa_store::DeadRow, u32)>,
        next_seq: u64,
    }

    impl Rig {
        /// Tight bounds, so sinks fill, tenants hit their caps, walks stop
        /// at `scan_rows` and skip points and quiet tenants form.
        fn new() -> Rig {
            let dir = tempfile::tempdir().unwrap();
            let store = Arc::new(Store::create_or_open(&dir.path().join("s")).unwrap());
            let settings = super::super::config::Settings::parse(
                "[store]\npath = \"s\"\n\
                 [dispatch]\nmax_inflight = 5\nper_tenant = 3\nper_sink = 2\ntick_rows = 4\nscan_tenants = 3\nscan_rows = 3\n\
                 [[sources]]\nid = \"s\"\n\
                 [[sources.sinks]]\nurl = \"http://127.0.0.1:9/a\"\n\
                 [[sources.sinks]]\nurl = \"http://127.0.0.1:9/b\"\n\
                 [[sources.sinks]]\nurl = \"http://127.0.0.1:9/c\"\n",
                std::path::Path::new("ankusa.toml"),
                dir.path(),
            )
            .unwrap();
            // Tenants t1 to t4, registered as ingest does (ordinals 1 to 4),
            // so the store check knows every ordinal the rows use.
            let alloc = ankusa_store::tenants::TenantAllocator::load(&store, 16).unwrap();
            let mut b = Batch::new();
            let names = ["t1", "t2", "t3", "t4"];
            let res = alloc.resolve(&store, names, &mut b).unwrap();
            for (i, t) in names.iter().enumerate() {
                assert_eq!(res.ord(t, alloc.max()).unwrap() as usize, i + 1);
            }
            store.commit(b, true).unwrap();
            let metrics = Arc::new(Metrics::default());
            let clock = crate::clock::FakeClock::at(1_800_000_000_000);
            let d =
                Dispatcher::new(store.clone(), clock.clone(), &settings, metrics.clone()).unwrap();
            Rig {
                _dir: dir,
                store,
                clock,
                metrics,
                d,
                flying: Vec::new(),
                dead: Vec::new(),
                next_seq: 1,
            }
        }

        fn now(&self) -> u64 {
            crate::clock::Clock::now_ms(&*self.clock)
        }

        fn tick(&mut self) {
            let (_, rows) = self.d.claim().unwrap();
            for (k, n) in self.d.inflight.sinks() {
                assert!(n <= 2, "sink {k:?} has {n} rows in flight, over per_sink");
            }
            self.flying.extend(rows);
        }

        /// Ends the `i`-th delivery in flight as the recorder would.
        fn end(&mut self, i: usize, retry: Option<u64>) {
            if self.flying.is_empty() {
                return;
            }
            let row = self.flying.remove(i % self.flying.len());
            let mut b = Batch::new();
            match retry {
                None => transitions::delivered(&mut b, &row),
                Some(after) => {
                    let delivery = queries::delivery(&self.store, row.seq, row.sink)
                        .unwrap()
                        .unwrap();
                    transitions::retry(&mut b, &row, &delivery, self.now() + after);
                }
            }
            self.store.commit(b, false).unwrap();
            self.d.inflight.done(&row);
        }

        fn run(&mut self, s: &Step) {
            match *s {
                Step::Ingest {
                    ord,
                    hooks,
                    sinks,
                    late,
                } => {
                    let seqs = self.next_seq..self.next_seq + hooks;
                    self.next_seq += hooks;
                    hooks_with_sinks(&self.store, seqs, ord, self.now() - late, sinks);
                }
                Step::Tick => self.tick(),
                Step::Deliver(i) => self.end(i, None),
                Step::Retry(i, after) => self.end(i, Some(after)),
                Step::Lose(i) => {
                    if !self.flying.is_empty() {
                        let row = self.flying.remove(i % self.flying.len());
                        self.d.inflight.done(&row);
                        self.metrics
                            .dispatch
                            .unrecorded
                            .fetch_add(1, Ordering::SeqCst);
                    }
                }
                Step::Dead(i) => {
                    if !self.flying.is_empty() {
                        let row = self.flying.remove(i % self.flying.len());
                        let delivery = queries::delivery(&self.store, row.seq, row.sink)
                            .unwrap()
                            .unwrap();
                        let mut b = Batch::new();
                        let dead =
                            transitions::dead_letter(&mut b, &row, &delivery, self.now(), "s");
                        self.store.commit(b, false).unwrap();
                        self.d.inflight.done(&row);
                        self.dead.push((dead, row.size));
                    }
                }
                Step::Replay(late) => {
                    let mut b = Batch::new();
                    let at = self.now() - late;
                    for (dead, size) in self.dead.drain(..) {
                        transitions::revive(&mut b, &dead, size, at);
                    }
                    self.store.commit(b, true).unwrap();
                }
                Step::Pause(sink) => {
                    let mut b = Batch::new();
                    ankusa_store::pauses::put(
                        &mut b,
                        &ankusa_store::pauses::Pause {
                            scope: ankusa_store::pauses::Scope::sink("s", sink),
                            at: self.now(),
                            origin: ankusa_store::pauses::Origin::Operator,
                            by: "test".into(),
                        },
                    )
                    .unwrap();
                    self.store.commit(b, true).unwrap();
                }
                Step::Resume => self.resume(),
                Step::Advance(ms) => self.clock.advance(ms),
            }
        }

        fn resume(&mut self) {
            let mut b = Batch::new();
            for p in ankusa_store::pauses::list(&self.store).unwrap() {
                ankusa_store::pauses::delete(&mut b, &p.scope).unwrap();
            }
            self.store.commit(b, true).unwrap();
            let mut cursor = UnparkCursor::default();
            while !transitions::unpark_chunk(
                &self.store,
                None,
                &mut cursor,
                self.now(),
                |_, _, _| Ok(true),
                |_, _, _| {},
            )
            .unwrap()
            .done
            {}
        }
    }

    /// Every due row of tenants 1 to 4, whatever its time.
    fn due_rows(store: &Store) -> Vec<DueRow> {
        let mut out = Vec::new();
        let mut bad = Vec::new();
        for ord in 1..5 {
            queries::visit_due(
                store,
                ord,
                DueFrom::At(0),
                u64::MAX,
                100_000,
                &mut bad,
                |r| {
                    out.push(r);
                    ControlFlow::Continue(())
                },
            )
            .unwrap();
        }
        assert!(bad.is_empty());
        out
    }

    /// Issue 19: a lone tenant draining a backlog posted within one second
    /// (its rows share one marker second, so one floor) had every tick's
    /// walk and marker cleanup step over the tombstone of each row claimed
    /// before, until a compaction: 44% of the daemon's CPU in the lone
    /// tenant drain of `bench delivery`, and a drain that slowed as it went.
    /// Visits now start after the last row a tick claimed, so a tick steps
    /// over about as many tombstones as it claims rows, however far the
    /// drain has gone; and the drain still delivers everything, with the
    /// store whole.
    #[test]
    fn a_ticks_reads_do_not_grow_with_the_rows_claimed_before_it() {
        let mut rig = Rig::new();
        let now = rig.now();
        // 600 hooks of one tenant, for sink 0 only, due in one second.
        hooks_with_sinks(&rig.store, 1..601, 1, now - 900, 1);
        rig.next_seq = 601;
        let mut skipped = Vec::new();
        let mut delivered = 0;
        while delivered < 600 && skipped.len() < 1_000 {
            let ((_, rows), n) = ankusa_store::tombstones::skipped_by(|| rig.d.claim().unwrap());
            skipped.push(n);
            rig.flying.extend(rows);
            while !rig.flying.is_empty() {
                rig.end(0, None);
                delivered += 1;
            }
            rig.clock.advance(2);
        }
        assert_eq!(delivered, 600, "the backlog drained");
        // Each tombstone is stepped over a bounded number of times in the
        // whole drain: once by the verify of the marker cleanup that empties
        // the second (it must look at the whole second, for rows a writer
        // put there meanwhile), and hardly ever again. Walking from the
        // floor stepped over every earlier one on every tick (90,300 in
        // all); a cleanup searching from the visit's start rather than past
        // the rows just claimed, over those (1,200).
        let total: u64 = skipped.iter().sum();
        let worst = skipped.iter().max().copied().unwrap_or(0);
        assert!(
            total <= 600 + 60,
            "the drain's ticks stepped over {total} tombstones in all ({} ticks, at most {worst} in one)",
            skipped.len()
        );
        let report = ankusa_store::check::run(&rig.store, |_, _| {}).unwrap();
        assert!(report.ok(), "{:?}", report.mismatches);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Liveness without the backstop: whatever happened before (rows
        /// written late, sinks full, caps reached, walks cut short, retries,
        /// lost outcomes, dead letters replayed late, sinks paused and
        /// resumed, tenants gone quiet), while one sink stays full for
        /// good every row of the other sinks is claimed before the next full
        /// resync ([`RESYNC_MS`]), and so is every row once that sink
        /// recovers. A skip point that hid a row, or a quiet tenant that no
        /// change woke, leaves the row due until the resync and fails this
        /// (breaking the write wake-up, the `until` wake-up, the one-sink
        /// skip point or the late-row drop each did).
        #[test]
        fn no_due_row_waits_for_the_resync(steps in proptest::collection::vec(step(), 1..40)) {
            let mut rig = Rig::new();
            let start = rig.now();
            // The first tick walks the whole index: the resync clock starts.
            rig.tick();
            for s in &steps {
                // Retries and late rows keep their times near now: the
                // steps stay well inside the resync period.
                if matches!(s, Step::Advance(_)) && rig.now() - start > 15_000 {
                    continue;
                }
                rig.run(s);
            }
            // Whatever the dispatcher did so far kept the store whole: the
            // counters equal a fold of the rows, every due row has its marker.
            let report = ankusa_store::check::run(&rig.store, |_, _| {}).unwrap();
            proptest::prop_assert!(report.ok(), "{:?}", report.mismatches);
            rig.resume();
            // Sink 0 turns slow: its deliveries never end, so it stays at
            // its bound, and no room of its grants its waiting tenants a
            // visit. Every other delivery succeeds at once; 50 ms a tick.
            // Every row of the other sinks must still go out: a tenant
            // (under its cap: per_tenant 3 > per_sink 2) whose head waits
            // for sink 0 is woken by its other rows or their time.
            // The last tick allowed is before the resync would read every
            // head again.
            let deadline = start + RESYNC_MS - 1;
            let slow = |r: &InflightRow| r.sink == 0;
            loop {
                while let Some(i) = rig.flying.iter().position(|r| !slow(r)) {
                    rig.end(i, None);
                }
                let waiting: Vec<DueRow> = due_rows(&rig.store)
                    .into_iter()
                    .filter(|r| r.sink != 0 && r.at <= rig.now())
                    .collect();
                let later = due_rows(&rig.store).iter().any(|r| r.sink != 0);
                if waiting.is_empty() && !later {
                    break;
                }
                proptest::prop_assert!(
                    rig.now() + 50 < deadline,
                    "rows of sinks with room still due near the resync: {:?}",
                    waiting
                );
                rig.clock.advance(50);
                rig.tick();
            }
            // Then sink 0 recovers: everything goes out.
            loop {
                while !rig.flying.is_empty() {
                    rig.end(0, None);
                }
                let c = queries::node_counters(&rig.store).unwrap();
                if c.pending + c.scheduled == 0 && c.inflight == 0 {
                    break;
                }
                proptest::prop_assert!(
                    rig.now() + 50 < deadline,
                    "rows still waiting near the resync: {:?}",
                    c
                );
                rig.clock.advance(50);
                rig.tick();
            }
            let report = ankusa_store::check::run(&rig.store, |_, _| {}).unwrap();
            proptest::prop_assert!(report.ok(), "{:?}", report.mismatches);
        }
    }
}
