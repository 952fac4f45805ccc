//! Pauses and parked rows: parking keeps counters and kinds, nothing due
//! meets a parked row, and unparking (all, one tenant, a filter, in chunks)
//! brings back exactly what it picks and drops only markers with no row.

use crate::common::*;
use ankusa_store::pauses::{self, Origin, Pause, Paused, Scope, PARKED_AT};
use ankusa_store::tenants::TenantAllocator;
use ankusa_store::transitions::{self, UnparkCursor, CHUNK};
use ankusa_store::{queries, Batch, DueRow, Store};

fn due_now(store: &Store, ord: u32, now: u64) -> Vec<DueRow> {
    let mut bad = Vec::new();
    queries::due_for_tenant(store, ord, now, 0, 10_000, u64::MAX, &mut bad).unwrap()
}

fn parked(store: &Store, ord: u32) -> Vec<DueRow> {
    let mut bad = Vec::new();
    queries::due_for_tenant(
        store,
        ord,
        PARKED_AT,
        PARKED_AT,
        100_000,
        u64::MAX,
        &mut bad,
    )
    .unwrap()
}

fn parked_markers(store: &Store) -> Vec<u32> {
    let b = ankusa_store::keys::bucket_of(PARKED_AT);
    let mut out = Vec::new();
    queries::markers_between(store, b, b, |ord, _| out.push(ord)).unwrap();
    out
}

fn park(store: &Store, rows: &[DueRow]) {
    let mut b = Batch::new();
    for r in rows {
        transitions::park(&mut b, r);
    }
    store.commit(b, true).unwrap();
}

fn unpark_all(
    store: &Store,
    only: Option<u32>,
    now: u64,
    pick: impl Fn(u32, u64, u16) -> bool,
) -> (u64, usize) {
    let mut cursor = UnparkCursor::default();
    let (mut rows, mut chunks) = (0, 0);
    loop {
        let u = transitions::unpark_chunk(
            store,
            only,
            &mut cursor,
            now,
            |o, s, k| Ok(pick(o, s, k)),
            |_, _, _| {},
        )
        .unwrap();
        rows += u.rows;
        chunks += 1;
        if u.done {
            return (rows, chunks);
        }
        assert!(chunks < 1000, "the unpark walk must end");
    }
}

#[test]
fn parked_rows_keep_their_counts_and_come_back_due_now() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 1000).unwrap();
    let hooks: Vec<(&str, u64, usize, u16, bool)> = (0..30)
        .map(|i| (["a", "b", "c"][i % 3], 1_000 + i as u64, 10, 2, false))
        .collect();
    let rows = ingest(&store, &mut alloc, &hooks);
    let ord = |t: &str| ankusa_store::tenants::ord_of(&store, t).unwrap().unwrap();
    let (a, b, c) = (ord("a"), ord("b"), ord("c"));
    let before = queries::node_counters(&store).unwrap();
    // Sink 1 of every hook of a and b parks.
    let to_park: Vec<DueRow> = rows
        .iter()
        .filter(|r| r.sink == 1 && r.ord != c)
        .copied()
        .collect();
    park(&store, &to_park);
    assert_eq!(
        queries::node_counters(&store).unwrap(),
        before,
        "parking changes no counter"
    );
    assert_consistent(&store);
    let now = 10_000;
    assert!(
        due_now(&store, a, now).iter().all(|r| r.sink == 0),
        "nothing parked is due"
    );
    assert_eq!(due_now(&store, a, now).len(), 10);
    assert_eq!(due_now(&store, c, now).len(), 20);
    assert_eq!(parked(&store, a).len(), 10);

    // One tenant's rows only.
    let (n, _) = unpark_all(&store, Some(a), now, |_, _, _| true);
    assert_eq!(n, 10);
    assert_eq!(due_now(&store, a, now).len(), 20);
    assert!(due_now(&store, a, now)
        .iter()
        .filter(|r| r.sink == 1)
        .all(|r| r.at == now));
    assert!(parked(&store, a).is_empty());
    assert_eq!(
        parked(&store, b).len(),
        10,
        "another tenant's parked rows stay"
    );
    // A filter that keeps some: the rest stay parked, with their marker.
    let (n, _) = unpark_all(&store, None, now, |_, seq, _| seq % 2 == 0);
    assert_eq!(n, 5);
    assert_eq!(
        parked_markers(&store),
        vec![b],
        "a tenant with parked rows keeps its marker"
    );
    assert_eq!(parked(&store, b).len(), 5);
    let (n, _) = unpark_all(&store, None, now, |_, _, _| true);
    assert_eq!(n, 5);
    assert_eq!(queries::node_counters(&store).unwrap(), before);
    assert_consistent(&store);
    // Every parked-second marker is gone with its rows.
    assert!(parked_markers(&store).is_empty());
}

#[test]
fn a_large_unpark_runs_in_chunks_and_resumes_from_its_cursor() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 1000).unwrap();
    let total = CHUNK * 2 + 37;
    let hooks: Vec<(&str, u64, usize, u16, bool)> = (0..total)
        .map(|i| {
            (
                if i % 2 == 0 { "x" } else { "y" },
                5_000 + i as u64,
                1,
                1,
                false,
            )
        })
        .collect();
    let rows = ingest(&store, &mut alloc, &hooks);
    park(&store, &rows);
    let (n, chunks) = unpark_all(&store, None, 9_000, |_, _, _| true);
    assert_eq!(n as usize, total);
    assert!(chunks >= 3, "{chunks} chunks for {total} rows");
    assert_consistent(&store);
}

#[test]
fn pauses_are_stored_listed_and_resolved_for_the_dispatcher() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 1000).unwrap();
    ingest(&store, &mut alloc, &[("acme", 1, 1, 1, false)]);
    let acme = ankusa_store::tenants::ord_of(&store, "acme")
        .unwrap()
        .unwrap();
    let mut b = Batch::new();
    for scope in [
        Scope::tenant("acme"),
        Scope::sink("shop", 1),
        Scope {
            tenant: Some("acme".into()),
            sink: Scope::sink("bill", 0).sink,
        },
        Scope::tenant("gone"),
    ] {
        pauses::put(
            &mut b,
            &Pause {
                scope,
                at: 7,
                origin: Origin::Operator,
                by: "me".into(),
            },
        )
        .unwrap();
    }
    store.commit(b, true).unwrap();
    assert_eq!(pauses::list(&store).unwrap().len(), 4);
    let p = Paused::load(&store).unwrap();
    assert_eq!(
        p.counts(),
        (1, 1, 1),
        "a pause of an unknown tenant covers nothing"
    );
    assert!(p.tenant(acme));
    assert!(p.row(99, "shop", 1) && !p.row(99, "shop", 0) && !p.row(99, "other", 1));
    assert!(p.row(acme, "bill", 0) && !p.row(99, "bill", 0));
    assert!(p.may_cover(0) && p.may_cover(1) && !p.may_cover(2));
    let mut b = Batch::new();
    pauses::delete(&mut b, &Scope::tenant("acme")).unwrap();
    store.commit(b, true).unwrap();
    assert!(!Paused::load(&store).unwrap().tenant(acme));
    assert!(pauses::get(&store, &Scope::sink("shop", 1))
        .unwrap()
        .is_some());
}

/// The circuit breaker's probe search: bounded reads per call, a cursor
/// that goes on where the last call stopped, every tenant's parked rows
/// visited, and `done` once the walk is past the last one.
#[test]
fn a_parked_row_search_is_bounded_and_goes_on_from_its_cursor() {
    let (_d, store) = fresh();
    let mut alloc = TenantAllocator::load(&store, 1000).unwrap();
    let hooks: Vec<(&str, u64, usize, u16, bool)> = (0..20)
        .map(|i| (["a", "b"][i % 2], 1_000 + i as u64, 10, 2, false))
        .collect();
    let rows = ingest(&store, &mut alloc, &hooks);
    park(&store, &rows);
    let before = queries::node_counters(&store).unwrap();
    let b = ankusa_store::tenants::ord_of(&store, "b").unwrap().unwrap();
    // Only b's last hook, sink 1, is wanted: 40 parked rows, 3 read a call.
    let want = |r: &DueRow| {
        r.ord == b && r.sink == 1 && r.seq == rows.iter().map(|r| r.seq).max().unwrap()
    };
    let mut cursor = UnparkCursor::default();
    let mut calls = 0;
    let found = loop {
        calls += 1;
        let f = transitions::find_parked(&store, &mut cursor, 3, |r| Ok(want(r))).unwrap();
        if let Some(r) = f.row {
            assert!(!f.done);
            break r;
        }
        assert!(!f.done, "the wanted row is found before the walk ends");
        assert!(calls < 100, "the search must advance");
    };
    assert!(want(&found) && found.at == PARKED_AT);
    assert!(
        calls >= 40 / 3,
        "each call read at most 3 rows: {calls} calls"
    );
    // Nothing more is wanted: the walk ends and starts over.
    let mut ended = false;
    for _ in 0..100 {
        let f = transitions::find_parked(&store, &mut cursor, 3, |_| Ok(false)).unwrap();
        assert!(f.row.is_none());
        if f.done {
            ended = true;
            break;
        }
    }
    assert!(ended && cursor == UnparkCursor::default());
    // A search reads only: the found row is claimed like any due row.
    assert_eq!(queries::node_counters(&store).unwrap(), before);
    let mut batch = Batch::new();
    transitions::claim(&mut batch, &found);
    store.commit(batch, true).unwrap();
    assert_eq!(parked(&store, b).len(), 19);
    assert_consistent(&store);
}
