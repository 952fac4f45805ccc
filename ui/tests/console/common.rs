//! Helpers shared by the console's tests: a fixture store at a fixed clock,
//! a synchronous runner that answers an app's fetches from a real store,
//! and a text rendering of a frame.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use ankusa_store::fixture::{self, FixtureSpec};
use ankusa_store::tenants::TenantAllocator;
use ankusa_store::values::Envelope;
use ankusa_store::Store;
use ankusa_ui::app::{App, Effect, Header, Msg};
use ankusa_ui::data::{Feed, OpenRequest};
use ankusa_ui::screens::migration::MigrationState;
use ankusa_ui::theme::Theme;
use ankusa_ui::view;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

/// The fixed clock of every snapshot: 2023-11-14 22:13:20 UTC.
pub const NOW: u64 = 1_700_000_000_000;

/// Writes the snapshot fixture (40 tenants, 2000 rows, seed 7) at [`NOW`].
pub fn fixture_store(dir: &Path) {
    let s = Store::create_or_open(dir).expect("create store");
    fixture::write(&s, &FixtureSpec::new(40, 2000, 7, NOW), |_, _| {}).expect("fixture");
}

pub fn open(dir: &Path, write: bool) -> Feed {
    Feed::open(
        &OpenRequest {
            path: dir.to_path_buf(),
            read_only: false,
            write,
            token: None,
        },
        NOW,
    )
    .expect("open source")
}

/// An app over `src` with a fixed display path, at `w`×`h`.
pub fn app_for(src: &Feed, w: u16, h: u16) -> App {
    let header = Header {
        path: PathBuf::from("/srv/ankusa/store"),
        mode: src.mode.clone(),
        format: src.probe.format,
        opened_at: NOW - 3_000,
        fresh_at: NOW - 400,
        daemon: None,
    };
    let m = MigrationState::new(src.probe.format, src.probe.migrating, false);
    App::new(header, m, 2000, NOW, w, h)
}

/// Applies effects by answering fetches from `src` until none are left.
/// Returns whether a Quit was seen.
pub fn pump(app: &mut App, src: &mut Feed, mut effects: Vec<Effect>) -> bool {
    let mut quit = false;
    let mut guard = 0;
    while !effects.is_empty() {
        guard += 1;
        assert!(guard < 100, "effects never settle");
        let mut next = Vec::new();
        for e in effects {
            match e {
                Effect::Quit => quit = true,
                Effect::Copy(_) => {}
                Effect::Fetch(req) => {
                    let mut progress = Vec::new();
                    let reply = src
                        .execute(&req, app.now, &mut |p| progress.push(p))
                        .map_err(|e| e.to_string());
                    for p in progress {
                        next.extend(app.update(Msg::Progress(p)));
                    }
                    next.extend(app.update(Msg::Reply(req, reply)));
                }
            }
        }
        effects = next;
    }
    quit
}

pub fn key(c: char) -> Msg {
    Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

pub fn code(c: KeyCode) -> Msg {
    Msg::Key(KeyEvent::new(c, KeyModifiers::NONE))
}

/// Sends keys (as typed text; `\n` is Enter, `\x1b` is Esc) and pumps.
pub fn type_keys(app: &mut App, src: &mut Feed, keys: &str) {
    for c in keys.chars() {
        let msg = match c {
            '\n' => code(KeyCode::Enter),
            '\x1b' => code(KeyCode::Esc),
            '\t' => code(KeyCode::Tab),
            c => key(c),
        };
        let e = app.update(msg);
        pump(app, src, e);
    }
}

/// Starts the app: first tick (refresh) answered.
pub fn start(app: &mut App, src: &mut Feed) {
    let e = app.update(Msg::Tick(NOW));
    pump(app, src, e);
}

/// The frame as text, one line per row, trailing spaces trimmed.
pub fn render(app: &App) -> String {
    frame_text(app.width, app.height, |f| {
        view::draw(f, app, &Theme { color: false })
    })
}

/// What `draw` puts on a `width` x `height` screen, as text: one line per
/// row, trailing spaces trimmed (the single-node and fleet consoles' frames).
pub fn frame_text(width: u16, height: u16, draw: impl FnOnce(&mut ratatui::Frame)) -> String {
    let mut term = Terminal::new(TestBackend::new(width, height)).expect("terminal");
    term.draw(draw).expect("draw");
    let buf = term.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut line = String::new();
        for x in 0..buf.area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Ingests `n` one-sink hooks for `tenant`, each due at `at(i)`, through the
/// real transitions ([`ankusa_store::fixture::ingest`]).
pub fn ingest(store: &Store, tenant: &str, n: u64, at: impl Fn(u64) -> u64) {
    let mut alloc = TenantAllocator::load(store, 1_000_000).expect("allocator");
    let hooks: Vec<_> = (0..n)
        .map(|i| ankusa_store::fixture::Hook {
            envelope: Envelope {
                received_at: at(i),
                source_id: "src-test".into(),
                tenant: tenant.into(),
                idempotency_key: None,
                event_type: None,
                headers: vec![("content-type".into(), b"application/json".to_vec())],
                body: br#"{"ok":true}"#.to_vec(),
            },
            sinks: ankusa_store::transitions::SinkSet::first(1),
            archive: false,
        })
        .collect();
    ankusa_store::fixture::ingest(store, &mut alloc, &hooks).expect("ingest");
}

/// Snapshot assertions into the top-level `snapshots/` directory.
#[macro_export]
macro_rules! snap {
    ($name:expr, $text:expr) => {
        insta::with_settings!({
            snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/../snapshots"),
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!($name, $text);
        })
    };
}
