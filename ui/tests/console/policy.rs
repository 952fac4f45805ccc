//! A tenant's policy from the console: `:policy weight=4 cap=20` on the
//! tenant's detail goes through the guard (the policy now and after, the
//! tenant's name typed), runs the same audited call as `ankusa tenants
//! policy set`, and the detail shows it; `:policy clear` takes it back.
//! Bad input is refused before any guard, naming what is wrong.

use ankusa_ops::access::{Peer, Principal};
use ankusa_store::policy::{Policy, Rate};
use ankusa_store::Store;
use ankusa_ui::data::ActionScope;
use ankusa_ui::popups::guard::Stage;
use ankusa_ui::popups::Overlay;

use crate::common::*;

fn guard(app: &ankusa_ui::app::App) -> Option<&ankusa_ui::popups::guard::Guard> {
    match app.overlays.last() {
        Some(Overlay::Guard(g)) => Some(g),
        _ => None,
    }
}

const T: &str = "tenant-000002";

#[test]
fn a_policy_is_set_and_cleared_through_the_guard_and_audited() {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let mut src = open(dir.path(), true);
    let mut app = app_for(&src, 100, 30);
    start(&mut app, &mut src);
    type_keys(&mut app, &mut src, &format!(":tenant {T}\n"));

    // Refused before any guard, each naming what is wrong.
    for (line, want) in [
        (":policy weight=0\n", "weight 0"),
        (":policy colour=4\n", "unknown field"),
        (":policy cap\n", "field=value"),
        (":policy rate=fast\n", "rate \"fast\""),
        (":policy share=9 cap=4\n", "share 9 above cap 4"),
        (":policy clear\n", "nothing to change"),
    ] {
        type_keys(&mut app, &mut src, line);
        assert!(guard(&app).is_none(), "{line}: a guard opened");
        assert!(app.status.contains(want), "{line}: {}", app.status);
    }

    type_keys(&mut app, &mut src, ":policy weight=4 cap=20 rate=50/s\n");
    let want = Policy {
        weight: Some(4),
        share: None,
        cap: Some(20),
        rate: Some(Rate::from_milli(50_000)),
    };
    let g = guard(&app).expect("the guard opens");
    assert!(
        matches!(&g.scope, ActionScope::Policy { tenant, before: None, after: Some(p), .. } if tenant == T && *p == want),
        "{:?}",
        g.scope
    );
    let screen = render(&app);
    assert!(
        screen.contains("Now: the defaults. After: weight 4, cap 20, rate 50/s."),
        "{screen}"
    );
    type_keys(&mut app, &mut src, &format!("{T}\n"));
    match guard(&app).map(|g| &g.stage) {
        Some(Stage::Done(Ok(r))) => {
            let note = r.note.as_deref().unwrap_or("");
            assert!(
                note.contains("the defaults -> weight 4, cap 20, rate 50/s"),
                "{note}"
            );
        }
        other => panic!("{other:?}"),
    }
    type_keys(&mut app, &mut src, "\n");
    assert!(guard(&app).is_none());
    let screen = render(&app);
    assert!(
        screen.contains("policy: weight 4, cap 20, rate 50/s (set by"),
        "{screen}"
    );

    // The tenants list marks it.
    type_keys(&mut app, &mut src, ":tenants\n");
    let screen = render(&app);
    assert!(screen.contains(&format!("{T} *")), "{screen}");
    assert!(!screen.contains("tenant-000003 *"), "{screen}");
    type_keys(&mut app, &mut src, &format!(":tenant {T}\n"));

    // One field more keeps the others.
    type_keys(&mut app, &mut src, ":policy weight=2\n");
    let g = guard(&app).expect("the guard opens");
    assert!(
        matches!(&g.scope, ActionScope::Policy { after: Some(p), .. } if p.weight == Some(2) && p.cap == Some(20)),
        "{:?}",
        g.scope
    );
    type_keys(&mut app, &mut src, "\x1b");
    assert!(guard(&app).is_none(), "Esc cancels");

    type_keys(&mut app, &mut src, ":policy clear\n");
    type_keys(&mut app, &mut src, &format!("{T}\n\n"));
    assert!(!render(&app).contains("policy: weight"), "{}", render(&app));
    drop(app);
    drop(src);

    let s = Store::open_read_only(dir.path()).expect("open");
    let who = Principal::local(&Peer::me());
    let audit: Vec<String> = ankusa_ops::jobs::audit_page(&s, &who, None, 100)
        .expect("audit")
        .records
        .into_iter()
        .filter(|r| r.action == "tenant_policy")
        .map(|r| r.scope)
        .rev()
        .collect();
    assert_eq!(
        audit,
        [
            format!("tenant {T}: weight default -> 4, cap default -> 20, rate default -> 50/s"),
            format!("tenant {T}: weight 4 -> default, cap 20 -> default, rate 50/s -> default"),
        ]
    );
    assert_eq!(ankusa_store::policy::tenant(&s, T).expect("read"), None);
}
