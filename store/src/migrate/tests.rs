//! Unit tests of `migrate`.

use std::ops::ControlFlow;

use crate::batch::Batch;
use crate::keys::{self, bounds, prefix, DeadKey, V2DueKey, V2InflightKey};
use crate::schema::Family;
use crate::store::{Dir, Store};
use crate::values::v2;

use super::lookup::SeqIndex;
use super::*;
use crate::fixture::{self, FixtureSpec};

const NOW: u64 = 1_800_000_000_000;

/// The lookup answers as the per-row reads it replaces: for rows whose
/// hook is gone, whose delivery row is gone, whose delivery row has no
/// hook, and after a step consumed a row.
#[test]
fn the_lookup_answers_as_the_reads_it_replaces() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create_v2(&dir.path().join("s")).unwrap();
    let mut spec = FixtureSpec::new(9, 800, 3, NOW);
    spec.batch_hooks = 53;
    fixture::write_v2(&store, &spec, |_, _| {}).unwrap();
    let mut rows: Vec<(u64, u16)> = Vec::new();
    for p in [prefix::V2_DUE, prefix::V2_INFLIGHT, prefix::DEAD] {
        let (lo, hi) = bounds::family(p);
        store
            .scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
                rows.push(match p {
                    prefix::V2_DUE => V2DueKey::decode(k).map(|d| (d.seq, d.sink))?,
                    prefix::V2_INFLIGHT => V2InflightKey::decode(k).map(|f| (f.seq, f.sink))?,
                    _ => DeadKey::decode(k).map(|x| (x.seq, x.sink))?,
                });
                Ok(ControlFlow::Continue(()))
            })
            .unwrap();
    }
    let orphan = (rows.iter().map(|r| r.0).max().unwrap() + 1000, 0);
    let mut b = Batch::new();
    b.delete(Family::Hooks, keys::hook_key(rows[0].0).to_vec());
    b.delete(
        Family::Deliveries,
        keys::delivery_key(rows[1].0, rows[1].1).to_vec(),
    );
    b.put(
        Family::Deliveries,
        keys::delivery_key(orphan.0, orphan.1).to_vec(),
        v2::encode_delivery(77, 4, &[]),
    );
    store.commit(b, true).unwrap();
    rows.push(orphan);

    let mut l = Lookup::read(&store, true).unwrap();
    let direct = |l: &mut Lookup, seq: u64, sink: u16| {
        let t = match store.get(Family::Hooks, &keys::hook_key(seq)).unwrap() {
            Some(v) => l.intern(&v),
            None => 0,
        };
        let d = store
            .get(Family::Deliveries, &keys::delivery_key(seq, sink))
            .unwrap()
            .and_then(|b| v2::decode_delivery(&b).ok());
        (t, d)
    };
    let mut consumed = Vec::new();
    for &(seq, sink) in &rows {
        let (t, d) = direct(&mut l, seq, sink);
        assert_eq!(l.tenant(&store, seq).unwrap(), t, "tenant of {seq}");
        assert_eq!(
            l.delivery(&store, seq, sink, &mut consumed).unwrap(),
            d,
            "delivery {seq}/{sink}"
        );
    }
    assert_eq!(l.tenant(&store, rows[0].0).unwrap(), 0);
    assert_eq!(
        l.delivery(&store, orphan.0, orphan.1, &mut Vec::new())
            .unwrap(),
        Some((77, 4))
    );
    // What a durable step consumed reads as absent, as the rewritten
    // (format 3) row would.
    l.consumed(&consumed);
    // (Rows whose hook is gone are not in the lookup: they are read from
    // the store, where nothing consumed them in this test.)
    let (gone, orphan_seq) = (rows[0].0, orphan.0);
    for &(seq, sink) in rows.iter().filter(|r| r.0 != gone && r.0 != orphan_seq) {
        assert_eq!(
            l.delivery(&store, seq, sink, &mut Vec::new()).unwrap(),
            None
        );
    }
}

/// The range delete of a step removes exactly the old keys it moved:
/// after every step, the old family holds the rows not yet moved, and the
/// first of them is the key after the cursor.
#[test]
fn each_step_removes_exactly_the_old_keys_it_moved() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    {
        let s = Store::create_v2(&path).unwrap();
        let mut spec = FixtureSpec::new(12, 1500, 7, NOW);
        spec.batch_hooks = 61;
        fixture::write_v2(&s, &spec, |_, _| {}).unwrap();
    }
    let store = Store::open_any_format(&path).unwrap();
    let mut m = Migration::start(&store, NOW, 1_000_000)
        .unwrap()
        .with_step_rows(97);
    let total = m.cursor().total;
    assert!(total[0] > 97 && total[1] > 0, "{total:?}");
    loop {
        let outcome = m.step().unwrap();
        if outcome == StepOutcome::Finished {
            break;
        }
        let c = m.cursor().clone();
        for (i, p) in [(0, prefix::V2_DUE), (1, prefix::V2_INFLIGHT)] {
            assert_eq!(
                count_prefix(&store, p).unwrap(),
                total[i] - c.done[i],
                "phase {:?}, old prefix {}",
                c.phase,
                p as char
            );
        }
    }
    assert_eq!(count_prefix(&store, prefix::V2_DUE).unwrap(), 0);
    assert_eq!(count_prefix(&store, prefix::V2_INFLIGHT).unwrap(), 0);
}

fn brute(seqs: &[u64], seq: u64) -> std::ops::Range<usize> {
    let from = seqs.partition_point(|s| *s < seq);
    let to = seqs.partition_point(|s| *s <= seq);
    from..to
}

#[test]
fn the_seq_index_finds_what_a_binary_search_finds() {
    let shapes: Vec<Vec<u64>> = vec![
        vec![],
        vec![7],
        (1..1000).collect(),
        // Repeated seqs (a hook with several delivery rows).
        (1..500).flat_map(|s| [s, s, s]).collect(),
        // Sparse and clustered: most buckets hold nothing.
        (0..300u64)
            .map(|i| i * i * 1_000_003)
            .chain([u64::MAX - 1, u64::MAX])
            .collect(),
    ];
    for seqs in shapes {
        let idx = SeqIndex::new(&seqs);
        assert!(idx.starts.len() <= seqs.len() + 1, "{}", idx.starts.len());
        let mut probes: Vec<u64> = vec![0, 1, 2, 6, 7, 8, 999, 1000, u64::MAX];
        probes.extend(
            seqs.iter()
                .flat_map(|s| [s.saturating_sub(1), *s, s.saturating_add(1)]),
        );
        for p in probes {
            let (got, want) = (idx.find(&seqs, |s| *s, p), brute(&seqs, p));
            if want.is_empty() {
                assert!(got.is_empty(), "seq {p}: {got:?}");
            } else {
                assert_eq!(got, want, "seq {p}");
            }
        }
    }
}
