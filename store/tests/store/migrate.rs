//! The format 2 → 3 upgrade, per the ADR's proof list.

use std::collections::BTreeMap;
use std::path::Path;

use ankusa_store::fixture::{self, FixtureSpec};
use ankusa_store::migrate::{self, Migration, StepOutcome};
use ankusa_store::{check, queries, tenants, Store, StoreError};

const NOW: u64 = 1_800_000_000_000;

fn v2_fixture(path: &Path, tenants: u32, rows: u64) -> fixture::FixtureReport {
    let s = Store::create_v2(path).unwrap();
    let mut spec = FixtureSpec::new(tenants, rows, 42, NOW);
    spec.batch_hooks = 97;
    fixture::write_v2(&s, &spec, |_, _| {}).unwrap()
}

/// Every key and value of every format 3 family, minus the migration cursor.
fn dump(store: &Store) -> BTreeMap<(String, Vec<u8>), Vec<u8>> {
    let path = store.path().to_path_buf();
    let names = rocksdb::DB::list_cf(&rocksdb::Options::default(), &path).unwrap();
    let cfs: Vec<_> = names
        .iter()
        .map(|n| {
            rocksdb::ColumnFamilyDescriptor::new(
                n,
                ankusa_store::schema::family_options(ankusa_store::Family::from_name(n).unwrap()),
            )
        })
        .collect();
    let db =
        rocksdb::DB::open_cf_descriptors_read_only(&rocksdb::Options::default(), &path, cfs, false)
            .unwrap();
    let mut out = BTreeMap::new();
    for n in &names {
        let cf = db.cf_handle(n).unwrap();
        for item in db.iterator_cf(cf, rocksdb::IteratorMode::Start) {
            let (k, v) = item.unwrap();
            out.insert((n.clone(), k.to_vec()), v.to_vec());
        }
    }
    out
}

fn migrate_all(path: &Path, step_rows: usize) {
    let store = Store::open_any_format(path).unwrap();
    let mut m = Migration::start(&store, NOW, 1_000_000)
        .unwrap()
        .with_step_rows(step_rows);
    m.run(|_| {}).unwrap();
}

/// The console starts a `Migration` for every step on one store handle: the
/// lookup the handle keeps between steps must answer as a fresh one would.
#[test]
fn a_migration_started_per_step_on_one_handle_ends_identical_to_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    v2_fixture(&a, 20, 2500);
    v2_fixture(&b, 20, 2500);
    migrate_all(&a, 300);
    {
        let store = Store::open_any_format(&b).unwrap();
        loop {
            let mut m = Migration::start(&store, NOW, 1_000_000)
                .unwrap()
                .with_step_rows(300);
            if m.step().unwrap() == StepOutcome::Finished {
                break;
            }
        }
    }
    assert_eq!(
        dump(&Store::open(&a).unwrap()),
        dump(&Store::open(&b).unwrap())
    );
}

#[test]
fn v2_fixture_upgrades_with_counters_equal_to_a_fold() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let rep = v2_fixture(&path, 30, 3000);
    assert!(matches!(
        Store::open(&path),
        Err(StoreError::FormatNeedsMigration { .. })
    ));
    assert_eq!(migrate::status(&path).unwrap(), migrate::Status::Needed);
    let plan = migrate::plan(&Store::open_read_only_any_format(&path).unwrap()).unwrap();
    assert_eq!(
        plan.rows.iter().sum::<u64>(),
        rep.pending + rep.retrying + rep.inflight + rep.dead + rep.archived_hooks + rep.quarantined
    );
    assert!(rep.quarantined > 0, "the fixture holds an unreadable hook");

    migrate_all(&path, 500);
    assert_eq!(migrate::status(&path).unwrap(), migrate::Status::Done);
    let store = Store::open(&path).unwrap();
    let report = check::run(&store, |_, _| {}).unwrap();
    assert!(report.ok(), "{:#?}", report.mismatches);
    let node = queries::node_counters(&store).unwrap();
    assert_eq!(
        node.pending, rep.pending as i64,
        "due rows received before the start are first attempts"
    );
    assert_eq!(
        node.scheduled, rep.retrying as i64,
        "due rows after the start are retries"
    );
    assert_eq!(node.inflight, rep.inflight as i64);
    assert_eq!(node.dead, rep.dead as i64);
    assert_eq!(node.archive_pending, rep.archived_hooks as i64);
    assert_eq!(
        ankusa_store::quarantine::count(&store).unwrap(),
        rep.quarantined as i64,
        "the unreadable hook's rows are quarantined, not filed under a tenant"
    );
    // Each ordinal allocated once: 30 tenants, `default` included.
    assert_eq!(tenants::allocated(&store).unwrap(), 30);
    let default = tenants::ord_of(&store, "default")
        .unwrap()
        .expect("default tenant");
    let d = queries::counters(&store, default).unwrap();
    assert!(
        d.pending + d.scheduled + d.inflight + d.dead > 0,
        "hooks with no tenant file under default"
    );
    let dead_only = tenants::ord_of(&store, "dead-only").unwrap().unwrap();
    let c = queries::counters(&store, dead_only).unwrap();
    assert_eq!((c.pending, c.scheduled, c.inflight), (0, 0, 0));
    assert!(c.dead > 0);
}

#[test]
fn an_unreadable_envelope_quarantines_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let rep = v2_fixture(&path, 5, 200);
    migrate_all(&path, 64);
    let store = Store::open(&path).unwrap();
    let mut found = false;
    for seq in 1..=200u64 {
        if queries::hook(&store, seq).is_err() {
            found = true;
            // Its rows are in no tenant's index (a token scoped to `default`
            // must not see them): each is in the quarantine, and keeps its
            // delivery row for the operator.
            let (rows, _) = ankusa_store::quarantine::page(&store, None, 100).unwrap();
            let mine: Vec<_> = rows
                .iter()
                .filter(|r| ankusa_store::quarantine::delivery_of(&r.key).map(|d| d.0) == Some(seq))
                .collect();
            assert!(!mine.is_empty());
            for r in mine {
                assert!(r.reason.contains("invalid tenant id"), "{}", r.reason);
                let (_, sink) = ankusa_store::quarantine::delivery_of(&r.key).unwrap();
                assert!(queries::delivery(&store, seq, sink).unwrap().is_some());
            }
        }
    }
    assert!(found, "the fixture holds an undecodable hook");
    assert_eq!(
        ankusa_store::quarantine::count(&store).unwrap(),
        rep.quarantined as i64
    );
    let report = check::run(&store, |_, _| {}).unwrap();
    assert!(report.ok(), "{:#?}", report.mismatches);
}

/// A format 2 row whose key or value does not decode (and a hook whose
/// tenant id ingest would refuse) is quarantined; the migration finishes.
#[test]
fn an_undecodable_old_row_is_quarantined_and_the_migration_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let rep = v2_fixture(&path, 5, 300);
    {
        let db = crate::common::raw_open(&path);
        let index = db.cf_handle("index").unwrap();
        // A due key one byte short, and a due value of the wrong width.
        db.put_cf(index, [b'd', 0, 0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 9])
            .unwrap();
        let (k, _) = db.prefix_iterator_cf(index, b"d").nth(3).unwrap().unwrap();
        db.put_cf(index, &k, [1, 2, 3]).unwrap();
    }
    migrate_all(&path, 64);
    let store = Store::open(&path).unwrap();
    assert_eq!(
        ankusa_store::quarantine::count(&store).unwrap(),
        rep.quarantined as i64 + 2
    );
    let report = check::run(&store, |_, _| {}).unwrap();
    assert!(report.ok(), "{:#?}", report.mismatches);
}

#[test]
fn interrupted_between_every_pair_of_steps_ends_identical_to_an_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    v2_fixture(&a, 12, 900);
    v2_fixture(&b, 12, 900);
    migrate_all(&a, 50);
    let mut steps = 0;
    loop {
        // A fresh process each time: reopen, resume, one step, "crash".
        let store = Store::open_any_format(&b).unwrap();
        // Resumes keep the first run's start time, whatever the clock says now.
        let start = if steps == 0 { NOW } else { NOW + 999_999 };
        let mut m = Migration::start(&store, start, 1_000_000)
            .unwrap()
            .with_step_rows(50);
        steps += 1;
        if m.step().unwrap() == StepOutcome::Finished {
            break;
        }
    }
    assert!(steps > 20, "only {steps} steps");
    let (sa, sb) = (Store::open(&a).unwrap(), Store::open(&b).unwrap());
    assert_eq!(
        dump(&sa),
        dump(&sb),
        "the resumed migration differs from the uninterrupted one"
    );
    let report = check::run(&sb, |_, _| {}).unwrap();
    assert!(report.ok(), "{:#?}", report.mismatches);
}

#[test]
fn a_format_3_store_is_refused_by_the_format_2_layout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    v2_fixture(&path, 3, 50);
    migrate_all(&path, 100);
    // What the previous release does: open with its own family list.
    let cfs: Vec<_> = ankusa_store::Family::V2
        .iter()
        .map(|f| {
            rocksdb::ColumnFamilyDescriptor::new(f.name(), ankusa_store::schema::family_options(*f))
        })
        .collect();
    let err =
        rocksdb::DB::open_cf_descriptors(&rocksdb::Options::default(), &path, cfs).unwrap_err();
    assert!(err.to_string().contains("olumn famil"), "{err}");
    // And migrating again is a clear no-op error, not a second migration.
    let store = Store::open_any_format(&path).unwrap();
    assert!(matches!(
        Migration::start(&store, NOW, 10),
        Err(StoreError::NothingToMigrate { .. })
    ));
}

#[test]
fn a_restored_format_2_backup_migrates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let backup = dir.path().join("backup");
    v2_fixture(&path, 8, 400);
    Store::backup(&path, &backup).unwrap();
    migrate_all(&path, 100);
    assert_eq!(
        migrate::status(&backup).unwrap(),
        migrate::Status::Needed,
        "the backup stayed format 2"
    );
    migrate_all(&backup, 100);
    let (a, b) = (Store::open(&path).unwrap(), Store::open(&backup).unwrap());
    assert_eq!(dump(&a), dump(&b));
}

#[test]
fn more_tenants_than_the_limit_still_migrate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    v2_fixture(&path, 10, 300);
    let store = Store::open_any_format(&path).unwrap();
    let mut m = Migration::start(&store, NOW, 4).unwrap();
    m.run(|_| {}).unwrap();
    assert_eq!(m.over_limit, 6);
    drop(m);
    drop(store);
    let store = Store::open(&path).unwrap();
    assert_eq!(tenants::allocated(&store).unwrap(), 10);
    assert!(check::run(&store, |_, _| {}).unwrap().ok());
}

#[test]
fn the_cursor_round_trips() {
    let c = migrate::Cursor {
        phase: migrate::Phase::Dead,
        started_at: 7,
        done: [1, 2, 3, 4],
        total: [5, 6, 7, 8],
        last_key: vec![b'x', 1, 2],
    };
    let back = migrate::Cursor::decode(&c.encode()).unwrap();
    assert_eq!(back, c);
    assert_eq!(back.last_key, c.last_key);
    assert!(migrate::Cursor::decode(&[1, 9]).is_err());
}

/// Every migrated dead row can be found from its delivery row, which is how
/// the DLQ detail and a replay by id find it (by the last attempt's time):
/// a row whose old history ended at its dead-letter time keeps that history,
/// and a row the old release kept no history for gets a note at that time.
#[test]
fn migrated_dead_rows_keep_their_history_and_are_found_by_their_last_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let rep = v2_fixture(&path, 20, 2_000);
    migrate_all(&path, 300);
    let store = Store::open(&path).unwrap();
    let mut cursor = None;
    let (mut dead, mut kept, mut noted) = (0u64, 0u64, 0u64);
    loop {
        let page = queries::dlq_page(&store, cursor, 200).unwrap();
        for r in &page.entries {
            dead += 1;
            let d = queries::delivery(&store, r.seq, r.sink).unwrap().unwrap();
            let last = d
                .last()
                .unwrap_or_else(|| panic!("{} has no history", r.hook_id));
            assert_eq!(
                last.at, r.at,
                "{}: last attempt is not the dead-letter time",
                r.hook_id
            );
            assert_eq!(d.attempts, 3);
            match d.history.len() {
                3 => {
                    kept += 1;
                    assert_eq!(last.status, 500);
                }
                1 => {
                    noted += 1;
                    assert_eq!(last.error, migrate::DEAD_BEFORE_UPGRADE);
                }
                n => panic!("{}: unexpected history of {n}", r.hook_id),
            }
        }
        match page.next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(dead, rep.dead);
    assert!(kept > 0 && noted > 0, "kept {kept}, noted {noted}");
}

/// A format 2 hook whose tenant id reads like another (`tenant-000001`
/// with a zero-width space) is not filed under any tenant, nor under
/// `default`: its rows are quarantined and counted in the report.
#[test]
fn a_look_alike_tenant_id_is_quarantined_not_filed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let rep = v2_fixture(&path, 5, 200);
    let seq = 7u64;
    {
        let db = crate::common::raw_open(&path);
        let hooks = db.cf_handle("hooks").unwrap();
        let key = ankusa_store::keys::hook_key(seq);
        let mut env =
            ankusa_store::Envelope::decode(&db.get_cf(hooks, key).unwrap().unwrap()).unwrap();
        env.tenant = format!("{}\u{200B}", env.tenant);
        db.put_cf(hooks, key, env.encode()).unwrap();
    }
    migrate_all(&path, 64);
    let store = Store::open(&path).unwrap();
    let (rows, _) = ankusa_store::quarantine::page(&store, None, 1000).unwrap();
    let mine: Vec<_> = rows
        .iter()
        .filter(|r| ankusa_store::quarantine::delivery_of(&r.key).map(|d| d.0) == Some(seq))
        .collect();
    assert!(
        !mine.is_empty(),
        "the look-alike hook's rows are quarantined"
    );
    for r in &mine {
        assert!(r.reason.contains("invalid tenant id"), "{}", r.reason);
    }
    assert!(
        ankusa_store::quarantine::count(&store).unwrap() > rep.quarantined as i64,
        "and counted beyond the fixture's own"
    );
    let report = check::run(&store, |_, _| {}).unwrap();
    assert!(report.ok(), "{:#?}", report.mismatches);
}
