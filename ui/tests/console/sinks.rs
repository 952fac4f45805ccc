//! The sinks screen, the sink detail and the guarded pause and resume: pure
//! state tests (what a refresh asks for, what `H`/`U` offer and refuse),
//! pause and resume end to end in WRITE mode through the operator core
//! (the pause in the store, the parked rows made due, the audit records),
//! and snapshots at 80×24 and 160×48, with and without a daemon's health,
//! with a paused sink.

use crate::common::*;
use ankusa_ops::access::{Peer, Principal};
use ankusa_ops::model::{SinkHealth, SinkView};
use ankusa_store::pauses::{self, Origin, Scope};
use ankusa_store::sinks::{self, SinkEntry};
use ankusa_store::{queries, tenants, Store};
use ankusa_ui::app::{App, Effect, Msg, CANNOT_ACT, STATUS_MAX};
use ankusa_ui::data::{
    ActionScope, DaemonStatus, Feed, OpenMode, Reply, Request, SinkData, SinkRef, SinksData,
};
use ankusa_ui::popups::guard::Stage;
use ankusa_ui::popups::Overlay;
use ankusa_ui::screens::sinks::failing;
use ankusa_ui::screens::Screen;

const SIZES: [(u16, u16); 3] = [(80, 24), (100, 30), (160, 48)];

/// The fixture's sources are `shop` (sinks 0 and 1) and `billing` (0).
fn catalog() -> Vec<SinkEntry> {
    // In the catalog's order (by source, length-prefixed, then position).
    vec![
        SinkEntry::live("shop", 0, "orders", "http://orders.internal:8080"),
        SinkEntry::live("shop", 1, "audit", "https://audit.example.com"),
        SinkEntry::live("billing", 0, "ledger", "http://ledger.internal:9000"),
    ]
}

/// The fixture store with the sink catalog, `billing/ledger` paused for
/// every tenant and `shop/audit` for one tenant when `paused`.
fn store_with_sinks(dir: &std::path::Path, paused: bool) {
    fixture_store(dir);
    let s = Store::open(dir).expect("open");
    sinks::replace(&s, &catalog()).expect("catalog");
    if paused {
        let who = Principal::local(&Peer::me());
        for scope in [
            Scope::sink("billing", 0),
            Scope {
                tenant: Some("tenant-000003".into()),
                ..Scope::sink("shop", 1)
            },
        ] {
            ankusa_ops::pauses::put(&s, &who, scope, Origin::Operator, NOW - 600_000)
                .expect("pause");
        }
    }
}

fn health(ok: u64, failed: u64, streak: u64, status: u16, tenants: &[&str]) -> SinkHealth {
    SinkHealth {
        inflight: 3,
        delivered_1m: ok,
        failed_1m: failed,
        last_status: Some(status),
        last_error: (status >= 400 || status == 0).then(|| {
            if status == 0 {
                "connection refused (os error 111)".to_owned()
            } else {
                format!("HTTP {status}: down for maintenance")
            }
        }),
        last_attempt_at: Some(NOW - 1_000),
        last_success_at: Some(NOW - if streak > 0 { 95_000 } else { 1_500 }),
        consecutive_failures: streak,
        latency_p50_ms: Some(12),
        latency_p99_ms: Some(480),
        failing_tenants: tenants.iter().map(|t| (*t).to_owned()).collect(),
        breaker: None,
    }
}

/// The daemon's answer for the catalog: `shop/audit` failing (503, for
/// two tenants), the others delivering; `billing/ledger` paused.
fn live_views(paused: bool) -> Vec<SinkView> {
    catalog()
        .into_iter()
        .map(|e| {
            let h = match (e.source.as_str(), e.index) {
                ("shop", 1) => health(0, 41, 41, 503, &["tenant-000003", "tenant-000006"]),
                ("billing", 0) if paused => health(0, 0, 0, 200, &[]),
                _ => health(118, 0, 0, 200, &[]),
            };
            let waiting = Some(match (e.source.as_str(), e.index) {
                ("shop", 1) => 1_204,
                ("billing", 0) if paused => 56,
                _ => 0,
            });
            SinkView {
                paused: paused && e.source == "billing",
                paused_for: if paused && e.source == "shop" && e.index == 1 {
                    vec!["tenant-000003".into()]
                } else {
                    Vec::new()
                },
                source: e.source,
                index: e.index,
                name: e.name,
                endpoint: e.endpoint,
                waiting,
                health: Some(h),
                limits: None,
            }
        })
        .collect()
}

/// FOLLOW beside a running daemon (pid 4242), data fresh at `NOW - 400`.
fn beside_a_daemon(app: &mut App) {
    app.header.mode = OpenMode::Follow { pid: 4242 };
    app.header.daemon = Some(DaemonStatus::Running(4242));
}

fn each_size(name: &str, paused: bool, setup: impl Fn(&mut App, &mut Feed)) {
    let dir = tempfile::tempdir().expect("tempdir");
    store_with_sinks(dir.path(), paused);
    let mut src = open(dir.path(), false);
    for (w, h) in SIZES {
        let mut app = app_for(&src, w, h);
        start(&mut app, &mut src);
        setup(&mut app, &mut src);
        snap!(format!("{name}_{w}x{h}"), render(&app));
    }
}

fn shop_audit() -> SinkRef {
    SinkRef {
        source: "shop".into(),
        sink: 1,
    }
}

/// The detail as the feed reads it from the store, with the daemon's
/// health put in (a test has no daemon to ask).
fn live_detail(app: &mut App, src: &mut Feed, paused: bool) {
    let key = shop_audit();
    let Ok(Reply::Sink(mut d)) = src.execute(
        &Request::Sink {
            sink: key.clone(),
            dlq_limit: 10,
        },
        NOW,
        &mut |_| {},
    ) else {
        panic!("no sink detail");
    };
    d.live = true;
    d.view = live_views(paused)
        .into_iter()
        .find(|v| v.source == key.source && v.index == key.sink);
    app.stack = vec![Screen::Sinks, Screen::Sink { sink: key.clone() }];
    app.update(Msg::Reply(
        Request::Sink {
            sink: key,
            dlq_limit: 10,
        },
        Ok(Reply::Sink(d)),
    ));
}

#[test]
fn sinks_on_a_stopped_store() {
    each_size("sinks_no_daemon", true, |a, s| type_keys(a, s, "7"));
}

#[test]
fn sinks_beside_a_daemon_one_failing_one_paused() {
    each_size("sinks_health", true, |a, s| {
        type_keys(a, s, "7");
        beside_a_daemon(a);
        a.update(Msg::Reply(
            Request::Sinks,
            Ok(Reply::Sinks(SinksData {
                sinks: live_views(true),
                live: true,
            })),
        ));
        a.sinks.sel = 1;
    });
}

/// The breaker's own words: a tripped sink reads BREAKER OPEN in the list
/// (not just PAUSED), and its detail says for how long, when it probes and
/// why it tripped.
#[test]
fn a_tripped_breaker_is_named_in_the_list_and_the_detail() {
    use ankusa_ops::model::{BreakerState, BreakerView};
    let dir = tempfile::tempdir().expect("tempdir");
    store_with_sinks(dir.path(), false);
    let mut src = open(dir.path(), false);
    let mut app = app_for(&src, 100, 30);
    start(&mut app, &mut src);
    type_keys(&mut app, &mut src, "7");
    beside_a_daemon(&mut app);
    let mut views = live_views(false);
    let tripped = views
        .iter_mut()
        .find(|v| v.source == "shop" && v.index == 1)
        .expect("shop/1");
    tripped.paused = true;
    if let Some(h) = tripped.health.as_mut() {
        h.breaker = Some(BreakerView {
            state: BreakerState::Open,
            opened_at: Some(NOW - 90_000),
            next_probe_at: Some(NOW + 30_000),
            backoff_ms: 120_000,
            trips: 2,
            reason: Some("5 consecutive failures".into()),
        });
    }
    app.update(Msg::Reply(
        Request::Sinks,
        Ok(Reply::Sinks(SinksData {
            sinks: views,
            live: true,
        })),
    ));
    let list = render(&app);
    let row = list
        .lines()
        .find(|l| l.contains("shop/audit"))
        .expect("the tripped sink's row");
    assert!(row.contains("BREAKER OPEN"), "{list}");
    let key = shop_audit();
    let Ok(Reply::Sink(mut d)) = src.execute(
        &Request::Sink {
            sink: key.clone(),
            dlq_limit: 10,
        },
        NOW,
        &mut |_| {},
    ) else {
        panic!("no sink detail");
    };
    d.live = true;
    d.view = app.sinks.data.as_ref().and_then(|l| {
        l.sinks
            .iter()
            .find(|v| v.index == 1 && v.source == "shop")
            .cloned()
    });
    app.stack = vec![Screen::Sinks, Screen::Sink { sink: key.clone() }];
    app.update(Msg::Reply(
        Request::Sink {
            sink: key,
            dlq_limit: 10,
        },
        Ok(Reply::Sink(d)),
    ));
    let detail = render(&app);
    assert!(detail.contains("BREAKER OPEN for 1m30s"), "{detail}");
    assert!(
        detail.contains("probe in 30s") && detail.contains("5 consecutive failures"),
        "{detail}"
    );
}

#[test]
fn sink_detail_on_a_stopped_store() {
    each_size("sink_detail_no_daemon", true, |a, s| {
        // billing/ledger, paused for every tenant, is the third row.
        type_keys(a, s, "7jj\n");
    });
}

#[test]
fn sink_detail_beside_a_daemon_failing() {
    each_size("sink_detail_health", true, |a, s| {
        beside_a_daemon(a);
        live_detail(a, s, true);
    });
}

#[test]
fn tenants_and_tenant_detail_carry_the_paused_badge() {
    let dir = tempfile::tempdir().expect("tempdir");
    store_with_sinks(dir.path(), false);
    {
        let s = Store::open(dir.path()).expect("open");
        let who = Principal::local(&Peer::me());
        ankusa_ops::pauses::put(
            &s,
            &who,
            Scope::tenant("dead-only"),
            Origin::Operator,
            NOW - 1,
        )
        .expect("pause");
        ankusa_ops::pauses::put(&s, &who, Scope::sink("shop", 1), Origin::Operator, NOW - 1)
            .expect("pause");
    }
    let mut src = open(dir.path(), false);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    assert_eq!(app.overview.as_ref().map(|o| o.pauses), Some(2));
    assert!(
        render(&app).contains("PAUSED 2 in force"),
        "{}",
        render(&app)
    );
    type_keys(&mut app, &mut src, "2");
    let list = render(&app);
    let row = list
        .lines()
        .find(|l| l.contains("dead-only"))
        .expect("dead-only row");
    assert!(row.contains("PAUSED"), "{list}");
    assert_eq!(
        list.matches("PAUSED").count(),
        1,
        "only the paused tenant: {list}"
    );
    type_keys(&mut app, &mut src, "j\n");
    let detail = render(&app);
    assert!(
        detail.contains("Tenant dead-only (ord 2) PAUSED"),
        "{detail}"
    );
    assert!(
        detail.contains("PAUSED: sink shop/audit; tenant dead-only"),
        "each pause named: {detail}"
    );
}

#[test]
fn a_refresh_of_the_sinks_screen_asks_for_the_sinks_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    store_with_sinks(dir.path(), false);
    let mut src = open(dir.path(), false);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    type_keys(&mut app, &mut src, "7");
    let e = app.update(Msg::Tick(NOW + 60_000));
    assert_eq!(
        e,
        vec![
            Effect::Fetch(Request::Refresh),
            Effect::Fetch(Request::Sinks)
        ]
    );
    pump(&mut app, &mut src, e);
    // Paging the in-memory list fetches nothing.
    assert!(app
        .update(code(crossterm::event::KeyCode::PageDown))
        .is_empty());
    type_keys(&mut app, &mut src, "j\n");
    assert_eq!(app.screen(), &Screen::Sink { sink: shop_audit() });
    let e = app.update(Msg::Tick(NOW + 120_000));
    assert_eq!(
        e,
        vec![
            Effect::Fetch(Request::Refresh),
            Effect::Fetch(Request::Sink {
                sink: shop_audit(),
                dlq_limit: ankusa_ui::screens::sinks::dlq_rows(24)
            })
        ]
    );
}

#[test]
fn the_detail_lists_only_its_sinks_dead_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    store_with_sinks(dir.path(), false);
    let mut src = open(dir.path(), false);
    let Ok(Reply::Sink(d)) = src.execute(
        &Request::Sink {
            sink: shop_audit(),
            dlq_limit: 1000,
        },
        NOW,
        &mut |_| {},
    ) else {
        panic!("no detail");
    };
    let s = src.store().expect("store");
    // Every dead row of shop/1, by a plain walk of the whole DLQ.
    let all = queries::dlq_page(s, None, 100_000).expect("dlq");
    let want: Vec<u64> = all
        .entries
        .iter()
        .filter(|r| r.source_id == "shop" && r.sink == 1)
        .map(|r| r.seq)
        .collect();
    assert!(!want.is_empty(), "the fixture has dead rows of shop/1");
    assert!(all.entries.len() > want.len(), "and of other sinks");
    let got: Vec<u64> = d.dlq.iter().map(|(_, r)| r.seq).collect();
    assert_eq!(got, want);
    assert!(!d.more);
    for (tenant, r) in &d.dlq {
        let name = tenants::name_of(s, r.ord).expect("name");
        assert_eq!(
            name,
            Some(tenants::Name::Live(tenant.clone())),
            "each row with its tenant"
        );
    }
    assert!(!d.live, "no daemon: no health");
}

#[test]
fn pause_and_resume_are_refused_where_the_console_cannot_act() {
    let dir = tempfile::tempdir().expect("tempdir");
    store_with_sinks(dir.path(), false);
    let mut src = open(dir.path(), false);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    for keys in ["7H", "7U", "2H", "2U"] {
        type_keys(&mut app, &mut src, keys);
        assert!(app.overlays.is_empty(), "{keys}: {:?}", app.overlays);
        assert_eq!(app.status, CANNOT_ACT, "{keys}");
    }
}

fn guard_of(app: &App) -> &ankusa_ui::popups::guard::Guard {
    match &app.overlays[..] {
        [Overlay::Guard(g)] => g,
        other => panic!("no guard: {other:?}"),
    }
}

#[test]
fn a_sink_is_paused_and_resumed_through_the_guard_and_both_are_audited() {
    let dir = tempfile::tempdir().expect("tempdir");
    store_with_sinks(dir.path(), false);
    let mut src = open(dir.path(), true);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    type_keys(&mut app, &mut src, "7j");
    // The guard opens on the exact scope, asking for SOURCE/NAME, with no
    // dry-run fetch (a pause changes no row).
    let e = app.update(key('H'));
    assert!(e.is_empty(), "{e:?}");
    let g = guard_of(&app);
    assert!(matches!(g.scope, ActionScope::Pause(_)));
    assert_eq!(g.scope.describe(), "pause sink shop/audit for every tenant");
    assert_eq!(g.scope.confirm_word(), "shop/audit");
    assert!(matches!(g.stage, Stage::Confirm { .. }));
    // The wrong word changes nothing.
    type_keys(&mut app, &mut src, "shop/1\n");
    assert!(matches!(guard_of(&app).stage, Stage::Confirm { .. }));
    assert!(app.status.contains("shop/audit"), "{}", app.status);
    assert!(pauses::list(src.store().expect("store"))
        .expect("pauses")
        .is_empty());
    for _ in 0.."shop/1".len() {
        app.update(code(crossterm::event::KeyCode::Backspace));
    }
    type_keys(&mut app, &mut src, "shop/audit\n");
    match &guard_of(&app).stage {
        Stage::Done(Ok(r)) => assert_eq!(
            r.note.as_deref(),
            Some("Paused sink shop/audit: its rows stay queued.")
        ),
        other => panic!("{other:?}"),
    }
    let s = src.store().expect("store");
    assert_eq!(
        pauses::list(s).expect("pauses")[0].scope,
        Scope::sink("shop", 1)
    );
    type_keys(&mut app, &mut src, "\n");
    assert!(app.overlays.is_empty());
    // The list shows it paused; H again is refused before any guard.
    let screen = render(&app);
    let row = screen
        .lines()
        .find(|l| l.contains("shop/audit"))
        .expect("row");
    assert!(row.contains("PAUSED"), "{screen}");
    type_keys(&mut app, &mut src, "H");
    assert!(app.overlays.is_empty());
    assert!(app.status.contains("already paused"), "{}", app.status);
    assert!(app.status.chars().count() <= STATUS_MAX);

    // Rows for the paused sink are parked (as the dispatcher parks them):
    // the resume's job makes them due and counts them.
    let s = src.store().expect("store");
    let parked = park_rows_of(s, "shop", 1);
    assert!(parked > 0, "the fixture has due rows of shop/1");
    type_keys(&mut app, &mut src, "U");
    let g = guard_of(&app);
    assert!(matches!(g.scope, ActionScope::Resume(_)));
    type_keys(&mut app, &mut src, "shop/audit\n");
    match &guard_of(&app).stage {
        Stage::Done(Ok(r)) => {
            assert_eq!(r.touched, parked);
            assert_eq!(
                r.note.as_deref(),
                Some(format!("Resumed: {parked} parked row(s) made due.").as_str())
            );
        }
        other => panic!("{other:?}"),
    }
    let s = src.store().expect("store");
    assert!(pauses::list(s).expect("pauses").is_empty());
    let audit = ankusa_store::audit::page(s, None, 20).expect("audit");
    let actions: Vec<String> = audit
        .iter()
        .filter_map(|r| {
            let v: serde_json::Value = serde_json::from_slice(&r.record).ok()?;
            Some(format!(
                "{} {}",
                v["action"].as_str()?,
                v["scope"].as_str()?
            ))
        })
        .collect();
    assert!(
        actions.iter().any(|a| a == "pause sink shop/audit"),
        "{actions:?}"
    );
    assert!(
        actions
            .iter()
            .any(|a| a.starts_with("resume sink shop/audit")),
        "{actions:?}"
    );
}

#[test]
fn a_sink_is_paused_for_one_tenant_by_command_through_the_guard() {
    let dir = tempfile::tempdir().expect("tempdir");
    store_with_sinks(dir.path(), false);
    let mut src = open(dir.path(), true);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    type_keys(&mut app, &mut src, "7j");
    type_keys(&mut app, &mut src, ":pause-for tenant-000003\n");
    let g = guard_of(&app);
    assert!(matches!(g.scope, ActionScope::Pause(_)));
    assert_eq!(
        g.scope.describe(),
        "pause sink shop/audit for tenant tenant-000003"
    );
    type_keys(&mut app, &mut src, "shop/audit\n");
    assert!(matches!(&guard_of(&app).stage, Stage::Done(Ok(_))));
    type_keys(&mut app, &mut src, "\n");
    let s = src.store().expect("store");
    assert_eq!(
        pauses::list(s).expect("pauses")[0].scope,
        Scope {
            tenant: Some("tenant-000003".into()),
            ..Scope::sink("shop", 1)
        }
    );
    // The list says so, and the same command again is refused at once.
    let screen = render(&app);
    let row = screen
        .lines()
        .find(|l| l.contains("shop/audit"))
        .expect("row");
    assert!(row.contains("paused for 1"), "{screen}");
    type_keys(&mut app, &mut src, ":pause-for tenant-000003\n");
    assert!(app.overlays.is_empty());
    assert!(app.status.contains("already paused"), "{}", app.status);
    // Resumed for that tenant through the guard; nothing left in force.
    type_keys(&mut app, &mut src, ":resume-for tenant-000003\n");
    assert!(matches!(guard_of(&app).scope, ActionScope::Resume(_)));
    type_keys(&mut app, &mut src, "shop/audit\n");
    assert!(matches!(&guard_of(&app).stage, Stage::Done(Ok(_))));
    assert!(pauses::list(src.store().expect("store"))
        .expect("pauses")
        .is_empty());
    // Elsewhere the command says where it works.
    type_keys(&mut app, &mut src, "\n1:pause-for tenant-000003\n");
    assert!(app.overlays.is_empty());
    assert!(app.status.contains("sinks screen"), "{}", app.status);
}

/// Parks every due row of `source/sink`, as the dispatcher does when it
/// meets one under a pause; returns how many.
fn park_rows_of(s: &Store, source: &str, sink: u16) -> u64 {
    let mut b = ankusa_store::Batch::new();
    let mut n = 0;
    for ord in 1..=tenants::allocated(s).expect("tenants") {
        let mut bad = Vec::new();
        let rows = queries::due_for_tenant(
            s,
            ord,
            pauses::PARKED_AT - 1,
            0,
            100_000,
            u64::MAX,
            &mut bad,
        )
        .expect("due rows");
        for r in rows.iter().filter(|r| r.sink == sink) {
            if queries::hook_source(s, r.seq).expect("source").as_deref() == Some(source) {
                ankusa_store::transitions::park(&mut b, r);
                n += 1;
            }
        }
    }
    s.commit(b, true).expect("commit");
    n
}

#[test]
fn a_tenant_is_paused_from_the_tenants_list_and_its_badge_follows() {
    let dir = tempfile::tempdir().expect("tempdir");
    store_with_sinks(dir.path(), false);
    let mut src = open(dir.path(), true);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    type_keys(&mut app, &mut src, "2jH");
    let g = guard_of(&app);
    assert_eq!(g.scope.describe(), "pause tenant dead-only");
    assert_eq!(g.scope.confirm_word(), "dead-only");
    type_keys(&mut app, &mut src, "dead-only\n\n");
    assert!(app.overlays.is_empty());
    assert_eq!(app.tenants.paused, vec!["dead-only".to_owned()]);
    // The detail says so and offers the resume.
    type_keys(&mut app, &mut src, "\nH");
    assert!(app.status.contains("already paused"), "{}", app.status);
    type_keys(&mut app, &mut src, "Udead-only\n\n");
    assert!(app.overlays.is_empty());
    assert!(app.tenant.as_ref().is_some_and(|t| t.paused.is_empty()));
    type_keys(&mut app, &mut src, "U");
    assert!(app.status.contains("not paused"), "{}", app.status);
}

#[test]
fn a_sink_fails_while_attempts_fail_since_its_last_success() {
    let mut v = live_views(false);
    assert!(failing(&v[1]), "shop/audit: 41 in a row");
    assert!(!failing(&v[0]));
    v[1].health = None;
    assert!(!failing(&v[1]), "no figures: not known to fail");
}

#[test]
fn sinks_on_an_unknown_sink_and_an_empty_catalog() {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let mut src = open(dir.path(), false);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    type_keys(&mut app, &mut src, "7");
    assert!(
        render(&app).contains("No sinks in the catalog"),
        "{}",
        render(&app)
    );
    let Ok(Reply::Sink(d)) = src.execute(
        &Request::Sink {
            sink: shop_audit(),
            dlq_limit: 5,
        },
        NOW,
        &mut |_| {},
    ) else {
        panic!("no detail");
    };
    let d: SinkData = *d;
    assert!(d.view.is_none() && d.dlq.is_empty());
}

#[test]
fn a_sinks_dlq_pages_by_cursor_to_exactly_its_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    store_with_sinks(dir.path(), false);
    let s = Store::open_read_only(dir.path()).expect("open");
    let who = Principal::local(&Peer::me());
    let all = queries::dlq_page(&s, None, 100_000).expect("dlq");
    for (sink, name) in [("shop/1", "shop/audit"), ("billing/0", "billing/ledger")] {
        let (source, index) = sink.split_once('/').expect("sink");
        let want: Vec<u64> = all
            .entries
            .iter()
            .filter(|r| r.source_id == source && r.sink.to_string() == index)
            .map(|r| r.seq)
            .collect();
        // By name or position alike, three rows a page.
        for by in [sink, name] {
            let mut got = Vec::new();
            let mut cursor: Option<String> = None;
            for _ in 0..1000 {
                let p = ankusa_ops::reads::dlq_page(
                    &s,
                    &who,
                    None,
                    queries::DlqOrder::NewestFirst,
                    cursor.as_deref(),
                    3,
                    &ankusa_ops::reads::DlqFilter {
                        sink: Some(by.to_string()),
                        event_type: None,
                    },
                )
                .expect("page");
                assert!(p.entries.len() <= 3);
                got.extend(p.entries.iter().map(|e| e.row.seq));
                cursor = p.next;
                if cursor.is_none() {
                    break;
                }
            }
            assert_eq!(got, want, "{by}");
        }
    }
    let unknown = ankusa_ops::reads::dlq_page(
        &s,
        &who,
        None,
        queries::DlqOrder::NewestFirst,
        None,
        3,
        &ankusa_ops::reads::DlqFilter {
            sink: Some("shop/nosuch".into()),
            event_type: None,
        },
    );
    assert!(matches!(unknown, Err(ankusa_ops::OpsError::NotFound(_))));
}

/// Issue 31: `:limit max_in_flight=4 rate=20/s` on the selected sink goes
/// through the guard (its name typed), runs the audited call of `ankusa
/// sinks limit set`, and the sink's detail shows the limits; `:limit
/// clear` takes them back. Bad input is refused before any guard.
#[test]
fn a_sinks_limits_are_set_and_cleared_through_the_guard() {
    use ankusa_ui::data::ActionScope;
    use ankusa_ui::popups::guard::Stage;
    use ankusa_ui::popups::Overlay;
    let guard = |app: &ankusa_ui::app::App| match app.overlays.last() {
        Some(Overlay::Guard(g)) => Some((**g).clone()),
        _ => None,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    store_with_sinks(dir.path(), false);
    let mut src = open(dir.path(), true);
    let mut app = app_for(&src, 120, 30);
    start(&mut app, &mut src);
    type_keys(&mut app, &mut src, "7");
    for (line, want) in [
        (":limit max_in_flight=0\n", "max_in_flight 0"),
        (":limit speed=4\n", "unknown field"),
        (":limit clear\n", "nothing to change"),
    ] {
        type_keys(&mut app, &mut src, line);
        assert!(guard(&app).is_none(), "{line}: a guard opened");
        assert!(app.status.contains(want), "{line}: {}", app.status);
    }
    type_keys(&mut app, &mut src, ":limit max_in_flight=4 rate=20/s\n");
    let g = guard(&app).expect("the guard opens");
    let ActionScope::SinkLimits {
        sink,
        before,
        after,
    } = g.scope.clone()
    else {
        panic!("{:?}", g.scope);
    };
    assert_eq!(before, None);
    assert_eq!(
        after.map(|l| l.to_string()).as_deref(),
        Some("max_in_flight 4, rate 20/s")
    );
    type_keys(&mut app, &mut src, &format!("{sink}\n"));
    match guard(&app).map(|g| g.stage) {
        Some(Stage::Done(Ok(r))) => {
            let note = r.note.unwrap_or_default();
            assert!(note.contains("-> max_in_flight 4, rate 20/s"), "{note}");
        }
        other => panic!("{other:?}"),
    }
    type_keys(&mut app, &mut src, "\n\n");
    let screen = render(&app);
    assert!(
        screen.contains("max_in_flight 4, rate 20/s (set at run time"),
        "{screen}"
    );
    type_keys(&mut app, &mut src, &format!(":limit clear\n{sink}\n\n"));
    drop(app);
    drop(src);
    let s = Store::open_read_only(dir.path()).expect("open");
    let who = Principal::local(&Peer::me());
    let n = ankusa_ops::jobs::audit_page(&s, &who, None, 100)
        .expect("audit")
        .records
        .iter()
        .filter(|r| r.action == "sink_limits")
        .count();
    assert_eq!(n, 2);
    let (_, limited) = ankusa_store::policy::list(&s).expect("list");
    assert!(limited.is_empty(), "{limited:?}");
}
