//! Typed errors of the store crate.
//!
//! Callers branch on these: the daemon maps [`StoreError::TenantLimit`] to
//! `503 tenant_limit`, the CLI maps [`StoreError::FormatNeedsMigration`] to a
//! hint naming `ankusa store migrate`. Nothing here panics on bad bytes: a
//! value that does not decode is a [`DecodeError`] naming what was read.

use std::path::PathBuf;

/// A key or value that does not decode. Carries what was being decoded and
/// why, never the raw bytes (they may hold a tenant's payload).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot decode {what}: {reason}")]
pub struct DecodeError {
    pub what: &'static str,
    pub reason: String,
}

impl DecodeError {
    pub fn new(what: &'static str, reason: impl Into<String>) -> Self {
        Self {
            what,
            reason: reason.into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("RocksDB error: {0}")]
    Rocks(#[from] rocksdb::Error),

    #[error(transparent)]
    Decode(#[from] DecodeError),

    #[error(
        "no store at {0} (a store is created only by `ankusa serve` or `ankusa store fixture`)"
    )]
    Missing(PathBuf),

    #[error("the store at {path} is locked by another process (is a daemon running on it?)")]
    Locked { path: PathBuf },

    #[error(
        "the store at {path} is format {found}, newer than this binary understands (format {supported}); \
         upgrade ankusa or restore a backup written by this release"
    )]
    FormatNewer {
        path: PathBuf,
        found: u32,
        supported: u32,
    },

    #[error(
        "the store at {path} is format {found}; this release needs format {supported}. \
         Run `ankusa store migrate --store {path}` (take a backup first)"
    )]
    FormatNeedsMigration {
        path: PathBuf,
        found: u32,
        supported: u32,
    },

    #[error(
        "the store at {path} is in the middle of a migration to format {target}; \
         resume it with `ankusa store migrate --store {path}`"
    )]
    MigrationInProgress { path: PathBuf, target: u32 },

    #[error("the store at {path} is already format 3: nothing to migrate")]
    NothingToMigrate { path: PathBuf },

    #[error(
        "the store at {path} has no format stamp and is not empty; refusing to guess its layout"
    )]
    Unstamped { path: PathBuf },

    #[error("column family `{0}` is missing (store opened with the wrong options?)")]
    MissingFamily(&'static str),

    #[error("tenant limit reached: {max} tenants exist, refusing new tenant")]
    TenantLimit { max: u32 },

    /// A request the store cannot represent (a pause naming nothing).
    #[error("{0}")]
    Invalid(String),

    #[error("tenant ordinals exhausted")]
    OrdinalsExhausted,

    #[error("invalid tenant id: {0}")]
    InvalidTenant(String),

    #[error("the store was opened {0}; this operation writes")]
    ReadOnly(&'static str),

    /// Something held the store too long for the operation to wait.
    #[error("{0}")]
    Busy(&'static str),

    /// The handle is closed between two opens ([`crate::Store::reopen`]).
    #[error("the store is being reopened after a write fault; retry shortly")]
    Reopening,

    /// A read met a damaged table file ([`crate::damage`]): it fails
    /// every time until the store is restored.
    #[error("a table file of the store is damaged{}: reads of {family} that need it fail ({message}); stop the daemon and restore the store from a backup (docs/deployment.md, \"A damaged table file\")", file.as_deref().map(|f| format!(": {f}")).unwrap_or_default())]
    Damaged {
        family: &'static str,
        file: Option<String>,
        message: String,
    },

    /// A clustered store's change was not applied ([`crate::replicate`]):
    /// its outcome is unknown unless the message says no leader took it.
    #[error("replication: {0}")]
    Replication(#[from] crate::replicate::ReplicateError),

    #[error("scan of {family} stopped early: {message}")]
    Scan {
        family: &'static str,
        message: String,
    },

    #[error("fault injected at {0} (a test armed this point)")]
    Fault(&'static str),

    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
