//! A pause in force and what it covers ([`ankusa_store::pauses::Pause`],
//! [`Scope`], [`Origin`]). A resume job persists its scope in its record.

use ankusa_store::pauses::{Origin, Pause, Scope};
use ankusa_store::sinks::SinkRef;
use serde::{Deserialize, Serialize};

use super::{mirror, Opt, SinkRefJson};

/// A tenant, a sink, or both; each absent when the pause does not name it.
#[derive(Serialize, Deserialize)]
#[serde(remote = "Scope")]
pub struct ScopeJson {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "Opt::<SinkRefJson>"
    )]
    pub sink: Option<SinkRef>,
}
mirror!(ScopeJson => Scope);

#[derive(Serialize, Deserialize)]
#[serde(remote = "Origin", rename_all = "snake_case")]
pub enum OriginJson {
    Operator,
    Breaker,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "Pause")]
pub struct PauseJson {
    #[serde(with = "ScopeJson")]
    pub scope: Scope,
    pub at: u64,
    #[serde(with = "OriginJson")]
    pub origin: Origin,
    pub by: String,
}
mirror!(PauseJson => Pause);
