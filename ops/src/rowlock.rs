//! The one lock for read-then-write transitions on rows that already exist.
//!
//! RocksDB makes each batch atomic, not each read-decide-write sequence. Two
//! such sequences that read the same row would both move it and both count
//! the move: a due row claimed by the dispatcher while a purge deletes it
//! ends as an inflight row of a purged hook with `pending` decremented
//! twice; a dead row revived by a replay while a purge deletes it is counted
//! out of `dead` twice. So the dispatcher's claim, each purge chunk and each
//! replay chunk hold this lock from their read to their commit.
//!
//! What needs no lock: ingest only writes rows with fresh seqs; delivery
//! outcomes (delivered, retry, dead-letter) move inflight rows, which
//! nothing else reads-then-writes (purge and replay never touch them); marker
//! cleanup is delete-then-verify by design.
//!
//! Held for one chunk (at most `transitions::CHUNK` rows) at a time, so a
//! long purge delays a dispatch tick by one chunk's commit, never by the
//! whole purge.

use std::sync::{Mutex, MutexGuard, PoisonError};

static ROWS: Mutex<()> = Mutex::new(());

/// Holds the row lock until the guard drops. A panic while holding it
/// leaves no partial state behind (batches are atomic), so a poisoned lock
/// is taken over rather than stopping every later transition.
pub fn hold() -> MutexGuard<'static, ()> {
    ROWS.lock().unwrap_or_else(PoisonError::into_inner)
}
