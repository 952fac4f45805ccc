//! `ankusa-ui`: the operator console (`ankusa console`).
//!
//! Architecture (see `docs/console.md`):
//! - [`app`]: the pure state and `update(msg) -> effects`; no terminal, no
//!   store, no clock (time arrives as `Msg::Tick(now)`).
//! - [`screens`]: one module per screen (its state, requests, replies, keys
//!   and drawing); [`popups`]: the help overlay, the input line and the
//!   guard of a destructive action, likewise.
//! - [`view`]: the frame around them (header, tabs, footer) as a function
//!   of the state (ratatui); [`theme`]: styles, `NO_COLOR`.
//! - [`data`]: the console's feed ([`data::Feed`]): opening the store
//!   (FOLLOW / READ-ONLY / WRITE) and answering the screens' bounded
//!   requests on a worker thread.
//! - [`keymap`]: keys as data; the help overlay is generated from it.
//! - [`rates`]: rates and trends from successive samples of the counters
//!   and cumulative totals the screens already read (bounded rings).
//! - [`heatmap`], [`fmt`]: cell counting, formatting (the redacted
//!   previews are ankusa-ops' [`ankusa_ops::preview`], the API's rule).
//! - [`fleet`]: the fleet console (`--fleet FLEET.toml`): nodes screen,
//!   the tenants merged across nodes, a tenant from the nodes holding it,
//!   guarded actions sent to the node they name.
//! - [`error`]: [`ConsoleError`], what the console returns (the binary
//!   reports it with color-eyre).
//! - [`term`]: the terminal: raw mode, alternate screen, restore on exit and
//!   on panic, the event loop.
//! - [`refresh_bench`]: `ankusa bench console` (time to first frame and
//!   each screen's refresh store work, small store against large).

pub mod app;
pub mod clipboard;
pub mod commands;
pub mod data;
pub mod error;
pub mod fleet;
pub mod fmt;
pub mod heatmap;
pub mod history;
pub mod keymap;
pub mod popups;
pub mod rates;
pub mod refresh_bench;
pub mod screens;
pub mod term;
pub mod theme;
pub mod view;

use std::path::PathBuf;
use std::time::Duration;

pub use error::ConsoleError;

/// What `ankusa console` was asked for.
#[derive(Debug, Clone)]
pub struct ConsoleOptions {
    pub store: PathBuf,
    pub read_only: bool,
    pub write: bool,
    pub refresh: Duration,
    /// The admin API token for acting through a running daemon; none: the
    /// socket's local admin.
    pub token: Option<String>,
    /// Capture the mouse (clicks, the wheel); `--no-mouse` leaves the
    /// terminal's own selection alone.
    pub mouse: bool,
}

/// Runs the console until the operator quits. `log` is the tracing
/// dispatcher whose events the log pane shows (the binary builds it with
/// [`log_layer`]); the console's threads use it instead of the process's
/// stderr logger, which would scribble over the screen.
pub fn run(opts: ConsoleOptions, log: tracing::Dispatch) -> Result<(), ConsoleError> {
    term::run(opts, log)
}

/// Runs the fleet console over `fleet` until the operator quits.
pub fn run_fleet(
    fleet: ankusa_ops::fleet::Fleet,
    refresh: Duration,
    mouse: bool,
    log: tracing::Dispatch,
) -> Result<(), ConsoleError> {
    term::run_fleet(fleet, refresh, mouse, log)
}

/// The tracing layer that feeds the log pane.
pub fn log_layer() -> tui_logger::TuiTracingSubscriberLayer {
    tui_logger::tracing_subscriber_layer()
}
