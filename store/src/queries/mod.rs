//! Reads whose cost is bounded by what they return, never by the backlog.
//!
//! - Counters are point reads (six per ordinal).
//! - The active index answers "which tenants have work due now" and "how old
//!   is the oldest due row" without touching idle tenants.
//! - Per-tenant reads are one range of the tenant's own keys.
//! - DLQ pages are bounded reverse scans resumed from a cursor.
//!
//! One file per question: `counts` (how much), `active` (which tenants have
//! work), `due` (what is due for a tenant, and its first due row),
//! `windows` (how much is due when), `dlq` (what is dead) and `hooks` (one
//! hook's records).

mod active;
mod counts;
mod dlq;
mod due;
mod hooks;
#[cfg(test)]
mod tests;
mod windows;

pub use active::{
    active_markers, active_summary, active_tenants, active_within, markers_between, top_pending,
    ActiveSummary, ActiveTenant, ActiveWalk, Marker, PendingTenant, MARKER_BUDGET, TOP_SCAN,
};
pub use counts::{
    counters, counters_many, each_tenant_counters, gauges, node_counters, tallies, tallies_many,
    Gauges,
};
pub(crate) use dlq::dead_keys_of_tenant;
pub use dlq::{
    dead_row, dlq_page, dlq_page_for_tenant, dlq_page_ordered, DlqCursor, DlqOrder, DlqPage,
};
pub use due::{
    due_for_tenant, first_due, first_due_time, oldest_due, visit_due, DueFrom, OldestDue,
    OLDEST_DUE_SKIP,
};
pub use hooks::{archive_obligations, dedupe, delivery, hook, hook_source};
pub use windows::due_window_counts;

/// Keys a bounded walk of one tenant's rows looks at most (a page of its
/// dead keys, a purge chunk), kept rows included: such a walk may hold the
/// dispatcher's row lock, so its work stays bounded even on a tenant whose
/// newest rows are all being kept. Four purge chunks
/// ([`crate::transitions::CHUNK`]).
pub const VISIT_MAX: usize = 2_000;
/// Undecodable rows one read hands back for the quarantine at most.
pub const MAX_UNDECODABLE: usize = 64;
