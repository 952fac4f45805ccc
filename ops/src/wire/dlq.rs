//! A dead-lettered row ([`ankusa_store::DeadRow`]) as the DLQ's JSON has it,
//! and the order a page of them is asked in.

use ankusa_store::queries::DlqOrder;
use ankusa_store::DeadRow;
use serde::{Deserialize, Serialize};

use super::mirror;

#[derive(Serialize, Deserialize)]
#[serde(remote = "DeadRow")]
pub struct DeadRowJson {
    pub ord: u32,
    pub at: u64,
    pub seq: u64,
    pub sink: u16,
    pub source_id: String,
    pub hook_id: String,
    /// Absent from a node that predates routing by type.
    #[serde(default)]
    pub event_type: Option<String>,
}
mirror!(DeadRowJson => DeadRow);

/// Which end a DLQ page starts from: `newest_first` (the default) or
/// `oldest_first`, as the `order` query parameter has it.
#[derive(Serialize, Deserialize)]
#[serde(remote = "DlqOrder", rename_all = "snake_case")]
pub enum DlqOrderJson {
    NewestFirst,
    OldestFirst,
}
mirror!(DlqOrderJson => DlqOrder);
