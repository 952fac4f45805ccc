//! What an operator set for a tenant or a sink
//! ([`ankusa_store::policy::Policy`], [`SinkLimits`] and their stored
//! forms), and the sink they name ([`ankusa_store::sinks::SinkRef`]). A
//! rate in them is its own text (`Rate`'s serde is its `Display` and
//! `FromStr`), as on the command line and in the configuration file.
//!
//! A policy and a sink's limits are also request bodies: their mirrors
//! refuse fields they do not know, so a misspelt `wieght` is an error, not
//! a policy that silently changes nothing.

use ankusa_store::policy::{Policy, Rate, SinkLimits, StoredSinkLimits, TenantPolicy};
use ankusa_store::sinks::SinkRef;
use serde::{Deserialize, Serialize};

use super::mirror;

/// A sink as `{"source": ..., "sink": position}`.
#[derive(Serialize, Deserialize)]
#[serde(remote = "SinkRef")]
pub struct SinkRefJson {
    pub source: String,
    pub sink: u16,
}
mirror!(SinkRefJson => SinkRef);

/// Each field absent when not set.
#[derive(Serialize, Deserialize)]
#[serde(remote = "Policy", deny_unknown_fields)]
pub struct PolicyJson {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<u32>,
    /// As its text (`20/s`), the one form of a rate everywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
}
mirror!(PolicyJson => Policy);

/// Each field absent when not set.
#[derive(Serialize, Deserialize)]
#[serde(remote = "SinkLimits", deny_unknown_fields)]
pub struct SinkLimitsJson {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<u32>,
    /// As its text (`20/s`), the one form of a rate everywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
}
mirror!(SinkLimitsJson => SinkLimits);

#[derive(Serialize, Deserialize)]
#[serde(remote = "TenantPolicy")]
pub struct TenantPolicyJson {
    pub tenant: String,
    #[serde(with = "PolicyJson")]
    pub policy: Policy,
    pub at: u64,
    pub by: String,
}
mirror!(TenantPolicyJson => TenantPolicy);

#[derive(Serialize, Deserialize)]
#[serde(remote = "StoredSinkLimits")]
pub struct StoredSinkLimitsJson {
    #[serde(with = "SinkRefJson")]
    pub sink: SinkRef,
    #[serde(with = "SinkLimitsJson")]
    pub limits: SinkLimits,
    pub at: u64,
    pub by: String,
}
mirror!(StoredSinkLimitsJson => StoredSinkLimits);
