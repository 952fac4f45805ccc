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
//! - The scheduler groups tenants by source (`ActiveSet::homes`, learned
//!   from the first head row a visit reads, at most one hook read per
//!   tenant and resync) and weighs each group by its source's `weight`.
//!
//! - Tenant policy and sink limits ([`steer`]) are read from the store
//!   when its policy version moved, so a change applies on the next tick:
//!   a tenant's weight and share go to the scheduler, its cap and rate
//!   bound how many rows its visit reads, a sink's bound and rate its
//!   room ([`SinkRoom`]).
//!
//! The files: [`inflight`] (the accounting the bounds are measured against),
//! [`active`] (the active set, skip points, quiet tenants), [`head`] (one
//! visit of a tenant's head), [`plan`] (the read side of a tick), [`steer`]
//! (policy and rates), this one
//! (the tick loop and the claim), [`reclaim`] (the reclaim task).

mod active;
mod head;
mod held;
mod inflight;
mod plan;
mod reclaim;
mod steer;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ankusa_fairness::{Config, Scheduler};
use ankusa_store::pauses::{Paused, SinkRef};
use ankusa_store::transitions::UnparkCursor;
use ankusa_store::Store;
use ankusa_store::{queries, transitions, Batch, DueRow, InflightRow, StoreError};
use tokio::sync::{watch, Notify};

pub use active::ActiveSet;
use inflight::Inflight;
pub use plan::{plan_tick, InflightNow, TickInput, TickPlan, Visit};
use reclaim::reclaim_loop;
pub use steer::{Steering, TickPolicy, Turn};

use super::breaker;
use super::clock::SharedClock;
pub use super::config::DispatchSettings;
use super::config::Settings;
use super::delivery::{Deliverer, Ended};
use super::error::DaemonError;
use super::metrics::Metrics;
use super::recorder::Recorder;
use super::reload::Live;
use super::sink_control::SinkControl;
pub use super::sink_room::{SinkBounds, SinkKey, SinkMap, SinkRoom};

/// The shortest time between two ticks started by finished deliveries:
/// a slot freed by a delivery is claimed for within this (plus the tick),
/// and a burst of completions costs one tick, not one each.
pub const REFILL_GAP: Duration = Duration::from_millis(2);

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

/// A parked row a sink's breaker probes with: found by the tick's search,
/// claimed in its commit.
struct Probe {
    sink: SinkRef,
    cursor: UnparkCursor,
    row: DueRow,
}

/// The tick loop's state.
pub struct Dispatcher {
    store: Arc<Store>,
    clock: SharedClock,
    settings: DispatchSettings,
    metrics: Arc<Metrics>,
    /// The sinks' breakers (and health), shared with the deliverer.
    control: Arc<SinkControl>,
    sched: Arc<Mutex<(Scheduler, ActiveSet)>>,
    inflight: Arc<Inflight>,
    /// The configured sinks, for counting rows in flight per sink, with
    /// the generation of the live configuration they were built from.
    sinks: Mutex<(u64, Arc<SinkMap>)>,
    live: Arc<Live>,
    deliverer: Arc<Deliverer>,
    /// The store generation and unrecorded count the last stranded-row
    /// sweep covered.
    swept: Mutex<(u64, u64)>,
    /// Signalled when a delivery ends: its slot is refilled at once.
    freed: Notify,
    /// Tenant policies and sink limits, with their rates' buckets.
    steer: Mutex<Steering>,
}

impl Dispatcher {
    /// A dispatcher over `settings`' sources, which never change (the
    /// tests'; the daemon's follows its reloads, [`Dispatcher::with_live`]).
    #[cfg(test)]
    pub fn new(
        store: Arc<Store>,
        clock: SharedClock,
        settings: &Settings,
        metrics: Arc<Metrics>,
    ) -> Result<Self, DaemonError> {
        let live = Arc::new(Live::new(settings));
        let sinks = Arc::new(SinkControl::for_sources(&settings.sources));
        Self::with_live(store, clock, settings, metrics, sinks, live)
    }

    /// A dispatcher that follows `live`'s sources and sinks (a reload
    /// applies at the next tick).
    pub fn with_live(
        store: Arc<Store>,
        clock: SharedClock,
        settings: &Settings,
        metrics: Arc<Metrics>,
        control: Arc<SinkControl>,
        live: Arc<Live>,
    ) -> Result<Self, DaemonError> {
        let d = settings.dispatch.clone();
        let recorder = Recorder::start(store.clone())
            .map_err(DaemonError::io("cannot start the outcome recorder thread"))?;
        let deliverer = Deliverer::new(
            store.clone(),
            clock.clone(),
            metrics.clone(),
            control.clone(),
            live.clone(),
            d.per_sink,
            recorder,
        )
        .map_err(DaemonError::Client)?;
        // Boot returned every inflight row to due: nothing is stranded yet
        // (and no delivery has ended unrecorded).
        let swept = (store.generation(), 0);
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
            control,
            sched: Arc::new(Mutex::new((sched, ActiveSet::default()))),
            inflight: Arc::new(Inflight::default()),
            sinks: Mutex::new((
                live.current().generation,
                Arc::new(SinkMap::new(&settings.sources)),
            )),
            live,
            deliverer: Arc::new(deliverer),
            swept: Mutex::new(swept),
            freed: Notify::new(),
            steer: Mutex::new(Steering::default()),
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

    /// The sinks of `routes` (the tick's one read of the live
    /// configuration), rebuilt when a reload changed it (sources keep their
    /// indices, see [`SinkMap::reconfigured`]).
    fn sink_map(&self, routes: &crate::reload::Routes) -> Arc<SinkMap> {
        let mut m = self.sinks.lock().unwrap_or_else(PoisonError::into_inner);
        if m.0 != routes.generation {
            let next = m.1.reconfigured(
                routes
                    .order
                    .iter()
                    .map(|s| (s.id.as_str(), s.sinks.len(), s.weight)),
            );
            *m = (routes.generation, Arc::new(next));
        }
        m.1.clone()
    }

    /// Plans, claims in one commit, cleans markers. Returns the tenants
    /// visited and the claimed rows.
    fn claim(&self) -> Result<(usize, Vec<InflightRow>), StoreError> {
        let now = self.clock.now_ms();
        // One read of the configuration for the whole tick: the sink map
        // and the limits stamped with its generation come from the same one
        // (a second read could see a reload the first did not).
        let routes = self.live.current();
        let map = self.sink_map(&routes);
        let defaults = routes.tenant_defaults;
        let mut steer = self.steer.lock().unwrap_or_else(PoisonError::into_inner);
        // Before the row lock: reading what policies changed holds no purge
        // up.
        steer.refresh(&self.store, routes.generation, &routes.order, &map)?;
        self.note_policies(&steer);
        // From planning (which reads the due rows) to the claim's commit: a
        // purge must not delete a row this tick is about to claim.
        let rows_guard = ankusa_ops::rowlock::hold();
        let returned = self.release_stranded(now);
        let paused = Paused::load(&self.store)?;
        self.note_pauses(&paused);
        let cap = u32::try_from(self.settings.per_sink).unwrap_or(u32::MAX);
        let mut sinks =
            SinkRoom::new(&map, cap, self.inflight.sinks()).limited(steer.sink_bounds(now));
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
            let input = TickInput {
                store: &self.store,
                now,
                settings: &self.settings,
                paused: &paused,
                inflight: &self.inflight.now(),
                policy: &steer.tick(now, &self.settings, defaults),
            };
            let plan = plan_tick(&input, sched, set, &mut sinks)?;
            self.metrics
                .dispatch
                .tenants_quiet
                .store(set.quiet() as u64, Ordering::Relaxed);
            plan
        };
        let probes = {
            // A probe is a claim like any: within its tenant's cap and
            // rate and its sink's bound and rate, after the plan's claims.
            let policy = steer.tick(now, &self.settings, defaults);
            let mut busy = self.inflight.now().by_tenant;
            for rows in &plan.claims {
                for (r, _) in rows {
                    *busy.entry(r.ord).or_insert(0) += 1;
                }
            }
            let tenant_room =
                |ord: u32| policy.turn(ord).room(busy.get(&ord).copied().unwrap_or(0)) > 0;
            let sink_room =
                |src: &str, sink: u16| map.key(src, sink).is_none_or(|k| sinks.has_room(k));
            self.find_probes(now, &paused, &tenant_room, &sink_room)
        };
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
            for p in &probes {
                claimed.push((
                    transitions::claim(&mut b, &p.row),
                    map.key(&p.sink.source, p.sink.sink),
                ));
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
            // Only rows whose claim committed spend a rate's tokens.
            let mut by_tenant: HashMap<u32, u32> = HashMap::new();
            let mut by_sink: HashMap<SinkKey, u32> = HashMap::new();
            for (r, sink) in &claimed {
                *by_tenant.entry(r.ord).or_insert(0) += 1;
                if let Some(k) = sink {
                    *by_sink.entry(*k).or_insert(0) += 1;
                }
            }
            steer.charge(now, defaults, by_tenant, by_sink);
            if !plan.claimed_through.is_empty() {
                let mut state = self
                    .sched
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                state
                    .1
                    .claimed_through
                    .extend(plan.claimed_through.iter().copied());
            }
            self.metrics
                .dispatch
                .quarantined
                .fetch_add(plan.bad.len() as u64, Ordering::Relaxed);
            self.metrics
                .dispatch
                .parked
                .fetch_add(plan.park.len() as u64, Ordering::Relaxed);
            for p in &probes {
                self.control.breakers.searched(
                    &p.sink.source,
                    p.sink.sink,
                    p.cursor,
                    Some(p.row.seq),
                    false,
                    now,
                );
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
        steer.held.note(
            now,
            &plan.policy_held,
            |ord| match ankusa_store::tenants::name_of(&self.store, ord) {
                Ok(Some(ankusa_store::tenants::Name::Live(id))) => Some(id),
                _ => None,
            },
        );
        self.note_held(&mut steer, now);
        drop(steer);
        drop(rows_guard);
        self.metrics
            .dispatch
            .rate_held
            .fetch_add(plan.rate_held, Ordering::Relaxed);
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

    /// One parked row for each half-open breaker whose sink has room
    /// (`sink_room`: its `max_in_flight` and rate): a row of its sink that
    /// no other pause holds (a paused tenant, or the tenant's own pause of
    /// the sink) and whose tenant has room under its cap and rate
    /// (`tenant_room`), read at most [`breaker::SEARCH_VISIT`] rows a sink.
    /// Claimed in the tick's commit, under the row lock, like any row.
    fn find_probes(
        &self,
        now: u64,
        paused: &Paused,
        tenant_room: &dyn Fn(u32) -> bool,
        sink_room: &dyn Fn(&str, u16) -> bool,
    ) -> Vec<Probe> {
        let breakers = &self.control.breakers;
        if breakers.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (at, mut cursor) in breakers.probes_wanted(now) {
            let (src, sink) = (at.source.as_str(), at.sink);
            if !sink_room(src, sink) {
                continue;
            }
            let found =
                transitions::find_parked(&self.store, &mut cursor, breaker::SEARCH_VISIT, |r| {
                    Ok(r.sink == sink
                        && !paused.tenant(r.ord)
                        && !paused.tenant_sink(r.ord, src, sink)
                        && tenant_room(r.ord)
                        && queries::hook_source(&self.store, r.seq)?.is_some_and(|s| s == src))
                });
            match found {
                Ok(f) => match f.row {
                    Some(row) => out.push(Probe {
                        sink: at,
                        cursor,
                        row,
                    }),
                    None => breakers.searched(src, sink, cursor, None, f.done, now),
                },
                Err(e) => {
                    tracing::warn!(source = %src, sink, error = %e, "cannot look for a probe row; next tick")
                }
            }
        }
        out
    }

    fn note_policies(&self, steer: &Steering) {
        let (t, s) = steer.stored();
        let g = &self.metrics.dispatch.policies;
        g[0].store(t as u64, Ordering::Relaxed);
        g[1].store(s as u64, Ordering::Relaxed);
    }

    /// The metrics' view of the held tenants, rebuilt at most once every
    /// `held::REPORT_MS` (the rebuild walks the whole table).
    fn note_held(&self, steer: &mut Steering, now: u64) {
        if steer
            .held_reported_at
            .is_some_and(|at| now.saturating_sub(at) < held::REPORT_MS)
        {
            return;
        }
        steer.held_reported_at = Some(now);
        let (n, top) = steer.held.report(now, crate::metrics::TOP_TENANTS);
        let m = &self.metrics.dispatch;
        m.policy_held.store(n as u64, Ordering::Relaxed);
        *m.policy_held_top
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = top;
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
        let want = (self.store.generation(), self.inflight.unrecorded_count());
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
            self.control.breakers.settled(row.seq, row.sink);
            // The freed slot is offered to the scheduler now, not at the
            // next periodic tick.
            self.freed.notify_one();
            let m = &self.metrics.dispatch;
            match ended {
                Ended::Delivered => m.delivered.fetch_add(1, Ordering::Relaxed),
                Ended::Retried => m.retried.fetch_add(1, Ordering::Relaxed),
                Ended::Dead => m.dead.fetch_add(1, Ordering::Relaxed),
                Ended::Unrecorded => {
                    self.inflight.note_unrecorded();
                    m.unrecorded.fetch_add(1, Ordering::Relaxed)
                }
            };
            m.inflight.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

#[cfg(test)]
mod tests;
