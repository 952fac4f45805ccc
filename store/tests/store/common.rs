//! Shared helpers for the store's integration tests.
#![allow(dead_code)]

use ankusa_store::fixture;
use ankusa_store::tenants::TenantAllocator;
use ankusa_store::transitions::SinkSet;
use ankusa_store::{DueRow, Envelope, Store};

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
        event_type: None,
        headers: vec![("content-type".into(), b"application/json".to_vec())],
        body: vec![b'b'; size],
    }
}

/// Ingests one hook per (tenant, at, size, sinks, archive) through the
/// allocator, committed in one batch ([`fixture::ingest`]); returns the due
/// rows.
pub fn ingest(
    store: &Store,
    alloc: &mut TenantAllocator,
    hooks: &[(&str, u64, usize, u16, bool)],
) -> Vec<DueRow> {
    let hooks: Vec<_> = hooks
        .iter()
        .map(|&(t, at, size, sinks, archive)| (t, at, size, SinkSet::first(sinks), archive))
        .collect();
    ingest_to(store, alloc, &hooks)
}

/// [`ingest`] with the sink positions of each hook (some may be skipped, as
/// a retired sink is).
pub fn ingest_to(
    store: &Store,
    alloc: &mut TenantAllocator,
    hooks: &[(&str, u64, usize, SinkSet, bool)],
) -> Vec<DueRow> {
    let hooks: Vec<fixture::Hook> = hooks
        .iter()
        .map(|&(t, at, size, sinks, archive)| fixture::Hook {
            envelope: envelope(t, at, size),
            sinks,
            archive,
        })
        .collect();
    fixture::ingest(store, alloc, &hooks).unwrap()
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
