//! [`DaemonError`]: why the daemon could not start or stop cleanly.
//!
//! Invariant: every variant displays the line an operator reads (what
//! failed, and what to do when that is known) and keeps its cause as the
//! error's source, never folded into the text, so the binary can sort a
//! failure by the typed cause in the chain (a port in use, a store held by
//! another process) and print each message once.

use std::path::PathBuf;

use ankusa_ops::OpsError;
use ankusa_store::StoreError;

use crate::config::ConfigError;

/// A failure of `ankusa serve` (and of the benches and the demo that boot
/// the daemon in process).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// No config file where one was expected; the message names where it
    /// looked and how to give one.
    #[error("{0}")]
    NoConfig(String),
    /// The config file is wrong; the message names the file, line and key.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `node.id` names another node than the one the store belongs to.
    #[error(
        "the store at {} belongs to node {stored:?}, but node.id in {} is {configured:?}: \
         a node id never changes (every hook id carries it); set node.id = {stored:?} again, \
         or give node {configured:?} a store of its own",
        store.display(),
        config.display()
    )]
    NodeIdChanged {
        /// The store directory.
        store: PathBuf,
        /// The config file.
        config: PathBuf,
        /// `node.id` in the config file.
        configured: String,
        /// The id the store recorded at its first boot.
        stored: String,
    },
    /// The file takes sinks out that may not leave yet (rows are owed to
    /// them) or needs more sink positions than a source has: every reason,
    /// as a reload would say it, on one line (`; ` between two).
    #[error("{}: cannot start on this file: {}", config.display(), reasons.join("; "))]
    SinksRefused {
        /// The config file.
        config: PathBuf,
        reasons: Vec<String>,
    },
    /// Another process holds the store's lock.
    #[error(
        "the store at {} is in use by another process{}: is another `ankusa serve` running on it? \
         Stop it first; a store has exactly one daemon",
        path.display(),
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    StoreInUse {
        /// The store directory.
        path: PathBuf,
        /// The lock holder, when the lock file names it.
        pid: Option<i32>,
    },
    /// A store operation at boot failed; `what` says which.
    #[error("{what}")]
    Store {
        /// What the daemon was doing.
        what: String,
        /// The store's error.
        source: StoreError,
    },
    /// An operating-system call failed (binding a port, the admin socket,
    /// a thread, the runtime, a signal handler); `what` says which.
    #[error("{what}")]
    Io {
        /// What the daemon was doing.
        what: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// The open-file limit cannot be raised to what the settings need.
    #[error("{0}")]
    OpenFiles(String),
    /// The delivery HTTP client could not be built.
    #[error("cannot build the delivery HTTP client")]
    Client(#[source] reqwest::Error),
    /// The admin jobs the last run left could not be resumed.
    #[error("cannot resume the unfinished admin jobs")]
    Resume(#[source] OpsError),
    /// The ingest server's task ended with a panic or was cancelled.
    #[error("the HTTP server task failed")]
    Server(#[source] tokio::task::JoinError),
    /// The writer thread panicked.
    #[error("the writer thread failed")]
    Writer,
    /// This member of a cluster could not start or stopped (docs/cluster.md).
    #[error("cluster member: {0}")]
    Cluster(Box<ankusa_cluster::ClusterError>),
}

impl From<ankusa_cluster::ClusterError> for DaemonError {
    fn from(e: ankusa_cluster::ClusterError) -> Self {
        // Boxed: every daemon result carries this enum, and a member's
        // error is the largest by far.
        DaemonError::Cluster(Box::new(e))
    }
}

impl DaemonError {
    /// A store failure while doing `what`.
    pub(crate) fn store(what: impl Into<String>) -> impl FnOnce(StoreError) -> DaemonError {
        let what = what.into();
        move |source| DaemonError::Store { what, source }
    }

    /// A system call's failure while doing `what`.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DaemonError {
        let what = what.into();
        move |source| DaemonError::Io { what, source }
    }
}
