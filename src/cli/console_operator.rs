//! The console's [`Operator`]: its guarded actions run as the same audited
//! purge and replay jobs as `ankusa tenants purge` and `ankusa dlq replay`
//! (through [`Target`]), via the daemon's admin socket when a daemon runs,
//! or on the store the console holds in WRITE mode.

use std::path::PathBuf;

use ankusa_store::Store;
use ankusa_ui::data::ActionScope;
use ankusa_ui::operator::Operator;

use super::backend::{Action, Target};
use crate::admin::access::{Peer, Principal};
use crate::admin::client::{Client, Probe};
use crate::admin::model::{JobState, Kinds, ReplayRequest};

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

impl ConsoleOperator {
    fn client(&self) -> Result<Client, String> {
        match Client::probe(&self.store, self.token.clone()).map_err(|e| e.to_string())? {
            Probe::Daemon(c) => Ok(c),
            Probe::NoDaemon => Err(format!(
                "no daemon answers on {} any more",
                crate::daemon::admin::socket_path(&self.store).display()
            )),
        }
    }

    /// Asks for `scope` on the console's store (WRITE) or through the
    /// daemon (FOLLOW).
    fn act(
        &self,
        store: Option<&Store>,
        scope: &ActionScope,
        dry_run: bool,
    ) -> Result<(Action, Option<Client>), String> {
        let ask = ask(scope)?;
        let call = |t: &Target<'_>| match &ask {
            Ask::Purge { tenant, kinds } => t.purge(tenant, *kinds, dry_run),
            Ask::Replay(r) => t.replay(r.clone(), dry_run),
        };
        match store {
            Some(s) => {
                let who = Principal::local(&Peer::me());
                let a = call(&Target::Store(s, &who)).map_err(|e| e.to_string())?;
                Ok((a, None))
            }
            None => {
                let c = self.client()?;
                let a = call(&Target::Daemon(&c)).map_err(|e| e.to_string())?;
                Ok((a, Some(c)))
            }
        }
    }
}

impl Operator for ConsoleOperator {
    fn dry_run(&self, store: Option<&Store>, scope: &ActionScope) -> Result<u64, String> {
        match self.act(store, scope, true)?.0 {
            Action::Counted(d) => Ok(d.rows),
            Action::Started(_) => Err("the dry run started a job".into()),
        }
    }

    fn run(
        &self,
        store: Option<&Store>,
        scope: &ActionScope,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<u64, String> {
        let (action, client) = self.act(store, scope, false)?;
        let Action::Started(job) = action else {
            return Err("the action did not start a job".into());
        };
        let who = Principal::local(&Peer::me());
        let target = match (store, &client) {
            (Some(s), _) => Target::Store(s, &who),
            (None, Some(c)) => Target::Daemon(c),
            (None, None) => return Err("no daemon and no store to run the job on".into()),
        };
        let done = target
            .finish(*job, |j| progress(j.progress.rows(), j.estimate))
            .map_err(|e| e.to_string())?;
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
