//! The screens' reads, each bounded by what the screen shows: counters are
//! point reads, pages are bounded scans, the active-tenant count and the
//! heatmap walk a bounded number of markers, heatmap cells are counted
//! with a cap. Nothing here folds a family.

use ankusa_ops::preview;
use ankusa_store::queries::{self, DlqCursor};
use ankusa_store::rows::DeadRow;
use ankusa_store::tenants::{self, Name, TenantInfo};
use ankusa_store::values::Envelope;
use ankusa_store::{Store, StoreError};

use ankusa_ops::access::{Peer, Principal};
use ankusa_ops::client::{Client, Probe};
use ankusa_ops::operator::Operator;

use super::feed::{DataError, Feed};
use super::open::OpenMode;
use super::request::{
    DeadDetail, DlqData, HeatRow, HeatmapData, Overview, SinkData, SinkRef, SinksData, TenantData,
    TenantsAfter, TenantsData, TenantsQuery,
};
use crate::heatmap::{self, HeatSpec};

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
impl Feed {
    pub(super) fn overview(&self, now: u64) -> Result<Overview, StoreError> {
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
        let (node, totals) = queries::tallies(s, 0)?;
        Ok(Overview {
            node,
            totals,
            tenants: tenants::allocated(s)?,
            active: walk.tenants.len(),
            active_capped: !walk.complete,
            oldest,
            oldest_name,
            format: s.format()?,
            quarantined: ankusa_store::quarantine::count(s)?,
            store_fault: self.daemon_store_fault(),
            pauses: ankusa_store::pauses::list(s)?.len(),
        })
    }

    /// Asks the followed daemon whether its store refuses writes. A daemon
    /// that does not answer is not a fault of the store: the daemon line of
    /// the overview says whether it runs.
    fn daemon_store_fault(&self) -> Option<ankusa_ops::model::StoreFault> {
        use ankusa_ops::client::{Client, Probe};
        if !matches!(self.mode, super::OpenMode::Follow { .. }) {
            return None;
        }
        match Client::probe(&self.path, self.token.clone()) {
            Ok(Probe::Daemon(c)) => c
                .get::<ankusa_ops::model::Stats>(ankusa_ops::routes::STATS)
                .ok()
                .and_then(|s| s.daemon)
                .and_then(|d| d.store_fault),
            _ => None,
        }
    }

    pub(super) fn tenants(&self, q: &TenantsQuery) -> Result<TenantsData, DataError> {
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
        let paused = ankusa_ops::reads::paused_among(s, rows.iter().map(|t| t.id.as_str()))?;
        let policies = ankusa_ops::reads::with_policy_among(s, rows.iter().map(|t| t.id.as_str()))?;
        Ok(TenantsData {
            query: q.clone(),
            rows,
            next,
            total: tenants::allocated(s)?,
            paused,
            policies,
        })
    }

    pub(super) fn tenant(
        &self,
        ord: u32,
        dlq_limit: usize,
        heat: &HeatSpec,
        now: u64,
    ) -> Result<TenantData, DataError> {
        let s = self.need()?;
        let (name, paused, policy) = match tenants::name_of(s, ord)? {
            Some(Name::Live(n)) => {
                let paused = ankusa_ops::reads::holding(s, &n)?;
                let policy = ankusa_store::policy::tenant(s, &n)?;
                (n, paused, policy)
            }
            Some(Name::Erased) => ("(erased)".into(), Vec::new(), None),
            None => (format!("ord {ord}"), Vec::new(), None),
        };
        let (counters, totals) = queries::tallies(s, ord)?;
        Ok(TenantData {
            ord,
            name,
            counters,
            totals,
            first_due: queries::first_due(s, ord, queries::DueFrom::At(0))?,
            heat: heatmap::count_row(s, ord, heat, now)?,
            dlq: queries::dlq_page_for_tenant(s, ord, None, dlq_limit)?,
            paused,
            policy,
        })
    }

    /// Who answers the sinks' reads: the daemon this console follows (its
    /// answer carries each sink's health), else the store itself (the
    /// catalog and the pauses, no health: nothing of it is stored).
    fn reader(&self) -> Result<(Operator<&Store>, bool), DataError> {
        if matches!(self.mode, OpenMode::Follow { .. }) {
            if let Ok(Probe::Daemon(c)) = Client::probe(&self.path, self.token.clone()) {
                return Ok((Operator::Daemon(c), true));
            }
        }
        let who = Principal::local(&Peer::me());
        Ok((
            Operator::Store {
                store: self.need()?,
                who,
            },
            false,
        ))
    }

    /// The sinks screen: one sinks request (to the daemon, or the store).
    /// The daemon's last hour of the node; none without a daemon.
    pub(super) fn history(&self) -> Result<ankusa_ops::model::NodeHistory, DataError> {
        let (op, _) = self.reader()?;
        Ok(op.history()?)
    }

    pub(super) fn sinks(&self) -> Result<SinksData, DataError> {
        let (op, live) = self.reader()?;
        let page = op.sinks()?;
        // A daemon that answered without health (an older one) has no
        // figures to show either.
        let live = live && page.sinks.iter().any(|v| v.health.is_some());
        Ok(SinksData {
            sinks: page.sinks,
            live,
        })
    }

    /// One sink: the sinks request and one bounded page of its DLQ rows,
    /// read from this console's store (the same rows the daemon holds).
    pub(super) fn sink(&self, key: &SinkRef, dlq_limit: usize) -> Result<SinkData, DataError> {
        let (op, live) = self.reader()?;
        let view = op
            .sinks()?
            .sinks
            .into_iter()
            .find(|v| v.source == key.source && v.index == key.sink);
        let s = self.need()?;
        let who = Principal::local(&Peer::me());
        let page = match &view {
            Some(_) => ankusa_ops::reads::dlq_page(
                s,
                &who,
                None,
                queries::DlqOrder::NewestFirst,
                None,
                dlq_limit.clamp(1, ankusa_ops::reads::MAX_PAGE),
                &ankusa_ops::reads::DlqFilter {
                    sink: Some(key.to_string()),
                    event_type: None,
                },
            )?,
            None => ankusa_ops::model::DlqPage {
                entries: Vec::new(),
                next: None,
            },
        };
        Ok(SinkData {
            key: key.clone(),
            live: live && view.as_ref().is_some_and(|v| v.health.is_some()),
            view,
            dlq: page
                .entries
                .into_iter()
                .map(|e| (e.tenant, e.row))
                .collect(),
            more: page.next.is_some(),
        })
    }

    pub(super) fn heatmap(
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

    pub(super) fn dlq(
        &self,
        ord: Option<u32>,
        cursor: Option<DlqCursor>,
        limit: usize,
        order: queries::DlqOrder,
        event_type: Option<&str>,
    ) -> Result<DlqData, StoreError> {
        let s = self.need()?;
        // The command checked the pattern; one that does not parse here
        // matches nothing rather than everything.
        let page = match event_type {
            None => queries::dlq_page_ordered(s, ord, order, cursor, limit)?,
            Some(p) => {
                let p = ankusa_ops::event_type::Pattern::parse(p).ok();
                ankusa_ops::reads::filtered_page(s, ord, order, cursor, limit, |row| {
                    p.as_ref()
                        .is_some_and(|p| p.matches_hook(row.event_type.as_deref()))
                })?
            }
        };
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
            event_type: event_type.map(str::to_owned),
            cursor,
            page,
            names,
            total,
            sinks: ankusa_store::sinks::catalog(s)?,
        })
    }

    pub(super) fn dead_detail(&self, row: &DeadRow) -> Result<DeadDetail, StoreError> {
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
            sink: ankusa_store::sinks::display(
                &ankusa_store::sinks::catalog(s)?,
                &row.source_id,
                row.sink,
            ),
            still_dead,
            delivery,
            preview: envelope.as_ref().map(preview::build),
        })
    }
}

fn live_name(s: &Store, ord: u32) -> Result<Option<String>, StoreError> {
    Ok(match tenants::name_of(s, ord)? {
        Some(Name::Live(n)) => Some(n),
        Some(Name::Erased) => Some("(erased)".into()),
        None => None,
    })
}
