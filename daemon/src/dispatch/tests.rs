//! The dispatcher's tests: ticks planned on real stores, claims, skip
//! points, quiet tenants, marker cleanup, and the proptest of the
//! dispatcher against concurrent writers.

use super::active::*;
use super::plan::*;
use super::*;
use ankusa_store::queries::DueFrom;
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use ankusa_store::policy::{Policies, Policy, Rate};

/// No policy stored: every tenant's turn from the defaults.
static NO_POLICY: std::sync::LazyLock<Steering> = std::sync::LazyLock::new(Steering::default);

fn due_at(store: &Store, seq: u64, ord: u32, at: u64) {
    hooks_with_sinks(store, seq..seq + 1, ord, at, 1);
}

/// Hooks `seqs` of tenant `ord` due at `at`, each owed to `sinks` sinks
/// of source `s`.
fn hooks_with_sinks(store: &Store, seqs: std::ops::Range<u64>, ord: u32, at: u64, sinks: u16) {
    hooks_of(store, "s", seqs, ord, at, sinks);
}

/// Hooks `seqs` of tenant `ord` posted to source `source`, due at `at`.
fn hooks_of(
    store: &Store,
    source: &str,
    seqs: std::ops::Range<u64>,
    ord: u32,
    at: u64,
    sinks: u16,
) {
    let mut b = Batch::new();
    for seq in seqs {
        ankusa_store::fixture::ingest_plain(&mut b, source, seq, ord, at, sinks);
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
    let input = TickInput {
        store,
        now,
        settings: &s,
        paused,
        inflight: &InflightNow::default(),
        policy: &NO_POLICY.tick(now, &s, Policy::default()),
    };
    plan_tick(&input, &mut sched, set, &mut room).unwrap()
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
    let tick_paused = |set: &mut ActiveSet, at: u64, inflight: &[(SinkKey, u32)], p: &Paused| {
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
        let input = TickInput {
            store: &store,
            now: now + tick,
            settings: &s,
            paused: &Paused::default(),
            inflight: &InflightNow::default(),
            policy: &NO_POLICY.tick(now, &s, Policy::default()),
        };
        let plan = plan_tick(&input, &mut sched, &mut set, &mut room).unwrap();
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

/// Claims per tenant over `ticks` ticks of `rows` rows each, every claim
/// delivered at once (committed, nothing left in flight).
fn claims_over(
    store: &Store,
    map: &SinkMap,
    now: u64,
    ticks: u64,
    rows: usize,
) -> (ActiveSet, HashMap<u32, usize>) {
    let mut steer = Steering::default();
    claims_steered(
        store,
        map,
        now,
        ticks,
        1,
        rows,
        &mut steer,
        Policy::default(),
    )
}

/// [`claims_over`] with policies: ticks `step` ms apart, each planned
/// with `steer` over `defaults` and charged for what it claimed.
#[allow(clippy::too_many_arguments)]
fn claims_steered(
    store: &Store,
    map: &SinkMap,
    now: u64,
    ticks: u64,
    step: u64,
    rows: usize,
    steer: &mut Steering,
    defaults: Policy,
) -> (ActiveSet, HashMap<u32, usize>) {
    let s = DispatchSettings {
        max_inflight: rows,
        ..DispatchSettings::default()
    };
    let mut sched = Scheduler::new(Config::default());
    let mut set = ActiveSet::default();
    let mut got: HashMap<u32, usize> = HashMap::new();
    for tick in 0..ticks {
        let at = now + tick * step;
        steer.refresh(store, 0, &[], map).unwrap();
        let cap = u32::try_from(s.per_sink).unwrap();
        let mut room = SinkRoom::new(map, cap, HashMap::new()).limited(steer.sink_bounds(at));
        let input = TickInput {
            store,
            now: at,
            settings: &s,
            paused: &Paused::default(),
            inflight: &InflightNow::default(),
            policy: &steer.tick(at, &s, defaults),
        };
        let plan = plan_tick(&input, &mut sched, &mut set, &mut room).unwrap();
        let mut by_tenant: HashMap<u32, u32> = HashMap::new();
        let mut by_sink: HashMap<SinkKey, u32> = HashMap::new();
        for (r, k) in plan.claims.iter().flatten() {
            *got.entry(r.ord).or_default() += 1;
            *by_tenant.entry(r.ord).or_default() += 1;
            if let Some(k) = k {
                *by_sink.entry(*k).or_default() += 1;
            }
        }
        commit_claims(store, &plan);
        steer.charge(at, defaults, by_tenant, by_sink);
        steer
            .held
            .note(at, &plan.policy_held, |o| Some(format!("t{o}")));
    }
    (set, got)
}

fn steering(tenants: &[(u32, Policy)]) -> Steering {
    Steering::with_policies(Policies {
        tenants: tenants.iter().copied().collect(),
        ..Policies::default()
    })
}

/// Issue 31: a tenant's weight is its share within its source's group:
/// weights 1 and 4, both backlogged in one source, claims 1:4. Guard:
/// passing weight 1 for every tenant (the daemon before) makes it 1:1.
#[test]
fn a_tenants_weight_is_its_share_within_its_source() {
    let (_dir, store) = watched_store();
    let now = 10_000_000;
    let map = SinkMap::of([("s", 1)]);
    hooks_of(&store, "s", 1_000..1_300, 1, now - 1_000, 1);
    hooks_of(&store, "s", 5_000..5_300, 2, now - 1_000, 1);
    let heavy = Policy {
        weight: Some(4),
        ..Policy::default()
    };
    let mut steer = steering(&[(2, heavy)]);
    let (_, got) = claims_steered(&store, &map, now, 10, 1, 10, &mut steer, Policy::default());
    let (light, heavy) = (got[&1], got[&2]);
    assert_eq!(light + heavy, 100);
    assert!((18..=22).contains(&light), "light {light}, heavy {heavy}");
}

/// A tenant's rate bounds its claims per second: 50/s over ticks 100 ms
/// apart is one second's burst, then 5 a tick; the other tenant of the
/// source takes every row the rated one leaves. Guard: a room that
/// ignores the tokens gives the rated tenant half of every tick.
#[test]
fn a_rated_tenant_gets_its_rate_and_the_others_the_rest() {
    let (_dir, store) = watched_store();
    let now = 10_000_000;
    let map = SinkMap::of([("s", 1)]);
    hooks_of(&store, "s", 1_000..3_000, 1, now - 1_000, 1);
    hooks_of(&store, "s", 5_000..7_000, 2, now - 1_000, 1);
    let rated = Policy {
        rate: Some("50/s".parse::<Rate>().unwrap()),
        ..Policy::default()
    };
    let mut steer = steering(&[(1, rated)]);
    // 30 ticks of 30 rows, 100 ms apart: 3 s at 50/s after a 50 burst
    // (the other tenant's share, 32 a tick, is not what binds it).
    let (_, got) = claims_steered(
        &store,
        &map,
        now,
        30,
        100,
        30,
        &mut steer,
        Policy::default(),
    );
    let (r, other) = (got[&1], got[&2]);
    assert_eq!(r + other, 900, "nothing left idle: {got:?}");
    // The burst (50), then 5 per tick for 29 ticks: 195.
    assert!((190..=200).contains(&r), "rated tenant got {r}: {got:?}");
    // Held by its rate from the tick its burst no longer covered the
    // node's room (the third, at 200 ms), the other never.
    let (n, top) = steer.held.report(now + 29 * 100, 10);
    assert_eq!((n, top), (1, vec![("t1".to_string(), 2_700)]));
}

/// Issue 34: a tenant is over its policy while its cap or rate, not the
/// node, bounds its visits, and no longer once its backlog fits: the
/// rated tenant with 2,000 rows is held, one with 30 rows under a rate of
/// 50/s never is, nor is a tenant the node's ceiling alone bounds.
/// Guard: counting every visit that filled its room (policy or not)
/// lists tenant 3 too.
#[test]
fn a_tenant_is_over_its_policy_only_while_its_policy_bounds_it() {
    let (_dir, store) = watched_store();
    let now = 10_000_000;
    let map = SinkMap::of([("s", 1)]);
    hooks_of(&store, "s", 1_000..3_000, 1, now - 1_000, 1);
    hooks_of(&store, "s", 5_000..5_030, 2, now - 1_000, 1);
    hooks_of(&store, "s", 7_000..9_000, 3, now - 1_000, 1);
    let rated = Policy {
        rate: Some("50/s".parse::<Rate>().unwrap()),
        ..Policy::default()
    };
    let mut steer = steering(&[(1, rated), (2, rated)]);
    let (_, got) = claims_steered(
        &store,
        &map,
        now,
        20,
        100,
        30,
        &mut steer,
        Policy::default(),
    );
    assert_eq!(got[&2], 30, "{got:?}");
    let (n, top) = steer.held.report(now + 19 * 100, 10);
    assert_eq!(n, 1, "{top:?}");
    assert_eq!(top[0].0, "t1");
}

/// The defaults bind a tenant without a policy, and its own policy wins
/// over them: a default cap of 2 with 5 rows in flight leaves a tenant
/// nothing, while one whose policy caps it at 8 gets 3 more.
#[test]
fn the_defaults_bind_and_a_tenants_own_policy_overrides_them() {
    let (_dir, store) = watched_store();
    let now = 10_000_000;
    let map = SinkMap::of([("s", 1)]);
    hooks_of(&store, "s", 1_000..1_100, 1, now - 1_000, 1);
    hooks_of(&store, "s", 5_000..5_100, 2, now - 1_000, 1);
    let s = DispatchSettings::default();
    let defaults = Policy {
        cap: Some(2),
        ..Policy::default()
    };
    let own = Policy {
        cap: Some(8),
        ..Policy::default()
    };
    let steer = steering(&[(2, own)]);
    let inflight = InflightNow {
        by_tenant: HashMap::from([(1, 5), (2, 5)]),
        rows: 10,
        bytes: 10,
    };
    let mut sched = Scheduler::new(Config::default());
    let mut set = ActiveSet::default();
    let cap = u32::try_from(s.per_sink).unwrap();
    let mut room = SinkRoom::new(&map, cap, HashMap::new());
    let input = TickInput {
        store: &store,
        now,
        settings: &s,
        paused: &Paused::default(),
        inflight: &inflight,
        policy: &steer.tick(now, &s, defaults),
    };
    let plan = plan_tick(&input, &mut sched, &mut set, &mut room).unwrap();
    let got: HashMap<u32, usize> =
        plan.claims
            .iter()
            .flatten()
            .fold(HashMap::new(), |mut m, (r, _)| {
                *m.entry(r.ord).or_default() += 1;
                m
            });
    assert_eq!(got.get(&1), None, "at the default cap: {got:?}");
    assert_eq!(got.get(&2), Some(&3), "its own cap of 8: {got:?}");
}

/// A sink's rate holds its rows due, and a tenant's rows for another sink
/// go meanwhile: sink 0 at 10/s over ticks 100 ms apart gets its burst
/// then one a tick, sink 1 the rest.
#[test]
fn a_rated_sink_holds_its_rows_due_and_the_other_sinks_go() {
    let (_dir, store) = watched_store();
    let now = 10_000_000;
    let map = SinkMap::of([("s", 2)]);
    hooks_of(&store, "s", 1_000..1_400, 1, now - 1_000, 2);
    let mut steer = Steering::with_policies(Policies {
        sinks: HashMap::from([(
            ankusa_store::pauses::SinkRef {
                source: "s".into(),
                sink: 0,
            },
            ankusa_store::policy::SinkLimits {
                max_in_flight: None,
                rate: Some("10/s".parse().unwrap()),
            },
        )]),
        ..Policies::default()
    });
    let mut per_sink: HashMap<u16, usize> = HashMap::new();
    let s = DispatchSettings {
        max_inflight: 20,
        ..DispatchSettings::default()
    };
    let mut sched = Scheduler::new(Config::default());
    let mut set = ActiveSet::default();
    for tick in 0..20u64 {
        let at = now + tick * 100;
        steer.refresh(&store, 0, &[], &map).unwrap();
        let cap = u32::try_from(s.per_sink).unwrap();
        let mut room = SinkRoom::new(&map, cap, HashMap::new()).limited(steer.sink_bounds(at));
        let input = TickInput {
            store: &store,
            now: at,
            settings: &s,
            paused: &Paused::default(),
            inflight: &InflightNow::default(),
            policy: &steer.tick(at, &s, Policy::default()),
        };
        let plan = plan_tick(&input, &mut sched, &mut set, &mut room).unwrap();
        let mut by_sink: HashMap<SinkKey, u32> = HashMap::new();
        for (r, k) in plan.claims.iter().flatten() {
            *per_sink.entry(r.sink).or_default() += 1;
            *by_sink.entry(k.unwrap()).or_default() += 1;
        }
        commit_claims(&store, &plan);
        steer.charge(at, Policy::default(), HashMap::new(), by_sink);
    }
    // A burst of 10, then one a tick for 19 ticks.
    assert_eq!(per_sink.get(&0), Some(&29), "{per_sink:?}");
    assert!(per_sink[&1] >= 200, "sink 1 was held back: {per_sink:?}");
}

/// A policy written to the store applies on the next tick: the steering
/// reads the table again when the version moved.
#[test]
fn a_stored_policy_applies_on_the_next_tick() {
    let (_dir, store) = watched_store();
    let alloc = ankusa_store::tenants::TenantAllocator::load(&store, 100).unwrap();
    let mut b = Batch::new();
    let res = alloc.resolve(&store, ["acme"], &mut b).unwrap();
    let ord = res.ord("acme", 100).unwrap();
    store.commit(b, true).unwrap();
    let map = SinkMap::of([("s", 1)]);
    let mut steer = Steering::default();
    steer.refresh(&store, 0, &[], &map).unwrap();
    let s = DispatchSettings::default();
    assert_eq!(steer.tick(0, &s, Policy::default()).turn(ord).weight, 1);
    let mut b = Batch::new();
    ankusa_store::policy::put_tenant(
        &store,
        &mut b,
        &ankusa_store::policy::TenantPolicy {
            tenant: "acme".into(),
            policy: Policy {
                weight: Some(7),
                cap: Some(3),
                ..Policy::default()
            },
            at: 1,
            by: "op".into(),
        },
    )
    .unwrap();
    store.commit(b, true).unwrap();
    steer.refresh(&store, 0, &[], &map).unwrap();
    let t = steer.tick(0, &s, Policy::default()).turn(ord);
    assert_eq!((t.weight, t.ceiling), (7, 3));
    assert_eq!(steer.stored(), (1, 0));
}

/// Issue 31: a source that mints a tenant per request gets one source's
/// share. Source `mint` has 20 tenants, source `one` a single tenant, all
/// backlogged, and the sink position is shared, so each tenant's source is
/// read from a hook. Over 8 ticks of 10 rows, `one` takes half (40); one
/// group for all (the daemon before) gave it 1/21 of them.
#[test]
fn a_source_that_mints_tenants_gets_one_sources_share() {
    let (_dir, store) = watched_store();
    let now = 10_000_000;
    let map = SinkMap::of([("mint", 1), ("one", 1)]);
    for t in 1..=20u32 {
        let base = u64::from(t) * 1_000;
        hooks_of(&store, "mint", base..base + 100, t, now - 1_000, 1);
    }
    hooks_of(&store, "one", 50_000..50_100, 99, now - 1_000, 1);
    let (set, got) = claims_over(&store, &map, now, 8, 10);
    let one = got.get(&99).copied().unwrap_or(0);
    assert!(
        (36..=44).contains(&one),
        "the lone source's tenant got {one} of 80: {got:?}"
    );
    assert_eq!(set.homes.get(&99), Some(&1));
    assert_eq!(set.homes.get(&1), Some(&0));
}

/// A source's `weight` is its share among the sources: weights 1 and 3,
/// one backlogged tenant each, claims 1:3. Guard: passing group weight 1
/// (the source weight ignored) makes it 1:1.
#[test]
fn a_sources_weight_is_its_share_of_the_claims() {
    let (_dir, store) = watched_store();
    let now = 10_000_000;
    let map = SinkMap::weighted([("light", 1, 1), ("heavy", 1, 3)]);
    hooks_of(&store, "light", 1_000..1_200, 1, now - 1_000, 1);
    hooks_of(&store, "heavy", 5_000..5_200, 2, now - 1_000, 1);
    let (_, got) = claims_over(&store, &map, now, 10, 8);
    let (light, heavy) = (got[&1], got[&2]);
    assert_eq!(light + heavy, 80);
    assert!((18..=22).contains(&light), "light {light}, heavy {heavy}");
}

/// A tenant's rows from two sources are one tenant's: it is grouped under
/// the source of the first head row a visit read, and stays there while
/// it is in the set, whatever its later rows' source.
#[test]
fn a_tenant_of_two_sources_is_grouped_under_its_first_rows_source() {
    let (_dir, store) = watched_store();
    let now = 10_000_000;
    let map = SinkMap::of([("a", 1), ("b", 1)]);
    hooks_of(&store, "b", 100..110, 7, now - 2_000, 1);
    hooks_of(&store, "a", 200..300, 7, now - 1_000, 1);
    let (set, got) = claims_over(&store, &map, now, 4, 5);
    assert_eq!(got[&7], 20, "one tenant, served as one");
    assert_eq!(
        set.homes.get(&7),
        Some(&1),
        "grouped under b, its first rows' source"
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
    let head = ankusa_store::queries::first_due(&store, 8, queries::DueFrom::At(0))
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
    d.inflight.note_unrecorded();
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
        let d = Dispatcher::new(store.clone(), clock.clone(), &settings, metrics).unwrap();
        Rig {
            _dir: dir,
            store,
            clock,
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
                    self.d.inflight.note_unrecorded();
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
                        transitions::dead_letter(&mut b, &row, &delivery, self.now(), "s", None);
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

/// Two backlogged tenants competing for a sink with room for one row a
/// tick share it evenly. Guard: offering every tenant's rows (the claim
/// then refuses all but the first chosen, while the scheduler charges them
/// all) gave the older tenant all 100 and the other none.
#[test]
fn tenants_competing_for_one_sink_slot_share_it() {
    let (_dir, store) = watched_store();
    let now = 10_000_000;
    let map = SinkMap::of([("s", 1)]);
    hooks_of(&store, "s", 1_000..1_300, 1, now - 2_000, 1);
    hooks_of(&store, "s", 5_000..5_300, 2, now - 1_000, 1);
    let s = DispatchSettings {
        per_sink: 1,
        ..DispatchSettings::default()
    };
    let mut sched = Scheduler::new(Config {
        spare: Some(s.spare()),
        ..Config::default()
    });
    let mut set = ActiveSet::default();
    let mut got: HashMap<u32, usize> = HashMap::new();
    for tick in 0..100u64 {
        let at = now + tick * 10;
        let mut room = SinkRoom::new(&map, 1, HashMap::new());
        let input = TickInput {
            store: &store,
            now: at,
            settings: &s,
            paused: &Paused::default(),
            inflight: &InflightNow::default(),
            policy: &NO_POLICY.tick(at, &s, Policy::default()),
        };
        let plan = plan_tick(&input, &mut sched, &mut set, &mut room).unwrap();
        for (r, _) in plan.claims.iter().flatten() {
            *got.entry(r.ord).or_default() += 1;
        }
        commit_claims(&store, &plan);
    }
    let (a, b) = (got.get(&1).copied(), got.get(&2).copied());
    assert!(
        a.is_some_and(|n| n >= 45) && b.is_some_and(|n| n >= 45),
        "{got:?}"
    );
}
