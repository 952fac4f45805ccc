//! Snapshots of every screen at 80×24 and 160×48 with a fixed clock, on a
//! fixture store written at that clock. Stored under the top-level
//! `snapshots/` directory.

use crate::common::*;
use ankusa_store::migrate::{Cursor, Phase, Plan, Status};
use ankusa_store::Store;
use ankusa_ui::app::{App, Msg};
use ankusa_ui::data::{Feed, OpenMode, Reply, Request};
use ankusa_ui::screens::migration::Guide;

const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

fn each_size(name: &str, write: bool, setup: impl Fn(&mut App, &mut Feed)) {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let mut src = open(dir.path(), write);
    for (w, h) in SIZES {
        let mut app = app_for(&src, w, h);
        start(&mut app, &mut src);
        setup(&mut app, &mut src);
        snap!(format!("{name}_{w}x{h}"), render(&app));
    }
}

#[test]
fn overview() {
    each_size("overview", false, |_, _| {});
}

/// Readings of a node or tenant under load, ending at the snapshot's
/// `fresh_at`: every 10 s for ten minutes, then every 2 s for the last
/// minute. Accepted runs at 40/s and climbs to 60/s in the last 20 s,
/// delivered holds at 38/s, a retry every 2 s, one dead letter at the end;
/// the backlog grows from 500 to about 1,700 and the oldest row ages.
fn under_load(mut push: impl FnMut(ankusa_ui::rates::Sample)) {
    let end = NOW - 400;
    let mut times: Vec<u64> = (0..54u64).map(|i| end - 600_000 + i * 10_000).collect();
    times.extend((0..=30u64).map(|i| end - 60_000 + i * 2_000));
    let start = times[0];
    let (mut acc, mut dlv, mut rtr) = (100_000u64, 98_000u64, 3_000u64);
    let mut last = start;
    for &at in &times {
        let dt = (at - last) / 1000;
        let fast = end - at < 20_000;
        acc += dt * if fast { 60 } else { 40 };
        dlv += dt * 38;
        rtr += dt / 2;
        last = at;
        let elapsed = at - start;
        push(ankusa_ui::rates::Sample {
            at,
            totals: ankusa_store::Totals {
                accepted: acc,
                delivered: dlv,
                retried: rtr,
                dead_lettered: 40 + u64::from(at == end),
                unrouted: 0,
            },
            backlog: 500 + (elapsed / 500) as i64,
            oldest_age_ms: Some(30_000 + elapsed / 3),
        });
    }
}

/// FOLLOW beside a running daemon (pid 4242), data fresh at `NOW - 400`.
fn beside_a_daemon(app: &mut App) {
    app.header.mode = OpenMode::Follow { pid: 4242 };
    app.header.daemon = Some(ankusa_ui::data::DaemonStatus::Running(4242));
    app.rates = ankusa_ui::rates::RateBook::default();
}

#[test]
fn overview_with_rates_and_trends() {
    each_size("overview_trends", false, |a, _| {
        beside_a_daemon(a);
        under_load(|s| {
            a.rates.sample_node(s);
        });
    });
}

#[test]
fn tenant_detail_with_rates_and_trends() {
    each_size("tenant_detail_trends", false, |a, s| {
        type_keys(a, s, ":tenant tenant-000002\n");
        let ankusa_ui::screens::Screen::Tenant { ord } = a.screen().clone() else {
            panic!("not on the tenant: {:?}", a.screen());
        };
        beside_a_daemon(a);
        under_load(|s| {
            a.rates.sample_tenant(ord, s);
        });
    });
}

#[test]
fn tenants_with_rate_columns_beside_a_daemon() {
    each_size("tenants_rates", false, |a, s| {
        type_keys(a, s, "2");
        beside_a_daemon(a);
        let ords: Vec<u32> = a.tenant_rows().iter().map(|t| t.ord).collect();
        for (i, ord) in ords.iter().enumerate() {
            // Tenant i delivers i rows a second (ord 1 nothing).
            for step in 0..3u64 {
                let n = step * 2 * i as u64;
                a.rates.sample_tenant(
                    *ord,
                    ankusa_ui::rates::Sample {
                        at: NOW - 4_400 + step * 2_000,
                        totals: ankusa_store::Totals {
                            accepted: 3 * n,
                            delivered: n,
                            ..Default::default()
                        },
                        backlog: 0,
                        oldest_age_ms: None,
                    },
                );
            }
        }
        // `:sort delivered/s`: the page, fastest first.
        type_keys(a, s, ":sort delivered/s\n");
    });
}

#[test]
fn tenants_ordinal_order() {
    each_size("tenants", false, |a, s| type_keys(a, s, "2"));
}

#[test]
fn tenants_sorted_by_dead() {
    // s cycles: pending, scheduled, inflight, dead.
    each_size("tenants_by_dead", false, |a, s| type_keys(a, s, "2ssss"));
}

#[test]
fn tenants_filtered() {
    each_size("tenants_filtered", false, |a, s| {
        type_keys(a, s, "2/tenant-00001\n")
    });
}

#[test]
fn tenant_detail() {
    each_size("tenant_detail", false, |a, s| {
        type_keys(a, s, ":tenant tenant-000002\n")
    });
}

#[test]
fn heatmap() {
    each_size("heatmap", false, |a, s| type_keys(a, s, "3"));
}

#[test]
fn heatmap_zoomed_out_to_one_minute() {
    each_size("heatmap_1m", false, |a, s| type_keys(a, s, "3---"));
}

#[test]
fn dlq_all_tenants() {
    each_size("dlq", false, |a, s| type_keys(a, s, "4"));
}

/// Issue 33: the DLQ of a fleet node (hook ids `hk_<node>_<seq>`, 29
/// characters, alike but for their end) whose sinks have long names, at
/// the widths operators use. Every row's id must be readable whole or by
/// its distinguishing end, and every sink by its name, never a number;
/// the columns use the width there is before anything is cut.
#[test]
fn dlq_of_a_fleet_node_with_named_sinks() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = Store::create_or_open(dir.path()).expect("create store");
        let id = ankusa_store::NodeId::parse("n19792fe9").expect("node id");
        ankusa_store::node::record_identity(&s, id).expect("identity");
        ankusa_store::fixture::write(
            &s,
            &ankusa_store::fixture::FixtureSpec::new(40, 2000, 7, NOW),
            |_, _| {},
        )
        .expect("fixture");
        let entry = |source: &str, index: u16, name: &str| {
            ankusa_store::sinks::SinkEntry::live(source, index, name, "http://127.0.0.1:9000")
        };
        ankusa_store::sinks::replace(
            &s,
            &[
                entry("shop", 0, "orders-webhook-primary"),
                entry("shop", 1, "analytics-firehose"),
                entry("billing", 0, "ledger-reconciliation"),
                entry("billing", 1, "invoices"),
            ],
        )
        .expect("catalog");
    }
    let mut src = open(dir.path(), false);
    for (w, h) in [(80, 24), (100, 30), (160, 48)] {
        let mut app = app_for(&src, w, h);
        start(&mut app, &mut src);
        type_keys(&mut app, &mut src, "4");
        snap!(format!("dlq_fleet_{w}x{h}"), render(&app));
    }
}

/// Issue 32: the DLQ of a store whose `billing` source routes by event
/// type gets a type column (the untyped `shop` rows show `-`), and
/// `:dlq-type invoice.*` narrows it, the title saying so.
#[test]
fn dlq_with_event_types_and_a_type_filter() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = Store::create_or_open(dir.path()).expect("create store");
        let spec = ankusa_store::fixture::FixtureSpec {
            typed: true,
            ..ankusa_store::fixture::FixtureSpec::new(40, 2000, 7, NOW)
        };
        ankusa_store::fixture::write(&s, &spec, |_, _| {}).expect("fixture");
    }
    let mut src = open(dir.path(), false);
    for (w, h) in [(80, 24), (160, 48)] {
        let mut app = app_for(&src, w, h);
        start(&mut app, &mut src);
        type_keys(&mut app, &mut src, "4");
        snap!(format!("dlq_typed_{w}x{h}"), render(&app));
        type_keys(&mut app, &mut src, ":dlq-type invoice.*\n");
        snap!(format!("dlq_type_filter_{w}x{h}"), render(&app));
    }
}

#[test]
fn dlq_of_one_tenant() {
    each_size("dlq_tenant", false, |a, s| {
        type_keys(a, s, ":dlq dead-only\n")
    });
}

#[test]
fn dead_delivery_detail() {
    each_size("dead_detail", false, |a, s| type_keys(a, s, "4\n"));
}

#[test]
fn migration_on_a_current_store() {
    each_size("migration_current", false, |a, s| type_keys(a, s, "5"));
}

#[test]
fn migration_needed_on_a_format_2_store() {
    for (w, h) in SIZES {
        let dir = tempfile::tempdir().expect("tempdir");
        fixture_store(dir.path());
        let src = open(dir.path(), false);
        let mut app = app_for(&src, w, h);
        app.header.mode = OpenMode::NeedsMigration;
        app.header.format = Some(2);
        app.migration.format = Some(2);
        app.stack = vec![ankusa_ui::screens::Screen::Migration];
        app.update(Msg::Reply(
            Request::MigrationStatus,
            Ok(Reply::MigrationStatus {
                status: Status::Needed,
                holder: None,
                at: NOW,
            }),
        ));
        snap!(format!("migration_needed_{w}x{h}"), render(&app));
    }
}

/// A migration screen mid-migration at a fixed clock: `who` is None for
/// this console's own guided run, Some(pid) for `ankusa store migrate`
/// running in another process.
fn mid_migration(w: u16, h: u16, who: Option<i32>) -> App {
    let header = ankusa_ui::app::Header {
        path: std::path::PathBuf::from("/srv/ankusa/store"),
        mode: OpenMode::NeedsMigration,
        format: Some(2),
        opened_at: NOW - 60_000,
        fresh_at: NOW - 60_000,
        daemon: None,
    };
    let mut app = App::new(
        header,
        ankusa_ui::screens::migration::MigrationState::new(Some(2), true, false),
        2000,
        NOW - 5_000,
        w,
        h,
    );
    let cursor = |done: [u64; 4]| Cursor {
        phase: Phase::Dead,
        started_at: NOW - 42_000,
        done,
        total: [700_412, 50_133, 149_877, 99_578],
        last_key: Vec::new(),
    };
    let c0 = cursor([700_412, 50_133, 20_000, 0]);
    let c1 = cursor([700_412, 50_133, 61_240, 0]);
    if who.is_none() {
        app.migration.backup = Some("/srv/ankusa/store.backup-20231114T221240Z".into());
        app.migration.plan = Some(Plan {
            from: 2,
            to: 3,
            description: ankusa_store::migrate::DESCRIPTION,
            rows: c0.total,
            resume: None,
        });
        app.migration.guide = Guide::Running;
    }
    for (at, c) in [(NOW - 5_000, c0), (NOW, c1)] {
        app.update(Msg::Tick(at));
        let (req, reply) = match who {
            Some(pid) => (
                Request::MigrationStatus,
                Reply::MigrationStatus {
                    status: Status::InProgress { cursor: c },
                    holder: Some(pid),
                    at,
                },
            ),
            None => (
                Request::MigrationStep,
                Reply::Stepped {
                    cursor: c,
                    finished: false,
                },
            ),
        };
        app.update(Msg::Reply(req, Ok(reply)));
    }
    app.busy = 0;
    app
}

#[test]
fn migration_running_in_this_console() {
    for (w, h) in SIZES {
        let app = mid_migration(w, h, None);
        snap!(format!("migration_running_{w}x{h}"), render(&app));
    }
}

#[test]
fn migration_running_in_another_process() {
    for (w, h) in SIZES {
        let app = mid_migration(w, h, Some(4242));
        snap!(format!("migration_following_{w}x{h}"), render(&app));
    }
}

#[test]
fn log_pane() {
    each_size("log", false, |a, s| type_keys(a, s, "6"));
}

#[test]
fn help_overlay_read_only() {
    each_size("help_read_only", false, |a, s| type_keys(a, s, "?"));
}

#[test]
fn help_overlay_write_mode() {
    each_size("help_write", true, |a, s| type_keys(a, s, "?"));
}

#[test]
fn purge_guard_asks_for_the_tenant_name() {
    each_size("guard_purge_confirm", true, |a, s| {
        type_keys(a, s, ":tenant tenant-000002\nPtenant-0")
    });
}

#[test]
fn replay_guard_done() {
    each_size("guard_replay_done", true, |a, s| {
        type_keys(a, s, ":dlq dead-only\nR");
        type_keys(a, s, "replay\n");
    });
}

#[test]
fn the_write_mode_header_and_a_store_the_console_never_creates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope");
    let err = Feed::open(
        &ankusa_ui::data::OpenRequest {
            path: missing.clone(),
            read_only: false,
            write: true,
            token: None,
        },
        NOW,
    )
    .expect_err("a missing store must not open");
    assert!(err.to_string().contains("no such directory"), "{err}");
    assert!(!missing.exists(), "opening created the directory");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let err = Feed::open(
        &ankusa_ui::data::OpenRequest {
            path: empty.clone(),
            ..Default::default()
        },
        NOW,
    )
    .expect_err("an empty dir is not a store");
    assert!(err.to_string().contains("not an Ankusa store"), "{err}");
    assert_eq!(
        std::fs::read_dir(&empty).expect("readdir").count(),
        0,
        "opening wrote into the directory"
    );
    // The store is left as it was: no write without an action.
    let sdir = dir.path().join("s");
    fixture_store(&sdir);
    let before = Store::open_read_only(&sdir)
        .expect("ro")
        .next_seq()
        .expect("seq");
    let mut src = open(&sdir, true);
    assert_eq!(src.mode, OpenMode::Write);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    type_keys(&mut app, &mut src, "234\n56");
    let _ = app.update(Msg::Tick(NOW + 10_000));
    drop(src);
    let after = Store::open_read_only(&sdir)
        .expect("ro")
        .next_seq()
        .expect("seq");
    assert_eq!(before, after);
}

/// A store with a quarantined row (a due row that did not decode, moved
/// aside as the dispatcher does): the overview says how many and what to
/// run, and an ordinary store shows no such line.
#[test]
fn the_overview_shows_quarantined_rows() {
    use ankusa_store::{quarantine::Undecodable, queries, transitions, Batch, DecodeError};
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    {
        let store = Store::open(dir.path()).expect("open");
        let row = (1..50)
            .find_map(|ord| queries::first_due(&store, ord, queries::DueFrom::At(0)).expect("read"))
            .expect("a due row");
        // The due key's documented layout: D ord at seq sink.
        let mut key = vec![b'D'];
        key.extend_from_slice(&row.ord.to_be_bytes());
        key.extend_from_slice(&row.at.to_be_bytes());
        key.extend_from_slice(&row.seq.to_be_bytes());
        key.extend_from_slice(&row.sink.to_be_bytes());
        let bad = Undecodable {
            key,
            value: vec![0xFF],
            error: DecodeError::new("due value", "too short"),
        };
        let mut b = Batch::new();
        transitions::quarantine_due(&mut b, &bad, Some(row.size), 0);
        store.commit(b, true).expect("commit");
    }
    let mut src = open(dir.path(), false);
    let mut app = app_for(&src, 120, 30);
    start(&mut app, &mut src);
    let screen = render(&app);
    assert!(
        screen.contains("quarantined       1 rows that do not decode"),
        "{screen}"
    );

    let clean = tempfile::tempdir().expect("tempdir");
    fixture_store(clean.path());
    let mut src = open(clean.path(), false);
    let mut app = app_for(&src, 120, 30);
    start(&mut app, &mut src);
    assert!(!render(&app).contains("quarantined"));
}

/// The daemon reports a store that refuses writes: the overview says so
/// first, in red words an operator cannot miss, with how long and why; an
/// overview without a fault has no such line.
#[test]
fn the_overview_shows_a_store_write_fault() {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let mut src = open(dir.path(), false);
    let mut app = app_for(&src, 160, 30);
    start(&mut app, &mut src);
    assert!(!render(&app).contains("STORE FAULT"));
    let mut o = app.overview.clone().expect("an overview");
    o.store_fault = Some(ankusa_ops::model::StoreFault {
        since_ms: NOW - 42_000,
        error: "IO error: While open a file for appending: 000012.log: Too many open files".into(),
        failed_writes: 17,
    });
    app.update(Msg::Reply(Request::Overview, Ok(Reply::Overview(o))));
    let screen = render(&app);
    assert!(
        screen.contains(
            "STORE FAULT       writes refused for 42s (17 failed; ingest answers 503 until the daemon recovers it): IO error"
        ),
        "{screen}"
    );
}

/// Issue 33: the actions screen after a pause and a replay (one failed):
/// each action with its result, and the selected one's command line and
/// `curl`.
#[test]
fn actions_after_a_pause_and_a_replay() {
    use ankusa_ui::data::{ActionResult, ActionScope, PauseTarget};
    each_size("actions", true, |a, s| {
        let pause = ActionScope::Pause(PauseTarget {
            tenant: Some("tenant-000003".into()),
            sink: None,
        });
        let replay = ActionScope::ReplayTenant {
            ord: 2,
            tenant: "tenant-000002".into(),
        };
        let done = |scope: &ActionScope, touched| {
            Ok(Reply::Done(ActionResult {
                scope: scope.clone(),
                expected: touched,
                touched,
                note: None,
            }))
        };
        a.update(Msg::Reply(Request::Execute(pause.clone()), done(&pause, 0)));
        a.update(Msg::Reply(
            Request::Execute(replay.clone()),
            Err("the store refused the write: read-only".into()),
        ));
        a.update(Msg::Reply(
            Request::Execute(replay.clone()),
            done(&replay, 12),
        ));
        type_keys(a, s, "8");
    });
}

/// Issue 33: the tenants list's name column grows into the width there is
/// before it cuts, and a cut keeps both ends (ids alike but for their end
/// stay apart).
#[test]
fn tenants_with_long_names_use_the_width_there_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = Store::create_or_open(dir.path()).expect("create store");
        let mut alloc = ankusa_store::tenants::TenantAllocator::load(&s, 1000).expect("allocator");
        let hooks: Vec<ankusa_store::fixture::Hook> = (0..12u64)
            .map(|i| ankusa_store::fixture::Hook {
                envelope: ankusa_store::Envelope {
                    received_at: NOW - 60_000 + i,
                    source_id: "shop".into(),
                    tenant: format!("customer-europe-west-enterprise-account-{:06}", i % 4),
                    idempotency_key: None,
                    event_type: None,
                    headers: vec![],
                    body: b"{}".to_vec(),
                },
                sinks: ankusa_store::transitions::SinkSet::first(1),
                archive: false,
            })
            .collect();
        ankusa_store::fixture::ingest(&s, &mut alloc, &hooks).expect("ingest");
    }
    let mut src = open(dir.path(), false);
    for (w, h) in [(80, 24), (100, 30), (160, 48)] {
        let mut app = app_for(&src, w, h);
        start(&mut app, &mut src);
        type_keys(&mut app, &mut src, "2");
        snap!(format!("tenants_long_{w}x{h}"), render(&app));
    }
}
