//! The one type every caller acts through: a running daemon (over its
//! admin socket), or a store this process holds.
//!
//! The command line holds the store it opened (`Operator<Box<Store>>`); the
//! console lends the store it holds in WRITE mode (`Operator<&Store>`).
//! Either way the store side calls the same functions the daemon serves
//! ([`crate::reads`], [`crate::jobs`]) and returns the same types, so a
//! command prints the same thing, and an action writes the same audit
//! records and changes the same rows, whichever side answers.

use std::ops::Deref;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use ankusa_store::queries::DlqOrder;
use ankusa_store::Store;

use crate::access::Principal;
use crate::client::Client;
use crate::model::{
    BackupDone, BackupRequest, DlqDetail, DlqPage, DryRun, Job, JobState, Kinds, NodeHistory,
    NodeState, PauseRequest, Paused, PausesPage, PolicyChange, PolicyView, PurgeRequest,
    ReplayRequest, Resumed, SinkLimitsChange, SinkLimitsView, SinksPage, Stats, TenantDetail,
    TenantsPage,
};
use crate::routes::{self, encode as enc};
use crate::wire::{PolicyJson, SinkLimitsJson, Via};
use crate::{backup, jobs, node, pauses, policy, reads, Result};
use ankusa_store::policy::{Policy, SinkLimits};

/// How long a backup through the daemon may take before the caller gives
/// up waiting (the daemon finishes it all the same).
const BACKUP_TIMEOUT: Duration = Duration::from_secs(6 * 3600);

/// Where operations go. `S` is how the store is held: owned (`Box<Store>`,
/// the command line) or lent (`&Store`, the console).
pub enum Operator<S = Box<Store>> {
    Daemon(Client),
    /// A store this process holds: as its writer for purge and replay,
    /// read-only for reads. `who` is the caller the audit records name.
    Store {
        store: S,
        who: Principal,
    },
}

/// What a destructive call answered.
pub enum Action {
    Counted(DryRun),
    /// Boxed: a job record is several times larger than a dry run.
    Started(Box<Job>),
}

impl<S: Deref<Target = Store>> Operator<S> {
    /// The node's stats (what `ankusa store info` summarises).
    pub fn stats(&self) -> Result<Stats> {
        match self {
            Operator::Daemon(c) => c.get(routes::STATS),
            Operator::Store { store, who } => {
                reads::stats(store, who, ankusa_store::system_now_ms())
            }
        }
    }

    pub fn tenants_page(
        &self,
        sort: Option<&str>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<TenantsPage> {
        match self {
            Operator::Daemon(c) => {
                let mut q = format!("{}?limit={limit}", routes::TENANTS);
                if let Some(s) = sort {
                    q.push_str(&format!("&sort={}", enc(s)));
                }
                if let Some(cur) = cursor {
                    q.push_str(&format!("&cursor={}", enc(cur)));
                }
                c.get(&q)
            }
            Operator::Store { store, who } => reads::tenants_page(store, who, sort, cursor, limit),
        }
    }

    pub fn tenant(&self, tenant: &str) -> Result<TenantDetail> {
        match self {
            Operator::Daemon(c) => c.get(&routes::fill(routes::TENANT, tenant)),
            Operator::Store { store, who } => {
                reads::tenant_detail(store, who, tenant, ankusa_store::system_now_ms())
            }
        }
    }

    /// A DLQ page; `filter` narrows it to one sink's rows and/or an event
    /// type pattern's (a bounded walk: see [`reads::dlq_page`]).
    pub fn dlq(
        &self,
        tenant: Option<&str>,
        order: DlqOrder,
        cursor: Option<&str>,
        limit: usize,
        filter: &reads::DlqFilter,
    ) -> Result<DlqPage> {
        match self {
            Operator::Daemon(c) => {
                let mut q = format!("{}?limit={limit}", routes::DLQ);
                if order == DlqOrder::OldestFirst {
                    q.push_str("&order=oldest_first");
                }
                if let Some(t) = tenant {
                    q.push_str(&format!("&tenant={}", enc(t)));
                }
                if let Some(cur) = cursor {
                    q.push_str(&format!("&cursor={}", enc(cur)));
                }
                if let Some(s) = &filter.sink {
                    q.push_str(&format!("&sink={}", enc(s)));
                }
                if let Some(t) = &filter.event_type {
                    q.push_str(&format!("&event_type={}", enc(t)));
                }
                c.get(&q)
            }
            Operator::Store { store, who } => {
                reads::dlq_page(store, who, tenant, order, cursor, limit, filter)
            }
        }
    }

    pub fn dlq_entry(&self, id: &str) -> Result<DlqDetail> {
        match self {
            Operator::Daemon(c) => c.get(&routes::fill(routes::DLQ_ENTRY, id)),
            Operator::Store { store, who } => reads::dlq_detail(store, who, id),
        }
    }

    /// A purge's dry run (`Counted`) or its job, started (`Started`).
    pub fn purge(&self, tenant: &str, kinds: Kinds, dry_run: bool) -> Result<Action> {
        let now = ankusa_store::system_now_ms();
        match self {
            Operator::Daemon(c) => {
                let req = PurgeRequest {
                    kinds: kinds.names(),
                    dry_run,
                };
                let path = routes::fill(routes::PURGE, tenant);
                if dry_run {
                    c.post(&path, &req).map(Action::Counted)
                } else {
                    c.post(&path, &req).map(|j| Action::Started(Box::new(j)))
                }
            }
            Operator::Store { store, who } => {
                if dry_run {
                    jobs::dry_run_purge(store, who, tenant, kinds, now).map(Action::Counted)
                } else {
                    jobs::start_purge(store, who, tenant, kinds, now)
                        .map(|j| Action::Started(Box::new(j)))
                }
            }
        }
    }

    /// A replay's dry run (`Counted`) or its job, started (`Started`).
    pub fn replay(&self, mut req: ReplayRequest, dry_run: bool) -> Result<Action> {
        req.dry_run = dry_run;
        let now = ankusa_store::system_now_ms();
        match self {
            Operator::Daemon(c) => {
                if dry_run {
                    c.post(routes::REPLAY, &req).map(Action::Counted)
                } else {
                    c.post(routes::REPLAY, &req)
                        .map(|j| Action::Started(Box::new(j)))
                }
            }
            Operator::Store { store, who } => {
                if dry_run {
                    jobs::dry_run_replay(store, who, &req, now).map(Action::Counted)
                } else {
                    jobs::start_replay(store, who, &req, now).map(|j| Action::Started(Box::new(j)))
                }
            }
        }
    }

    /// The daemon's samples of the node's last hour; none without a daemon
    /// (nothing of it is stored).
    pub fn history(&self) -> Result<NodeHistory> {
        match self {
            Operator::Daemon(c) => c.get(routes::HISTORY),
            Operator::Store { .. } => Ok(NodeHistory::default()),
        }
    }

    /// Whether the node drains, and what it still owes.
    pub fn node(&self) -> Result<NodeState> {
        match self {
            Operator::Daemon(c) => c.get(routes::NODE),
            Operator::Store { store, who } => node::state(store, who),
        }
    }

    /// Starts (`true`) or ends (`false`) a drain.
    pub fn drain(&self, on: bool) -> Result<NodeState> {
        let now = ankusa_store::system_now_ms();
        match (self, on) {
            (Operator::Daemon(c), true) => c.post(routes::DRAIN, &serde_json::json!({})),
            (Operator::Daemon(c), false) => c.post(routes::UNDRAIN, &serde_json::json!({})),
            (Operator::Store { store, who }, true) => node::drain(store, who, now),
            (Operator::Store { store, who }, false) => node::undrain(store, who, now),
        }
    }

    /// Takes a backup of the store ([`backup::take`]): the daemon takes it
    /// with its own handle beside its writes, or this process on the store
    /// it holds as its writer.
    pub fn backup(&self, req: &BackupRequest) -> Result<BackupDone> {
        match self {
            // A checkpoint onto another disk copies the whole store: give
            // it the time a copy of a large store takes.
            Operator::Daemon(c) => c.post_within(routes::BACKUP, req, BACKUP_TIMEOUT),
            Operator::Store { store, who } => {
                backup::take(store, who, req, ankusa_store::system_now_ms())
            }
        }
    }

    /// The node's sinks and their pauses.
    pub fn sinks(&self) -> Result<SinksPage> {
        match self {
            Operator::Daemon(c) => c.get(routes::SINKS),
            Operator::Store { store, who } => reads::sinks(store, who),
        }
    }

    /// The pauses in force that the caller may see.
    pub fn pauses(&self) -> Result<PausesPage> {
        match self {
            Operator::Daemon(c) => c.get(routes::PAUSES),
            Operator::Store { store, who } => reads::pauses_page(store, who),
        }
    }

    /// Pauses a tenant, a sink, or a sink for one tenant.
    pub fn pause(&self, req: &PauseRequest) -> Result<Paused> {
        match self {
            Operator::Daemon(c) => c.post(routes::PAUSES, req),
            Operator::Store { store, who } => {
                pauses::pause(store, who, req, ankusa_store::system_now_ms())
            }
        }
    }

    /// Lifts a pause; for a sink, the answer holds the job unparking its
    /// rows (follow it with [`Operator::finish`]).
    pub fn resume(&self, req: &PauseRequest) -> Result<Resumed> {
        match self {
            Operator::Daemon(c) => c.post(routes::RESUME, req),
            Operator::Store { store, who } => {
                pauses::resume(store, who, req, ankusa_store::system_now_ms())
            }
        }
    }

    /// A tenant's policy: what is stored, and the defaults when a daemon
    /// answers (a store alone does not know its daemon's configuration).
    pub fn tenant_policy(&self, tenant: &str) -> Result<PolicyView> {
        match self {
            Operator::Daemon(c) => c.get(&routes::fill(routes::TENANT_POLICY, tenant)),
            Operator::Store { store, who } => Ok(PolicyView {
                tenant: tenant.to_owned(),
                stored: policy::tenant(store, who, tenant)?,
                defaults: None,
            }),
        }
    }

    /// Sets fields of a tenant's policy (admin; audited).
    pub fn set_tenant_policy(&self, tenant: &str, set: &Policy) -> Result<PolicyChange> {
        match self {
            Operator::Daemon(c) => c.put(
                &routes::fill(routes::TENANT_POLICY, tenant),
                &Via::<PolicyJson, _>::new(set),
            ),
            Operator::Store { store, who } => {
                policy::set_tenant(store, who, tenant, set, ankusa_store::system_now_ms())
            }
        }
    }

    /// Clears a tenant's policy: the defaults apply (admin; audited).
    pub fn clear_tenant_policy(&self, tenant: &str) -> Result<PolicyChange> {
        match self {
            Operator::Daemon(c) => c.delete(&routes::fill(routes::TENANT_POLICY, tenant)),
            Operator::Store { store, who } => {
                policy::clear_tenant(store, who, tenant, ankusa_store::system_now_ms())
            }
        }
    }

    /// A sink's stored limits (admin).
    pub fn sink_limits(&self, sink: &str) -> Result<SinkLimitsView> {
        match self {
            Operator::Daemon(c) => c.get(&routes::fill(routes::SINK_LIMITS, sink)),
            Operator::Store { store, who } => {
                who.require_admin("reading a sink's limits")?;
                let r = reads::resolve_sink(store, sink)?;
                let catalog = ankusa_store::sinks::catalog(store)?;
                Ok(SinkLimitsView {
                    sink: ankusa_store::sinks::display(&catalog, &r.source, r.sink),
                    stored: policy::sink(store, sink)?,
                })
            }
        }
    }

    /// Sets a sink's limits (admin; audited).
    pub fn set_sink_limits(&self, sink: &str, set: &SinkLimits) -> Result<SinkLimitsChange> {
        match self {
            Operator::Daemon(c) => c.put(
                &routes::fill(routes::SINK_LIMITS, sink),
                &Via::<SinkLimitsJson, _>::new(set),
            ),
            Operator::Store { store, who } => {
                policy::set_sink(store, who, sink, set, ankusa_store::system_now_ms())
            }
        }
    }

    /// Clears a sink's limits: its configuration applies (admin; audited).
    pub fn clear_sink_limits(&self, sink: &str) -> Result<SinkLimitsChange> {
        match self {
            Operator::Daemon(c) => c.delete(&routes::fill(routes::SINK_LIMITS, sink)),
            Operator::Store { store, who } => {
                policy::clear_sink(store, who, sink, ankusa_store::system_now_ms())
            }
        }
    }

    /// Runs the job to its end on the store, or follows the daemon running
    /// it, calling `progress` as it moves.
    pub fn finish(&self, job: Job, mut progress: impl FnMut(&Job)) -> Result<Job> {
        match self {
            Operator::Store { store, .. } => jobs::run(
                store,
                job,
                &ankusa_store::system_now_ms,
                &AtomicBool::new(false),
                progress,
            ),
            Operator::Daemon(c) => {
                let mut j = job;
                while j.state == JobState::Running {
                    std::thread::sleep(Duration::from_millis(200));
                    j = c.get(&routes::fill(routes::JOB, &j.id.to_string()))?;
                    progress(&j);
                }
                Ok(j)
            }
        }
    }

    /// Jobs an interrupted caller left running on a held store, oldest
    /// first; through a daemon there are none to finish (its boot resumed
    /// them).
    pub fn leftovers(&self) -> Result<Vec<Job>> {
        match self {
            Operator::Daemon(_) => Ok(Vec::new()),
            Operator::Store { store, .. } => jobs::unfinished(store),
        }
    }

    /// `the daemon at SOCKET` or `the store at DIR (no daemon running)`.
    pub fn describe(&self) -> String {
        match self {
            Operator::Daemon(c) => format!("the daemon at {}", c.transport()),
            Operator::Store { store, .. } => {
                format!(
                    "the store at {} (no daemon running)",
                    store.path().display()
                )
            }
        }
    }
}
