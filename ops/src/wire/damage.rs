//! A damaged table file the store met ([`ankusa_store::damage::Damage`]),
//! as `GET /healthz` reports it while the daemon serves around it.

use ankusa_store::damage::{Damage, DamagedFile};
use serde::{Deserialize, Serialize};

use super::{mirror, Opt};

#[derive(Serialize, Deserialize)]
#[serde(remote = "Damage")]
pub struct DamageJson {
    pub since_ms: u64,
    /// Absent (`null`) when RocksDB's message names no live file.
    #[serde(default, with = "Opt::<DamagedFileJson>")]
    pub file: Option<DamagedFile>,
    pub error: String,
    pub failed_reads: u64,
}
mirror!(DamageJson => Damage);

/// The file's name, its family, its LSM level and its first and last key.
#[derive(Serialize, Deserialize)]
#[serde(remote = "DamagedFile")]
pub struct DamagedFileJson {
    pub name: String,
    pub family: String,
    pub first_key: String,
    pub last_key: String,
    pub level: i32,
}
mirror!(DamagedFileJson => DamagedFile);
