//! Unparking: the rows a sink pause parked, made due again chunk by chunk
//! when the pause is lifted (the work of a resume job, [`crate::jobs`]).
//!
//! Invariants: each chunk holds the row lock ([`crate::rowlock`]), so it
//! never races the dispatcher's parking of a row; a row another pause still
//! holds stays parked (it would only be parked again).

use ankusa_store::pauses::Scope;
use ankusa_store::{queries, transitions, Batch, Store};

use crate::Result;

/// One chunk of a resume job: unparks the scope's rows that no other pause
/// still holds, committing `record` (the job's next record) with them.
pub(crate) fn chunk(
    store: &Store,
    scope: &Scope,
    ord: Option<u32>,
    cursor: &mut transitions::UnparkCursor,
    now: u64,
    record: impl FnOnce(&mut Batch, &transitions::Unparked, &transitions::UnparkCursor),
) -> Result<transitions::Unparked> {
    let Some(sink) = &scope.sink else {
        return Ok(transitions::Unparked {
            rows: 0,
            done: true,
        });
    };
    // A row another pause still holds would only be parked again.
    let held = ankusa_store::pauses::Paused::load(store)?;
    let _rows = crate::rowlock::hold();
    let out = transitions::unpark_chunk(
        store,
        ord,
        cursor,
        now,
        |row_ord, seq, row_sink| {
            if row_sink != sink.sink {
                return Ok(false);
            }
            match queries::hook_source(store, seq)? {
                // A row whose hook is gone is unparked: the dispatcher
                // settles it, where a parked one would wait forever.
                None => Ok(true),
                Some(src) => Ok(src == sink.source && !held.row(row_ord, &src, row_sink)),
            }
        },
        record,
    )?;
    Ok(out)
}
