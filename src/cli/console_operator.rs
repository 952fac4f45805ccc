//! The console's [`Operator`]: its guarded actions run as the same audited
//! purge and replay jobs as `ankusa tenants purge` and `ankusa dlq replay`,
//! through the daemon's admin socket when a daemon runs, or on the store the
//! console holds in WRITE mode.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use ankusa_store::Store;
use ankusa_ui::data::ActionScope;
use ankusa_ui::operator::Operator;

use crate::admin::access::{Peer, Principal};
use crate::admin::client::{Client, Probe};
use crate::admin::model::{DryRun, Job, JobState, Kinds, PurgeRequest, ReplayRequest};
use crate::admin::{jobs, AdminError};

pub struct ConsoleOperator {
    pub store: PathBuf,
    pub token: Option<String>,
}

/// What an action scope asks for, in the admin API's terms.
enum Ask {
    Purge { tenant: String, kinds: Kinds },
    Replay(ReplayRequest),
}

fn ask(scope: &ActionScope) -> Result<Ask, String> {
    match scope {
        ActionScope::Purge { tenant, kinds, .. } => Ok(Ask::Purge {
            tenant: tenant.clone(),
            kinds: Kinds {
                pending: kinds.pending,
                dead: kinds.dead,
            },
        }),
        ActionScope::ReplayRows { rows } => {
            let mut ids: Vec<String> = rows.iter().map(|r| r.hook_id.clone()).collect();
            ids.sort();
            ids.dedup();
            Ok(Ask::Replay(ReplayRequest {
                ids,
                ..ReplayRequest::default()
            }))
        }
        ActionScope::ReplayTenant { tenant, .. } => Ok(Ask::Replay(ReplayRequest {
            tenant: Some(tenant.clone()),
            ..ReplayRequest::default()
        })),
        ActionScope::ReplayRange { tenant, from, to } => Ok(Ask::Replay(ReplayRequest {
            tenant: tenant.as_ref().map(|t| t.1.clone()),
            from: Some(*from),
            to: Some(*to),
            ..ReplayRequest::default()
        })),
        ActionScope::Migrate => Err("the migration runs step by step in the console".into()),
    }
}

fn kinds_list(k: Kinds) -> Vec<String> {
    let mut v = Vec::new();
    if k.pending {
        v.push("pending".to_owned());
    }
    if k.dead {
        v.push("dead".to_owned());
    }
    v
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn text(e: AdminError) -> String {
    e.to_string()
}

impl ConsoleOperator {
    fn client(&self) -> Result<Client, String> {
        match Client::probe(&self.store, self.token.clone()).map_err(text)? {
            Probe::Daemon(c) => Ok(c),
            Probe::NoDaemon => Err(format!(
                "no daemon answers on {} any more",
                crate::daemon::admin::socket_path(&self.store).display()
            )),
        }
    }

    fn start(
        &self,
        store: Option<&Store>,
        scope: &ActionScope,
        dry_run: bool,
    ) -> Result<Started, String> {
        let now = ankusa_store::system_now_ms();
        let ask = ask(scope)?;
        match store {
            Some(s) => {
                let who = Principal::local(&Peer::me());
                match (ask, dry_run) {
                    (Ask::Purge { tenant, kinds }, true) => {
                        jobs::dry_run_purge(s, &who, &tenant, kinds, now).map(Started::Counted)
                    }
                    (Ask::Purge { tenant, kinds }, false) => {
                        jobs::start_purge(s, &who, &tenant, kinds, now).map(Started::Job)
                    }
                    (Ask::Replay(r), true) => {
                        jobs::dry_run_replay(s, &who, &r, now).map(Started::Counted)
                    }
                    (Ask::Replay(r), false) => {
                        jobs::start_replay(s, &who, &r, now).map(Started::Job)
                    }
                }
                .map_err(text)
            }
            None => {
                let c = self.client()?;
                match ask {
                    Ask::Purge { tenant, kinds } => {
                        let path = format!("/v1/admin/tenants/{}/purge", enc(&tenant));
                        let body = PurgeRequest {
                            kinds: kinds_list(kinds),
                            dry_run,
                        };
                        if dry_run {
                            c.post(&path, &body).map(Started::Counted)
                        } else {
                            c.post(&path, &body).map(|j| Started::Remote(j, c))
                        }
                    }
                    Ask::Replay(mut r) => {
                        r.dry_run = dry_run;
                        if dry_run {
                            c.post("/v1/admin/replay", &r).map(Started::Counted)
                        } else {
                            c.post("/v1/admin/replay", &r)
                                .map(|j| Started::Remote(j, c))
                        }
                    }
                }
                .map_err(text)
            }
        }
    }
}

enum Started {
    Counted(DryRun),
    Job(Job),
    Remote(Job, Client),
}

impl Operator for ConsoleOperator {
    fn dry_run(&self, store: Option<&Store>, scope: &ActionScope) -> Result<u64, String> {
        match self.start(store, scope, true)? {
            Started::Counted(d) => Ok(d.rows),
            Started::Job(_) | Started::Remote(..) => Err("the dry run started a job".into()),
        }
    }

    fn run(
        &self,
        store: Option<&Store>,
        scope: &ActionScope,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<u64, String> {
        let done = match self.start(store, scope, false)? {
            Started::Counted(_) => return Err("the action did not start a job".into()),
            Started::Job(job) => {
                let Some(s) = store else {
                    return Err("no store to run the job on".into());
                };
                jobs::run(
                    s,
                    job,
                    &ankusa_store::system_now_ms,
                    &AtomicBool::new(false),
                    |j| progress(j.progress.rows(), j.estimate),
                )
                .map_err(text)?
            }
            Started::Remote(mut job, c) => {
                while job.state == JobState::Running {
                    std::thread::sleep(Duration::from_millis(200));
                    job = c.get(&format!("/v1/admin/jobs/{}", job.id)).map_err(text)?;
                    progress(job.progress.rows(), job.estimate);
                }
                job
            }
        };
        match done.state {
            JobState::Done => Ok(done.progress.rows()),
            _ => Err(format!(
                "job {} failed: {}",
                done.id,
                done.error.unwrap_or_default()
            )),
        }
    }
}
