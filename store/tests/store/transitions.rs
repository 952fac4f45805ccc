//! The ADR's proof list for counters and transitions, on a real RocksDB.

use std::collections::BTreeMap;

use crate::common::*;
use ankusa_store::queries;
use ankusa_store::tenants::TenantAllocator;
use ankusa_store::transitions::{self, PurgeKinds, SinkSet};
use ankusa_store::values::{ArchiveValue, DeliveryRow, Kind};
use ankusa_store::{check, Batch, DeadRow, DueRow, InflightRow, Store, Total, Totals};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Ingest {
        tenant: u8,
        /// Which of positions 0..3 the hook owes rows to (a skipped one is
        /// a retired sink).
        sinks: u8,
        archive: bool,
        size: u16,
        dt: u32,
    },
    Claim(u16),
    Deliver(u16),
    Retry(u16, u32),
    DeadLetter(u16),
    Revive(u16),
    Recover(u16),
    PurgePending(u8),
    PurgeDead(u8),
    Settle(u16),
    Reclaim,
    Cleanup(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..4, 1u8..8, any::<bool>(), 1u16..2000, 0u32..5000).prop_map(|(tenant, sinks, archive, size, dt)| Op::Ingest { tenant, sinks, archive, size, dt }),
        3 => any::<u16>().prop_map(Op::Claim),
        2 => any::<u16>().prop_map(Op::Deliver),
        2 => (any::<u16>(), 0u32..10_000).prop_map(|(i, d)| Op::Retry(i, d)),
        2 => any::<u16>().prop_map(Op::DeadLetter),
        1 => any::<u16>().prop_map(Op::Revive),
        1 => any::<u16>().prop_map(Op::Recover),
        1 => (0u8..4).prop_map(Op::PurgePending),
        1 => (0u8..4).prop_map(Op::PurgeDead),
        1 => any::<u16>().prop_map(Op::Settle),
        1 => Just(Op::Reclaim),
        1 => (0u8..4).prop_map(Op::Cleanup),
    ]
}

/// Model of what exists, to pick valid arguments for each transition.
#[derive(Default)]
struct Model {
    due: Vec<DueRow>,
    inflight: Vec<InflightRow>,
    dead: Vec<(DeadRow, u32)>,
    archive: Vec<(u64, ArchiveValue)>,
    /// Transitions counted per (ordinal, total): what the store's
    /// cumulative totals must say.
    counted: BTreeMap<(u32, Total), u64>,
}

impl Model {
    fn count(&mut self, ord: u32, t: Total, n: u64) {
        *self.counted.entry((ord, t)).or_default() += n;
    }
}

fn pick<T: Clone>(v: &mut Vec<T>, i: u16) -> Option<T> {
    if v.is_empty() {
        None
    } else {
        let idx = i as usize % v.len();
        Some(v.swap_remove(idx))
    }
}

const TENANTS: [&str; 4] = ["default", "acme", "globex", "initech"];

fn apply(store: &Store, alloc: &mut TenantAllocator, m: &mut Model, now: &mut u64, op: &Op) {
    *now += 10;
    match *op {
        Op::Ingest {
            tenant,
            sinks,
            archive,
            size,
            dt,
        } => {
            let t = TENANTS[tenant as usize];
            let at = *now + u64::from(dt);
            let set = SinkSet::of((0..3).filter(|p| sinks & (1 << p) != 0));
            let rows = ingest_to(store, alloc, &[(t, at, size as usize, set, archive)]);
            assert_eq!(
                rows.iter().map(|r| r.sink).collect::<Vec<_>>(),
                set.iter().collect::<Vec<_>>(),
                "one row per position of the set, no other"
            );
            m.count(rows[0].ord, Total::Accepted, rows.len() as u64);
            if archive {
                let ord = rows[0].ord;
                m.archive.push((
                    rows[0].seq,
                    ArchiveValue {
                        size: u32::from(size),
                        ord,
                    },
                ));
            }
            m.due.extend(rows);
        }
        Op::Claim(i) => {
            if let Some(r) = pick(&mut m.due, i) {
                let mut b = Batch::new();
                m.inflight.push(transitions::claim(&mut b, &r));
                store.commit(b, false).unwrap();
            }
        }
        Op::Deliver(i) => {
            if let Some(r) = pick(&mut m.inflight, i) {
                let mut b = Batch::new();
                transitions::delivered(&mut b, &r);
                store.commit(b, false).unwrap();
                m.count(r.ord, Total::Delivered, 1);
            }
        }
        Op::Retry(i, d) => {
            if let Some(r) = pick(&mut m.inflight, i) {
                let mut row = queries::delivery(store, r.seq, r.sink).unwrap().unwrap();
                row.record(*now, 503, "unavailable");
                let mut b = Batch::new();
                m.due
                    .push(transitions::retry(&mut b, &r, &row, *now + u64::from(d)));
                store.commit(b, false).unwrap();
                m.count(r.ord, Total::Retried, 1);
            }
        }
        Op::DeadLetter(i) => {
            if let Some(r) = pick(&mut m.inflight, i) {
                let row = DeliveryRow::new(r.ord, r.size);
                let mut b = Batch::new();
                let d = transitions::dead_letter(&mut b, &r, &row, *now, "src", None);
                store.commit(b, false).unwrap();
                m.count(r.ord, Total::DeadLettered, 1);
                m.dead.push((d, r.size));
            }
        }
        Op::Revive(i) => {
            if let Some((d, size)) = pick(&mut m.dead, i) {
                let mut b = Batch::new();
                m.due.push(transitions::revive(&mut b, &d, size, *now));
                store.commit(b, false).unwrap();
            }
        }
        Op::Recover(i) => {
            if let Some(r) = pick(&mut m.inflight, i) {
                let mut b = Batch::new();
                m.due.push(transitions::recover_inflight(&mut b, &r, *now));
                store.commit(b, false).unwrap();
            }
        }
        Op::PurgePending(t) | Op::PurgeDead(t) => {
            let pending = matches!(op, Op::PurgePending(_));
            if let Some(ord) = ankusa_store::tenants::ord_of(store, TENANTS[t as usize]).unwrap() {
                let kinds = PurgeKinds {
                    pending,
                    dead: !pending,
                };
                transitions::purge_tenant(store, ord, kinds, |_| {}).unwrap();
                if pending {
                    m.due.retain(|r| r.ord != ord);
                } else {
                    m.dead.retain(|(d, _)| d.ord != ord);
                }
            }
        }
        Op::Settle(i) => {
            if let Some((seq, v)) = pick(&mut m.archive, i) {
                let mut b = Batch::new();
                transitions::archive_settle(&mut b, seq, &v);
                store.commit(b, false).unwrap();
            }
        }
        Op::Reclaim => {
            transitions::reclaim_pass(store, 1000).unwrap();
        }
        Op::Cleanup(t) => {
            if let Some(ord) = ankusa_store::tenants::ord_of(store, TENANTS[t as usize]).unwrap() {
                let (_, markers) = queries::active_markers(store, *now, usize::MAX).unwrap();
                let mine: Vec<u64> = markers.iter().filter(|m| m.0 == ord).map(|m| m.1).collect();
                transitions::cleanup_markers(store, ord, &mine, 0, *now).unwrap();
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Counters equal a fold after any sequence of transitions, and no due
    /// row is ever without its marker (both checked by `store check`).
    #[test]
    fn counters_equal_a_fold_after_any_sequence_of_transitions(
        ops in proptest::collection::vec(op(), 1..60),
        bounds in (1usize..4, 0usize..6).prop_map(|(rows_per_read, extra)| ankusa_store::waiting::FoldBounds { rows_per_read, cache: rows_per_read + extra }),
    ) {
        let (_d, store) = fresh();
        let mut alloc = TenantAllocator::load(&store, 100).unwrap();
        let mut m = Model::default();
        let mut now = 1_700_000_000_000u64;
        for (step, op) in ops.iter().enumerate() {
            apply(&store, &mut alloc, &mut m, &mut now, op);
            // After every step, the rows waiting per sink (all of one
            // source here) are the model's due rows, sink by sink, both as
            // stored and as folded, whatever the fold's memory bounds.
            let stored = ankusa_store::waiting::stored_waiting(&store, |_| {}).unwrap();
            let folded = ankusa_store::waiting::fold_waiting_bounded(&store, bounds).unwrap();
            for sink in 0u16..3 {
                let want = m.due.iter().filter(|r| r.sink == sink).count() as i64;
                let key = ankusa_store::pauses::SinkRef::new("src", sink);
                prop_assert_eq!(stored.get(&key).copied().unwrap_or(0), want, "stored, sink {} after step {} {:?}", sink, step, op);
                prop_assert_eq!(folded.get(&key).copied().unwrap_or(0), want, "folded under {:?}, sink {} after step {} {:?}", bounds, sink, step, op);
            }
        }
        let rep = check::run(&store, |_, _| {}).unwrap();
        prop_assert!(rep.ok(), "{:#?}", rep.mismatches);
        // And each tenant's counters equal its own fold and the model.
        let mut sum = ankusa_store::Counters::default();
        for t in TENANTS {
            if let Some(ord) = ankusa_store::tenants::ord_of(&store, t).unwrap() {
                let c = queries::counters(&store, ord).unwrap();
                prop_assert_eq!(c, check::fold_tenant(&store, ord).unwrap());
                let due_first = m.due.iter().filter(|r| r.ord == ord && r.kind == Kind::First).count() as i64;
                prop_assert_eq!(c.pending, due_first);
                prop_assert_eq!(c.inflight, m.inflight.iter().filter(|r| r.ord == ord).count() as i64);
                prop_assert_eq!(c.dead, m.dead.iter().filter(|d| d.0.ord == ord).count() as i64);
                for f in ankusa_store::Field::ALL {
                    *sum.get_mut(f) += c.get(f);
                }
            }
        }
        prop_assert_eq!(queries::node_counters(&store).unwrap(), sum);
    }

    /// The cumulative totals count exactly the transitions that happened
    /// (ingested rows, deliveries, retries, dead letters; revive, recovery,
    /// purge, settle, reclaim and cleanup count in none), never move down
    /// after any transition, and the node's are the sum of the tenants'.
    /// `store check` accepts them and `store repair` leaves them alone.
    #[test]
    fn totals_count_transitions_and_only_move_up(ops in proptest::collection::vec(op(), 1..60)) {
        let (_d, store) = fresh();
        let mut alloc = TenantAllocator::load(&store, 100).unwrap();
        let mut m = Model::default();
        let mut now = 1_700_000_000_000u64;
        let read_all = |store: &Store| -> Vec<Totals> {
            // Position 0 the node, then each of TENANTS (zeros until seen).
            let mut v = vec![queries::tallies(store, 0).unwrap().1];
            for t in TENANTS {
                v.push(match ankusa_store::tenants::ord_of(store, t).unwrap() {
                    Some(ord) => queries::tallies(store, ord).unwrap().1,
                    None => Totals::default(),
                });
            }
            v
        };
        let mut before = read_all(&store);
        for op in &ops {
            apply(&store, &mut alloc, &mut m, &mut now, op);
            let after = read_all(&store);
            for (b, a) in before.iter().zip(&after) {
                for t in Total::ALL {
                    prop_assert!(a.get(t) >= b.get(t), "{} moved down after {:?}: {} -> {}", t.name(), op, b.get(t), a.get(t));
                }
            }
            before = after;
        }
        let mut sum = Totals::default();
        for t in TENANTS {
            if let Some(ord) = ankusa_store::tenants::ord_of(&store, t).unwrap() {
                let (_, got) = queries::tallies(&store, ord).unwrap();
                for f in Total::ALL {
                    prop_assert_eq!(got.get(f), m.counted.get(&(ord, f)).copied().unwrap_or(0), "{} of {}", f.name(), t);
                    *sum.get_mut(f) += got.get(f);
                }
            }
        }
        prop_assert_eq!(queries::tallies(&store, 0).unwrap().1, sum);
        let rep = check::run(&store, |_, _| {}).unwrap();
        prop_assert!(rep.ok(), "{:#?}", rep.mismatches);
        let fixed = ankusa_store::repair::run(&store, false, now, |_, _| {}).unwrap();
        prop_assert_eq!(fixed.counters, 0);
        prop_assert_eq!(read_all(&store), before, "a repair must not touch the totals");
    }
}

/// Each counting transition puts its increment in the batch that makes the
/// row change (read back from the batch before it commits, and from the
/// store after), mirrored into the node; the others put none.
#[test]
fn totals_move_in_the_batch_of_their_transition() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 10).unwrap();
    let rows = ingest(&store, &mut alloc, &[("acme", 1000, 10, 3, false)]);
    let ord = rows[0].ord;
    let totals = |o: u32| queries::tallies(&store, o).unwrap().1;
    assert_eq!(totals(ord).accepted, 3, "one per delivery row");
    assert_eq!(totals(0).accepted, 3);

    let mut inflight = Vec::new();
    let mut b = Batch::new();
    for r in &rows {
        inflight.push(transitions::claim(&mut b, r));
    }
    assert!(
        Total::ALL.iter().all(|t| b.deltas().total(ord, *t) == 0),
        "a claim counts in no total"
    );
    store.commit(b, false).unwrap();

    let step = |b: Batch, t: Total| {
        assert_eq!(
            b.deltas().total(ord, t),
            1,
            "{} in the transition's batch",
            t.name()
        );
        let (was, was_node) = (totals(ord).get(t), totals(0).get(t));
        store.commit(b, false).unwrap();
        assert_eq!(totals(ord).get(t), was + 1, "{}", t.name());
        assert_eq!(totals(0).get(t), was_node + 1, "{} on the node", t.name());
    };
    let mut b = Batch::new();
    transitions::delivered(&mut b, &inflight[0]);
    step(b, Total::Delivered);
    let mut b = Batch::new();
    let row = DeliveryRow::new(ord, 10);
    let retried = transitions::retry(&mut b, &inflight[1], &row, 5000);
    step(b, Total::Retried);
    let mut b = Batch::new();
    let dead = transitions::dead_letter(&mut b, &inflight[2], &row, 2000, "src", None);
    step(b, Total::DeadLettered);

    // A replay (revive), a boot recovery and a purge move no total.
    let quiet = totals(ord);
    let mut b = Batch::new();
    let revived = transitions::revive(&mut b, &dead, 10, 3000);
    let f = transitions::claim(&mut b, &revived);
    transitions::recover_inflight(&mut b, &f, 3000);
    assert!(Total::ALL.iter().all(|t| b.deltas().total(ord, *t) == 0));
    store.commit(b, false).unwrap();
    let mut b = Batch::new();
    transitions::purge_due(&mut b, &retried);
    store.commit(b, false).unwrap();
    assert_eq!(totals(ord), quiet);
    assert_consistent(&store);
}

#[test]
fn concurrent_writers_do_not_lose_counts() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 10).unwrap();
    // Seed: 4 threads x 300 rows, each thread owns its rows and drives them
    // through different transitions on the same tenant concurrently.
    let rows = ingest(&store, &mut alloc, &[("acme", 1000, 10, 1, false)]);
    let ord = rows[0].ord;
    let mut per_thread = Vec::new();
    for _ in 0..4 {
        let hooks: Vec<_> = (0..300)
            .map(|i| ("acme", 2000 + i, 10usize, 1u16, false))
            .collect();
        per_thread.push(ingest(&store, &mut alloc, &hooks));
    }
    std::thread::scope(|s| {
        for (t, rows) in per_thread.into_iter().enumerate() {
            let store = &store;
            s.spawn(move || {
                for r in rows {
                    let mut b = Batch::new();
                    let f = transitions::claim(&mut b, &r);
                    store.commit(b, false).unwrap();
                    let mut b = Batch::new();
                    match t {
                        0 => transitions::delivered(&mut b, &f),
                        1 => {
                            transitions::retry(&mut b, &f, &DeliveryRow::new(f.ord, f.size), 9000);
                        }
                        2 => {
                            transitions::dead_letter(
                                &mut b,
                                &f,
                                &DeliveryRow::new(f.ord, f.size),
                                9000,
                                "src",
                                None,
                            );
                        }
                        _ => {
                            transitions::recover_inflight(&mut b, &f, 9000);
                        }
                    }
                    store.commit(b, false).unwrap();
                }
            });
        }
    });
    let c = queries::counters(&store, ord).unwrap();
    assert_eq!(
        c.pending,
        1 + 300,
        "the seed row plus thread 3's recovered rows"
    );
    assert_eq!(c.scheduled, 300);
    assert_eq!(c.dead, 300);
    assert_eq!(c.inflight, 0);
    assert_eq!(c.bytes, 10 * (1 + 3 * 300));
    assert_eq!(queries::node_counters(&store).unwrap(), c);
    let (_, t) = queries::tallies(&store, ord).unwrap();
    assert_eq!(
        t,
        Totals {
            accepted: 1 + 4 * 300,
            delivered: 300,
            retried: 300,
            dead_lettered: 300,
            unrouted: 0,
        },
        "concurrent writers lose no count of a total either"
    );
    assert_eq!(queries::tallies(&store, 0).unwrap().1, t);
    assert_consistent(&store);
}

#[test]
fn tenant_ordinal_is_assigned_once_and_never_reused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut seen = BTreeMap::new();
    {
        let store = Store::create_or_open(&path).unwrap();
        let mut alloc = TenantAllocator::load(&store, 1000)
            .unwrap()
            .with_capacity(3);
        for round in 0..3 {
            for t in ["a", "b", "c", "d", "e", "a", "c"] {
                let rows = ingest(&store, &mut alloc, &[(t, 100 + round, 1, 1, false)]);
                let ord = rows[0].ord;
                assert_eq!(
                    *seen.entry(t).or_insert(ord),
                    ord,
                    "tenant {t} changed ordinal"
                );
            }
        }
        // First-sight order, dense from 1.
        assert_eq!(
            seen.values().copied().collect::<Vec<_>>(),
            vec![1, 2, 3, 4, 5]
        );
        // A failed commit allocates nothing: resolve without committing.
        let mut b = Batch::new();
        let res = alloc.resolve(&store, ["zeta"], &mut b).unwrap();
        assert_eq!(res.ord("zeta", 1000).unwrap(), 6);
        drop(b);
    }
    let store = Store::open(&path).unwrap();
    let mut alloc = TenantAllocator::load(&store, 1000).unwrap();
    let rows = ingest(
        &store,
        &mut alloc,
        &[("f", 1, 1, 1, false), ("a", 1, 1, 1, false)],
    );
    assert_eq!(rows[0].ord, 6, "next ordinal survives a reopen");
    assert_eq!(rows[1].ord, 1);
    assert_consistent(&store);
}

#[test]
fn tenant_limit_refuses_a_new_tenant_and_never_an_existing_one() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 2).unwrap();
    ingest(
        &store,
        &mut alloc,
        &[("a", 1, 1, 1, false), ("b", 1, 1, 1, false)],
    );
    let mut b = Batch::new();
    let res = alloc.resolve(&store, ["c", "a", "b"], &mut b).unwrap();
    assert!(matches!(
        res.ord("c", 2),
        Err(ankusa_store::StoreError::TenantLimit { max: 2 })
    ));
    assert_eq!(res.ord("a", 2).unwrap(), 1);
    assert_eq!(res.ord("b", 2).unwrap(), 2);
    assert_eq!(res.refused(), ["c".to_owned()]);
    // A fresh allocator (cold cache) refuses the same way.
    let alloc2 = TenantAllocator::load(&store, 2).unwrap();
    let mut b = Batch::new();
    let res = alloc2.resolve(&store, ["b", "c"], &mut b).unwrap();
    assert!(res.ord("c", 2).is_err());
    assert_eq!(res.ord("b", 2).unwrap(), 2);
}

#[test]
fn invalid_tenant_ids_are_refused() {
    let (_d, store) = fresh();
    let alloc = TenantAllocator::load(&store, 10).unwrap();
    for bad in ["", "a\0b", "tab\there", &"x".repeat(129)] {
        let mut b = Batch::new();
        assert!(
            alloc.resolve(&store, [bad], &mut b).is_err(),
            "{bad:?} accepted"
        );
    }
}

#[test]
fn cleanup_keeps_the_marker_of_a_row_enqueued_into_a_stale_second() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 10).unwrap();
    // An old row (second 10) is claimed, leaving marker 10 stale; a row in
    // second 50 stays due.
    let rows = ingest(
        &store,
        &mut alloc,
        &[("a", 10_500, 1, 1, false), ("a", 50_000, 1, 1, false)],
    );
    let ord = rows[0].ord;
    let mut b = Batch::new();
    transitions::claim(&mut b, &rows[0]);
    store.commit(b, false).unwrap();
    let now = 100_000;
    let (_, markers) = queries::active_markers(&store, now, 100).unwrap();
    let seen: Vec<u64> = markers.iter().map(|m| m.1).collect();
    assert_eq!(seen, vec![10, 50]);
    // A writer commits a row due in second 10 after the tick read the
    // markers and before its cleanup ran: the cleanup must not drop it.
    ingest(&store, &mut alloc, &[("a", 10_700, 1, 1, false)]);
    let c = transitions::cleanup_markers(&store, ord, &seen, 0, now).unwrap();
    assert!(
        c.deleted.is_empty(),
        "deleted the marker of a due row: {c:?}"
    );
    assert_consistent(&store);
    // Once claimed, the marker is stale and the next cleanup removes it.
    let first = queries::first_due(&store, ord, queries::DueFrom::At(0))
        .unwrap()
        .unwrap();
    let mut b = Batch::new();
    transitions::claim(&mut b, &first);
    store.commit(b, false).unwrap();
    let c = transitions::cleanup_markers(&store, ord, &seen, 0, now).unwrap();
    assert_eq!(c.deleted, vec![10]);
    assert_consistent(&store);
}

#[test]
fn active_tenants_returns_only_tenants_with_due_rows() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 100).unwrap();
    let hooks: Vec<(String, u64)> = (0..50).map(|i| (format!("t{i}"), 1_000 + i * 10)).collect();
    let spec: Vec<(&str, u64, usize, u16, bool)> = hooks
        .iter()
        .map(|(t, at)| (t.as_str(), *at, 1, 1, false))
        .collect();
    let rows = ingest(&store, &mut alloc, &spec);
    // Claim all but three tenants' rows; schedule one tenant in the future.
    let mut b = Batch::new();
    for r in &rows[3..] {
        transitions::claim(&mut b, r);
    }
    store.commit(b, false).unwrap();
    let future = ingest(&store, &mut alloc, &[("later", 10_000_000, 1, 1, false)]);
    let now = 5_000;
    // Dispatcher tick: read markers, clean them.
    let (_, markers) = queries::active_markers(&store, now, 4096).unwrap();
    let mut by: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for (o, bk) in markers {
        by.entry(o).or_default().push(bk);
    }
    for (o, bks) in by {
        transitions::cleanup_markers(&store, o, &bks, 0, now).unwrap();
    }
    let active = queries::active_tenants(&store, now, 4096).unwrap();
    let ords: Vec<u32> = active.iter().map(|a| a.ord).collect();
    assert_eq!(
        ords,
        rows[..3].iter().map(|r| r.ord).collect::<Vec<_>>(),
        "oldest first, only tenants with due rows"
    );
    assert!(!ords.contains(&future[0].ord));
    // The limit is on distinct tenants.
    assert_eq!(queries::active_tenants(&store, now, 2).unwrap().len(), 2);
    assert_consistent(&store);
}

#[test]
fn per_tenant_reads_and_purge_touch_one_tenant() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 100).unwrap();
    let mut spec = Vec::new();
    for i in 0..1200u64 {
        spec.push(("noisy", 1000 + i, 10usize, 1u16, false));
    }
    for i in 0..5u64 {
        spec.push(("quiet", 1000 + i, 20usize, 1u16, false));
    }
    let rows = ingest(&store, &mut alloc, &spec);
    // Some of each become dead.
    let mut b = Batch::new();
    for r in rows.iter().filter(|r| r.at % 7 == 0) {
        let f = transitions::claim(&mut b, r);
        transitions::dead_letter(
            &mut b,
            &f,
            &DeliveryRow::new(f.ord, f.size),
            5000 + r.seq,
            "src",
            None,
        );
    }
    store.commit(b, false).unwrap();
    let noisy = ankusa_store::tenants::ord_of(&store, "noisy")
        .unwrap()
        .unwrap();
    let quiet = ankusa_store::tenants::ord_of(&store, "quiet")
        .unwrap()
        .unwrap();
    let quiet_before = queries::counters(&store, quiet).unwrap();
    let quiet_due =
        queries::due_for_tenant(&store, quiet, 10_000, 0, 100, u64::MAX, &mut Vec::new()).unwrap();
    assert!(quiet_due.iter().all(|r| r.ord == quiet));
    assert_eq!(quiet_due.len() as i64, quiet_before.pending);
    let page = queries::dlq_page_for_tenant(&store, quiet, None, 100).unwrap();
    assert!(page.entries.iter().all(|d| d.ord == quiet));
    assert_eq!(page.entries.len() as i64, quiet_before.dead);

    let mut chunks = 0;
    let n = transitions::purge_tenant(
        &store,
        noisy,
        PurgeKinds {
            pending: true,
            dead: true,
        },
        |_| chunks += 1,
    )
    .unwrap();
    assert!(
        chunks >= 3,
        "1200 rows purge in chunks of 500, got {chunks}"
    );
    assert_eq!(n.total(), 1200);
    let c = queries::counters(&store, noisy).unwrap();
    assert_eq!((c.pending, c.dead, c.bytes), (0, 0, 0));
    assert_eq!(
        queries::counters(&store, quiet).unwrap(),
        quiet_before,
        "purge touched another tenant"
    );
    // Idempotent: again removes nothing.
    let again = transitions::purge_tenant(
        &store,
        noisy,
        PurgeKinds {
            pending: true,
            dead: true,
        },
        |_| {},
    )
    .unwrap();
    assert_eq!(again.total(), 0);
    // Reclaim removes the purged hooks.
    let reclaimed = transitions::reclaim_pass(&store, 10_000).unwrap();
    assert_eq!(reclaimed, 1200);
    assert!(queries::hook(&store, rows[0].seq).unwrap().is_none());
    assert_consistent(&store);
}

#[test]
fn purge_never_touches_inflight_rows() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 100).unwrap();
    let rows = ingest(
        &store,
        &mut alloc,
        &[("a", 1, 5, 1, false), ("a", 2, 5, 1, false)],
    );
    let mut b = Batch::new();
    transitions::claim(&mut b, &rows[0]);
    store.commit(b, false).unwrap();
    transitions::purge_tenant(
        &store,
        rows[0].ord,
        PurgeKinds {
            pending: true,
            dead: true,
        },
        |_| {},
    )
    .unwrap();
    let c = queries::counters(&store, rows[0].ord).unwrap();
    assert_eq!((c.pending, c.inflight, c.bytes), (0, 1, 5));
    assert_consistent(&store);
}

#[test]
fn a_bounded_purge_keeps_newer_hooks_and_commits_its_extra_ops() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 100).unwrap();
    let old = ingest(
        &store,
        &mut alloc,
        &[
            ("a", 1, 5, 1, false),
            ("a", 2, 5, 1, false),
            ("a", 3, 5, 1, false),
        ],
    );
    // One of the old rows is dead.
    let mut b = Batch::new();
    let f = transitions::claim(&mut b, &old[2]);
    transitions::dead_letter(
        &mut b,
        &f,
        &DeliveryRow::new(f.ord, f.size),
        10,
        "src",
        None,
    );
    store.commit(b, false).unwrap();
    let bound = old.iter().map(|r| r.seq).max().unwrap();
    // Hooks arriving after the purge started (larger seqs), one due early.
    let newer = ingest(
        &store,
        &mut alloc,
        &[("a", 0, 7, 1, false), ("a", 9, 7, 1, false)],
    );
    assert!(newer.iter().all(|r| r.seq > bound));
    let mut extra_seen = None;
    let mut cursor = transitions::PurgeCursor::default();
    let (n, done) = transitions::purge_tenant_chunk(
        &store,
        old[0].ord,
        PurgeKinds {
            pending: true,
            dead: true,
        },
        bound,
        &mut cursor,
        |_, n, _, done| extra_seen = Some((n.total(), done)),
    )
    .unwrap();
    assert!(done);
    assert_eq!((n.pending, n.dead), (2, 1));
    assert_eq!(
        extra_seen,
        Some((3, true)),
        "extra sees the chunk before it commits"
    );
    let c = queries::counters(&store, old[0].ord).unwrap();
    assert_eq!(
        (c.pending, c.dead, c.bytes),
        (2, 0, 14),
        "the newer hooks stay"
    );
    assert_consistent(&store);
}

#[test]
fn a_purge_continues_from_its_cursor_and_ends_exactly_at_the_end() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 100).unwrap();
    let spec: Vec<_> = (0..1200u64)
        .map(|i| ("a", 1000 + i, 3usize, 1u16, false))
        .collect();
    let rows = ingest(&store, &mut alloc, &spec);
    // 300 of them dead, spread over the range.
    let mut b = Batch::new();
    for r in rows.iter().filter(|r| r.seq % 4 == 0) {
        let f = transitions::claim(&mut b, r);
        transitions::dead_letter(
            &mut b,
            &f,
            &DeliveryRow::new(f.ord, f.size),
            9000 + r.seq,
            "s",
            None,
        );
    }
    store.commit(b, false).unwrap();
    let ord = rows[0].ord;
    let kinds = PurgeKinds {
        pending: true,
        dead: true,
    };
    let mut cursor = transitions::PurgeCursor::default();
    let mut total = 0;
    let mut chunks = 0;
    loop {
        let before = cursor;
        let (n, done) = transitions::purge_tenant_chunk(
            &store,
            ord,
            kinds,
            u64::MAX,
            &mut cursor,
            |_, _, _, _| {},
        )
        .unwrap();
        assert!(n.total() <= transitions::CHUNK as u64);
        assert!(
            done || cursor != before,
            "a chunk that is not the last moves the cursor"
        );
        total += n.total();
        chunks += 1;
        if done {
            break;
        }
    }
    assert_eq!(total, 1200);
    assert_eq!(chunks, 3, "900 due then 300 dead in chunks of 500");
    assert!(cursor.due_done && cursor.dead_done);
    // A row that became due behind the cursor is left to a new purge.
    let late = ingest(&store, &mut alloc, &[("a", 1, 3, 1, false)]);
    let (n, done) =
        transitions::purge_tenant_chunk(&store, ord, kinds, u64::MAX, &mut cursor, |_, _, _, _| {})
            .unwrap();
    assert_eq!((n.total(), done), (0, true));
    let mut fresh_cursor = transitions::PurgeCursor::default();
    let (n, _) = transitions::purge_tenant_chunk(
        &store,
        late[0].ord,
        kinds,
        u64::MAX,
        &mut fresh_cursor,
        |_, _, _, _| {},
    )
    .unwrap();
    assert_eq!(n.total(), 1);
    assert_consistent(&store);
}

#[test]
fn a_purge_chunk_looks_at_a_bounded_number_of_keys_even_when_it_keeps_them_all() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 100).unwrap();
    let n = transitions::VISIT_MAX as u64 + 700;
    let spec: Vec<_> = (0..n)
        .map(|i| ("a", 1000 + i, 1usize, 1u16, false))
        .collect();
    let rows = ingest(&store, &mut alloc, &spec);
    let kinds = PurgeKinds {
        pending: true,
        dead: false,
    };
    // Every row is newer than this purge (max_seq 0): nothing to delete,
    // but the chunk stops after VISIT_MAX keys and says it is not done.
    let mut cursor = transitions::PurgeCursor::default();
    let (got, done) = transitions::purge_tenant_chunk(
        &store,
        rows[0].ord,
        kinds,
        0,
        &mut cursor,
        |_, _, _, _| {},
    )
    .unwrap();
    assert_eq!((got.total(), done), (0, false));
    let last = &rows[transitions::VISIT_MAX - 1];
    assert_eq!(cursor.due_after, Some((last.at, last.seq, last.sink)));
    let (got, done) = transitions::purge_tenant_chunk(
        &store,
        rows[0].ord,
        kinds,
        0,
        &mut cursor,
        |_, _, _, _| {},
    )
    .unwrap();
    assert_eq!((got.total(), done), (0, true));
    assert_eq!(
        queries::counters(&store, rows[0].ord).unwrap().pending,
        n as i64
    );
}

#[test]
fn dlq_pages_newest_first_with_cursors() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 100).unwrap();
    let spec: Vec<_> = (0..25u64)
        .map(|i| (if i % 2 == 0 { "a" } else { "b" }, i, 1usize, 1u16, false))
        .collect();
    let rows = ingest(&store, &mut alloc, &spec);
    let mut b = Batch::new();
    for r in &rows {
        let f = transitions::claim(&mut b, r);
        transitions::dead_letter(
            &mut b,
            &f,
            &DeliveryRow::new(f.ord, f.size),
            1000 + r.at,
            "src",
            None,
        );
    }
    store.commit(b, false).unwrap();
    let mut all = Vec::new();
    let mut cursor = None;
    loop {
        let page = queries::dlq_page(&store, cursor, 10).unwrap();
        all.extend(page.entries.iter().map(|e| e.at));
        match page.next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let want: Vec<u64> = (0..25u64).rev().map(|i| 1000 + i).collect();
    assert_eq!(all, want);
    let a = ankusa_store::tenants::ord_of(&store, "a").unwrap().unwrap();
    let mut got = Vec::new();
    let mut cursor = None;
    loop {
        let page = queries::dlq_page_for_tenant(&store, a, cursor, 4).unwrap();
        got.extend(page.entries.iter().map(|e| e.at));
        match page.next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(
        got,
        (0..25u64)
            .rev()
            .filter(|i| i % 2 == 0)
            .map(|i| 1000 + i)
            .collect::<Vec<_>>()
    );
}

#[test]
fn oldest_due_is_exact_and_skips_stale_markers() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 100).unwrap();
    assert_eq!(queries::oldest_due(&store).unwrap(), None);
    let rows = ingest(
        &store,
        &mut alloc,
        &[("a", 1_234, 1, 1, false), ("b", 5_678, 1, 1, false)],
    );
    let o = queries::oldest_due(&store).unwrap().unwrap();
    assert_eq!((o.at, o.exact, o.age_ms(10_000)), (1_234, true, 8_766));
    // Claim a's row: its marker is stale, the answer moves to b.
    let mut b = Batch::new();
    transitions::claim(&mut b, &rows[0]);
    store.commit(b, false).unwrap();
    let o = queries::oldest_due(&store).unwrap().unwrap();
    assert_eq!((o.ord, o.at, o.exact), (rows[1].ord, 5_678, true));
}

#[test]
fn top_pending_comes_from_the_active_index() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 100).unwrap();
    let mut spec = Vec::new();
    for (t, n) in [("a", 3), ("b", 7), ("c", 5)] {
        for i in 0..n {
            spec.push((t, 100 + i, 1usize, 1u16, false));
        }
    }
    spec.push(("future", 10_000_000, 1, 1, false));
    ingest(&store, &mut alloc, &spec);
    let top = queries::top_pending(&store, 1_000, 2).unwrap();
    let names: Vec<i64> = top.iter().map(|p| p.pending).collect();
    assert_eq!(names, vec![7, 5]);
}

#[test]
fn recover_all_inflight_moves_every_inflight_row_back_to_due() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 100).unwrap();
    let spec: Vec<_> = (0..1100u64)
        .map(|i| ("a", i, 3usize, 1u16, false))
        .collect();
    let rows = ingest(&store, &mut alloc, &spec);
    let mut b = Batch::new();
    for r in &rows {
        transitions::claim(&mut b, r);
    }
    store.commit(b, false).unwrap();
    assert_eq!(queries::node_counters(&store).unwrap().inflight, 1100);
    let n = transitions::recover_all_inflight(&store, 50_000).unwrap();
    assert_eq!(n, 1100);
    let c = queries::node_counters(&store).unwrap();
    assert_eq!((c.inflight, c.pending), (0, 1100));
    assert_consistent(&store);
}

#[test]
fn dedupe_entries_expire_and_a_reused_key_survives_the_old_sweep() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 100).unwrap();
    let mut put = |key: &str, at: u64, exp: u64| {
        let mut b = Batch::new();
        let res = alloc.resolve(&store, ["a"], &mut b).unwrap();
        let mut env = envelope("a", at, 1);
        env.idempotency_key = Some(key.into());
        let seq = store.next_seq().unwrap();
        transitions::ingest(
            &mut b,
            &transitions::IngestHook {
                seq,
                ord: res.ord("a", 100).unwrap(),
                envelope: &env,
                sinks: transitions::SinkSet::first(1),
                archive: false,
                dedupe_expires_at: Some(exp),
            },
        );
        store.commit(b, true).unwrap();
        alloc.committed(res);
        seq
    };
    let s1 = put("k", 1, 100);
    assert_eq!(
        queries::dedupe(&store, "a", "k", 50).unwrap().unwrap().seq,
        s1
    );
    assert!(
        queries::dedupe(&store, "a", "k", 100).unwrap().is_none(),
        "expired at 100"
    );
    let s2 = put("k", 150, 300);
    assert_eq!(ankusa_store::dedupe::sweep(&store, 200, 100).unwrap(), 1);
    assert_eq!(
        queries::dedupe(&store, "a", "k", 200).unwrap().unwrap().seq,
        s2,
        "the old sweep deleted the new entry"
    );
    assert_eq!(ankusa_store::dedupe::sweep(&store, 400, 100).unwrap(), 1);
    assert!(queries::dedupe(&store, "a", "k", 200).unwrap().is_none());
}

#[test]
fn archive_settle_lets_reclaim_delete_the_hook() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 100).unwrap();
    let rows = ingest(&store, &mut alloc, &[("a", 1, 4, 1, true)]);
    let mut b = Batch::new();
    let f = transitions::claim(&mut b, &rows[0]);
    transitions::delivered(&mut b, &f);
    store.commit(b, false).unwrap();
    assert_eq!(
        transitions::reclaim_pass(&store, 100).unwrap(),
        0,
        "archive obligation still owed"
    );
    assert!(queries::hook(&store, rows[0].seq).unwrap().is_some());
    let mut b = Batch::new();
    transitions::archive_settle(
        &mut b,
        rows[0].seq,
        &ArchiveValue {
            size: 4,
            ord: rows[0].ord,
        },
    );
    store.commit(b, false).unwrap();
    assert_eq!(transitions::reclaim_pass(&store, 100).unwrap(), 1);
    assert!(queries::hook(&store, rows[0].seq).unwrap().is_none());
    assert_eq!(
        queries::node_counters(&store).unwrap(),
        ankusa_store::Counters::default()
    );
    assert_consistent(&store);
}

/// Issue 32: a hook owed to no sink (its type matched no sink's events) is
/// accepted, counted as unrouted (the tenant's total and the node's), and
/// freed by the reclaim like a delivered one; with the archive on, only
/// once it is archived. Guard: without the reclaim marker at ingest the
/// hook stays forever (the first reclaim pass frees nothing).
#[test]
fn an_unrouted_hook_is_counted_and_reclaimed() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 100).unwrap();
    let rows = ingest_to(
        &store,
        &mut alloc,
        &[
            ("a", 1, 4, SinkSet::first(0), false),
            ("a", 2, 4, SinkSet::first(0), true),
            ("a", 3, 4, SinkSet::first(1), false),
        ],
    );
    assert_eq!(rows.len(), 1, "only the routed hook has a row");
    let (_, node) = queries::tallies(&store, 0).unwrap();
    assert_eq!((node.unrouted, node.accepted), (2, 1));
    let (_, tenant) = queries::tallies(&store, rows[0].ord).unwrap();
    assert_eq!(tenant.unrouted, 2);
    assert_consistent(&store);
    assert_eq!(
        transitions::reclaim_pass(&store, 100).unwrap(),
        1,
        "the unrouted hook without an archive obligation goes"
    );
    let archived = rows[0].seq - 1;
    assert!(queries::hook(&store, archived).unwrap().is_some());
    let mut b = Batch::new();
    transitions::archive_settle(
        &mut b,
        archived,
        &ArchiveValue {
            size: 4,
            ord: rows[0].ord,
        },
    );
    store.commit(b, false).unwrap();
    assert_eq!(transitions::reclaim_pass(&store, 100).unwrap(), 1);
    assert!(queries::hook(&store, archived).unwrap().is_none());
    assert!(queries::hook(&store, rows[0].seq).unwrap().is_some());
    assert_consistent(&store);
}
