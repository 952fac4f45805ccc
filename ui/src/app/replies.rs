//! Replies of the data feed: each request's answer goes into the state of
//! the screen or popup that asked for it, a failure into the status line,
//! and an action's answer into the actions history.

use super::{App, Effect};
use crate::data::{ActionScope, DaemonStatus, OpenMode, Reply, Request};
use crate::fmt::quoted;
use crate::popups::guard::Stage;
use crate::popups::Overlay;
use crate::rates::Sample;
use crate::screens::migration::Guide;
use crate::screens::Screen;

impl App {
    pub(super) fn apply(&mut self, req: Request, result: Result<Reply, String>) -> Vec<Effect> {
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
    pub(super) fn note_action(
        &mut self,
        scope: &ActionScope,
        r: Result<&crate::data::ActionResult, &String>,
    ) {
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
}
