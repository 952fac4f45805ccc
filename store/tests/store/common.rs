//! Shared helpers for the store's integration tests.
#![allow(dead_code)]

use ankusa_store::tenants::TenantAllocator;
use ankusa_store::transitions::{self, IngestHook};
use ankusa_store::{Batch, DueRow, Envelope, Store};

pub fn fresh() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::create_or_open(&dir.path().join("store")).expect("create store");
    (dir, store)
}

pub fn envelope(tenant: &str, at: u64, size: usize) -> Envelope {
    Envelope {
        received_at: at,
        source_id: "src".into(),
        tenant: tenant.into(),
        idempotency_key: None,
        headers: vec![("content-type".into(), b"application/json".to_vec())],
        body: vec![b'b'; size],
    }
}

/// Ingests one hook per (tenant, at, size) through the allocator, committed
/// in one batch; returns the due rows.
pub fn ingest(
    store: &Store,
    alloc: &mut TenantAllocator,
    hooks: &[(&str, u64, usize, u16, bool)],
) -> Vec<DueRow> {
    let first_seq = store.next_seq().unwrap();
    let mut b = Batch::new();
    let res = alloc
        .resolve(store, hooks.iter().map(|h| h.0), &mut b)
        .unwrap();
    let mut out = Vec::new();
    for (i, &(t, at, size, sinks, archive)) in hooks.iter().enumerate() {
        let seq = first_seq + i as u64;
        let env = envelope(t, at, size);
        let ord = res.ord(t, alloc.max()).unwrap();
        out.extend(transitions::ingest(
            &mut b,
            &IngestHook {
                seq,
                ord,
                envelope: &env,
                sinks,
                archive,
                dedupe_expires_at: None,
            },
        ));
    }
    store.commit(b, true).unwrap();
    alloc.committed(res);
    out
}

pub fn assert_consistent(store: &Store) {
    let rep = ankusa_store::check::run(store, |_, _| {}).unwrap();
    assert!(rep.ok(), "store check failed: {:#?}", rep.mismatches);
}

/// The store's RocksDB opened directly (every family with its options), to
/// plant what the store's own API will not write: a stopped store only.
pub fn raw_open(path: &std::path::Path) -> rocksdb::DB {
    let names = rocksdb::DB::list_cf(&rocksdb::Options::default(), path).expect("list families");
    let cfs: Vec<_> = names
        .iter()
        .map(|n| {
            let f = ankusa_store::Family::from_name(n).expect("a known family");
            rocksdb::ColumnFamilyDescriptor::new(n, ankusa_store::schema::family_options(f))
        })
        .collect();
    rocksdb::DB::open_cf_descriptors(&rocksdb::Options::default(), path, cfs).expect("raw open")
}
