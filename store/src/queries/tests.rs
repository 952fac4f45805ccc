//! The queries' unit tests, against a real store.

use super::*;

use crate::batch::Batch;
use crate::schema::Family;
use crate::store::Store;
use crate::transitions::{self, IngestHook, SinkSet};
use crate::values::Envelope;

fn ingest(store: &Store, seq: u64, archive: bool) {
    let env = Envelope {
        received_at: 1_000,
        source_id: "s".into(),
        tenant: "t".into(),
        idempotency_key: None,
        event_type: None,
        headers: vec![],
        body: vec![1, 2, 3],
    };
    let mut b = Batch::new();
    transitions::ingest(
        &mut b,
        &IngestHook {
            seq,
            ord: 1,
            envelope: &env,
            sinks: SinkSet::first(1),
            archive,
            dedupe_expires_at: None,
        },
    );
    store.commit(b, true).unwrap();
}

/// Oldest-first pages walk the DLQ in the reverse order of newest-first
/// ones, node-wide and per tenant, and their cursors resume exactly.
#[test]
fn oldest_first_pages_mirror_newest_first_ones() {
    let (_d, store) = store_with_due(&[(2, 10), (3, 20), (2, 30), (2, 40), (3, 50)]);
    let mut b = Batch::new();
    for ord in [2u32, 3] {
        for r in due_for_tenant(&store, ord, u64::MAX, 0, 10, u64::MAX, &mut Vec::new()).unwrap() {
            let f = transitions::claim(&mut b, &r);
            let d = crate::values::DeliveryRow::new(ord, f.size);
            transitions::dead_letter(&mut b, &f, &d, 100 + r.at, "s", None);
        }
    }
    store.commit(b, true).unwrap();
    let walk = |ord: Option<u32>, order: DlqOrder| -> Vec<u64> {
        let mut out = Vec::new();
        let mut cursor = None;
        loop {
            let p = dlq_page_ordered(&store, ord, order, cursor, 2).unwrap();
            out.extend(p.entries.iter().map(|r| r.at));
            match p.next {
                Some(c) => cursor = Some(c),
                None => return out,
            }
        }
    };
    for ord in [None, Some(2), Some(3)] {
        let newest = walk(ord, DlqOrder::NewestFirst);
        let mut oldest = walk(ord, DlqOrder::OldestFirst);
        assert!(!newest.is_empty());
        oldest.reverse();
        assert_eq!(newest, oldest, "{ord:?}");
    }
    assert_eq!(walk(Some(2), DlqOrder::OldestFirst), vec![110, 130, 140]);
}

/// A tenant's DLQ page reads that tenant's key range and nothing else:
/// undecodable keys planted right below and right above it (the
/// neighbouring ordinals' ranges) would fail the page if it touched
/// them, as they fail a read of the neighbour.
#[test]
fn a_tenant_dlq_page_reads_only_that_tenants_key_range() {
    let (_d, store) = store_with_due(&[(2, 10), (2, 20), (2, 30)]);
    let mut b = Batch::new();
    for r in due_for_tenant(&store, 2, u64::MAX, 0, 10, u64::MAX, &mut Vec::new()).unwrap() {
        let f = transitions::claim(&mut b, &r);
        let d = crate::values::DeliveryRow::new(2, f.size);
        transitions::dead_letter(&mut b, &f, &d, 100 + r.at, "s", None);
    }
    store.commit(b, true).unwrap();
    let mut b = Batch::new();
    for ord in [1u32, 3] {
        let mut k = vec![crate::keys::prefix::DEAD_BY_TENANT];
        k.extend_from_slice(&ord.to_be_bytes());
        k.push(0xEE);
        b.put(Family::Index, k, b"garbage".to_vec());
    }
    store.commit(b, true).unwrap();
    let page = dlq_page_for_tenant(&store, 2, None, 100).unwrap();
    assert_eq!(page.entries.len(), 3);
    assert!(page.entries.iter().all(|r| r.ord == 2));
    assert!(
        dlq_page_for_tenant(&store, 3, None, 100).is_err(),
        "the planted key is there to be found"
    );
}

/// Due rows `(ord, at)` ingested straight by ordinal, one commit.
fn store_with_due(rows: &[(u32, u64)]) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create_or_open(&dir.path().join("s")).unwrap();
    let mut b = Batch::new();
    for (i, &(ord, at)) in rows.iter().enumerate() {
        crate::fixture::ingest_plain(&mut b, "s", i as u64 + 1, ord, at, 1);
    }
    store.commit(b, true).unwrap();
    (dir, store)
}

/// The reference: every row of each tenant read and binned, then capped.
fn counted_by_hand(rows: &[(u32, u64)], ords: &[u32], edges: &[u64], cap: u32) -> Vec<Vec<u32>> {
    let cols = edges.len() - 1;
    ords.iter()
        .map(|&o| {
            (0..cols)
                .map(|c| {
                    let n = rows
                        .iter()
                        .filter(|&&(ro, at)| ro == o && edges[c] <= at && at < edges[c + 1])
                        .count() as u32;
                    n.min(cap + 1)
                })
                .collect()
        })
        .collect()
}

#[test]
fn due_window_counts_count_each_window_capped_and_skip_empty_ones() {
    // Tenant 1: 1 row in [0,10), none in [10,20), 5 in [20,30), 2 in
    // [30, MAX). Tenant 3: one row. Tenant 2 has none.
    let mut rows = vec![(1, 5)];
    rows.extend([21, 22, 23, 24, 25].map(|a| (1, a)));
    rows.extend([(1, 40), (1, 1_000_000), (3, 7)]);
    let (_d, s) = store_with_due(&rows);
    let edges = [0, 10, 20, 30, u64::MAX];
    let c = due_window_counts(&s, &[1, 2, 3], &edges, 8).unwrap();
    assert_eq!(c, [vec![1, 0, 5, 2], vec![0; 4], vec![1, 0, 0, 0]]);
    // Capped: 5 rows with cap 3 read as 4 ("more than 3"); with cap 0
    // every non-empty window reads as 1.
    let c = due_window_counts(&s, &[1], &edges, 3).unwrap();
    assert_eq!(c[0], [1, 0, 4, 2]);
    let c = due_window_counts(&s, &[1], &edges, 0).unwrap();
    assert_eq!(c[0], [1, 0, 1, 1]);
    // Windows that start after 0 ignore older rows; rows at or after
    // the last edge are not counted.
    let c = due_window_counts(&s, &[1], &[20, 30, 50], 8).unwrap();
    assert_eq!(c[0], [5, 1]);
    assert_eq!(
        due_window_counts(&s, &[1], &[7], 8).unwrap(),
        [Vec::<u32>::new()]
    );
    assert!(due_window_counts(&s, &[], &edges, 8).unwrap().is_empty());
}

#[test]
fn due_window_counts_match_reading_every_row() {
    // Tenants of every density around the cap: a saturated window right
    // before a sparse one, runs of rows on one millisecond, a window
    // with exactly cap and cap + 1 rows, rows on the edges themselves,
    // and neighbours on both sides of each tenant's key range.
    let mut rng = crate::fixture::Rng::new(7);
    let mut rows = Vec::new();
    for (ord, per_window) in [
        (1u32, 0u64),
        (2, 1),
        (3, 3),
        (4, 9),
        (5, 10),
        (6, 40),
        (7, 200),
    ] {
        for w in 0..12u64 {
            let n = if w % 4 == 3 {
                per_window / 4
            } else {
                per_window
            };
            for _ in 0..n {
                rows.push((ord, 1_000 + w * 100 + rng.below(100)));
            }
        }
        rows.push((ord, 1_000 + 300));
        rows.push((ord, 1_000 + 300));
        rows.push((ord, 0));
        rows.push((ord, u64::MAX - 1));
    }
    let (_d, s) = store_with_due(&rows);
    let ords: Vec<u32> = (0..=8).collect();
    let mut edges = vec![0u64];
    edges.extend((0..12).map(|w| 1_000 + w * 100));
    edges.push(u64::MAX);
    for cap in [0, 1, 8, 9, 39] {
        let want = counted_by_hand(&rows, &ords, &edges, cap);
        assert_eq!(
            due_window_counts(&s, &ords, &edges, cap).unwrap(),
            want,
            "cap {cap}"
        );
    }
    // A screen that ends before the newest rows.
    let short = &edges[..6];
    assert_eq!(
        due_window_counts(&s, &ords, short, 8).unwrap(),
        counted_by_hand(&rows, &ords, short, 8)
    );
}

#[test]
fn archive_obligations_are_bounded_resumable_and_skip_settled() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create_or_open(&dir.path().join("s")).unwrap();
    for seq in 1..=6 {
        // Even seqs carry no obligation.
        ingest(&store, seq, seq % 2 == 1);
    }
    let all = archive_obligations(&store, None, 100).unwrap();
    assert_eq!(all.iter().map(|(s, _)| *s).collect::<Vec<_>>(), [1, 3, 5]);
    assert!(all.iter().all(|(_, v)| v.ord == 1 && v.size > 0));
    let first = archive_obligations(&store, None, 2).unwrap();
    assert_eq!(first.len(), 2);
    let rest = archive_obligations(&store, Some(3), 100).unwrap();
    assert_eq!(rest.iter().map(|(s, _)| *s).collect::<Vec<_>>(), [5]);
    assert!(archive_obligations(&store, Some(u64::MAX), 10)
        .unwrap()
        .is_empty());
    assert!(archive_obligations(&store, None, 0).unwrap().is_empty());

    let mut b = Batch::new();
    transitions::archive_settle(&mut b, 3, &all[1].1);
    store.commit(b, true).unwrap();
    let left = archive_obligations(&store, None, 100).unwrap();
    assert_eq!(left.iter().map(|(s, _)| *s).collect::<Vec<_>>(), [1, 5]);
    assert_eq!(node_counters(&store).unwrap().archive_pending, 2);
}
