//! The fleet console's state and screens, without nodes: survey answers
//! are built here (one node up and draining, one up, one unreachable after
//! it answered once), so snapshots are fixed; the real nodes are in
//! tests/it/fleet_console.rs.

use std::path::Path;
use std::time::Duration;

use ankusa_ops::fleet::{Answer, Fleet, NodeFigures, NodeStatus};
use ankusa_ops::model::{DaemonInfo, NodeState, Stats, TenantsPage};
use ankusa_store::tenants::TenantInfo;
use ankusa_store::{Counters, Totals};
use ankusa_ui::data::ActionScope;
use ankusa_ui::fleet::{FleetApp, FleetEffect, FleetMsg, FleetReply, FleetRequest, FleetScreen};
use ankusa_ui::popups::guard::Stage;
use ankusa_ui::popups::Overlay;
use ankusa_ui::theme::Theme;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::common::NOW;

fn fleet() -> Fleet {
    Fleet::parse(
        Path::new("/etc/ankusa/fleet.toml"),
        "timeout = \"2s\"\n\
         [[nodes]]\nname = \"eu-1\"\nsocket = \"/run/ankusa/eu-1.sock\"\n\
         [[nodes]]\nname = \"eu-2\"\nsocket = \"/run/ankusa/eu-2.sock\"\n\
         [[nodes]]\nname = \"us-1\"\nurl = \"http://10.0.0.7:9090\"\ntoken = \"0123456789abcdef\"\n",
        Path::new("/etc/ankusa"),
    )
    .expect("fleet")
}

fn figures(id: &str, draining: bool, accepted: u64, tenants: &[(&str, i64, i64)]) -> NodeFigures {
    let mut node = Counters::default();
    let rows: Vec<TenantInfo> = tenants
        .iter()
        .enumerate()
        .map(|(i, (name, pending, dead))| {
            let c = Counters {
                pending: *pending,
                scheduled: pending / 4,
                inflight: 1,
                dead: *dead,
                bytes: pending * 700,
                archive_pending: 0,
            };
            ankusa_ops::fleet::add_counters(&mut node, &c);
            TenantInfo {
                ord: i as u32 + 1,
                id: (*name).into(),
                counters: c,
                totals: Totals::default(),
            }
        })
        .collect();
    NodeFigures {
        stats: Stats {
            store: format!("/var/lib/ankusa/{id}"),
            format: 3,
            node,
            totals: Totals {
                accepted,
                delivered: accepted / 2,
                ..Totals::default()
            },
            oldest_due_age_ms: Some(12_000),
            tenants: rows.len() as u32,
            active_tenants: rows.len() as u64,
            active_exact: true,
            daemon: Some(DaemonInfo {
                pid: 42,
                version: "0.4.0".into(),
                uptime_ms: 60_000,
                jobs_running: 0,
                store_fault: None,
            }),
        },
        state: NodeState {
            node: None,
            draining: draining.then(|| ankusa_store::node::Drain {
                since: NOW - 5_000,
                by: "local:ops".into(),
            }),
            owed: node.queued() as u64,
            dead: node.dead as u64,
            empty: node.queued() == 0,
        },
        tenants: TenantsPage {
            tenants: rows,
            next: None,
            paused: vec!["globex".into()],
            policies: Vec::new(),
        },
    }
}

fn answer(node: &str, r: Result<NodeFigures, String>) -> Answer<NodeFigures> {
    let endpoint = fleet()
        .node(node)
        .map(|n| n.transport.to_string())
        .unwrap_or_default();
    Answer {
        node: node.into(),
        endpoint,
        result: r,
        took: Duration::from_millis(3),
    }
}

/// Two surveys, 2 s apart: us-1 answers the first, not the second.
fn app(w: u16, h: u16) -> FleetApp {
    let f = fleet();
    let mut app = FleetApp::new(&f, 2_000, NOW - 3_000, w, h);
    let e = app.update(FleetMsg::Tick(NOW - 3_000));
    assert_eq!(e, vec![FleetEffect::Fetch(FleetRequest::Survey)]);
    app.update(FleetMsg::Reply(FleetReply::Survey(vec![
        answer(
            "eu-1",
            Ok(figures(
                "eu-1",
                true,
                1_000,
                &[("acme", 120, 3), ("globex", 40, 0)],
            )),
        ),
        answer(
            "eu-2",
            Ok(figures("eu-2", false, 500, &[("initech", 300, 9)])),
        ),
        answer(
            "us-1",
            Ok(figures(
                "us-1",
                false,
                10,
                &[("umbrella", 7, 1), ("acme", 2, 0)],
            )),
        ),
    ])));
    let e = app.update(FleetMsg::Tick(NOW - 1_000));
    assert_eq!(e, vec![FleetEffect::Fetch(FleetRequest::Survey)]);
    app.update(FleetMsg::Reply(FleetReply::Survey(vec![
        answer(
            "eu-1",
            Ok(figures(
                "eu-1",
                true,
                1_040,
                &[("acme", 118, 3), ("globex", 40, 0)],
            )),
        ),
        answer(
            "eu-2",
            Ok(figures("eu-2", false, 530, &[("initech", 310, 9)])),
        ),
        answer("us-1", Err("no answer within 2s".into())),
    ])));
    assert!(
        app.update(FleetMsg::Tick(NOW)).is_empty(),
        "the next survey is not due yet"
    );
    app
}

fn render(app: &FleetApp) -> String {
    crate::common::frame_text(app.width, app.height, |f| {
        ankusa_ui::fleet::view::draw(f, app, &Theme { color: false })
    })
}

fn key(app: &mut FleetApp, c: KeyCode) -> Vec<FleetEffect> {
    app.update(FleetMsg::Key(KeyEvent::new(c, KeyModifiers::NONE)))
}

fn typed(app: &mut FleetApp, s: &str) -> Vec<FleetEffect> {
    let mut out = Vec::new();
    for c in s.chars() {
        out = key(
            app,
            if c == '\n' {
                KeyCode::Enter
            } else {
                KeyCode::Char(c)
            },
        );
    }
    out
}

#[test]
fn the_nodes_screen_shows_an_unreachable_node_with_its_last_known_figures() {
    for (w, h) in [(80, 24), (120, 30)] {
        let app = app(w, h);
        assert!(matches!(
            app.view.nodes[2].2,
            NodeStatus::Unreachable { last_known: Some((_, at)), .. } if at == NOW - 3_000
        ));
        let text = render(&app);
        assert!(
            text.contains("us-1: figures 3.0s old (its last answer)"),
            "{text}"
        );
        assert!(text.contains("no answer within 2s"), "{text}");
        assert!(text.contains("2/3 up, 1 unreachable"), "{text}");
        // eu-1: (1040 - 1000) accepted over 2 s.
        assert!(text.contains("20/s"), "{text}");
        snap!(format!("fleet_nodes_{w}x{h}"), text);
    }
}

#[test]
fn the_tenants_list_merges_the_nodes_and_its_totals_are_the_answering_nodes_sums() {
    for (w, h) in [(80, 24), (120, 30)] {
        let mut app = app(w, h);
        key(&mut app, KeyCode::Char('2'));
        assert_eq!(*app.screen(), FleetScreen::Tenants);
        let (totals, up) = app.view.totals();
        assert_eq!(up, 2);
        let sum = |i: usize| match &app.view.nodes[i].2 {
            NodeStatus::Up { figures, .. } => figures.stats.node,
            other => panic!("{other:?}"),
        };
        let (a, b) = (sum(0), sum(1));
        assert_eq!(totals.pending, a.pending + b.pending);
        assert_eq!(totals.dead, a.dead + b.dead);
        assert_eq!(totals.bytes, a.bytes + b.bytes);
        let text = render(&app);
        assert!(text.contains("us-1?"), "last-known rows are marked: {text}");
        assert!(text.contains("totals, 2 of 3 nodes"), "{text}");
        assert!(text.contains("PAUSED"), "{text}");
        snap!(format!("fleet_tenants_{w}x{h}"), text);
    }
}

#[test]
fn enter_opens_a_tenant_from_every_node_holding_it_and_keys_stay_live_meanwhile() {
    let mut app = app(80, 24);
    key(&mut app, KeyCode::Char('2'));
    // Rows by pending: initech (eu-2), acme (eu-1), globex (eu-1), umbrella
    // (us-1), acme (us-1).
    let rows: Vec<(String, String)> = app
        .view
        .tenant_rows()
        .iter()
        .map(|(n, _, t, _)| ((*n).to_owned(), t.id.clone()))
        .collect();
    assert_eq!(rows[1], ("eu-1".into(), "acme".into()));
    key(&mut app, KeyCode::Char('j'));
    let e = key(&mut app, KeyCode::Enter);
    assert_eq!(
        e,
        vec![FleetEffect::Fetch(FleetRequest::Tenant {
            name: "acme".into(),
            nodes: vec!["eu-1".into(), "us-1".into()],
        })]
    );
    assert!(render(&app).contains("loading"));
    // A tick while that fetch is out still surveys: nothing waits for it.
    let e = app.update(FleetMsg::Tick(NOW + 1_500));
    assert_eq!(e.first(), Some(&FleetEffect::Fetch(FleetRequest::Survey)));
    key(&mut app, KeyCode::Char('q'));
    assert_eq!(*app.screen(), FleetScreen::Tenants);
}

#[test]
fn drain_goes_through_the_guard_to_the_node_it_names() {
    let mut app = app(80, 24);
    // eu-1 already drains: refused before any guard.
    key(&mut app, KeyCode::Char('D'));
    assert!(app.overlays.is_empty());
    assert!(app.status.contains("already draining"), "{}", app.status);
    // us-1 does not answer: nothing to send it.
    key(&mut app, KeyCode::Char('G'));
    key(&mut app, KeyCode::Char('D'));
    assert!(app.overlays.is_empty());
    assert!(app.status.contains("not answering"), "{}", app.status);
    // eu-2: the guard, naming the node; its name confirms.
    key(&mut app, KeyCode::Char('k'));
    assert!(key(&mut app, KeyCode::Char('D')).is_empty());
    let scope = ActionScope::Drain {
        on: true,
        node: Some("eu-2".into()),
    };
    assert!(matches!(app.overlays.last(), Some(Overlay::Guard(g)) if g.scope == scope));
    let text = render(&app);
    assert!(text.contains("On node: eu-2"), "{text}");
    assert!(
        typed(&mut app, "eu-1\n").is_empty(),
        "a wrong name runs nothing"
    );
    assert!(app.status.contains("\"eu-2\""), "{}", app.status);
    for _ in 0..4 {
        key(&mut app, KeyCode::Backspace);
    }
    let e = typed(&mut app, "eu-2\n");
    assert_eq!(
        e,
        vec![FleetEffect::Fetch(FleetRequest::Execute {
            node: "eu-2".into(),
            scope: scope.clone(),
        })]
    );
    app.update(FleetMsg::Reply(FleetReply::Done(Ok(
        ankusa_ui::data::ActionResult {
            scope,
            expected: 0,
            touched: 0,
            note: Some("node eu-2 drains".into()),
        },
    ))));
    assert!(
        matches!(app.overlays.last(), Some(Overlay::Guard(g)) if matches!(g.stage, Stage::Done(Ok(_))))
    );
    let e = key(&mut app, KeyCode::Enter);
    assert!(app.overlays.is_empty());
    assert_eq!(e, vec![FleetEffect::Fetch(FleetRequest::Survey)]);
}

#[test]
fn a_tenant_is_paused_on_the_node_of_its_row() {
    let mut app = app(80, 24);
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('G'));
    assert_eq!(
        app.selected_tenant(),
        Some(("us-1".into(), "acme".into(), false))
    );
    key(&mut app, KeyCode::Char('H'));
    let e = typed(&mut app, "acme\n");
    match e.as_slice() {
        [FleetEffect::Fetch(FleetRequest::Execute {
            node,
            scope: ActionScope::Pause(t),
        })] => {
            assert_eq!(node, "us-1");
            assert_eq!(t.tenant.as_deref(), Some("acme"));
        }
        other => panic!("{other:?}"),
    }
    // Running: Esc cannot interrupt it; its result closes with Enter.
    key(&mut app, KeyCode::Esc);
    assert!(
        app.status.contains("cannot be interrupted"),
        "{}",
        app.status
    );
    app.update(FleetMsg::Reply(FleetReply::Done(Err("refused".into()))));
    key(&mut app, KeyCode::Enter);
    assert!(app.overlays.is_empty());
    // globex on eu-1 is paused already: H refuses at once.
    key(&mut app, KeyCode::Char('g'));
    key(&mut app, KeyCode::Char('j'));
    key(&mut app, KeyCode::Char('j'));
    assert_eq!(
        app.selected_tenant(),
        Some(("eu-1".into(), "globex".into(), true))
    );
    key(&mut app, KeyCode::Char('H'));
    assert!(app.overlays.is_empty());
    assert!(
        app.status.contains("already paused on eu-1"),
        "{}",
        app.status
    );
}

#[test]
fn nothing_piles_up_while_a_survey_is_outstanding() {
    let mut app = app(80, 24);
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Enter);
    let tenant = FleetEffect::Fetch(FleetRequest::Tenant {
        name: "initech".into(),
        nodes: vec!["eu-2".into()],
    });
    // Due: the survey and the open tenant again.
    let e = app.update(FleetMsg::Tick(NOW + 1_500));
    assert_eq!(
        e,
        vec![FleetEffect::Fetch(FleetRequest::Survey), tenant.clone()]
    );
    // A hung node holds that survey: due ticks send nothing more, not even
    // the tenant, and `r` sends no second survey.
    assert!(app.update(FleetMsg::Tick(NOW + 4_000)).is_empty());
    assert!(app.update(FleetMsg::Tick(NOW + 9_000)).is_empty());
    assert_eq!(key(&mut app, KeyCode::Char('r')), vec![tenant.clone()]);
    // Keys still move meanwhile.
    key(&mut app, KeyCode::Char('q'));
    assert_eq!(*app.screen(), FleetScreen::Tenants);
    // Once it is answered, the next due tick surveys again.
    app.update(FleetMsg::Reply(FleetReply::Survey(vec![answer(
        "us-1",
        Err("no answer within 2s".into()),
    )])));
    assert_eq!(
        app.update(FleetMsg::Tick(NOW + 12_000)),
        vec![FleetEffect::Fetch(FleetRequest::Survey)]
    );
}

#[test]
fn a_tenant_shows_every_node_holding_it_and_an_unreachable_one_says_so() {
    use ankusa_ops::fleet::TenantOnNode;
    use ankusa_ops::model::{DlqEntry, TenantDetail};

    let mut app = app(80, 24);
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('j'));
    let e = key(&mut app, KeyCode::Enter);
    assert_eq!(
        e,
        vec![FleetEffect::Fetch(FleetRequest::Tenant {
            name: "acme".into(),
            nodes: vec!["eu-1".into(), "us-1".into()],
        })]
    );
    let detail = TenantDetail {
        tenant: "acme".into(),
        ord: 1,
        counters: Counters {
            pending: 118,
            scheduled: 29,
            inflight: 1,
            dead: 3,
            bytes: 82_600,
            archive_pending: 0,
        },
        totals: Totals::default(),
        first_due_at: Some(NOW - 12_000),
        oldest_due_age_ms: Some(12_000),
        latest_dead: Vec::new(),
        paused: Vec::new(),
        policy: None,
    };
    let dead = |seq: u64| DlqEntry {
        tenant: "acme".into(),
        sink_name: "hooks/billing".into(),
        row: ankusa_store::rows::DeadRow {
            ord: 1,
            at: NOW - 60_000 * seq,
            seq,
            sink: 0,
            source_id: "hooks".into(),
            hook_id: format!("hk_eu-1_{seq:016x}"),
            event_type: None,
        },
    };
    let endpoint = |n: &str| {
        fleet()
            .node(n)
            .map(|n| n.transport.to_string())
            .unwrap_or_default()
    };
    app.update(FleetMsg::Reply(FleetReply::Tenant {
        name: "acme".into(),
        answers: vec![
            Answer {
                node: "eu-1".into(),
                endpoint: endpoint("eu-1"),
                result: Ok(TenantOnNode {
                    detail,
                    dlq: vec![dead(1), dead(2), dead(3)],
                    more: false,
                }),
                took: Duration::from_millis(2),
            },
            Answer {
                node: "us-1".into(),
                endpoint: endpoint("us-1"),
                result: Err("no answer within 2s".into()),
                took: Duration::from_secs(2),
            },
        ],
    }));
    let text = render(&app);
    assert!(text.contains("Tenant acme (actions on eu-1)"), "{text}");
    assert!(text.contains("hk_eu-1_0000000000000003"), "{text}");
    assert!(text.contains("unreachable: no answer within 2s"), "{text}");
    snap!("fleet_tenant_80x24", text);
}
