//! Where an operator command gets its answers: the running daemon (over
//! its admin socket) or, when none runs, the store opened directly.
//!
//! Both sides call the same operations ([`crate::admin`]) and return the
//! same types, so every command prints the same thing either way. Opening
//! directly for a destructive command takes the store's writer lock, so a
//! daemon started meanwhile waits for us rather than racing us, and it
//! first finishes any job an interrupted command left behind.

use std::io::IsTerminal as _;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use ankusa_store::queries::DlqOrder;
use ankusa_store::{Store, StoreError};
use color_eyre::eyre::{eyre, Result, WrapErr};

use crate::admin::access::{Peer, Principal};
use crate::admin::client::{Client, Probe};
use crate::admin::model::{
    DlqDetail, DlqPage, DryRun, Job, JobState, Kinds, PurgeRequest, ReplayRequest, TenantDetail,
    TenantsPage,
};
use crate::admin::{jobs, ops, AdminError};

pub enum Backend {
    Daemon(Client),
    /// Boxed: a store handle is much larger than a socket client.
    Direct {
        store: Box<Store>,
        who: Principal,
    },
}

/// Percent-encodes a path segment or query value (tenant ids and cursors
/// are plain, but nothing typed by a user goes into a URL raw).
fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Backend {
    /// The daemon if one answers on the store's socket; else the store,
    /// read-only (`write` false) or as its writer.
    pub fn open(dir: &Path, token: Option<String>, write: bool) -> Result<Backend> {
        if !dir.is_dir() {
            return Err(eyre!(
                "no store at {}: the directory does not exist",
                dir.display()
            ));
        }
        if let Probe::Daemon(c) = Client::probe(dir, token)? {
            return Ok(Backend::Daemon(c));
        }
        let who = Principal::local(&Peer::me());
        let store = if write {
            match Store::open(dir) {
                Ok(s) => s,
                Err(StoreError::Locked { .. }) => {
                    let pid = ankusa_store::lock::holder(dir).ok().flatten();
                    return Err(eyre!(
                        "the store at {} is held by another process{} that does not answer on {}: \
                         is a daemon running with admin.socket = false? Use its admin API, or stop it",
                        dir.display(),
                        pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
                        crate::daemon::admin::socket_path(dir).display()
                    ));
                }
                Err(e) => {
                    return Err(
                        eyre!(e).wrap_err(format!("cannot open the store at {}", dir.display()))
                    )
                }
            }
        } else {
            Store::open_read_only(dir)
                .wrap_err_with(|| format!("cannot open the store at {}", dir.display()))?
        };
        Ok(Backend::Direct {
            store: Box::new(store),
            who,
        })
    }

    /// Jobs an interrupted command left running: finished before a new
    /// purge or replay starts (they are idempotent), never by a dry run.
    /// Through a daemon there is nothing to do: its boot resumed them.
    pub fn finish_leftovers(&self) -> Result<()> {
        let Backend::Direct { store, .. } = self else {
            return Ok(());
        };
        for job in jobs::unfinished(store)? {
            eprintln!(
                "ankusa: finishing job {} (started by {}, interrupted): {}",
                job.id,
                job.by.name,
                describe(&job)
            );
            let done = jobs::run(
                store,
                job,
                &ankusa_store::system_now_ms,
                &AtomicBool::new(false),
                |_| {},
            )?;
            eprintln!(
                "ankusa: job {} {}: {} rows",
                done.id,
                state(&done),
                done.progress.rows()
            );
        }
        Ok(())
    }

    pub fn tenants_page(
        &self,
        sort: Option<&str>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<TenantsPage, AdminError> {
        match self {
            Backend::Daemon(c) => {
                let mut q = format!("/v1/admin/tenants?limit={limit}");
                if let Some(s) = sort {
                    q.push_str(&format!("&sort={}", enc(s)));
                }
                if let Some(cur) = cursor {
                    q.push_str(&format!("&cursor={}", enc(cur)));
                }
                c.get(&q)
            }
            Backend::Direct { store, who } => ops::tenants_page(store, who, sort, cursor, limit),
        }
    }

    pub fn tenant(&self, tenant: &str) -> Result<TenantDetail, AdminError> {
        match self {
            Backend::Daemon(c) => c.get(&format!("/v1/admin/tenants/{}", enc(tenant))),
            Backend::Direct { store, who } => {
                ops::tenant_detail(store, who, tenant, ankusa_store::system_now_ms())
            }
        }
    }

    pub fn dlq(
        &self,
        tenant: Option<&str>,
        order: DlqOrder,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<DlqPage, AdminError> {
        match self {
            Backend::Daemon(c) => {
                let mut q = format!("/v1/admin/dlq?limit={limit}");
                if order == DlqOrder::OldestFirst {
                    q.push_str("&order=oldest_first");
                }
                if let Some(t) = tenant {
                    q.push_str(&format!("&tenant={}", enc(t)));
                }
                if let Some(cur) = cursor {
                    q.push_str(&format!("&cursor={}", enc(cur)));
                }
                c.get(&q)
            }
            Backend::Direct { store, who } => {
                ops::dlq_page(store, who, tenant, order, cursor, limit)
            }
        }
    }

    pub fn dlq_entry(&self, id: &str) -> Result<DlqDetail, AdminError> {
        match self {
            Backend::Daemon(c) => c.get(&format!("/v1/admin/dlq/{}", enc(id))),
            Backend::Direct { store, who } => ops::dlq_detail(store, who, id),
        }
    }

    /// Where this backend's destructive actions go.
    pub fn target(&self) -> Target<'_> {
        match self {
            Backend::Daemon(c) => Target::Daemon(c),
            Backend::Direct { store, who } => Target::Store(store, who),
        }
    }

    pub fn purge(&self, tenant: &str, kinds: Kinds, dry_run: bool) -> Result<Action, AdminError> {
        self.target().purge(tenant, kinds, dry_run)
    }

    pub fn replay(&self, req: ReplayRequest, dry_run: bool) -> Result<Action, AdminError> {
        self.target().replay(req, dry_run)
    }

    /// Runs (direct) or follows (daemon) a job to its end, showing progress
    /// on a terminal.
    pub fn finish(&self, job: Job) -> Result<Job> {
        let tty = std::io::stderr().is_terminal();
        let done = self.target().finish(job, |j| {
            if tty {
                eprint!(
                    "\r{} rows of about {} ({})   ",
                    j.progress.rows(),
                    j.estimate,
                    state(j)
                );
            }
        })?;
        if tty {
            eprintln!();
        }
        Ok(done)
    }

    /// `daemon at SOCKET` or `store DIR (no daemon running)`.
    pub fn describe(&self) -> String {
        match self {
            Backend::Daemon(c) => format!("the daemon at {}", c.socket().display()),
            Backend::Direct { store, .. } => {
                format!(
                    "the store at {} (no daemon running)",
                    store.path().display()
                )
            }
        }
    }
}

/// Where a purge or replay goes: a running daemon, or a store this process
/// holds as its writer (the command line's, or the console's in WRITE
/// mode). The one place both transports of a destructive action live.
pub enum Target<'a> {
    Daemon(&'a Client),
    Store(&'a Store, &'a Principal),
}

impl Target<'_> {
    pub fn purge(&self, tenant: &str, kinds: Kinds, dry_run: bool) -> Result<Action, AdminError> {
        let now = ankusa_store::system_now_ms();
        match self {
            Target::Daemon(c) => {
                let req = PurgeRequest {
                    kinds: kinds.names(),
                    dry_run,
                };
                let path = format!("/v1/admin/tenants/{}/purge", enc(tenant));
                if dry_run {
                    c.post(&path, &req).map(Action::Counted)
                } else {
                    c.post(&path, &req).map(|j| Action::Started(Box::new(j)))
                }
            }
            Target::Store(store, who) => {
                if dry_run {
                    jobs::dry_run_purge(store, who, tenant, kinds, now).map(Action::Counted)
                } else {
                    jobs::start_purge(store, who, tenant, kinds, now)
                        .map(|j| Action::Started(Box::new(j)))
                }
            }
        }
    }

    pub fn replay(&self, mut req: ReplayRequest, dry_run: bool) -> Result<Action, AdminError> {
        req.dry_run = dry_run;
        let now = ankusa_store::system_now_ms();
        match self {
            Target::Daemon(c) => {
                if dry_run {
                    c.post("/v1/admin/replay", &req).map(Action::Counted)
                } else {
                    c.post("/v1/admin/replay", &req)
                        .map(|j| Action::Started(Box::new(j)))
                }
            }
            Target::Store(store, who) => {
                if dry_run {
                    jobs::dry_run_replay(store, who, &req, now).map(Action::Counted)
                } else {
                    jobs::start_replay(store, who, &req, now).map(|j| Action::Started(Box::new(j)))
                }
            }
        }
    }

    /// Runs the job to its end on the store, or follows the daemon running
    /// it, calling `progress` as it moves.
    pub fn finish(&self, job: Job, mut progress: impl FnMut(&Job)) -> Result<Job, AdminError> {
        match self {
            Target::Store(store, _) => jobs::run(
                store,
                job,
                &ankusa_store::system_now_ms,
                &AtomicBool::new(false),
                progress,
            ),
            Target::Daemon(c) => {
                let mut j = job;
                while j.state == JobState::Running {
                    std::thread::sleep(Duration::from_millis(200));
                    j = c.get(&format!("/v1/admin/jobs/{}", j.id))?;
                    progress(&j);
                }
                Ok(j)
            }
        }
    }
}

/// What a destructive call answered.
pub enum Action {
    Counted(DryRun),
    /// Boxed: a job record is several times larger than a dry run.
    Started(Box<Job>),
}

/// 0 for a job that finished its work, 2 (an error, reported) otherwise.
pub fn exit_code(done: &Job) -> std::process::ExitCode {
    if done.state == JobState::Done {
        return std::process::ExitCode::SUCCESS;
    }
    if let Some(e) = &done.error {
        eprintln!("ankusa: job {} failed: {e}", done.id);
    }
    std::process::ExitCode::from(2)
}

pub fn state(j: &Job) -> &'static str {
    match j.state {
        JobState::Running => "running",
        JobState::Done => "done",
        JobState::Failed => "failed",
    }
}

pub fn describe(j: &Job) -> String {
    match &j.spec {
        crate::admin::model::JobSpec::Purge { tenant, kinds, .. } => format!(
            "purge tenant {tenant} ({})",
            match (kinds.pending, kinds.dead) {
                (true, true) => "pending+dead",
                (true, false) => "pending",
                _ => "dead",
            }
        ),
        crate::admin::model::JobSpec::Replay { request, .. } => {
            if !request.ids.is_empty() {
                format!("replay {} hook id(s)", request.ids.len())
            } else {
                match &request.tenant {
                    Some(t) => format!("replay tenant {t}"),
                    None => "replay a time range".to_owned(),
                }
            }
        }
    }
}

/// Asks for a typed confirmation on a terminal; refuses without one.
pub fn confirm(prompt: &str, expected: &str) -> Result<()> {
    if !std::io::stdin().is_terminal() {
        return Err(eyre!(
            "refusing to run without confirmation: stdin is not a terminal; pass --yes (after a --dry-run) to run it from a script"
        ));
    }
    eprint!("{prompt}");
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .wrap_err("cannot read the confirmation")?;
    if line.trim() == expected {
        Ok(())
    } else {
        Err(eyre!(
            "not confirmed (expected {expected:?}); nothing was changed"
        ))
    }
}
