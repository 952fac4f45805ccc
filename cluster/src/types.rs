//! The cluster's Raft types: what an entry carries, how a member is named.

use serde::{Deserialize, Serialize};

/// A member's id in the Raft group.
pub type MemberId = u64;

/// One store commit, as the bytes of its `WriteBatch`
/// ([`ankusa_store::replicate`]). The leader built it; every member replays
/// it unchanged.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change(#[serde(with = "serde_bytes")] pub Vec<u8>);

impl std::fmt::Debug for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // An entry can be megabytes of hook bodies: its size says enough.
        write!(f, "Change({} bytes)", self.0.len())
    }
}

openraft::declare_raft_types!(
    /// The Raft configuration of an Ankusa cluster.
    pub TypeConfig:
        D = Change,
        R = (),
        NodeId = MemberId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = tokio::fs::File,
        AsyncRuntime = openraft::TokioRuntime,
);

pub type LogId = openraft::LogId<MemberId>;
pub type Vote = openraft::Vote<MemberId>;
pub type Entry = openraft::Entry<TypeConfig>;
pub type StorageError = openraft::StorageError<MemberId>;
pub type StoredMembership = openraft::StoredMembership<MemberId, openraft::BasicNode>;
pub type SnapshotMeta = openraft::SnapshotMeta<MemberId, openraft::BasicNode>;
pub type Snapshot = openraft::Snapshot<TypeConfig>;
