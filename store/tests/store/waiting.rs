//! Rows waiting per sink: every transition moves the count of the sink its
//! row belongs to (named by the hook's source), a park moves none, the
//! count equals the fold `store check` takes, and a store an earlier release
//! wrote reads "not counted" until its one recount.

use std::collections::BTreeMap;

use crate::common::*;
use ankusa_store::check::Mismatch;
use ankusa_store::fixture;
use ankusa_store::tenants::TenantAllocator;
use ankusa_store::transitions::{self, PurgeKinds, SinkSet, UnparkCursor};
use ankusa_store::values::DeliveryRow;
use ankusa_store::{keys, queries, repair, waiting, Batch, DueRow, Store};

const SINKS: [(&str, u16); 3] = [("shop", 0), ("shop", 1), ("billing", 0)];

fn counts(store: &Store) -> Option<[i64; 3]> {
    let keys: Vec<_> = SINKS
        .iter()
        .map(|(s, i)| ankusa_store::pauses::SinkRef::new(*s, *i))
        .collect();
    waiting::waiting(store, &keys)
        .unwrap()
        .map(|v| [v[0], v[1], v[2]])
}

/// `n` hooks of `tenant` through `source` (shop has two sinks, billing one).
fn post(
    store: &Store,
    alloc: &mut TenantAllocator,
    tenant: &str,
    source: &str,
    n: usize,
    at: u64,
) -> Vec<DueRow> {
    let hooks: Vec<fixture::Hook> = (0..n)
        .map(|_| {
            let mut envelope = envelope(tenant, at, 64);
            envelope.source_id = source.into();
            fixture::Hook {
                envelope,
                sinks: SinkSet::first(if source == "shop" { 2 } else { 1 }),
                archive: false,
            }
        })
        .collect();
    fixture::ingest(store, alloc, &hooks).unwrap()
}

fn commit(store: &Store, f: impl FnOnce(&mut Batch)) {
    let mut b = Batch::new();
    f(&mut b);
    store.commit(b, true).unwrap();
}

fn node_waiting(store: &Store) -> i64 {
    queries::node_counters(store).unwrap().queued()
}

#[test]
fn every_transition_moves_the_count_of_its_own_sink() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 100).unwrap();
    assert_eq!(
        counts(&store),
        Some([0, 0, 0]),
        "a new store is counted from the start"
    );

    let shop = post(&store, &mut alloc, "acme", "shop", 10, 1_000);
    let bill = post(&store, &mut alloc, "acme", "billing", 4, 1_000);
    let other = post(&store, &mut alloc, "globex", "shop", 3, 1_000);
    assert_eq!(counts(&store), Some([13, 13, 4]));

    // Claim three rows of shop/1 and one of billing.
    let sink1: Vec<&DueRow> = shop.iter().filter(|r| r.sink == 1).take(3).collect();
    let mut inflight = Vec::new();
    commit(&store, |b| {
        for r in &sink1 {
            inflight.push(transitions::claim(b, r));
        }
        inflight.push(transitions::claim(b, &bill[0]));
    });
    assert_eq!(counts(&store), Some([13, 10, 3]));

    // One delivered, one retried, one dead; billing's recovered at boot.
    let mut retried = None;
    let mut dead = None;
    commit(&store, |b| {
        transitions::delivered(b, &inflight[0]);
        let row = DeliveryRow::new(inflight[1].ord, inflight[1].size);
        retried = Some(transitions::retry(b, &inflight[1], &row, 9_000));
        dead = Some(transitions::dead_letter(
            b,
            &inflight[2],
            &row,
            5_000,
            "shop",
            None,
        ));
        transitions::recover_inflight(b, &inflight[3], 6_000);
    });
    assert_eq!(
        counts(&store),
        Some([13, 11, 4]),
        "retry and recovery wait again; delivered and dead do not"
    );
    let dead = dead.unwrap();
    commit(&store, |b| {
        transitions::revive(b, &dead, 64, 7_000);
    });
    assert_eq!(counts(&store), Some([13, 12, 4]), "a replay waits again");

    // Parking and unparking move rows, not counts.
    let to_park: Vec<&DueRow> = shop.iter().filter(|r| r.sink == 0).take(5).collect();
    commit(&store, |b| {
        for r in &to_park {
            transitions::park(b, r);
        }
    });
    assert_eq!(counts(&store), Some([13, 12, 4]), "parked rows still wait");
    let mut cursor = UnparkCursor::default();
    loop {
        let u = transitions::unpark_chunk(
            &store,
            None,
            &mut cursor,
            8_000,
            |_, _, _| Ok(true),
            |_, _, _| {},
        )
        .unwrap();
        if u.done {
            break;
        }
    }
    assert_eq!(counts(&store), Some([13, 12, 4]));

    // A purge of globex's due rows takes only its rows off.
    let globex = other[0].ord;
    transitions::purge_tenant(
        &store,
        globex,
        PurgeKinds {
            pending: true,
            dead: false,
        },
        |_| {},
    )
    .unwrap();
    assert_eq!(counts(&store), Some([10, 9, 4]));

    let c = counts(&store).unwrap();
    assert_eq!(
        c.iter().sum::<i64>(),
        node_waiting(&store),
        "the sinks' rows are the node's rows waiting"
    );
    assert_consistent(&store);
    let folded = waiting::fold_waiting(&store).unwrap();
    assert_eq!(
        folded.get(&ankusa_store::pauses::SinkRef::new("shop", 1)),
        Some(&9)
    );
}

#[test]
fn a_store_an_earlier_release_wrote_is_not_counted_until_its_recount() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    {
        let store = Store::create_or_open(&path).unwrap();
        let mut alloc = TenantAllocator::load(&store, 100).unwrap();
        post(&store, &mut alloc, "acme", "shop", 6, 1_000);
        post(&store, &mut alloc, "acme", "billing", 2, 1_000);
    }
    // What an earlier release left: no flag, no per-sink keys.
    {
        let db = raw_open(&path);
        db.delete(keys::meta::WAITING_COUNTED).unwrap();
        let cf = db.cf_handle("counters").unwrap();
        for (s, i) in SINKS {
            db.delete_cf(cf, keys::sink_counter_key(s, i)).unwrap();
        }
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(counts(&store), None, "never a wrong number: not counted");
    assert_consistent(&store);
    // Rows move before the recount (a command line on a stopped store):
    // the recount still lands on the fold.
    let mut alloc = TenantAllocator::load(&store, 100).unwrap();
    post(&store, &mut alloc, "globex", "billing", 3, 2_000);
    let r = waiting::recount_waiting(&store).unwrap();
    assert_eq!((r.sinks, r.rows), (3, 17));
    assert_eq!(counts(&store), Some([6, 6, 5]));
    assert_consistent(&store);
    post(&store, &mut alloc, "globex", "shop", 1, 3_000);
    assert_eq!(counts(&store), Some([7, 7, 5]), "counted from then on");
    assert_eq!(waiting::recount_waiting(&store).unwrap().corrected, 0);
}

#[test]
fn check_names_a_wrong_count_and_repair_sets_it_to_the_fold() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    {
        let store = Store::create_or_open(&path).unwrap();
        let mut alloc = TenantAllocator::load(&store, 100).unwrap();
        post(&store, &mut alloc, "acme", "shop", 4, 1_000);
    }
    {
        let db = raw_open(&path);
        let cf = db.cf_handle("counters").unwrap();
        db.put_cf(cf, keys::sink_counter_key("shop", 1), 40i64.to_le_bytes())
            .unwrap();
        db.put_cf(cf, keys::sink_counter_key("gone", 3), 2i64.to_le_bytes())
            .unwrap();
    }
    let store = Store::open(&path).unwrap();
    let rep = ankusa_store::check::run(&store, |_, _| {}).unwrap();
    let wrong: BTreeMap<(String, u16), (i64, i64)> = rep
        .mismatches
        .iter()
        .filter_map(|m| match m {
            Mismatch::SinkWaiting {
                source,
                sink,
                stored,
                folded,
            } => Some(((source.clone(), *sink), (*stored, *folded))),
            _ => None,
        })
        .collect();
    assert_eq!(
        wrong,
        BTreeMap::from([(("gone".into(), 3), (2, 0)), (("shop".into(), 1), (40, 4))])
    );
    let dry = repair::run(&store, true, 0, |_, _| {}).unwrap();
    assert_eq!(dry.sink_counts, 2);
    assert_eq!(counts(&store), Some([4, 40, 0]), "a dry run writes nothing");
    let done = repair::run(&store, false, 0, |_, _| {}).unwrap();
    assert_eq!(done.sink_counts, 2);
    assert_eq!(counts(&store), Some([4, 4, 0]));
    assert_consistent(&store);
    assert_eq!(
        repair::run(&store, false, 0, |_, _| {}).unwrap().changes(),
        0
    );
}

/// The fold is what `store check`, `store repair` and the boot recount
/// trust, so it must not depend on which hooks its source cache still
/// holds: 5,000 hooks with two sinks each, their sink-1 rows retried to a
/// later second, put every hook's second row thousands of keys after its
/// first, past any cache of recent hooks.
#[test]
fn the_fold_counts_every_row_however_far_apart_a_hooks_rows_lie() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 100).unwrap();
    let rows = post(&store, &mut alloc, "acme", "shop", 5_000, 1_000);
    for chunk in rows.chunks(500) {
        commit(&store, |b| {
            for r in chunk.iter().filter(|r| r.sink == 1) {
                let inflight = transitions::claim(b, r);
                let row = DeliveryRow::new(inflight.ord, inflight.size);
                transitions::retry(b, &inflight, &row, 60_000);
            }
        });
    }
    assert_eq!(counts(&store), Some([5_000, 5_000, 0]));
    let folded = waiting::fold_waiting(&store).unwrap();
    assert_eq!(
        (
            folded.get(&ankusa_store::pauses::SinkRef::new("shop", 0)),
            folded.get(&ankusa_store::pauses::SinkRef::new("shop", 1))
        ),
        (Some(&5_000), Some(&5_000))
    );
    assert_consistent(&store);
}

/// A fresh fixture is a healthy store: its check passes (issue 35 found
/// every fixture of 20,000 rows or more failing on the per-sink counts).
#[test]
fn a_fresh_fixture_passes_the_store_check() {
    let (_d, store) = fresh();
    let spec = fixture::FixtureSpec::new(100, 20_000, 5, 1_700_000_000_000);
    fixture::write(&store, &spec, |_, _| {}).unwrap();
    assert_consistent(&store);
}
