//! The console's data feed ([`Feed`]): opening the store the right way
//! (FOLLOW, READ-ONLY, WRITE) and answering the requests the screens make.
//! "Feed" means only this in the console; a webhook *source* (where hooks
//! arrive) is the daemon's word and appears here only as a row's
//! `source_id`. Every request is bounded by what the screen shows:
//! counters are point reads, pages are bounded scans, heatmap cells are
//! counted with a cap. Nothing here folds a family on a refresh.
//!
//! [`Feed::execute`] is a plain function of a request; the console runs it
//! on a worker thread ([`spawn_worker`]) so a slow store never blocks input,
//! and the refresh bench calls it directly to time each screen's store work.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ankusa_store::check::{self, CheckReport};
use ankusa_store::counters::Field;
use ankusa_store::migrate::{self, Cursor, Migration, Plan, StepOutcome};
use ankusa_store::queries::{self, DlqCursor, DlqPage, OldestDue};
use ankusa_store::rows::{DeadRow, DueRow};
use ankusa_store::store::{self as st, Probe};
use ankusa_store::tenants::{self, Name, TenantInfo};
use ankusa_store::values::{DeliveryRow, Envelope};
use ankusa_store::{lock, Counters, Store, StoreError};

use crate::heatmap::{self, HeatSpec};
use ankusa_ops::access::{Peer, Principal};
use ankusa_ops::client::{Client, Probe as DaemonProbe};
use ankusa_ops::model::{row_name, JobState, Kinds, ReplayRequest};
use ankusa_ops::operator::{Action, Operator};
use ankusa_ops::preview::{self, Preview};
use ankusa_ops::OpsError;

/// How the console holds the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenMode {
    /// A daemon (pid) holds the store; we follow it as a secondary.
    Follow { pid: i32 },
    /// A read-only snapshot taken when the store was opened.
    ReadOnly,
    /// We are the store's one writer (`--write`, no daemon).
    Write,
    /// The store cannot be opened at this release's format (format 2 or a
    /// half-done migration): only the migration screen has data.
    NeedsMigration,
}

impl OpenMode {
    pub fn label(&self) -> &'static str {
        match self {
            OpenMode::Follow { .. } => "FOLLOW",
            OpenMode::ReadOnly => "READ-ONLY",
            OpenMode::Write => "WRITE",
            OpenMode::NeedsMigration => "MIGRATION NEEDED",
        }
    }

    /// The one answer to "may this console act?" (purge, replay): as the
    /// store's writer (WRITE), or through the admin API of the daemon it
    /// follows (FOLLOW; a console opened `--read-only` never follows).
    /// Read-only and migration-needed consoles only look.
    pub fn can_act(&self) -> bool {
        matches!(self, OpenMode::Write | OpenMode::Follow { .. })
    }
}

/// Why the console could not open a store.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{0}: no such directory (the console never creates one; pass the directory of an existing store)")]
    NoDir(PathBuf),
    #[error("{0}: not a directory")]
    NotDir(PathBuf),
    #[error("{0}: not an Ankusa store (no RocksDB CURRENT file); create one with `ankusa serve` or `ankusa store fixture`")]
    NotStore(PathBuf),
    #[error("--read-only and --write contradict each other")]
    Conflict,
    #[error("cannot create the follower's directory {path}: {source}")]
    Secondary {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The operator operation refused or failed (ankusa-ops).
    #[error(transparent)]
    Ops(#[from] OpsError),
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Not something this console does in its mode.
    #[error("{0}")]
    Refused(String),
}

/// What the operator asked for on the command line.
#[derive(Debug, Clone, Default)]
pub struct OpenRequest {
    pub path: PathBuf,
    pub read_only: bool,
    pub write: bool,
    /// The admin API token for acting through a daemon (`--token`); none:
    /// the socket's local admin.
    pub token: Option<String>,
}

/// A follower's private directory, removed when the console exits. Lives
/// under the system temp dir, never inside the store.
#[derive(Debug)]
pub struct SecondaryDir(PathBuf);

impl SecondaryDir {
    fn create() -> Result<Self, OpenError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path =
            std::env::temp_dir().join(format!("ankusa-console-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|source| OpenError::Secondary {
            path: path.clone(),
            source,
        })?;
        Ok(Self(path))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for SecondaryDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The opened store and what the header needs to know about it.
pub struct Feed {
    pub path: PathBuf,
    pub mode: OpenMode,
    pub probe: Probe,
    /// Notices for the operator (e.g. `--write` ignored beside a daemon).
    pub notices: Vec<String>,
    /// When the data last matched the store (open, catch-up, or a write).
    pub fresh_at: u64,
    read_only_forced: bool,
    write_requested: bool,
    /// The store opened as its writer whatever its format, while this
    /// console runs the guided migration (see [`Request::MigrationStep`]).
    migrator: Option<Store>,
    /// The admin API token used in FOLLOW mode.
    token: Option<String>,
    // Drop order: the store before the follower's directory.
    store: Option<Store>,
    _secondary: Option<SecondaryDir>,
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .finish()
    }
}

impl Feed {
    /// Opens the store as the brief says: FOLLOW beside a running daemon,
    /// else READ-ONLY, or WRITE with `--write` and no daemon. Never creates
    /// a directory.
    pub fn open(req: &OpenRequest, now: u64) -> Result<Feed, OpenError> {
        if req.read_only && req.write {
            return Err(OpenError::Conflict);
        }
        let path = &req.path;
        match std::fs::metadata(path) {
            Err(_) => return Err(OpenError::NoDir(path.clone())),
            Ok(m) if !m.is_dir() => return Err(OpenError::NotDir(path.clone())),
            Ok(_) => {}
        }
        if !path.join("CURRENT").exists() {
            return Err(OpenError::NotStore(path.clone()));
        }
        let probe = st::probe(path)?;
        let mut src = Feed {
            path: path.clone(),
            mode: OpenMode::ReadOnly,
            probe: probe.clone(),
            notices: Vec::new(),
            fresh_at: now,
            read_only_forced: req.read_only,
            write_requested: req.write,
            migrator: None,
            token: req.token.clone(),
            store: None,
            _secondary: None,
        };
        if probe.migrating || probe.format.is_some_and(|f| f < ankusa_store::FORMAT) {
            src.mode = OpenMode::NeedsMigration;
            return Ok(src);
        }
        let holder = lock::holder(path)?;
        match (holder, req.read_only, req.write) {
            (Some(pid), false, write) => {
                if write {
                    src.notices.push(format!(
                        "--write ignored: daemon pid {pid} holds the store; actions go through its admin API"
                    ));
                }
                src.open_follow(pid)?;
            }
            (_, true, _) => {
                src.store = Some(Store::open_read_only(path)?);
                src.mode = OpenMode::ReadOnly;
            }
            (None, false, true) => {
                src.store = Some(Store::open(path)?);
                src.mode = OpenMode::Write;
            }
            (None, false, false) => {
                src.store = Some(Store::open_read_only(path)?);
                src.mode = OpenMode::ReadOnly;
            }
        }
        Ok(src)
    }

    fn open_follow(&mut self, pid: i32) -> Result<(), OpenError> {
        let dir = SecondaryDir::create()?;
        let store = Store::open_secondary(&self.path, dir.path())?;
        self.store = Some(store);
        self._secondary = Some(dir);
        self.mode = OpenMode::Follow { pid };
        Ok(())
    }

    /// The open store (None when it needs migrating).
    pub fn store(&self) -> Option<&Store> {
        self.store.as_ref()
    }

    /// Whether `--read-only` was given (the guided migration is hidden).
    pub fn read_only_forced(&self) -> bool {
        self.read_only_forced
    }

    /// The migration screen's poll: the migration status read without the
    /// lock (it works beside `ankusa store migrate` running in another
    /// process), and who holds the store.
    fn migration_status(&self, now: u64) -> Result<Reply, StoreError> {
        Ok(Reply::MigrationStatus {
            status: migrate::status(&self.path)?,
            holder: lock::holder(&self.path)?,
            at: now,
        })
    }

    /// The guided migration writes: never with `--read-only`, never while
    /// another process holds the store (a daemon, or `ankusa store migrate`).
    fn guided_write_allowed(&self) -> Result<(), StoreError> {
        if self.read_only_forced {
            return Err(StoreError::ReadOnly("with --read-only"));
        }
        // Our own lock is not reported (POSIX record locks are per process),
        // so while we run the migration this only sees other processes.
        if lock::holder(&self.path)?.is_some() {
            return Err(StoreError::Locked {
                path: self.path.clone(),
            });
        }
        Ok(())
    }

    fn migration_backup(&mut self, out: &Path) -> Result<Reply, StoreError> {
        self.guided_write_allowed()?;
        // The backup opens the store as its writer: let go of ours first
        // (a step is never half done: each one is one synced write).
        self.migrator = None;
        Store::backup(&self.path, out)?;
        Ok(Reply::BackedUp(out.to_path_buf()))
    }

    fn migration_plan(&self) -> Result<Reply, StoreError> {
        let plan = match &self.migrator {
            Some(s) => migrate::plan(s)?,
            None => migrate::plan(&Store::open_read_only_any_format(&self.path)?)?,
        };
        Ok(Reply::Plan(plan))
    }

    /// One step of the migration: at most `migrate::STEP_ROWS` rows in one
    /// synced write with its cursor. The migration is re-entered from its
    /// stored cursor every step, so stopping between steps (pause, quit,
    /// a crash) leaves nothing to undo and resuming is just another step.
    fn migration_step(&mut self, now: u64) -> Result<Reply, StoreError> {
        if self.migrator.is_none() {
            self.guided_write_allowed()?;
            self.migrator = Some(Store::open_any_format(&self.path)?);
        }
        let Some(s) = self.migrator.as_ref() else {
            return Err(StoreError::Missing(self.path.clone()));
        };
        let mut m = Migration::start(s, now, tenants::DEFAULT_MAX)?;
        let finished = m.step()? == StepOutcome::Finished;
        if finished && m.over_limit > 0 {
            self.notices.push(format!(
                "{} tenants beyond tenants.max: existing tenants keep working, new ones will be refused",
                m.over_limit
            ));
        }
        Ok(Reply::Stepped {
            cursor: m.cursor().clone(),
            finished,
        })
    }

    fn migration_check(&self) -> Result<Reply, StoreError> {
        let report = match &self.migrator {
            Some(s) => check::run(s, |_, _| {})?,
            None => check::run(&Store::open_read_only(&self.path)?, |_, _| {})?,
        };
        Ok(Reply::Checked(Box::new(report)))
    }

    /// After a finished migration: open the store the ordinary way.
    fn reopen(&mut self, now: u64) -> Result<Reply, OpenError> {
        self.migrator = None;
        self.store = None;
        let req = OpenRequest {
            path: self.path.clone(),
            read_only: self.read_only_forced,
            write: self.write_requested,
            token: self.token.clone(),
        };
        *self = Feed::open(&req, now)?;
        Ok(Reply::Reopened {
            mode: self.mode.clone(),
            format: self.probe.format,
        })
    }

    /// Once per refresh: follow the daemon's writes; switch from READ-ONLY
    /// to FOLLOW when a daemon has started since; note when it stopped.
    pub fn refresh(&mut self, now: u64) -> Result<DaemonStatus, StoreError> {
        let holder = match self.mode {
            OpenMode::Write => return Ok(DaemonStatus::NoneWeWrite),
            _ => lock::holder(&self.path)?,
        };
        match (&self.mode, holder) {
            (OpenMode::ReadOnly, Some(pid)) if !self.read_only_forced => {
                self.store = None;
                match self.open_follow(pid) {
                    Ok(()) => self
                        .notices
                        .push(format!("daemon pid {pid} started: now following it")),
                    Err(e) => {
                        self.notices
                            .push(format!("cannot follow daemon pid {pid}: {e}"));
                        self.store = Some(Store::open_read_only(&self.path)?);
                        self.mode = OpenMode::ReadOnly;
                    }
                }
            }
            (OpenMode::Follow { .. }, Some(pid)) => self.mode = OpenMode::Follow { pid },
            _ => {}
        }
        if let Some(s) = &self.store {
            if matches!(self.mode, OpenMode::Follow { .. }) {
                s.catch_up()?;
                self.fresh_at = now;
            }
        }
        Ok(match holder {
            Some(pid) => DaemonStatus::Running(pid),
            None => DaemonStatus::NotRunning,
        })
    }

    fn need(&self) -> Result<&Store, StoreError> {
        self.store
            .as_ref()
            .ok_or_else(|| StoreError::FormatNeedsMigration {
                path: self.path.clone(),
                found: self.probe.format.unwrap_or(0),
                supported: ankusa_store::FORMAT,
            })
    }

    /// Answers one request. `progress` is called during long actions.
    pub fn execute(
        &mut self,
        req: &Request,
        now: u64,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Reply, DataError> {
        Ok(match req {
            Request::Refresh => Reply::Refreshed(self.refresh(now)?),
            Request::MigrationStatus => self.migration_status(now)?,
            Request::MigrationBackup { out } => self.migration_backup(out)?,
            Request::MigrationPlan => self.migration_plan()?,
            Request::MigrationStep => self.migration_step(now)?,
            Request::MigrationCheck => self.migration_check()?,
            Request::Reopen => self.reopen(now)?,
            Request::Overview => Reply::Overview(self.overview(now)?),
            Request::Tenants(q) => Reply::Tenants(self.tenants(q)?),
            Request::Rank { field, limit } => Reply::Ranked {
                field: *field,
                rows: tenants::top_by(self.need()?, *field, *limit)?,
                at: now,
            },
            Request::CountersOf(ords) => {
                let c = queries::counters_many(self.need()?, ords)?;
                Reply::CountersOf(ords.iter().copied().zip(c).collect())
            }
            Request::Tenant {
                ord,
                dlq_limit,
                heat,
            } => Reply::Tenant(self.tenant(*ord, *dlq_limit, heat, now)?),
            Request::TenantByName { name, .. } => {
                let s = self.need()?;
                Reply::TenantByName(name.clone(), tenants::ord_of(s, name)?)
            }
            Request::Heatmap { offset, rows, heat } => {
                Reply::Heatmap(self.heatmap(*offset, *rows, heat, now)?)
            }
            Request::Dlq {
                ord,
                cursor,
                limit,
                order,
            } => Reply::Dlq(self.dlq(*ord, *cursor, *limit, *order)?),
            Request::DeadDetail(row) => Reply::DeadDetail(Box::new(self.dead_detail(row)?)),
            Request::DryRun(scope) => Reply::DryRun(scope.clone(), self.dry_run(scope)?),
            Request::Execute(scope) => Reply::Done(self.run_action(scope, now, progress)?),
        })
    }

    fn overview(&self, now: u64) -> Result<Overview, StoreError> {
        let s = self.need()?;
        // Counted by a walk of at most ACTIVE_BUDGET markers: the screen
        // shows one number, so it gets a screen's worth of reads ("≥ N"
        // when the walk stopped early), never a walk of the whole index.
        let walk = queries::active_within(s, now, usize::MAX, ACTIVE_BUDGET)?;
        let oldest = queries::oldest_due(s)?;
        let oldest_name = match oldest {
            Some(o) => live_name(s, o.ord)?,
            None => None,
        };
        Ok(Overview {
            node: queries::node_counters(s)?,
            tenants: tenants::allocated(s)?,
            active: walk.tenants.len(),
            active_capped: !walk.complete,
            oldest,
            oldest_name,
            format: s.format()?,
            quarantined: ankusa_store::quarantine::count(s)?,
        })
    }

    fn tenants(&self, q: &TenantsQuery) -> Result<TenantsData, StoreError> {
        let s = self.need()?;
        let limit = q.limit.max(1);
        // One more than the page, to know whether there is a next page.
        let (mut rows, next_of): (Vec<TenantInfo>, fn(&TenantInfo) -> TenantsAfter) =
            if q.filter.is_empty() {
                let after = match &q.after {
                    Some(TenantsAfter::Ord(o)) => Some(*o),
                    _ => None,
                };
                (tenants::page(s, after, limit + 1)?, |t| {
                    TenantsAfter::Ord(t.ord)
                })
            } else {
                // A prefix filter is a bounded range scan of the names.
                let after = match &q.after {
                    Some(TenantsAfter::Name(n)) => Some(n.as_str()),
                    _ => None,
                };
                (tenants::by_prefix(s, &q.filter, after, limit + 1)?, |t| {
                    TenantsAfter::Name(t.id.clone())
                })
            };
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next = if more { rows.last().map(next_of) } else { None };
        Ok(TenantsData {
            query: q.clone(),
            rows,
            next,
            total: tenants::allocated(s)?,
        })
    }

    fn tenant(
        &self,
        ord: u32,
        dlq_limit: usize,
        heat: &HeatSpec,
        now: u64,
    ) -> Result<TenantData, StoreError> {
        let s = self.need()?;
        let name = match tenants::name_of(s, ord)? {
            Some(Name::Live(n)) => n,
            Some(Name::Erased) => "(erased)".into(),
            None => format!("ord {ord}"),
        };
        Ok(TenantData {
            ord,
            name,
            counters: queries::counters(s, ord)?,
            first_due: queries::first_due(s, ord)?,
            heat: heatmap::count_row(s, ord, heat, now)?,
            dlq: queries::dlq_page_for_tenant(s, ord, None, dlq_limit)?,
        })
    }

    fn heatmap(
        &self,
        offset: usize,
        rows: usize,
        heat: &HeatSpec,
        now: u64,
    ) -> Result<HeatmapData, StoreError> {
        let s = self.need()?;
        let want = offset + rows + 1;
        let walk = queries::active_within(s, now, want, heat_marker_budget(want))?;
        // More rows below: found past this page, or the walk stopped at its
        // budget (more tenants may be active; paging on walks further).
        let more = walk.tenants.len() > offset + rows || !walk.complete;
        let shown: Vec<_> = walk.tenants.into_iter().skip(offset).take(rows).collect();
        let ords: Vec<u32> = shown.iter().map(|a| a.ord).collect();
        let cells = heatmap::count_rows(s, &ords, heat, now)?;
        let mut out = Vec::with_capacity(shown.len());
        for (a, cells) in shown.into_iter().zip(cells) {
            out.push(HeatRow {
                ord: a.ord,
                name: live_name(s, a.ord)?.unwrap_or_else(|| format!("ord {}", a.ord)),
                oldest_bucket: a.bucket,
                cells,
            });
        }
        Ok(HeatmapData {
            spec: *heat,
            offset,
            rows: out,
            more,
            at: now,
        })
    }

    fn dlq(
        &self,
        ord: Option<u32>,
        cursor: Option<DlqCursor>,
        limit: usize,
        order: queries::DlqOrder,
    ) -> Result<DlqData, StoreError> {
        let s = self.need()?;
        let page = queries::dlq_page_ordered(s, ord, order, cursor, limit)?;
        let mut names: Vec<(u32, String)> = Vec::new();
        for e in &page.entries {
            if !names.iter().any(|(o, _)| *o == e.ord) {
                names.push((
                    e.ord,
                    live_name(s, e.ord)?.unwrap_or_else(|| format!("ord {}", e.ord)),
                ));
            }
        }
        let total = queries::counters(s, ord.unwrap_or(0))?.dead;
        Ok(DlqData {
            ord,
            order,
            cursor,
            page,
            names,
            total,
        })
    }

    fn dead_detail(&self, row: &DeadRow) -> Result<DeadDetail, StoreError> {
        let s = self.need()?;
        let still_dead = queries::dead_row(
            s,
            &ankusa_store::keys::DeadKey {
                at: row.at,
                seq: row.seq,
                sink: row.sink,
            },
        )?
        .is_some();
        let delivery = queries::delivery(s, row.seq, row.sink)?;
        let envelope: Option<Envelope> = queries::hook(s, row.seq)?;
        Ok(DeadDetail {
            row: row.clone(),
            tenant: live_name(s, row.ord)?.unwrap_or_else(|| format!("ord {}", row.ord)),
            still_dead,
            delivery,
            preview: envelope.as_ref().map(preview::build),
        })
    }

    /// The exact number of rows an action would touch: the migration's
    /// plan, or the operator's dry run (ankusa-ops, which also writes its
    /// audit record).
    pub fn dry_run(&self, scope: &ActionScope) -> Result<u64, DataError> {
        if let ActionScope::Repair = scope {
            return Ok(self.repair(true)?.changes());
        }
        if let ActionScope::Migrate = scope {
            return match self.migration_plan()? {
                Reply::Plan(p) => Ok(p.rows.iter().sum()),
                _ => Ok(0),
            };
        }
        let op = self.operator()?;
        match ask(scope)? {
            Ask::Purge { tenant, kinds } => counted(op.purge(&tenant, kinds, true)?),
            Ask::Replay(r) => counted(op.replay(r, true)?),
        }
    }

    /// Runs a guarded action as the operator's audited job (on the store
    /// this console writes, or through the daemon it follows) and follows
    /// it to its end.
    fn run_action(
        &mut self,
        scope: &ActionScope,
        now: u64,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ActionResult, DataError> {
        if let ActionScope::Repair = scope {
            let rep = self.repair(false)?;
            return Ok(ActionResult {
                scope: scope.clone(),
                expected: rep.changes(),
                touched: rep.changes(),
            });
        }
        if let ActionScope::Migrate = scope {
            // The migration runs one step per request (MigrationStep) so the
            // screen shows each cursor and the operator can pause.
            return Err(DataError::Refused(
                "the migration runs step by step, not as one action".into(),
            ));
        }
        let op = self.operator()?;
        let started = match ask(scope)? {
            Ask::Purge { tenant, kinds } => op.purge(&tenant, kinds, false)?,
            Ask::Replay(r) => op.replay(r, false)?,
        };
        let Action::Started(job) = started else {
            return Err(DataError::Refused("the action did not start a job".into()));
        };
        let expected = job.estimate;
        let done = op.finish(*job, |j| {
            progress(Progress {
                done: j.progress.rows(),
                total: j.estimate,
            })
        })?;
        if done.state != JobState::Done {
            return Err(DataError::Refused(format!(
                "job {} failed: {}",
                done.id,
                done.error.unwrap_or_default()
            )));
        }
        self.fresh_at = now;
        Ok(ActionResult {
            scope: scope.clone(),
            expected,
            touched: done.progress.rows(),
        })
    }

    /// Who carries out a guarded action: this console as the store's
    /// writer (WRITE), or the daemon it follows (FOLLOW), through its admin
    /// API; the modes [`OpenMode::can_act`] offers actions in. Either way the same ankusa-ops code as the command line and
    /// the admin API runs, with its audit records and its row lock.
    fn operator(&self) -> Result<Operator<&Store>, DataError> {
        match self.mode {
            OpenMode::Write => Ok(Operator::Store {
                store: self.need()?,
                who: Principal::local(&Peer::me()),
            }),
            OpenMode::Follow { .. } => match Client::probe(&self.path, self.token.clone())? {
                DaemonProbe::Daemon(c) => Ok(Operator::Daemon(c)),
                DaemonProbe::NoDaemon => Err(DataError::Refused(format!(
                    "no daemon answers on {} any more",
                    ankusa_ops::socket_path(&self.path).display()
                ))),
            },
            _ => Err(DataError::Refused(
                "the store is read-only here (no daemon to act through, and no --write)".into(),
            )),
        }
    }
}

impl Feed {
    /// `store repair` (dry or not) on the store this console holds for
    /// writing, audited like the command line's: a repair needs the store
    /// stopped, so a console following a daemon refuses it.
    fn repair(&self, dry_run: bool) -> Result<ankusa_store::repair::RepairReport, DataError> {
        if self.mode != OpenMode::Write {
            return Err(DataError::Refused(
                "a repair works on a stopped store: stop the daemon and open the console with --write".into(),
            ));
        }
        let s = self.need()?;
        let now = ankusa_store::system_now_ms();
        let rep = ankusa_store::repair::run(s, dry_run, now, |_, _| {})?;
        let who = ankusa_ops::access::Principal::local(&ankusa_ops::access::Peer::me());
        let outcome = if dry_run { "dry_run" } else { "done" };
        ankusa_ops::jobs::audit_store_action(
            s,
            &who,
            "repair",
            "store",
            outcome,
            rep.changes(),
            now,
        )?;
        Ok(rep)
    }
}

/// What an action scope asks the operator for.
enum Ask {
    Purge { tenant: String, kinds: Kinds },
    Replay(ReplayRequest),
}

fn ask(scope: &ActionScope) -> Result<Ask, DataError> {
    Ok(match scope {
        ActionScope::Purge { tenant, kinds, .. } => Ask::Purge {
            tenant: tenant.clone(),
            kinds: *kinds,
        },
        // Exactly the marked rows, each by hook and sink: a hook's other
        // dead sinks are not part of the scope the guard showed.
        ActionScope::ReplayRows { rows } => Ask::Replay(ReplayRequest {
            rows: rows.iter().map(|r| row_name(&r.hook_id, r.sink)).collect(),
            ..ReplayRequest::default()
        }),
        ActionScope::ReplayTenant { tenant, .. } => Ask::Replay(ReplayRequest {
            tenant: Some(tenant.clone()),
            ..ReplayRequest::default()
        }),
        ActionScope::ReplayRange { tenant, from, to } => Ask::Replay(ReplayRequest {
            tenant: tenant.as_ref().map(|t| t.1.clone()),
            from: Some(*from),
            to: Some(*to),
            ..ReplayRequest::default()
        }),
        ActionScope::Migrate => {
            return Err(DataError::Refused(
                "the migration runs step by step in the console".into(),
            ))
        }
        ActionScope::Repair => {
            return Err(DataError::Refused(
                "a repair runs on the store, not through the operator".into(),
            ))
        }
    })
}

fn counted(a: Action) -> Result<u64, DataError> {
    match a {
        Action::Counted(d) => Ok(d.rows),
        Action::Started(_) => Err(DataError::Refused("the dry run started a job".into())),
    }
}

fn live_name(s: &Store, ord: u32) -> Result<Option<String>, StoreError> {
    Ok(match tenants::name_of(s, ord)? {
        Some(Name::Live(n)) => Some(n),
        Some(Name::Erased) => Some("(erased)".into()),
        None => None,
    })
}

/// Active-index markers the overview walks at most to count active tenants
/// (one marker per tenant and due second). Above it the overview shows
/// "≥ N": a count costs what one screen of rows costs, not a walk of the
/// index, whose size grows with the backlog.
pub const ACTIVE_BUDGET: usize = 1024;

/// Markers the heatmap walks at most to find `want` distinct active tenants:
/// a floor for the common case plus a few markers per wanted tenant (deep
/// pages need a longer walk; the budget still grows with the page, never
/// with the backlog).
pub fn heat_marker_budget(want: usize) -> usize {
    1024 + want.saturating_mul(16)
}
/// Tenants ranked when sorting by a counter.
pub const RANK_LIMIT: usize = 1000;

/// What a screen asks the feed for.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Catch up with the daemon and check who holds the store.
    Refresh,
    Overview,
    Tenants(TenantsQuery),
    /// Rank tenants by a counter: a bounded-memory scan of the counters
    /// family, run only when the operator picks a sort key (never on a
    /// refresh; refreshes re-read the visible rows' counters).
    Rank {
        field: Field,
        limit: usize,
    },
    CountersOf(Vec<u32>),
    Tenant {
        ord: u32,
        dlq_limit: usize,
        heat: HeatSpec,
    },
    /// Resolve a name typed in a `:` command; `dlq` says which screen opens.
    TenantByName {
        name: String,
        dlq: bool,
    },
    Heatmap {
        offset: usize,
        rows: usize,
        heat: HeatSpec,
    },
    Dlq {
        ord: Option<u32>,
        cursor: Option<DlqCursor>,
        limit: usize,
        order: queries::DlqOrder,
    },
    DeadDetail(DeadRow),
    DryRun(ActionScope),
    Execute(ActionScope),
    /// The migration screen's poll (no lock taken).
    MigrationStatus,
    /// Checkpoint the store into `out` (a new directory) before migrating.
    MigrationBackup {
        out: PathBuf,
    },
    /// The migration's dry run: rows per phase.
    MigrationPlan,
    /// One step of the guided migration (this console becomes the writer).
    MigrationStep,
    /// `store check` after the migration.
    MigrationCheck,
    /// Open the migrated store the ordinary way.
    Reopen,
}

/// Where a tenants page starts: after an ordinal (no filter: ordinal order)
/// or after a name (a prefix filter: name order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TenantsAfter {
    Ord(u32),
    Name(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TenantsQuery {
    pub after: Option<TenantsAfter>,
    /// A name prefix (case-sensitive: tenant ids are bytes); empty for all.
    pub filter: String,
    pub limit: usize,
}

/// The answers.
#[derive(Debug, Clone)]
pub enum Reply {
    Refreshed(DaemonStatus),
    Overview(Overview),
    Tenants(TenantsData),
    Ranked {
        field: Field,
        rows: Vec<TenantInfo>,
        at: u64,
    },
    CountersOf(Vec<(u32, Counters)>),
    Tenant(TenantData),
    TenantByName(String, Option<u32>),
    Heatmap(HeatmapData),
    Dlq(DlqData),
    DeadDetail(Box<DeadDetail>),
    DryRun(ActionScope, u64),
    Done(ActionResult),
    MigrationStatus {
        status: migrate::Status,
        holder: Option<i32>,
        at: u64,
    },
    BackedUp(PathBuf),
    Plan(Plan),
    Stepped {
        cursor: Cursor,
        finished: bool,
    },
    Checked(Box<CheckReport>),
    Reopened {
        mode: OpenMode,
        format: Option<u32>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DaemonStatus {
    Running(i32),
    NotRunning,
    /// We hold the store ourselves (`--write`).
    NoneWeWrite,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overview {
    pub node: Counters,
    pub tenants: u32,
    pub active: usize,
    pub active_capped: bool,
    pub oldest: Option<OldestDue>,
    pub oldest_name: Option<String>,
    pub format: Option<u32>,
    /// Rows moved to the quarantine because they did not decode (one
    /// counter read).
    pub quarantined: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantsData {
    pub query: TenantsQuery,
    pub rows: Vec<TenantInfo>,
    /// Where the next page starts; None on the last page.
    pub next: Option<TenantsAfter>,
    pub total: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantData {
    pub ord: u32,
    pub name: String,
    pub counters: Counters,
    pub first_due: Option<DueRow>,
    pub heat: Vec<u32>,
    pub dlq: DlqPage,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeatRow {
    pub ord: u32,
    pub name: String,
    pub oldest_bucket: u64,
    pub cells: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeatmapData {
    pub spec: HeatSpec,
    pub offset: usize,
    pub rows: Vec<HeatRow>,
    pub more: bool,
    pub at: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DlqData {
    pub ord: Option<u32>,
    pub order: queries::DlqOrder,
    pub cursor: Option<DlqCursor>,
    pub page: DlqPage,
    pub names: Vec<(u32, String)>,
    /// The dead counter of the tenant (or the node).
    pub total: i64,
}

impl DlqData {
    pub fn name(&self, ord: u32) -> &str {
        self.names
            .iter()
            .find(|(o, _)| *o == ord)
            .map_or("?", |(_, n)| n.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadDetail {
    pub row: DeadRow,
    pub tenant: String,
    pub still_dead: bool,
    pub delivery: Option<DeliveryRow>,
    pub preview: Option<Preview>,
}

/// The exact scope of a guarded action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionScope {
    Purge {
        ord: u32,
        tenant: String,
        kinds: Kinds,
    },
    ReplayRows {
        rows: Vec<DeadRow>,
    },
    ReplayTenant {
        ord: u32,
        tenant: String,
    },
    /// Rows dead-lettered in `[from, to)` (ms), node-wide or of one tenant.
    ReplayRange {
        tenant: Option<(u32, String)>,
        from: u64,
        to: u64,
    },
    /// The format 2 → 3 migration of the whole store (guided, step by step).
    Migrate,
    /// `store repair` on the store this console holds (WRITE mode only):
    /// quarantine undecodable due rows, put back markers, set counters to
    /// the fold, make unowed hooks reclaimable.
    Repair,
}

impl ActionScope {
    pub fn describe(&self) -> String {
        match self {
            ActionScope::Purge { tenant, kinds, .. } => {
                format!("purge {} of tenant {tenant}", kinds.rows())
            }
            ActionScope::ReplayRows { rows } => {
                format!("replay {} dead row(s), each one hook's sink:", rows.len())
            }
            ActionScope::ReplayTenant { tenant, .. } => {
                format!("replay every dead row of tenant {tenant}")
            }
            ActionScope::ReplayRange { tenant, from, to } => {
                let whose = match tenant {
                    Some((_, t)) => format!("of tenant {t}"),
                    None => "of every tenant".into(),
                };
                format!(
                    "replay the dead rows {whose} dead-lettered from {} to {} UTC",
                    crate::fmt::utc(*from),
                    crate::fmt::utc(*to)
                )
            }
            ActionScope::Migrate => {
                "migrate this store from format 2 to format 3 (one-way: older releases cannot open it afterwards)".into()
            }
            ActionScope::Repair => {
                "repair this store: quarantine due rows that do not decode, put back missing markers, set every counter to the fold (ankusa store repair)".into()
            }
        }
    }

    /// What the operator must type to confirm.
    pub fn confirm_word(&self) -> String {
        match self {
            ActionScope::Purge { tenant, .. } | ActionScope::ReplayTenant { tenant, .. } => {
                tenant.clone()
            }
            ActionScope::ReplayRows { .. } | ActionScope::ReplayRange { .. } => "replay".into(),
            ActionScope::Migrate => "migrate".into(),
            ActionScope::Repair => "repair".into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub done: u64,
    pub total: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionResult {
    pub scope: ActionScope,
    pub expected: u64,
    pub touched: u64,
}

/// A request sent to the worker, tagged so replies can be matched.
#[derive(Debug)]
pub struct Fetch {
    pub id: u64,
    pub req: Request,
    pub now: u64,
}

/// What the worker sends back.
// An event is moved once through a channel; boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Event {
    Reply {
        id: u64,
        req: Request,
        result: Result<Reply, String>,
        took: Duration,
    },
    Progress {
        id: u64,
        progress: Progress,
    },
}

/// Runs the feed on its own thread: fetches in, events out. The thread
/// ends when the fetch sender is dropped.
pub fn spawn_worker(
    mut src: Feed,
    dispatch: tracing::Dispatch,
) -> std::io::Result<(
    mpsc::Sender<Fetch>,
    mpsc::Receiver<Event>,
    std::thread::JoinHandle<()>,
)> {
    let (ftx, frx) = mpsc::channel::<Fetch>();
    let (etx, erx) = mpsc::channel::<Event>();
    let handle = std::thread::Builder::new()
        .name("ankusa-console-data".into())
        .spawn(move || {
            let _guard = tracing::dispatcher::set_default(&dispatch);
            for fetch in frx {
                let t0 = Instant::now();
                let id = fetch.id;
                let tx = etx.clone();
                let mut progress = |p: Progress| {
                    let _ = tx.send(Event::Progress { id, progress: p });
                };
                let result = src.execute(&fetch.req, fetch.now, &mut progress).map_err(|e| {
                    tracing::warn!(target: "console", "{e}");
                    e.to_string()
                });
                if let Ok(Reply::Done(r)) = &result {
                    tracing::info!(target: "console", "{}: {} of {} rows", r.scope.describe(), r.touched, r.expected);
                }
                let ev = Event::Reply {
                    id,
                    req: fetch.req,
                    result,
                    took: t0.elapsed(),
                };
                if etx.send(ev).is_err() {
                    break;
                }
            }
        })?;
    Ok((ftx, erx, handle))
}
