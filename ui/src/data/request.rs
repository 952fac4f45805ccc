//! What the screens ask the feed ([`Request`]) and what it answers
//! ([`Reply`]), with the read models the screens draw. These are the
//! console's own models: the admin API's (`ankusa_ops::model`) carry other
//! fields and other names.

use std::path::PathBuf;

/// A sink by its place: the source and its position in the source's
/// sinks (the `sink` of its rows); `source/sink` when displayed, the form
/// the operator core resolves. The store's one type for it.
pub use ankusa_store::pauses::SinkRef;

use ankusa_ops::model::{Kinds, PauseRequest, PauseView, SinkView};
use ankusa_ops::preview::Preview;
use ankusa_store::check::CheckReport;
use ankusa_store::counters::Field;
use ankusa_store::migrate::{self, Cursor, Plan};
use ankusa_store::policy::{Policy, SinkLimits, TenantPolicy};
use ankusa_store::queries::{self, DlqCursor, DlqPage, OldestDue};
use ankusa_store::rows::{DeadRow, DueRow};
use ankusa_store::tenants::TenantInfo;
use ankusa_store::values::DeliveryRow;
use ankusa_store::{Counters, Totals};

use super::open::OpenMode;
use crate::heatmap::HeatSpec;

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
        /// `:dlq-type`: only rows of hooks whose type matches (a pattern
        /// the command checked; a bounded walk).
        event_type: Option<String>,
    },
    DeadDetail(DeadRow),
    /// The node's sinks, with their health when a daemon answers: one
    /// request per refresh of the sinks screen.
    Sinks,
    /// The daemon's samples of the node's last hour: asked once, when the
    /// console first finds a daemon, to seed the trends.
    History,
    /// One sink: its view (health, pauses) and the newest of its DLQ rows
    /// (a bounded walk of the DLQ, `ankusa_ops::reads::dlq_page`).
    Sink {
        sink: SinkRef,
        dlq_limit: usize,
    },
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
        /// Ids of the ranked tenants paused as a whole.
        paused: Vec<String>,
        /// Ids of the ranked tenants with a policy of their own.
        policies: Vec<String>,
        at: u64,
    },
    /// Counters and cumulative totals of the ranked rows shown.
    CountersOf(Vec<(u32, Counters, Totals)>),
    Tenant(TenantData),
    TenantByName(String, Option<u32>),
    Heatmap(HeatmapData),
    Dlq(DlqData),
    DeadDetail(Box<DeadDetail>),
    Sinks(SinksData),
    Sink(Box<SinkData>),
    History(ankusa_ops::model::NodeHistory),
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
    /// The node's cumulative totals (rates come from successive readings).
    pub totals: Totals,
    pub tenants: u32,
    pub active: usize,
    pub active_capped: bool,
    pub oldest: Option<OldestDue>,
    pub oldest_name: Option<String>,
    pub format: Option<u32>,
    /// Rows moved to the quarantine because they did not decode (one
    /// counter read).
    pub quarantined: i64,
    /// The daemon's store write fault, when following a daemon whose store
    /// refuses writes (one stats request to its admin socket).
    pub store_fault: Option<ankusa_ops::model::StoreFault>,
    /// Pauses in force (a read of at most `MAX_PAUSES` meta rows).
    pub pauses: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantsData {
    pub query: TenantsQuery,
    pub rows: Vec<TenantInfo>,
    /// Where the next page starts; None on the last page.
    pub next: Option<TenantsAfter>,
    pub total: u32,
    /// Ids of the rows shown that are paused as a whole.
    pub paused: Vec<String>,
    /// Ids of the rows shown with a policy of their own.
    pub policies: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantData {
    pub ord: u32,
    pub name: String,
    pub counters: Counters,
    pub totals: Totals,
    pub first_due: Option<DueRow>,
    pub heat: Vec<u32>,
    pub dlq: DlqPage,
    /// The pauses that hold its rows (of it, of a sink for it, of a sink
    /// for every tenant).
    pub paused: Vec<PauseView>,
    /// What an operator set for it (`ankusa tenants policy`), if anything.
    pub policy: Option<TenantPolicy>,
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
    /// The event type pattern the page is narrowed to.
    pub event_type: Option<String>,
    pub cursor: Option<DlqCursor>,
    pub page: DlqPage,
    pub names: Vec<(u32, String)>,
    /// The dead counter of the tenant (or the node).
    pub total: i64,
    /// The sink catalog, to name each row's sink.
    pub sinks: Vec<ankusa_store::sinks::SinkEntry>,
}

impl DlqData {
    /// The row's sink as operators name it (`SOURCE/NAME`).
    pub fn sink(&self, row: &DeadRow) -> String {
        ankusa_store::sinks::display(&self.sinks, &row.source_id, row.sink)
    }

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
    /// The row's sink, `SOURCE/NAME`.
    pub sink: String,
    pub still_dead: bool,
    pub delivery: Option<DeliveryRow>,
    pub preview: Option<Preview>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinksData {
    pub sinks: Vec<SinkView>,
    /// Whether a daemon answered (its health figures are in the views).
    pub live: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkData {
    pub key: SinkRef,
    /// None when the sink is not in the catalog (any more).
    pub view: Option<SinkView>,
    pub live: bool,
    /// Its newest dead rows, each with its tenant's id.
    pub dlq: Vec<(String, DeadRow)>,
    /// Whether more of its rows may be older than those (the walk is
    /// bounded: `ankusa_ops::reads::SINK_WALK`).
    pub more: bool,
}

/// What a pause or a resume names: a tenant, a sink, or a sink for one
/// tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseTarget {
    pub tenant: Option<String>,
    /// The sink, with its configured name (`SOURCE/NAME` is what the
    /// operator types to confirm).
    pub sink: Option<(SinkRef, String)>,
}

impl PauseTarget {
    /// `tenant acme`, `sink shop/bravo`, `sink shop/bravo for tenant acme`.
    pub fn label(&self) -> String {
        match (&self.tenant, &self.sink) {
            (Some(t), None) => format!("tenant {t}"),
            (None, Some((k, n))) => format!("sink {}/{n} for every tenant", k.source),
            (Some(t), Some((k, n))) => format!("sink {}/{n} for tenant {t}", k.source),
            (None, None) => "nothing".into(),
        }
    }

    /// What the operator types to confirm: the sink's `SOURCE/NAME`, else
    /// the tenant's id.
    pub fn word(&self) -> String {
        match (&self.sink, &self.tenant) {
            (Some((k, n)), _) => format!("{}/{n}", k.source),
            (None, Some(t)) => t.clone(),
            (None, None) => String::new(),
        }
    }

    /// The operator core's request (the sink by position: names may repeat
    /// across a reconfiguration, positions are what rows carry).
    pub fn request(&self) -> PauseRequest {
        PauseRequest {
            tenant: self.tenant.clone(),
            sink: self.sink.as_ref().map(|(k, _)| k.to_string()),
        }
    }
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
        /// Each row's sink, `SOURCE/NAME`, as the guard shows it.
        sinks: Vec<String>,
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
    /// Keep a scope's rows queued and unclaimed (nothing is lost).
    Pause(PauseTarget),
    /// Lift a pause: its rows become due at once.
    Resume(PauseTarget),
    /// Start (`on`) or end a drain of a node: `node` names it in a fleet,
    /// none is the node this console follows.
    Drain {
        on: bool,
        node: Option<String>,
    },
    /// Set (`after`) or clear (`after: None`) a sink's run-time limits.
    SinkLimits {
        /// `SOURCE/NAME`.
        sink: String,
        before: Option<SinkLimits>,
        after: Option<SinkLimits>,
    },
    /// Set (`after`) or clear (`after: None`) a tenant's policy; `before`
    /// is what is stored now, shown beside what it becomes.
    Policy {
        ord: u32,
        tenant: String,
        before: Option<Policy>,
        after: Option<Policy>,
    },
}

impl ActionScope {
    pub fn describe(&self) -> String {
        match self {
            ActionScope::Purge { tenant, kinds, .. } => {
                format!("purge {} of tenant {tenant}", kinds.rows())
            }
            ActionScope::ReplayRows { rows, .. } => {
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
            ActionScope::Policy {
                tenant,
                before,
                after,
                ..
            } => format!(
                "{} the policy of tenant {tenant}: {}",
                if after.is_some() { "set" } else { "clear" },
                ankusa_ops::policy::describe_tenant(
                    &before.unwrap_or_default(),
                    &after.unwrap_or_default()
                )
            ),
            ActionScope::SinkLimits {
                sink,
                before,
                after,
            } => format!(
                "{} the limits of sink {sink}: {}",
                if after.is_some() { "set" } else { "clear" },
                ankusa_ops::policy::describe_sink(
                    &before.unwrap_or_default(),
                    &after.unwrap_or_default()
                )
            ),
            ActionScope::Pause(t) => format!("pause {}", t.label()),
            ActionScope::Resume(t) => format!("resume {}", t.label()),
            ActionScope::Drain { on, node } => {
                let which = node
                    .as_ref()
                    .map_or("this node".to_owned(), |n| format!("node {n}"));
                if *on {
                    format!("drain {which}: /healthz answers 503, so the balancer stops sending")
                } else {
                    format!("undrain {which}: /healthz answers 200, so the balancer sends again")
                }
            }
        }
    }

    /// Whether the guard counts the rows first (a pause changes no row,
    /// and a resume's rows are counted by its job as it unparks them).
    pub fn counts(&self) -> bool {
        !matches!(
            self,
            ActionScope::Pause(_)
                | ActionScope::Resume(_)
                | ActionScope::Drain { .. }
                | ActionScope::Policy { .. }
                | ActionScope::SinkLimits { .. }
        )
    }

    /// What the operator must type to confirm.
    pub fn confirm_word(&self) -> String {
        match self {
            ActionScope::Purge { tenant, .. }
            | ActionScope::ReplayTenant { tenant, .. }
            | ActionScope::Policy { tenant, .. } => tenant.clone(),
            ActionScope::SinkLimits { sink, .. } => sink.clone(),
            ActionScope::ReplayRows { .. } | ActionScope::ReplayRange { .. } => "replay".into(),
            ActionScope::Migrate => "migrate".into(),
            ActionScope::Repair => "repair".into(),
            ActionScope::Pause(t) | ActionScope::Resume(t) => t.word(),
            // A fleet's node by its name, so the operator names the node
            // they mean; the followed node by the action.
            ActionScope::Drain { node: Some(n), .. } => n.clone(),
            ActionScope::Drain { on: true, .. } => "drain".into(),
            ActionScope::Drain { on: false, .. } => "undrain".into(),
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
    /// What the result says instead of a row count (a pause's outcome).
    pub note: Option<String>,
}
