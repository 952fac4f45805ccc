//! One member of a cluster: its Raft node over its log and its store, its
//! peer routes, and the replicator through which its store's commits go.
//!
//! A member's store changes only by applying committed entries
//! (docs/cluster.md, "What a follower may never do"): once
//! [`Member::start`] returns, every [`Store::commit`] on it is proposed to
//! the log, and on a member that does not lead it fails with
//! [`ReplicateError::NotLeader`] before anything is proposed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ankusa_store::replicate::{ReplicateError, Replicator};
use ankusa_store::Store;
use openraft::error::InitializeError;
use openraft::{BasicNode, Config, Raft, RaftMetrics, ServerState, SnapshotPolicy};

use crate::network::Peers;
use crate::types::{Change, MemberId, TypeConfig};
use crate::{LogStore, StoreMachine};

/// Why a member did not start.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("the Raft log at {path}: {source}")]
    Log {
        path: PathBuf,
        source: rocksdb::Error,
    },
    #[error("the snapshot directory {path}: {source}")]
    Snapshots {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the cluster's timing: {0}")]
    Config(#[from] openraft::ConfigError),
    #[error("the peer client: {0}")]
    Client(#[from] reqwest::Error),
    #[error("Raft: {0}")]
    Raft(String),
    #[error(transparent)]
    Store(#[from] ankusa_store::StoreError),
}

/// How fast a cluster notices a lost leader, and when it snapshots.
#[derive(Debug, Clone)]
pub struct Timing {
    pub heartbeat: Duration,
    /// An election starts after a random wait in `election.0..election.1`
    /// without a heartbeat.
    pub election: (Duration, Duration),
    /// A snapshot is built every this many applied entries, and the log
    /// before it purged but for `keep` entries.
    pub snapshot_every: u64,
    pub keep: u64,
}

impl Default for Timing {
    fn default() -> Self {
        // The heartbeat is also every append's deadline (openraft), so it
        // covers a follower's synced write of a large group commit.
        Timing {
            heartbeat: Duration::from_millis(250),
            election: (Duration::from_millis(1_000), Duration::from_millis(2_000)),
            snapshot_every: 20_000,
            keep: 1_000,
        }
    }
}

/// What a member needs to start.
#[derive(Debug, Clone)]
pub struct MemberConfig {
    pub id: MemberId,
    /// The initial voters, this member among them: id and peer address.
    pub peers: BTreeMap<MemberId, String>,
    pub secret: String,
    /// The Raft log's directory.
    pub log: PathBuf,
    /// The snapshots' directory, on the store's filesystem.
    pub snapshots: PathBuf,
    pub timing: Timing,
}

/// A running member.
#[derive(Clone)]
pub struct Member {
    pub id: MemberId,
    pub raft: Raft<TypeConfig>,
    pub store: Arc<Store>,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member").field("id", &self.id).finish()
    }
}

impl Member {
    /// Starts the member's Raft node over `store` and installs the store's
    /// replicator. At the first boot of the group (an empty log, and no
    /// peer that answers as formed) it forms the group with the listed
    /// voters: every listed member proposes the same membership at the same
    /// index, so one list forms one cluster.
    pub async fn start(cfg: MemberConfig, store: Arc<Store>) -> Result<Member, ClusterError> {
        let log = LogStore::open(&cfg.log).map_err(|source| ClusterError::Log {
            path: cfg.log.clone(),
            source,
        })?;
        let sm = StoreMachine::new(store.clone(), &cfg.snapshots).map_err(|source| {
            ClusterError::Snapshots {
                path: cfg.snapshots.clone(),
                source,
            }
        })?;
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let config = Config {
            cluster_name: "ankusa".into(),
            heartbeat_interval: ms(cfg.timing.heartbeat),
            election_timeout_min: ms(cfg.timing.election.0),
            election_timeout_max: ms(cfg.timing.election.1),
            // A chunk's deadline includes the follower's install of the
            // whole snapshot with the last one.
            install_snapshot_timeout: 60_000,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(cfg.timing.snapshot_every),
            max_in_snapshot_log_to_keep: cfg.timing.keep,
            ..Default::default()
        }
        .validate()?;
        let peers = Peers::new(&cfg.secret)?;
        let raft = Raft::new(cfg.id, Arc::new(config), peers.clone(), log, sm)
            .await
            .map_err(|e| ClusterError::Raft(e.to_string()))?;
        let initialized = raft
            .is_initialized()
            .await
            .map_err(|e| ClusterError::Raft(e.to_string()))?;
        // A member with an empty log forms the group only if no peer has:
        // one whose disk was lost must be caught up by the group, not
        // write the group's first entry again (the leader would take that
        // entry for a match and never send it the snapshot it needs).
        let mut joined = false;
        if !initialized {
            for (id, addr) in cfg.peers.iter().filter(|(id, _)| **id != cfg.id) {
                if peers.formed(addr).await == Some(true) {
                    tracing::warn!(
                        member = cfg.id,
                        peer = id,
                        "empty log, and the group is formed: waiting to be caught up (a snapshot, then the log)"
                    );
                    joined = true;
                    break;
                }
            }
        }
        if !initialized && !joined {
            let voters: BTreeMap<MemberId, BasicNode> = cfg
                .peers
                .iter()
                .map(|(id, addr)| (*id, BasicNode::new(addr)))
                .collect();
            match raft.initialize(voters).await {
                Ok(()) => {}
                // Another member's first entry reached this one first.
                Err(e) if matches!(e.api_error(), Some(InitializeError::NotAllowed(_))) => {}
                Err(e) => return Err(ClusterError::Raft(e.to_string())),
            }
        }
        store.set_replicator(Arc::new(RaftReplicator {
            raft: raft.clone(),
            rt: tokio::runtime::Handle::current(),
        }))?;
        Ok(Member {
            id: cfg.id,
            raft,
            store,
        })
    }

    /// The member's peer routes (`/raft/...`).
    pub fn routes(&self, secret: &str, max_body: usize) -> axum::Router {
        crate::network::routes(self.raft.clone(), secret, max_body)
    }

    pub fn metrics(&self) -> RaftMetrics<MemberId, BasicNode> {
        self.raft.metrics().borrow().clone()
    }

    pub fn is_leader(&self) -> bool {
        self.metrics().state == ServerState::Leader
    }

    /// Resolves once this member leads and has applied every entry
    /// committed before its term, so its store holds everything any
    /// earlier leader acknowledged. `false` if the node stopped.
    pub async fn leading(&self) -> bool {
        let mut m = self.raft.metrics();
        loop {
            if m.wait_for(|m| m.state == ServerState::Leader)
                .await
                .is_err()
            {
                return false;
            }
            match self.raft.ensure_linearizable().await {
                Ok(_) => return true,
                Err(e) => {
                    tracing::info!(error = %e, "elected, but not leading after all");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// Resolves once this member no longer leads.
    pub async fn lead_lost(&self) {
        let mut m = self.raft.metrics();
        let _ = m.wait_for(|m| m.state != ServerState::Leader).await;
    }

    /// Stops the Raft node; the store is then written by nothing.
    pub async fn shutdown(&self) -> Result<(), ClusterError> {
        self.raft
            .shutdown()
            .await
            .map_err(|e| ClusterError::Raft(e.to_string()))
    }
}

/// The store's way into the log: a commit becomes one entry, and returns
/// once the entry is committed by a majority and applied here.
struct RaftReplicator {
    raft: Raft<TypeConfig>,
    rt: tokio::runtime::Handle,
}

impl std::fmt::Debug for RaftReplicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RaftReplicator")
    }
}

impl Replicator for RaftReplicator {
    fn replicate(&self, entry: Vec<u8>) -> Result<(), ReplicateError> {
        // From a blocking thread this just waits; from a runtime worker,
        // block_in_place first hands the worker's other tasks away.
        let written =
            tokio::task::block_in_place(|| self.rt.block_on(self.raft.client_write(Change(entry))));
        match written {
            Ok(_) => Ok(()),
            Err(e) => match e.forward_to_leader() {
                // Not proposed here, or proposed and then truncated by a
                // new leader: in both cases never applied.
                Some(f) => Err(ReplicateError::NotLeader {
                    leader: f.leader_id.map(|id| id.to_string()),
                }),
                None => Err(ReplicateError::Unknown(e.to_string())),
            },
        }
    }
}

#[cfg(test)]
mod tests;
