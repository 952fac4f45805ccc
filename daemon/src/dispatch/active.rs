//! The dispatcher's view of the active index, kept across ticks: which
//! tenants have rows due and since when, where a tenant's run of rows for
//! full sinks ends (skip points), which tenants are quiet, and the last row
//! a tick claimed from each.
//!
//! Invariant: a known tenant's second is never later than its first due
//! row's, so a visit that starts there misses nothing.

use std::collections::{HashMap, HashSet};

use ankusa_store::pauses::Paused;
use ankusa_store::queries::{self, DueFrom};
use ankusa_store::{DueRow, Store, StoreError};

use super::{SinkKey, SinkRoom};

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
    pub(super) oldest: HashMap<u32, u64>,
    /// Marker seconds seen per tenant since its last visit (what marker
    /// cleanup looks at).
    pub(super) seen: HashMap<u32, std::collections::BTreeSet<u64>>,
    pub(super) walked_to: Option<u64>,
    pub(super) full_at: u64,
    /// Where each tenant's run of rows for full sinks ends (see [`Skip`]).
    pub(super) skip: HashMap<u32, Skip>,
    /// Per sink, the last tenant whose head was walked again for it: the
    /// next grants start after it (see [`ActiveSet::grant_heads`]).
    pub(super) granted_after: HashMap<SinkKey, u32>,
    /// Tenants left out of the visits until something changes for them.
    /// See [`ActiveSet::wake`].
    pub(super) quiet: HashMap<u32, Quiet>,
    /// The store generation and pauses the quiet tenants were judged under.
    pub(super) judged: Option<(u64, Paused)>,
    /// Per tenant, the last row of its head a tick claimed: no due row of
    /// the tenant sorts at or before it but those written since, which the
    /// record of due writes reports ([`ActiveSet::wake`] drops the point
    /// then). Visits and marker cleanups start after it. Why: a tenant's
    /// rows due in one second share its floor, and a walk from the floor
    /// stepped over the tombstone of every row claimed before it; a lone
    /// tenant draining a backlog posted within a second spent 44% of the
    /// daemon's CPU doing so, and its drain slowed as it went (issue 19).
    pub(super) claimed_through: HashMap<u32, (u64, u64, u16)>,
    /// Markers the last walk read (what `refresh` costs).
    pub(super) walked: usize,
    /// Per tenant, the source (by index) it is grouped under: the source of
    /// the first head row a visit read since the tenant entered the set
    /// ([`UNCONFIGURED`] for a hook of no configured source). Learned with
    /// at most one hook read per tenant each time it enters the set, kept
    /// while it stays there, forgotten when a visit finds nothing due (or
    /// the full resync does not meet it). A tenant with rows of two sources
    /// is grouped under one of them, whichever its head showed first: its
    /// rows are still one tenant's, under one cap.
    pub(super) homes: HashMap<u32, u32>,
}

/// The group of rows whose source is not configured (any more).
pub const UNCONFIGURED: u32 = u32::MAX;

/// A tenant's head that waits for a full sink: every due row of the tenant
/// at or before (`at`, `seq`, `sink`) belongs to sink `waits`. A visit
/// starts after it instead of walking those rows again, unless that sink
/// has room and grants the tenant a walk of its head
/// ([`ActiveSet::grant_heads`]). The run may begin with the rows that fill
/// the sink's room this tick (offered to the scheduler): if the tick does
/// not claim them the sink still has room, so the next tick walks them
/// again. Each walk reads at most `scan_rows` rows,
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
    pub(super) at: u64,
    pub(super) seq: u64,
    pub(super) sink: u16,
    pub(super) waits: SinkKey,
}

impl Skip {
    pub(super) fn over(row: &DueRow, k: SinkKey) -> Skip {
        Skip {
            at: row.at,
            seq: row.seq,
            sink: row.sink,
            waits: k,
        }
    }

    pub(super) fn after(&self) -> DueFrom {
        DueFrom::After {
            at: self.at,
            seq: self.seq,
            sink: self.sink,
        }
    }
}

impl ActiveSet {
    pub(super) fn refresh(
        &mut self,
        store: &Store,
        now: u64,
        paused: &Paused,
    ) -> Result<(), StoreError> {
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
        if from == 0 {
            // A tenant the full walk did not meet has left the set.
            let oldest = &self.oldest;
            self.homes.retain(|o, _| oldest.contains_key(o));
        }
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
    pub(super) fn wake(&mut self, store: &Store, now: u64, paused: &Paused) -> bool {
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
                        .claimed_through
                        .get(&o)
                        .is_some_and(|&c| (k.at, k.seq, k.sink) <= c)
                    {
                        self.claimed_through.remove(&o);
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

    /// Drops every skip point, quiet tenant and claimed-through point: the next
    /// visits read every head again from its oldest second.
    pub(super) fn forget_heads(&mut self) {
        self.skip.clear();
        self.quiet.clear();
        self.claimed_through.clear();
    }

    /// Where a visit of the tenant's head starts: after its claimed-through point
    /// when that is past `floor` (ms), else at `floor`.
    pub(super) fn start(&self, ord: u32, floor: u64) -> DueFrom {
        match self.claimed_through.get(&ord) {
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
    pub(super) fn pick(
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
    pub(super) fn visited(&mut self, ord: u32, first_due: Option<u64>) -> Vec<u64> {
        match first_due {
            Some(b) => {
                self.oldest.insert(ord, b);
            }
            None => {
                self.oldest.remove(&ord);
                self.homes.remove(&ord);
                self.skip.remove(&ord);
                self.quiet.remove(&ord);
                self.claimed_through.remove(&ord);
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
    pub(super) fn grant_heads(&mut self, paused: &Paused, sinks: &SinkRoom<'_>) -> HashSet<u32> {
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
    pub(super) fn revisit(&mut self, ord: u32, bucket: u64) {
        let e = self.oldest.entry(ord).or_insert(bucket);
        if bucket < *e {
            *e = bucket;
        }
    }
}

/// What a quiet tenant waits for (see [`ActiveSet::wake`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Quiet {
    /// When its next due row comes due (ms; `u64::MAX` for none).
    pub(super) until: u64,
    /// The full sinks its due rows wait for.
    pub(super) waits: Vec<SinkKey>,
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
pub(super) fn note_seen(set: &mut std::collections::BTreeSet<u64>, second: u64) {
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
