//! `store info`: a summary that costs point reads and bounded scans only.

use crate::counters::{Counters, Totals};
use crate::error::Result;
use crate::queries::{self, OldestDue};
use crate::schema::Family;
use crate::store::Store;

#[derive(Debug, Clone)]
pub struct StoreInfo {
    pub path: String,
    pub mode: &'static str,
    pub format: Option<u32>,
    pub node: Counters,
    /// The node's cumulative totals (rows accepted, delivered, retried,
    /// dead-lettered, and hooks unrouted, since the store was created or
    /// migrated).
    pub totals: Totals,
    /// Ordinals ever allocated (erased tenants included).
    pub tenants: u32,
    /// Tenants with work due now, from a bounded walk of the active index
    /// (`complete: false` means the count is a lower bound).
    pub active: queries::ActiveSummary,
    pub oldest_due: Option<OldestDue>,
    pub oldest_due_age_ms: Option<u64>,
    pub next_seq: u64,
    /// Rows moved to the quarantine (`ankusa store quarantine list`).
    pub quarantined: i64,
    /// RocksDB's estimate of keys per family.
    pub approx_keys: Vec<(String, u64)>,
}

pub fn gather(store: &Store, now: u64) -> Result<StoreInfo> {
    let oldest = queries::oldest_due(store)?;
    let mut approx = Vec::new();
    for f in Family::ALL {
        approx.push((f.name().to_owned(), store.estimate_keys(f)?));
    }
    let (node, totals) = queries::tallies(store, 0)?;
    Ok(StoreInfo {
        path: store.path().display().to_string(),
        mode: store.mode().label(),
        format: store.format()?,
        node,
        totals,
        tenants: crate::tenants::allocated(store)?,
        active: queries::active_summary(store, now, queries::MARKER_BUDGET)?,
        oldest_due: oldest,
        oldest_due_age_ms: oldest.map(|o| o.age_ms(now)),
        next_seq: store.next_seq()?,
        quarantined: crate::quarantine::count(store)?,
        approx_keys: approx,
    })
}
