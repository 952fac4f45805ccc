//! The schedulers compared, all behind [`Policy`]: ours and six alternatives.
//!
//! The alternatives are written to be the best honest version of each idea (each is
//! work-conserving where the idea allows), so a win against them means something.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet, VecDeque};

use crate::scheduler::{Claim, Config, Limits, Scheduler, TenantHead};

use super::scenario::Scenario;

/// A scheduler the simulator can drive.
pub trait Policy {
    /// Name in the table.
    fn name(&self) -> &'static str;
    /// Decide this step's claims.
    fn plan(&mut self, now: u64, heads: &[TenantHead<'_>], limits: Limits) -> Vec<Claim>;
    /// Remembered entries.
    fn state_size(&self) -> usize;
    /// The ceiling on [`Policy::state_size`] the scheduler promises, if any.
    fn state_bound(&self) -> Option<usize> {
        None
    }
}

/// Name of our scheduler in reports.
pub const OURS: &str = "ours";
/// Name of the global oldest-first baseline.
pub const OLDEST_FIRST: &str = "oldest-first";

/// The scheduler configuration the simulator runs ours with: time is in steps, so the
/// forget horizon is in steps too.
pub fn sim_config() -> Config {
    Config {
        row_overhead_bytes: 1024,
        max_tenants: 100_000,
        forget_after: 200,
        sweep_budget: 32,
        spare: None,
    }
}

/// Every scheduler, ours last, for `sc`: ours runs with the scenario's spare capacity.
/// The alternatives read every cap as hard, as the daemon did before spare capacity.
pub fn all(sc: &Scenario) -> Vec<Box<dyn Policy>> {
    vec![
        Box::new(OldestFirst),
        Box::new(OldestPerTenant),
        Box::new(RoundRobin::default()),
        Box::new(Drr::default()),
        Box::new(NaiveSfq::default()),
        Box::new(SeedFinal::default()),
        Box::new(Ours::new(Config {
            spare: sc.capacity.spare.map(|sp| sp.spare()),
            ..sim_config()
        })),
    ]
}

/// Bookkeeping shared by the alternatives: what each tenant has taken this step and
/// what is left of the limits.
struct Picker<'a, 'h> {
    heads: &'a [TenantHead<'h>],
    now: u64,
    rows_left: u32,
    bytes_left: u64,
    budget: u64,
    total: u32,
    claimed: Vec<u32>,
    order: Vec<usize>,
}

impl<'a, 'h> Picker<'a, 'h> {
    fn new(heads: &'a [TenantHead<'h>], now: u64, limits: Limits) -> Self {
        Picker {
            heads,
            now,
            rows_left: limits.rows,
            bytes_left: limits.bytes,
            budget: limits.bytes,
            total: 0,
            claimed: vec![0; heads.len()],
            order: Vec::new(),
        }
    }

    fn done(&self) -> bool {
        self.rows_left == 0
    }

    /// Ready and under the cap, regardless of bytes.
    fn servable(&self, i: usize) -> bool {
        let h = &self.heads[i];
        let k = self.claimed[i];
        let Some(r) = h.rows.get(k as usize) else {
            return false;
        };
        r.ready(self.now) && h.cap.is_none_or(|c| h.inflight + k < c)
    }

    fn next_size(&self, i: usize) -> Option<u64> {
        let h = &self.heads[i];
        h.rows
            .get(self.claimed[i] as usize)
            .map(|r| u64::from(r.size))
    }

    fn fits(&self, i: usize) -> bool {
        match self.next_size(i) {
            Some(s) => {
                s <= self.bytes_left || (s > self.budget && self.total == 0 && self.budget > 0)
            }
            None => false,
        }
    }

    fn can_take(&self, i: usize) -> bool {
        !self.done() && self.servable(i) && self.fits(i)
    }

    fn take(&mut self, i: usize) -> bool {
        if !self.can_take(i) {
            return false;
        }
        let s = self.next_size(i).unwrap_or(0);
        self.bytes_left = self.bytes_left.saturating_sub(s);
        self.rows_left -= 1;
        self.total += 1;
        if self.claimed[i] == 0 {
            self.order.push(i);
        }
        self.claimed[i] += 1;
        true
    }

    fn claims(self) -> Vec<Claim> {
        self.order
            .iter()
            .map(|&i| {
                let h = &self.heads[i];
                let n = self.claimed[i];
                Claim {
                    tenant: h.tenant,
                    rows: n,
                    bytes: h.rows[..n as usize].iter().map(|r| u64::from(r.size)).sum(),
                }
            })
            .collect()
    }
}

fn byte_cost(size: u64, weight: u32) -> u64 {
    (size + 1024) * 1024 / u64::from(weight.max(1))
}

/// Global oldest-due first, the way a single queue behaves.
pub struct OldestFirst;

impl Policy for OldestFirst {
    fn name(&self) -> &'static str {
        OLDEST_FIRST
    }
    fn plan(&mut self, now: u64, heads: &[TenantHead<'_>], limits: Limits) -> Vec<Claim> {
        let mut p = Picker::new(heads, now, limits);
        let mut rows: Vec<(u64, u64, usize, usize)> = Vec::new();
        for (i, h) in heads.iter().enumerate() {
            for (k, r) in h.rows.iter().enumerate() {
                if r.ready(now) {
                    rows.push((r.due_at, r.seq, i, k));
                }
            }
        }
        rows.sort_unstable();
        let mut blocked = vec![false; heads.len()];
        for (_, _, i, k) in rows {
            if p.done() {
                break;
            }
            // Per-tenant order is kept: once a tenant's row is skipped, so are its later ones.
            if blocked[i] || p.claimed[i] as usize != k {
                continue;
            }
            if !p.take(i) {
                blocked[i] = true;
            }
        }
        p.claims()
    }
    fn state_size(&self) -> usize {
        0
    }
}

/// Oldest head first, one row per tenant per step.
pub struct OldestPerTenant;

impl Policy for OldestPerTenant {
    fn name(&self) -> &'static str {
        "oldest-per-tenant"
    }
    fn plan(&mut self, now: u64, heads: &[TenantHead<'_>], limits: Limits) -> Vec<Claim> {
        let mut p = Picker::new(heads, now, limits);
        let mut idx: Vec<usize> = (0..heads.len()).collect();
        idx.sort_by_key(|&i| heads[i].rows.first().map(|r| (r.due_at, r.seq)));
        for i in idx {
            if p.done() {
                break;
            }
            p.take(i);
        }
        p.claims()
    }
    fn state_size(&self) -> usize {
        0
    }
}

/// Round robin over tenant ordinals, one row per visit, resuming where it stopped.
#[derive(Default)]
pub struct RoundRobin {
    cursor: Option<u32>,
}

impl Policy for RoundRobin {
    fn name(&self) -> &'static str {
        "round-robin"
    }
    fn plan(&mut self, now: u64, heads: &[TenantHead<'_>], limits: Limits) -> Vec<Claim> {
        let mut p = Picker::new(heads, now, limits);
        let mut idx: Vec<usize> = (0..heads.len()).collect();
        idx.sort_by_key(|&i| heads[i].tenant);
        let start = match self.cursor {
            Some(c) => idx.partition_point(|&i| heads[i].tenant <= c),
            None => 0,
        };
        let n = idx.len();
        loop {
            let mut took = false;
            for j in 0..n {
                if p.done() {
                    break;
                }
                let i = idx[(start + j) % n];
                if p.take(i) {
                    took = true;
                    self.cursor = Some(heads[i].tenant);
                }
            }
            if !took || p.done() {
                break;
            }
        }
        p.claims()
    }
    fn state_size(&self) -> usize {
        1
    }
}

/// Deficit round robin with byte deficits. The quantum is one nominal row (1 KiB plus
/// the 1 KiB overhead), so small rows go one per visit, as round robin would, and big
/// rows wait for the deficit they need.
#[derive(Default)]
pub struct Drr {
    list: VecDeque<u32>,
    member: HashSet<u32>,
    deficit: HashMap<u32, u64>,
    mid_visit: Option<u32>,
}

const DRR_QUANTUM: u64 = 2 * 1024 * 1024;

impl Policy for Drr {
    fn name(&self) -> &'static str {
        "drr-bytes"
    }
    fn plan(&mut self, now: u64, heads: &[TenantHead<'_>], limits: Limits) -> Vec<Claim> {
        let mut p = Picker::new(heads, now, limits);
        let mut at: HashMap<u32, usize> = HashMap::with_capacity(heads.len());
        for (i, h) in heads.iter().enumerate() {
            at.insert(h.tenant, i);
            if self.member.insert(h.tenant) {
                self.list.push_back(h.tenant);
            }
        }
        let mut idle_visits = 0usize;
        let limit = (self.list.len() + 1) * 600;
        while !p.done() && idle_visits < limit {
            let Some(t) = self.list.pop_front() else {
                break;
            };
            let Some(&i) = at.get(&t) else {
                // Drained: standard DRR drops the flow and its deficit.
                self.member.remove(&t);
                self.deficit.remove(&t);
                if self.mid_visit == Some(t) {
                    self.mid_visit = None;
                }
                continue;
            };
            if !p.servable(i) {
                self.list.push_back(t);
                idle_visits += 1;
                continue;
            }
            let d = self.deficit.entry(t).or_insert(0);
            if self.mid_visit != Some(t) {
                *d += DRR_QUANTUM * u64::from(heads[i].weight.max(1)) / 1024;
            }
            self.mid_visit = None;
            let mut took = false;
            while let Some(s) = p.next_size(i) {
                let c = byte_cost(s, 1) / 1024;
                if c > *d || !p.can_take(i) {
                    break;
                }
                p.take(i);
                *d -= c;
                took = true;
            }
            // Out of rows mid-visit: the visit resumes next step with what is left of
            // the deficit (the head slice may hide more rows, so it is not a drain).
            if p.done() {
                self.list.push_front(t);
                self.mid_visit = Some(t);
                break;
            }
            self.list.push_back(t);
            idle_visits = if took { 0 } else { idle_visits + 1 };
        }
        p.claims()
    }
    fn state_size(&self) -> usize {
        self.list.len() + self.deficit.len()
    }
}

/// Textbook start-time fair queueing done naively: a new tenant starts at the floor
/// (the lowest tag on record), a drained tenant's tag is forgotten, ties go by id.
#[derive(Default)]
pub struct NaiveSfq {
    tags: HashMap<u32, u64>,
}

impl Policy for NaiveSfq {
    fn name(&self) -> &'static str {
        "naive-sfq"
    }
    fn plan(&mut self, now: u64, heads: &[TenantHead<'_>], limits: Limits) -> Vec<Claim> {
        let present: HashSet<u32> = heads.iter().map(|h| h.tenant).collect();
        self.tags.retain(|t, _| present.contains(t));
        let floor = self.tags.values().copied().min().unwrap_or(0);
        for h in heads {
            self.tags.entry(h.tenant).or_insert(floor);
        }
        let mut p = Picker::new(heads, now, limits);
        let mut heap: BinaryHeap<Reverse<(u64, u32, usize)>> = BinaryHeap::new();
        for (i, h) in heads.iter().enumerate() {
            if p.servable(i) {
                heap.push(Reverse((self.tags[&h.tenant], h.tenant, i)));
            }
        }
        while let Some(Reverse((_, t, i))) = heap.pop() {
            if p.done() {
                break;
            }
            let Some(s) = p.next_size(i) else { continue };
            if !p.take(i) {
                continue;
            }
            let tag = self.tags.entry(t).or_insert(0);
            *tag += byte_cost(s, heads[i].weight);
            if p.servable(i) {
                heap.push(Reverse((*tag, t, i)));
            }
        }
        p.claims()
    }
    fn state_size(&self) -> usize {
        self.tags.len()
    }
}

/// The seed's final design, reimplemented: per-tenant tags; a monotonic floor raised
/// to the lowest tag served in pass 1; drained tenants' tags parked (reaped at the
/// floor, rank-capped); newcomers one quantum behind the highest tag on record; pass 1
/// walks tags in order serving one row per tenant, stepping over gated and not-ready
/// tenants without spending its window but reading at most twice the window; pass 2
/// serves and repairs in age order. Ties go by tenant id, as a sorted set's member
/// order would.
#[derive(Default)]
pub struct SeedFinal {
    vtime: BTreeSet<(u64, u32)>,
    tag: HashMap<u32, u64>,
    idle: BTreeSet<(u64, u32)>,
    idle_tag: HashMap<u32, u64>,
    floor: u64,
}

const SEED_QUANTUM: u64 = 1024;
const SEED_IDLE_MAX: usize = 10_000;

impl SeedFinal {
    fn set_tag(&mut self, t: u32, tag: u64) {
        if let Some(old) = self.tag.insert(t, tag) {
            self.vtime.remove(&(old, t));
        }
        self.vtime.insert((tag, t));
    }

    fn park(&mut self, t: u32) {
        if let Some(tag) = self.tag.remove(&t) {
            self.vtime.remove(&(tag, t));
            if tag > self.floor {
                if let Some(old) = self.idle_tag.insert(t, tag) {
                    self.idle.remove(&(old, t));
                }
                self.idle.insert((tag, t));
            }
        }
    }
}

impl Policy for SeedFinal {
    fn name(&self) -> &'static str {
        "seed-final"
    }
    fn plan(&mut self, now: u64, heads: &[TenantHead<'_>], limits: Limits) -> Vec<Claim> {
        let mut at: HashMap<u32, usize> = HashMap::with_capacity(heads.len());
        for (i, h) in heads.iter().enumerate() {
            at.insert(h.tenant, i);
        }
        // Enqueue-side registration: parked tag, else one quantum behind the highest.
        for h in heads {
            if self.tag.contains_key(&h.tenant) {
                continue;
            }
            let tag = if let Some(&idle) = self.idle_tag.get(&h.tenant) {
                idle.max(self.floor)
            } else {
                let live_max = self
                    .vtime
                    .iter()
                    .next_back()
                    .map(|x| x.0)
                    .filter(|m| *m > self.floor);
                let highest = live_max.or_else(|| self.idle.iter().next_back().map(|x| x.0));
                match highest {
                    Some(m) => self.floor.max(m + SEED_QUANTUM),
                    None => self.floor,
                }
            };
            self.set_tag(h.tenant, tag);
        }

        let mut p = Picker::new(heads, now, limits);
        let window = limits.rows as usize;
        let scan_limit = 2 * window;
        let mut attempted: HashSet<u32> = HashSet::new();
        let mut min_servable: Option<u64> = None;
        let snapshot: Vec<(u64, u32)> = self.vtime.iter().take(scan_limit).copied().collect();
        let mut slots = 0usize;
        for (tag, t) in snapshot {
            if p.done() || slots >= window {
                break;
            }
            let Some(&i) = at.get(&t) else {
                self.park(t);
                continue;
            };
            if !p.servable(i) {
                continue;
            }
            slots += 1;
            attempted.insert(t);
            min_servable = Some(min_servable.map_or(tag, |m: u64| m.min(tag)));
            if let Some(s) = p.next_size(i) {
                let _ = s;
                if p.take(i) {
                    let next =
                        tag.max(self.floor) + SEED_QUANTUM / u64::from(heads[i].weight.max(1));
                    self.set_tag(t, next);
                }
            }
        }
        if let Some(m) = min_servable {
            self.floor = self.floor.max(m);
        }

        // Pass 2: age order, always runs; repairs registration at the floor.
        let mut idx: Vec<usize> = (0..heads.len()).collect();
        idx.sort_by_key(|&i| {
            (
                heads[i].rows.first().map(|r| (r.due_at, r.seq)),
                heads[i].tenant,
            )
        });
        let window2 = (limits.rows as usize * 3).max(1);
        for &i in idx.iter().take(window2) {
            let t = heads[i].tenant;
            if !self.tag.contains_key(&t) {
                let f = self.floor;
                self.set_tag(t, f);
            }
            if p.done() || attempted.contains(&t) {
                continue;
            }
            attempted.insert(t);
            if p.take(i) {
                let tag = self.tag.get(&t).copied().unwrap_or(self.floor);
                let next = tag.max(self.floor) + SEED_QUANTUM / u64::from(heads[i].weight.max(1));
                self.set_tag(t, next);
            }
        }

        // A tenant whose whole queue was claimed drains.
        for (i, h) in heads.iter().enumerate() {
            if p.claimed[i] as usize == h.rows.len() && h.rows.len() < limits.rows.max(1) as usize {
                self.park(h.tenant);
            }
        }
        // Reap parked tags at or below the floor, then the rank cap.
        while let Some(&(tag, t)) = self.idle.iter().next() {
            if tag > self.floor && self.idle.len() <= SEED_IDLE_MAX {
                break;
            }
            self.idle.remove(&(tag, t));
            self.idle_tag.remove(&t);
        }
        p.claims()
    }
    fn state_size(&self) -> usize {
        self.tag.len() + self.idle_tag.len()
    }
}

/// Ours: [`Scheduler`].
pub struct Ours(Scheduler);

impl Ours {
    /// Ours with `cfg`.
    pub fn new(cfg: Config) -> Self {
        Ours(Scheduler::new(cfg))
    }
}

impl Policy for Ours {
    fn name(&self) -> &'static str {
        OURS
    }
    fn plan(&mut self, now: u64, heads: &[TenantHead<'_>], limits: Limits) -> Vec<Claim> {
        self.0.plan(now, heads, limits)
    }
    fn state_size(&self) -> usize {
        self.0.state_size()
    }
    fn state_bound(&self) -> Option<usize> {
        Some(2 * self.0.config().max_tenants)
    }
}
