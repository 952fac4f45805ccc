//! The console's state and its one update function: `update(msg)` changes
//! the state and returns effects (fetches for the data feed, quit). No
//! terminal and no store here, so every key sequence is testable.
//!
//! [`App`] keeps what every screen shares: the navigation stack, the popup
//! stack, the header, the refresh. What a screen shows, how its keys and
//! replies change it and how it is drawn live in its module under
//! [`crate::screens`] (popups under [`crate::popups`]); the app routes a
//! message to the screen it concerns and carries out the [`Next`] the
//! screen returns.
//!
//! Files: this one (the state, `update` and navigation), `keys` (keys and
//! the mouse), `replies` (the data feed's answers), `actions` (guarded
//! actions and copy) and `prompt` (the `:` commands).

mod actions;
mod keys;
mod prompt;
mod replies;

use crossterm::event::{KeyEvent, MouseEvent};

use crate::data::{
    DaemonStatus, DeadDetail, OpenMode, Overview, Progress, Reply, Request, TenantData,
};
use crate::heatmap::HeatSpec;
use crate::keymap::Tab;
use crate::popups::guard::{Guard, Stage};
use crate::popups::Overlay;
use crate::rates::{RateBook, Sample};
use crate::screens::dlq::DlqState;
use crate::screens::heatmap::HeatState;
use crate::screens::migration::MigrationState;
use crate::screens::sinks::{self, SinksState};
use crate::screens::tenants::TenantsState;
use crate::screens::{overview, tenant, Next, Screen};

/// Inputs to [`App::update`].
// A message is moved once per event; boxing the reply would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Msg {
    Key(KeyEvent),
    /// A click or the wheel (the terminal captures the mouse).
    Mouse(MouseEvent),
    /// The clock ticked; `now` in ms since the epoch.
    Tick(u64),
    Resize(u16, u16),
    Reply(Request, Result<Reply, String>),
    Progress(Progress),
}

/// What the runner must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Fetch(Request),
    /// Put this text on the operator's clipboard (OSC 52).
    Copy(String),
    Quit,
}

/// The header's facts about the store.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub path: std::path::PathBuf,
    pub mode: OpenMode,
    pub format: Option<u32>,
    pub opened_at: u64,
    /// When the shown data last matched the store.
    pub fresh_at: u64,
    pub daemon: Option<DaemonStatus>,
}

/// The whole console state.
#[derive(Debug, Clone, PartialEq)]
pub struct App {
    pub now: u64,
    pub width: u16,
    pub height: u16,
    pub refresh_ms: u64,
    pub header: Header,
    pub notices: Vec<String>,
    pub stack: Vec<Screen>,
    pub overlays: Vec<Overlay>,
    pub overview: Option<Overview>,
    pub tenants: TenantsState,
    pub tenant: Option<TenantData>,
    pub heat: HeatState,
    pub dlq: DlqState,
    pub detail: Option<DeadDetail>,
    pub migration: MigrationState,
    /// The sinks list and the sink detail.
    pub sinks: SinksState,
    /// Rates and trends from the readings of the screens shown.
    pub rates: RateBook,
    pub status: String,
    pub error: Option<String>,
    /// Fetches sent and not answered yet.
    pub busy: usize,
    pub last_refresh: Option<u64>,
    /// Whether the daemon's last hour was asked for (once, in FOLLOW mode).
    pub history_asked: bool,
    /// The `:` prompt's commands, for ↑ and ↓ (none kept on disk unless
    /// [`App::with_prompt_history`] gave a file).
    pub prompt_history: crate::history::History,
    /// What this console did, for the actions screen.
    pub actions: crate::screens::actions::ActionsLog,
    pub quit: bool,
}

/// Rows of chrome around a list: header 2, footer 1, block borders 2,
/// column titles 1.
const CHROME: u16 = 6;

/// The frame's row of the tab bar (under the header line).
pub const TAB_ROW: u16 = 1;
/// The frame's row of a list's first row: header, tab bar, the block's top
/// border and the column titles (the heatmap's axis) are above it.
pub const LIST_TOP: u16 = 4;

/// Why a guarded action is not offered. Every status line fits the footer
/// at 80 columns ([`STATUS_MAX`]); what the operator typed is cut to fit
/// ([`quoted`]).
pub const CANNOT_ACT: &str =
    "no actions: they need a daemon to act through, or --write with no daemon";

/// The longest status line: the footer's 80 columns less its leading space.
pub const STATUS_MAX: usize = 79;

impl App {
    pub fn new(
        header: Header,
        migration: MigrationState,
        refresh_ms: u64,
        now: u64,
        width: u16,
        height: u16,
    ) -> Self {
        let root = if header.mode == OpenMode::NeedsMigration {
            Screen::Migration
        } else {
            Screen::Overview
        };
        App {
            now,
            width,
            height,
            refresh_ms: refresh_ms.max(100),
            header,
            notices: Vec::new(),
            stack: vec![root],
            overlays: Vec::new(),
            overview: None,
            tenants: TenantsState::default(),
            tenant: None,
            heat: HeatState::new(),
            dlq: DlqState::default(),
            detail: None,
            migration,
            sinks: SinksState::default(),
            rates: RateBook::default(),
            status: String::new(),
            error: None,
            busy: 0,
            last_refresh: None,
            history_asked: false,
            prompt_history: crate::history::History::default(),
            actions: Default::default(),
            quit: false,
        }
    }

    /// This app with `h` as its `:` prompt's history (the console's, kept
    /// in the user's state directory).
    pub fn with_prompt_history(mut self, h: crate::history::History) -> Self {
        self.prompt_history = h;
        self
    }

    pub fn screen(&self) -> &Screen {
        self.stack.last().unwrap_or(&Screen::Overview)
    }

    /// Whether guarded actions are offered ([`OpenMode::can_act`]).
    pub fn can_act(&self) -> bool {
        self.header.mode.can_act()
    }

    /// Whether the cumulative totals can move: a daemon runs and this
    /// console follows it. Otherwise the screens say "no daemon: no rates"
    /// instead of showing a rate of zero that means nothing.
    pub fn rates_live(&self) -> bool {
        matches!(self.header.mode, OpenMode::Follow { .. })
            && matches!(self.header.daemon, Some(DaemonStatus::Running(_)))
    }

    /// A reading of these totals and levels, stamped with when the data
    /// last matched the store (a re-read without a catch-up is no news).
    fn sample(
        &self,
        totals: ankusa_store::Totals,
        c: &ankusa_store::Counters,
        oldest_age_ms: Option<u64>,
    ) -> Sample {
        Sample {
            at: self.header.fresh_at,
            totals,
            backlog: c.queued(),
            oldest_age_ms,
        }
    }

    fn sample_tenants<'a>(
        &mut self,
        rows: impl Iterator<Item = &'a ankusa_store::tenants::TenantInfo>,
    ) {
        let samples: Vec<(u32, Sample)> = rows
            .map(|t| (t.ord, self.sample(t.totals, &t.counters, None)))
            .collect();
        for (ord, s) in samples {
            self.rates.sample_tenant(ord, s);
        }
    }

    /// The rate series of the tenant whose detail is open.
    pub fn screen_tenant_series(&self) -> Option<&crate::rates::Series> {
        match self.screen() {
            Screen::Tenant { ord } => self.rates.tenant(*ord),
            _ => None,
        }
    }

    /// Rows a list screen shows at the current size.
    pub fn list_rows(&self) -> usize {
        usize::from(self.height.saturating_sub(CHROME)).max(1)
    }

    /// Heatmap geometry at the current size.
    pub fn heat_spec(&self) -> HeatSpec {
        self.heat.spec(self.width)
    }

    /// The tenant rows the tenants screen shows.
    pub fn tenant_rows(&self) -> Vec<&ankusa_store::tenants::TenantInfo> {
        self.tenants.rows(self.list_rows())
    }

    fn fetch(&mut self, reqs: Vec<Request>) -> Vec<Effect> {
        self.busy += reqs.len();
        reqs.into_iter().map(Effect::Fetch).collect()
    }

    /// Carries out what a screen asked for.
    fn follow(&mut self, next: Next) -> Vec<Effect> {
        match next {
            Next::Stay => Vec::new(),
            Next::Reload => self.reload(),
            Next::Push(s) => self.push(s),
            Next::Fetch(reqs) => self.fetch(reqs),
            Next::Guard(scope) => {
                self.overlays
                    .push(Overlay::Guard(Box::new(Guard::new(scope.clone()))));
                if scope.counts() {
                    self.fetch(vec![Request::DryRun(scope)])
                } else {
                    Vec::new()
                }
            }
        }
    }

    /// Reloads when `moved` (a page or an order changed).
    fn reload_if(&mut self, moved: bool) -> Vec<Effect> {
        if moved {
            self.reload()
        } else {
            Vec::new()
        }
    }

    /// The requests that refresh the current screen.
    pub fn screen_requests(&self) -> Vec<Request> {
        if *self.screen() == Screen::Migration {
            return self.migration.requests();
        }
        if self.header.mode == OpenMode::NeedsMigration {
            return Vec::new();
        }
        match self.screen() {
            Screen::Overview => overview::requests(),
            Screen::Tenants => self.tenants.requests(self.list_rows()),
            Screen::Tenant { ord } => tenant::requests(*ord, self.height, self.heat_spec()),
            Screen::Heatmap => self.heat.requests(self.list_rows(), self.width),
            Screen::Dlq { ord, .. } => self.dlq.requests(*ord, self.list_rows()),
            Screen::DeadDetail { row } => vec![Request::DeadDetail(row.clone())],
            Screen::Sinks => sinks::requests(),
            Screen::Sink { sink } => sinks::detail_requests(sink, self.height),
            Screen::Migration | Screen::Log | Screen::Actions => Vec::new(),
        }
    }

    fn refresh(&mut self) -> Vec<Effect> {
        self.last_refresh = Some(self.now);
        let mut reqs = vec![Request::Refresh];
        if !self.history_asked && matches!(self.header.mode, OpenMode::Follow { .. }) {
            self.history_asked = true;
            reqs.push(Request::History);
        }
        reqs.extend(self.screen_requests());
        self.fetch(reqs)
    }

    /// Fetches for a screen change (no catch-up: the data is as fresh as the
    /// last refresh, which the header says).
    fn reload(&mut self) -> Vec<Effect> {
        let reqs = self.screen_requests();
        self.fetch(reqs)
    }

    pub fn update(&mut self, msg: Msg) -> Vec<Effect> {
        match msg {
            Msg::Tick(now) => {
                self.now = now;
                let due = self
                    .last_refresh
                    .is_none_or(|t| now.saturating_sub(t) >= self.refresh_ms);
                // A slow store must not pile refreshes up: wait for the last.
                if due && self.busy == 0 {
                    return self.refresh();
                }
                Vec::new()
            }
            Msg::Resize(w, h) => {
                self.width = w;
                self.height = h;
                self.reload()
            }
            Msg::Progress(p) => {
                if let Some(Overlay::Guard(g)) = self.overlays.last_mut() {
                    g.stage = Stage::Running(p);
                }
                Vec::new()
            }
            Msg::Reply(req, result) => {
                self.busy = self.busy.saturating_sub(1);
                self.apply(req, result)
            }
            Msg::Key(k) => self.key(k),
            Msg::Mouse(m) => self.mouse(m),
        }
    }

    fn rows_on_screen(&self) -> usize {
        match self.screen() {
            Screen::Actions => self.actions.len(),
            Screen::Tenants => self.tenant_rows().len(),
            Screen::Heatmap => self.heat.rows_shown(),
            Screen::Dlq { .. } => self.dlq.rows_shown(),
            Screen::Sinks => self.sinks.rows(self.list_rows()).len(),
            _ => 0,
        }
    }

    fn sel_mut(&mut self) -> Option<&mut usize> {
        match self.screen() {
            Screen::Actions => Some(&mut self.actions.sel),
            Screen::Tenants => Some(&mut self.tenants.sel),
            Screen::Heatmap => Some(&mut self.heat.sel),
            Screen::Dlq { .. } => Some(&mut self.dlq.sel),
            Screen::Sinks => Some(&mut self.sinks.sel),
            _ => None,
        }
    }

    fn clamp_sel(&mut self) {
        let n = self.rows_on_screen();
        if let Some(s) = self.sel_mut() {
            *s = (*s).min(n.saturating_sub(1));
        }
    }

    fn push(&mut self, s: Screen) -> Vec<Effect> {
        if *self.screen() != s {
            self.enter(&s);
            self.stack.push(s);
        }
        self.reload()
    }

    /// Resets the per-screen state a screen starts from.
    fn enter(&mut self, s: &Screen) {
        match s {
            Screen::Dlq { .. } => self.dlq = DlqState::default(),
            Screen::Tenant { .. } => self.tenant = None,
            Screen::DeadDetail { .. } => self.detail = None,
            Screen::Sink { .. } => self.sinks.detail = None,
            _ => {}
        }
    }

    fn goto(&mut self, t: Tab) -> Vec<Effect> {
        let s = Screen::of_tab(t);
        self.enter(&s);
        self.stack = vec![s];
        self.reload()
    }

    fn back(&mut self) -> Vec<Effect> {
        if self.stack.len() <= 1 {
            self.quit = true;
            return vec![Effect::Quit];
        }
        self.stack.pop();
        // Returning to a DLQ page keeps its cursor and marks.
        self.reload()
    }
}
