//! A drain in force ([`ankusa_store::node::Drain`]). The node's id is its
//! own text (`NodeId`'s serde), as in the configuration file.

use ankusa_store::node::Drain;
use serde::{Deserialize, Serialize};

use super::mirror;

#[derive(Serialize, Deserialize)]
#[serde(remote = "Drain")]
pub struct DrainJson {
    pub since: u64,
    pub by: String,
}
mirror!(DrainJson => Drain);
