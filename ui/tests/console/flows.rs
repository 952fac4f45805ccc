//! Heatmap cells counted from a real store, and the guarded actions end to
//! end on a real store (WRITE mode): the dry-run count equals what the run
//! touches, and the counters change.

use crate::common::*;
use ankusa_store::{queries, tenants, DeadRow, Store};
use ankusa_ui::heatmap::{count_row, HeatSpec, CAP};

fn store_with(dir: &std::path::Path, rows: &[(&str, u64, u64)]) -> Store {
    let s = Store::create_or_open(dir).expect("store");
    for (tenant, n, at) in rows {
        ingest(&s, tenant, *n, |_| *at);
    }
    s
}

#[test]
fn heatmap_cells_count_due_rows_per_bucket_with_now_overdue_and_future() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = store_with(
        dir.path(),
        &[
            ("acme", 3, NOW - 5_000),     // overdue 5 s
            ("acme", 1, NOW - 1_000),     // overdue 1 s
            ("acme", 2, NOW + 200),       // this second
            ("acme", 1, NOW + 10_000),    // a retry in 10 s
            ("acme", 2, NOW - 3_600_000), // an hour old: the leftmost column
        ],
    );
    let ord = tenants::ord_of(&s, "acme").expect("read").expect("acme");
    let spec = HeatSpec::new(1_000, 60);
    let cells = count_row(&s, ord, &spec, NOW).expect("count");
    let n = spec.now_col;
    assert_eq!(cells[n - 5], 3);
    assert_eq!(cells[n - 1], 1);
    assert_eq!(cells[n], 2);
    assert_eq!(cells[n + 10], 1);
    assert_eq!(
        cells[0], 2,
        "older than the window goes to the first column"
    );
    assert_eq!(
        cells.iter().sum::<u32>(),
        9,
        "every row counted once: {cells:?}"
    );
    // Zoomed out to 1 min, all but the hour-old rows share "now".
    let spec = HeatSpec::new(60_000, 40);
    let cells = count_row(&s, ord, &spec, NOW).expect("count");
    let now_bucket_start = NOW - NOW % 60_000;
    let expect_now: u32 = [
        (NOW - 5_000, 3),
        (NOW - 1_000, 1),
        (NOW + 200, 2),
        (NOW + 10_000, 1),
    ]
    .iter()
    .filter(|(at, _)| *at >= now_bucket_start && *at < now_bucket_start + 60_000)
    .map(|(_, n)| n)
    .sum();
    assert_eq!(cells[spec.now_col], expect_now, "{cells:?}");
    assert_eq!(cells.iter().sum::<u32>(), 9);
}

#[test]
fn a_crowded_cell_is_capped_and_does_not_hide_the_next_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = store_with(
        dir.path(),
        &[
            ("big", u64::from(CAP), NOW - 3_000),
            ("big", 50, NOW - 2_000),
            ("big", 1, NOW - 1_000),
        ],
    );
    let ord = tenants::ord_of(&s, "big").expect("read").expect("big");
    let spec = HeatSpec::new(1_000, 20);
    let cells = count_row(&s, ord, &spec, NOW).expect("count");
    assert_eq!(
        cells[spec.now_col - 3],
        CAP,
        "exactly the cap is not saturated: {cells:?}"
    );
    assert_eq!(cells[spec.now_col - 2], CAP + 1, "capped: {cells:?}");
    assert_eq!(
        cells[spec.now_col - 1],
        1,
        "the next cell still counted: {cells:?}"
    );
    assert_eq!(ankusa_ui::heatmap::glyph(cells[spec.now_col - 2], CAP), '█');
}

#[test]
fn a_tenant_with_nothing_due_has_an_empty_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = store_with(dir.path(), &[("a", 1, NOW)]);
    let spec = HeatSpec::new(1_000, 10);
    assert_eq!(count_row(&s, 999, &spec, NOW).expect("count"), vec![0; 10]);
}

#[test]
fn replaying_the_dead_only_tenant_moves_its_rows_and_changes_the_counters() {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let mut src = open(dir.path(), true);
    let ord = tenants::ord_of(src.store().expect("open"), "dead-only")
        .expect("read")
        .expect("dead-only");
    let before = queries::counters(src.store().expect("open"), ord).expect("counters");
    assert!(before.dead > 0);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    type_keys(&mut app, &mut src, ":dlq dead-only\nA");
    match &app.overlays[..] {
        [ankusa_ui::popups::Overlay::Guard(g)] => {
            assert_eq!(
                g.stage,
                ankusa_ui::popups::guard::Stage::Confirm {
                    count: before.dead as u64,
                    typed: String::new()
                }
            )
        }
        other => panic!("{other:?}"),
    }
    type_keys(&mut app, &mut src, "dead-only\n");
    match &app.overlays[..] {
        [ankusa_ui::popups::Overlay::Guard(g)] => match &g.stage {
            ankusa_ui::popups::guard::Stage::Done(Ok(r)) => {
                assert_eq!(r.touched, before.dead as u64, "dry run == rows touched");
                assert_eq!(r.expected, r.touched);
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    let after = queries::counters(src.store().expect("open"), ord).expect("counters");
    assert_eq!(after.dead, 0);
    assert_eq!(after.pending, before.pending + before.dead);
    drop(src);
    let s = Store::open_read_only(dir.path()).expect("ro");
    let report = ankusa_store::check::run(&s, |_, _| {}).expect("check");
    assert!(report.ok(), "{report:?}");
}

#[test]
fn replaying_a_time_range_takes_exactly_the_rows_dead_lettered_in_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let mut src = open(dir.path(), true);
    let s = src.store().expect("open");
    let ord = tenants::ord_of(s, "dead-only")
        .expect("read")
        .expect("dead-only");
    let before = queries::counters(s, ord).expect("counters");
    let all = queries::dlq_page_for_tenant(s, ord, None, 100_000).expect("dlq");
    let since = NOW - 20 * 60 * 1000;
    let in_range = all
        .entries
        .iter()
        .filter(|r| r.at >= since && r.at <= NOW)
        .count() as u64;
    assert!(
        in_range > 0 && (in_range as i64) < before.dead,
        "a range that splits the DLQ"
    );
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    type_keys(
        &mut app,
        &mut src,
        ":dlq dead-only
:replay-since 20m
",
    );
    match &app.overlays[..] {
        [ankusa_ui::popups::Overlay::Guard(g)] => assert_eq!(
            g.stage,
            ankusa_ui::popups::guard::Stage::Confirm {
                count: in_range,
                typed: String::new()
            }
        ),
        other => panic!("{other:?}"),
    }
    type_keys(&mut app, &mut src, "replay\n");
    match &app.overlays[..] {
        [ankusa_ui::popups::Overlay::Guard(g)] => match &g.stage {
            ankusa_ui::popups::guard::Stage::Done(Ok(r)) => {
                assert_eq!((r.expected, r.touched), (in_range, in_range))
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    let after = queries::counters(src.store().expect("open"), ord).expect("counters");
    assert_eq!(after.dead, before.dead - in_range as i64);
    drop(src);
    let s = Store::open_read_only(dir.path()).expect("ro");
    assert!(ankusa_store::check::run(&s, |_, _| {}).expect("check").ok());
}

#[test]
fn purging_a_tenant_removes_exactly_the_dry_run_count() {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let mut src = open(dir.path(), true);
    let s = src.store().expect("open");
    let ord = tenants::ord_of(s, "tenant-000002")
        .expect("read")
        .expect("tenant");
    let before = queries::counters(s, ord).expect("counters");
    let node_before = queries::node_counters(s).expect("node");
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    type_keys(&mut app, &mut src, ":tenant tenant-000002\nP");
    type_keys(&mut app, &mut src, "tenant-000002\n");
    let s = src.store().expect("open");
    let after = queries::counters(s, ord).expect("counters");
    assert_eq!((after.pending, after.scheduled, after.dead), (0, 0, 0));
    assert_eq!(
        after.inflight, before.inflight,
        "inflight rows are never purged"
    );
    let purged = before.pending + before.scheduled + before.dead;
    let node_after = queries::node_counters(s).expect("node");
    assert_eq!(
        node_before.pending + node_before.scheduled + node_before.dead - purged,
        node_after.pending + node_after.scheduled + node_after.dead
    );
    match &app.overlays[..] {
        [ankusa_ui::popups::Overlay::Guard(g)] => match &g.stage {
            ankusa_ui::popups::guard::Stage::Done(Ok(r)) => assert_eq!(r.touched as i64, purged),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn actions_refuse_to_run_without_write_mode_even_if_asked_directly() {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let mut src = open(dir.path(), false);
    let s = src.store().expect("open");
    let ord = tenants::ord_of(s, "dead-only")
        .expect("read")
        .expect("dead-only");
    let req = ankusa_ui::data::Request::Execute(ankusa_ui::data::ActionScope::ReplayTenant {
        ord,
        tenant: "dead-only".into(),
    });
    let err = src
        .execute(&req, NOW, &mut |_| {})
        .expect_err("read-only must refuse");
    assert!(err.to_string().contains("--write"), "{err}");
}

/// Replay's unit is the dead delivery row `(hook, sink)`. A hook dead at two
/// sinks with only one of them marked: the confirmation names that one row,
/// the dry run counts it alone, the run changes it alone (its sibling stays
/// dead), and the audit records say the same.
#[test]
fn replaying_one_marked_sink_of_a_hook_dead_at_two_changes_that_row_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let mut src = open(dir.path(), true);
    let s = src.store().expect("open");
    let all = queries::dlq_page(s, None, 100_000).expect("dlq");
    let mut by_hook: std::collections::BTreeMap<u64, Vec<DeadRow>> = Default::default();
    for r in all.entries {
        by_hook.entry(r.seq).or_default().push(r);
    }
    let (_, mut pair) = by_hook
        .into_iter()
        .find(|(_, rows)| rows.len() == 2)
        .expect("the fixture has a hook dead at two sinks");
    pair.sort_by_key(|r| r.sink);
    let (sibling, picked) = (pair[0].clone(), pair[1].clone());
    let tenant = match tenants::name_of(s, picked.ord).expect("name") {
        Some(tenants::Name::Live(n)) => n,
        other => panic!("{other:?}"),
    };
    let tenant_dlq = queries::dlq_page_for_tenant(s, picked.ord, None, 100_000).expect("dlq");
    let at = tenant_dlq
        .entries
        .iter()
        .position(|r| *r == picked)
        .expect("the row is in its tenant's DLQ");
    let dead_before = queries::node_counters(s).expect("node").dead;

    // Tall enough for the row to be on the first page.
    let mut app = app_for(&src, 160, u16::try_from(at + 20).expect("height"));
    start(&mut app, &mut src);
    type_keys(&mut app, &mut src, &format!(":dlq {tenant}\n"));
    type_keys(&mut app, &mut src, &"j".repeat(at));
    type_keys(&mut app, &mut src, "xR");
    assert_eq!(app.dlq.marked_rows, vec![picked.clone()]);
    match &app.overlays[..] {
        [ankusa_ui::popups::Overlay::Guard(g)] => assert_eq!(
            g.stage,
            ankusa_ui::popups::guard::Stage::Confirm {
                count: 1,
                typed: String::new()
            },
            "the dry run counts the marked row alone"
        ),
        other => panic!("{other:?}"),
    }
    let screen = render(&app);
    let scope: Vec<&str> = screen
        .lines()
        .skip_while(|l| !l.contains("Scope:"))
        .take_while(|l| !l.contains("Dry run:"))
        .collect();
    let scope = scope.join("\n");
    assert!(scope.contains("replay 1 dead row"), "{scope}");
    assert!(
        scope.contains(&format!(
            "{} sink {}/{}",
            picked.hook_id, picked.source_id, picked.sink
        )),
        "{scope}"
    );
    assert!(
        !scope.contains(&format!("sink {}", sibling.sink)),
        "the sibling is not in scope: {scope}"
    );
    assert!(
        screen.contains("Dry run: 1 row(s) would change."),
        "{screen}"
    );

    type_keys(&mut app, &mut src, "replay\n");
    match &app.overlays[..] {
        [ankusa_ui::popups::Overlay::Guard(g)] => match &g.stage {
            ankusa_ui::popups::guard::Stage::Done(Ok(r)) => {
                assert_eq!((r.expected, r.touched), (1, 1))
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    let s = src.store().expect("open");
    let key = |r: &DeadRow| ankusa_store::keys::DeadKey {
        at: r.at,
        seq: r.seq,
        sink: r.sink,
    };
    assert!(queries::dead_row(s, &key(&picked)).expect("read").is_none());
    assert!(
        queries::dead_row(s, &key(&sibling))
            .expect("read")
            .is_some(),
        "the unmarked sink of the same hook stays dead"
    );
    assert_eq!(
        queries::node_counters(s).expect("node").dead,
        dead_before - 1
    );
    // The audit trail: dry run, start and end, each of one row.
    let audit = ankusa_store::audit::page(s, None, 10).expect("audit");
    let outcomes: Vec<(String, u64)> = audit
        .iter()
        .map(|a| {
            let v: serde_json::Value = serde_json::from_slice(&a.record).expect("record");
            (
                v["outcome"].as_str().unwrap_or("?").to_owned(),
                v["rows"].as_u64().unwrap_or(u64::MAX),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("done".into(), 1),
            ("started".into(), 1),
            ("dry_run".into(), 1)
        ]
    );
    drop(src);
    let s = Store::open_read_only(dir.path()).expect("ro");
    assert!(ankusa_store::check::run(&s, |_, _| {}).expect("check").ok());
}

/// `:repair` in WRITE mode on a damaged store (a due row that no longer
/// decodes, two markers gone): the guard's dry run counts the changes, the
/// typed `repair` runs them, `store check` passes afterwards and a second
/// dry run counts nothing. A read-only console refuses it.
#[test]
fn repairing_a_damaged_store_from_the_console() {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    {
        let path = dir.path();
        let names = rocksdb::DB::list_cf(&rocksdb::Options::default(), path).expect("cfs");
        let cfs: Vec<_> = names
            .iter()
            .map(|n| {
                let f = ankusa_store::Family::from_name(n).expect("family");
                rocksdb::ColumnFamilyDescriptor::new(n, ankusa_store::schema::family_options(f))
            })
            .collect();
        let db = rocksdb::DB::open_cf_descriptors(&rocksdb::Options::default(), path, cfs)
            .expect("raw open");
        let index = db.cf_handle("index").expect("index");
        let due = db
            .prefix_iterator_cf(index, b"D")
            .map(|r| r.expect("read"))
            .find(|(k, _)| k[0] == b'D')
            .expect("a due row");
        db.put_cf(index, &due.0, [0xFF]).expect("put");
        let markers: Vec<Vec<u8>> = db
            .prefix_iterator_cf(index, b"A")
            .map(|r| r.expect("read").0.to_vec())
            .take_while(|k| k[0] == b'A')
            .take(2)
            .collect();
        for k in markers {
            db.delete_cf(index, k).expect("delete");
        }
    }
    {
        let s = Store::open_read_only(dir.path()).expect("ro");
        assert!(!ankusa_store::check::run(&s, |_, _| {}).expect("check").ok());
    }

    let mut ro = open(dir.path(), false);
    let mut app = app_for(&ro, 80, 24);
    start(&mut app, &mut ro);
    type_keys(&mut app, &mut ro, ":repair\n");
    assert!(app.overlays.is_empty(), "{:?}", app.overlays);
    assert!(app.status.contains("--write"), "{}", app.status);
    drop(ro);

    let mut src = open(dir.path(), true);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    type_keys(&mut app, &mut src, ":repair\n");
    let count = match &app.overlays[..] {
        [ankusa_ui::popups::Overlay::Guard(g)] => match &g.stage {
            ankusa_ui::popups::guard::Stage::Confirm { count, .. } => *count,
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    assert!(count >= 3, "a quarantine and two markers at least: {count}");
    type_keys(&mut app, &mut src, "repair\n");
    match &app.overlays[..] {
        [ankusa_ui::popups::Overlay::Guard(g)] => match &g.stage {
            ankusa_ui::popups::guard::Stage::Done(Ok(r)) => {
                assert_eq!((r.expected, r.touched), (count, count))
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    type_keys(&mut app, &mut src, "\n:repair\n");
    match &app.overlays[..] {
        [ankusa_ui::popups::Overlay::Guard(g)] => assert_eq!(
            g.stage,
            ankusa_ui::popups::guard::Stage::Confirm {
                count: 0,
                typed: String::new()
            }
        ),
        other => panic!("{other:?}"),
    }
    drop(src);
    let s = Store::open_read_only(dir.path()).expect("ro");
    let report = ankusa_store::check::run(&s, |_, _| {}).expect("check");
    assert!(report.ok(), "{report:?}");
    assert_eq!(ankusa_store::quarantine::count(&s).expect("count"), 1);
}
