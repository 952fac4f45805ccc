//! Drain and undrain from the single-node console: `:drain` and
//! `:undrain` go through the guard (the scope, the typed word, the result)
//! and run the same audited call as `ankusa node drain|undrain`; without
//! writes they are refused before any guard.

use ankusa_ops::access::{Peer, Principal};
use ankusa_store::Store;
use ankusa_ui::app::CANNOT_ACT;
use ankusa_ui::data::ActionScope;
use ankusa_ui::popups::guard::Stage;
use ankusa_ui::popups::Overlay;
use crossterm::event::KeyCode;

use crate::common::*;

fn guard(app: &ankusa_ui::app::App) -> Option<&ankusa_ui::popups::guard::Guard> {
    match app.overlays.last() {
        Some(Overlay::Guard(g)) => Some(g),
        _ => None,
    }
}

/// `drain`/`undrain` audit records, oldest first: (action, who).
fn drain_audit(dir: &std::path::Path) -> Vec<(String, String)> {
    let s = Store::open_read_only(dir).expect("open");
    let who = Principal::local(&Peer::me());
    let mut v: Vec<(String, String)> = ankusa_ops::jobs::audit_page(&s, &who, None, 100)
        .expect("audit")
        .records
        .into_iter()
        .filter(|r| r.action.contains("drain"))
        .map(|r| (r.action, r.who.name))
        .collect();
    v.reverse();
    v
}

#[test]
fn drain_and_undrain_go_through_the_guard_and_are_audited() {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let mut src = open(dir.path(), true);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);

    type_keys(&mut app, &mut src, ":drain\n");
    let g = guard(&app).expect("the guard opens");
    assert_eq!(
        g.scope,
        ActionScope::Drain {
            on: true,
            node: None
        }
    );
    assert!(matches!(g.stage, Stage::Confirm { .. }), "{:?}", g.stage);
    assert!(render(&app).contains("drain this node"), "{}", render(&app));

    // A wrong word runs nothing.
    type_keys(&mut app, &mut src, "drian\n");
    assert!(app.status.contains("\"drain\""), "{}", app.status);
    assert!(matches!(
        guard(&app).map(|g| &g.stage),
        Some(Stage::Confirm { .. })
    ));
    for _ in 0.."drian".len() {
        let e = app.update(code(KeyCode::Backspace));
        pump(&mut app, &mut src, e);
    }
    type_keys(&mut app, &mut src, "drain\n");
    match guard(&app).map(|g| &g.stage) {
        Some(Stage::Done(Ok(r))) => {
            let note = r.note.as_deref().unwrap_or("");
            assert!(note.contains("drains: /healthz answers 503"), "{note}");
        }
        other => panic!("{other:?}"),
    }
    type_keys(&mut app, &mut src, "\n");
    assert!(guard(&app).is_none());

    // Esc before the word cancels: nothing changes.
    type_keys(&mut app, &mut src, ":undrain\n\x1b");
    assert!(app.status.contains("cancelled"), "{}", app.status);
    type_keys(&mut app, &mut src, ":undrain\nundrain\n");
    match guard(&app).map(|g| &g.stage) {
        Some(Stage::Done(Ok(r))) => {
            assert!(r.note.as_deref().unwrap_or("").contains("not draining"))
        }
        other => panic!("{other:?}"),
    }
    drop(app);
    drop(src);

    let me = Principal::local(&Peer::me()).name;
    assert_eq!(
        drain_audit(dir.path()),
        vec![("drain".to_owned(), me.clone()), ("undrain".to_owned(), me)]
    );
    let s = Store::open_read_only(dir.path()).expect("open");
    assert_eq!(ankusa_store::node::drain(&s).expect("read"), None);
}

#[test]
fn drain_is_refused_without_writes_before_any_guard() {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let mut src = open(dir.path(), false);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    type_keys(&mut app, &mut src, ":drain\n");
    assert!(guard(&app).is_none());
    assert_eq!(app.status, CANNOT_ACT);
    drop(src);
    assert!(drain_audit(dir.path()).is_empty());
}
