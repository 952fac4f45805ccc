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

use ankusa_store::counters::Field;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};

use crate::commands::{self, Refused, What};
use crate::data::{
    ActionScope, DaemonStatus, DeadDetail, OpenMode, Overview, PauseTarget, Progress, Reply,
    Request, TenantData,
};
use crate::fmt::quoted;
use crate::heatmap::HeatSpec;
use crate::keymap::{self, KeyAction, Tab};
use crate::popups::guard::{self, Guard, GuardNext, NoScope, Stage};
use crate::popups::help;
use crate::popups::input::{self, Edit, InputKind};
use crate::popups::Overlay;
use crate::rates::{RateBook, Sample};
use crate::screens::dlq::DlqState;
use crate::screens::heatmap::HeatState;
use crate::screens::migration::{Guide, MigrationState};
use crate::screens::sinks::{self, SinksState};
use crate::screens::tenants::{SortKey, TenantsState};
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

    /// A click on a tab opens its screen, a click on a list row selects
    /// it, the wheel moves the selection as `j`/`k` do (and scrolls the
    /// help). Under a popup only the help's wheel counts: a click never
    /// reaches the screen beneath a guard or an input line.
    fn mouse(&mut self, m: MouseEvent) -> Vec<Effect> {
        let wheel = match m.kind {
            MouseEventKind::ScrollDown => Some(KeyAction::Down),
            MouseEventKind::ScrollUp => Some(KeyAction::Up),
            _ => None,
        };
        if let Some(top) = self.overlays.last() {
            if let (Overlay::Help(scroll), Some(a)) = (top, wheel) {
                let code = if a == KeyAction::Down {
                    KeyCode::Down
                } else {
                    KeyCode::Up
                };
                let k = KeyEvent::new(code, KeyModifiers::NONE);
                if let Some(s) = help::key(*scroll, &k, self.can_act()) {
                    self.set_top(Overlay::Help(s));
                }
            }
            return Vec::new();
        }
        if let Some(a) = wheel {
            return self.move_sel(a);
        }
        if m.kind != MouseEventKind::Down(MouseButton::Left) {
            return Vec::new();
        }
        if m.row == TAB_ROW {
            return match Tab::at(m.column) {
                Some(t) => {
                    self.status.clear();
                    self.goto(t)
                }
                None => Vec::new(),
            };
        }
        if let Some(i) = m.row.checked_sub(LIST_TOP).map(usize::from) {
            if i < self.rows_on_screen() {
                if let Some(s) = self.sel_mut() {
                    *s = i;
                }
            }
        }
        Vec::new()
    }

    fn apply(&mut self, req: Request, result: Result<Reply, String>) -> Vec<Effect> {
        let reply = match result {
            Ok(r) => r,
            Err(e) => {
                if let Request::Execute(scope) = &req {
                    self.note_action(scope, Err(&e));
                }
                if let (Request::Execute(_) | Request::DryRun(_), Some(Overlay::Guard(g))) =
                    (&req, self.overlays.last_mut())
                {
                    g.stage = Stage::Done(Err(e.clone()));
                }
                if matches!(
                    req,
                    Request::MigrationBackup { .. }
                        | Request::MigrationPlan
                        | Request::MigrationStep
                        | Request::MigrationCheck
                        | Request::Reopen
                ) {
                    self.migration.guide = Guide::Failed(e.clone());
                }
                self.error = Some(e);
                return Vec::new();
            }
        };
        self.error = None;
        match reply {
            Reply::Refreshed(d) => {
                self.header.daemon = Some(d);
                if let DaemonStatus::Running(pid) = d {
                    if matches!(self.header.mode, OpenMode::Follow { .. }) {
                        self.header.mode = OpenMode::Follow { pid };
                        self.header.fresh_at = self.now;
                    }
                }
            }
            Reply::Overview(o) => {
                self.header.format = o.format;
                let at = self.header.fresh_at;
                let oldest = o.oldest.map_or(0, |d| d.age_ms(at));
                let s = self.sample(o.totals, &o.node, Some(oldest));
                self.rates.sample_node(s);
                self.overview = Some(o);
            }
            Reply::Tenants(p) => {
                self.sample_tenants(p.rows.iter());
                if self.tenants.on_page(p) {
                    self.order_by_rate();
                    self.clamp_sel();
                }
            }
            Reply::Ranked {
                field,
                rows,
                paused,
                policies,
                at,
            } => {
                if self
                    .tenants
                    .on_ranked(field, rows, (paused, policies), at, &mut self.status)
                {
                    self.clamp_sel();
                }
                let n = self.list_rows();
                let shown: Vec<_> = self
                    .tenants
                    .ranked_visible(n)
                    .into_iter()
                    .cloned()
                    .collect();
                self.sample_tenants(shown.iter());
            }
            Reply::CountersOf(cs) => {
                for (ord, c, totals) in &cs {
                    let s = self.sample(*totals, c, None);
                    self.rates.sample_tenant(*ord, s);
                }
                self.tenants.on_counters(cs)
            }
            Reply::Tenant(t) => {
                let at = self.header.fresh_at;
                let oldest = t.first_due.map_or(0, |r| at.saturating_sub(r.at));
                let s = self.sample(t.totals, &t.counters, Some(oldest));
                self.rates.sample_tenant(t.ord, s);
                if *self.screen() == (Screen::Tenant { ord: t.ord }) {
                    self.tenant = Some(t);
                }
            }
            Reply::TenantByName(name, ord) => match ord {
                Some(ord) => {
                    let dlq = matches!(&req, Request::TenantByName { dlq: true, .. });
                    self.status.clear();
                    let screen = if dlq {
                        Screen::Dlq {
                            ord: Some(ord),
                            name: Some(name),
                        }
                    } else {
                        Screen::Tenant { ord }
                    };
                    return self.push(screen);
                }
                None => self.status = format!("no tenant named {}", quoted(&name, 50)),
            },
            Reply::Heatmap(h) => {
                self.heat.data = Some(h);
                self.clamp_sel();
            }
            Reply::Dlq(d) => {
                if let Screen::Dlq { ord, .. } = self.screen() {
                    if self.dlq.on_page(*ord, d) {
                        self.clamp_sel();
                    }
                }
            }
            Reply::DeadDetail(d) => self.detail = Some(*d),
            Reply::History(h) => {
                let seed: Vec<Sample> = h
                    .samples
                    .iter()
                    .map(|x| Sample {
                        at: x.at,
                        totals: x.totals,
                        backlog: x.backlog,
                        oldest_age_ms: Some(x.oldest_due_age_ms),
                    })
                    .collect();
                self.rates.seed_node(&seed);
            }
            Reply::Sinks(d) => {
                let n = self.list_rows();
                self.sinks.on_sinks(d, n);
                self.clamp_sel();
            }
            Reply::Sink(d) => {
                if let Screen::Sink { sink } = self.screen().clone() {
                    self.sinks.on_sink(&sink, *d);
                }
            }
            Reply::DryRun(scope, count) => {
                if let Some(Overlay::Guard(g)) = self.overlays.last_mut() {
                    g.on_dry_run(&scope, count);
                }
            }
            Reply::MigrationStatus { status, holder, at } => {
                self.migration.on_status(status, holder, at)
            }
            Reply::BackedUp(out) => self.migration.on_backed_up(out, &mut self.status),
            Reply::Plan(p) => self.migration.on_plan(p),
            Reply::Stepped { cursor, finished } => {
                let next = self
                    .migration
                    .on_stepped(cursor, finished, self.now, &mut self.status);
                if finished {
                    self.header.format = self.migration.format;
                }
                return self.follow(next);
            }
            Reply::Checked(r) => self.migration.guide = Guide::Checked(r),
            Reply::Reopened { mode, format } => {
                self.header.mode = mode;
                self.header.format = format;
                self.header.opened_at = self.now;
                self.header.fresh_at = self.now;
                self.migration.guide = Guide::Idle;
                self.migration.format = format;
                self.status = "the migrated store is open".into();
                self.stack = vec![Screen::Overview];
                return self.refresh();
            }
            Reply::Done(r) => {
                self.note_action(&r.scope, Ok(&r));
                self.header.fresh_at = self.now;
                // A ranked list's badges come with its ranking: take it
                // again to show the pause just made or lifted.
                if matches!(r.scope, ActionScope::Pause(_) | ActionScope::Resume(_)) {
                    self.tenants.ranked = None;
                }
                if let Some(Overlay::Guard(g)) = self.overlays.last_mut() {
                    g.stage = Stage::Done(Ok(r));
                }
                self.dlq.clear_marks();
                return self.reload();
            }
        }
        Vec::new()
    }

    /// An action ended: logged for the actions screen with its command
    /// line and API call.
    fn note_action(&mut self, scope: &ActionScope, r: Result<&crate::data::ActionResult, &String>) {
        let (ok, result) = match r {
            Ok(r) => (
                true,
                r.note
                    .clone()
                    .unwrap_or_else(|| format!("done: {} row(s)", r.touched)),
            ),
            Err(e) => (false, format!("failed: {e}")),
        };
        self.actions.push(crate::screens::actions::Entry {
            at: self.now,
            what: scope.describe(),
            result,
            ok,
            equivalent: crate::data::equivalent::of(scope, &self.header.path),
        });
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

    fn key(&mut self, k: KeyEvent) -> Vec<Effect> {
        if let Some(top) = self.overlays.last().cloned() {
            return self.overlay_key(top, k);
        }
        let Some(action) = keymap::lookup(&k) else {
            return Vec::new();
        };
        self.status.clear();
        match action {
            KeyAction::Quit => {
                self.quit = true;
                vec![Effect::Quit]
            }
            // Esc while this console migrates pauses rather than leaving.
            KeyAction::Back if *self.screen() == Screen::Migration && self.migration.running() => {
                self.migration.pause(&mut self.status);
                Vec::new()
            }
            KeyAction::Back => self.back(),
            KeyAction::MigBackup
            | KeyAction::MigPlan
            | KeyAction::MigRun
            | KeyAction::MigPause
            | KeyAction::MigCheck => {
                if *self.screen() != Screen::Migration {
                    self.status = "that key works on the migration screen (5)".into();
                    return Vec::new();
                }
                let next =
                    self.migration
                        .key(action, &self.header.path, self.now, &mut self.status);
                self.follow(next)
            }
            KeyAction::Help => {
                self.overlays.push(Overlay::Help(0));
                Vec::new()
            }
            KeyAction::Filter => {
                self.overlays.push(Overlay::Input {
                    kind: InputKind::Filter,
                    text: self.tenants.filter.clone(),
                });
                Vec::new()
            }
            KeyAction::Command => {
                self.overlays.push(Overlay::Input {
                    kind: InputKind::Command,
                    text: String::new(),
                });
                Vec::new()
            }
            KeyAction::Goto(t) => self.goto(t),
            KeyAction::NextTab => {
                let i = Tab::ALL
                    .iter()
                    .position(|t| *t == self.screen().tab())
                    .unwrap_or(0);
                self.goto(Tab::ALL[(i + 1) % Tab::ALL.len()])
            }
            KeyAction::Refresh => {
                if self.tenants.sort.is_some() && *self.screen() == Screen::Tenants {
                    self.tenants.ranked = None;
                }
                self.refresh()
            }
            KeyAction::Down | KeyAction::Up | KeyAction::Top | KeyAction::Bottom => {
                self.move_sel(action)
            }
            KeyAction::PageDown => self.page(true),
            KeyAction::PageUp => self.page(false),
            KeyAction::Open => self.open(),
            KeyAction::Sort => {
                if *self.screen() != Screen::Tenants {
                    return Vec::new();
                }
                let next = self.tenants.next_sort();
                self.set_sort(next)
            }
            KeyAction::ZoomIn | KeyAction::ZoomOut => {
                if !matches!(self.screen(), Screen::Heatmap | Screen::Tenant { .. }) {
                    return Vec::new();
                }
                self.heat.zoom(action == KeyAction::ZoomIn);
                self.reload()
            }
            KeyAction::TenantDlq => match self.screen().clone() {
                Screen::Tenant { ord } => self.follow(tenant::open_dlq(ord, self.tenant.as_ref())),
                _ => Vec::new(),
            },
            KeyAction::DlqOrder => {
                if let Screen::Dlq { .. } = self.screen() {
                    self.dlq.toggle_order();
                    return self.reload();
                }
                Vec::new()
            }
            KeyAction::Select => {
                if let Screen::Dlq { .. } = self.screen() {
                    self.dlq.toggle_mark();
                }
                Vec::new()
            }
            KeyAction::Purge | KeyAction::Replay | KeyAction::ReplayTenant => {
                self.start_guard(action)
            }
            KeyAction::Copy => self.copy(),
            KeyAction::Actions => self.show_actions(),
            KeyAction::Pause => self.start_pause(false),
            KeyAction::Resume => self.start_pause(true),
        }
    }

    /// `j`/`k`/`g`/`G` (and the wheel) on a list.
    fn move_sel(&mut self, action: KeyAction) -> Vec<Effect> {
        let n = self.rows_on_screen();
        if let Some(s) = self.sel_mut() {
            *s = match action {
                KeyAction::Down => (*s + 1).min(n.saturating_sub(1)),
                KeyAction::Up => s.saturating_sub(1),
                KeyAction::Top => 0,
                _ => n.saturating_sub(1),
            };
        }
        if action == KeyAction::Top {
            return self.first_page();
        }
        Vec::new()
    }

    fn open(&mut self) -> Vec<Effect> {
        let next = match self.screen().clone() {
            Screen::Tenants => self.tenants.open(self.list_rows()),
            Screen::Heatmap => self.heat.open(),
            Screen::Tenant { ord } => tenant::open_dlq(ord, self.tenant.as_ref()),
            Screen::Dlq { .. } => self.dlq.open(),
            Screen::Migration => self.migration.open(),
            Screen::Overview => overview::open(self.overview.as_ref()),
            Screen::Sinks => self.sinks.open(self.list_rows()),
            _ => Next::Stay,
        };
        self.follow(next)
    }

    /// `:replay-since 2h`: replay the rows dead-lettered in the last `d`,
    /// of the tenant whose DLQ is shown, else of every tenant.
    fn replay_since(&mut self, d: &str) -> Vec<Effect> {
        let Ok(span) = humantime::parse_duration(d.trim()) else {
            self.status = format!(
                "{} is not a duration (try :replay-since 30m)",
                quoted(d, 30)
            );
            return Vec::new();
        };
        if !self.can_act() {
            self.status = CANNOT_ACT.into();
            return Vec::new();
        }
        let ms = u64::try_from(span.as_millis()).unwrap_or(u64::MAX);
        let scope =
            guard::since_scope(self.now, ms, self.screen(), self.tenant.as_ref(), &self.dlq);
        self.follow(Next::Guard(scope))
    }

    /// `:policy weight=4 cap=20` or `:policy clear` on a tenant's detail:
    /// the guard shows the stored policy and what it becomes.
    fn policy(&mut self, arg: &str) -> Vec<Effect> {
        if !self.can_act() {
            self.status = CANNOT_ACT.into();
            return Vec::new();
        }
        match guard::policy_scope(arg, self.screen(), self.tenant.as_ref()) {
            Ok(scope) => self.follow(Next::Guard(scope)),
            Err(why) => {
                self.status = why;
                Vec::new()
            }
        }
    }

    /// `:limit max_in_flight=4 rate=20/s` or `:limit clear` on the sinks
    /// screen or a sink's detail: the selected (or open) sink.
    fn limit(&mut self, arg: &str) -> Vec<Effect> {
        if !self.can_act() {
            self.status = CANNOT_ACT.into();
            return Vec::new();
        }
        let n = self.list_rows();
        let screen = self.screen().clone();
        let shown = matches!(screen, Screen::Sinks | Screen::Sink { .. })
            .then(|| self.sinks.shown(&screen, n))
            .flatten();
        match guard::limits_scope(arg, shown) {
            Ok(scope) => self.follow(Next::Guard(scope)),
            Err(why) => {
                self.status = why;
                Vec::new()
            }
        }
    }

    fn start_guard(&mut self, action: KeyAction) -> Vec<Effect> {
        if !self.can_act() {
            self.status = CANNOT_ACT.into();
            return Vec::new();
        }
        match guard::scope_for(action, self.screen(), self.tenant.as_ref(), &self.dlq) {
            Ok(scope) => self.follow(Next::Guard(scope)),
            Err(NoScope::Nothing) => Vec::new(),
            Err(NoScope::NotHere) => {
                self.status = "that action does not apply here (see ?)".into();
                Vec::new()
            }
        }
    }

    /// `H` / `U`: the guarded pause or resume of what the screen selects
    /// (the tenant on the tenants list or its detail, the sink on the sinks
    /// list or its detail). Refused at once when there is nothing to do
    /// (pausing what is paused, resuming what is not): the guard is for a
    /// change.
    /// `y`: the id of what is selected (a hook in the DLQ or a dead
    /// delivery, a tenant in the list or its detail, a sink), for the
    /// clipboard; the footer says what was copied.
    fn copy(&mut self) -> Vec<Effect> {
        let n = self.list_rows();
        let found: Option<(&str, String)> = match self.screen().clone() {
            Screen::Dlq { .. } => self.dlq.selected().map(|r| ("hook id", r.hook_id.clone())),
            Screen::DeadDetail { row } => Some(("hook id", row.hook_id)),
            Screen::Tenants => self.tenants.selected(n).map(|(id, _)| ("tenant", id)),
            Screen::Tenant { ord } => self
                .tenant
                .as_ref()
                .filter(|t| t.ord == ord)
                .map(|t| ("tenant", t.name.clone())),
            s @ (Screen::Sinks | Screen::Sink { .. }) => self
                .sinks
                .pause_target(&s, n)
                .and_then(|(t, _)| t.sink)
                .map(|(k, name)| ("sink", format!("{}/{name}", k.source))),
            Screen::Actions => self
                .actions
                .selected()
                .and_then(|e| e.equivalent.as_ref())
                .map(|e| ("command", e.cli.clone())),
            _ => None,
        };
        let Some((what, text)) = found else {
            self.status = "y copies the selected hook, tenant or sink: nothing to copy here".into();
            return Vec::new();
        };
        if crate::clipboard::osc52(&text).is_none() {
            self.status = format!("cannot copy that {what}");
            return Vec::new();
        }
        self.status = format!("copied {what} {} (OSC 52)", quoted(&text, 40));
        vec![Effect::Copy(text)]
    }

    fn start_pause(&mut self, resume: bool) -> Vec<Effect> {
        if !self.can_act() {
            self.status = CANNOT_ACT.into();
            return Vec::new();
        }
        let n = self.list_rows();
        let found = match self.screen().clone() {
            Screen::Tenants => self.tenants.selected(n).map(|(id, paused)| {
                let t = PauseTarget {
                    tenant: Some(id),
                    sink: None,
                };
                (t, paused)
            }),
            Screen::Tenant { ord } => self.tenant.as_ref().filter(|t| t.ord == ord).map(|t| {
                let paused = t.paused.iter().any(|p| {
                    p.pause.scope.sink.is_none()
                        && p.pause.scope.tenant.as_deref() == Some(t.name.as_str())
                });
                let target = PauseTarget {
                    tenant: Some(t.name.clone()),
                    sink: None,
                };
                (target, paused)
            }),
            s @ (Screen::Sinks | Screen::Sink { .. }) => self.sinks.pause_target(&s, n),
            _ => {
                self.status = "pause and resume work on tenants and sinks (see ?)".into();
                return Vec::new();
            }
        };
        let Some((target, paused)) = found else {
            return Vec::new();
        };
        self.guard_pause(target, paused, resume)
    }

    /// `:pause-for TENANT` / `:resume-for TENANT` on the sinks list or a
    /// sink's detail: the guarded pause or resume of that sink for one
    /// tenant (its other sinks, and other tenants on this sink, go on).
    fn pause_sink_for(&mut self, tenant: &str, resume: bool) -> Vec<Effect> {
        if !self.can_act() {
            self.status = CANNOT_ACT.into();
            return Vec::new();
        }
        let n = self.list_rows();
        let screen = self.screen().clone();
        if !matches!(screen, Screen::Sinks | Screen::Sink { .. }) {
            self.status =
                "pause-for and resume-for name a tenant on the sinks screen (see ?)".into();
            return Vec::new();
        }
        let Some((mut target, _)) = self.sinks.pause_target(&screen, n) else {
            return Vec::new();
        };
        let paused = self.sinks.paused_for(&screen, n, tenant);
        target.tenant = Some(tenant.to_owned());
        self.guard_pause(target, paused, resume)
    }

    /// The guard of a pause or resume of `target`, refused at once when
    /// there is nothing to do.
    fn guard_pause(&mut self, target: PauseTarget, paused: bool, resume: bool) -> Vec<Effect> {
        if paused != resume {
            self.status = if resume {
                format!("{} is not paused", quoted(&target.label(), 50))
            } else {
                format!(
                    "{} is already paused (U resumes)",
                    quoted(&target.label(), 40)
                )
            };
            return Vec::new();
        }
        let scope = if resume {
            ActionScope::Resume(target)
        } else {
            ActionScope::Pause(target)
        };
        self.follow(Next::Guard(scope))
    }

    fn overlay_key(&mut self, top: Overlay, k: KeyEvent) -> Vec<Effect> {
        match top {
            Overlay::Help(scroll) => {
                match help::key(scroll, &k, self.can_act()) {
                    Some(s) => self.set_top(Overlay::Help(s)),
                    None => {
                        self.overlays.pop();
                    }
                }
                Vec::new()
            }
            Overlay::Input { kind, mut text } => match input::key(&mut text, &k) {
                Edit::Cancel => {
                    self.overlays.pop();
                    self.prompt_history.reset();
                    Vec::new()
                }
                Edit::Submit => {
                    self.overlays.pop();
                    match kind {
                        InputKind::Filter => self.set_filter(text),
                        InputKind::Command => {
                            self.prompt_history.push(&text);
                            self.command(&text)
                        }
                    }
                }
                walk @ (Edit::Older | Edit::Newer) => {
                    if kind == InputKind::Command {
                        let shown = if walk == Edit::Older {
                            self.prompt_history.older(&text)
                        } else {
                            self.prompt_history.newer()
                        };
                        if let Some(t) = shown {
                            text = t;
                        }
                        self.set_top(Overlay::Input { kind, text });
                    }
                    Vec::new()
                }
                Edit::Editing => {
                    self.set_top(Overlay::Input { kind, text });
                    Vec::new()
                }
            },
            Overlay::Guard(mut g) => {
                let next = g.key(&k, &mut self.status);
                self.set_top(Overlay::Guard(g));
                match next {
                    GuardNext::Stay => Vec::new(),
                    GuardNext::Close { refresh } => {
                        self.overlays.pop();
                        if refresh {
                            self.refresh()
                        } else {
                            Vec::new()
                        }
                    }
                    GuardNext::Fetch(req) => self.fetch(vec![req]),
                    GuardNext::Migrate => {
                        self.overlays.pop();
                        self.status.clear();
                        let next = self.migration.run();
                        self.follow(next)
                    }
                }
            }
        }
    }

    fn set_top(&mut self, o: Overlay) {
        if let Some(top) = self.overlays.last_mut() {
            *top = o;
        }
    }

    fn set_filter(&mut self, text: String) -> Vec<Effect> {
        self.tenants.set_filter(text);
        if *self.screen() != Screen::Tenants {
            self.stack = vec![Screen::Tenants];
        }
        self.reload()
    }

    fn set_sort(&mut self, k: SortKey) -> Vec<Effect> {
        self.tenants.set_sort(k, &mut self.status);
        self.order_by_rate();
        self.reload()
    }

    /// Orders the page shown by its rows' rates, when sorted by a rate
    /// (fastest first; rows without a rate yet last, by ordinal).
    fn order_by_rate(&mut self) {
        let (Some(t), Some(p)) = (self.tenants.rate_sort, &self.tenants.page) else {
            return;
        };
        let live = self.rates_live();
        let mut v: Vec<(f64, u32)> = p
            .rows
            .iter()
            .map(|r| {
                let rate = self
                    .rates
                    .tenant(r.ord)
                    .and_then(|s| s.rate(t))
                    .filter(|_| live)
                    .map_or(-1.0, |r| r.per_s);
                (rate, r.ord)
            })
            .collect();
        v.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        self.tenants.rate_order = v.into_iter().map(|(_, o)| o).collect();
    }

    fn first_page(&mut self) -> Vec<Effect> {
        if *self.screen() == Screen::Sinks {
            // The whole list is one answer: paging fetches nothing.
            self.sinks.page = 0;
            return Vec::new();
        }
        let moved = match self.screen() {
            Screen::Tenants => self.tenants.first_page(),
            Screen::Dlq { .. } => self.dlq.first_page(),
            Screen::Heatmap => self.heat.first_page(),
            _ => false,
        };
        self.reload_if(moved)
    }

    fn page(&mut self, down: bool) -> Vec<Effect> {
        let n = self.list_rows();
        if *self.screen() == Screen::Sinks {
            self.sinks.page(down, n, &mut self.status);
            return Vec::new();
        }
        let moved = match self.screen() {
            Screen::Tenants => self.tenants.page(down, n, &mut self.status),
            Screen::Dlq { .. } => self.dlq.page(down, &mut self.status),
            Screen::Heatmap => self.heat.page(down, n),
            _ => false,
        };
        self.reload_if(moved)
    }

    /// `:` commands ([`crate::commands`] says which there are).
    pub fn command(&mut self, line: &str) -> Vec<Effect> {
        let p = match commands::parse(line) {
            Ok(p) => p,
            Err(Refused::Unknown(l)) => {
                self.status = format!("unknown command {} (see ?)", quoted(&l, 40));
                return Vec::new();
            }
            Err(Refused::NeedsArgument(s)) => {
                self.status = format!("{} needs its argument: {}", s.name, s.usage());
                return Vec::new();
            }
            Err(Refused::TakesNone(s)) => {
                self.status = format!("{} takes no argument: {}", s.name, s.usage());
                return Vec::new();
            }
        };
        let arg = p.arg.as_str();
        match p.what {
            What::Quit => {
                self.quit = true;
                vec![Effect::Quit]
            }
            What::Goto(tab) => self.goto(tab),
            What::Tenants if arg.is_empty() => self.goto(Tab::Tenants),
            What::Dlq if arg.is_empty() => self.goto(Tab::Dlq),
            What::Dlq => self.fetch(vec![Request::TenantByName {
                name: arg.to_owned(),
                dlq: true,
            }]),
            What::DlqType => self.dlq_type(arg),
            What::Actions => self.show_actions(),
            What::Tenants | What::Tenant => self.fetch(vec![Request::TenantByName {
                name: arg.to_owned(),
                dlq: false,
            }]),
            What::ReplaySince => self.replay_since(arg),
            What::Repair => self.repair(),
            What::Drain => self.drain(true),
            What::Undrain => self.drain(false),
            What::Policy => self.policy(arg),
            What::Limit => self.limit(arg),
            What::PauseFor => self.pause_sink_for(arg, false),
            What::ResumeFor => self.pause_sink_for(arg, true),
            What::Sort => self.sort_by(arg),
        }
    }

    /// `8`, `:actions`: this console's actions.
    fn show_actions(&mut self) -> Vec<Effect> {
        self.stack = vec![Screen::Actions];
        Vec::new()
    }

    /// `:dlq-type PATTERN`: the DLQ shown (the node's, unless a tenant's
    /// is on screen) narrowed to an event type pattern; alone, every row.
    fn dlq_type(&mut self, arg: &str) -> Vec<Effect> {
        let pattern = if arg.is_empty() {
            None
        } else {
            match ankusa_ops::event_type::Pattern::parse(arg) {
                Ok(_) => Some(arg.to_owned()),
                Err(m) => {
                    self.status = format!("dlq-type: {m}");
                    return Vec::new();
                }
            }
        };
        if !matches!(self.screen(), Screen::Dlq { .. }) {
            let s = Screen::of_tab(Tab::Dlq);
            self.enter(&s);
            self.stack = vec![s];
        }
        self.dlq.set_event_type(pattern);
        self.reload()
    }

    /// `:sort FIELD`: a counter, `archive`, a rate (`delivered/s`), or the
    /// ordinal (alone).
    fn sort_by(&mut self, f: &str) -> Vec<Effect> {
        match f {
            "ord" | "ordinal" | "" => {
                self.stack = vec![Screen::Tenants];
                self.set_sort(SortKey::Ordinal)
            }
            f => match Field::parse(f)
                .or_else(|| (f == "archive").then_some(Field::ArchivePending))
                .map(SortKey::Counter)
                .or_else(|| {
                    let name = f.strip_suffix("/s")?.replace('-', "_");
                    ankusa_store::Total::ALL
                        .into_iter()
                        .find(|t| t.name() == name)
                        .map(SortKey::Rate)
                }) {
                Some(key) => {
                    self.stack = vec![Screen::Tenants];
                    self.set_sort(key)
                }
                None => {
                    self.status = format!("unknown counter {} (see ?)", quoted(f, 40));
                    Vec::new()
                }
            },
        }
    }

    /// `:drain` / `:undrain`: the guarded drain (undrain) of the node this
    /// console acts on, through the daemon it follows (or on the stopped
    /// store it holds with `--write`): the same audited call as `ankusa
    /// node drain|undrain`.
    fn drain(&mut self, on: bool) -> Vec<Effect> {
        if !self.can_act() {
            self.status = CANNOT_ACT.into();
            return Vec::new();
        }
        self.follow(Next::Guard(ActionScope::Drain { on, node: None }))
    }

    /// `:repair`: the guarded `store repair` of the store this console
    /// holds. Only a console opened with `--write` holds it; the dry run
    /// says how many things a repair would change (0 on a healthy store).
    fn repair(&mut self) -> Vec<Effect> {
        if self.header.mode != OpenMode::Write {
            self.status =
                "repair needs a stopped store: reopen the console with --write (no daemon)".into();
            return Vec::new();
        }
        self.follow(Next::Guard(crate::data::ActionScope::Repair))
    }
}
