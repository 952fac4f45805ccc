//! The one place a clustered store's changes leave the node
//! (docs/cluster.md, "The state machine is the store").
//!
//! Every change to a store is one `WriteBatch` built by
//! [`crate::Store::commit`]. On a store with a [`Replicator`] installed,
//! `commit` does not write that batch: it hands the batch's bytes to the
//! replicator, which proposes them as one entry of the replicated log and
//! returns once the entry is committed and applied to this store. Every
//! member applies committed entries in log order with [`crate::Store::apply`],
//! which replays the bytes and records the entry's place in the log in the
//! same write. Apply computes nothing, so it gives the same store on every
//! member; what the batch carries (clock readings, seqs, ordinals, ids)
//! was decided where it was built.
//!
//! Invariants:
//! - With a replicator installed, the store's content changes only through
//!   [`crate::Store::apply`]. [`crate::Store::commit`] returns `Ok` only once its entry
//!   was applied here, so a caller plans its next batch from state that
//!   holds its own last one, as after a synced write today.
//! - An entry's bytes and its bookkeeping (keys under
//!   [`crate::keys::meta::REPLICATION_PREFIX`]) are one RocksDB write: a crash
//!   leaves both or neither, so re-applying from the recorded index is
//!   exact.
//! - An error from the replicator means the outcome is unknown (the entry
//!   may still commit under a later leader): the caller treats it as it
//!   treats a failed synced write today, and reads the state again before
//!   its next batch.

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

#[cfg(test)]
mod tests;
