//! How the console opens a store: the modes (FOLLOW beside a running
//! daemon, READ-ONLY, WRITE with `--write` and no daemon, or not at all
//! when the store needs migrating), what the operator asked for, and why
//! an open failed. A follower's private directory lives under the system
//! temp dir, never inside the store, and is removed on exit.

use std::path::{Path, PathBuf};

use ankusa_store::StoreError;

/// How the console holds the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenMode {
    /// A daemon (pid) holds the store; we follow it as a secondary.
    Follow { pid: i32 },
    /// A read-only snapshot taken when the store was opened.
    ReadOnly,
    /// We are the store's one writer (`--write`, no daemon).
    Write,
    /// The store cannot be opened at this release's format (format 2 or a
    /// half-done migration): only the migration screen has data.
    NeedsMigration,
}

impl OpenMode {
    pub fn label(&self) -> &'static str {
        match self {
            OpenMode::Follow { .. } => "FOLLOW",
            OpenMode::ReadOnly => "READ-ONLY",
            OpenMode::Write => "WRITE",
            OpenMode::NeedsMigration => "MIGRATION NEEDED",
        }
    }

    /// The one answer to "may this console act?" (purge, replay): as the
    /// store's writer (WRITE), or through the admin API of the daemon it
    /// follows (FOLLOW; a console opened `--read-only` never follows).
    /// Read-only and migration-needed consoles only look.
    pub fn can_act(&self) -> bool {
        matches!(self, OpenMode::Write | OpenMode::Follow { .. })
    }
}

/// Why the console could not open a store.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{0}: no such directory (the console never creates one; pass the directory of an existing store)")]
    NoDir(PathBuf),
    #[error("{0}: not a directory")]
    NotDir(PathBuf),
    #[error("{0}: not an Ankusa store (no RocksDB CURRENT file); create one with `ankusa serve` or `ankusa store fixture`")]
    NotStore(PathBuf),
    #[error("--read-only and --write contradict each other")]
    Conflict,
    #[error("cannot create the follower's directory {path}: {source}")]
    Secondary {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What the operator asked for on the command line.
#[derive(Debug, Clone, Default)]
pub struct OpenRequest {
    pub path: PathBuf,
    pub read_only: bool,
    pub write: bool,
    /// The admin API token for acting through a daemon (`--token`); none:
    /// the socket's local admin.
    pub token: Option<String>,
}

/// A follower's private directory, removed when the console exits. Lives
/// under the system temp dir, never inside the store.
#[derive(Debug)]
pub struct SecondaryDir(PathBuf);

impl SecondaryDir {
    pub(super) fn create() -> Result<Self, OpenError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path =
            std::env::temp_dir().join(format!("ankusa-console-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|source| OpenError::Secondary {
            path: path.clone(),
            source,
        })?;
        Ok(Self(path))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for SecondaryDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
