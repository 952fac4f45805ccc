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
//!
//! - [`open`]: the open modes and why an open failed;
//! - [`feed`]: the [`Feed`] itself, kept fresh per refresh;
//! - [`request`]: requests, replies and the console's read models;
//! - [`reads`], [`migration`], [`actions`]: what the feed answers;
//! - [`worker`]: the thread it runs on.

pub mod actions;
pub mod equivalent;
pub mod feed;
pub mod migration;
pub mod open;
pub mod reads;
pub mod request;
pub mod worker;

pub use feed::{DataError, Feed};
pub use open::{OpenError, OpenMode, OpenRequest, SecondaryDir};
pub use reads::{heat_marker_budget, ACTIVE_BUDGET};
pub use request::*;
pub use worker::{spawn_worker, Event, Fetch};

use ankusa_store::{queries, tenants};

impl Feed {
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
            Request::Rank { field, limit } => {
                let s = self.need()?;
                let rows = tenants::top_by(s, *field, *limit)?;
                let paused =
                    ankusa_ops::reads::paused_among(s, rows.iter().map(|t| t.id.as_str()))?;
                let policies =
                    ankusa_ops::reads::with_policy_among(s, rows.iter().map(|t| t.id.as_str()))?;
                Reply::Ranked {
                    field: *field,
                    rows,
                    paused,
                    policies,
                    at: now,
                }
            }
            Request::CountersOf(ords) => {
                let c = queries::tallies_many(self.need()?, ords)?;
                Reply::CountersOf(
                    ords.iter()
                        .copied()
                        .zip(c)
                        .map(|(o, (c, t))| (o, c, t))
                        .collect(),
                )
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
                event_type,
            } => Reply::Dlq(self.dlq(*ord, *cursor, *limit, *order, event_type.as_deref())?),
            Request::DeadDetail(row) => Reply::DeadDetail(Box::new(self.dead_detail(row)?)),
            Request::Sinks => Reply::Sinks(self.sinks()?),
            Request::History => Reply::History(self.history()?),
            Request::Sink { sink, dlq_limit } => {
                Reply::Sink(Box::new(self.sink(sink, *dlq_limit)?))
            }
            Request::DryRun(scope) => Reply::DryRun(scope.clone(), self.dry_run(scope)?),
            Request::Execute(scope) => Reply::Done(self.run_action(scope, now, progress)?),
        })
    }
}
