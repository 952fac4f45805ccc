//! Unit tests of `store`.

use super::*;

#[test]
fn rocksdb_memory_stays_within_the_budget_whatever_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let budget = MemoryBudget::new(MemoryBudget::MIN_BYTES);
    let bytes = budget.bytes() as u64;
    let store = Store::create_or_open_within(&dir.path().join("s"), budget).unwrap();
    // 64 MiB of incompressible values in two families, eight times the
    // budget and twice each family's own write buffer.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut value = || -> Vec<u8> {
        (0..4096 / 8)
            .flat_map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x.to_le_bytes()
            })
            .collect()
    };
    let mut peak_memtables = 0;
    for chunk in 0..64u64 {
        let mut b = Batch::new();
        for i in 0..128u64 {
            let k = (chunk * 128 + i).to_be_bytes();
            b.put(Family::Hooks, k.to_vec(), value());
            b.put(Family::Deliveries, k.to_vec(), value());
        }
        store.commit(b, false).unwrap();
        // Once the flushes RocksDB has scheduled are done: how far
        // they lag the writes depends on the machine's load, not on
        // the bound.
        store.wait_for_compactions().unwrap();
        peak_memtables = peak_memtables.max(store.memory().unwrap().memtables);
    }
    for i in 0..64 * 128u64 {
        assert!(store
            .get(Family::Hooks, &i.to_be_bytes())
            .unwrap()
            .is_some());
        assert!(store
            .get(Family::Deliveries, &i.to_be_bytes())
            .unwrap()
            .is_some());
    }
    // One cache, of the budget's size, for every family.
    let db = store.db().unwrap();
    for f in Family::ALL {
        let cf = Store::cf_in(&db, f).unwrap();
        let capacity = db
            .property_int_value_cf(cf, "rocksdb.block-cache-capacity")
            .unwrap();
        assert_eq!(capacity, Some(bytes), "{}", f.name());
    }
    let m = store.memory().unwrap();
    assert_eq!(m.budget, bytes);
    // The memtables are flushed at half the budget, never at their
    // families' own write buffer sizes (32 MiB each). The write that
    // passes the limit schedules the flush at the next write, so one
    // chunk (1 MiB) more may be seen, and a little for the skip-list.
    assert!(
        peak_memtables <= bytes / 2 + (2 << 20),
        "memtables peaked at {peak_memtables}"
    );
    assert!(
        m.block_cache + m.memtables <= bytes + bytes / 10,
        "{m:?} over a budget of {bytes}"
    );
}

fn keys_in_write_order(b: &Batch) -> Vec<(Family, Vec<u8>, &'static str)> {
    write_order(&b.ops)
        .into_iter()
        .map(|o| {
            let kind = match o.kind {
                OpKind::Put(_) => "put",
                OpKind::Delete => "delete",
                OpKind::DeleteRange(_) => "range",
            };
            (o.fam, o.key.clone(), kind)
        })
        .collect()
}

#[test]
fn a_batch_is_written_by_family_and_key_keeping_one_keys_order() {
    let mut b = Batch::new();
    b.put(Family::Index, b"z".to_vec(), b"1".to_vec());
    b.put(Family::Hooks, b"b".to_vec(), b"1".to_vec());
    b.delete(Family::Index, b"a".to_vec());
    b.put(Family::Index, b"a".to_vec(), b"2".to_vec());
    b.put(Family::Hooks, b"a".to_vec(), b"1".to_vec());
    assert_eq!(
        keys_in_write_order(&b),
        vec![
            (Family::Hooks, b"a".to_vec(), "put"),
            (Family::Hooks, b"b".to_vec(), "put"),
            (Family::Index, b"a".to_vec(), "delete"),
            (Family::Index, b"a".to_vec(), "put"),
            (Family::Index, b"z".to_vec(), "put"),
        ]
    );
}

#[test]
fn a_batch_with_a_range_delete_is_written_as_built() {
    let mut b = Batch::new();
    b.put(Family::Index, b"m".to_vec(), b"1".to_vec());
    b.delete_range(Family::Index, b"a".to_vec(), b"z".to_vec());
    let order = keys_in_write_order(&b);
    assert_eq!(order[0].1, b"m".to_vec());
    assert_eq!(order[1].2, "range");

    // And what that order means once committed: the put is deleted.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create_or_open(&dir.path().join("s")).unwrap();
    store.commit(b, false).unwrap();
    assert_eq!(store.get(Family::Index, b"m").unwrap(), None);

    let mut b = Batch::new();
    b.put(Family::Index, b"k".to_vec(), b"1".to_vec());
    b.delete(Family::Index, b"k".to_vec());
    b.put(Family::Index, b"j".to_vec(), b"1".to_vec());
    store.commit(b, false).unwrap();
    assert_eq!(store.get(Family::Index, b"k").unwrap(), None);
    assert_eq!(store.get(Family::Index, b"j").unwrap(), Some(b"1".to_vec()));
}

/// A cursor over fixed items that reports an I/O error after `fail_after`.
struct Failing {
    items: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
    fail_after: usize,
}

impl Cursor for Failing {
    fn seek_first(&mut self) {
        self.pos = 0;
    }
    fn seek_last(&mut self) {
        self.pos = 0;
    }
    fn valid(&self) -> bool {
        self.pos < self.items.len().min(self.fail_after)
    }
    fn item(&self) -> Option<(&[u8], &[u8])> {
        self.items
            .get(self.pos)
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
    }
    fn next(&mut self) {
        self.pos += 1;
    }
    fn prev(&mut self) {
        self.pos += 1;
    }
    fn status(&self) -> std::result::Result<(), String> {
        if self.pos >= self.fail_after && self.pos < self.items.len() {
            Err("Corruption: block checksum mismatch".into())
        } else {
            Ok(())
        }
    }
}

#[test]
fn a_reopen_in_place_keeps_every_write_and_waits_for_operations_in_progress() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create_or_open(dir.path()).unwrap();
    let mut b = Batch::new();
    b.put(Family::Meta, b"m:test".to_vec(), b"1".to_vec());
    store.commit(b, true).unwrap();
    assert_eq!(store.generation(), 0);

    // An operation in progress holds the handle: the reopen gives up
    // after its wait and leaves the store usable.
    let held = store.db().unwrap();
    assert!(matches!(
        store.reopen(Duration::from_millis(50)),
        Err(StoreError::Busy(_))
    ));
    assert_eq!(
        store.get(Family::Meta, b"m:test").unwrap(),
        Some(b"1".to_vec())
    );
    drop(held);

    store.reopen(Duration::from_secs(5)).unwrap();
    assert_eq!(store.generation(), 1);
    assert_eq!(
        store.get(Family::Meta, b"m:test").unwrap(),
        Some(b"1".to_vec())
    );
    store.probe_write().unwrap();
    assert_eq!(
        store.get(Family::Meta, meta::PROBE).unwrap(),
        None,
        "the probe leaves nothing"
    );
    assert!(store.write_fault().is_none());
}

#[test]
fn an_iterator_error_surfaces_as_an_error_not_a_short_result() {
    let items: Vec<_> = (0u8..10).map(|i| (vec![i], vec![])).collect();
    let mut seen = 0;
    let res = drive(
        Failing {
            items: items.clone(),
            pos: 0,
            fail_after: 4,
        },
        "index",
        Dir::Forward,
        |_, _| {
            seen += 1;
            Ok(ControlFlow::Continue(()))
        },
    );
    assert_eq!(seen, 4);
    assert!(
        matches!(
            res,
            Err(StoreError::Scan {
                family: "index",
                ..
            })
        ),
        "{res:?}"
    );

    let mut seen = 0;
    let res = drive(
        Failing {
            items,
            pos: 0,
            fail_after: 100,
        },
        "index",
        Dir::Forward,
        |_, _| {
            seen += 1;
            Ok(ControlFlow::Continue(()))
        },
    );
    assert_eq!(seen, 10);
    assert!(res.is_ok());
}
