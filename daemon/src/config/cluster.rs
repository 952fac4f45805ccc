//! `[cluster]`: this node as a member of a replicated cluster
//! (docs/cluster.md). Absent, the node is a single node exactly as before.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::{de_addr, Dur, Int, Secret};

/// The shortest shared secret: peer traffic without it is refused.
pub const MIN_SECRET: usize = 16;

/// `[cluster]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    /// This member's id among `peers`.
    pub id: Int<1, { u64::MAX }>,
    /// Where peers reach this member.
    #[serde(deserialize_with = "de_addr")]
    pub listen: SocketAddr,
    /// The initial voters, this member among them.
    pub peers: Vec<PeerEntry>,
    pub secret: Secret,
    /// The Raft log's directory (default: the store's path + `.raft`).
    #[serde(default)]
    pub log: Option<PathBuf>,
    /// The snapshots' directory (default: the store's path + `.snapshots`).
    #[serde(default)]
    pub snapshots: Option<PathBuf>,
    #[serde(default = "heartbeat")]
    pub heartbeat: Dur<20, 10_000>,
    /// An election starts between this and twice this without a
    /// heartbeat.
    #[serde(default = "election")]
    pub election_timeout: Dur<100, 60_000>,
    #[serde(default = "snapshot_every")]
    pub snapshot_every: Int<1, 100_000_000>,
}

fn heartbeat() -> Dur<20, 10_000> {
    Dur(Duration::from_millis(250))
}
fn election() -> Dur<100, 60_000> {
    Dur(Duration::from_millis(1_000))
}
fn snapshot_every() -> Int<1, 100_000_000> {
    Int(20_000)
}

/// One `peers` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerEntry {
    pub id: Int<1, { u64::MAX }>,
    #[serde(deserialize_with = "de_addr")]
    pub addr: SocketAddr,
}

/// `[cluster]`, checked.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    pub id: u64,
    pub listen: SocketAddr,
    pub peers: BTreeMap<u64, SocketAddr>,
    pub secret: Secret,
    pub log: PathBuf,
    pub snapshots: PathBuf,
    pub heartbeat: Duration,
    pub election_timeout: Duration,
    pub snapshot_every: u64,
}

fn beside(store: &Path, ext: &str) -> PathBuf {
    let mut name = store.file_name().unwrap_or_default().to_os_string();
    name.push(ext);
    store.with_file_name(name)
}

/// Checks `[cluster]` across its keys; `base` resolves relative paths.
pub fn check(c: &ClusterSection, store: &Path, base: &Path) -> Result<ClusterSettings, String> {
    let mut peers = BTreeMap::new();
    for p in &c.peers {
        if peers.insert(p.id.0, p.addr).is_some() {
            return Err(format!("peers lists the id {} twice", p.id.0));
        }
    }
    if !peers.contains_key(&c.id.0) {
        return Err(format!(
            "id {} is not among peers: list this member too, with the address its peers reach it at",
            c.id.0
        ));
    }
    if c.secret.0.chars().count() < MIN_SECRET {
        return Err(format!(
            "secret must be at least {MIN_SECRET} characters, the same on every member"
        ));
    }
    if c.election_timeout.0 <= c.heartbeat.0 * 2 {
        return Err(format!(
            "election_timeout ({}) must be more than twice heartbeat ({}), or members elect while the leader is well",
            humantime::format_duration(c.election_timeout.0),
            humantime::format_duration(c.heartbeat.0)
        ));
    }
    let at = |p: &Option<PathBuf>, ext: &str| match p {
        Some(p) if p.is_absolute() => p.clone(),
        Some(p) => base.join(p),
        None => beside(store, ext),
    };
    Ok(ClusterSettings {
        id: c.id.0,
        listen: c.listen,
        peers,
        secret: c.secret.clone(),
        log: at(&c.log, ".raft"),
        snapshots: at(&c.snapshots, ".snapshots"),
        heartbeat: c.heartbeat.0,
        election_timeout: c.election_timeout.0,
        snapshot_every: c.snapshot_every.0,
    })
}
