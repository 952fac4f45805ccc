//! Ankusa's replicated store (docs/cluster.md): the Raft log, kept in a
//! RocksDB of its own beside the store with synced appends, and the store
//! as the state machine that every member applies committed entries to.
//!
//! Raft itself is openraft's. This crate is the only one that names it, so
//! a change of its version stays here: what the rest of Ankusa sees is the
//! store's [`ankusa_store::replicate::Replicator`] seam and this crate's own
//! types.
//!
//! An entry is one store commit, the bytes of its `WriteBatch`
//! ([`types::Change`]); applying it replays those bytes, so every member's
//! store is the same whatever its clock or its history.

// openraft's traits fix the error type (`StorageError`, 224 bytes): the
// helpers that build it return it as the traits do.
#![allow(clippy::result_large_err)]

pub mod log_store;
pub mod member;
pub mod network;
pub mod snapshot_file;
pub mod state_machine;
pub mod types;

pub use log_store::LogStore;
pub use member::{ClusterError, Member, MemberConfig, Timing};
pub use state_machine::StoreMachine;
pub use types::{Change, MemberId, TypeConfig};

#[cfg(test)]
mod tests;
