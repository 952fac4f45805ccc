//! The counters and cumulative totals of an ordinal, and a tenant with
//! them ([`ankusa_store::Counters`], [`ankusa_store::Totals`],
//! [`ankusa_store::tenants::TenantInfo`]).

use ankusa_store::tenants::TenantInfo;
use ankusa_store::{Counters, Totals};
use serde::{Deserialize, Serialize};

use super::mirror;

#[derive(Serialize, Deserialize)]
#[serde(remote = "Counters")]
pub struct CountersJson {
    pub pending: i64,
    pub scheduled: i64,
    pub inflight: i64,
    pub dead: i64,
    pub bytes: i64,
    pub archive_pending: i64,
}
mirror!(CountersJson => Counters);

/// Every total defaults to 0: a node of a release before it sends none.
#[derive(Serialize, Deserialize)]
#[serde(remote = "Totals")]
pub struct TotalsJson {
    #[serde(default)]
    pub accepted: u64,
    #[serde(default)]
    pub delivered: u64,
    #[serde(default)]
    pub retried: u64,
    #[serde(default)]
    pub dead_lettered: u64,
    #[serde(default)]
    pub unrouted: u64,
}
mirror!(TotalsJson => Totals);

#[derive(Serialize, Deserialize)]
#[serde(remote = "TenantInfo")]
pub struct TenantInfoJson {
    pub ord: u32,
    pub id: String,
    #[serde(with = "CountersJson")]
    pub counters: Counters,
    /// Absent from a node of a release before the totals: zeros.
    #[serde(default, with = "TotalsJson")]
    pub totals: Totals,
}
mirror!(TenantInfoJson => TenantInfo);
