//! Circuit breakers: a sink that keeps failing is paused automatically,
//! probed with one real delivery after a backoff, and resumed when the probe
//! succeeds (`[sources.sinks.breaker]`; off unless configured).
//!
//! Owns one [`Breaker`] per sink that configures one (the [`Breakers`]
//! board, made at boot from the configuration, so it never grows), and the
//! breaker task that turns their decisions into store pauses.
//!
//! ```text
//! closed --N consecutive failures, or ratio over window--> open (pause, Origin::Breaker)
//! open --backoff over--> half-open --probe delivered--> closed (pause lifted, rows unparked)
//!                                  \--probe failed--> open, backoff doubled up to open_max
//! open / half-open --an operator resumes the sink--> closed (reset)
//! open / half-open --an operator pauses the sink--> closed (the pause is the operator's)
//! ```
//!
//! Invariants:
//! - The breaker pauses and resumes only through the operator core
//!   (`ankusa_ops::pauses::put` with `Origin::Breaker`, and `lift_own`,
//!   which refuses a pause of another origin), so every transition is a
//!   synced, audited store change, and an operator's pause is never lifted
//!   by the breaker.
//! - While open, the sink's rows park (the dispatcher parks a paused
//!   sink's rows), so retries burn no attempts and nothing dead-letters.
//! - Half-open lets exactly one delivery through: the dispatcher claims
//!   one parked row of the sink (a real row, a real attempt counted in its
//!   delivery row) and the breaker waits for that row's outcome alone.
//! - Only retryable failures (timeouts, connection errors, 5xx, 408, 425,
//!   429, and 4xx with `retry_4xx`) count against the sink: a permanent
//!   answer dead-letters its row at once whatever the breaker does, and it
//!   shows the sink answering, so it counts as a success.
//! - The store is the truth: each step of the task reads the sink's pause.
//!   A breaker pause found with the breaker closed (a restart) reopens it
//!   from the pause's time; a pause gone or taken over by an operator
//!   resets it to closed.
//! - State is bounded: a breaker per configured sink, a window of at most
//!   one entry per second of its `window` (an hour at most).

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use ankusa_ops::access::Principal;
use ankusa_ops::model::{BreakerState, BreakerView, Job};
use ankusa_ops::OpsError;
use ankusa_store::pauses::{self, Origin, Scope, SinkRef};
use ankusa_store::transitions::UnparkCursor;
use ankusa_store::Store;
use tokio::sync::{watch, Notify};

use super::clock::SharedClock;
use super::config::{BreakerSection, Source};
use super::job_runner::JobRunner;

/// How often the task looks at the store's pauses when nothing wakes it:
/// the latency of noticing a backoff's end or an operator's resume.
pub const STEP: Duration = Duration::from_millis(100);
/// How long a half-open breaker that found no parked row to probe waits
/// before looking again (new rows of the sink park meanwhile).
pub const SEARCH_AGAIN_MS: u64 = 1_000;
/// Parked rows read per probe search (one per tick at most).
pub const SEARCH_VISIT: usize = 1_000;
/// The name the breaker's pauses, resumes and audit rows carry.
pub const PRINCIPAL: &str = "circuit-breaker";

/// A breaker's rules, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Consecutive failures that open it.
    pub failures: Option<u64>,
    pub ratio: Option<RatioRule>,
    pub open_for: u64,
    pub open_max: u64,
}

/// Opens when `ratio` of the attempts in the last `window_s` seconds failed,
/// once there were `min_attempts`.
#[derive(Debug, Clone, PartialEq)]
pub struct RatioRule {
    pub ratio: f64,
    pub window_s: u64,
    pub min_attempts: u64,
}

impl Policy {
    pub fn of(b: &BreakerSection) -> Policy {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Policy {
            failures: b.failures.map(|f| f.0),
            ratio: b.ratio.map(|r| RatioRule {
                ratio: r.0,
                window_s: b.window.0.as_secs().max(1),
                min_attempts: b.min_attempts.0,
            }),
            open_for: ms(b.open_for.0),
            open_max: ms(b.open_max.0),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed,
    /// Tripped; the task is writing the pause.
    Tripping,
    Open {
        probe_at: u64,
    },
    /// `probe`: the row (seq) whose attempt decides; `search_at`: when the
    /// dispatcher may look for one.
    HalfOpen {
        probe: Option<u64>,
        search_at: u64,
    },
    /// The probe delivered; the task is lifting the pause.
    Closing,
}

/// A change of state, for the log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub from: BreakerState,
    pub to: BreakerState,
    pub why: String,
}

/// What the task must do in the store for a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Pause,
    Lift,
}

/// How a probe or any attempt went, as the breaker counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptResult {
    /// Delivered, or answered for good (a permanent refusal).
    Answered,
    /// A retryable failure.
    Failed,
}

/// One sink's breaker: a pure state machine, the clock passed in.
#[derive(Debug)]
pub struct Breaker {
    policy: Policy,
    state: State,
    opened_at: Option<u64>,
    backoff: u64,
    trips: u64,
    reason: Option<String>,
    streak: u64,
    /// `(second, attempts, failed)`, oldest first, within the ratio window.
    window: VecDeque<(u64, u64, u64)>,
    /// Where the probe search goes on.
    pub search: UnparkCursor,
}

fn public(s: State) -> BreakerState {
    match s {
        State::Closed => BreakerState::Closed,
        State::Tripping | State::Open { .. } | State::Closing => BreakerState::Open,
        State::HalfOpen { .. } => BreakerState::HalfOpen,
    }
}

fn human(ms: u64) -> String {
    humantime::format_duration(Duration::from_millis(ms)).to_string()
}

impl Breaker {
    pub fn new(policy: Policy) -> Breaker {
        Breaker {
            backoff: policy.open_for,
            policy,
            state: State::Closed,
            opened_at: None,
            trips: 0,
            reason: None,
            streak: 0,
            window: VecDeque::new(),
            search: UnparkCursor::default(),
        }
    }

    fn go(&mut self, to: State, why: String) -> Transition {
        let from = public(self.state);
        self.state = to;
        Transition {
            from,
            to: public(to),
            why,
        }
    }

    /// Closed again, counting from nothing.
    fn reset(&mut self, why: String) -> Transition {
        self.streak = 0;
        self.window.clear();
        self.opened_at = None;
        self.backoff = self.policy.open_for;
        self.search = UnparkCursor::default();
        self.go(State::Closed, why)
    }

    /// `(attempts, failed)` in the ratio window ending at `now_s`.
    fn tally(&mut self, now_s: u64, failed: bool) -> (u64, u64) {
        let Some(rule) = &self.policy.ratio else {
            return (0, 0);
        };
        while self
            .window
            .front()
            .is_some_and(|&(s, _, _)| s + rule.window_s <= now_s)
        {
            self.window.pop_front();
        }
        match self.window.back_mut() {
            Some((s, a, f)) if *s == now_s => {
                *a += 1;
                *f += u64::from(failed);
            }
            _ => self.window.push_back((now_s, 1, u64::from(failed))),
        }
        self.window
            .iter()
            .fold((0, 0), |(a, f), &(_, x, y)| (a + x, f + y))
    }

    /// An attempt of row `seq` to the sink ended at `now`.
    pub fn record(&mut self, now: u64, seq: u64, outcome: AttemptResult) -> Option<Transition> {
        let failed = outcome == AttemptResult::Failed;
        match self.state {
            State::Closed => {
                let (attempts, failures) = self.tally(now / 1000, failed);
                if !failed {
                    self.streak = 0;
                    return None;
                }
                self.streak += 1;
                let why = if self.policy.failures.is_some_and(|n| self.streak >= n) {
                    format!("{} consecutive failures", self.streak)
                } else {
                    match &self.policy.ratio {
                        Some(r)
                            if attempts >= r.min_attempts
                                && failures as f64 >= r.ratio * attempts as f64 =>
                        {
                            format!(
                                "{failures} of {attempts} attempts failed in {}",
                                human(r.window_s * 1000)
                            )
                        }
                        _ => return None,
                    }
                };
                self.trips += 1;
                self.opened_at = Some(now);
                self.backoff = self.policy.open_for;
                self.reason = Some(why.clone());
                self.streak = 0;
                self.window.clear();
                Some(self.go(State::Tripping, format!("tripped: {why}")))
            }
            State::HalfOpen { probe: Some(p), .. } if p == seq => {
                if failed {
                    self.backoff = self.backoff.saturating_mul(2).min(self.policy.open_max);
                    let probe_at = now.saturating_add(self.backoff);
                    Some(self.go(
                        State::Open { probe_at },
                        format!("the probe failed; next probe in {}", human(self.backoff)),
                    ))
                } else {
                    Some(self.go(State::Closing, "the probe succeeded".into()))
                }
            }
            // Stragglers claimed before the trip, and attempts other than
            // the probe, decide nothing while the sink is paused.
            _ => None,
        }
    }

    /// The task's step: the sink's pause in the store now (its origin and
    /// time), and what to do about it.
    pub fn step(
        &mut self,
        now: u64,
        pause: Option<(Origin, u64)>,
    ) -> (Option<Action>, Option<Transition>) {
        match (self.state, pause) {
            (State::Closed, Some((Origin::Breaker, at))) => {
                // A breaker pause the breaker does not know: the last run's.
                self.opened_at = Some(at);
                self.backoff = self.policy.open_for;
                let probe_at = at.saturating_add(self.backoff).max(now);
                let t = self.go(
                    State::Open { probe_at },
                    "a breaker pause is in force (from the last run); probing after its backoff"
                        .into(),
                );
                (None, Some(t))
            }
            (State::Closed, _) => (None, None),
            (State::Tripping, _) => (Some(Action::Pause), None),
            (State::Open { .. } | State::HalfOpen { .. }, None) => (
                None,
                Some(self.reset("an operator resumed the sink; breaker reset".into())),
            ),
            (
                State::Open { .. } | State::HalfOpen { .. } | State::Closing,
                Some((Origin::Operator, _)),
            ) => (
                None,
                Some(self.reset(
                    "an operator paused the sink; the breaker leaves the pause to them".into(),
                )),
            ),
            (State::Open { probe_at }, Some((Origin::Breaker, _))) if now >= probe_at => {
                let t = self.go(
                    State::HalfOpen {
                        probe: None,
                        search_at: now,
                    },
                    format!("backoff of {} over; one probe", human(self.backoff)),
                );
                (None, Some(t))
            }
            (State::Open { .. } | State::HalfOpen { .. }, Some((Origin::Breaker, _))) => {
                (None, None)
            }
            (State::Closing, None) => (None, Some(self.reset("the pause is gone; closed".into()))),
            (State::Closing, Some((Origin::Breaker, _))) => (Some(Action::Lift), None),
        }
    }

    /// The pause write for a trip is done: `origin` is who holds the pause
    /// in force now (an operator's pause stays theirs), `at` its time. The
    /// breaker counts itself open from the pause's time, which is what a
    /// restart rebuilds it from.
    pub fn paused(&mut self, at: u64, origin: Origin) -> Option<Transition> {
        if self.state != State::Tripping {
            return None;
        }
        match origin {
            Origin::Breaker => {
                self.opened_at = Some(at);
                let probe_at = at.saturating_add(self.backoff);
                self.state = State::Open { probe_at };
                None
            }
            Origin::Operator => Some(
                self.reset(
                    "an operator had paused the sink already; the breaker leaves the pause to them"
                        .into(),
                ),
            ),
        }
    }

    /// The pause was lifted (or was no longer the breaker's to lift).
    pub fn lifted(&mut self, why: &str) -> Option<Transition> {
        (self.state == State::Closing).then(|| self.reset(why.to_owned()))
    }

    /// Whether the dispatcher should look for a probe row now.
    pub fn wants_probe(&self, now: u64) -> bool {
        matches!(self.state, State::HalfOpen { probe: None, search_at } if now >= search_at)
    }

    /// The dispatcher claimed row `seq` as the probe.
    pub fn probing(&mut self, seq: u64) {
        if let State::HalfOpen {
            probe: None,
            search_at,
        } = self.state
        {
            self.state = State::HalfOpen {
                probe: Some(seq),
                search_at,
            };
        }
    }

    /// The dispatcher found no parked row to probe with.
    pub fn no_probe_row(&mut self, now: u64) {
        if let State::HalfOpen { probe: None, .. } = self.state {
            self.state = State::HalfOpen {
                probe: None,
                search_at: now.saturating_add(SEARCH_AGAIN_MS),
            };
        }
    }

    /// Row `seq`'s delivery ended; if it was the probe and no attempt was
    /// recorded (its hook was gone), another probe is looked for.
    pub fn settled(&mut self, seq: u64) {
        if let State::HalfOpen {
            probe: Some(p),
            search_at,
        } = self.state
        {
            if p == seq {
                self.state = State::HalfOpen {
                    probe: None,
                    search_at,
                };
            }
        }
    }

    pub fn view(&self) -> BreakerView {
        let next_probe_at = match self.state {
            State::Open { probe_at } => Some(probe_at),
            State::Tripping => self.opened_at.map(|a| a.saturating_add(self.backoff)),
            _ => None,
        };
        BreakerView {
            state: public(self.state),
            opened_at: self.opened_at,
            next_probe_at,
            backoff_ms: self.backoff,
            trips: self.trips,
            reason: self.reason.clone(),
        }
    }
}

type BreakerMap = crate::per_sink::PerSink<Arc<Mutex<Breaker>>>;

/// Every configured breaker. The set is replaced whole by a reload
/// ([`Breakers::reconfigure`]); each breaker keeps its state across it.
#[derive(Debug, Default)]
pub struct Breakers {
    sinks: RwLock<Arc<BreakerMap>>,
    /// Wakes the task at once after a trip or a probe's end.
    wake: Notify,
}

fn breaker_map(sources: &[Source], old: &BreakerMap) -> BreakerMap {
    let mut sinks = BreakerMap::default();
    for src in sources {
        for (i, k) in src.sinks.iter().enumerate() {
            if let Some(b) = &k.breaker {
                let i = u16::try_from(i).unwrap_or(u16::MAX);
                let policy = Policy::of(b);
                let m = match old.get(&src.id, i) {
                    Some(m) => {
                        // Same sink, maybe new rules: the state (open, its
                        // backoff, the window) stays.
                        m.lock().unwrap_or_else(PoisonError::into_inner).policy = policy;
                        m.clone()
                    }
                    None => Arc::new(Mutex::new(Breaker::new(policy))),
                };
                sinks.insert(&src.id, i, m);
            }
        }
    }
    sinks
}

impl Breakers {
    /// A breaker for each sink that configures one.
    pub fn new(sources: &[Source]) -> Breakers {
        Breakers {
            sinks: RwLock::new(Arc::new(breaker_map(sources, &BreakerMap::default()))),
            wake: Notify::new(),
        }
    }

    /// The breakers of a reloaded configuration: a sink that keeps its
    /// breaker keeps its state (under the new rules); a sink that gains one
    /// starts closed; one that loses it loses it (a pause it made stays, for
    /// the operator, as at boot).
    pub fn reconfigure(&self, sources: &[Source]) {
        let next = breaker_map(sources, &self.sinks());
        *self.sinks.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
        self.wake.notify_one();
    }

    fn sinks(&self) -> Arc<BreakerMap> {
        self.sinks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn is_empty(&self) -> bool {
        self.sinks().is_empty()
    }

    pub fn has(&self, source: &str, sink: u16) -> bool {
        self.sinks().get(source, sink).is_some()
    }

    fn with<T>(&self, source: &str, sink: u16, f: impl FnOnce(&mut Breaker) -> T) -> Option<T> {
        let map = self.sinks();
        let m = map.get(source, sink)?;
        let mut b = m.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(f(&mut b))
    }

    fn log(source: &str, sink: u16, t: &Transition) {
        tracing::warn!(
            source, sink, from = ?t.from, to = ?t.to, reason = %t.why,
            "circuit breaker"
        );
    }

    /// An attempt of row `seq` to the sink ended (the deliverer, after
    /// every attempt).
    pub fn record(&self, source: &str, sink: u16, seq: u64, outcome: AttemptResult, now: u64) {
        if let Some(Some(t)) = self.with(source, sink, |b| b.record(now, seq, outcome)) {
            Self::log(source, sink, &t);
            self.wake.notify_one();
        }
    }

    /// The sinks whose breaker wants a probe row now.
    pub fn probes_wanted(&self, now: u64) -> Vec<(SinkRef, UnparkCursor)> {
        let mut out = Vec::new();
        for ((src, i), m) in self.sinks().iter() {
            let b = m.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if b.wants_probe(now) {
                out.push((SinkRef::new(src.clone(), *i), b.search));
            }
        }
        out
    }

    /// What the dispatcher's probe search came to: the cursor where it
    /// stopped, and the row it claimed (`None`: nothing found yet; `done`:
    /// the walk found none at all).
    pub fn searched(
        &self,
        source: &str,
        sink: u16,
        cursor: UnparkCursor,
        claimed: Option<u64>,
        done: bool,
        now: u64,
    ) {
        self.with(source, sink, |b| {
            b.search = cursor;
            match claimed {
                Some(seq) => {
                    tracing::warn!(
                        source,
                        sink,
                        seq,
                        "circuit breaker: probing with one parked row"
                    );
                    b.probing(seq);
                }
                None if done => b.no_probe_row(now),
                None => {}
            }
        });
    }

    /// Row `seq` of sink position `sink` left this process's hands.
    pub fn settled(&self, seq: u64, sink: u16) {
        for ((_, i), m) in self.sinks().iter() {
            if *i == sink {
                m.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .settled(seq);
            }
        }
    }

    pub fn view(&self, source: &str, sink: u16) -> Option<BreakerView> {
        self.with(source, sink, |b| b.view())
    }

    /// One pass of the task over every breaker: reads each sink's pause,
    /// writes or lifts pauses as the breakers decide. Returns the unpark
    /// jobs of the pauses lifted, for the job runner.
    pub fn pass(&self, store: &Store, now: u64) -> Vec<Job> {
        let who = principal();
        let mut jobs = Vec::new();
        for ((src, i), m) in self.sinks().iter() {
            let scope = Scope::sink(src, *i);
            let pause = match pauses::get(store, &scope) {
                Ok(p) => p.map(|p| (p.origin, p.at)),
                Err(e) => {
                    tracing::warn!(source = %src, sink = i, error = %e, "circuit breaker: cannot read the sink's pause; next step");
                    continue;
                }
            };
            let lock = || m.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let (action, t) = lock().step(now, pause);
            if let Some(t) = t {
                Self::log(src, *i, &t);
            }
            match action {
                None => {}
                Some(Action::Pause) => {
                    match ankusa_ops::pauses::put(store, &who, scope, Origin::Breaker, now) {
                        Ok(p) => {
                            let origin = p.pause.pause.origin;
                            if origin == Origin::Breaker {
                                tracing::warn!(source = %src, sink = i, "circuit breaker: sink paused; its rows park");
                            }
                            if let Some(t) = lock().paused(p.pause.pause.at, origin) {
                                Self::log(src, *i, &t);
                            }
                        }
                        Err(e) => {
                            tracing::error!(source = %src, sink = i, error = %e, "circuit breaker: cannot pause the sink; next step")
                        }
                    }
                }
                Some(Action::Lift) => {
                    let why = match ankusa_ops::pauses::lift_own(
                        store,
                        &who,
                        scope,
                        Origin::Breaker,
                        now,
                    ) {
                        Ok(r) => {
                            jobs.extend(r.job);
                            "the probe succeeded; sink resumed, its parked rows unpark"
                        }
                        Err(OpsError::Conflict(_)) => {
                            "an operator paused the sink; the breaker leaves the pause to them"
                        }
                        Err(OpsError::NotFound(_)) => "the pause is gone; closed",
                        Err(e) => {
                            tracing::error!(source = %src, sink = i, error = %e, "circuit breaker: cannot resume the sink; next step");
                            continue;
                        }
                    };
                    if let Some(t) = lock().lifted(why) {
                        Self::log(src, *i, &t);
                    }
                }
            }
        }
        jobs
    }

    /// Prometheus series for the sinks with a breaker.
    pub fn render(&self, out: &mut String) {
        let map = self.sinks();
        if map.is_empty() {
            return;
        }
        let snap: Vec<_> = map
            .sorted_keys()
            .into_iter()
            .filter_map(|(src, i)| self.view(src, i).map(|v| ((src, i), v)))
            .collect();
        let name = "ankusa_sink_breaker_state";
        let _ = writeln!(
            out,
            "# HELP {name} The sink's circuit breaker: 0 closed, 1 open, 2 half-open.\n# TYPE {name} gauge"
        );
        for ((src, i), v) in &snap {
            let code = match v.state {
                BreakerState::Closed => 0,
                BreakerState::Open => 1,
                BreakerState::HalfOpen => 2,
            };
            let _ = writeln!(out, "{name}{{source=\"{src}\",sink=\"{i}\"}} {code}");
        }
        let name = "ankusa_sink_breaker_trips_total";
        let _ = writeln!(
            out,
            "# HELP {name} Times the sink's circuit breaker opened (this process).\n# TYPE {name} counter"
        );
        for ((src, i), v) in &snap {
            let _ = writeln!(out, "{name}{{source=\"{src}\",sink=\"{i}\"}} {}", v.trips);
        }
    }
}

/// Who the breaker's pauses and resumes are audited as.
pub fn principal() -> Principal {
    Principal {
        name: PRINCIPAL.into(),
        os_user: None,
        tenant: None,
    }
}

/// Runs the breaker task until `stop`: a pass every [`STEP`], or at once
/// after a trip or a probe's end. It runs even when no sink has a breaker
/// (a pass over none costs nothing), so that a reload can add one.
pub fn start(
    store: Arc<Store>,
    clock: SharedClock,
    breakers: Arc<Breakers>,
    jobs: Arc<JobRunner>,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(STEP);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = every.tick() => {}
                _ = breakers.wake.notified() => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            if breakers.is_empty() {
                continue;
            }
            let (s, b, now) = (store.clone(), breakers.clone(), clock.now_ms());
            match tokio::task::spawn_blocking(move || b.pass(&s, now)).await {
                Ok(started) => {
                    for job in started {
                        jobs.spawn(store.clone(), clock.clone(), job);
                    }
                }
                Err(e) => tracing::error!(error = %e, "circuit breaker pass panicked"),
            }
        }
    })
}

/// Breaker pauses of sinks that no longer configure a breaker: nobody will
/// probe or lift them, so boot names them for an operator.
pub fn orphans(store: &Store, breakers: &Breakers) -> Result<Vec<Scope>, ankusa_store::StoreError> {
    Ok(pauses::list(store)?
        .into_iter()
        .filter(|p| p.origin == Origin::Breaker)
        .filter_map(|p| match (&p.scope.tenant, &p.scope.sink) {
            (None, Some(s)) if !breakers.has(&s.source, s.sink) => Some(p.scope),
            _ => None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_800_000_000_000;

    fn policy() -> Policy {
        Policy {
            failures: Some(3),
            ratio: None,
            open_for: 1_000,
            open_max: 5_000,
        }
    }

    fn state(b: &Breaker) -> BreakerState {
        b.view().state
    }

    /// Trips it (3 failures) and writes its pause: open at `at`.
    fn opened(b: &mut Breaker, at: u64) {
        for s in 0..3 {
            b.record(at, s, AttemptResult::Failed);
        }
        assert_eq!(b.step(at, None), (Some(Action::Pause), None));
        assert_eq!(b.paused(at, Origin::Breaker), None);
    }

    #[test]
    fn consecutive_failures_trip_it_and_a_success_breaks_the_streak() {
        let mut b = Breaker::new(policy());
        assert!(b.record(T0, 1, AttemptResult::Failed).is_none());
        assert!(b.record(T0, 2, AttemptResult::Failed).is_none());
        assert!(
            b.record(T0, 3, AttemptResult::Answered).is_none(),
            "a success resets the streak"
        );
        assert!(b.record(T0, 4, AttemptResult::Failed).is_none());
        assert!(b.record(T0, 5, AttemptResult::Failed).is_none());
        let t = b.record(T0 + 7, 6, AttemptResult::Failed).unwrap();
        assert_eq!((t.from, t.to), (BreakerState::Closed, BreakerState::Open));
        assert!(t.why.contains("3 consecutive failures"), "{}", t.why);
        let v = b.view();
        assert_eq!(
            (v.trips, v.opened_at, v.backoff_ms),
            (1, Some(T0 + 7), 1_000)
        );
        // Until the pause is written it asks for it, whatever the store says.
        assert_eq!(b.step(T0 + 8, None), (Some(Action::Pause), None));
        assert!(
            b.record(T0 + 9, 7, AttemptResult::Failed).is_none(),
            "stragglers decide nothing"
        );
        assert_eq!(b.paused(T0 + 10, Origin::Breaker), None);
        let v = b.view();
        assert_eq!(
            (v.opened_at, v.next_probe_at),
            (Some(T0 + 10), Some(T0 + 1_010)),
            "open from the pause's time, as a restart rebuilds it"
        );
    }

    #[test]
    fn the_ratio_rule_needs_its_minimum_and_forgets_what_left_the_window() {
        let mut b = Breaker::new(Policy {
            failures: None,
            ratio: Some(RatioRule {
                ratio: 0.5,
                window_s: 10,
                min_attempts: 6,
            }),
            open_for: 1_000,
            open_max: 5_000,
        });
        // 3 failures of 4: over the ratio, under the minimum.
        b.record(T0, 1, AttemptResult::Failed);
        b.record(T0, 2, AttemptResult::Answered);
        b.record(T0 + 1_000, 3, AttemptResult::Failed);
        assert!(b.record(T0 + 1_000, 4, AttemptResult::Failed).is_none());
        assert_eq!(state(&b), BreakerState::Closed);
        // 11 s later the first four are gone: 2 failures of 6 is under half.
        for s in 5..9 {
            b.record(T0 + 12_000, s, AttemptResult::Answered);
        }
        b.record(T0 + 12_000, 9, AttemptResult::Failed);
        assert!(b.record(T0 + 12_000, 10, AttemptResult::Failed).is_none());
        // A third failure: 3 of 7 is under half; a fourth, 4 of 8, trips.
        assert!(b.record(T0 + 13_000, 11, AttemptResult::Failed).is_none());
        let t = b.record(T0 + 13_000, 12, AttemptResult::Failed).unwrap();
        assert!(t.why.contains("4 of 8 attempts failed in 10s"), "{}", t.why);
    }

    #[test]
    fn a_failed_probe_doubles_the_backoff_up_to_its_cap_and_a_good_one_closes() {
        let mut b = Breaker::new(policy());
        opened(&mut b, T0);
        let paused = Some((Origin::Breaker, T0));
        // Open until the backoff is over; no probe wanted meanwhile.
        assert_eq!(b.step(T0 + 999, paused), (None, None));
        assert!(!b.wants_probe(T0 + 999));
        let mut now = T0 + 1_000;
        let mut backoffs = Vec::new();
        for probe in 100..105 {
            let (a, t) = b.step(now, paused);
            assert_eq!(a, None);
            assert_eq!(t.unwrap().to, BreakerState::HalfOpen);
            assert!(b.wants_probe(now));
            b.probing(probe);
            assert!(!b.wants_probe(now), "exactly one probe");
            assert!(
                b.record(now, probe + 1000, AttemptResult::Failed).is_none(),
                "only the probe decides"
            );
            let t = b.record(now + 5, probe, AttemptResult::Failed).unwrap();
            assert_eq!((t.from, t.to), (BreakerState::HalfOpen, BreakerState::Open));
            backoffs.push(b.view().backoff_ms);
            now = b.view().next_probe_at.unwrap();
            assert_eq!(b.step(now - 1, paused), (None, None), "still open");
        }
        assert_eq!(backoffs, vec![2_000, 4_000, 5_000, 5_000, 5_000]);
        assert_eq!(b.view().opened_at, Some(T0), "open since the trip");
        assert_eq!(b.view().trips, 1, "a failed probe is no new trip");
        // Recovered: the probe delivers, the pause is lifted, closed.
        b.step(now, paused);
        b.probing(7);
        let t = b.record(now, 7, AttemptResult::Answered).unwrap();
        assert_eq!(t.why, "the probe succeeded");
        assert_eq!(b.step(now, paused), (Some(Action::Lift), None));
        let t = b.lifted("resumed").unwrap();
        assert_eq!((t.from, t.to), (BreakerState::Open, BreakerState::Closed));
        assert_eq!(b.step(now, None), (None, None));
        let v = b.view();
        assert_eq!(
            (v.state, v.opened_at, v.backoff_ms),
            (BreakerState::Closed, None, 1_000)
        );
        // And counts from nothing: two failures do not trip it.
        b.record(now, 1, AttemptResult::Failed);
        assert!(b.record(now, 2, AttemptResult::Failed).is_none());
    }

    #[test]
    fn a_probe_with_no_row_waits_and_an_abandoned_probe_is_replaced() {
        let mut b = Breaker::new(policy());
        opened(&mut b, T0);
        let paused = Some((Origin::Breaker, T0));
        b.step(T0 + 1_000, paused);
        b.no_probe_row(T0 + 1_000);
        assert!(!b.wants_probe(T0 + 1_500));
        assert!(b.wants_probe(T0 + 1_000 + SEARCH_AGAIN_MS));
        b.probing(9);
        b.settled(8);
        assert!(
            !b.wants_probe(T0 + 5_000),
            "another row settling changes nothing"
        );
        b.settled(9);
        assert!(
            b.wants_probe(T0 + 5_000),
            "the probe's hook was gone: another probe"
        );
    }

    #[test]
    fn an_operators_pause_is_left_alone_and_an_operators_resume_resets() {
        // Tripped while an operator's pause is in force: the breaker stands
        // aside (closed), never asks to lift it.
        let mut b = Breaker::new(policy());
        for s in 0..3 {
            b.record(T0, s, AttemptResult::Failed);
        }
        assert_eq!(
            b.step(T0, Some((Origin::Operator, T0 - 5))),
            (Some(Action::Pause), None)
        );
        let t = b.paused(T0, Origin::Operator).unwrap();
        assert_eq!(t.to, BreakerState::Closed);
        for now in [T0 + 1_000, T0 + 100_000] {
            assert_eq!(b.step(now, Some((Origin::Operator, T0 - 5))), (None, None));
        }
        // Open, then an operator takes the pause over: closed, no lift.
        let mut b = Breaker::new(policy());
        opened(&mut b, T0);
        let (a, t) = b.step(T0 + 2_000, Some((Origin::Operator, T0 + 1_500)));
        assert_eq!((a, t.unwrap().to), (None, BreakerState::Closed));
        // Closing when the operator took over: no lift either.
        let mut b = Breaker::new(policy());
        opened(&mut b, T0);
        b.step(T0 + 1_000, Some((Origin::Breaker, T0)));
        b.probing(1);
        b.record(T0 + 1_001, 1, AttemptResult::Answered);
        let (a, t) = b.step(T0 + 1_002, Some((Origin::Operator, T0 + 1_001)));
        assert_eq!((a, t.unwrap().to), (None, BreakerState::Closed));
        // Half-open, and the operator resumes: reset to closed, streak gone.
        let mut b = Breaker::new(policy());
        opened(&mut b, T0);
        b.step(T0 + 1_000, Some((Origin::Breaker, T0)));
        b.probing(1);
        let (a, t) = b.step(T0 + 1_100, None);
        let t = t.unwrap();
        assert_eq!((a, t.to), (None, BreakerState::Closed));
        assert!(t.why.contains("operator resumed"), "{}", t.why);
        assert!(
            b.record(T0 + 1_200, 1, AttemptResult::Failed).is_none(),
            "the old probe is a plain attempt now"
        );
        assert!(b.record(T0 + 1_200, 2, AttemptResult::Failed).is_none());
        assert!(
            b.record(T0 + 1_200, 3, AttemptResult::Failed).is_some(),
            "counting again from nothing"
        );
        assert_eq!(b.view().trips, 2);
    }

    #[test]
    fn a_breaker_pause_found_at_boot_reopens_from_its_time() {
        let mut b = Breaker::new(policy());
        // Paused 400 ms before this process looked: probe 600 ms later.
        let (a, t) = b.step(T0, Some((Origin::Breaker, T0 - 400)));
        assert_eq!((a, t.unwrap().to), (None, BreakerState::Open));
        let v = b.view();
        assert_eq!(
            (v.opened_at, v.next_probe_at, v.trips),
            (Some(T0 - 400), Some(T0 + 600), 0)
        );
        // Paused long ago: the probe may go at once.
        let mut b = Breaker::new(policy());
        b.step(T0, Some((Origin::Breaker, T0 - 3_600_000)));
        assert_eq!(b.view().next_probe_at, Some(T0));
        let (_, t) = b.step(T0, Some((Origin::Breaker, T0 - 3_600_000)));
        assert_eq!(t.unwrap().to, BreakerState::HalfOpen);
        // An operator's pause at boot is theirs: the breaker stays closed.
        let mut b = Breaker::new(policy());
        assert_eq!(b.step(T0, Some((Origin::Operator, T0 - 400))), (None, None));
        assert_eq!(state(&b), BreakerState::Closed);
    }
}
