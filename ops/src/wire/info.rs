//! `ankusa store info --json`: the store's summary
//! ([`ankusa_store::info::StoreInfo`]) with the node's counters, the
//! active walk and the oldest due row. Written only: nothing reads the
//! summary back (its `&'static str` mode could not be read).

use ankusa_store::info::StoreInfo;
use ankusa_store::queries::{ActiveSummary, OldestDue};
use ankusa_store::{Counters, Totals};
use serde::{Deserialize, Serialize};

use super::{mirror, CountersJson, Opt, TotalsJson};

#[derive(Serialize)]
#[serde(remote = "StoreInfo")]
pub struct StoreInfoJson {
    pub path: String,
    pub mode: &'static str,
    pub format: Option<u32>,
    #[serde(with = "CountersJson")]
    pub node: Counters,
    #[serde(with = "TotalsJson")]
    pub totals: Totals,
    pub tenants: u32,
    #[serde(with = "ActiveSummaryJson")]
    pub active: ActiveSummary,
    #[serde(with = "Opt::<OldestDueJson>")]
    pub oldest_due: Option<OldestDue>,
    pub oldest_due_age_ms: Option<u64>,
    pub next_seq: u64,
    pub quarantined: i64,
    /// `[family, keys]` pairs.
    pub approx_keys: Vec<(String, u64)>,
}

/// A remote definition that only serializes compiles with a field of
/// `StoreInfo` missing from it (only a `Deserialize` builds the whole
/// struct), so this destructures `StoreInfo` naming every field, without
/// `..`: a field added to it does not compile until it is placed here, and
/// so looked at for the mirror above (issue 47). Compiled with the tests
/// (`make test`'s clippy and build of every target), called by none.
#[cfg(test)]
#[allow(dead_code)]
fn lists_every_field(info: &StoreInfo) -> usize {
    let StoreInfo {
        path: _,
        mode: _,
        format: _,
        node: _,
        totals: _,
        tenants: _,
        active: _,
        oldest_due: _,
        oldest_due_age_ms: _,
        next_seq: _,
        quarantined: _,
        approx_keys,
    } = info;
    approx_keys.len()
}

/// `complete: false` when the walk stopped at its budget.
#[derive(Serialize, Deserialize)]
#[serde(remote = "ActiveSummary")]
pub struct ActiveSummaryJson {
    pub tenants: usize,
    pub markers_walked: usize,
    pub complete: bool,
}
mirror!(ActiveSummaryJson => ActiveSummary);

#[derive(Serialize, Deserialize)]
#[serde(remote = "OldestDue")]
pub struct OldestDueJson {
    pub ord: u32,
    pub at: u64,
    pub exact: bool,
}
mirror!(OldestDueJson => OldestDue);
