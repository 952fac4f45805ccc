//! Opening stores: the format fence, read-only and follower opens, lock
//! errors, and iterator errors on real corruption.

use crate::common::*;
use ankusa_store::tenants::TenantAllocator;
use ankusa_store::{queries, Store, StoreError};

fn stamp(path: &std::path::Path, key: &[u8], value: &[u8]) {
    // Raw RocksDB, as another release would write it.
    let mut o = rocksdb::Options::default();
    o.create_if_missing(true);
    let cfs = rocksdb::DB::list_cf(&o, path).unwrap_or_else(|_| vec!["default".into()]);
    let descriptors: Vec<_> = cfs
        .iter()
        .map(|n| {
            let f = ankusa_store::Family::from_name(n).unwrap();
            rocksdb::ColumnFamilyDescriptor::new(n, ankusa_store::schema::family_options(f))
        })
        .collect();
    let db = rocksdb::DB::open_cf_descriptors(&o, path, descriptors).unwrap();
    db.put(key, value).unwrap();
}

#[test]
fn a_newer_format_store_is_refused_naming_both_formats() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    drop(Store::create_or_open(&path).unwrap());
    stamp(&path, b"m:format", &4u32.to_be_bytes());
    for res in [
        Store::open(&path),
        Store::open_read_only(&path),
        Store::create_or_open(&path),
    ] {
        let err = res.unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::FormatNewer {
                    found: 4,
                    supported: 3,
                    ..
                }
            ),
            "{err}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("format 4") && msg.contains("format 3"),
            "{msg}"
        );
    }
}

#[test]
fn a_format_2_store_is_refused_naming_the_migration() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    stamp(&path, b"m:format", &2u32.to_be_bytes());
    let err = Store::open(&path).unwrap_err();
    assert!(
        matches!(err, StoreError::FormatNeedsMigration { found: 2, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("ankusa store migrate"), "{err}");
    let err = Store::open_read_only(&path).unwrap_err();
    assert!(err.to_string().contains("ankusa store migrate"), "{err}");
}

#[test]
fn a_store_mid_migration_can_only_be_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    stamp(&path, b"m:format", &2u32.to_be_bytes());
    stamp(&path, b"m:migrating:3", b"\x01");
    let err = Store::open(&path).unwrap_err();
    assert!(
        matches!(err, StoreError::MigrationInProgress { target: 3, .. }),
        "{err}"
    );
}

#[test]
fn a_missing_store_is_a_clear_error_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope");
    assert!(matches!(
        Store::open_read_only(&path),
        Err(StoreError::Missing(_))
    ));
    assert!(matches!(Store::open(&path), Err(StoreError::Missing(_))));
    assert!(!path.exists(), "opening created the directory");
}

#[test]
fn a_second_writer_gets_a_lock_error() {
    let (dir, store) = fresh();
    let err = Store::open(&dir.path().join("store")).unwrap_err();
    assert!(matches!(err, StoreError::Locked { .. }), "{err}");
    drop(store);
}

#[test]
fn read_only_and_follower_opens_see_the_writer() {
    let (dir, store) = fresh();
    let path = dir.path().join("store");
    let mut alloc = TenantAllocator::load(&store, 10).unwrap();
    ingest(&store, &mut alloc, &[("a", 1, 10, 2, false)]);
    let ro = Store::open_read_only(&path).unwrap();
    assert_eq!(queries::node_counters(&ro).unwrap().pending, 2);
    let follower = Store::open_secondary(&path, &dir.path().join("follower")).unwrap();
    assert_eq!(queries::node_counters(&follower).unwrap().pending, 2);
    ingest(&store, &mut alloc, &[("b", 2, 10, 1, false)]);
    follower.catch_up().unwrap();
    assert_eq!(
        queries::node_counters(&follower).unwrap().pending,
        3,
        "the follower caught up"
    );
    let mut b = ankusa_store::Batch::new();
    let res = TenantAllocator::load(&follower, 10)
        .unwrap()
        .resolve(&follower, ["zz"], &mut b)
        .unwrap();
    drop(res);
    assert!(matches!(
        follower.commit(b, true),
        Err(StoreError::ReadOnly(_))
    ));
}

#[test]
fn a_corrupt_table_file_makes_a_scan_fail_instead_of_returning_less() {
    let (dir, store) = fresh();
    let path = dir.path().join("store");
    let mut alloc = TenantAllocator::load(&store, 10).unwrap();
    let hooks: Vec<_> = (0..2000u64)
        .map(|i| ("a", i, 100usize, 1u16, false))
        .collect();
    ingest(&store, &mut alloc, &hooks);
    store.flush().unwrap();
    drop(store);
    // Flip bytes in the middle of every table file.
    let mut hit = 0;
    for e in std::fs::read_dir(&path).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "sst") {
            let mut bytes = std::fs::read(&p).unwrap();
            if bytes.len() > 4096 {
                for b in &mut bytes[1024..3072] {
                    *b ^= 0x5A;
                }
                std::fs::write(&p, bytes).unwrap();
                hit += 1;
            }
        }
    }
    assert!(hit > 0, "no table file large enough to corrupt");
    let ro = Store::open_read_only(&path).unwrap();
    let res = ankusa_store::check::run(&ro, |_, _| {});
    assert!(
        res.is_err(),
        "a scan over a corrupt file returned a result: {:?}",
        res.map(|r| r.due_rows)
    );
}
