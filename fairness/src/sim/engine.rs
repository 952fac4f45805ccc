//! The step loop: arrivals, acks and retries, pauses, one scheduler call per step, and
//! the checks every run is held to (legal claims, exactly-once, work conservation).
//!
//! A paused tenant is withheld from the scheduler, the way the dispatcher pauses one:
//! it is not listed, it has no claimable demand in the fair share, and its rows are
//! not claimable for the work-conservation check.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, VecDeque};

use crate::scheduler::{Claim, HeadRow, Limits, RowKind, TenantHead};

use super::policies::Policy;
use super::rng;
use super::scenario::{Change, RetrySpec, Scenario, SizeSpec, SpareSpec, TenantDefaults};

const STREAM_SIZE: u64 = 1;
const STREAM_FAIL: u64 = 2;

/// A tenant as the simulator knows it.
#[derive(Debug, Clone)]
pub struct SimTenant {
    /// Generated name.
    pub name: String,
    /// Role for metrics.
    pub role: String,
    /// Source ordinal (fairness group).
    pub source: u32,
    pub(crate) weight: u32,
    cap: Option<u32>,
    /// Rows per step at most (a token bucket), and the tokens now.
    rate: Option<f64>,
    tokens: f64,
    /// Policy changes still to come, by step.
    changes: Vec<Change>,
    hold: u64,
    size: SizeSpec,
    retry: Option<RetrySpec>,
    refeed: Option<(u32, u64)>,
    /// Pause windows, `[from, until)`.
    pauses: Vec<(u64, u64)>,
    rows_made: u64,
    queue: VecDeque<HeadRow>,
    ids: VecDeque<u64>,
    inflight: u32,
    /// Rows claimed (every attempt counts).
    pub served: u64,
    /// Fair share accumulated step by step (rows).
    pub fair: f64,
    /// Bytes claimed (every attempt counts).
    pub served_bytes: u64,
    /// Fair byte share accumulated step by step: the fluid dominant-resource split of
    /// the step's rows and bytes (see [`drf_fill`]).
    pub fair_bytes: f64,
    /// Step its first row became due.
    pub first_due: Option<u64>,
    /// First-serve delays of its episodes: (returning?, delay). None when never served.
    pub episodes: Vec<(bool, Option<u64>)>,
    episode_open: Option<u64>,
    had_work: bool,
}

/// A rate's bucket holds one step of it, and at least one row.
fn burst(rate: f64) -> f64 {
    rate.max(1.0)
}

impl SimTenant {
    /// Rows its rate lets it claim this step (`u32::MAX` without one).
    fn allowed(&self) -> u32 {
        match self.rate {
            Some(_) => self.tokens.max(0.0).floor() as u32,
            None => u32::MAX,
        }
    }

    /// A step starts: the policy changes due now apply, and the rate's
    /// bucket refills (a new rate starts from what the bucket holds).
    fn step_policy(&mut self, now: u64) {
        for c in self.changes.iter().filter(|c| c.at == now) {
            if let Some(w) = c.weight {
                self.weight = w.max(1);
            }
            if let Some(r) = c.rate {
                self.rate = Some(r);
            }
        }
        if let Some(r) = self.rate {
            // The first step of a tenant starts full (as the daemon's
            // bucket); later steps earn the rate.
            if now > 0 {
                self.tokens = (self.tokens + r).min(burst(r));
            }
        }
    }

    /// Whether any row ever arrived for it.
    pub fn had_work(&self) -> bool {
        self.had_work
    }

    fn idle(&self) -> bool {
        self.queue.is_empty() && self.inflight == 0
    }

    /// Whether its rows are withheld from the scheduler at `now`.
    pub fn paused(&self, now: u64) -> bool {
        self.pauses
            .iter()
            .any(|&(from, until)| from <= now && now < until)
    }

    /// Back from a pause at `now` with rows queued: the time it was paused is nobody's
    /// delay, so an episode still waiting for its first claim restarts its clock now,
    /// and an episode already served gives way to a returning one that starts now.
    fn resume(&mut self, now: u64) {
        if self.paused(now) || self.queue.is_empty() {
            return;
        }
        if !matches!(self.episodes.last(), Some((_, None))) {
            self.episodes.push((true, None));
        }
        self.episode_open = Some(now);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowState {
    Queued,
    Inflight,
    Acked,
    Dead,
}

#[derive(Debug, Clone, Copy)]
struct RowMeta {
    tenant: u32,
    size: u32,
    attempts: u32,
    state: RowState,
    acks: u32,
}

/// Everything a run produced, from which metrics are computed.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Scheduler name.
    pub policy: String,
    /// Tenants, by ordinal.
    pub tenants: Vec<SimTenant>,
    /// Every served row: (step, tenant, wait in steps).
    pub claims: Vec<(u64, u32, u64)>,
    /// The step at which nothing was left and nothing more would arrive.
    pub drain_step: Option<u64>,
    /// Steps with claimable work and unused capacity.
    pub wc_violations: u64,
    /// Illegal claims (not ready, over a cap or a limit, unknown tenant), first few kept.
    pub invalid: Vec<String>,
    /// Count of illegal claims.
    pub invalid_count: u64,
    /// Exactly-once held: no row claimed while not queued, none acked twice, and at
    /// the end of the run (drained or not) every row acked once, dead, queued once or
    /// in flight once.
    pub exactly_once: bool,
    /// Scheduler state size at the end.
    pub state_end: usize,
    /// Largest scheduler state size seen.
    pub state_peak: usize,
    /// The ceiling the scheduler promises, if it has one.
    pub state_bound: Option<usize>,
    /// Fair share of each role taken as one class (max-min between roles), in rows.
    pub role_fair: Vec<(String, f64)>,
    /// Steps run.
    pub steps: u64,
}

struct Sim<'a> {
    sc: &'a Scenario,
    tenants: Vec<SimTenant>,
    sources: HashMap<String, u32>,
    rows: Vec<RowMeta>,
    seq: u64,
    inflight: BinaryHeap<Reverse<(u64, u64)>>,
    inflight_total: u32,
    /// Bytes of the rows in flight, against `capacity.inflight_bytes`.
    inflight_bytes: u64,
    with_queue: BTreeSet<u32>,
    exactly_once: bool,
}

impl<'a> Sim<'a> {
    fn source_id(&mut self, name: &str) -> u32 {
        let n = self.sources.len() as u32;
        *self.sources.entry(name.to_string()).or_insert(n)
    }

    fn add_tenant(
        &mut self,
        name: String,
        role: String,
        s: &TenantDefaults,
        refeed: Option<(u32, u64)>,
        pauses: Vec<(u64, u64)>,
    ) -> u32 {
        let source = self.source_id(s.source.as_deref().unwrap_or("default"));
        self.tenants.push(SimTenant {
            name,
            role,
            source,
            weight: s.weight.unwrap_or(1),
            cap: s.cap,
            rate: s.rate,
            tokens: s.rate.map_or(0.0, burst),
            changes: Vec::new(),
            hold: s.hold.unwrap_or(1),
            size: s.size.clone().unwrap_or(SizeSpec::Fixed(1024)),
            retry: s.retry,
            refeed,
            pauses,
            rows_made: 0,
            queue: VecDeque::new(),
            ids: VecDeque::new(),
            inflight: 0,
            served: 0,
            fair: 0.0,
            served_bytes: 0,
            fair_bytes: 0.0,
            first_due: None,
            episodes: Vec::new(),
            episode_open: None,
            had_work: false,
        });
        (self.tenants.len() - 1) as u32
    }

    fn draw_size(&self, t: u32, k: u64) -> u32 {
        let tn = &self.tenants[t as usize];
        match &tn.size {
            SizeSpec::Fixed(n) => *n,
            SizeSpec::Uniform { min, max } => {
                let span = u64::from(*max - *min) + 1;
                *min + (rng::keyed(self.sc.seed, STREAM_SIZE, u64::from(t), k) % span) as u32
            }
            SizeSpec::Choice { values, weights } => {
                let r = rng::keyed(self.sc.seed, STREAM_SIZE, u64::from(t), k);
                if weights.is_empty() {
                    values[(r % values.len() as u64) as usize]
                } else {
                    let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
                    let mut x = r % total.max(1);
                    for (v, w) in values.iter().zip(weights) {
                        if x < u64::from(*w) {
                            return *v;
                        }
                        x -= u64::from(*w);
                    }
                    values[values.len() - 1]
                }
            }
        }
    }

    fn enqueue(&mut self, t: u32, row: HeadRow, id: u64) {
        let tn = &mut self.tenants[t as usize];
        let key = (row.due_at, row.seq);
        let pos = tn.queue.partition_point(|r| (r.due_at, r.seq) < key);
        tn.queue.insert(pos, row);
        tn.ids.insert(pos, id);
        self.with_queue.insert(t);
    }

    fn arrive(&mut self, t: u32, rows: u32, delay: u64, now: u64) {
        for _ in 0..rows {
            let k = self.tenants[t as usize].rows_made;
            self.tenants[t as usize].rows_made += 1;
            let size = self.draw_size(t, k);
            let id = self.rows.len() as u64;
            self.rows.push(RowMeta {
                tenant: t,
                size,
                attempts: 0,
                state: RowState::Queued,
                acks: 0,
            });
            self.seq += 1;
            let due = now.saturating_add(delay);
            let row = HeadRow {
                due_at: due,
                seq: self.seq,
                size,
                kind: RowKind::First,
            };
            self.enqueue(t, row, id);
            let tn = &mut self.tenants[t as usize];
            tn.had_work = true;
            if tn.first_due.is_none() {
                tn.first_due = Some(due);
            }
            if tn.episode_open.is_none() {
                tn.episode_open = Some(due);
                let returning = !tn.episodes.is_empty();
                tn.episodes.push((returning, None));
            }
        }
    }

    fn complete(&mut self, now: u64) {
        while let Some(Reverse((done, id))) = self.inflight.peek().copied() {
            if done > now {
                break;
            }
            self.inflight.pop();
            let meta = self.rows[id as usize];
            if meta.state != RowState::Inflight {
                self.exactly_once = false;
                continue;
            }
            let t = meta.tenant;
            self.tenants[t as usize].inflight -= 1;
            self.inflight_total -= 1;
            self.inflight_bytes -= u64::from(meta.size);
            let retry = self.tenants[t as usize].retry;
            let failed = retry.is_some_and(|r| {
                r.fail_rate > 0.0
                    && rng::unit(self.sc.seed, STREAM_FAIL, id, u64::from(meta.attempts))
                        < r.fail_rate
            });
            match (failed, retry) {
                (true, Some(r)) if meta.attempts < r.max_attempts => {
                    let shift = meta.attempts.saturating_sub(1).min(40);
                    let backoff = r.backoff.saturating_mul(1 << shift).min(r.backoff_max);
                    self.rows[id as usize].state = RowState::Queued;
                    self.seq += 1;
                    let row = HeadRow {
                        due_at: now.saturating_add(backoff.max(1)),
                        seq: self.seq,
                        size: meta.size,
                        kind: RowKind::Retry,
                    };
                    self.enqueue(t, row, id);
                }
                (true, _) => self.rows[id as usize].state = RowState::Dead,
                (false, _) => {
                    self.rows[id as usize].state = RowState::Acked;
                    self.rows[id as usize].acks += 1;
                    if self.rows[id as usize].acks > 1 {
                        self.exactly_once = false;
                    }
                }
            }
            let tn = &mut self.tenants[t as usize];
            if tn.idle() {
                tn.episode_open = None;
            }
        }
    }
}

impl Sim<'_> {
    /// Exactly-once at the end of a run, drained or not: every row made is in exactly
    /// one place, and that place agrees with its state. Acked once, or dead (never
    /// acked), and then in no queue and not in flight; or still queued, in its
    /// tenant's queue once and not in flight; or in flight once and in no queue.
    fn accounted_once(&self) -> bool {
        let mut queued = vec![0u32; self.rows.len()];
        for (t, tn) in self.tenants.iter().enumerate() {
            for &id in &tn.ids {
                match queued.get_mut(id as usize) {
                    Some(n) if self.rows[id as usize].tenant as usize == t => *n += 1,
                    _ => return false,
                }
            }
        }
        let mut flying = vec![0u32; self.rows.len()];
        for Reverse((_, id)) in self.inflight.iter() {
            match flying.get_mut(*id as usize) {
                Some(n) => *n += 1,
                None => return false,
            }
        }
        self.rows.iter().enumerate().all(|(id, r)| {
            let (q, f) = (queued[id], flying[id]);
            match r.state {
                RowState::Acked => r.acks == 1 && q == 0 && f == 0,
                RowState::Dead => r.acks == 0 && q == 0 && f == 0,
                RowState::Queued => r.acks == 0 && q == 1 && f == 0,
                RowState::Inflight => r.acks == 0 && q == 0 && f == 1,
            }
        })
    }
}

/// Run one scenario under one scheduler.
pub fn run(sc: &Scenario, policy: &mut dyn Policy) -> RunResult {
    let mut sim = Sim {
        sc,
        tenants: Vec::new(),
        sources: HashMap::new(),
        rows: Vec::new(),
        seq: 0,
        inflight: BinaryHeap::new(),
        inflight_total: 0,
        inflight_bytes: 0,
        with_queue: BTreeSet::new(),
        exactly_once: true,
    };

    // Static arrivals, precomputed by step.
    let mut events: BTreeMap<u64, Vec<(u32, u32, u64)>> = BTreeMap::new();
    let mut refeeders: Vec<u32> = Vec::new();
    // Tenants with a rate or policy changes: their bucket moves each step.
    let mut steered: Vec<u32> = Vec::new();
    let mut resumes: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    for spec in &sc.tenants {
        let settings = spec.settings(&sc.defaults);
        let role = spec.role.clone().unwrap_or_else(|| spec.name.clone());
        for i in 0..spec.count {
            let name = if spec.count == 1 {
                spec.name.clone()
            } else {
                format!("{}-{i}", spec.name)
            };
            let refeed = spec
                .refeed
                .map(|r| (r.rows, r.until.unwrap_or(sc.max_steps)));
            let pauses: Vec<(u64, u64)> = spec.pause.iter().map(|p| (p.from, p.until)).collect();
            let t = sim.add_tenant(name, role.clone(), &settings, refeed, pauses);
            if !spec.changes.is_empty() || settings.rate.is_some() {
                sim.tenants[t as usize].changes = spec.changes.clone();
                steered.push(t);
            }
            for p in &spec.pause {
                resumes.entry(p.until).or_default().push(t);
            }
            if refeed.is_some() {
                refeeders.push(t);
            }
            let shift = u64::from(i) * spec.stagger;
            for a in &spec.arrivals {
                if let Some(at) = a.at {
                    events
                        .entry(at + shift)
                        .or_default()
                        .push((t, a.rows, a.delay));
                } else if let Some(every) = a.every {
                    let until = a.until.unwrap_or(sc.max_steps).min(sc.max_steps);
                    let mut s = a.from + shift;
                    while s < until + shift && s < sc.max_steps {
                        events.entry(s).or_default().push((t, a.rows, a.delay));
                        s += every;
                    }
                }
            }
        }
    }
    let last_event = events.keys().next_back().copied();
    let last_fresh = sc.fresh.iter().map(|f| f.until).max();
    let last_refeed = refeeders
        .iter()
        .filter_map(|t| sim.tenants[*t as usize].refeed.map(|r| r.1))
        .max();

    let mut role_names: Vec<String> = Vec::new();
    for t in &sc.tenants {
        role_names.push(t.role.clone().unwrap_or_else(|| t.name.clone()));
    }
    for f in &sc.fresh {
        role_names.push(f.role.clone().unwrap_or_else(|| f.name.clone()));
    }
    role_names.sort();
    role_names.dedup();
    let role_index: HashMap<String, usize> = role_names
        .iter()
        .enumerate()
        .map(|(i, r)| (r.clone(), i))
        .collect();
    let mut role_fair: Vec<f64> = vec![0.0; role_names.len()];

    let mut claims_log: Vec<(u64, u32, u64)> = Vec::new();
    let mut invalid: Vec<String> = Vec::new();
    let mut invalid_count = 0u64;
    let mut wc_violations = 0u64;
    let mut state_peak = policy.state_size();
    let mut drain_step = None;
    let mut steps = 0;
    let mut fresh_serial = 0u64;

    for now in 0..sc.max_steps {
        steps = now + 1;
        sim.complete(now);
        if let Some(evs) = events.remove(&now) {
            for (t, rows, delay) in evs {
                sim.arrive(t, rows, delay, now);
            }
        }
        for f in &sc.fresh {
            if now >= f.from && now < f.until {
                let settings = f.settings(&sc.defaults);
                let role = f.role.clone().unwrap_or_else(|| f.name.clone());
                for _ in 0..f.per_step {
                    fresh_serial += 1;
                    let t = sim.add_tenant(
                        format!("{}-{fresh_serial}", f.name),
                        role.clone(),
                        &settings,
                        None,
                        Vec::new(),
                    );
                    if settings.rate.is_some() {
                        steered.push(t);
                    }
                    sim.arrive(t, f.rows, 0, now);
                }
            }
        }
        for &t in &refeeders {
            let tn = &sim.tenants[t as usize];
            if let Some((rows, until)) = tn.refeed {
                if now < until && tn.idle() {
                    sim.arrive(t, rows, 0, now);
                }
            }
        }

        if let Some(back) = resumes.remove(&now) {
            for t in back {
                sim.tenants[t as usize].resume(now);
            }
        }

        let more_coming = last_event.is_some_and(|s| s > now)
            || last_fresh.is_some_and(|s| s > now + 1)
            || last_refeed.is_some_and(|s| s > now + 1);
        if !more_coming && sim.with_queue.is_empty() && sim.inflight_total == 0 {
            drain_step = Some(now);
            break;
        }

        let room = match sc.capacity.concurrency {
            Some(c) => c.saturating_sub(sim.inflight_total),
            None => u32::MAX,
        };
        let limits = Limits {
            rows: sc.capacity.rows.min(room),
            // As the daemon: what is free under the in-flight bound, at most a step's
            // budget. A step that finds it full claims nothing.
            bytes: sc.capacity.bytes.unwrap_or(u64::MAX).min(
                sc.capacity
                    .inflight_bytes
                    .map_or(u64::MAX, |b| b.saturating_sub(sim.inflight_bytes)),
            ),
        };

        // Heads in the active index's order: oldest head first. Paused tenants are
        // withheld, as the dispatcher withholds them.
        let mut order: Vec<u32> = sim
            .with_queue
            .iter()
            .copied()
            .filter(|&t| !sim.tenants[t as usize].paused(now))
            .collect();
        order.sort_by_key(|t| {
            let r = &sim.tenants[*t as usize].queue[0];
            (r.due_at, r.seq)
        });
        for &t in &order {
            sim.tenants[t as usize].queue.make_contiguous();
        }
        // Policy changes due now, then each rate's tokens for the step.
        for &t in &steered {
            sim.tenants[t as usize].step_policy(now);
        }
        // Per-step fair allocation (weighted max-min) of the rows this step could take.
        let mut byte_demands: Vec<Demand> = Vec::new();
        let demands: Vec<(u32, f64, f64)> = order
            .iter()
            .filter_map(|&t| {
                let tn = &sim.tenants[t as usize];
                let ready = tn.queue.partition_point(|r| r.due_at <= now) as u64;
                // With spare capacity a tenant can use slots up to the ceiling; the
                // max-min split then gives it what nobody else asks for.
                let room = match sc.capacity.spare {
                    Some(sp) => u64::from(sp.ceiling.saturating_sub(tn.inflight)),
                    None => tn
                        .cap
                        .map_or(u64::MAX, |c| u64::from(c.saturating_sub(tn.inflight))),
                };
                let d = ready
                    .min(room)
                    .min(u64::from(limits.rows))
                    .min(u64::from(tn.allowed()));
                if d == 0 {
                    return None;
                }
                let bytes: u64 = tn
                    .queue
                    .iter()
                    .take(d as usize)
                    .map(|r| u64::from(r.size))
                    .sum();
                byte_demands.push(Demand {
                    tenant: t,
                    rows: d as f64,
                    bytes: bytes as f64,
                    weight: f64::from(tn.weight),
                });
                Some((t, d as f64, f64::from(tn.weight)))
            })
            .collect();
        for (t, share) in water_fill(&demands, f64::from(limits.rows)) {
            sim.tenants[t as usize].fair += share;
        }
        let byte_cap = if limits.bytes == u64::MAX {
            f64::INFINITY
        } else {
            limits.bytes as f64
        };
        for (t, bytes) in drf_fill(&byte_demands, f64::from(limits.rows), byte_cap) {
            sim.tenants[t as usize].fair_bytes += bytes;
        }
        // The same split between roles, each role one class: the yardstick when fresh
        // tenants arrive faster than they can be served, where per-tenant max-min has
        // no stable meaning (every minted tenant dilutes everyone else).
        let mut class_demand: Vec<f64> = vec![0.0; role_names.len()];
        for &(t, d, _) in &demands {
            class_demand[role_index[&sim.tenants[t as usize].role]] += d;
        }
        let classes: Vec<(u32, f64, f64)> = class_demand
            .iter()
            .enumerate()
            .filter(|(_, d)| **d > 0.0)
            .map(|(i, d)| (i as u32, *d, 1.0))
            .collect();
        for (c, share) in water_fill(&classes, f64::from(limits.rows)) {
            role_fair[c as usize] += share;
        }

        let show = limits.rows.max(1) as usize;
        let heads: Vec<TenantHead<'_>> = order
            .iter()
            .map(|&t| {
                let tn = &sim.tenants[t as usize];
                let rows = tn.queue.as_slices().0;
                TenantHead {
                    tenant: t,
                    group: tn.source,
                    weight: tn.weight,
                    group_weight: 1,
                    cap: tn.cap,
                    inflight: tn.inflight,
                    rows: &rows[..rows.len().min(show).min(tn.allowed() as usize)],
                }
            })
            .collect();

        let claims = policy.plan(now, &heads, limits);
        drop(heads);
        let (rows_used, bytes_used) = apply(
            &mut sim,
            now,
            &claims,
            limits,
            &mut claims_log,
            &mut invalid,
            &mut invalid_count,
        );

        if rows_used < limits.rows
            && claimable_left(&sim, now, limits, sc.capacity.spare, rows_used, bytes_used)
        {
            wc_violations += 1;
        }
        state_peak = state_peak.max(policy.state_size());
    }

    let role_fair: Vec<(String, f64)> = role_names.into_iter().zip(role_fair).collect();
    let exactly_once = sim.exactly_once && sim.accounted_once();

    RunResult {
        policy: policy.name().to_string(),
        tenants: sim.tenants,
        claims: claims_log,
        drain_step,
        wc_violations,
        invalid,
        invalid_count,
        exactly_once,
        state_end: policy.state_size(),
        state_peak,
        state_bound: policy.state_bound(),
        role_fair,
        steps,
    }
}

fn apply(
    sim: &mut Sim<'_>,
    now: u64,
    claims: &[Claim],
    limits: Limits,
    log: &mut Vec<(u64, u32, u64)>,
    invalid: &mut Vec<String>,
    invalid_count: &mut u64,
) -> (u32, u64) {
    let mut rows_used: u32 = 0;
    let mut bytes_used: u64 = 0;
    let mut borrowed = false;
    let spare = sim.sc.capacity.spare;
    let mut seen: BTreeSet<u32> = BTreeSet::new();
    let mut reject = |msg: String, invalid: &mut Vec<String>| {
        *invalid_count += 1;
        if invalid.len() < 5 {
            invalid.push(format!("step {now}: {msg}"));
        }
    };
    for c in claims {
        if c.rows == 0 {
            continue;
        }
        let Some(tn) = sim.tenants.get(c.tenant as usize) else {
            reject(format!("unknown tenant {}", c.tenant), invalid);
            continue;
        };
        if tn.paused(now) {
            reject(format!("paused tenant {} claimed", tn.name), invalid);
            continue;
        }
        if !seen.insert(c.tenant) {
            reject(format!("tenant {} claimed twice", c.tenant), invalid);
            continue;
        }
        let n = c.rows as usize;
        if tn.queue.len() < n || tn.queue.iter().take(n).any(|r| r.due_at > now) {
            reject(
                format!("tenant {} claimed rows that are not ready", tn.name),
                invalid,
            );
            continue;
        }
        // A cap is hard unless the scenario has spare capacity; then a tenant may go
        // past it (borrow) up to the ceiling, which nobody passes.
        let past_cap = tn.cap.is_some_and(|cap| tn.inflight + c.rows > cap);
        if past_cap && spare.is_none() {
            reject(format!("tenant {} claimed past its cap", tn.name), invalid);
            continue;
        }
        if c.rows > tn.allowed() {
            reject(format!("tenant {} claimed past its rate", tn.name), invalid);
            continue;
        }
        if spare.is_some_and(|sp| tn.inflight + c.rows > sp.ceiling) {
            reject(
                format!("tenant {} claimed past the ceiling", tn.name),
                invalid,
            );
            continue;
        }
        let bytes: u64 = tn.queue.iter().take(n).map(|r| u64::from(r.size)).sum();
        if bytes != c.bytes {
            reject(
                format!("tenant {} claim bytes do not add up", tn.name),
                invalid,
            );
            continue;
        }
        if rows_used + c.rows > limits.rows {
            reject("row limit exceeded".into(), invalid);
            continue;
        }
        let oversize_alone =
            rows_used == 0 && c.rows == 1 && bytes > limits.bytes && limits.bytes > 0;
        if bytes_used + bytes > limits.bytes && !oversize_alone {
            reject("byte budget exceeded".into(), invalid);
            continue;
        }
        rows_used += c.rows;
        bytes_used += bytes;
        borrowed |= past_cap;
        if sim.tenants[c.tenant as usize].rate.is_some() {
            sim.tenants[c.tenant as usize].tokens -= f64::from(c.rows);
        }
        for _ in 0..n {
            let tn = &mut sim.tenants[c.tenant as usize];
            let (Some(row), Some(id)) = (tn.queue.pop_front(), tn.ids.pop_front()) else {
                break;
            };
            tn.inflight += 1;
            tn.served += 1;
            tn.served_bytes += u64::from(row.size);
            if let Some(ep) = tn.episodes.last_mut() {
                if ep.1.is_none() {
                    let start = tn.episode_open.unwrap_or(row.due_at);
                    ep.1 = Some(now.saturating_sub(start));
                }
            }
            let hold = tn.hold;
            let meta = &mut sim.rows[id as usize];
            if meta.state != RowState::Queued {
                sim.exactly_once = false;
            }
            meta.state = RowState::Inflight;
            meta.attempts += 1;
            sim.inflight_total += 1;
            sim.inflight_bytes += u64::from(row.size);
            sim.inflight.push(Reverse((now + hold, id)));
            log.push((now, c.tenant, now.saturating_sub(row.due_at)));
        }
        if sim.tenants[c.tenant as usize].queue.is_empty() {
            sim.with_queue.remove(&c.tenant);
        }
    }
    if let Some(sp) = spare {
        if borrowed && rows_used.saturating_add(sp.reserve) > limits.rows {
            reject("borrowed into the reserve".into(), invalid);
        }
    }
    (rows_used, bytes_used)
}

/// Whether some tenant could still have taken its next row within what is left: under
/// its cap, or, with spare capacity, under the ceiling while more than the reserve is
/// left. Paused tenants have nothing claimable.
fn claimable_left(
    sim: &Sim<'_>,
    now: u64,
    limits: Limits,
    spare: Option<SpareSpec>,
    rows_used: u32,
    bytes_used: u64,
) -> bool {
    if rows_used >= limits.rows {
        return false;
    }
    let bytes_left = limits.bytes.saturating_sub(bytes_used);
    let lendable = spare.is_some_and(|sp| rows_used.saturating_add(sp.reserve) < limits.rows);
    sim.with_queue.iter().any(|&t| {
        let tn = &sim.tenants[t as usize];
        let Some(r) = tn.queue.front() else {
            return false;
        };
        let size = u64::from(r.size);
        let under_ceiling = spare.is_none_or(|sp| tn.inflight < sp.ceiling);
        let under_cap = tn.cap.is_none_or(|c| tn.inflight < c);
        r.due_at <= now
            && !tn.paused(now)
            && tn.allowed() > 0
            && under_ceiling
            && (under_cap || lendable)
            && (size <= bytes_left || (size > limits.bytes && rows_used == 0 && limits.bytes > 0))
    })
}

/// One tenant's claimable work in a step, for [`drf_fill`].
#[derive(Debug, Clone, Copy)]
pub struct Demand {
    /// Tenant ordinal.
    pub tenant: u32,
    /// Rows it could claim this step.
    pub rows: f64,
    /// Bytes of those rows.
    pub bytes: f64,
    /// Its weight.
    pub weight: f64,
}

/// The fluid reference for bytes: a weighted dominant-resource (DRF) split of a step's
/// two resources, `rows` row slots and `bytes` of budget, among `demands`. Each
/// tenant's rows cost it `1/rows` of the slots and `size/bytes` of the budget; its
/// dominant share is the larger. Progressive filling raises every unsaturated tenant's
/// dominant share (over its weight) together until its demand is met or either resource
/// runs out, rows taken as divisible. Returns each tenant's fair bytes.
///
/// This is the yardstick for byte-share metrics. When the budget is what tenants
/// contend for, it is a max-min split of bytes; when one tenant's rows are small and
/// slots run out first, it does not ask big rows to wait for byte parity that leaving
/// the budget idle would be the only way to reach.
pub fn drf_fill(demands: &[Demand], rows: f64, bytes: f64) -> Vec<(u32, f64)> {
    let mut out = Vec::with_capacity(demands.len());
    if demands.is_empty() || rows <= 0.0 || bytes <= 0.0 {
        return out;
    }
    // Per tenant: bytes per row, dominant share per row, and the level at which its
    // demand is met.
    let per: Vec<(f64, f64, f64)> = demands
        .iter()
        .map(|d| {
            let b = if d.rows > 0.0 { d.bytes / d.rows } else { 0.0 };
            let delta = (b / bytes).max(1.0 / rows);
            (b, delta, d.rows * delta / d.weight.max(1e-9))
        })
        .collect();
    let mut idx: Vec<usize> = (0..demands.len()).collect();
    idx.sort_by(|&a, &b| per[a].2.total_cmp(&per[b].2));
    let (mut sat_rows, mut sat_bytes) = (0.0, 0.0);
    let (mut act_rows, mut act_bytes) = (0.0, 0.0);
    for (i, d) in demands.iter().enumerate() {
        act_rows += d.weight / per[i].1;
        act_bytes += d.weight * per[i].0 / per[i].1;
    }
    for (k, &i) in idx.iter().enumerate() {
        let level = per[i].2;
        let fits = sat_rows + level * act_rows <= rows + 1e-9
            && sat_bytes + level * act_bytes <= bytes * (1.0 + 1e-12);
        if fits {
            out.push((demands[i].tenant, demands[i].bytes));
            sat_rows += demands[i].rows;
            sat_bytes += demands[i].bytes;
            act_rows -= demands[i].weight / per[i].1;
            act_bytes -= demands[i].weight * per[i].0 / per[i].1;
            continue;
        }
        // A resource runs out before this tenant's demand is met: everyone left stops
        // at the level where it does.
        let by_rows = (rows - sat_rows) / act_rows;
        let by_bytes = if act_bytes > 0.0 {
            (bytes - sat_bytes) / act_bytes
        } else {
            f64::INFINITY
        };
        let s = by_rows.min(by_bytes).max(0.0);
        for &j in &idx[k..] {
            let x = s * demands[j].weight / per[j].1;
            out.push((demands[j].tenant, x * per[j].0));
        }
        break;
    }
    out
}

/// Weighted max-min fair split of `capacity` among `(tenant, demand, weight)`.
pub fn water_fill(demands: &[(u32, f64, f64)], capacity: f64) -> Vec<(u32, f64)> {
    let mut out: Vec<(u32, f64)> = Vec::with_capacity(demands.len());
    if demands.is_empty() || capacity <= 0.0 {
        return out;
    }
    // Sort by demand per weight: the ones that saturate first are settled first.
    let mut idx: Vec<usize> = (0..demands.len()).collect();
    idx.sort_by(|&a, &b| {
        let ka = demands[a].1 / demands[a].2;
        let kb = demands[b].1 / demands[b].2;
        ka.total_cmp(&kb).then(demands[a].0.cmp(&demands[b].0))
    });
    let mut left = capacity;
    let mut weight_left: f64 = demands.iter().map(|d| d.2).sum();
    for i in idx {
        let (t, d, w) = demands[i];
        let share = if weight_left > 0.0 {
            left * w / weight_left
        } else {
            0.0
        };
        let give = share.min(d);
        out.push((t, give));
        left -= give;
        weight_left -= w;
    }
    out
}

#[cfg(test)]
mod tests;
