//! The console's state and its one update function: `update(msg)` changes
//! the state and returns effects (fetches for the data source, quit). No
//! terminal and no store here, so every key sequence is testable.

use std::collections::BTreeSet;
use std::path::PathBuf;

use ankusa_ops::model::Kinds;
use ankusa_store::check::CheckReport;
use ankusa_store::counters::Field;
use ankusa_store::migrate::{Cursor, Plan, Status};
use ankusa_store::queries::DlqCursor;
use ankusa_store::rows::DeadRow;
use ankusa_store::tenants::TenantInfo;
use crossterm::event::{KeyCode, KeyEvent};

use crate::data::{
    ActionResult, ActionScope, DaemonStatus, DeadDetail, DlqData, HeatmapData, OpenMode, Overview,
    Progress, Reply, Request, TenantDetail, TenantsAfter, TenantsPage, TenantsQuery, RANK_LIMIT,
};
use crate::heatmap::{HeatSpec, ZOOMS};
use crate::keymap::{self, Action, Tab};

/// Inputs to [`App::update`].
// A message is moved once per event; boxing the reply would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Msg {
    Key(KeyEvent),
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
    Quit,
}

/// A screen on the navigation stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Screen {
    Overview,
    Tenants,
    Tenant {
        ord: u32,
    },
    Heatmap,
    Dlq {
        ord: Option<u32>,
        name: Option<String>,
    },
    DeadDetail {
        row: DeadRow,
    },
    Migration,
    Log,
}

impl Screen {
    pub fn tab(&self) -> Tab {
        match self {
            Screen::Overview => Tab::Overview,
            Screen::Tenants | Screen::Tenant { .. } => Tab::Tenants,
            Screen::Heatmap => Tab::Heatmap,
            Screen::Dlq { .. } | Screen::DeadDetail { .. } => Tab::Dlq,
            Screen::Migration => Tab::Migration,
            Screen::Log => Tab::Log,
        }
    }

    fn of_tab(t: Tab) -> Screen {
        match t {
            Tab::Overview => Screen::Overview,
            Tab::Tenants => Screen::Tenants,
            Tab::Heatmap => Screen::Heatmap,
            Tab::Dlq => Screen::Dlq {
                ord: None,
                name: None,
            },
            Tab::Migration => Screen::Migration,
            Tab::Log => Screen::Log,
        }
    }
}

/// Text input popups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputKind {
    Filter,
    Command,
}

/// A guarded action's stages: exact scope and dry-run count, typed
/// confirmation, progress, result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    Counting,
    Confirm { count: u64, typed: String },
    Running(Progress),
    Done(Result<ActionResult, String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    pub scope: ActionScope,
    pub stage: Stage,
}

/// The popup stack (top is last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    /// The help overlay, scrolled down by this many lines.
    Help(u16),
    Input {
        kind: InputKind,
        text: String,
    },
    Guard(Guard),
}

/// What the migration screen shows: the polled status of a migration
/// (this console's or another process's `ankusa store migrate`), its rate
/// from successive samples, and the guided path's stage.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MigrationState {
    pub format: Option<u32>,
    pub migrating: bool,
    /// `--read-only` was given: the guided path is not offered.
    pub read_only: bool,
    /// The last polled status and the pid holding the store, if any.
    pub status: Option<Status>,
    pub holder: Option<i32>,
    /// The latest cursor seen (polled, or from this console's own steps).
    pub cursor: Option<Cursor>,
    /// (ms, rows moved) samples for the rate, oldest first, at most
    /// [`RATE_SAMPLES`], none older than [`RATE_WINDOW_MS`] before the last.
    pub samples: Vec<(u64, u64)>,
    pub guide: Guide,
    /// Where this console wrote a backup, if it did.
    pub backup: Option<PathBuf>,
    /// The dry run's plan, if asked for.
    pub plan: Option<Plan>,
}

/// The guided migration's stage (backup → dry run → run → check).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Guide {
    #[default]
    Idle,
    BackingUp(PathBuf),
    Planning,
    /// Steps are being sent one after another.
    Running,
    /// Pause asked: the step under way completes, then no more are sent.
    Pausing,
    Paused,
    Checking,
    Checked(Box<CheckReport>),
    Reopening,
    Failed(String),
}

/// The rate is measured over this much recent time.
pub const RATE_WINDOW_MS: u64 = 10_000;
/// Samples kept for the rate.
pub const RATE_SAMPLES: usize = 64;

impl MigrationState {
    pub fn new(format: Option<u32>, migrating: bool, read_only: bool) -> Self {
        Self {
            format,
            migrating,
            read_only,
            ..Self::default()
        }
    }

    /// Records rows moved at `at` (ms). A count below the last one means a
    /// different migration (a restored backup): the samples restart.
    pub fn sample(&mut self, at: u64, rows: u64) {
        if let Some(&(t, r)) = self.samples.last() {
            if rows < r || at < t {
                self.samples.clear();
            } else if at == t {
                // Same instant: keep the newest count only.
                self.samples.pop();
            }
        }
        self.samples.push((at, rows));
        let horizon = at.saturating_sub(RATE_WINDOW_MS);
        // Keep one sample at or before the horizon so the window is full.
        while self.samples.len() > 2 && self.samples[1].0 <= horizon {
            self.samples.remove(0);
        }
        if self.samples.len() > RATE_SAMPLES {
            self.samples.remove(0);
        }
    }

    /// Rows per second over the recent samples; None until two samples
    /// apart in time exist.
    pub fn rate_per_s(&self) -> Option<f64> {
        let (&(t0, r0), &(t1, r1)) = (self.samples.first()?, self.samples.last()?);
        (t1 > t0).then(|| (r1 - r0) as f64 * 1000.0 / (t1 - t0) as f64)
    }

    /// Time left at the current rate, in ms; None with no rate (or 0 rate).
    pub fn eta_ms(&self) -> Option<u64> {
        let c = self.cursor.as_ref()?;
        let left = c.rows_total().saturating_sub(c.rows_done());
        match self.rate_per_s() {
            Some(r) if r > 0.0 => Some((left as f64 / r * 1000.0) as u64),
            _ if left == 0 => Some(0),
            _ => None,
        }
    }

    /// Whether this console may offer the guided path: a store that needs
    /// migrating (or is mid-way), that no other process holds, without
    /// `--read-only`.
    pub fn can_guide(&self) -> bool {
        !self.read_only
            && self.holder.is_none()
            && matches!(
                self.status,
                Some(Status::Needed | Status::InProgress { .. })
            )
    }

    /// Whether this console is stepping the migration.
    pub fn running(&self) -> bool {
        matches!(self.guide, Guide::Running | Guide::Pausing)
    }
}

/// The header's facts about the store.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub path: PathBuf,
    pub mode: OpenMode,
    pub format: Option<u32>,
    pub opened_at: u64,
    /// When the shown data last matched the store.
    pub fresh_at: u64,
    pub daemon: Option<DaemonStatus>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TenantsState {
    pub filter: String,
    pub sort: Option<Field>,
    /// Where the current page starts (an ordinal, or a name under a prefix
    /// filter), and the pages before.
    pub after: Option<TenantsAfter>,
    pub back: Vec<Option<TenantsAfter>>,
    pub page: Option<TenantsPage>,
    /// Counter order: the ranking (taken when the sort was picked) and the
    /// page shown of it.
    pub ranked: Option<(Field, Vec<TenantInfo>, u64)>,
    pub rank_page: usize,
    pub sel: usize,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DlqState {
    /// Newest first (what just failed) or oldest first (what waited longest).
    pub order: ankusa_store::queries::DlqOrder,
    pub cursor: Option<DlqCursor>,
    pub back: Vec<Option<DlqCursor>>,
    pub data: Option<DlqData>,
    pub sel: usize,
    pub marked: BTreeSet<(u64, u64, u16)>,
    pub marked_rows: Vec<DeadRow>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HeatState {
    pub zoom: usize,
    pub offset: usize,
    pub sel: usize,
    pub data: Option<HeatmapData>,
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
    pub tenant: Option<TenantDetail>,
    pub heat: HeatState,
    pub dlq: DlqState,
    pub detail: Option<DeadDetail>,
    pub migration: MigrationState,
    pub status: String,
    pub error: Option<String>,
    /// Fetches sent and not answered yet.
    pub busy: usize,
    pub last_refresh: Option<u64>,
    pub quit: bool,
}

/// Rows of chrome around a list: header 2, footer 1, block borders 2,
/// column titles 1.
const CHROME: u16 = 6;

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
            heat: HeatState {
                zoom: 0,
                offset: 0,
                sel: 0,
                data: None,
            },
            dlq: DlqState::default(),
            detail: None,
            migration,
            status: String::new(),
            error: None,
            busy: 0,
            last_refresh: None,
            quit: false,
        }
    }

    pub fn screen(&self) -> &Screen {
        self.stack.last().unwrap_or(&Screen::Overview)
    }

    /// Whether guarded actions are offered ([`OpenMode::can_act`]).
    pub fn can_act(&self) -> bool {
        self.header.mode.can_act()
    }

    /// Rows a list screen shows at the current size.
    pub fn list_rows(&self) -> usize {
        usize::from(self.height.saturating_sub(CHROME)).max(1)
    }

    /// Heatmap geometry at the current size.
    pub fn heat_spec(&self) -> HeatSpec {
        let cols = usize::from(self.width.saturating_sub(2 + NAME_COL as u16 + 1)).max(8);
        HeatSpec::new(ZOOMS[self.heat.zoom.min(ZOOMS.len() - 1)], cols)
    }

    /// Rows of the DLQ shown inside the tenant detail.
    pub fn detail_dlq_rows(&self) -> usize {
        usize::from(self.height.saturating_sub(18)).clamp(3, 20)
    }

    fn fetch(&mut self, reqs: Vec<Request>) -> Vec<Effect> {
        self.busy += reqs.len();
        reqs.into_iter().map(Effect::Fetch).collect()
    }

    /// The requests that refresh the current screen.
    pub fn screen_requests(&self) -> Vec<Request> {
        if *self.screen() == Screen::Migration {
            // Our own steps report their cursor; polling meanwhile would
            // only queue behind them.
            return if self.migration.running() {
                Vec::new()
            } else {
                vec![Request::MigrationStatus]
            };
        }
        if self.header.mode == OpenMode::NeedsMigration {
            return Vec::new();
        }
        match self.screen() {
            Screen::Overview => vec![Request::Overview],
            Screen::Tenants => match (self.tenants.sort, &self.tenants.ranked) {
                (Some(f), Some((rf, _, _))) if *rf == f => {
                    let ords: Vec<u32> = self.ranked_visible().iter().map(|t| t.ord).collect();
                    if ords.is_empty() {
                        Vec::new()
                    } else {
                        vec![Request::CountersOf(ords)]
                    }
                }
                (Some(f), _) => vec![Request::Rank {
                    field: f,
                    limit: RANK_LIMIT,
                }],
                (None, _) => vec![Request::Tenants(TenantsQuery {
                    after: self.tenants.after.clone(),
                    filter: self.tenants.filter.clone(),
                    limit: self.list_rows(),
                })],
            },
            Screen::Tenant { ord } => vec![Request::Tenant {
                ord: *ord,
                dlq_limit: self.detail_dlq_rows(),
                heat: self.heat_spec(),
            }],
            Screen::Heatmap => vec![Request::Heatmap {
                offset: self.heat.offset,
                rows: self.list_rows().saturating_sub(2).max(1),
                heat: self.heat_spec(),
            }],
            Screen::Dlq { ord, .. } => vec![Request::Dlq {
                ord: *ord,
                cursor: self.dlq.cursor,
                limit: self.list_rows(),
                order: self.dlq.order,
            }],
            Screen::DeadDetail { row } => vec![Request::DeadDetail(row.clone())],
            Screen::Migration | Screen::Log => Vec::new(),
        }
    }

    /// The ranked rows on the current page, filtered by name prefix (the
    /// same rule as the unsorted list's range scan).
    pub fn ranked_visible(&self) -> Vec<&TenantInfo> {
        let Some((_, rows, _)) = &self.tenants.ranked else {
            return Vec::new();
        };
        let prefix = self.tenants.filter.as_str();
        let n = self.list_rows();
        rows.iter()
            .filter(|t| t.id.starts_with(prefix))
            .skip(self.tenants.rank_page * n)
            .take(n)
            .collect()
    }

    /// The tenant rows the tenants screen shows.
    pub fn tenant_rows(&self) -> Vec<&TenantInfo> {
        if self.tenants.sort.is_some() {
            return self.ranked_visible();
        }
        match &self.tenants.page {
            Some(p) => p.rows.iter().collect(),
            None => Vec::new(),
        }
    }

    fn refresh(&mut self) -> Vec<Effect> {
        self.last_refresh = Some(self.now);
        let mut reqs = vec![Request::Refresh];
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
        }
    }

    fn apply(&mut self, req: Request, result: Result<Reply, String>) -> Vec<Effect> {
        let reply = match result {
            Ok(r) => r,
            Err(e) => {
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
                self.overview = Some(o);
            }
            Reply::Tenants(p) => {
                if p.query.after == self.tenants.after && p.query.filter == self.tenants.filter {
                    self.tenants.page = Some(p);
                    self.clamp_sel();
                }
            }
            Reply::Ranked { field, rows, at } => {
                if self.tenants.sort == Some(field) {
                    self.status.clear();
                    self.tenants.ranked = Some((field, rows, at));
                    self.clamp_sel();
                }
            }
            Reply::CountersOf(cs) => {
                if let Some((_, rows, _)) = &mut self.tenants.ranked {
                    for (ord, c) in cs {
                        if let Some(t) = rows.iter_mut().find(|t| t.ord == ord) {
                            t.counters = c;
                        }
                    }
                }
            }
            Reply::Tenant(t) => {
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
                None => self.status = format!("no tenant named {name:?}"),
            },
            Reply::Heatmap(h) => {
                self.heat.data = Some(h);
                self.clamp_sel();
            }
            Reply::Dlq(d) => {
                if let Screen::Dlq { ord, .. } = self.screen() {
                    if *ord == d.ord && d.cursor == self.dlq.cursor && d.order == self.dlq.order {
                        self.dlq.data = Some(d);
                        self.clamp_sel();
                    }
                }
            }
            Reply::DeadDetail(d) => self.detail = Some(*d),
            Reply::DryRun(scope, count) => {
                if let Some(Overlay::Guard(g)) = self.overlays.last_mut() {
                    if g.scope == scope {
                        g.stage = Stage::Confirm {
                            count,
                            typed: String::new(),
                        };
                    }
                }
            }
            Reply::MigrationStatus { status, holder, at } => {
                let m = &mut self.migration;
                m.holder = holder;
                match &status {
                    Status::InProgress { cursor } => {
                        m.migrating = true;
                        m.sample(at, cursor.rows_done());
                        m.cursor = Some(cursor.clone());
                    }
                    Status::Done => {
                        m.migrating = false;
                        m.format = Some(ankusa_store::FORMAT);
                    }
                    Status::Needed => m.migrating = false,
                }
                m.status = Some(status);
            }
            Reply::BackedUp(out) => {
                self.status = format!("backup written to {}", out.display());
                self.migration.backup = Some(out);
                self.migration.guide = Guide::Idle;
            }
            Reply::Plan(p) => {
                self.migration.plan = Some(p);
                self.migration.guide = Guide::Idle;
            }
            Reply::Stepped { cursor, finished } => {
                let m = &mut self.migration;
                m.sample(self.now, cursor.rows_done());
                m.migrating = !finished;
                m.status = Some(if finished {
                    Status::Done
                } else {
                    Status::InProgress {
                        cursor: cursor.clone(),
                    }
                });
                m.cursor = Some(cursor);
                if finished {
                    m.format = Some(ankusa_store::FORMAT);
                    self.header.format = m.format;
                    m.guide = Guide::Checking;
                    return self.fetch(vec![Request::MigrationCheck]);
                }
                match m.guide {
                    Guide::Running => return self.fetch(vec![Request::MigrationStep]),
                    Guide::Pausing => {
                        m.guide = Guide::Paused;
                        self.status =
                            "paused between steps: nothing is half done; M resumes".into();
                    }
                    _ => {}
                }
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
                self.header.fresh_at = self.now;
                if let Some(Overlay::Guard(g)) = self.overlays.last_mut() {
                    g.stage = Stage::Done(Ok(r));
                }
                self.dlq.marked.clear();
                self.dlq.marked_rows.clear();
                return self.reload();
            }
        }
        Vec::new()
    }

    fn rows_on_screen(&self) -> usize {
        match self.screen() {
            Screen::Tenants => self.tenant_rows().len(),
            Screen::Heatmap => self.heat.data.as_ref().map_or(0, |d| d.rows.len()),
            Screen::Dlq { .. } => self.dlq.data.as_ref().map_or(0, |d| d.page.entries.len()),
            _ => 0,
        }
    }

    fn sel_mut(&mut self) -> Option<&mut usize> {
        match self.screen() {
            Screen::Tenants => Some(&mut self.tenants.sel),
            Screen::Heatmap => Some(&mut self.heat.sel),
            Screen::Dlq { .. } => Some(&mut self.dlq.sel),
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
            Action::Quit => {
                self.quit = true;
                vec![Effect::Quit]
            }
            // Esc while this console migrates pauses rather than leaving.
            Action::Back if *self.screen() == Screen::Migration && self.migration.running() => {
                self.pause_migration()
            }
            Action::Back => self.back(),
            Action::MigBackup
            | Action::MigPlan
            | Action::MigRun
            | Action::MigPause
            | Action::MigCheck => self.migration_key(action),
            Action::Help => {
                self.overlays.push(Overlay::Help(0));
                Vec::new()
            }
            Action::Filter => {
                self.overlays.push(Overlay::Input {
                    kind: InputKind::Filter,
                    text: self.tenants.filter.clone(),
                });
                Vec::new()
            }
            Action::Command => {
                self.overlays.push(Overlay::Input {
                    kind: InputKind::Command,
                    text: String::new(),
                });
                Vec::new()
            }
            Action::Goto(t) => self.goto(t),
            Action::NextTab => {
                let i = Tab::ALL
                    .iter()
                    .position(|t| *t == self.screen().tab())
                    .unwrap_or(0);
                self.goto(Tab::ALL[(i + 1) % Tab::ALL.len()])
            }
            Action::Refresh => {
                if self.tenants.sort.is_some() && *self.screen() == Screen::Tenants {
                    self.tenants.ranked = None;
                }
                self.refresh()
            }
            Action::Down | Action::Up | Action::Top | Action::Bottom => {
                let n = self.rows_on_screen();
                let at_top = matches!(action, Action::Top);
                if let Some(s) = self.sel_mut() {
                    *s = match action {
                        Action::Down => (*s + 1).min(n.saturating_sub(1)),
                        Action::Up => s.saturating_sub(1),
                        Action::Top => 0,
                        _ => n.saturating_sub(1),
                    };
                }
                if at_top {
                    return self.first_page();
                }
                Vec::new()
            }
            Action::PageDown => self.page(true),
            Action::PageUp => self.page(false),
            Action::Open => self.open(),
            Action::Sort => {
                if *self.screen() != Screen::Tenants {
                    return Vec::new();
                }
                let order: [Option<Field>; 7] = [
                    None,
                    Some(Field::Pending),
                    Some(Field::Scheduled),
                    Some(Field::Inflight),
                    Some(Field::Dead),
                    Some(Field::Bytes),
                    Some(Field::ArchivePending),
                ];
                let i = order
                    .iter()
                    .position(|f| *f == self.tenants.sort)
                    .unwrap_or(0);
                self.set_sort(order[(i + 1) % order.len()])
            }
            Action::ZoomIn | Action::ZoomOut => {
                if !matches!(self.screen(), Screen::Heatmap | Screen::Tenant { .. }) {
                    return Vec::new();
                }
                let z = self.heat.zoom;
                self.heat.zoom = if action == Action::ZoomIn {
                    z.saturating_sub(1)
                } else {
                    (z + 1).min(ZOOMS.len() - 1)
                };
                self.reload()
            }
            Action::TenantDlq => match (self.screen().clone(), &self.tenant) {
                (Screen::Tenant { ord }, t) => {
                    let name = t.as_ref().filter(|t| t.ord == ord).map(|t| t.name.clone());
                    self.push(Screen::Dlq {
                        ord: Some(ord),
                        name,
                    })
                }
                _ => Vec::new(),
            },
            Action::DlqOrder => {
                if let Screen::Dlq { .. } = self.screen() {
                    use ankusa_store::queries::DlqOrder;
                    self.dlq.order = match self.dlq.order {
                        DlqOrder::NewestFirst => DlqOrder::OldestFirst,
                        DlqOrder::OldestFirst => DlqOrder::NewestFirst,
                    };
                    // Pages of the other order start over; marks stay.
                    self.dlq.cursor = None;
                    self.dlq.back.clear();
                    self.dlq.sel = 0;
                    self.dlq.data = None;
                    return self.reload();
                }
                Vec::new()
            }
            Action::Select => {
                if let (Screen::Dlq { .. }, Some(row)) =
                    (self.screen(), self.selected_dead().cloned())
                {
                    let key = (row.at, row.seq, row.sink);
                    if !self.dlq.marked.remove(&key) {
                        self.dlq.marked.insert(key);
                        self.dlq.marked_rows.push(row);
                    } else {
                        self.dlq
                            .marked_rows
                            .retain(|r| (r.at, r.seq, r.sink) != key);
                    }
                    self.dlq.sel = (self.dlq.sel + 1).min(self.rows_on_screen().saturating_sub(1));
                }
                Vec::new()
            }
            Action::Purge | Action::Replay | Action::ReplayTenant => self.start_guard(action),
        }
    }

    fn pause_migration(&mut self) -> Vec<Effect> {
        if self.migration.guide == Guide::Running {
            self.migration.guide = Guide::Pausing;
            self.status = "pausing after the current step…".into();
        }
        Vec::new()
    }

    /// The guided migration's keys (migration screen only).
    fn migration_key(&mut self, action: Action) -> Vec<Effect> {
        if *self.screen() != Screen::Migration {
            self.status = "that key works on the migration screen (5)".into();
            return Vec::new();
        }
        let m = &self.migration;
        if action == Action::MigPause {
            return self.pause_migration();
        }
        if m.running() {
            self.status = "the migration is running: p pauses it".into();
            return Vec::new();
        }
        let busy = matches!(
            m.guide,
            Guide::BackingUp(_) | Guide::Planning | Guide::Checking | Guide::Reopening
        );
        if busy {
            self.status = "wait for the current step to finish".into();
            return Vec::new();
        }
        if action == Action::MigCheck {
            if m.status != Some(Status::Done) {
                self.status = "store check runs on a migrated (format 3) store".into();
                return Vec::new();
            }
            self.migration.guide = Guide::Checking;
            return self.fetch(vec![Request::MigrationCheck]);
        }
        if !m.can_guide() {
            self.status = match (&m.status, m.holder) {
                (Some(Status::Done), _) => "nothing to migrate: the store is format 3".into(),
                (_, Some(pid)) => format!(
                    "pid {pid} holds the store (a daemon, or `ankusa store migrate`): stop it first"
                ),
                _ if m.read_only => "the console was opened with --read-only".into(),
                _ => "checking the store's status…".into(),
            };
            return Vec::new();
        }
        match action {
            Action::MigBackup => {
                let out = backup_path(&self.header.path, self.now);
                self.migration.guide = Guide::BackingUp(out.clone());
                self.fetch(vec![Request::MigrationBackup { out }])
            }
            Action::MigPlan => {
                self.migration.guide = Guide::Planning;
                self.fetch(vec![Request::MigrationPlan])
            }
            _ => {
                self.overlays.push(Overlay::Guard(Guard {
                    scope: ActionScope::Migrate,
                    stage: Stage::Counting,
                }));
                self.fetch(vec![Request::DryRun(ActionScope::Migrate)])
            }
        }
    }

    /// `:repair`: the guarded `store repair` of the store this console
    /// holds. Only a console opened with `--write` holds it; the dry run
    /// says how many things a repair would change (0 on a healthy store).
    fn repair(&mut self) -> Vec<Effect> {
        if self.header.mode != OpenMode::Write {
            self.status = "a repair works on a stopped store: open the console with --write (no daemon running)".into();
            return Vec::new();
        }
        self.overlays.push(Overlay::Guard(Guard {
            scope: ActionScope::Repair,
            stage: Stage::Counting,
        }));
        self.fetch(vec![Request::DryRun(ActionScope::Repair)])
    }

    fn set_sort(&mut self, f: Option<Field>) -> Vec<Effect> {
        self.tenants.sort = f;
        self.tenants.ranked = None;
        self.tenants.rank_page = 0;
        self.tenants.sel = 0;
        self.status = match f {
            Some(f) => format!("ranking the top {RANK_LIMIT} tenants by {}", f.name()),
            None => "ordinal order".into(),
        };
        self.reload()
    }

    fn first_page(&mut self) -> Vec<Effect> {
        match self.screen() {
            Screen::Tenants if self.tenants.sort.is_none() && self.tenants.after.is_some() => {
                self.tenants.after = None;
                self.tenants.back.clear();
                self.reload()
            }
            Screen::Tenants if self.tenants.rank_page > 0 => {
                self.tenants.rank_page = 0;
                self.reload()
            }
            Screen::Dlq { .. } if self.dlq.cursor.is_some() => {
                self.dlq.cursor = None;
                self.dlq.back.clear();
                self.reload()
            }
            Screen::Heatmap if self.heat.offset > 0 => {
                self.heat.offset = 0;
                self.reload()
            }
            _ => Vec::new(),
        }
    }

    fn page(&mut self, down: bool) -> Vec<Effect> {
        let n = self.list_rows();
        match self.screen().clone() {
            Screen::Tenants if self.tenants.sort.is_some() => {
                let total = self.tenants.ranked.as_ref().map_or(0, |r| r.1.len());
                if down && (self.tenants.rank_page + 1) * n < total {
                    self.tenants.rank_page += 1;
                } else if !down && self.tenants.rank_page > 0 {
                    self.tenants.rank_page -= 1;
                } else {
                    return Vec::new();
                }
                self.tenants.sel = 0;
                self.reload()
            }
            Screen::Tenants => {
                if down {
                    let Some(p) = &self.tenants.page else {
                        return Vec::new();
                    };
                    let Some(next) = p.next.clone() else {
                        self.status = "last page".into();
                        return Vec::new();
                    };
                    self.tenants.back.push(self.tenants.after.take());
                    self.tenants.after = Some(next);
                } else {
                    let Some(prev) = self.tenants.back.pop() else {
                        return Vec::new();
                    };
                    self.tenants.after = prev;
                }
                self.tenants.sel = 0;
                self.tenants.page = None;
                self.reload()
            }
            Screen::Dlq { .. } => {
                if down {
                    let Some(next) = self.dlq.data.as_ref().and_then(|d| d.page.next) else {
                        self.status = "last page".into();
                        return Vec::new();
                    };
                    self.dlq.back.push(self.dlq.cursor);
                    self.dlq.cursor = Some(next);
                } else {
                    let Some(prev) = self.dlq.back.pop() else {
                        return Vec::new();
                    };
                    self.dlq.cursor = prev;
                }
                self.dlq.sel = 0;
                self.dlq.data = None;
                self.reload()
            }
            Screen::Heatmap => {
                let rows = self.list_rows().saturating_sub(2).max(1);
                if down {
                    if !self.heat.data.as_ref().is_some_and(|d| d.more) {
                        return Vec::new();
                    }
                    self.heat.offset += rows;
                } else if self.heat.offset > 0 {
                    self.heat.offset = self.heat.offset.saturating_sub(rows);
                } else {
                    return Vec::new();
                }
                self.heat.sel = 0;
                self.reload()
            }
            _ => Vec::new(),
        }
    }

    pub fn selected_dead(&self) -> Option<&DeadRow> {
        self.dlq
            .data
            .as_ref()
            .and_then(|d| d.page.entries.get(self.dlq.sel))
    }

    fn open(&mut self) -> Vec<Effect> {
        match self.screen().clone() {
            Screen::Tenants => match self.tenant_rows().get(self.tenants.sel) {
                Some(t) => {
                    let ord = t.ord;
                    self.push(Screen::Tenant { ord })
                }
                None => Vec::new(),
            },
            Screen::Heatmap => match self
                .heat
                .data
                .as_ref()
                .and_then(|d| d.rows.get(self.heat.sel))
            {
                Some(r) => {
                    let ord = r.ord;
                    self.push(Screen::Tenant { ord })
                }
                None => Vec::new(),
            },
            Screen::Tenant { ord } => {
                let name = self
                    .tenant
                    .as_ref()
                    .filter(|t| t.ord == ord)
                    .map(|t| t.name.clone());
                self.push(Screen::Dlq {
                    ord: Some(ord),
                    name,
                })
            }
            Screen::Dlq { .. } => match self.selected_dead().cloned() {
                Some(row) => self.push(Screen::DeadDetail { row }),
                None => Vec::new(),
            },
            Screen::Migration => match &self.migration.guide {
                Guide::Checked(r) if r.ok() => {
                    self.migration.guide = Guide::Reopening;
                    self.fetch(vec![Request::Reopen])
                }
                _ => Vec::new(),
            },
            Screen::Overview => {
                // The oldest-due tenant is the one an operator looks at first.
                match self.overview.as_ref().and_then(|o| o.oldest) {
                    Some(o) => self.push(Screen::Tenant { ord: o.ord }),
                    None => Vec::new(),
                }
            }
            _ => Vec::new(),
        }
    }

    /// `:replay-since 2h`: replay the rows dead-lettered in the last `d`,
    /// of the tenant whose DLQ is shown, else of every tenant.
    fn replay_since(&mut self, d: &str) -> Vec<Effect> {
        let Ok(span) = humantime::parse_duration(d.trim()) else {
            self.status = format!("{d:?} is not a duration (try :replay-since 30m)");
            return Vec::new();
        };
        if !self.can_act() {
            self.status =
                "actions need a daemon to act through (FOLLOW), or WRITE mode (--write, no daemon)"
                    .into();
            return Vec::new();
        }
        let tenant = match self.screen().clone() {
            Screen::Dlq {
                ord: Some(ord),
                name,
            } => Some((
                ord,
                name.unwrap_or_else(|| {
                    self.dlq
                        .data
                        .as_ref()
                        .map_or("?", |d| d.name(ord))
                        .to_owned()
                }),
            )),
            Screen::Tenant { ord } => self
                .tenant
                .as_ref()
                .filter(|t| t.ord == ord)
                .map(|t| (ord, t.name.clone())),
            _ => None,
        };
        let ms = u64::try_from(span.as_millis()).unwrap_or(u64::MAX);
        let scope = ActionScope::ReplayRange {
            tenant,
            from: self.now.saturating_sub(ms),
            to: self.now.saturating_add(1),
        };
        self.overlays.push(Overlay::Guard(Guard {
            scope: scope.clone(),
            stage: Stage::Counting,
        }));
        self.fetch(vec![Request::DryRun(scope)])
    }

    fn start_guard(&mut self, action: Action) -> Vec<Effect> {
        if !self.can_act() {
            self.status =
                "actions need a daemon to act through (FOLLOW), or WRITE mode (--write, no daemon)"
                    .into();
            return Vec::new();
        }
        let scope = match (action, self.screen().clone()) {
            (Action::Purge, Screen::Tenant { ord }) => {
                let Some(t) = self.tenant.as_ref().filter(|t| t.ord == ord) else {
                    return Vec::new();
                };
                ActionScope::Purge {
                    ord,
                    tenant: t.name.clone(),
                    kinds: Kinds::BOTH,
                }
            }
            (Action::Replay, Screen::Dlq { .. }) => {
                let rows = if self.dlq.marked_rows.is_empty() {
                    self.selected_dead().cloned().into_iter().collect()
                } else {
                    self.dlq.marked_rows.clone()
                };
                if rows.is_empty() {
                    return Vec::new();
                }
                ActionScope::ReplayRows { rows }
            }
            (Action::Replay, Screen::DeadDetail { row }) => {
                ActionScope::ReplayRows { rows: vec![row] }
            }
            (
                Action::ReplayTenant,
                Screen::Dlq {
                    ord: Some(ord),
                    name,
                },
            ) => ActionScope::ReplayTenant {
                ord,
                tenant: name.unwrap_or_else(|| {
                    self.dlq
                        .data
                        .as_ref()
                        .map_or("?", |d| d.name(ord))
                        .to_owned()
                }),
            },
            (Action::ReplayTenant, Screen::Tenant { ord }) => {
                let Some(t) = self.tenant.as_ref().filter(|t| t.ord == ord) else {
                    return Vec::new();
                };
                ActionScope::ReplayTenant {
                    ord,
                    tenant: t.name.clone(),
                }
            }
            _ => {
                self.status = "that action does not apply here (see ?)".into();
                return Vec::new();
            }
        };
        self.overlays.push(Overlay::Guard(Guard {
            scope: scope.clone(),
            stage: Stage::Counting,
        }));
        self.fetch(vec![Request::DryRun(scope)])
    }

    fn overlay_key(&mut self, top: Overlay, k: KeyEvent) -> Vec<Effect> {
        match top {
            Overlay::Help(scroll) => {
                let max = keymap::help_lines(self.can_act()).len() as u16;
                match keymap::lookup(&k) {
                    _ if matches!(
                        k.code,
                        KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('?') | KeyCode::Enter
                    ) =>
                    {
                        self.overlays.pop();
                    }
                    Some(Action::Down) => self.set_top(Overlay::Help((scroll + 1).min(max))),
                    Some(Action::Up) => self.set_top(Overlay::Help(scroll.saturating_sub(1))),
                    Some(Action::PageDown) => self.set_top(Overlay::Help((scroll + 10).min(max))),
                    Some(Action::PageUp) => self.set_top(Overlay::Help(scroll.saturating_sub(10))),
                    Some(Action::Top) => self.set_top(Overlay::Help(0)),
                    _ => {}
                }
                Vec::new()
            }
            Overlay::Input { kind, mut text } => match k.code {
                KeyCode::Esc => {
                    self.overlays.pop();
                    Vec::new()
                }
                KeyCode::Enter => {
                    self.overlays.pop();
                    match kind {
                        InputKind::Filter => self.set_filter(text),
                        InputKind::Command => self.command(&text),
                    }
                }
                KeyCode::Backspace => {
                    text.pop();
                    self.set_top(Overlay::Input { kind, text });
                    Vec::new()
                }
                KeyCode::Char(c) if !c.is_control() => {
                    if text.len() < 200 {
                        text.push(c);
                    }
                    self.set_top(Overlay::Input { kind, text });
                    Vec::new()
                }
                _ => Vec::new(),
            },
            Overlay::Guard(mut g) => {
                match (&mut g.stage, k.code) {
                    (Stage::Running(_), _) => {
                        self.status =
                            "the action is running; it cannot be interrupted from here".into();
                        return Vec::new();
                    }
                    (Stage::Done(_), KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q')) => {
                        self.overlays.pop();
                        return self.refresh();
                    }
                    (_, KeyCode::Esc) => {
                        self.overlays.pop();
                        self.status = "cancelled: nothing was changed".into();
                        return Vec::new();
                    }
                    (Stage::Confirm { .. }, KeyCode::Tab) => {
                        // Purge kinds: both, pending only, dead only.
                        if let ActionScope::Purge { kinds, .. } = &mut g.scope {
                            *kinds = kinds.next();
                            g.stage = Stage::Counting;
                            let scope = g.scope.clone();
                            self.set_top(Overlay::Guard(g));
                            return self.fetch(vec![Request::DryRun(scope)]);
                        }
                    }
                    (Stage::Confirm { typed, .. }, KeyCode::Backspace) => {
                        typed.pop();
                    }
                    (Stage::Confirm { typed, .. }, KeyCode::Char(c))
                        if !c.is_control() && typed.len() < 200 =>
                    {
                        typed.push(c);
                    }
                    (Stage::Confirm { typed, count }, KeyCode::Enter) => {
                        if *typed != g.scope.confirm_word() {
                            self.status =
                                format!("type {:?} exactly to confirm", g.scope.confirm_word());
                            return Vec::new();
                        }
                        if g.scope == ActionScope::Migrate {
                            // The migration runs on the migration screen, one
                            // step per request, each showing its cursor.
                            self.overlays.pop();
                            self.migration.guide = Guide::Running;
                            self.status.clear();
                            return self.fetch(vec![Request::MigrationStep]);
                        }
                        let total = *count;
                        g.stage = Stage::Running(Progress { done: 0, total });
                        let scope = g.scope.clone();
                        self.set_top(Overlay::Guard(g));
                        return self.fetch(vec![Request::Execute(scope)]);
                    }
                    _ => {}
                }
                self.set_top(Overlay::Guard(g));
                Vec::new()
            }
        }
    }

    fn set_top(&mut self, o: Overlay) {
        if let Some(top) = self.overlays.last_mut() {
            *top = o;
        }
    }

    fn set_filter(&mut self, text: String) -> Vec<Effect> {
        self.tenants.filter = text.trim().to_owned();
        self.tenants.after = None;
        self.tenants.back.clear();
        self.tenants.page = None;
        self.tenants.rank_page = 0;
        self.tenants.sel = 0;
        if *self.screen() != Screen::Tenants {
            self.stack = vec![Screen::Tenants];
        }
        self.reload()
    }

    /// `:` commands.
    pub fn command(&mut self, line: &str) -> Vec<Effect> {
        let mut words = line.split_whitespace();
        let cmd = words.next().unwrap_or("");
        let arg = words.collect::<Vec<_>>().join(" ");
        match (cmd, arg.as_str()) {
            ("q" | "quit", _) => {
                self.quit = true;
                vec![Effect::Quit]
            }
            ("overview" | "o", _) => self.goto(Tab::Overview),
            ("tenants" | "t", "") => self.goto(Tab::Tenants),
            ("heatmap" | "h", _) => self.goto(Tab::Heatmap),
            ("migration" | "m", _) => self.goto(Tab::Migration),
            ("log" | "l", _) => self.goto(Tab::Log),
            ("dlq" | "d", "") => self.goto(Tab::Dlq),
            ("dlq" | "d", name) => self.fetch(vec![Request::TenantByName {
                name: name.to_owned(),
                dlq: true,
            }]),
            ("tenant" | "tenants" | "t", name) => self.fetch(vec![Request::TenantByName {
                name: name.to_owned(),
                dlq: false,
            }]),
            ("replay-since", d) => self.replay_since(d),
            ("repair", "") => self.repair(),
            ("sort", f) => match f {
                "ord" | "ordinal" | "" => {
                    self.stack = vec![Screen::Tenants];
                    self.set_sort(None)
                }
                f => match Field::parse(f)
                    .or_else(|| (f == "archive").then_some(Field::ArchivePending))
                {
                    Some(field) => {
                        self.stack = vec![Screen::Tenants];
                        self.set_sort(Some(field))
                    }
                    None => {
                        self.status = format!("unknown counter {f:?}");
                        Vec::new()
                    }
                },
            },
            _ => {
                self.status = format!("unknown command {line:?} (see ?)");
                Vec::new()
            }
        }
    }
}

/// Width of the name column on the heatmap and lists.
pub const NAME_COL: usize = 18;

/// The guided backup's directory: a sibling of the store named after it and
/// the time (`STORE.backup-YYYYMMDDTHHMMSSZ`); the backup refuses an
/// existing directory, so nothing is overwritten.
pub fn backup_path(store: &std::path::Path, now: u64) -> PathBuf {
    let stamp: String = crate::fmt::utc(now)
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    let (date, time) = stamp.split_at(stamp.len().min(8));
    let name = store
        .file_name()
        .map_or_else(|| "store".into(), |n| n.to_string_lossy().into_owned());
    store.with_file_name(format!("{name}.backup-{date}T{time}Z"))
}
