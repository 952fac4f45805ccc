//! Pure state-update tests: key sequences and replies in, state and effects
//! out. No terminal and no store.

use std::path::PathBuf;

use ankusa_store::counters::Field;
use ankusa_store::queries::{DlqCursor, DlqPage};
use ankusa_store::rows::DeadRow;
use ankusa_store::tenants::TenantInfo;
use ankusa_store::Counters;
use ankusa_ui::app::{App, Effect, Header, Msg};
use ankusa_ui::data::{
    ActionResult, ActionScope, DlqData, OpenMode, Reply, Request, TenantsData, TenantsQuery,
};
use ankusa_ui::keymap::{self, KEYMAP};
use ankusa_ui::popups::guard::Stage;
use ankusa_ui::popups::Overlay;
use ankusa_ui::screens::migration::MigrationState;
use ankusa_ui::screens::Screen;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const NOW: u64 = 1_700_000_000_000;

fn app(mode: OpenMode) -> App {
    let header = Header {
        path: PathBuf::from("/s"),
        mode,
        format: Some(3),
        opened_at: NOW,
        fresh_at: NOW,
        daemon: None,
    };
    App::new(header, MigrationState::default(), 2000, NOW, 80, 24)
}

fn k(c: char) -> Msg {
    Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

fn kc(c: KeyCode) -> Msg {
    Msg::Key(KeyEvent::new(c, KeyModifiers::NONE))
}

fn keys(a: &mut App, s: &str) -> Vec<Effect> {
    let mut out = Vec::new();
    for c in s.chars() {
        out.extend(a.update(match c {
            '\n' => kc(KeyCode::Enter),
            '\x1b' => kc(KeyCode::Esc),
            c => k(c),
        }));
    }
    out
}

fn fetches(e: &[Effect]) -> Vec<&Request> {
    e.iter()
        .filter_map(|e| match e {
            Effect::Fetch(r) => Some(r),
            Effect::Copy(_) | Effect::Quit => None,
        })
        .collect()
}

fn tenant(ord: u32, id: &str, dead: i64) -> TenantInfo {
    TenantInfo {
        ord,
        id: id.into(),
        counters: Counters {
            dead,
            ..Counters::default()
        },
        totals: Default::default(),
    }
}

fn dead(ord: u32, at: u64, seq: u64) -> DeadRow {
    DeadRow {
        ord,
        at,
        seq,
        sink: 0,
        source_id: "s".into(),
        hook_id: format!("hk_{seq:016x}"),
        event_type: None,
    }
}

/// Answers every fetch with a reply (or an error) so `busy` drains.
fn answer(
    a: &mut App,
    e: Vec<Effect>,
    mut f: impl FnMut(&Request) -> Option<Reply>,
) -> Vec<Effect> {
    let mut out = Vec::new();
    for r in fetches(&e).into_iter().cloned().collect::<Vec<_>>() {
        let reply = f(&r).ok_or_else(|| "unanswered".to_owned());
        out.extend(a.update(Msg::Reply(r, reply)));
    }
    out
}

#[test]
fn the_first_tick_refreshes_and_a_slow_refresh_is_not_piled_up() {
    let mut a = app(OpenMode::ReadOnly);
    let e = a.update(Msg::Tick(NOW));
    assert_eq!(fetches(&e), [&Request::Refresh, &Request::Overview]);
    assert_eq!(a.busy, 2);
    // The store is slow: ticks past the refresh interval send nothing more.
    assert!(a.update(Msg::Tick(NOW + 5_000)).is_empty());
    assert!(a.update(Msg::Tick(NOW + 60_000)).is_empty());
    // Input still works while waiting.
    keys(&mut a, "?");
    assert_eq!(a.overlays, [Overlay::Help(0)]);
    keys(&mut a, "\x1b");
    answer(&mut a, e, |_| None);
    assert_eq!(a.busy, 0);
    assert!(!a.update(Msg::Tick(NOW + 61_000)).is_empty());
    // Not again before the interval.
    assert!(a.update(Msg::Tick(NOW + 61_500)).is_empty() || a.busy > 0);
}

#[test]
fn navigation_keys_move_within_the_page_and_enter_opens_a_tenant() {
    let mut a = app(OpenMode::ReadOnly);
    let e = keys(&mut a, "2");
    assert_eq!(*a.screen(), Screen::Tenants);
    let rows: Vec<TenantInfo> = (1..=5).map(|i| tenant(i, &format!("t{i}"), 0)).collect();
    answer(&mut a, e, |r| match r {
        Request::Tenants(q) => Some(Reply::Tenants(TenantsData {
            query: q.clone(),
            rows: rows.clone(),
            next: None,
            total: 5,
            paused: vec![],
            policies: vec![],
        })),
        _ => None,
    });
    keys(&mut a, "jjjjjjjj");
    assert_eq!(a.tenants.sel, 4, "j stops at the last row");
    keys(&mut a, "kk");
    assert_eq!(a.tenants.sel, 2);
    a.update(kc(KeyCode::Up));
    assert_eq!(a.tenants.sel, 1);
    keys(&mut a, "G");
    assert_eq!(a.tenants.sel, 4);
    keys(&mut a, "g");
    assert_eq!(a.tenants.sel, 0);
    keys(&mut a, "j");
    let e = keys(&mut a, "\n");
    assert_eq!(*a.screen(), Screen::Tenant { ord: 2 });
    assert!(matches!(fetches(&e)[..], [Request::Tenant { ord: 2, .. }]));
    // q goes back, then quits from the top screen.
    keys(&mut a, "q");
    assert_eq!(*a.screen(), Screen::Tenants);
    let e = keys(&mut a, "q");
    assert_eq!(e, [Effect::Quit]);
    assert!(a.quit);
}

#[test]
fn paging_the_dlq_follows_cursors_forward_and_back() {
    let mut a = app(OpenMode::ReadOnly);
    let e = keys(&mut a, "4");
    let page = |cursor: Option<DlqCursor>| DlqData {
        ord: None,
        event_type: None,
        order: Default::default(),
        cursor,
        page: DlqPage {
            entries: vec![dead(1, NOW - 10, 9), dead(1, NOW - 20, 8)],
            next: Some(DlqCursor {
                at: NOW - 20,
                seq: 8,
                sink: 0,
            }),
        },
        names: vec![(1, "acme".into())],
        total: 100,
        sinks: vec![],
    };
    answer(&mut a, e, |r| match r {
        Request::Dlq { cursor, .. } => Some(Reply::Dlq(page(*cursor))),
        _ => None,
    });
    let e = a.update(kc(KeyCode::PageDown));
    match fetches(&e)[..] {
        [Request::Dlq {
            cursor: Some(c),
            ord: None,
            ..
        }] => assert_eq!(c.seq, 8),
        ref other => panic!("{other:?}"),
    }
    answer(&mut a, e, |r| match r {
        Request::Dlq { cursor, .. } => Some(Reply::Dlq(page(*cursor))),
        _ => None,
    });
    let e = a.update(kc(KeyCode::PageUp));
    assert!(matches!(
        fetches(&e)[..],
        [Request::Dlq { cursor: None, .. }]
    ));
}

#[test]
fn colon_commands_resolve_a_tenant_then_open_its_dlq() {
    let mut a = app(OpenMode::ReadOnly);
    let e = keys(&mut a, ":dlq acme\n");
    assert_eq!(
        fetches(&e),
        [&Request::TenantByName {
            name: "acme".into(),
            dlq: true
        }]
    );
    let e = answer(&mut a, e, |_| {
        Some(Reply::TenantByName("acme".into(), Some(7)))
    });
    assert_eq!(
        *a.screen(),
        Screen::Dlq {
            ord: Some(7),
            name: Some("acme".into())
        }
    );
    assert!(matches!(
        fetches(&e)[..],
        [Request::Dlq { ord: Some(7), .. }]
    ));
    // Unknown names say so.
    let e = keys(&mut a, ":tenant nobody\n");
    answer(&mut a, e, |_| {
        Some(Reply::TenantByName("nobody".into(), None))
    });
    assert!(a.status.contains("no tenant named"), "{}", a.status);
    keys(&mut a, ":bogus\n");
    assert!(a.status.contains("unknown command"));
}

#[test]
fn filter_and_sort_ask_for_the_right_reads() {
    let mut a = app(OpenMode::ReadOnly);
    let e = keys(&mut a, "2");
    answer(&mut a, e, |_| None);
    let e = keys(&mut a, "/acme\n");
    match fetches(&e)[..] {
        [Request::Tenants(TenantsQuery {
            filter,
            after: None,
            ..
        })] => assert_eq!(filter, "acme"),
        ref other => panic!("{other:?}"),
    }
    answer(&mut a, e, |_| None);
    // The first sort key ranks once...
    let e = keys(&mut a, "s");
    assert!(matches!(
        fetches(&e)[..],
        [Request::Rank {
            field: Field::Pending,
            ..
        }]
    ));
    let ranked = vec![
        tenant(3, "acme-big", 9),
        tenant(4, "other", 5),
        tenant(5, "acme-small", 1),
    ];
    answer(&mut a, e, |r| match r {
        Request::Rank { field, .. } => Some(Reply::Ranked {
            field: *field,
            rows: ranked.clone(),
            paused: vec![],
            policies: vec![],
            at: NOW,
        }),
        _ => None,
    });
    // ...the filter applies to the ranking...
    let ids: Vec<&str> = a.tenant_rows().iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["acme-big", "acme-small"]);
    // ...and a refresh re-reads only the visible rows' counters.
    let e = a.update(Msg::Tick(NOW + 10_000));
    assert_eq!(
        fetches(&e),
        [&Request::Refresh, &Request::CountersOf(vec![3, 5])]
    );
}

#[test]
fn guarded_actions_are_hidden_when_the_console_cannot_act() {
    for mode in [OpenMode::ReadOnly, OpenMode::NeedsMigration] {
        let mut a = app(mode);
        a.stack.push(Screen::Tenant { ord: 3 });
        a.tenant = Some(ankusa_ui::data::TenantData {
            ord: 3,
            name: "acme".into(),
            counters: Counters::default(),
            totals: Default::default(),
            first_due: None,
            heat: vec![],
            dlq: DlqPage {
                entries: vec![],
                next: None,
            },
            paused: vec![],
            policy: None,
        });
        for c in ['P', 'A'] {
            let e = keys(&mut a, &c.to_string());
            assert!(e.is_empty(), "{c} in {:?} must do nothing", a.header.mode);
            assert!(a.overlays.is_empty());
            assert_eq!(a.status, ankusa_ui::app::CANNOT_ACT);
            assert!(a.status.contains("--write"), "{}", a.status);
        }
        let help: Vec<String> = keymap::help_lines(false)
            .into_iter()
            .map(|(_, l)| l)
            .collect();
        assert!(
            !help.iter().any(|l| l.contains("purge this tenant")),
            "help lists a write action"
        );
        assert!(help.iter().any(|l| l.contains("admin API")));
    }
}

#[test]
fn beside_a_daemon_actions_go_through_it() {
    let mut a = app(OpenMode::Follow { pid: 42 });
    assert!(a.can_act());
    a.stack.push(Screen::Tenant { ord: 3 });
    a.tenant = Some(ankusa_ui::data::TenantData {
        ord: 3,
        name: "acme".into(),
        counters: Counters::default(),
        totals: Default::default(),
        first_due: None,
        heat: vec![],
        dlq: DlqPage {
            entries: vec![],
            next: None,
        },
        paused: vec![],
        policy: None,
    });
    let e = keys(&mut a, "A");
    assert!(
        matches!(
            fetches(&e)[..],
            [Request::DryRun(ActionScope::ReplayTenant { ord: 3, .. })]
        ),
        "{e:?}"
    );
    // A read-only snapshot has no daemon to act through.
    assert!(!app(OpenMode::ReadOnly).can_act());
}

#[test]
fn purge_goes_through_dry_run_typed_name_progress_and_result() {
    let mut a = app(OpenMode::Write);
    a.stack.push(Screen::Tenant { ord: 3 });
    a.tenant = Some(ankusa_ui::data::TenantData {
        ord: 3,
        name: "acme".into(),
        counters: Counters::default(),
        totals: Default::default(),
        first_due: None,
        heat: vec![],
        dlq: DlqPage {
            entries: vec![],
            next: None,
        },
        paused: vec![],
        policy: None,
    });
    let e = keys(&mut a, "P");
    let scope = match fetches(&e)[..] {
        [Request::DryRun(s @ ActionScope::Purge { ord: 3, .. })] => s.clone(),
        ref other => panic!("{other:?}"),
    };
    answer(&mut a, e, |_| Some(Reply::DryRun(scope.clone(), 12)));
    assert!(
        matches!(&a.overlays[..], [Overlay::Guard(g)] if g.stage == Stage::Confirm { count: 12, typed: String::new() })
    );
    // A wrong name does not run anything.
    let e = keys(&mut a, "acm\n");
    assert!(fetches(&e).is_empty());
    assert!(a.status.contains("exactly"));
    // Esc at this stage cancels.
    let mut cancelled = a.clone();
    keys(&mut cancelled, "\x1b");
    assert!(cancelled.overlays.is_empty());
    // The right name runs it.
    let e = keys(&mut a, "e\n");
    assert_eq!(fetches(&e), [&Request::Execute(scope.clone())]);
    a.update(Msg::Progress(ankusa_ui::data::Progress {
        done: 5,
        total: 12,
    }));
    assert!(
        matches!(&a.overlays[..], [Overlay::Guard(g)] if matches!(g.stage, Stage::Running(p) if p.done == 5))
    );
    // Keys cannot interrupt a running action.
    keys(&mut a, "\x1b");
    assert_eq!(a.overlays.len(), 1);
    answer(&mut a, e, |_| {
        Some(Reply::Done(ActionResult {
            scope: scope.clone(),
            expected: 12,
            touched: 12,
            note: None,
        }))
    });
    assert!(
        matches!(&a.overlays[..], [Overlay::Guard(g)] if matches!(&g.stage, Stage::Done(Ok(r)) if r.touched == 12))
    );
    let e = keys(&mut a, "\n");
    assert!(a.overlays.is_empty());
    assert!(
        fetches(&e).contains(&&Request::Refresh),
        "closing the result refreshes"
    );
}

#[test]
fn tab_in_the_purge_dialog_changes_the_kinds_and_counts_again() {
    let mut a = app(OpenMode::Write);
    a.stack.push(Screen::Tenant { ord: 3 });
    a.tenant = Some(ankusa_ui::data::TenantData {
        ord: 3,
        name: "acme".into(),
        counters: Counters::default(),
        totals: Default::default(),
        first_due: None,
        heat: vec![],
        dlq: DlqPage {
            entries: vec![],
            next: None,
        },
        paused: vec![],
        policy: None,
    });
    let e = keys(&mut a, "P");
    answer(&mut a, e, |r| match r {
        Request::DryRun(s) => Some(Reply::DryRun(s.clone(), 3)),
        _ => None,
    });
    let e = a.update(kc(KeyCode::Tab));
    match fetches(&e)[..] {
        [Request::DryRun(ActionScope::Purge { kinds, .. })] => {
            assert!(kinds.pending && !kinds.dead)
        }
        ref other => panic!("{other:?}"),
    }
}

#[test]
fn o_turns_the_dlq_to_oldest_first_from_its_first_page() {
    let mut a = app(OpenMode::ReadOnly);
    keys(&mut a, "4");
    a.dlq.pages.at = Some(DlqCursor {
        at: NOW - 20,
        seq: 8,
        sink: 0,
    });
    a.dlq.pages.back = vec![None];
    let e = keys(&mut a, "o");
    assert_eq!(
        fetches(&e),
        [&Request::Dlq {
            ord: None,
            cursor: None,
            limit: a.list_rows(),
            order: ankusa_store::queries::DlqOrder::OldestFirst,
            event_type: None,
        }]
    );
    assert!(a.dlq.pages.back.is_empty());
    // A page of the other order arriving late is not shown.
    let stale = DlqData {
        ord: None,
        event_type: None,
        order: ankusa_store::queries::DlqOrder::NewestFirst,
        cursor: None,
        page: DlqPage {
            entries: vec![dead(1, NOW - 10, 9)],
            next: None,
        },
        names: vec![(1, "acme".into())],
        total: 1,
        sinks: vec![],
    };
    a.update(Msg::Reply(
        Request::Dlq {
            ord: None,
            cursor: None,
            limit: 20,
            order: ankusa_store::queries::DlqOrder::NewestFirst,
            event_type: None,
        },
        Ok(Reply::Dlq(stale)),
    ));
    assert!(a.dlq.data.is_none());
    let e = keys(&mut a, "o");
    assert!(matches!(
        fetches(&e)[..],
        [Request::Dlq {
            order: ankusa_store::queries::DlqOrder::NewestFirst,
            ..
        }]
    ));
}

#[test]
fn marked_dlq_rows_are_the_replay_scope() {
    let mut a = app(OpenMode::Write);
    let e = keys(&mut a, "4");
    answer(&mut a, e, |r| match r {
        Request::Dlq { cursor, order, .. } => Some(Reply::Dlq(DlqData {
            ord: None,
            event_type: None,
            order: *order,
            cursor: *cursor,
            page: DlqPage {
                entries: vec![
                    dead(1, NOW - 1, 3),
                    dead(2, NOW - 2, 2),
                    dead(1, NOW - 3, 1),
                ],
                next: None,
            },
            names: vec![],
            total: 3,
            sinks: vec![],
        })),
        _ => None,
    });
    keys(&mut a, "xjx");
    assert_eq!(a.dlq.marked.len(), 2);
    let e = keys(&mut a, "R");
    match fetches(&e)[..] {
        [Request::DryRun(ActionScope::ReplayRows { rows, .. })] => {
            let seqs: Vec<u64> = rows.iter().map(|r| r.seq).collect();
            assert_eq!(seqs, [3, 1]);
        }
        ref other => panic!("{other:?}"),
    }
}

#[test]
fn zoom_stays_within_one_second_and_one_hour() {
    let mut a = app(OpenMode::ReadOnly);
    keys(&mut a, "3");
    keys(&mut a, "++++");
    assert_eq!(a.heat_spec().bucket_ms, 1_000);
    keys(&mut a, "----------");
    assert_eq!(a.heat_spec().bucket_ms, 3_600_000);
    keys(&mut a, "+");
    assert_eq!(a.heat_spec().bucket_ms, 900_000);
}

#[test]
fn help_is_generated_from_every_binding_in_the_keymap() {
    let help: Vec<String> = keymap::help_lines(true)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    for b in KEYMAP {
        assert!(
            help.iter()
                .any(|l| l.contains(b.label) && l.contains(b.help)),
            "{} missing from help",
            b.label
        );
        for key in b.keys {
            let ev = match key {
                keymap::Key::Char(c) => KeyEvent::new(KeyCode::Char(*c), KeyModifiers::NONE),
                keymap::Key::Code(c) => KeyEvent::new(*c, KeyModifiers::NONE),
            };
            assert_eq!(
                keymap::lookup(&ev),
                Some(b.action),
                "{key:?} does not do what help says"
            );
        }
    }
}

#[test]
fn resize_refetches_with_the_new_page_size() {
    let mut a = app(OpenMode::ReadOnly);
    keys(&mut a, "2");
    let e = a.update(Msg::Resize(160, 48));
    match fetches(&e)[..] {
        [Request::Tenants(q)] => assert_eq!(q.limit, 42),
        ref other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------
// The migration screen.

use ankusa_store::migrate::{Cursor, Phase, Plan, Status};
use ankusa_ui::screens::migration::{backup_path, Guide};

fn needs_migration() -> App {
    let header = Header {
        path: PathBuf::from("/srv/ankusa/store"),
        mode: OpenMode::NeedsMigration,
        format: Some(2),
        opened_at: NOW,
        fresh_at: NOW,
        daemon: None,
    };
    App::new(
        header,
        MigrationState::new(Some(2), false, false),
        2000,
        NOW,
        80,
        24,
    )
}

fn cursor(phase: Phase, done: [u64; 4]) -> Cursor {
    Cursor {
        phase,
        started_at: NOW - 60_000,
        done,
        total: [6_000, 1_000, 2_000, 1_000],
        last_key: Vec::new(),
    }
}

fn status(a: &mut App, at: u64, s: Status, holder: Option<i32>) {
    a.update(Msg::Tick(at));
    a.update(Msg::Reply(
        Request::MigrationStatus,
        Ok(Reply::MigrationStatus {
            status: s,
            holder,
            at,
        }),
    ));
}

#[test]
fn the_migration_screen_polls_the_status_and_follows_another_process() {
    let mut a = needs_migration();
    assert_eq!(
        *a.screen(),
        Screen::Migration,
        "a format 2 store opens here"
    );
    let e = a.update(Msg::Tick(NOW));
    assert_eq!(
        fetches(&e),
        [&Request::Refresh, &Request::MigrationStatus],
        "each refresh polls the status"
    );
    a.update(Msg::Reply(
        Request::Refresh,
        Ok(Reply::Refreshed(ankusa_ui::data::DaemonStatus::Running(77))),
    ));
    // `ankusa store migrate` (pid 77) moves 4,000 rows in 2 s.
    let c0 = cursor(Phase::Due, [1_000, 0, 0, 0]);
    a.update(Msg::Reply(
        Request::MigrationStatus,
        Ok(Reply::MigrationStatus {
            status: Status::InProgress { cursor: c0 },
            holder: Some(77),
            at: NOW,
        }),
    ));
    assert_eq!(a.migration.rate_per_s(), None, "one sample has no rate");
    status(
        &mut a,
        NOW + 2_000,
        Status::InProgress {
            cursor: cursor(Phase::Due, [5_000, 0, 0, 0]),
        },
        Some(77),
    );
    assert_eq!(a.migration.rate_per_s(), Some(2_000.0));
    // 5,000 of 10,000 left at 2,000 rows/s.
    assert_eq!(a.migration.eta_ms(), Some(2_500));
    assert!(a.migration.migrating);
    // Another process holds the store: the guided path is refused.
    assert!(!a.migration.can_guide());
    let e = keys(&mut a, "M");
    assert!(fetches(&e).is_empty());
    assert!(a.status.contains("pid 77 holds the store"), "{}", a.status);
    assert!(a.overlays.is_empty());
    // It finishes: the screen says so and nothing is offered.
    status(&mut a, NOW + 4_000, Status::Done, None);
    assert_eq!(a.migration.format, Some(3));
    assert!(!a.migration.can_guide());
}

#[test]
fn the_rate_uses_recent_samples_and_restarts_on_a_new_migration() {
    let mut m = MigrationState::new(Some(2), true, false);
    for i in 0..30u64 {
        // 1,000 rows/s for 30 s, sampled every second.
        m.sample(NOW + i * 1_000, i * 1_000);
    }
    assert_eq!(m.rate_per_s(), Some(1_000.0));
    assert!(
        m.samples.first().map(|s| s.0) >= Some(NOW + 29_000 - 10_000 - 1_000),
        "only about the last 10 s are kept: {:?}",
        m.samples.first()
    );
    // Faster now: the window follows within 10 s.
    for i in 30..45u64 {
        m.sample(NOW + i * 1_000, 29_000 + (i - 29) * 3_000);
    }
    assert_eq!(m.rate_per_s(), Some(3_000.0));
    // A count going down is a new migration (a restored backup).
    m.sample(NOW + 46_000, 10);
    assert_eq!(m.samples, [(NOW + 46_000, 10)]);
    assert_eq!(m.rate_per_s(), None);
}

#[test]
fn the_guided_path_backs_up_plans_confirms_steps_pauses_resumes_and_checks() {
    let mut a = needs_migration();
    status(&mut a, NOW, Status::Needed, None);
    assert!(a.migration.can_guide());
    // 1. Backup into a new sibling directory named after the time.
    let e = keys(&mut a, "b");
    let out = backup_path(&PathBuf::from("/srv/ankusa/store"), NOW);
    assert_eq!(
        out,
        PathBuf::from("/srv/ankusa/store.backup-20231114T221320Z")
    );
    assert_eq!(
        fetches(&e),
        [&Request::MigrationBackup { out: out.clone() }]
    );
    assert_eq!(a.migration.guide, Guide::BackingUp(out.clone()));
    a.update(Msg::Reply(
        Request::MigrationBackup { out: out.clone() },
        Ok(Reply::BackedUp(out.clone())),
    ));
    assert_eq!(a.migration.backup, Some(out));
    // 2. Dry run.
    let e = keys(&mut a, "n");
    assert_eq!(fetches(&e), [&Request::MigrationPlan]);
    let plan = Plan {
        from: 2,
        to: 3,
        description: ankusa_store::migrate::DESCRIPTION,
        rows: [6_000, 1_000, 2_000, 1_000],
        resume: None,
    };
    a.update(Msg::Reply(
        Request::MigrationPlan,
        Ok(Reply::Plan(plan.clone())),
    ));
    assert_eq!(a.migration.plan, Some(plan));
    // 3. Migrate: dry-run count, then the typed word.
    let e = keys(&mut a, "M");
    assert_eq!(fetches(&e), [&Request::DryRun(ActionScope::Migrate)]);
    a.update(Msg::Reply(
        Request::DryRun(ActionScope::Migrate),
        Ok(Reply::DryRun(ActionScope::Migrate, 10_000)),
    ));
    assert!(matches!(
        a.overlays.last(),
        Some(Overlay::Guard(g)) if g.stage == Stage::Confirm { count: 10_000, typed: String::new() }
    ));
    let e = keys(&mut a, "yes\n");
    assert!(fetches(&e).is_empty(), "a wrong word runs nothing");
    assert!(a.status.contains("\"migrate\""));
    for _ in 0..3 {
        a.update(kc(KeyCode::Backspace));
    }
    let e = keys(&mut a, "migrate\n");
    assert_eq!(fetches(&e), [&Request::MigrationStep]);
    assert!(a.overlays.is_empty());
    assert_eq!(a.migration.guide, Guide::Running);
    // While it runs, refreshes do not poll (the steps report).
    assert!(a.screen_requests().is_empty());
    // Each step's reply asks for the next.
    let e = a.update(Msg::Reply(
        Request::MigrationStep,
        Ok(Reply::Stepped {
            cursor: cursor(Phase::Due, [4_096, 0, 0, 0]),
            finished: false,
        }),
    ));
    assert_eq!(fetches(&e), [&Request::MigrationStep]);
    assert_eq!(
        a.migration.cursor.as_ref().map(Cursor::rows_done),
        Some(4_096)
    );
    // Esc pauses (it does not quit mid-migration); the step under way ends.
    let e = keys(&mut a, "\x1b");
    assert!(e.is_empty() && !a.quit);
    assert_eq!(a.migration.guide, Guide::Pausing);
    let e = a.update(Msg::Reply(
        Request::MigrationStep,
        Ok(Reply::Stepped {
            cursor: cursor(Phase::Inflight, [6_000, 192, 0, 0]),
            finished: false,
        }),
    ));
    assert!(fetches(&e).is_empty(), "paused: no further step");
    assert_eq!(a.migration.guide, Guide::Paused);
    // Resume goes through the guard again.
    let e = keys(&mut a, "M");
    answer(&mut a, e, |r| match r {
        Request::DryRun(s) => Some(Reply::DryRun(s.clone(), 10_000)),
        _ => None,
    });
    let e = keys(&mut a, "migrate\n");
    assert_eq!(fetches(&e), [&Request::MigrationStep]);
    // The last step: the check runs by itself.
    let e = a.update(Msg::Reply(
        Request::MigrationStep,
        Ok(Reply::Stepped {
            cursor: cursor(Phase::Finish, [6_000, 1_000, 2_000, 1_000]),
            finished: true,
        }),
    ));
    assert_eq!(fetches(&e), [&Request::MigrationCheck]);
    assert_eq!(a.migration.status, Some(Status::Done));
    assert_eq!(a.header.format, Some(3));
    a.update(Msg::Reply(
        Request::MigrationCheck,
        Ok(Reply::Checked(Box::default())),
    ));
    assert!(matches!(&a.migration.guide, Guide::Checked(r) if r.ok()));
    // 4. Enter opens the migrated store the ordinary way.
    let e = keys(&mut a, "\n");
    assert_eq!(fetches(&e), [&Request::Reopen]);
    let e = a.update(Msg::Reply(
        Request::Reopen,
        Ok(Reply::Reopened {
            mode: OpenMode::ReadOnly,
            format: Some(3),
        }),
    ));
    assert_eq!(*a.screen(), Screen::Overview);
    assert_eq!(a.header.mode, OpenMode::ReadOnly);
    assert_eq!(fetches(&e), [&Request::Refresh, &Request::Overview]);
}

#[test]
fn a_failed_step_is_reported_and_read_only_offers_nothing() {
    let mut a = needs_migration();
    status(&mut a, NOW, Status::Needed, None);
    a.migration.guide = Guide::Running;
    a.update(Msg::Reply(Request::MigrationStep, Err("disk full".into())));
    assert_eq!(a.migration.guide, Guide::Failed("disk full".into()));
    assert!(a.migration.can_guide(), "it can be resumed");

    let mut r = needs_migration();
    r.migration.read_only = true;
    status(&mut r, NOW, Status::Needed, None);
    assert!(!r.migration.can_guide());
    let e = keys(&mut r, "b");
    assert!(fetches(&e).is_empty());
    assert!(r.status.contains("--read-only"));
    // The migration keys do nothing on other screens.
    let mut o = app(OpenMode::ReadOnly);
    let e = keys(&mut o, "M");
    assert!(fetches(&e).is_empty());
    assert!(o.status.contains("migration screen"));
}

/// Issue 32: `:dlq-type invoice.*` opens the DLQ narrowed to a type
/// pattern (the request carries it, the title says it), a pattern that is
/// not one is refused before any fetch, a page for another filter is not
/// shown, and `:dlq-type` alone shows every row again.
#[test]
fn dlq_type_narrows_the_dlq_to_an_event_type() {
    let mut a = app(OpenMode::ReadOnly);
    let e = keys(&mut a, ":dlq-type invoice.*\n");
    assert_eq!(
        *a.screen(),
        Screen::Dlq {
            ord: None,
            name: None
        }
    );
    assert!(
        matches!(
            fetches(&e)[..],
            [Request::Dlq { event_type: Some(p), .. }] if p == "invoice.*"
        ),
        "{e:?}"
    );
    // A page answering the unfiltered DLQ is stale for this screen.
    let unfiltered = DlqData {
        ord: None,
        event_type: None,
        order: Default::default(),
        cursor: None,
        page: DlqPage {
            entries: vec![dead(1, NOW - 10, 9)],
            next: None,
        },
        names: vec![(1, "acme".into())],
        total: 1,
        sinks: vec![],
    };
    assert!(!a.dlq.on_page(None, unfiltered.clone()));
    let mut typed = unfiltered;
    typed.event_type = Some("invoice.*".into());
    typed.page.entries[0].event_type = Some("invoice.paid".into());
    assert!(a.dlq.on_page(None, typed));
    let e = keys(&mut a, ":dlq-type in*voice\n");
    assert!(fetches(&e).is_empty(), "{e:?}");
    assert!(a.status.contains("may only end a pattern"), "{}", a.status);
    assert_eq!(a.dlq.event_type.as_deref(), Some("invoice.*"), "kept");
    let e = keys(&mut a, ":dlq-type\n");
    assert!(matches!(
        fetches(&e)[..],
        [Request::Dlq {
            event_type: None,
            ..
        }]
    ));
}

/// Issue 33: `y` copies the selected id: the DLQ row's hook id (an
/// OSC 52 effect, and the footer says so); where nothing is selected it
/// says there is nothing to copy.
#[test]
fn y_copies_the_selected_hook_id() {
    let mut a = app(OpenMode::ReadOnly);
    let e = keys(&mut a, "y");
    assert!(!e.iter().any(|e| matches!(e, Effect::Copy(_))), "{e:?}");
    assert!(a.status.contains("nothing to copy"), "{}", a.status);
    keys(&mut a, "4");
    let page = DlqData {
        ord: None,
        event_type: None,
        order: Default::default(),
        cursor: None,
        page: DlqPage {
            entries: vec![dead(1, NOW - 10, 9), dead(1, NOW - 20, 8)],
            next: None,
        },
        names: vec![(1, "acme".into())],
        total: 2,
        sinks: vec![],
    };
    assert!(a.dlq.on_page(None, page));
    let e = keys(&mut a, "jy");
    assert!(
        e.iter()
            .any(|e| matches!(e, Effect::Copy(t) if t == "hk_0000000000000008")),
        "{e:?}"
    );
    assert!(
        a.status.contains("copied hook id \"hk_0000000000000008\""),
        "{}",
        a.status
    );
}
