//! One test per rule of DESIGN §4, each named after its rule and each failing when the
//! guard it names is removed (checked by hand, see `docs/fairness.md`), plus behaviour
//! tests of weights, groups and input quirks.

use std::collections::{BTreeMap, VecDeque};

use super::*;

fn row(due: u64, size: u32) -> HeadRow {
    HeadRow {
        due_at: due,
        seq: 0,
        size,
        kind: RowKind::First,
    }
}

fn cfg() -> Config {
    Config {
        row_overhead_bytes: 1024,
        max_tenants: 100_000,
        forget_after: 1_000_000,
        sweep_budget: 32,
        spare: None,
    }
}

fn lim(rows: u32) -> Limits {
    Limits {
        rows,
        bytes: u64::MAX,
    }
}

/// A small world: tenants with queues of (due, size) rows, acked at once.
#[derive(Default)]
struct World {
    queues: BTreeMap<u32, VecDeque<HeadRow>>,
    order: Vec<u32>,
    group: BTreeMap<u32, u32>,
    weight: BTreeMap<u32, u32>,
    /// Weight of each group (1 when absent).
    group_weight: BTreeMap<u32, u32>,
}

impl World {
    fn add(&mut self, t: u32, n: usize, due: u64, size: u32) {
        if !self.order.contains(&t) {
            self.order.push(t);
        }
        let q = self.queues.entry(t).or_default();
        for _ in 0..n {
            q.push_back(row(due, size));
        }
    }

    /// One tick: every tenant with rows is listed, in first-arrival order.
    fn tick(&mut self, s: &mut Scheduler, now: u64, limits: Limits) -> Vec<Claim> {
        for q in self.queues.values_mut() {
            q.make_contiguous();
        }
        let heads: Vec<TenantHead<'_>> = self
            .order
            .iter()
            .filter_map(|t| {
                let q = self.queues.get(t)?;
                if q.is_empty() {
                    return None;
                }
                Some(TenantHead {
                    tenant: *t,
                    group: self.group.get(t).copied().unwrap_or(0),
                    weight: self.weight.get(t).copied().unwrap_or(1),
                    group_weight: self
                        .group
                        .get(t)
                        .and_then(|g| self.group_weight.get(g))
                        .copied()
                        .unwrap_or(1),
                    cap: None,
                    inflight: 0,
                    rows: q.as_slices().0,
                })
            })
            .collect();
        let claims = s.plan(now, &heads, limits);
        drop(heads);
        for c in &claims {
            if let Some(q) = self.queues.get_mut(&c.tenant) {
                for _ in 0..c.rows {
                    q.pop_front();
                }
            }
        }
        claims
    }
}

fn count(claims: &[Claim], t: u32) -> u32 {
    claims
        .iter()
        .filter(|c| c.tenant == t)
        .map(|c| c.rows)
        .sum()
}

// Rule 1. Guard: `g.fl.floor = g.fl.floor.max(t_start)` in `charge`. Tenants that can
// never be served sit at tag 0 the whole time; if the floor were held by them (or not
// advanced by claims) the latecomer would start at 0, far below the incumbents, and take
// every slot until it caught up.
#[test]
fn rule1_unready_or_capped_tenants_do_not_freeze_the_floor() {
    let mut s = Scheduler::new(cfg());
    let stuck = [row(u64::MAX, 10)];
    let capped = [row(0, 10)];
    let mut w = World::default();
    w.add(1, 1000, 0, 100);
    w.add(2, 1000, 0, 100);
    for now in 0..50 {
        for q in w.queues.values_mut() {
            q.make_contiguous();
        }
        let mut heads = vec![
            TenantHead {
                tenant: 10,
                group: 0,
                weight: 1,
                group_weight: 1,
                cap: None,
                inflight: 0,
                rows: &stuck,
            },
            TenantHead {
                tenant: 11,
                group: 0,
                weight: 1,
                group_weight: 1,
                cap: Some(1),
                inflight: 1,
                rows: &capped,
            },
        ];
        for t in [1u32, 2] {
            heads.push(TenantHead {
                tenant: t,
                group: 0,
                weight: 1,
                group_weight: 1,
                cap: None,
                inflight: 0,
                rows: w.queues[&t].as_slices().0,
            });
        }
        let claims = s.plan(now, &heads, lim(2));
        drop(heads);
        for c in claims {
            for _ in 0..c.rows {
                w.queues.get_mut(&c.tenant).map(|q| q.pop_front());
            }
        }
    }
    w.add(3, 1000, 50, 100);
    let mut late = 0;
    for now in 50..60 {
        late += count(&w.tick(&mut s, now, lim(2)), 3);
    }
    // Three tenants share 20 rows: a fair latecomer gets about 7, a frozen floor 20.
    assert!(late <= 8, "latecomer took {late} of 20");
}

// Rule 1. Guard: `if !servable(h, 0, now) { continue; }` in `select`. Without it the
// unservable tenants listed first take the tick's only row (and a not-ready row would be
// claimed). Their entries must survive, so the capped one is first once it has room.
#[test]
fn rule1_unready_or_capped_tenants_take_no_capacity_and_keep_their_place() {
    let mut s = Scheduler::new(cfg());
    let stuck = [row(100, 10)];
    let capped = [row(0, 10), row(0, 10)];
    let ready = [row(0, 10), row(0, 10), row(0, 10)];
    let heads = |cap_inflight: u32| {
        vec![
            TenantHead {
                tenant: 7,
                group: 0,
                weight: 1,
                group_weight: 1,
                cap: None,
                inflight: 0,
                rows: &stuck[..],
            },
            TenantHead {
                tenant: 8,
                group: 0,
                weight: 1,
                group_weight: 1,
                cap: Some(1),
                inflight: cap_inflight,
                rows: &capped[..],
            },
            TenantHead {
                tenant: 9,
                group: 0,
                weight: 1,
                group_weight: 1,
                cap: None,
                inflight: 0,
                rows: &ready[..],
            },
        ]
    };
    for now in 0..3 {
        let claims = s.plan(now, &heads(1), lim(1));
        assert_eq!(claims.len(), 1);
        assert_eq!(claims[0].tenant, 9, "tick {now}: {claims:?}");
    }
    // Room again: the capped tenant kept its low tag and goes first, for one row only.
    let claims = s.plan(3, &heads(0), lim(2));
    assert_eq!(claims[0].tenant, 8, "{claims:?}");
    assert_eq!(claims[0].rows, 1);
    assert_eq!(count(&claims, 9), 1);
}

// Rule 2. Guard: the `e.tag <= floor` condition in `sweep` (with `forget_after` short,
// so only the tag keeps the entry). A tenant of 1 MiB rows that drains after every row
// and comes back must still pay for its bytes; forgotten, it would return at the floor
// and take a row every time it shows up.
#[test]
fn rule2_drained_tenant_returns_with_its_tag() {
    let mut s = Scheduler::new(Config {
        forget_after: 1,
        ..cfg()
    });
    let mut w = World::default();
    w.add(1, 100_000, 0, 1024);
    let mut big = 0;
    for now in 0..200 {
        // The heavy tenant has one row on every third tick, and nothing in between.
        if now % 3 == 0 && w.queues.get(&2).is_none_or(|q| q.is_empty()) {
            w.add(2, 1, now, 1 << 20);
        }
        big += count(&w.tick(&mut s, now, lim(4)), 2);
    }
    // A 1 MiB row costs as much as 1,024 rows of 1 KiB; 800 rows were served in all.
    assert!(big <= 4, "heavy tenant got {big} rows");
}

// Rule 3. Guard: the `established && self.waiting > 0` branch of `Floorline::join`.
// Without it every fresh tenant starts at the floor, the floor never moves (each is
// served at it) and the backlog, one row ahead, is never served again.
#[test]
fn rule3_fresh_tenants_neither_pin_the_floor_nor_starve_the_backlog() {
    let mut s = Scheduler::new(cfg());
    let mut w = World::default();
    w.add(0, 2000, 0, 100);
    let mut next = 1u32;
    let mut backlog = 0;
    for now in 0..300 {
        for _ in 0..40 {
            w.add(next, 1, now, 100);
            next += 1;
        }
        backlog += count(&w.tick(&mut s, now, lim(5)), 0);
    }
    assert!(backlog >= 300, "backlog got {backlog} of 1500");
}

// Rule 3, the other half: a newcomer with no one else on the line starts at the floor,
// so it is served within a round, behind the tenants already waiting there.
#[test]
fn rule3_newcomer_joins_at_the_floor_behind_those_waiting_there() {
    let mut s = Scheduler::new(cfg());
    let mut w = World::default();
    w.add(1, 100, 0, 100);
    w.add(2, 100, 0, 100);
    w.add(3, 100, 0, 100);
    for now in 0..10 {
        w.tick(&mut s, now, lim(1));
    }
    w.add(4, 100, 10, 100);
    let mut first = None;
    for now in 10..20 {
        if count(&w.tick(&mut s, now, lim(1)), 4) > 0 && first.is_none() {
            first = Some(now);
        }
    }
    // Three incumbents: at most the ones still waiting at the floor go first.
    let first = first.unwrap_or(u64::MAX);
    assert!(
        (10..=13).contains(&first),
        "newcomer first served at {first}"
    );
}

// Rule 4. Guard: the stamp in the selection key. Ties go to whoever has waited longest
// (here: registered first), never to the lower tenant id.
#[test]
fn rule4_ties_break_by_waiting_order_not_tenant_id() {
    let mut s = Scheduler::new(cfg());
    let mut w = World::default();
    for t in [90u32, 50, 70] {
        w.add(t, 10, 0, 100);
    }
    let claims = w.tick(&mut s, 0, lim(3));
    let order: Vec<u32> = claims.iter().map(|c| c.tenant).collect();
    assert_eq!(order, vec![90, 50, 70]);
    // After one row each, the one served first has waited longest.
    let claims = w.tick(&mut s, 1, lim(1));
    assert_eq!(claims[0].tenant, 90);
    let claims = w.tick(&mut s, 2, lim(1));
    assert_eq!(claims[0].tenant, 50);
}

// Rule 4. Guard: the fresh stamp a tenant takes in `plan` when it comes back with a row
// due after a tick with none. Waiting order counts time with a row due: tenant 3 sat in
// backoff (its next row due at 10) while 1 and 2 kept claiming. At tick 10 it is back at
// the floor, tied with tenant 2, which has been waiting there; on its old stamp (its last
// claim, at tick 2) it would jump ahead of 2.
#[test]
fn rule4_a_tenant_back_from_backoff_waits_behind_those_already_waiting() {
    let mut s = Scheduler::new(cfg());
    let mut w = World::default();
    w.add(1, 100, 0, 100);
    w.add(2, 100, 0, 100);
    w.add(3, 1, 0, 100);
    w.add(3, 1, 10, 100);
    let mut order = Vec::new();
    for now in 0..12 {
        let c = w.tick(&mut s, now, lim(1));
        order.push(c.first().map_or(0, |c| c.tenant));
    }
    assert_eq!(order[..3], [1, 2, 3], "{order:?}");
    assert_eq!(order[10..], [2, 3], "{order:?}");
}

// Rule 4. There is no second pass in due order: a tenant whose head is the oldest but
// whose tag is ahead is not served before one that is owed, however short capacity is.
// (Mutation checked: keying selection on the head's due time makes this fail.)
#[test]
fn rule4_no_fallback_to_oldest_first() {
    let mut s = Scheduler::new(cfg());
    let mut w = World::default();
    w.add(1, 100, 0, 100);
    for now in 0..5 {
        w.tick(&mut s, now, lim(1));
    }
    w.add(2, 10, 5, 100);
    let claims = w.tick(&mut s, 6, lim(1));
    assert_eq!(claims[0].tenant, 2, "{claims:?}");
}

// Rule 5. Guards: a row that does not fit the bytes left skips only its tenant
// (`if !fits { ...; continue; }`), and a row larger than the whole budget goes alone on
// an empty tick (`size > limits.bytes && rows_total == 0`).
#[test]
fn rule5_work_conserving_past_rows_that_do_not_fit() {
    let mut s = Scheduler::new(cfg());
    let a = [row(0, 8000)];
    let b = [row(0, 4000)];
    let c = [row(0, 1000)];
    let heads = [
        TenantHead {
            tenant: 1,
            group: 0,
            weight: 1,
            group_weight: 1,
            cap: None,
            inflight: 0,
            rows: &a,
        },
        TenantHead {
            tenant: 2,
            group: 0,
            weight: 1,
            group_weight: 1,
            cap: None,
            inflight: 0,
            rows: &b,
        },
        TenantHead {
            tenant: 3,
            group: 0,
            weight: 1,
            group_weight: 1,
            cap: None,
            inflight: 0,
            rows: &c,
        },
    ];
    let claims = s.plan(
        0,
        &heads,
        Limits {
            rows: 3,
            bytes: 10_000,
        },
    );
    let got: Vec<u32> = claims.iter().map(|c| c.tenant).collect();
    assert_eq!(got, vec![1, 3]);

    let mut s = Scheduler::new(cfg());
    let huge = [row(0, 50_000)];
    let one = [TenantHead {
        tenant: 4,
        group: 0,
        weight: 1,
        group_weight: 1,
        cap: None,
        inflight: 0,
        rows: &huge,
    }];
    let claims = s.plan(
        0,
        &one,
        Limits {
            rows: 3,
            bytes: 10_000,
        },
    );
    assert_eq!(claims.len(), 1, "an oversize row must not be stuck forever");
}

// Rule 5, and finding 1 of issue 15. Guard: `skipped_for_bytes` (and the
// `competing_floor` it feeds). A tenant of 4,000-byte rows shares a 10,000-byte budget
// with one of 1,000-byte rows. Each tick its second row finds too few bytes left and is
// skipped while the other's claims raise the floor past its tag. Lifted to that floor
// next tick, it would lose the lag every tick and get exactly one row per tick (4,000
// bytes to the other's 6,000), although its byte share (dominant share, fluid: 0.4
// rows-worth of budget per row against 0.1) is 5,000. Keeping its floor, it catches up
// with a second row on some ticks.
#[test]
fn rule5_a_tenant_skipped_for_bytes_keeps_its_lag() {
    let mut s = Scheduler::new(cfg());
    let mut w = World::default();
    w.add(1, 10_000, 0, 4000);
    w.add(2, 100_000, 0, 1000);
    let limits = Limits {
        rows: 100,
        bytes: 10_000,
    };
    let (mut big, mut small) = (0u64, 0u64);
    for now in 0..100 {
        let c = w.tick(&mut s, now, limits);
        big += u64::from(count(&c, 1)) * 4000;
        small += u64::from(count(&c, 2)) * 1000;
    }
    // Written off: 400,000 against 600,000. Kept: at least 460,000 (the 5,000-byte
    // fluid share less one row's worth of rounding every few ticks).
    assert!(
        big >= 460_000,
        "large rows got {big} bytes, small rows {small}"
    );
    assert!(
        small >= 400_000,
        "small rows got {small} bytes, large rows {big}"
    );
}

// Rule 5 one level up (issue 31: the daemon groups by source). The same two tenants,
// each the only tenant of its own group: the group of the large rows is skipped for
// bytes while the other group's claims raise the root floor, and lifted to that floor
// it lost its lag on every tick, as the tenant did before. Guard: the group's kept
// floor in `skipped_for_bytes` (mutation M5g).
#[test]
fn rule5_a_group_skipped_for_bytes_keeps_its_lag() {
    let mut s = Scheduler::new(cfg());
    let mut w = World::default();
    w.add(1, 10_000, 0, 4000);
    w.add(2, 100_000, 0, 1000);
    w.group.insert(1, 1);
    w.group.insert(2, 2);
    let limits = Limits {
        rows: 100,
        bytes: 10_000,
    };
    let (mut big, mut small) = (0u64, 0u64);
    for now in 0..100 {
        let c = w.tick(&mut s, now, limits);
        big += u64::from(count(&c, 1)) * 4000;
        small += u64::from(count(&c, 2)) * 1000;
    }
    assert!(
        big >= 460_000,
        "large rows got {big} bytes, small rows {small}"
    );
    assert!(
        small >= 400_000,
        "small rows got {small} bytes, large rows {big}"
    );
}

// Rule 5 under a bound on bytes in flight (issue 15, the daemon's refill ticks).
// Guard: `oversize_alone` (a row larger than the bytes left goes first on a tick when
// its tag says so, and only while some budget is left). The caller passes the bytes
// free under a 1,024,000-byte in-flight bound; small rows finish one to sixteen ticks
// after their claim, so the bytes freed on most ticks are a few small rows' worth and
// never add up to a 512,000-byte row by themselves: small rows would take every
// fragment and the large tenant would starve. With the rule the large tenant goes
// first whenever its tag is lowest and overdraws the bound by at most one row, which
// its own bytes repay, so the split of claimed bytes stays even. With nothing free,
// nothing is claimed, so the overdraft never grows.
#[test]
fn rule5_large_rows_get_their_bytes_under_an_inflight_bound() {
    const BOUND: u64 = 1_024_000;
    const LARGE: u32 = 512_000;
    let mut s = Scheduler::new(cfg());
    let mut w = World::default();
    w.add(1, 2_000, 0, LARGE);
    w.add(2, 400_000, 0, 2_000);
    let full = Limits {
        rows: 1_024,
        bytes: 0,
    };
    let none = w.tick(&mut s, 0, full);
    assert!(none.is_empty(), "claimed {none:?} with the bound full");
    // (tick it finishes, bytes) of every row in flight.
    let mut flight: Vec<(u64, u64)> = Vec::new();
    let (mut big, mut small, mut serial, mut peak) = (0u64, 0u64, 0u64, 0u64);
    for now in 0..600u64 {
        flight.retain(|&(done, _)| done > now);
        let held: u64 = flight.iter().map(|&(_, b)| b).sum();
        let limits = Limits {
            rows: 1_024,
            bytes: BOUND.saturating_sub(held),
        };
        for c in w.tick(&mut s, now, limits) {
            for _ in 0..c.rows {
                serial += 1;
                let (size, hold) = if c.tenant == 1 {
                    (u64::from(LARGE), 3)
                } else {
                    (2_000, 1 + serial % 16)
                };
                flight.push((now + hold, size));
            }
            if c.tenant == 1 {
                big += c.bytes;
            } else {
                small += c.bytes;
            }
        }
        peak = peak.max(flight.iter().map(|&(_, b)| b).sum());
    }
    let share = big as f64 / (big + small) as f64;
    assert!(
        (0.45..=0.55).contains(&share),
        "large rows got {big} bytes, small rows {small} ({share:.3})"
    );
    assert!(
        peak < BOUND + u64::from(LARGE),
        "{peak} bytes in flight: the overdraft grew past one row"
    );
}

// Rules 3 and 4 together (issue 15, `many_keys`). Guard: `order_stamp` (at equal start
// tags a tenant never served goes before one that has been). Sixty tenants arrive
// together with 8 rows each and ten are served on tick 0; a light tenant arrives on
// tick 1. The fifty still waiting are newcomers, so it stacks one row behind them, at
// the start tag of the ten already served once, and by waiting order alone it would
// follow those ten too: first served on tick 7, where round robin serves it on tick 6
// and the fluid split (61 tenants, 10 rows a tick) after 6.1 ticks. Never served, it
// goes first among them: tick 6.
#[test]
fn rule4_a_tenant_never_served_goes_first_among_equal_tags() {
    let mut s = Scheduler::new(cfg());
    let mut w = World::default();
    for t in 0..60 {
        w.add(t, 8, 0, 1000);
    }
    let mut first = None;
    for now in 0..20 {
        if now == 1 {
            w.add(100, 4, 1, 1000);
        }
        let c = w.tick(&mut s, now, lim(10));
        if first.is_none() && count(&c, 100) > 0 {
            first = Some(now);
        }
    }
    assert_eq!(first, Some(6), "the light tenant's first tick");
}

// Rule 3 with a capped incumbent (finding 3 of issue 15). Guard: `servable(h, 0, now)`
// in what counts as established. The only established tenant is at its cap, so it can
// take nothing; six tenants arriving together must then be served side by side (two
// rows a tick, three ticks for six first rows), not stacked one behind another as if
// they had to be kept from crowding out a tenant that cannot be served anyway.
#[test]
fn rule3_a_capped_incumbent_does_not_line_up_simultaneous_newcomers() {
    let mut s = Scheduler::new(cfg());
    let inc = [row(0, 100), row(0, 100)];
    // Served once, then at its cap from here on.
    let h = TenantHead {
        tenant: 1,
        group: 0,
        weight: 1,
        group_weight: 1,
        cap: Some(1),
        inflight: 0,
        rows: &inc,
    };
    assert_eq!(s.plan(0, &[h], lim(1)).len(), 1);
    let mut w = World::default();
    for t in 10..16u32 {
        w.add(t, 10, 1, 100);
    }
    let mut served_at: BTreeMap<u32, u64> = BTreeMap::new();
    for now in 1..10 {
        let heads_claims = {
            for q in w.queues.values_mut() {
                q.make_contiguous();
            }
            let mut heads: Vec<TenantHead<'_>> = vec![TenantHead {
                tenant: 1,
                group: 0,
                weight: 1,
                group_weight: 1,
                cap: Some(1),
                inflight: 1,
                rows: &inc,
            }];
            for t in &w.order {
                heads.push(TenantHead {
                    tenant: *t,
                    group: 0,
                    weight: 1,
                    group_weight: 1,
                    cap: None,
                    inflight: 0,
                    rows: w.queues[t].as_slices().0,
                });
            }
            s.plan(now, &heads, lim(2))
        };
        for c in heads_claims {
            served_at.entry(c.tenant).or_insert(now);
            for _ in 0..c.rows {
                w.queues.get_mut(&c.tenant).map(|q| q.pop_front());
            }
        }
    }
    assert!(!served_at.contains_key(&1), "the capped tenant was claimed");
    for t in 10..16u32 {
        let at = served_at.get(&t).copied().unwrap_or(u64::MAX);
        assert!(
            at <= 3,
            "newcomer {t} first served at tick {at}: {served_at:?}"
        );
    }
}

// Rule 6. Guards: the ceiling loop and the sweep in `sweep`. A stream of tenants that
// are served once and never return must not grow the state past the ceiling, and idle
// entries must go once their horizon has passed.
#[test]
fn rule6_state_is_bounded_by_the_ceiling_and_the_sweep() {
    let mut s = Scheduler::new(Config {
        max_tenants: 100,
        forget_after: 50,
        ..cfg()
    });
    let mut w = World::default();
    for now in 0..2000u64 {
        w.add(now as u32, 1, now, 100);
        w.tick(&mut s, now, lim(1));
        assert!(s.state_size() <= 101 + 1, "state {}", s.state_size());
    }
    for now in 2000..2400 {
        w.tick(&mut s, now, lim(1));
    }
    assert!(s.state_size() <= 2, "idle state left: {}", s.state_size());
}

// Rule 7. Guard: the sweep budget (`cfg.sweep_budget + input`). A tick over ten tenants
// costs the same whether the scheduler remembers ten tenants or fifty thousand, even
// when all fifty thousand are due for the sweep at once.
#[test]
fn rule7_tick_cost_scales_with_tenants_due_now() {
    let mut s = Scheduler::new(Config {
        forget_after: 100,
        ..cfg()
    });
    let mut w = World::default();
    for t in 0..50_000u32 {
        w.add(t, 1, 0, 100);
    }
    w.tick(&mut s, 0, lim(50_000));
    assert!(s.state_size() >= 50_000);
    let mut small = World::default();
    for t in 100_000..100_010u32 {
        small.add(t, 5, 200, 100);
    }
    small.tick(&mut s, 200, lim(5));
    let work = s.last_work();
    assert_eq!(work.heads, 10);
    assert!(work.heap_ops <= 4 * (10 + 5) + 2, "{work:?}");
    assert!(work.swept <= 2 * (32 + 10), "{work:?}");
}

#[test]
fn weights_split_rows_in_proportion() {
    let mut s = Scheduler::new(cfg());
    let mut w = World::default();
    w.add(1, 10_000, 0, 100);
    w.add(2, 10_000, 0, 100);
    w.weight.insert(2, 3);
    let (mut a, mut b) = (0, 0);
    for now in 0..100 {
        let c = w.tick(&mut s, now, lim(4));
        a += count(&c, 1);
        b += count(&c, 2);
    }
    assert_eq!(a + b, 400);
    assert!(
        (95..=105).contains(&a),
        "weight 1 got {a}, weight 3 got {b}"
    );
}

#[test]
fn groups_are_served_fairly_before_tenants() {
    let mut s = Scheduler::new(cfg());
    let mut w = World::default();
    // Group 1 holds nine tenants, group 2 one: the lone tenant gets half.
    for t in 0..9 {
        w.add(t, 1000, 0, 100);
        w.group.insert(t, 1);
    }
    w.add(100, 1000, 0, 100);
    w.group.insert(100, 2);
    let mut lone = 0;
    for now in 0..100 {
        lone += count(&w.tick(&mut s, now, lim(4)), 100);
    }
    assert!((190..=210).contains(&lone), "lone tenant got {lone} of 400");
}

/// A group's weight is its share among the groups: a source of weight 3
/// holding one tenant takes three rows for each of a weight-1 source's
/// nine tenants together, and the weights within a group still split
/// that group's share. Guard: charging the group at weight 1 whatever
/// its tenants say (the daemon's source weights would do nothing).
#[test]
fn a_groups_weight_is_its_share_among_the_groups() {
    let mut s = Scheduler::new(cfg());
    let mut w = World::default();
    for t in 0..9 {
        w.add(t, 1000, 0, 100);
        w.group.insert(t, 1);
    }
    w.add(100, 1000, 0, 100);
    w.add(101, 1000, 0, 100);
    w.group.insert(100, 2);
    w.group.insert(101, 2);
    w.weight.insert(101, 3);
    w.group_weight.insert(2, 3);
    let (mut a, mut b) = (0, 0);
    for now in 0..100 {
        let c = w.tick(&mut s, now, lim(4));
        a += count(&c, 100);
        b += count(&c, 101);
    }
    // Group 2 gets 3/4 of 400 rows; within it, 1:3.
    assert!(
        (290..=310).contains(&(a + b)),
        "weight-3 group got {} of 400",
        a + b
    );
    assert!(
        (70..=80).contains(&a),
        "weight 1 within the group got {a}, weight 3 got {b}"
    );
}

#[test]
fn a_tenant_listed_twice_is_claimed_once() {
    let mut s = Scheduler::new(cfg());
    let r = [row(0, 10), row(0, 10)];
    let h = TenantHead {
        tenant: 5,
        group: 0,
        weight: 1,
        group_weight: 1,
        cap: None,
        inflight: 0,
        rows: &r,
    };
    let claims = s.plan(0, &[h, h], lim(10));
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].rows, 2);
    assert_eq!(claims[0].bytes, 20);
}

#[test]
fn zero_limits_claim_nothing_but_still_register() {
    let mut s = Scheduler::new(cfg());
    let r = [row(0, 10)];
    let h = TenantHead {
        tenant: 5,
        group: 0,
        weight: 0,
        group_weight: 1,
        cap: Some(0),
        inflight: 0,
        rows: &r,
    };
    assert!(s.plan(0, &[h], lim(0)).is_empty());
    assert!(s.state_size() >= 1);
    s.forget(5);
    assert_eq!(s.state_size(), 1, "only the group is left");
}

// Rules 1 and 2 for a paused tenant (issue 16): the dispatcher pauses a tenant by not
// listing it, so it is absent like a drained tenant. While away it holds no floor and
// costs the others no turn; back, it competes at the floor (no credit for the time it
// was paused) and is served in its first tick (not pushed behind everyone). Checked
// with its entry remembered and with its entry swept while it was away. Guard: the
// floor a returning tenant is lifted to (`competing_floor`'s `group_floor`); without it
// the returning tenant takes every row until its old tag catches up.
#[test]
fn rule2_a_paused_tenant_holds_no_floor_and_gets_no_credit_back() {
    for forget_after in [1_000_000, 5] {
        let mut s = Scheduler::new(Config {
            forget_after,
            ..cfg()
        });
        let mut w = World::default();
        for t in 1..=4u32 {
            w.add(t, 10_000, 0, 100);
        }
        let mut paused_rows = VecDeque::new();
        let mut got: BTreeMap<u32, u32> = BTreeMap::new();
        let mut first_back = None;
        let mut back = 0;
        for now in 0..100u64 {
            if now == 20 {
                paused_rows = w.queues.remove(&4).unwrap_or_default();
            }
            if now == 70 {
                w.queues.insert(4, std::mem::take(&mut paused_rows));
            }
            let claims = w.tick(&mut s, now, lim(4));
            if (20..70).contains(&now) {
                for t in 1..=3u32 {
                    *got.entry(t).or_default() += count(&claims, t);
                }
                assert_eq!(count(&claims, 4), 0, "a paused tenant was claimed");
            }
            if (70..80).contains(&now) {
                let n = count(&claims, 4);
                back += n;
                if n > 0 && first_back.is_none() {
                    first_back = Some(now);
                }
            }
        }
        // 200 rows among the three present: 66 or 67 each, none lost to the paused one.
        for (t, n) in &got {
            assert!(
                (66..=67).contains(n),
                "forget_after {forget_after}: tenant {t} got {n} of 200 while 4 was paused: {got:?}"
            );
        }
        // Back: a fair quarter of 40 rows, not 50 ticks of hoarded turns.
        assert!(
            (9..=11).contains(&back),
            "forget_after {forget_after}: resumed tenant got {back} of 40"
        );
        assert_eq!(first_back, Some(70), "forget_after {forget_after}");
    }
}

/// Rule 8 world: backlogged tenants of 100-byte rows; a claimed row is held `hold`
/// ticks, and the node has `node` slots, of which a tick may claim `per_tick`.
struct Held {
    rows: Vec<HeadRow>,
    tenants: Vec<(u32, Option<u32>)>,
    flying: Vec<(u64, u32)>,
    hold: u64,
    node: u32,
    per_tick: u32,
}

impl Held {
    fn new(hold: u64, node: u32, per_tick: u32) -> Held {
        Held {
            rows: vec![row(0, 100); 64],
            tenants: Vec::new(),
            flying: Vec::new(),
            hold,
            node,
            per_tick,
        }
    }

    fn inflight(&self, t: u32) -> u32 {
        self.flying.iter().filter(|f| f.1 == t).count() as u32
    }

    fn tick(&mut self, s: &mut Scheduler, now: u64) -> Vec<Claim> {
        self.flying.retain(|f| f.0 > now);
        let heads: Vec<TenantHead<'_>> = self
            .tenants
            .iter()
            .map(|&(t, cap)| TenantHead {
                tenant: t,
                group: 0,
                weight: 1,
                group_weight: 1,
                cap,
                inflight: self.inflight(t),
                rows: &self.rows,
            })
            .collect();
        let room = self.node - self.flying.len() as u32;
        let claims = s.plan(
            now,
            &heads,
            Limits {
                rows: room.min(self.per_tick),
                bytes: u64::MAX,
            },
        );
        drop(heads);
        for c in &claims {
            for _ in 0..c.rows {
                self.flying.push((now + self.hold, c.tenant));
            }
        }
        assert!(self.flying.len() as u32 <= self.node);
        claims
    }
}

fn spare(ceiling: u32, reserve: u32) -> Config {
    Config {
        spare: Some(Spare { ceiling, reserve }),
        ..cfg()
    }
}

// Rule 8 (issue 19). Guards: the spare pass in `select`, its reserve (`Pass::keep`) and
// the ceiling in both passes. A backlogged tenant capped at 4 is alone on a node of 16
// slots: with hard caps it leaves 12 idle; with spare capacity it takes slots up to
// the ceiling, leaves the reserve free, and a light tenant arriving then is served on
// the tick it arrives.
#[test]
fn rule8_a_lone_tenant_uses_idle_slots_up_to_the_ceiling() {
    let lone = |cfg: Config| {
        let mut s = Scheduler::new(cfg);
        let mut w = Held::new(10, 16, 16);
        w.tenants.push((1, Some(4)));
        for now in 0..5 {
            w.tick(&mut s, now);
        }
        (s, w)
    };
    assert_eq!(lone(cfg()).1.inflight(1), 4, "hard caps: today's behaviour");
    assert_eq!(lone(spare(12, 0)).1.inflight(1), 12, "up to the ceiling");
    assert_eq!(lone(spare(16, 0)).1.inflight(1), 16, "every idle slot");
    assert_eq!(
        lone(spare(3, 0)).1.inflight(1),
        3,
        "a ceiling below the cap binds"
    );

    let (mut s, mut w) = lone(spare(16, 2));
    assert_eq!(w.inflight(1), 14, "the reserve stays free");
    w.tenants.push((2, Some(4)));
    let claims = w.tick(&mut s, 5);
    assert_eq!(
        count(&claims, 2),
        2,
        "the light tenant waits for no borrowed row"
    );
    assert_eq!(count(&claims, 1), 0, "{claims:?}");
}

// Rule 8: giving borrowed slots back. Tenant 1 holds all 16 slots (one frees per tick)
// when tenant 2 arrives, backlogged. Nothing is taken back, but every freed slot goes
// to tenant 2 until it reaches its cap (the fair pass runs before the spare pass), and
// once tenant 1's borrowed rows have finished (one hold) both hold their fair half,
// 8 ± 1, from then on. Guard: the fair pass stopping at the cap; a single pass that
// let everyone run up to the ceiling would hand tenant 2 only every other freed slot.
#[test]
fn rule8_a_newcomer_is_served_first_and_gets_its_share_as_borrowed_rows_finish() {
    let mut s = Scheduler::new(spare(16, 0));
    let mut w = Held::new(16, 16, 1);
    w.tenants.push((1, Some(4)));
    for now in 0..40 {
        w.tick(&mut s, now);
    }
    assert_eq!(w.inflight(1), 16, "alone, it borrows every slot");
    w.tenants.push((2, Some(4)));
    for now in 40..44 {
        let claims = w.tick(&mut s, now);
        assert_eq!(count(&claims, 2), 1, "tick {now}: {claims:?}");
    }
    for now in 44..160 {
        w.tick(&mut s, now);
        if now >= 40 + 16 {
            for t in [1, 2] {
                let n = w.inflight(t);
                assert!(
                    (7..=9).contains(&n),
                    "tick {now}: tenant {t} holds {n} of 16 slots"
                );
            }
        }
    }
}

// `plan_fitting` (issue 31: a sink's room is the caller's bound): two tenants
// backlogged against one slot a tick, which the caller's `fits` grants to the first
// row asked. A refused row is not charged, so the tenants alternate. Guard: the
// `fits` call in `fill` (mutation M10): without it both are claimed every tick.
#[test]
fn a_row_the_caller_refuses_is_not_claimed_and_not_charged() {
    let mut s = Scheduler::new(cfg());
    let rows: Vec<HeadRow> = (0..10).map(|_| row(0, 1000)).collect();
    let heads: Vec<TenantHead<'_>> = [1u32, 2]
        .iter()
        .map(|&t| TenantHead {
            tenant: t,
            group: 0,
            weight: 1,
            group_weight: 1,
            cap: None,
            inflight: 0,
            rows: &rows,
        })
        .collect();
    let mut got = BTreeMap::new();
    for now in 0..100 {
        let mut slot = 1u32;
        let mut fits = |o: Offer| {
            let ok = slot > 0;
            slot = slot.saturating_sub(1);
            ok.then_some(o.size)
        };
        for c in s.plan_fitting(now, &heads, lim(10), &mut fits) {
            *got.entry(c.tenant).or_insert(0u32) += c.rows;
        }
    }
    assert_eq!(got.values().sum::<u32>(), 100, "one slot a tick: {got:?}");
    assert!(
        got.values().all(|&n| (45..=55).contains(&n)),
        "the slot is shared: {got:?}"
    );
}

// `plan_fitting`'s caller may claim another row than the one offered (the next
// of the tenant's rows whose sink has room): the bytes left and the charge are
// that row's (issue 47). Tenant 1 is offered a 10-byte row and takes its 90-byte
// one; with 100 bytes a tick, tenant 2's 20-byte row must wait. Charged the
// offered 10 bytes, the tick claimed 110 of 100.
#[test]
fn the_bytes_and_the_charge_are_the_claimed_rows() {
    let mut s = Scheduler::new(cfg());
    let one = [row(0, 10), row(0, 90)];
    let two = [row(0, 20)];
    let head = |tenant: u32, rows: &'static [HeadRow]| TenantHead {
        tenant,
        group: 0,
        weight: 1,
        group_weight: 1,
        cap: None,
        inflight: 0,
        rows,
    };
    let one: &'static [HeadRow] = Box::leak(Box::new(one));
    let two: &'static [HeadRow] = Box::leak(Box::new(two));
    let heads = [head(1, one), head(2, two)];
    let mut claimed = 0u64;
    let mut fits = |o: Offer| {
        let size = if o.tenant == 1 { 90 } else { o.size };
        (u64::from(size) <= o.room).then(|| {
            claimed += u64::from(size);
            size
        })
    };
    let limits = Limits {
        rows: 10,
        bytes: 100,
    };
    let plan = s.plan_fitting(0, &heads, limits, &mut fits);
    assert!(claimed <= 100, "claimed {claimed} bytes of 100: {plan:?}");
    assert_eq!(plan.len(), 1, "{plan:?}");
}
