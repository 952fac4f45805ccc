//! How far a job has got: the cursors a purge, a range replay and a
//! resume's unpark walk commit with each chunk. The jobs persist these as
//! JSON in the store's job records, so a change here must still read the
//! records a running node wrote before it.

use ankusa_store::queries::DlqCursor;
use ankusa_store::transitions::{PurgeCursor, UnparkCursor};
use serde::{Deserialize, Serialize};

use super::mirror;

/// The last keys visited as `[at, seq, sink]` arrays.
#[derive(Serialize, Deserialize)]
#[serde(remote = "PurgeCursor")]
pub struct PurgeCursorJson {
    pub due_after: Option<(u64, u64, u16)>,
    pub due_done: bool,
    pub dead_after: Option<(u64, u64, u16)>,
    pub dead_done: bool,
}
mirror!(PurgeCursorJson => PurgeCursor);

#[derive(Serialize, Deserialize)]
#[serde(remote = "DlqCursor")]
pub struct DlqCursorJson {
    pub at: u64,
    pub seq: u64,
    pub sink: u16,
}
mirror!(DlqCursorJson => DlqCursor);

/// The last parked row looked at as an `[at, sink]` array.
#[derive(Serialize, Deserialize)]
#[serde(remote = "UnparkCursor")]
pub struct UnparkCursorJson {
    pub ord: u32,
    pub after: Option<(u64, u16)>,
}
mirror!(UnparkCursorJson => UnparkCursor);
