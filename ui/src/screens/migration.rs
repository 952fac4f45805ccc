//! The migration screen: the polled status of a format 2 -> 3 migration
//! (this console's or another process's `ankusa store migrate`), its rate
//! and ETA from successive samples, and the guided path (backup, dry run,
//! migrate step by step with pause and resume, check, reopen). Every step
//! is one synced write with its cursor, so stopping between steps leaves
//! nothing half done.

use std::path::{Path, PathBuf};

use ankusa_store::check::CheckReport;
use ankusa_store::migrate::{Cursor, Phase, Plan, Status};
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use super::Next;
use crate::data::{ActionScope, Request};
use crate::fmt::{age, num, utc};
use crate::keymap::KeyAction;
use crate::theme::{block, Theme};

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

    /// The screen's poll while nothing of ours runs (our own steps report
    /// their cursor; polling meanwhile would only queue behind them).
    pub fn requests(&self) -> Vec<Request> {
        if self.running() {
            Vec::new()
        } else {
            vec![Request::MigrationStatus]
        }
    }

    /// `p` or Esc while running: stop after the step under way.
    pub fn pause(&mut self, status: &mut String) {
        if self.guide == Guide::Running {
            self.guide = Guide::Pausing;
            *status = "pausing after the current step…".into();
        }
    }

    /// The guided path's keys (b, n, M, p, c) on the migration screen of
    /// the store at `store`.
    pub fn key(&mut self, action: KeyAction, store: &Path, now: u64, status: &mut String) -> Next {
        if action == KeyAction::MigPause {
            self.pause(status);
            return Next::Stay;
        }
        if self.running() {
            *status = "the migration is running: p pauses it".into();
            return Next::Stay;
        }
        let busy = matches!(
            self.guide,
            Guide::BackingUp(_) | Guide::Planning | Guide::Checking | Guide::Reopening
        );
        if busy {
            *status = "wait for the current step to finish".into();
            return Next::Stay;
        }
        if action == KeyAction::MigCheck {
            if self.status != Some(Status::Done) {
                *status = "store check runs on a migrated (format 3) store".into();
                return Next::Stay;
            }
            self.guide = Guide::Checking;
            return Next::Fetch(vec![Request::MigrationCheck]);
        }
        if !self.can_guide() {
            *status = match (&self.status, self.holder) {
                (Some(Status::Done), _) => "nothing to migrate: the store is format 3".into(),
                (_, Some(pid)) => {
                    format!("pid {pid} holds the store (daemon or `store migrate`): stop it first")
                }
                _ if self.read_only => "the console was opened with --read-only".into(),
                _ => "checking the store's status…".into(),
            };
            return Next::Stay;
        }
        match action {
            KeyAction::MigBackup => {
                let out = backup_path(store, now);
                self.guide = Guide::BackingUp(out.clone());
                Next::Fetch(vec![Request::MigrationBackup { out }])
            }
            KeyAction::MigPlan => {
                self.guide = Guide::Planning;
                Next::Fetch(vec![Request::MigrationPlan])
            }
            _ => Next::Guard(ActionScope::Migrate),
        }
    }

    /// The typed confirmation was given: steps go out one after another.
    pub fn run(&mut self) -> Next {
        self.guide = Guide::Running;
        Next::Fetch(vec![Request::MigrationStep])
    }

    /// Enter: open the migrated store once its check passed.
    pub fn open(&mut self) -> Next {
        match &self.guide {
            Guide::Checked(r) if r.ok() => {
                self.guide = Guide::Reopening;
                Next::Fetch(vec![Request::Reopen])
            }
            _ => Next::Stay,
        }
    }

    pub fn on_status(&mut self, status: Status, holder: Option<i32>, at: u64) {
        self.holder = holder;
        match &status {
            Status::InProgress { cursor } => {
                self.migrating = true;
                self.sample(at, cursor.rows_done());
                self.cursor = Some(cursor.clone());
            }
            Status::Done => {
                self.migrating = false;
                self.format = Some(ankusa_store::FORMAT);
            }
            Status::Needed => self.migrating = false,
        }
        self.status = Some(status);
    }

    pub fn on_backed_up(&mut self, out: PathBuf, status: &mut String) {
        *status = format!(
            "backup written to {}",
            crate::fmt::cut_left(&out.display().to_string(), 60)
        );
        self.backup = Some(out);
        self.guide = Guide::Idle;
    }

    pub fn on_plan(&mut self, p: Plan) {
        self.plan = Some(p);
        self.guide = Guide::Idle;
    }

    /// One of our steps is done: send the next one, stop at a pause, or
    /// check the store when the migration finished.
    pub fn on_stepped(
        &mut self,
        cursor: Cursor,
        finished: bool,
        now: u64,
        status: &mut String,
    ) -> Next {
        self.sample(now, cursor.rows_done());
        self.migrating = !finished;
        self.status = Some(if finished {
            Status::Done
        } else {
            Status::InProgress {
                cursor: cursor.clone(),
            }
        });
        self.cursor = Some(cursor);
        if finished {
            self.format = Some(ankusa_store::FORMAT);
            self.guide = Guide::Checking;
            return Next::Fetch(vec![Request::MigrationCheck]);
        }
        match self.guide {
            Guide::Running => return Next::Fetch(vec![Request::MigrationStep]),
            Guide::Pausing => {
                self.guide = Guide::Paused;
                *status = "paused between steps: nothing is half done; M resumes".into();
            }
            _ => {}
        }
        Next::Stay
    }
}

/// The guided backup's directory: a sibling of the store named after it and
/// the time (`STORE.backup-YYYYMMDDTHHMMSSZ`); the backup refuses an
/// existing directory, so nothing is overwritten.
pub fn backup_path(store: &Path, now: u64) -> PathBuf {
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

pub fn draw(f: &mut Frame, m: &MigrationState, store: &Path, theme: &Theme, area: Rect) {
    let fmt = m.format.map_or("unstamped".into(), |f| f.to_string());
    let path = store.display().to_string();
    let warn = |s: String| Line::from(Span::styled(s, theme.warn()));
    let mut lines = vec![
        Line::from(""),
        Line::from(format!(
            "  store format: {fmt} (this release reads format {})",
            ankusa_store::FORMAT
        )),
    ];
    match (&m.status, m.holder) {
        (None, _) => lines.push(Line::from("  checking the migration status…")),
        (Some(Status::Done), _) => lines.push(Line::from("  No migration needed: format 3.")),
        (Some(Status::Needed), _) => lines.push(warn(
            "  This store needs migrating before the console can show its queue.".into(),
        )),
        (Some(Status::InProgress { .. }), Some(pid)) => lines.push(warn(format!(
            "  Migrating in pid {pid} (`ankusa store migrate`): following its cursor."
        ))),
        (Some(Status::InProgress { .. }), None) if m.running() => {
            lines.push(warn("  Migrating in this console.".into()))
        }
        (Some(Status::InProgress { .. }), None) => lines.push(warn(
            "  A migration was interrupted: it resumes where it stopped (M).".into(),
        )),
    }
    if let (Some(pid), Some(Status::Needed)) = (m.holder, &m.status) {
        lines.push(Line::from(format!(
            "  pid {pid} holds the store; stop it to migrate."
        )));
    }
    if let Some(c) = &m.cursor {
        lines.push(Line::from(""));
        let phase = if m.status == Some(Status::Done) {
            "done".to_owned()
        } else {
            format!("{} ({} of 5)", c.phase.name(), c.phase as u8)
        };
        lines.push(Line::from(Span::styled(
            format!("  Progress: phase {phase}"),
            theme.title(),
        )));
        for (i, p) in Phase::ROWS.iter().enumerate() {
            let (d, t) = (c.done[i], c.total[i]);
            lines.push(Line::from(format!(
                "    {:<9} {:>12} / {:<12} {:>4}",
                p.name(),
                num(d as i64),
                num(t as i64),
                pct(d, t)
            )));
        }
        let (d, t) = (c.rows_done(), c.rows_total());
        let w = 24usize;
        let filled = if t == 0 {
            w
        } else {
            (d.min(t) as usize * w) / t as usize
        };
        lines.push(Line::from(format!(
            "    {:<9} {:>12} / {:<12} {:>4}  [{}{}]",
            "total",
            num(d as i64),
            num(t as i64),
            pct(d, t),
            "#".repeat(filled),
            ".".repeat(w - filled)
        )));
        lines.push(Line::from(format!(
            "    rate {}   ETA {}   started {} UTC",
            m.rate_per_s()
                .map_or("? rows/s".into(), |r| format!("{} rows/s", num(r as i64))),
            m.eta_ms().map_or("?".into(), age),
            utc(c.started_at)
        )));
    }
    lines.push(Line::from(""));
    if m.can_guide() || m.running() || !matches!(m.guide, Guide::Idle) {
        lines.push(Line::from(Span::styled(
            "  Guided upgrade (no other process holds this store)",
            theme.title(),
        )));
        lines.push(Line::from(format!(
            "  {}",
            ankusa_store::migrate::DESCRIPTION
        )));
        let backup = match (&m.guide, &m.backup) {
            (Guide::BackingUp(p), _) => format!("writing {}…", p.display()),
            (_, Some(p)) => format!("written to {}", p.display()),
            _ => "not taken in this console (recommended first)".into(),
        };
        lines.push(Line::from(format!("   b  1 backup     {backup}")));
        let plan = match (&m.guide, &m.plan) {
            (Guide::Planning, _) => "counting…".into(),
            (_, Some(p)) => format!(
                "{} rows to move (due {}, inflight {},",
                num(p.rows.iter().sum::<u64>() as i64),
                num(p.rows[0] as i64),
                num(p.rows[1] as i64),
            ),
            _ => "not run: counts the rows per phase".into(),
        };
        lines.push(Line::from(format!("   n  2 dry run    {plan}")));
        if let (Some(p), false) = (&m.plan, m.guide == Guide::Planning) {
            lines.push(Line::from(format!(
                "                   dead {}, archive {})",
                num(p.rows[2] as i64),
                num(p.rows[3] as i64)
            )));
        }
        let run: String = match &m.guide {
            Guide::Running => "running… (p or Esc pauses between steps)".into(),
            Guide::Pausing => "pausing after this step…".into(),
            Guide::Paused => "paused (M resumes)".into(),
            _ if m.status == Some(Status::Done) => "done".into(),
            _ if m.migrating => "interrupted (M resumes; type \"migrate\")".into(),
            _ => "type \"migrate\" to confirm; one-way: take the backup first".into(),
        };
        lines.push(Line::from(format!("   M  3 migrate    {run}")));
        let check = match &m.guide {
            Guide::Checking => Line::from("   c  4 check      folding every family…"),
            Guide::Checked(r) if r.ok() => Line::from(Span::styled(
                format!(
                    "   c  4 check      OK: {} tenants, {} due, {} inflight, {} dead rows",
                    num(r.tenants as i64),
                    num(r.due_rows as i64),
                    num(r.inflight_rows as i64),
                    num(r.dead_rows as i64)
                ),
                theme.ok(),
            )),
            Guide::Checked(r) => Line::from(Span::styled(
                format!(
                    "   c  4 check      {} mismatches: run ankusa store check --store {path}",
                    r.mismatches.len() as u64 + r.more_mismatches
                ),
                theme.error().add_modifier(Modifier::BOLD),
            )),
            Guide::Reopening => Line::from("   c  4 check      OK; opening the store…"),
            _ => Line::from("   c  4 check      runs after the migration"),
        };
        lines.push(check);
        if matches!(&m.guide, Guide::Checked(r) if r.ok()) {
            lines.push(Line::from(Span::styled(
                "  Enter opens the migrated store.",
                theme.title(),
            )));
        }
        if let Guide::Failed(e) = &m.guide {
            lines.push(Line::from(Span::styled(
                format!("  Failed: {e}"),
                theme.error(),
            )));
            lines.push(Line::from(
                "  Nothing is half done (one synced write per step): M resumes.",
            ));
        }
    } else if m.status != Some(Status::Done) && m.holder.is_none() && m.read_only {
        lines.push(Line::from(
            "  Opened with --read-only: the guided upgrade is not offered.",
        ));
    }
    if m.status != Some(Status::Done) {
        lines.push(Line::from("  From a shell:"));
        lines.push(Line::from(format!(
            "    ankusa store backup --store {path} --out DIR"
        )));
        lines.push(Line::from(format!(
            "    ankusa store migrate --store {path}"
        )));
    }
    f.render_widget(
        Paragraph::new(lines)
            .block(block(" Migration ".into(), theme))
            .wrap(Wrap { trim: false }),
        area,
    );
}

fn pct(done: u64, total: u64) -> String {
    (done.min(total) * 100)
        .checked_div(total)
        .map_or_else(|| "-".into(), |p| format!("{p}%"))
}
