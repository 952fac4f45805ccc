//! The fair scheduler the dispatcher asks, once per tick, which rows to claim.
//!
//! It is pure: the caller hands it the tenants it found with work (their head rows,
//! in-flight counts, caps and weights) and the tick's limits, and gets back how many
//! head rows to claim from which tenant. It does no I/O and reads no clock; `now` is a
//! parameter in whatever unit the caller's due times use (milliseconds in the daemon,
//! integer steps in the simulator).
//!
//! # Design: two-level start-time fair queueing
//!
//! Every tenant carries a virtual-time tag; claiming a row advances it by the row's
//! cost divided by the tenant's weight. The cost is the row's dominant resource of the
//! tick: its bytes, or its row slot's share of the byte budget, whichever is larger, so
//! bytes and requests are both accounted. Tenants are grouped (by the caller: the
//! daemon and the simulator group by source) and groups carry tags of their own,
//! advanced by the row's cost divided by the group's weight: the scheduler
//! first picks the group with the lowest tag, then the tenant with the lowest tag inside
//! it. With one group this is plain SFQ over tenants; with several, a source that mints
//! a fresh tenant per request cannot out-vote a source carrying one legitimate tenant.
//! Deficit round robin was measured against this design (`docs/fairness.md`) and lost
//! on every newcomer and minting scenario, because a round that grows with every
//! arrival starves the tenants already in it.
//!
//! # Invariants, and why each exists
//!
//! * **The floor only moves up, and only from claims.** Each level keeps a floor: the
//!   start tag of the latest claim. A tenant that cannot be served this tick (head not
//!   ready, at its concurrency cap) takes no part in it, so it cannot pin it; it keeps
//!   its entry and its tag, and when it becomes servable it competes at
//!   `max(tag, floor)`: at the front, with no hoarded credit.
//! * **Unservable tenants are skipped, never spent.** They are filtered before
//!   selection, so they consume neither the row limit nor the byte budget, and a row
//!   that does not fit the remaining bytes skips only its tenant for this tick.
//! * **A tenant skipped for bytes keeps its lag.** It was backlogged and owed that
//!   claim, so on the next tick it competes at the floor it had when it was skipped,
//!   not at the one the others' claims raised meanwhile (at most its skipped row's cost
//!   lower than the group's floor then). Otherwise a tenant of large rows, skipped on
//!   most ticks, would lose its lag on every one and get one row a tick whatever its
//!   share.
//! * **Tags outlive a drain.** A tenant that vanishes from the input keeps its entry;
//!   when it comes back it resumes at `max(tag, floor)`, so draining and refilling
//!   cannot reset it to the front of the order. Nothing needs to report a drain, so a
//!   missed callback cannot hand out credit. A paused tenant is one the caller leaves
//!   out of the input: it is absent like a drained one, so it holds no floor and costs
//!   no one a turn, and back it competes at `max(tag, floor)`, with no credit for its
//!   paused time and no penalty either.
//! * **Newcomers form one line.** A never-seen tenant joins at the floor, behind every
//!   tenant already waiting there (ties break on who waited longest). When the group
//!   already has established tenants, each further newcomer that is still waiting for
//!   its first claim stacks one row-cost behind the previous one, so a stream of fresh
//!   tenants behaves like one more tenant rather than an unbounded crowd that pins the
//!   floor. A simultaneous burst with no one established stays level: there is no one
//!   to protect and stacking would serialise them. Established means served before
//!   and servable now; a tenant at its cap is not protected by a line it cannot use.
//!   The line has no cap to pile up on, and it collapses back to the floor as soon as
//!   no newcomer is waiting.
//! * **Ties break on a serial stamp**, taken at registration, at every claim, and when
//!   a tenant comes back with a row due after a tick with none: the tenant that has
//!   waited longest with work due goes first, after any tenant never served at that
//!   tag (max-min serves the least served first; a newcomer stacked one row behind a
//!   burst would otherwise also wait behind the burst's members served once). Never the tenant id or name, and there
//!   is no second pass in due-time order.
//! * **State is bounded.** Entries live in a hash map with an LRU sweep queue holding
//!   exactly one slot per entry. Each tick sweeps a budget proportional to its input;
//!   an entry unseen for `forget_after` whose tag is at or below its floor (so
//!   forgetting it gives nothing away) is removed, one still in debt only after four
//!   horizons, and past `max_tenants` the least recently queued entry is evicted.
//! * **A tick costs O(h log h)** for h input tenants plus the sweep budget: it never
//!   walks remembered state, the backlog, or tenants that have nothing due.
//! * **Caps lend only what nobody under their cap can use** (with [`Config::spare`]).
//!   A first pass serves tenants under their cap; only the rows it leaves go, in a
//!   second pass with the same tags and charges, to tenants at their cap, up to the
//!   ceiling and never into the reserve. So a lone tenant uses the node's idle slots,
//!   and a tenant that arrives takes every freed slot before a borrower gets another,
//!   up to its own cap; from there both compete by tag. Nothing in flight is taken back.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};

/// Kind of a delivery row, as stored in the active index (`D` key's `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum RowKind {
    /// First attempt.
    First,
    /// A retry after a failed attempt.
    Retry,
}

/// One head row of a tenant, in the order the tenant's rows must be claimed (due time,
/// then commit sequence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadRow {
    /// When the row becomes claimable, in the caller's time unit.
    pub due_at: u64,
    /// The store's commit sequence; ignored by this scheduler (it never orders by age)
    /// but kept so baselines and callers can.
    pub seq: u64,
    /// Body size in bytes, charged against the byte budget and the tenant's tag.
    pub size: u32,
    /// First attempt or retry; informational.
    pub kind: RowKind,
}

impl HeadRow {
    /// Whether the row may be claimed at `now`.
    pub fn ready(&self, now: u64) -> bool {
        self.due_at <= now
    }
}

/// A tenant with work, as the dispatcher found it this tick.
#[derive(Debug, Clone, Copy)]
pub struct TenantHead<'a> {
    /// Dense tenant ordinal.
    pub tenant: u32,
    /// Fairness group: groups are served fairly first and their tenants second (the
    /// daemon and the simulator's sybil scenario group by source). Use 0 when unused.
    pub group: u32,
    /// Relative share within the group, at least 1 (0 is read as 1).
    pub weight: u32,
    /// The group's relative share among the groups, at least 1 (0 is read as 1).
    /// Every tenant of a group names the same; a claim charges the group at the
    /// weight its tenant gave.
    pub group_weight: u32,
    /// Per-tenant concurrency cap; `None` is unlimited.
    pub cap: Option<u32>,
    /// Rows of this tenant currently in flight.
    pub inflight: u32,
    /// Head rows in claim order. Only the ready prefix is ever claimed.
    pub rows: &'a [HeadRow],
}

impl TenantHead<'_> {
    fn cap_room(&self) -> u32 {
        match self.cap {
            Some(c) => c.saturating_sub(self.inflight),
            None => u32::MAX,
        }
    }
}

/// Limits of one tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Rows that may be claimed (the caller folds global concurrency room into this).
    pub rows: u32,
    /// Bytes that may be claimed. A single row larger than the whole budget is claimed
    /// alone on a tick that claims nothing else, so it cannot be stuck forever; a
    /// budget of 0 claims nothing. A caller with a bound on bytes in flight passes the
    /// bytes still free under it (at most its per-tick budget), so claims follow what
    /// deliveries free and the tag order decides who gets it (rule 5).
    pub bytes: u64,
}

/// What `plan_fitting` asks before a claim: the tenant's `k`-th head row, its
/// `size`, and the most bytes the claim may take (`room`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    pub tenant: u32,
    pub k: usize,
    pub size: u32,
    pub room: u64,
}

/// Claim the first `rows` head rows of `tenant` (the caller's due rows, in order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    /// Tenant ordinal.
    pub tenant: u32,
    /// How many rows to take from the front of the tenant's head rows.
    pub rows: u32,
    /// Total bytes of those rows.
    pub bytes: u64,
}

/// Scheduler configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Smallest cost of a row, in bytes, so tiny rows are not free when the byte
    /// budget is unlimited (and a row's slot share is then nothing).
    pub row_overhead_bytes: u64,
    /// Ceiling on remembered tenants (and, separately, on remembered groups).
    pub max_tenants: usize,
    /// How long, in the caller's time unit, an unseen entry is kept before the sweep
    /// may forget it (only if forgetting gives it no credit).
    pub forget_after: u64,
    /// Sweep steps taken per tick on top of one per input tenant.
    pub sweep_budget: usize,
    /// Work-conserving caps: whether, and how far, a tenant at its `cap` may use rows
    /// of the tick nobody under their cap can take. `None`: every cap is hard.
    pub spare: Option<Spare>,
}

/// Spare capacity: what a tenant at its [`TenantHead::cap`] may still claim.
///
/// The cap becomes the tenant's guaranteed concurrency instead of its limit. Once
/// every tenant under its cap has taken what it can this tick, rows still left go to
/// tenants at their cap (in the same tag order, charged the same way), while the
/// tenant's in-flight rows stay under `ceiling` and at least `reserve` of the tick's
/// rows stay unclaimed. When another tenant arrives it is served first, up to its own
/// cap, from the next rows freed; borrowed rows in flight are never taken back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spare {
    /// Hard limit on one tenant's in-flight rows, cap or no cap (the sink's or the
    /// node's own limit). A ceiling at or below a tenant's cap leaves it nothing to
    /// borrow.
    pub ceiling: u32,
    /// Rows of each tick's [`Limits::rows`] that borrowing leaves for tenants under
    /// their cap. The caller folds the node's free slots into `Limits::rows`, so this
    /// many slots stay free for a tenant that arrives while another has borrowed the
    /// rest: it is served on the next tick instead of after a borrowed row finishes.
    pub reserve: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            row_overhead_bytes: 1024,
            // Matches the store's default `tenants.max`, so eviction only happens on a
            // node that is already refusing new tenants.
            max_tenants: 1_000_000,
            forget_after: 600_000,
            sweep_budget: 32,
            spare: None,
        }
    }
}

/// Unseen for this many `forget_after` horizons, a tenant's remaining debt is dropped.
const DEBT_FORGIVEN_AFTER: u64 = 4;

/// Tags are bytes scaled by this, so integer division by a weight keeps precision.
const TAG_SCALE: u64 = 1024;

#[derive(Debug, Clone, Copy, Default)]
struct Floorline {
    floor: u64,
    /// Start tag of the newest newcomer on the line.
    line_start: u64,
    /// Where the next stacked newcomer starts: the newest newcomer's finish tag.
    line_end: u64,
    /// Newcomers registered and not yet claimed; when zero the line collapses.
    waiting: u64,
}

impl Floorline {
    /// Tag for a newcomer whose first row costs `cost`. `established` says whether
    /// the level has members that have been served and are present now.
    fn join(&mut self, established: bool, cost: u64) -> u64 {
        if self.waiting == 0 {
            self.line_start = self.floor;
            self.line_end = self.floor;
        }
        // The guard for rule 3: while earlier newcomers still wait and there are
        // established tenants to protect, a newcomer starts where the previous one
        // finishes, so a stream of fresh tenants advances like one tenant instead of
        // crowding the floor. The first newcomer, and a burst with no one established,
        // start at the floor together.
        let tag = if established && self.waiting > 0 {
            self.floor.max(self.line_end)
        } else {
            self.floor.max(self.line_start)
        };
        self.line_start = tag;
        self.line_end = self.line_end.max(tag.saturating_add(cost));
        self.waiting += 1;
        tag
    }

    fn left_line(&mut self) {
        self.waiting = self.waiting.saturating_sub(1);
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    tag: u64,
    stamp: u64,
    seen: u64,
    /// Registered and never claimed: still on its level's newcomer line.
    fresh: bool,
    /// Group of a tenant entry (unused for group entries).
    group: u32,
    /// Serial of the last tick an established member was present (group entries).
    established_tick: u64,
    /// Tenant entries referring to this group (group entries).
    members: u64,
    /// The floor this tenant was competing at when its next row did not fit the bytes
    /// left, and the tick that happened (tenant entries; `skipped_tick` 0 is never).
    skipped_floor: u64,
    skipped_tick: u64,
    /// The last tick this tenant was present with a row due (tenant entries).
    due_tick: u64,
    fl: Floorline,
}

impl Entry {
    fn new(tag: u64, stamp: u64, seen: u64, group: u32) -> Entry {
        Entry {
            tag,
            stamp,
            seen,
            fresh: true,
            group,
            established_tick: 0,
            members: 0,
            skipped_floor: 0,
            skipped_tick: 0,
            due_tick: 0,
            fl: Floorline::default(),
        }
    }
}

/// A map with a one-slot-per-entry sweep queue in least-recently-queued order.
#[derive(Debug, Default)]
struct Table {
    map: HashMap<u32, Entry>,
    queue: VecDeque<(u64, u32)>,
}

impl Table {
    fn insert(&mut self, key: u32, e: Entry) {
        self.queue.push_back((e.seen, key));
        self.map.insert(key, e);
    }
}

/// Work counters of the last `plan` call, for tests and benchmarks that must prove a
/// tick's cost without timing it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlanWork {
    /// Input tenants examined.
    pub heads: usize,
    /// Heap operations of the selection.
    pub heap_ops: usize,
    /// Sweep queue slots examined.
    pub swept: usize,
}

/// The fair scheduler. See the module documentation for its invariants.
#[derive(Debug)]
pub struct Scheduler {
    cfg: Config,
    root: Floorline,
    groups: Table,
    tenants: Table,
    stamp: u64,
    tick: u64,
    work: PlanWork,
}

impl Scheduler {
    /// A scheduler with no history.
    pub fn new(cfg: Config) -> Scheduler {
        let cfg = Config {
            max_tenants: cfg.max_tenants.max(1),
            ..cfg
        };
        Scheduler {
            cfg,
            root: Floorline::default(),
            groups: Table::default(),
            tenants: Table::default(),
            stamp: 0,
            tick: 0,
            work: PlanWork::default(),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Remembered entries (tenants plus groups): what the bounded-state rule bounds.
    pub fn state_size(&self) -> usize {
        self.tenants.map.len() + self.groups.map.len()
    }

    /// Work done by the last [`Scheduler::plan`].
    pub fn last_work(&self) -> PlanWork {
        self.work
    }

    /// Where `tenant` of `group` stands in the order this scheduler serves in: its
    /// start tag lifted to the floor it competes at, then its tie-break stamp; a
    /// tenant it does not know joins at its group's floor, ahead of the tenants
    /// waiting there. For a caller that reads tenants' heads lazily (the daemon,
    /// issue 19): with room for `r` rows, the `r` tenants first in this order that
    /// have a row ready take every row the plan would give out before anyone later
    /// in it, since each of them starts at or before them, so reading on past them
    /// changes nothing but the cost. Caps, bytes and the newcomer line are left out:
    /// it is an order to read in, never a plan.
    pub fn standing(&self, tenant: u32, group: u32) -> (u64, u64) {
        let g = self.groups.map.get(&group);
        let floor = g.map_or(self.root.floor, |g| g.fl.floor);
        match (self.tenants.map.get(&tenant), g) {
            (Some(t), Some(g)) => (self.start_of(t, g), order_stamp(t)),
            _ => (floor, 0),
        }
    }

    /// Forget a tenant outright (after a purge or an erase). Its next appearance is a
    /// newcomer's.
    pub fn forget(&mut self, tenant: u32) {
        if let Some(e) = self.tenants.map.remove(&tenant) {
            self.unlink_tenant(&e);
        }
    }

    fn next_stamp(&mut self) -> u64 {
        self.stamp += 1;
        self.stamp
    }

    /// A row's cost is its dominant resource this tick: its bytes, or its row slot's
    /// share of the byte budget, whichever is larger (and at least the floor).
    /// Charging bytes alone would let a tenant of tiny rows take every row slot while
    /// a tenant of big rows waits for byte credit it can never catch up on. The floor
    /// is not added to the bytes: an addend charges a 2 KiB row half as much again and
    /// a 512 KiB row nothing more, which tilts a byte split towards large rows.
    fn row_cost(&self, size: u32, weight: u32, limits: Limits) -> u64 {
        let slot = if limits.bytes == u64::MAX || limits.rows == 0 {
            0
        } else {
            limits.bytes / u64::from(limits.rows)
        };
        let bytes = u64::from(size).max(self.cfg.row_overhead_bytes).max(slot);
        bytes.saturating_mul(TAG_SCALE) / u64::from(weight.max(1))
    }

    /// Decide which rows to claim this tick.
    ///
    /// `heads` lists the tenants the dispatcher found with work, in the order it found
    /// them (the active index's oldest-marker-first order); that order only decides
    /// which of several simultaneous newcomers joins first. A tenant listed twice is
    /// considered once. Tenants with nothing ready, or at their cap, are remembered and
    /// skipped. Returns at most one claim per tenant, in the order they were chosen.
    pub fn plan(&mut self, now: u64, heads: &[TenantHead<'_>], limits: Limits) -> Vec<Claim> {
        self.plan_fitting(now, heads, limits, &mut |o| Some(o.size))
    }

    /// [`Scheduler::plan`], asking `fits` (an [`Offer`]) before each claim: a row the
    /// caller refuses (its own bound, such as a full sink) skips its tenant for the
    /// tick as a row over the bytes left does (rule 5), uncharged, keeping its floor.
    /// A yes returns the size of the row taken, which may be a later one than offered
    /// (of at most `room` bytes): the bytes left and the charge are that row's.
    pub fn plan_fitting(
        &mut self,
        now: u64,
        heads: &[TenantHead<'_>],
        limits: Limits,
        fits: &mut dyn FnMut(Offer) -> Option<u32>,
    ) -> Vec<Claim> {
        self.tick += 1;
        let tick = self.tick;
        self.work = PlanWork {
            heads: heads.len(),
            ..PlanWork::default()
        };

        // Who is already established decides whether newcomers stack, so every known
        // entry is touched before any newcomer registers.
        let mut new_groups: Vec<u32> = Vec::new();
        let mut new_tenants: Vec<usize> = Vec::new();
        let mut root_established = false;
        for (i, h) in heads.iter().enumerate() {
            match self.groups.map.get_mut(&h.group) {
                Some(g) => {
                    g.seen = now;
                    root_established |= !g.fresh;
                }
                None => {
                    if !new_groups.contains(&h.group) {
                        new_groups.push(h.group);
                    }
                }
            }
            let mut moved = false;
            let mut established = false;
            let mut back = false;
            let can = servable(h, 0, now);
            match self.tenants.map.get_mut(&h.tenant) {
                Some(t) if t.group == h.group => {
                    t.seen = now;
                    // The guard for rule 3's other half: newcomers stack only to protect
                    // tenants that could be served now. One at its cap or with nothing
                    // ready takes nothing this tick, so a line built for it would only
                    // serialise simultaneous newcomers behind each other.
                    established = !t.fresh && can;
                    let due = h.rows.first().is_some_and(|r| r.ready(now));
                    back = can && !t.fresh && t.due_tick + 1 < tick;
                    if due {
                        t.due_tick = tick;
                    }
                }
                Some(_) => moved = true,
                None => new_tenants.push(i),
            }
            if established {
                if let Some(g) = self.groups.map.get_mut(&h.group) {
                    g.established_tick = tick;
                }
            }
            if back {
                // Rule 4's waiting order counts only time with a row due. A tenant back
                // from backoff or a drain had nothing due, so it was not waiting: it
                // takes a fresh stamp and joins behind the tenants already waiting at
                // its start tag. On its old stamp it jumped ahead of every one of them
                // (retry_storm's worst share: 0.925 with the old stamp, 0.939 with
                // this, round robin 0.942). A tenant at its cap had rows due all along
                // and keeps its stamp.
                let stamp = self.next_stamp();
                if let Some(t) = self.tenants.map.get_mut(&h.tenant) {
                    t.stamp = stamp;
                }
            }
            if moved {
                // Its tag was measured on the old group's clock, which means nothing here.
                self.forget(h.tenant);
                new_tenants.push(i);
            }
        }
        for gid in new_groups {
            let cost = self.row_cost(0, 1, limits);
            let tag = self.root.join(root_established, cost);
            let stamp = self.next_stamp();
            self.groups.insert(gid, Entry::new(tag, stamp, now, gid));
        }
        for i in new_tenants {
            let h = &heads[i];
            if self.tenants.map.contains_key(&h.tenant) {
                continue;
            }
            let size = h.rows.first().map_or(0, |r| r.size);
            let cost = self.row_cost(size, h.weight, limits);
            let stamp = self.next_stamp();
            let Some(g) = self.groups.map.get_mut(&h.group) else {
                continue;
            };
            let established = g.established_tick == tick;
            let tag = g.fl.join(established, cost);
            g.members += 1;
            self.tenants
                .insert(h.tenant, Entry::new(tag, stamp, now, h.group));
        }

        let claims = self.select(now, heads, limits, fits);
        self.sweep(now, heads.len());
        claims
    }

    fn select(
        &mut self,
        now: u64,
        heads: &[TenantHead<'_>],
        limits: Limits,
        fits: &mut dyn FnMut(Offer) -> Option<u32>,
    ) -> Vec<Claim> {
        let mut sel = Selection {
            claimed: vec![0; heads.len()],
            order: Vec::new(),
            rows_left: limits.rows,
            bytes_left: limits.bytes,
            rows_total: 0,
        };
        let ceiling = self.cfg.spare.map_or(u32::MAX, |sp| sp.ceiling);
        self.fill(now, heads, limits, &mut sel, Pass::Fair { ceiling }, fits);
        // Rule 8: only rows nobody under their cap could take are lent, after the fair
        // pass has run dry, so a tenant under its cap is always served first.
        if let Some(sp) = self.cfg.spare {
            if sel.rows_left > sp.reserve {
                self.fill(now, heads, limits, &mut sel, Pass::Spare(sp), fits);
            }
        }

        sel.order
            .into_iter()
            .map(|i| {
                let h = &heads[i];
                let n = sel.claimed[i];
                let bytes = h.rows[..n as usize].iter().map(|r| u64::from(r.size)).sum();
                Claim {
                    tenant: h.tenant,
                    rows: n,
                    bytes,
                }
            })
            .collect()
    }

    /// One selection pass: the tenants `pass` admits, by group tag then tenant tag,
    /// one row at a time, until the pass's row limit is reached or nobody is left.
    fn fill(
        &mut self,
        now: u64,
        heads: &[TenantHead<'_>],
        limits: Limits,
        sel: &mut Selection,
        pass: Pass,
        fits: &mut dyn FnMut(Offer) -> Option<u32>,
    ) {
        // Slot per group present, holding its tenants' heap.
        let mut slots: Vec<Slot> = Vec::new();
        let mut slot_of: HashMap<u32, usize> = HashMap::new();
        let mut seen_tenant: HashSet<u32> = HashSet::with_capacity(heads.len());

        for (i, h) in heads.iter().enumerate() {
            if !seen_tenant.insert(h.tenant) {
                continue;
            }
            // The guard for rule 1: an unservable tenant is left out of selection here,
            // before it can take a slot, a row or a byte, and before it can hold the
            // floor; its entry stays, so it is back at the front once servable.
            if !pass.admits(h, sel.claimed[i], now) {
                continue;
            }
            let Some(t) = self.tenants.map.get(&h.tenant) else {
                continue;
            };
            let Some(g) = self.groups.map.get(&h.group) else {
                continue;
            };
            let key = (self.start_of(t, g), order_stamp(t), i);
            let slot = *slot_of.entry(h.group).or_insert_with(|| {
                slots.push((h.group, BinaryHeap::new()));
                slots.len() - 1
            });
            slots[slot].1.push(Reverse(key));
            self.work.heap_ops += 1;
        }

        let mut groups: BinaryHeap<Key> = BinaryHeap::new();
        for (slot, (gid, _)) in slots.iter().enumerate() {
            if let Some(g) = self.groups.map.get(gid) {
                groups.push(Reverse((self.group_start(g), g.stamp, slot)));
                self.work.heap_ops += 1;
            }
        }

        let keep = pass.keep();
        while sel.rows_left > keep {
            let Some(Reverse((_, _, slot))) = groups.pop() else {
                break;
            };
            self.work.heap_ops += 1;
            let gid = slots[slot].0;
            let Some(Reverse((_, _, i))) = slots[slot].1.pop() else {
                continue;
            };
            self.work.heap_ops += 1;
            let h = &heads[i];
            let k = sel.claimed[i] as usize;
            let Some(row) = h.rows.get(k) else {
                self.requeue_group(&mut groups, &slots, slot, gid);
                continue;
            };
            let size = u64::from(row.size);
            // Rule 5: a row that does not fit what is left skips only its tenant, and
            // a row bigger than the whole budget goes alone on an otherwise empty tick.
            let in_budget = size <= sel.bytes_left || oversize_alone(size, limits, sel.rows_total);
            // The caller's bound is asked last: a yes claims a row of at most `room`.
            let alone = oversize_alone(u64::MAX, limits, sel.rows_total);
            let room = if alone { u64::MAX } else { sel.bytes_left };
            let offer = Offer {
                tenant: h.tenant,
                k,
                size: row.size,
                room,
            };
            let taken = if in_budget { fits(offer) } else { None };
            let Some(taken) = taken else {
                self.skipped_for_bytes(h, row.size, limits);
                self.requeue_group(&mut groups, &slots, slot, gid);
                continue;
            };
            sel.bytes_left = sel.bytes_left.saturating_sub(u64::from(taken));
            sel.rows_left -= 1;
            sel.rows_total += 1;
            if sel.claimed[i] == 0 {
                sel.order.push(i);
            }
            sel.claimed[i] += 1;
            self.charge(h, taken, limits);

            if pass.admits(h, sel.claimed[i], now) {
                if let (Some(t), Some(g)) = (
                    self.tenants.map.get(&h.tenant),
                    self.groups.map.get(&h.group),
                ) {
                    slots[slot]
                        .1
                        .push(Reverse((self.start_of(t, g), order_stamp(t), i)));
                    self.work.heap_ops += 1;
                }
            }
            self.requeue_group(&mut groups, &slots, slot, gid);
        }
    }

    fn requeue_group(
        &mut self,
        groups: &mut BinaryHeap<Key>,
        slots: &[Slot],
        slot: usize,
        gid: u32,
    ) {
        if slots[slot].1.is_empty() {
            return;
        }
        if let Some(g) = self.groups.map.get(&gid) {
            groups.push(Reverse((self.group_start(g), g.stamp, slot)));
            self.work.heap_ops += 1;
        }
    }

    /// Where a tenant starts its next claim: its tag, lifted to the floor it competes
    /// at (see [`competing_floor`]).
    fn start_of(&self, t: &Entry, g: &Entry) -> u64 {
        t.tag.max(competing_floor(t, g.fl.floor, self.tick))
    }

    /// Rule 5's other half: a tenant whose next row did not fit the bytes left keeps,
    /// for the next tick, the floor it was competing at now. It was backlogged and
    /// owed that claim, and lifting it to the next tick's floor, which the other
    /// tenants' claims raise past it, would write its lag off on every tick it is
    /// skipped; a tenant of large rows is skipped on most. The floor kept is never
    /// more than the skipped row's cost below the group's floor at the skip, so a
    /// tenant skipped tick after tick cannot hoard credit.
    ///
    /// The same holds one level up: the group of a tenant skipped for bytes keeps the
    /// root floor it competed at, so that the group's lag against the other groups is
    /// not written off either. Without it, a source whose one tenant sends large rows
    /// lost its lag on every skip once the daemon grouped by source (its byte share
    /// fell from 0.48 to below 0.45 of two sources' bytes).
    fn skipped_for_bytes(&mut self, h: &TenantHead<'_>, size: u32, limits: Limits) {
        let cost = self.row_cost(size, h.weight, limits);
        let group_cost = self.row_cost(size, h.group_weight, limits);
        let tick = self.tick;
        let root_floor = self.root.floor;
        let Some(g) = self.groups.map.get_mut(&h.group) else {
            return;
        };
        let g_floor = g.fl.floor;
        let g_at = competing_floor(g, root_floor, tick);
        g.skipped_floor = g_at.max(root_floor.saturating_sub(group_cost));
        g.skipped_tick = tick;
        if let Some(t) = self.tenants.map.get_mut(&h.tenant) {
            let at = competing_floor(t, g_floor, tick);
            t.skipped_floor = at.max(g_floor.saturating_sub(cost));
            t.skipped_tick = tick;
        }
    }

    /// Where a group starts its next claim: its tag, lifted to the root floor it
    /// competes at (see [`competing_floor`]).
    fn group_start(&self, g: &Entry) -> u64 {
        g.tag.max(competing_floor(g, self.root.floor, self.tick))
    }

    /// Advance the tenant's and its group's tags for one claimed row.
    fn charge(&mut self, h: &TenantHead<'_>, size: u32, limits: Limits) {
        let tenant_cost = self.row_cost(size, h.weight, limits);
        let group_cost = self.row_cost(size, h.group_weight, limits);
        let t_stamp = self.next_stamp();
        let g_stamp = self.next_stamp();
        let root_floor = self.root.floor;
        let tick = self.tick;
        let Some(g) = self.groups.map.get_mut(&h.group) else {
            return;
        };
        let Some(t) = self.tenants.map.get_mut(&h.tenant) else {
            return;
        };
        let t_start = t.tag.max(competing_floor(t, g.fl.floor, tick));
        t.tag = t_start.saturating_add(tenant_cost);
        t.stamp = t_stamp;
        if t.fresh {
            t.fresh = false;
            g.fl.left_line();
        }
        // Rule 1's other half: the floor rises with every claim, whatever else is stuck.
        g.fl.floor = g.fl.floor.max(t_start);

        let g_start = g.tag.max(competing_floor(g, root_floor, tick));
        g.tag = g_start.saturating_add(group_cost);
        g.stamp = g_stamp;
        if g.fresh {
            g.fresh = false;
            self.root.left_line();
        }
        self.root.floor = self.root.floor.max(g_start);
    }

    fn unlink_tenant(&mut self, e: &Entry) {
        if let Some(g) = self.groups.map.get_mut(&e.group) {
            g.members = g.members.saturating_sub(1);
            if e.fresh {
                g.fl.left_line();
            }
        }
    }

    /// Rule 6: bounded state. Work is proportional to this tick's input.
    fn sweep(&mut self, now: u64, input: usize) {
        let budget = self.cfg.sweep_budget + input;
        let forget_after = self.cfg.forget_after;
        let mut steps = 0;
        while steps < budget {
            let Some((queued, key)) = self.tenants.queue.pop_front() else {
                break;
            };
            steps += 1;
            let Some(e) = self.tenants.map.get(&key).copied() else {
                continue;
            };
            if e.seen > queued {
                self.tenants.queue.push_back((e.seen, key));
                continue;
            }
            if now.saturating_sub(queued) < forget_after {
                self.tenants.queue.push_front((queued, key));
                break;
            }
            let floor = self
                .groups
                .map
                .get(&e.group)
                .map_or(u64::MAX, |g| g.fl.floor);
            // The guard for rule 2: a tag above the floor is debt, and forgetting it
            // would hand that credit back, so it is kept until it has been unseen for
            // DEBT_FORGIVEN_AFTER horizons (then at most one tag's worth is forgiven,
            // once per that long) or until the ceiling takes it.
            let forgiven =
                now.saturating_sub(e.seen) >= forget_after.saturating_mul(DEBT_FORGIVEN_AFTER);
            if e.fresh || e.tag <= floor || forgiven {
                self.tenants.map.remove(&key);
                self.unlink_tenant(&e);
            } else {
                self.tenants.queue.push_back((now, key));
            }
        }
        while self.tenants.map.len() > self.cfg.max_tenants {
            let Some((_, key)) = self.tenants.queue.pop_front() else {
                break;
            };
            steps += 1;
            if let Some(e) = self.tenants.map.remove(&key) {
                self.unlink_tenant(&e);
            }
        }

        let mut gsteps = 0;
        while gsteps < budget {
            let Some((queued, key)) = self.groups.queue.pop_front() else {
                break;
            };
            gsteps += 1;
            let Some(e) = self.groups.map.get(&key).copied() else {
                continue;
            };
            if e.seen > queued {
                self.groups.queue.push_back((e.seen, key));
                continue;
            }
            if now.saturating_sub(queued) < forget_after {
                self.groups.queue.push_front((queued, key));
                break;
            }
            if e.members == 0 && (e.fresh || e.tag <= self.root.floor) {
                self.groups.map.remove(&key);
                if e.fresh {
                    self.root.left_line();
                }
            } else {
                self.groups.queue.push_back((now, key));
            }
        }
        // A group with members is never forced out (its tenants could not be selected
        // without it), so the ceiling takes only memberless ones; groups with members
        // are bounded by the tenant ceiling already.
        let mut scan = self.groups.queue.len();
        while self.groups.map.len() > self.cfg.max_tenants && scan > 0 {
            scan -= 1;
            let Some((queued, key)) = self.groups.queue.pop_front() else {
                break;
            };
            gsteps += 1;
            match self.groups.map.get(&key).copied() {
                Some(e) if e.members == 0 => {
                    self.groups.map.remove(&key);
                    if e.fresh {
                        self.root.left_line();
                    }
                }
                Some(_) => self.groups.queue.push_back((queued, key)),
                None => {}
            }
        }
        self.work.swept = steps + gsteps;
    }
}

/// Selection order: (start tag, stamp, index). The stamp makes every key unique, so
/// the order is total and never falls to the index (input order) or to a tenant id.
type Key = Reverse<(u64, u64, usize)>;
/// A group present this tick, with the heap of its servable tenants.
type Slot = (u32, BinaryHeap<Key>);

/// The floor a tenant competes at: its group's, or, on the tick it was skipped for
/// bytes and the next, the lower floor it kept then ([`Scheduler::skipped_for_bytes`]).
/// Every other tenant that becomes servable competes at the group's floor, which is
/// what keeps an idle or unready tenant from hoarding credit.
fn competing_floor(t: &Entry, group_floor: u64, tick: u64) -> u64 {
    if t.skipped_tick != 0 && t.skipped_tick + 1 >= tick {
        t.skipped_floor.min(group_floor)
    } else {
        group_floor
    }
}

/// The tie-break among tenants at the same start tag: a tenant never served goes
/// before one that has been, then waiting order.
fn order_stamp(t: &Entry) -> u64 {
    if t.fresh {
        t.stamp
    } else {
        t.stamp | (1 << 63)
    }
}

/// Whether a row larger than the tick's whole byte budget may go alone: only on a
/// tick that has claimed nothing else, and only when the budget is not exhausted.
/// The caller passes the bytes still free under its in-flight bound as the budget,
/// so a budget of zero means everything is already in flight; claiming a row alone
/// then would add a row a tick without bound. With any budget left, the first row by
/// tag goes whatever its size and the overdraft is repaid from the bytes its
/// delivery frees: that is what keeps a tenant of large rows from waiting forever
/// for the freed bytes to add up to one of its rows while small rows take every
/// fragment.
fn oversize_alone(size: u64, limits: Limits, claimed: u32) -> bool {
    size > limits.bytes && claimed == 0 && limits.bytes > 0
}

/// Whether the tenant can take its `k`-th head row now: the row exists, is due, and
/// the tenant has room under its cap for one more.
fn servable(h: &TenantHead<'_>, k: u32, now: u64) -> bool {
    let Some(row) = h.rows.get(k as usize) else {
        return false;
    };
    row.ready(now) && h.cap_room() > k
}

/// What one tick has claimed so far, across its passes.
struct Selection {
    /// Rows claimed per input index.
    claimed: Vec<u32>,
    /// Input indexes in the order of their first claim.
    order: Vec<usize>,
    rows_left: u32,
    bytes_left: u64,
    rows_total: u32,
}

/// A selection pass, and which tenants it admits.
#[derive(Debug, Clone, Copy)]
enum Pass {
    /// Tenants under their cap (and the ceiling, when there is one).
    Fair { ceiling: u32 },
    /// Tenants at their cap and under the ceiling, while more than the reserve is left.
    Spare(Spare),
}

impl Pass {
    /// Whether the tenant may take its `k`-th head row in this pass.
    fn admits(self, h: &TenantHead<'_>, k: u32, now: u64) -> bool {
        match self {
            Pass::Fair { ceiling } => servable(h, k, now) && h.inflight.saturating_add(k) < ceiling,
            // The guard for rule 8's bounds: a borrower is at its cap (one under it
            // had its turn in the fair pass) and stays under the ceiling.
            Pass::Spare(sp) => {
                h.rows.get(k as usize).is_some_and(|r| r.ready(now))
                    && h.cap_room() <= k
                    && h.inflight.saturating_add(k) < sp.ceiling
            }
        }
    }

    /// Rows of the tick this pass leaves unclaimed.
    fn keep(self) -> u32 {
        match self {
            Pass::Fair { .. } => 0,
            Pass::Spare(sp) => sp.reserve,
        }
    }
}

#[cfg(test)]
mod tests;
