//! Guarded actions: the dry run's exact count, then the run. Purge,
//! replay, pause, resume and drain have no code of their own here: each is one
//! `ankusa_ops::operator::Operator` call (on the store in WRITE mode,
//! through the daemon's admin API in FOLLOW mode), the same code, audit
//! records and row lock as the command line and the admin API. The
//! migration counts with its plan; a repair runs `store repair` on the
//! store this console holds for writing, audited like the command line's.

use ankusa_ops::access::{Peer, Principal};
use ankusa_ops::client::{Client, Probe as DaemonProbe};
use ankusa_ops::model::{row_name, JobState, Kinds, PauseRequest, ReplayRequest};
use ankusa_ops::operator::{Action, Operator};
use std::ops::Deref;

use ankusa_store::Store;

use super::feed::{DataError, Feed};
use super::open::OpenMode;
use super::request::{ActionResult, ActionScope, Progress, Reply};

impl Feed {
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
        count_on(&self.operator()?, scope)
    }

    /// Runs a guarded action as the operator's audited job (on the store
    /// this console writes, or through the daemon it follows) and follows
    /// it to its end.
    pub(super) fn run_action(
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
                note: None,
            });
        }
        if let ActionScope::Migrate = scope {
            // The migration runs one step per request (MigrationStep) so the
            // screen shows each cursor and the operator can pause.
            return Err(DataError::Refused(
                "the migration runs step by step, not as one action".into(),
            ));
        }
        let r = act_on(&self.operator()?, scope, progress)?;
        self.fresh_at = now;
        Ok(r)
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

/// The exact number of rows `scope` would touch on the node `op`
/// reaches: the operator's dry run (which writes its audit record). A
/// pause, a resume and a drain are not counted ([`ActionScope::counts`]).
/// The fleet console calls this with the operator of the node it acts on.
pub fn count_on<S: Deref<Target = Store>>(
    op: &Operator<S>,
    scope: &ActionScope,
) -> Result<u64, DataError> {
    match ask(scope)? {
        Ask::Purge { tenant, kinds } => counted(op.purge(&tenant, kinds, true)?),
        Ask::Replay(r) => counted(op.replay(r, true)?),
        Ask::Pause(_)
        | Ask::Resume(_)
        | Ask::Drain(_)
        | Ask::Policy { .. }
        | Ask::SinkLimits { .. } => Ok(0),
    }
}

/// Runs `scope` as the operator's audited call or job on the node `op`
/// reaches and follows it to its end (the single-node console's and the
/// fleet console's one implementation).
pub fn act_on<S: Deref<Target = Store>>(
    op: &Operator<S>,
    scope: &ActionScope,
    progress: &mut dyn FnMut(Progress),
) -> Result<ActionResult, DataError> {
    let noted = |note: String| ActionResult {
        scope: scope.clone(),
        expected: 0,
        touched: 0,
        note: Some(note),
    };
    let started = match ask(scope)? {
        Ask::Purge { tenant, kinds } => op.purge(&tenant, kinds, false)?,
        Ask::Replay(r) => op.replay(r, false)?,
        Ask::Pause(req) => {
            let p = op.pause(&req)?;
            return Ok(noted(if p.created {
                format!("Paused {}: its rows stay queued.", p.pause.label)
            } else {
                format!("{} was already paused: nothing changed.", p.pause.label)
            }));
        }
        Ask::Resume(req) => {
            let r = op.resume(&req)?;
            let Some(job) = r.job else {
                return Ok(noted(format!(
                    "Resumed {}: its rows are due.",
                    r.pause.label
                )));
            };
            Action::Started(Box::new(job))
        }
        Ask::Policy { tenant, set } => {
            let c = match set {
                Some(p) => op.set_tenant_policy(&tenant, &p)?,
                None => op.clear_tenant_policy(&tenant)?,
            };
            let show = |p: Option<ankusa_store::policy::Policy>| {
                p.map_or_else(|| "the defaults".to_owned(), |p| p.to_string())
            };
            return Ok(noted(if c.changed {
                format!(
                    "Policy of tenant {tenant}: {} -> {}. The dispatcher applies it on its next tick.",
                    show(c.before),
                    show(c.after)
                )
            } else {
                format!(
                    "Policy of tenant {tenant} was already {}: nothing changed.",
                    show(c.after)
                )
            }));
        }
        Ask::SinkLimits { sink, set } => {
            let c = match set {
                Some(l) => op.set_sink_limits(&sink, &l)?,
                None => op.clear_sink_limits(&sink)?,
            };
            let show = |l: Option<ankusa_store::policy::SinkLimits>| {
                l.map_or_else(|| "its configuration's".to_owned(), |l| l.to_string())
            };
            return Ok(noted(if c.changed {
                format!(
                    "Limits of sink {}: {} -> {}. The dispatcher applies them on its next tick.",
                    c.sink,
                    show(c.before),
                    show(c.after)
                )
            } else {
                format!(
                    "Limits of sink {} were already {}: nothing changed.",
                    c.sink,
                    show(c.after)
                )
            }));
        }
        Ask::Drain(on) => {
            let n = op.drain(on)?;
            let who = n
                .node
                .map_or("the node".to_owned(), |id| format!("node {id}"));
            return Ok(noted(if on {
                format!(
                    "{who} drains: /healthz answers 503; {} row(s) still owed.",
                    n.owed
                )
            } else {
                format!("{who} is not draining: /healthz answers 200 again.")
            }));
        }
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
    let touched = done.progress.rows();
    Ok(ActionResult {
        scope: scope.clone(),
        expected,
        touched,
        note: matches!(scope, ActionScope::Resume(_))
            .then(|| format!("Resumed: {touched} parked row(s) made due.")),
    })
}

/// What an action scope asks the operator for.
pub(crate) enum Ask {
    Purge {
        tenant: String,
        kinds: Kinds,
    },
    Replay(ReplayRequest),
    Pause(PauseRequest),
    Resume(PauseRequest),
    /// Start (`true`) or end a drain.
    Drain(bool),
    /// Set a sink's limits (merged into what is stored), or clear them.
    SinkLimits {
        sink: String,
        set: Option<ankusa_store::policy::SinkLimits>,
    },
    /// Set the fields of `set` (merged into what is stored), or clear.
    Policy {
        tenant: String,
        set: Option<ankusa_store::policy::Policy>,
    },
}

pub(crate) fn ask(scope: &ActionScope) -> Result<Ask, DataError> {
    Ok(match scope {
        ActionScope::Purge { tenant, kinds, .. } => Ask::Purge {
            tenant: tenant.clone(),
            kinds: *kinds,
        },
        // Exactly the marked rows, each by hook and sink: a hook's other
        // dead sinks are not part of the scope the guard showed.
        ActionScope::ReplayRows { rows, .. } => Ask::Replay(ReplayRequest {
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
        ActionScope::Pause(t) => Ask::Pause(t.request()),
        ActionScope::Resume(t) => Ask::Resume(t.request()),
        ActionScope::Drain { on, .. } => Ask::Drain(*on),
        // The whole policy the guard showed, not a merge of what the
        // operator typed: what is confirmed is what is stored.
        ActionScope::Policy { tenant, after, .. } => Ask::Policy {
            tenant: tenant.clone(),
            set: *after,
        },
        ActionScope::SinkLimits { sink, after, .. } => Ask::SinkLimits {
            sink: sink.clone(),
            set: *after,
        },
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
