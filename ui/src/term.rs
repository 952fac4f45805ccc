//! The terminal side: refuse a non-terminal, enter raw mode, the alternate
//! screen and mouse capture, run the event loop, and always restore the
//! terminal (mouse capture off first): on return, on error (a guard's
//! `Drop`) and on panic (a hook that restores before color-eyre's report
//! prints).

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::TryRecvError;
use std::time::Duration;

use crossterm::event::{
    self, DisableMouseCapture, EnableMouseCapture, Event as TermEvent, KeyEventKind,
};
use crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use crossterm::{cursor, execute};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

use crate::app::{App, Effect, Header, Msg};
use crate::data::{self, Event, Feed, Fetch, OpenRequest};
use crate::error::ConsoleError;
use crate::screens::migration::MigrationState;
use crate::theme::Theme;
use crate::view;
use crate::ConsoleOptions;

static ENTERED: AtomicBool = AtomicBool::new(false);

/// Gives the mouse back, leaves the alternate screen, shows the cursor,
/// leaves raw mode. Safe to call more than once and from the panic hook.
pub fn restore() {
    if ENTERED.swap(false, Ordering::SeqCst) {
        let mut out = io::stdout();
        let _ = execute!(out, DisableMouseCapture, LeaveAlternateScreen, cursor::Show);
        let _ = terminal::disable_raw_mode();
        let _ = out.flush();
    }
}

struct TerminalGuard;

impl TerminalGuard {
    /// `mouse`: capture clicks and the wheel (`--no-mouse` leaves the
    /// terminal's own selection alone).
    fn enter(mouse: bool) -> Result<Self, ConsoleError> {
        terminal::enable_raw_mode().map_err(ConsoleError::terminal(
            "cannot put the terminal in raw mode",
        ))?;
        ENTERED.store(true, Ordering::SeqCst);
        let guard = TerminalGuard;
        execute!(io::stdout(), EnterAlternateScreen, cursor::Hide)
            .map_err(ConsoleError::terminal("cannot enter the alternate screen"))?;
        // Clicks and the wheel (a terminal's own selection still works
        // with Shift held, in most terminals).
        if mouse {
            execute!(io::stdout(), EnableMouseCapture)
                .map_err(ConsoleError::terminal("cannot capture the mouse"))?;
        }
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

fn install_panic_hook() {
    // color-eyre's panic hook is already installed by the binary; run it
    // after the terminal is back so its report is readable.
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
}

type Term = Terminal<CrosstermBackend<io::Stdout>>;

/// Takes the terminal for a console, single-node or fleet: the panic hook
/// that gives it back, raw mode and the alternate screen (undone when the
/// guard drops), a cleared screen, and its size.
fn open_terminal(
    mouse: bool,
) -> Result<(TerminalGuard, Term, ratatui::layout::Size), ConsoleError> {
    install_panic_hook();
    let guard = TerminalGuard::enter(mouse)?;
    let mut term = Terminal::new(CrosstermBackend::new(io::stdout()))
        .map_err(ConsoleError::terminal("cannot start the terminal UI"))?;
    term.clear()
        .map_err(ConsoleError::terminal("cannot clear the terminal"))?;
    let size = term
        .size()
        .map_err(ConsoleError::terminal("cannot read the terminal's size"))?;
    Ok((guard, term, size))
}

pub fn run(opts: ConsoleOptions, log: tracing::Dispatch) -> Result<(), ConsoleError> {
    let now = ankusa_store::system_now_ms();
    let req = OpenRequest {
        path: opts.store.clone(),
        read_only: opts.read_only,
        write: opts.write,
        token: opts.token.clone(),
    };
    // Open before touching the terminal so a bad path is a plain error.
    let src = Feed::open(&req, now).map_err(|source| ConsoleError::Open {
        path: opts.store.clone(),
        source,
    })?;
    if !io::stdout().is_terminal() {
        return Err(ConsoleError::NotATerminal);
    }
    let _log = tracing::dispatcher::set_default(&log);
    let _ = tui_logger::init_logger(tui_logger::LevelFilter::Info);
    tui_logger::set_default_level(tui_logger::LevelFilter::Info);
    tracing::info!(target: "console", "opened {} as {}", src.path.display(), src.mode.label());

    let header = Header {
        path: src.path.clone(),
        mode: src.mode.clone(),
        format: src.probe.format,
        opened_at: now,
        fresh_at: src.fresh_at,
        daemon: None,
    };
    let migration = MigrationState::new(
        src.probe.format,
        src.probe.migrating,
        src.read_only_forced(),
    );
    let notices = src.notices.clone();
    let (fetches, events, worker) = data::spawn_worker(src, log.clone()).map_err(
        ConsoleError::terminal("cannot start the console's data thread"),
    )?;

    let (guard, mut term, size) = open_terminal(opts.mouse)?;
    let refresh_ms = u64::try_from(opts.refresh.as_millis()).unwrap_or(u64::MAX);
    let history = crate::history::default_path()
        .map(crate::history::History::load)
        .unwrap_or_default();
    let mut app = App::new(header, migration, refresh_ms, now, size.width, size.height)
        .with_prompt_history(history);
    app.notices = notices;
    let theme = Theme::from_env();
    // The PTY test's deliberate panic, compiled into test builds only (the
    // `test-panic` feature, which only the workspace's dev-dependencies turn
    // on): a release console has no environment variable that panics it.
    let panic_for_test =
        cfg!(feature = "test-panic") && std::env::var_os("ANKUSA_CONSOLE_TEST_PANIC").is_some();

    let mut next_id = 0u64;
    let mut pending: Vec<Effect> = app.update(Msg::Tick(now));
    'main: loop {
        for e in pending.drain(..) {
            match e {
                Effect::Quit => break 'main,
                Effect::Copy(text) => {
                    if let Some(seq) = crate::clipboard::osc52(&text) {
                        let mut out = io::stdout();
                        // The terminal takes it or ignores it; either way
                        // the console goes on.
                        let _ = out.write_all(seq.as_bytes());
                        let _ = out.flush();
                    }
                }
                Effect::Fetch(req) => {
                    next_id += 1;
                    let fetch = Fetch {
                        id: next_id,
                        req,
                        now: ankusa_store::system_now_ms(),
                    };
                    if fetches.send(fetch).is_err() {
                        return Err(ConsoleError::FeedStopped);
                    }
                }
            }
        }
        term.draw(|f| view::draw(f, &app, &theme))
            .map_err(ConsoleError::terminal("cannot draw the console"))?;
        if panic_for_test && app.overview.is_some() {
            panic!("ANKUSA_CONSOLE_TEST_PANIC: a deliberate panic to test terminal restore");
        }
        const INPUT: &str = "cannot read the terminal's input";
        if event::poll(Duration::from_millis(50)).map_err(ConsoleError::terminal(INPUT))? {
            match event::read().map_err(ConsoleError::terminal(INPUT))? {
                TermEvent::Key(k) if k.kind != KeyEventKind::Release => {
                    pending.extend(app.update(Msg::Key(k)))
                }
                TermEvent::Resize(w, h) => pending.extend(app.update(Msg::Resize(w, h))),
                TermEvent::Mouse(m) => pending.extend(app.update(Msg::Mouse(m))),
                _ => {}
            }
        }
        loop {
            match events.try_recv() {
                Ok(Event::Reply { req, result, .. }) => {
                    pending.extend(app.update(Msg::Reply(req, result)))
                }
                Ok(Event::Progress { progress, .. }) => {
                    pending.extend(app.update(Msg::Progress(progress)))
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return Err(ConsoleError::FeedStopped),
            }
        }
        pending.extend(app.update(Msg::Tick(ankusa_store::system_now_ms())));
    }
    drop(term);
    drop(guard);
    drop(fetches);
    // An action under way finishes its current chunk (purge and replay are
    // chunked and idempotent), then the worker ends.
    let _ = worker.join();
    Ok(())
}

/// The fleet console's loop: the same terminal handling as [`run`]; each
/// fetch runs on a worker thread of its own ([`crate::fleet::worker`]).
pub fn run_fleet(
    fleet: ankusa_ops::fleet::Fleet,
    refresh: Duration,
    mouse: bool,
    log: tracing::Dispatch,
) -> Result<(), ConsoleError> {
    use crate::fleet::worker::{self, FleetEvent};
    use crate::fleet::{FleetApp, FleetEffect, FleetMsg};

    if !io::stdout().is_terminal() {
        return Err(ConsoleError::NotATerminal);
    }
    let _log = tracing::dispatcher::set_default(&log);
    let _ = tui_logger::init_logger(tui_logger::LevelFilter::Info);
    tui_logger::set_default_level(tui_logger::LevelFilter::Info);
    let (tx, events) = std::sync::mpsc::channel::<FleetEvent>();

    let (guard, mut term, size) = open_terminal(mouse)?;
    let now = ankusa_store::system_now_ms();
    let refresh_ms = u64::try_from(refresh.as_millis()).unwrap_or(u64::MAX);
    let mut app = FleetApp::new(&fleet, refresh_ms, now, size.width, size.height);
    let theme = Theme::from_env();

    let mut pending = app.update(FleetMsg::Tick(now));
    'main: loop {
        for e in pending.drain(..) {
            match e {
                FleetEffect::Quit => break 'main,
                FleetEffect::Fetch(req) => worker::spawn(&fleet, req, tx.clone(), &log)
                    .map_err(ConsoleError::terminal("cannot start a fleet worker thread"))?,
            }
        }
        term.draw(|f| crate::fleet::view::draw(f, &app, &theme))
            .map_err(ConsoleError::terminal("cannot draw the console"))?;
        const INPUT: &str = "cannot read the terminal's input";
        if event::poll(Duration::from_millis(50)).map_err(ConsoleError::terminal(INPUT))? {
            match event::read().map_err(ConsoleError::terminal(INPUT))? {
                TermEvent::Key(k) if k.kind != KeyEventKind::Release => {
                    pending.extend(app.update(FleetMsg::Key(k)))
                }
                TermEvent::Resize(w, h) => pending.extend(app.update(FleetMsg::Resize(w, h))),
                _ => {}
            }
        }
        while let Ok(ev) = events.try_recv() {
            let msg = match ev {
                FleetEvent::Reply(r) => FleetMsg::Reply(r),
                FleetEvent::Progress(p) => FleetMsg::Progress(p),
            };
            pending.extend(app.update(msg));
        }
        pending.extend(app.update(FleetMsg::Tick(ankusa_store::system_now_ms())));
    }
    drop(term);
    drop(guard);
    // Workers still waiting on a node end on their own client timeout;
    // their answers go nowhere.
    Ok(())
}
