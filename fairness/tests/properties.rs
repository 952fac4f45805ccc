//! Property tests: over random worlds the scheduler only claims what may be claimed,
//! never claims a row twice, and keeps its state under its ceiling.

// A test crate: its helpers panic on what a test did not expect, which is
// the failure report (the workspace refuses unwrap/expect elsewhere).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, VecDeque};

use ankusa_fairness::{Claim, Config, HeadRow, Limits, RowKind, Scheduler, Spare, TenantHead};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Arrival {
    tenant: u32,
    rows: u8,
    delay: u8,
    size: u32,
}

fn arrival() -> impl Strategy<Value = Arrival> {
    (0u32..40, 1u8..5, 0u8..4, 1u32..5000).prop_map(|(tenant, rows, delay, size)| Arrival {
        tenant,
        rows,
        delay,
        size,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn claims_are_legal_exactly_once_and_state_is_bounded(
        ticks in prop::collection::vec(prop::collection::vec(arrival(), 0..6), 1..60),
        rows_limit in 1u32..8,
        bytes_limit in prop_oneof![Just(u64::MAX), 1000u64..20_000],
        max_tenants in 1usize..16,
        caps in prop::collection::vec(prop_oneof![Just(None), (1u32..3).prop_map(Some)], 40),
        groups in prop::collection::vec(0u32..3, 40),
        spare in prop_oneof![
            Just(None),
            (1u32..6, 0u32..3).prop_map(|(ceiling, reserve)| Some(Spare { ceiling, reserve })),
        ],
    ) {
        let mut s = Scheduler::new(Config {
            row_overhead_bytes: 100,
            max_tenants,
            forget_after: 5,
            sweep_budget: 4,
            spare,
        });
        // Per tenant: queued (row, id) in due order; in flight: (done_at, tenant, id).
        let mut queues: BTreeMap<u32, VecDeque<(HeadRow, u64)>> = BTreeMap::new();
        let mut inflight: Vec<(u64, u32, u64)> = Vec::new();
        let mut claimed_ids: Vec<u64> = Vec::new();
        let mut next_id = 0u64;
        let horizon = ticks.len() as u64 + 20;
        for now in 0..horizon {
            inflight.retain(|(done, _, _)| *done > now);
            if let Some(arrivals) = ticks.get(now as usize) {
                for a in arrivals {
                    let q = queues.entry(a.tenant).or_default();
                    for _ in 0..a.rows {
                        next_id += 1;
                        let row = HeadRow { due_at: now + u64::from(a.delay), seq: next_id, size: a.size, kind: RowKind::First };
                        let pos = q.partition_point(|(r, _)| (r.due_at, r.seq) < (row.due_at, row.seq));
                        q.insert(pos, (row, next_id));
                    }
                }
            }
            let rows_store: BTreeMap<u32, Vec<HeadRow>> = queues
                .iter()
                .filter(|(_, q)| !q.is_empty())
                .map(|(t, q)| (*t, q.iter().map(|(r, _)| *r).collect()))
                .collect();
            let heads: Vec<TenantHead<'_>> = rows_store
                .iter()
                .map(|(t, rows)| TenantHead {
                    tenant: *t,
                    group: groups[*t as usize],
                    weight: 1 + (*t % 3),
                    group_weight: 1,
                    cap: caps[*t as usize],
                    inflight: inflight.iter().filter(|x| x.1 == *t).count() as u32,
                    rows,
                })
                .collect();
            let limits = Limits { rows: rows_limit, bytes: bytes_limit };
            let claims: Vec<Claim> = s.plan(now, &heads, limits);

            let total_rows: u32 = claims.iter().map(|c| c.rows).sum();
            let total_bytes: u64 = claims.iter().map(|c| c.bytes).sum();
            prop_assert!(total_rows <= rows_limit);
            let oversize_alone = total_rows == 1 && total_bytes > bytes_limit;
            prop_assert!(total_bytes <= bytes_limit || oversize_alone);
            let mut seen = Vec::new();
            for c in &claims {
                prop_assert!(!seen.contains(&c.tenant), "tenant claimed twice in a tick");
                seen.push(c.tenant);
                let h = heads.iter().find(|h| h.tenant == c.tenant);
                prop_assert!(h.is_some());
                let h = h.unwrap();
                prop_assert!(c.rows as usize <= h.rows.len());
                prop_assert!(h.rows[..c.rows as usize].iter().all(|r| r.due_at <= now));
                prop_assert_eq!(c.bytes, h.rows[..c.rows as usize].iter().map(|r| u64::from(r.size)).sum::<u64>());
                // A cap is hard unless spare capacity is configured; then a tenant past
                // its cap borrowed, which leaves the reserve unclaimed, and nobody
                // passes the ceiling.
                match (h.cap, spare) {
                    (Some(cap), None) => prop_assert!(h.inflight + c.rows <= cap),
                    (cap, Some(sp)) => {
                        prop_assert!(h.inflight + c.rows <= sp.ceiling, "past the ceiling");
                        if cap.is_some_and(|cap| h.inflight + c.rows > cap) {
                            prop_assert!(total_rows + sp.reserve <= rows_limit, "borrowed the reserve");
                        }
                    }
                    (None, None) => {}
                }
            }
            drop(heads);
            for c in &claims {
                let q = queues.get_mut(&c.tenant).unwrap();
                for _ in 0..c.rows {
                    let (_, id) = q.pop_front().unwrap();
                    prop_assert!(!claimed_ids.contains(&id), "row claimed twice");
                    claimed_ids.push(id);
                    inflight.push((now + 2, c.tenant, id));
                }
            }
            // Tenants plus the groups they refer to; memberless groups are capped too.
            prop_assert!(s.state_size() <= 2 * max_tenants + 3, "state {} > bound", s.state_size());
        }
    }

    #[test]
    fn work_conserving_when_nothing_is_capped_or_late(
        sizes in prop::collection::vec((0u32..20, 1u32..3000), 1..80),
        rows_limit in 1u32..10,
        bytes_limit in 1000u64..10_000,
    ) {
        let mut s = Scheduler::new(Config::default());
        let mut by: BTreeMap<u32, Vec<HeadRow>> = BTreeMap::new();
        for (i, (t, size)) in sizes.iter().enumerate() {
            by.entry(*t).or_default().push(HeadRow { due_at: 0, seq: i as u64, size: *size, kind: RowKind::First });
        }
        let heads: Vec<TenantHead<'_>> = by.iter().map(|(t, rows)| TenantHead {
            tenant: *t, group: 0, weight: 1, group_weight: 1, cap: None, inflight: 0, rows,
        }).collect();
        let claims = s.plan(0, &heads, Limits { rows: rows_limit, bytes: bytes_limit });
        let used_rows: u32 = claims.iter().map(|c| c.rows).sum();
        let used_bytes: u64 = claims.iter().map(|c| c.bytes).sum();
        if used_rows < rows_limit {
            // No tenant's next row could still have fitted.
            for h in &heads {
                let k = claims.iter().find(|c| c.tenant == h.tenant).map_or(0, |c| c.rows) as usize;
                if let Some(r) = h.rows.get(k) {
                    let size = u64::from(r.size);
                    let fits = size + used_bytes <= bytes_limit || (size > bytes_limit && used_rows == 0);
                    prop_assert!(!fits, "tenant {} could have taken a row", h.tenant);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// With spare capacity, a tick leaves a row unclaimed only when no tenant could
    /// take its next one: under its cap (and the ceiling), or at its cap and under the
    /// ceiling while more than the reserve is left.
    #[test]
    fn work_conserving_with_spare_capacity(
        tenants in prop::collection::vec((1usize..8, 1u32..3000, 0u32..6, 1u32..5), 1..12),
        rows_limit in 1u32..16,
        bytes_limit in prop_oneof![Just(u64::MAX), 1000u64..20_000],
        ceiling in 1u32..10,
        reserve in 0u32..4,
    ) {
        let mut s = Scheduler::new(Config {
            spare: Some(Spare { ceiling, reserve }),
            ..Config::default()
        });
        let rows: Vec<Vec<HeadRow>> = tenants
            .iter()
            .enumerate()
            .map(|(i, (n, size, _, _))| {
                (0..*n)
                    .map(|k| HeadRow { due_at: 0, seq: (i * 100 + k) as u64, size: *size, kind: RowKind::First })
                    .collect()
            })
            .collect();
        let heads: Vec<TenantHead<'_>> = tenants
            .iter()
            .zip(&rows)
            .enumerate()
            .map(|(i, ((_, _, inflight, cap), rows))| TenantHead {
                tenant: i as u32,
                group: 0,
                weight: 1,
                group_weight: 1,
                cap: Some(*cap),
                inflight: *inflight,
                rows,
            })
            .collect();
        let claims = s.plan(0, &heads, Limits { rows: rows_limit, bytes: bytes_limit });
        let used_rows: u32 = claims.iter().map(|c| c.rows).sum();
        let used_bytes: u64 = claims.iter().map(|c| c.bytes).sum();
        for h in &heads {
            let k = claims.iter().find(|c| c.tenant == h.tenant).map_or(0, |c| c.rows);
            let Some(r) = h.rows.get(k as usize) else { continue };
            let size = u64::from(r.size);
            let fits = size + used_bytes <= bytes_limit || (size > bytes_limit && used_rows == 0);
            let held = h.inflight + k;
            let under_ceiling = held < ceiling;
            let under_cap = h.cap.is_none_or(|c| held < c);
            let lendable = used_rows + reserve < rows_limit;
            let could = used_rows < rows_limit && fits && under_ceiling && (under_cap || lendable);
            prop_assert!(!could, "tenant {} could have taken a row: {claims:?}", h.tenant);
        }
    }
}
