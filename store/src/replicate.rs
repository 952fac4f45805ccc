//! The one place a clustered store's changes leave the node
//! (docs/cluster.md, "The state machine is the store").
//!
//! Every change to a store is one `WriteBatch` built by
//! [`Store::commit`]. On a store with a [`Replicator`] installed,
//! `commit` does not write that batch: it hands the batch's bytes to the
//! replicator, which proposes them as one entry of the replicated log and
//! returns once the entry is committed and applied to this store. Every
//! member applies committed entries in log order with [`Store::apply`],
//! which replays the bytes and records the entry's place in the log in the
//! same write. Apply computes nothing, so it gives the same store on every
//! member; what the batch carries (clock readings, seqs, ordinals, ids)
//! was decided where it was built.
//!
//! Invariants:
//! - With a replicator installed, the store's content changes only through
//!   [`Store::apply`]. [`Store::commit`] returns `Ok` only once its entry
//!   was applied here, so a caller plans its next batch from state that
//!   holds its own last one, as after a synced write today.
//! - An entry's bytes and its bookkeeping (keys under
//!   [`crate::digest::REPLICATION_PREFIX`]) are one RocksDB write: a crash
//!   leaves both or neither, so re-applying from the recorded index is
//!   exact.
//! - An error from the replicator means the outcome is unknown (the entry
//!   may still commit under a later leader): the caller treats it as it
//!   treats a failed synced write today, and reads the state again before
//!   its next batch.

use rocksdb::{WriteBatch, WriteOptions};

use crate::digest::REPLICATION_PREFIX;
use crate::error::{Result, StoreError};
use crate::schema::Family;
use crate::store::Store;

/// Proposes a store change to the replicated log.
pub trait Replicator: Send + Sync + std::fmt::Debug {
    /// Proposes `entry` (a `WriteBatch`'s bytes) and returns once it is
    /// committed by a majority and applied to this store, or why not.
    /// Called from blocking threads, never from an async task.
    fn replicate(&self, entry: Vec<u8>) -> std::result::Result<(), ReplicateError>;
}

/// Why an entry was not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicateError {
    /// This member does not lead: nothing was proposed.
    #[error("this member is not the leader{}", leader.as_deref().map(|l| format!(" (the leader is {l})")).unwrap_or_default())]
    NotLeader { leader: Option<String> },
    /// Proposed, but its fate is unknown (the lead was lost, the log
    /// failed): it may still commit.
    #[error("the entry's outcome is unknown: {0}")]
    Unknown(String),
}

impl Store {
    /// Routes every later [`Store::commit`] through `r`. Installed once,
    /// before anything writes; a store without one writes directly.
    pub fn set_replicator(&self, r: std::sync::Arc<dyn Replicator>) -> Result<()> {
        self.require_writable()?;
        self.replicator
            .set(r)
            .map_err(|_| StoreError::Invalid("a replicator is already installed".into()))
    }

    /// Whether commits go through a replicator.
    pub fn is_replicated(&self) -> bool {
        self.replicator.get().is_some()
    }

    /// Applies one committed entry: `entry`'s bytes (absent for an entry
    /// that changes no content, such as a membership change) and the
    /// replication bookkeeping `marks` (keys under `m:raft:`), in one
    /// write, not synced: the log holds the entry durably, and the marks
    /// say how far this store got.
    pub fn apply(&self, entry: Option<&[u8]>, marks: &[(&[u8], &[u8])]) -> Result<()> {
        self.require_writable()?;
        let db = self.db()?;
        let mut wb = match entry {
            Some(bytes) => WriteBatch::from_data(bytes),
            None => WriteBatch::default(),
        };
        let meta = Self::cf_in(&db, Family::Meta)?;
        for (k, v) in marks {
            if !k.starts_with(REPLICATION_PREFIX) {
                return Err(StoreError::Invalid(format!(
                    "replication bookkeeping must be under m:raft:, not {}",
                    String::from_utf8_lossy(k)
                )));
            }
            wb.put_cf(meta, k, v);
        }
        let written = db.write_opt(wb, &WriteOptions::default());
        self.record_write(written)
    }

    /// A replication bookkeeping value (a key under `m:raft:`).
    pub fn replication_mark(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if !key.starts_with(REPLICATION_PREFIX) {
            return Err(StoreError::Invalid(format!(
                "replication bookkeeping is under m:raft:, not {}",
                String::from_utf8_lossy(key)
            )));
        }
        self.get(Family::Meta, key)
    }
}

#[cfg(test)]
mod tests;
