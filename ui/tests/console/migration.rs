//! The guided format 2 → 3 migration driven through the console's state
//! machine and its real worker thread, on a small format 2 fixture: backup,
//! dry run, typed confirmation, steps with a pause and a resume, the check,
//! and the store reopened at format 3.

use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;

use crate::common::{key, NOW};
use ankusa_store::fixture::{self, FixtureSpec};
use ankusa_store::migrate::{self, Status};
use ankusa_store::{check, Store};
use ankusa_ui::app::{App, Effect, Header, Msg};
use ankusa_ui::data::{self, Event, Feed, Fetch, OpenMode, OpenRequest};
use ankusa_ui::popups::guard::Stage;
use ankusa_ui::popups::Overlay;
use ankusa_ui::screens::migration::{Guide, MigrationState};
use ankusa_ui::screens::Screen;
use crossterm::event::KeyCode;

struct Worker {
    jobs: Sender<Fetch>,
    events: Receiver<Event>,
    next_id: u64,
}

impl Worker {
    /// Sends the fetches of `effects` and applies replies until none are
    /// outstanding. `after` runs after each reply (to press keys while the
    /// next request is in flight); its effects join the queue.
    fn run(
        &mut self,
        app: &mut App,
        effects: Vec<Effect>,
        mut after: impl FnMut(&mut App) -> Vec<Effect>,
    ) {
        let mut pending = effects;
        let mut outstanding = 0usize;
        loop {
            for e in pending.drain(..) {
                if let Effect::Fetch(req) = e {
                    self.next_id += 1;
                    self.jobs
                        .send(Fetch {
                            id: self.next_id,
                            req,
                            now: app.now,
                        })
                        .expect("worker alive");
                    outstanding += 1;
                }
            }
            if outstanding == 0 {
                return;
            }
            match self
                .events
                .recv_timeout(Duration::from_secs(120))
                .expect("a reply")
            {
                Event::Reply { req, result, .. } => {
                    outstanding -= 1;
                    pending.extend(app.update(Msg::Reply(req, result)));
                    pending.extend(after(app));
                }
                Event::Progress { progress, .. } => {
                    pending.extend(app.update(Msg::Progress(progress)))
                }
            }
        }
    }

    fn keys(&mut self, app: &mut App, text: &str) {
        for c in text.chars() {
            let msg = match c {
                '\n' => crate::common::code(KeyCode::Enter),
                c => key(c),
            };
            let e = app.update(msg);
            self.run(app, e, |_| Vec::new());
        }
    }
}

#[test]
fn the_guided_migration_runs_through_the_worker_pauses_resumes_and_checks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store");
    {
        let s = Store::create_v2(&path).expect("v2 store");
        fixture::write_v2(&s, &FixtureSpec::new(20, 3_000, 11, NOW), |_, _| {}).expect("fixture");
    }
    let src = Feed::open(
        &OpenRequest {
            path: path.clone(),
            ..OpenRequest::default()
        },
        NOW,
    )
    .expect("open");
    assert_eq!(src.mode, OpenMode::NeedsMigration);
    let header = Header {
        path: path.clone(),
        mode: src.mode.clone(),
        format: src.probe.format,
        opened_at: NOW,
        fresh_at: NOW,
        daemon: None,
    };
    let mut app = App::new(
        header,
        MigrationState::new(src.probe.format, src.probe.migrating, false),
        2000,
        NOW,
        100,
        30,
    );
    let (jobs, events, handle) =
        data::spawn_worker(src, tracing::Dispatch::default()).expect("worker");
    let mut w = Worker {
        jobs,
        events,
        next_id: 0,
    };

    // The first refresh polls the status: format 2, nobody holds it.
    let e = app.update(Msg::Tick(NOW));
    w.run(&mut app, e, |_| Vec::new());
    assert_eq!(*app.screen(), Screen::Migration);
    assert_eq!(app.migration.status, Some(Status::Needed));
    assert!(app.migration.can_guide());

    // 1. Backup: a format 2 copy beside the store.
    w.keys(&mut app, "b");
    let backup = app.migration.backup.clone().expect("backup written");
    assert_eq!(backup.parent(), path.parent());
    assert_eq!(migrate::status(&backup).expect("status"), Status::Needed);

    // 2. Dry run.
    w.keys(&mut app, "n");
    let plan = app.migration.plan.clone().expect("plan");
    let total: u64 = plan.rows.iter().sum();
    assert!(total > 1_000, "{plan:?}");

    // 3. Migrate, confirmed by the typed word; pause after the first step.
    w.keys(&mut app, "M");
    assert!(matches!(
        app.overlays.last(),
        Some(Overlay::Guard(g)) if matches!(g.stage, Stage::Confirm { count, .. } if count == total)
    ));
    w.keys(&mut app, "migrate");
    let e = app.update(crate::common::code(KeyCode::Enter));
    let mut paused = false;
    w.run(&mut app, e, |a| {
        if !paused && a.migration.cursor.is_some() {
            paused = true;
            return a.update(key('p'));
        }
        Vec::new()
    });
    assert_eq!(app.migration.guide, Guide::Paused);
    let done_at_pause = app.migration.cursor.as_ref().expect("cursor").rows_done();
    assert!(done_at_pause > 0 && done_at_pause < total);
    // Paused: the poll sees the interrupted migration on disk.
    let e = app.update(Msg::Tick(NOW + 5_000));
    w.run(&mut app, e, |_| Vec::new());
    assert!(matches!(
        app.migration.status,
        Some(Status::InProgress { .. })
    ));
    assert!(app.migration.can_guide());

    // Resume: the guard again, then every step, then the check by itself.
    w.keys(&mut app, "M");
    w.keys(&mut app, "migrate\n");
    assert_eq!(app.migration.status, Some(Status::Done));
    let report = match &app.migration.guide {
        Guide::Checked(r) => r.clone(),
        other => panic!("expected a check report, got {other:?}"),
    };
    assert!(report.ok(), "{:?}", report.mismatches);
    assert_eq!(
        app.migration.cursor.as_ref().map(|c| c.rows_done()),
        Some(total),
        "every row moved once"
    );

    // 4. Enter opens the migrated store the ordinary way.
    w.keys(&mut app, "\n");
    assert_eq!(app.header.mode, OpenMode::ReadOnly);
    assert_eq!(app.header.format, Some(3));
    assert_eq!(*app.screen(), Screen::Overview);
    let o = app.overview.clone().expect("overview");
    assert_eq!(o.format, Some(3));
    assert!(o.tenants >= 20, "{o:?}");

    drop(w);
    handle.join().expect("worker ends");
    // Independently of the console: format 3 and a clean check.
    assert_eq!(migrate::status(&path).expect("status"), Status::Done);
    let s = Store::open_read_only(&path).expect("format 3 opens");
    assert!(check::run(&s, |_, _| {}).expect("check").ok());
    // The backup is still a format 2 store, untouched.
    assert_eq!(migrate::status(&backup).expect("status"), Status::Needed);
}
