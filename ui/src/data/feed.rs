//! The console's feed ([`Feed`]): the store it opened and how (see
//! [`super::open`]), kept fresh once per refresh (catching up with the
//! daemon it follows, switching to FOLLOW when a daemon starts). What it
//! answers is in the sibling modules: bounded reads ([`super::reads`]),
//! the guided migration ([`super::migration`]) and guarded actions
//! ([`super::actions`]).

use std::path::PathBuf;

use ankusa_ops::OpsError;
use ankusa_store::store::{self as st, Probe};
use ankusa_store::{lock, Store, StoreError};

use super::open::{OpenError, OpenMode, OpenRequest, SecondaryDir};
use super::request::DaemonStatus;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The operator operation refused or failed (ankusa-ops).
    #[error(transparent)]
    Ops(#[from] OpsError),
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Not something this console does in its mode.
    #[error("{0}")]
    Refused(String),
}

/// The notice of `--write` beside a daemon (it fits the footer at 80
/// columns, [`crate::app::STATUS_MAX`]).
pub fn write_ignored(pid: i32) -> String {
    format!("--write ignored: daemon pid {pid} holds the store; acting through its API")
}

/// The opened store and what the header needs to know about it.
pub struct Feed {
    pub path: PathBuf,
    pub mode: OpenMode,
    pub probe: Probe,
    /// Notices for the operator (e.g. `--write` ignored beside a daemon).
    pub notices: Vec<String>,
    /// When the data last matched the store (open, catch-up, or a write).
    pub fresh_at: u64,
    pub(super) read_only_forced: bool,
    pub(super) write_requested: bool,
    /// The store opened as its writer whatever its format, while this
    /// console runs the guided migration (see [`Request::MigrationStep`]).
    pub(super) migrator: Option<Store>,
    /// The admin API token used in FOLLOW mode.
    pub(super) token: Option<String>,
    // Drop order: the store before the follower's directory.
    pub(super) store: Option<Store>,
    pub(super) _secondary: Option<SecondaryDir>,
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .finish()
    }
}

impl Feed {
    /// Opens the store as the brief says: FOLLOW beside a running daemon,
    /// else READ-ONLY, or WRITE with `--write` and no daemon. Never creates
    /// a directory.
    pub fn open(req: &OpenRequest, now: u64) -> Result<Feed, OpenError> {
        if req.read_only && req.write {
            return Err(OpenError::Conflict);
        }
        let path = &req.path;
        match std::fs::metadata(path) {
            Err(_) => return Err(OpenError::NoDir(path.clone())),
            Ok(m) if !m.is_dir() => return Err(OpenError::NotDir(path.clone())),
            Ok(_) => {}
        }
        if !path.join("CURRENT").exists() {
            return Err(OpenError::NotStore(path.clone()));
        }
        let probe = st::probe(path)?;
        let mut src = Feed {
            path: path.clone(),
            mode: OpenMode::ReadOnly,
            probe: probe.clone(),
            notices: Vec::new(),
            fresh_at: now,
            read_only_forced: req.read_only,
            write_requested: req.write,
            migrator: None,
            token: req.token.clone(),
            store: None,
            _secondary: None,
        };
        if probe.migrating || probe.format.is_some_and(|f| f < ankusa_store::FORMAT) {
            src.mode = OpenMode::NeedsMigration;
            return Ok(src);
        }
        let holder = lock::holder(path)?;
        match (holder, req.read_only, req.write) {
            (Some(pid), false, write) => {
                if write {
                    src.notices.push(write_ignored(pid));
                }
                src.open_follow(pid)?;
            }
            (_, true, _) => {
                src.store = Some(Store::open_read_only(path)?);
                src.mode = OpenMode::ReadOnly;
            }
            (None, false, true) => {
                src.store = Some(Store::open(path)?);
                src.mode = OpenMode::Write;
            }
            (None, false, false) => {
                src.store = Some(Store::open_read_only(path)?);
                src.mode = OpenMode::ReadOnly;
            }
        }
        Ok(src)
    }

    fn open_follow(&mut self, pid: i32) -> Result<(), OpenError> {
        let dir = SecondaryDir::create()?;
        let store = Store::open_secondary(&self.path, dir.path())?;
        self.store = Some(store);
        self._secondary = Some(dir);
        self.mode = OpenMode::Follow { pid };
        Ok(())
    }

    /// The open store (None when it needs migrating).
    pub fn store(&self) -> Option<&Store> {
        self.store.as_ref()
    }

    /// Whether `--read-only` was given (the guided migration is hidden).
    pub fn read_only_forced(&self) -> bool {
        self.read_only_forced
    }

    /// Once per refresh: follow the daemon's writes; switch from READ-ONLY
    /// to FOLLOW when a daemon has started since; note when it stopped.
    pub fn refresh(&mut self, now: u64) -> Result<DaemonStatus, StoreError> {
        let holder = match self.mode {
            OpenMode::Write => return Ok(DaemonStatus::NoneWeWrite),
            _ => lock::holder(&self.path)?,
        };
        match (&self.mode, holder) {
            (OpenMode::ReadOnly, Some(pid)) if !self.read_only_forced => {
                self.store = None;
                match self.open_follow(pid) {
                    Ok(()) => self
                        .notices
                        .push(format!("daemon pid {pid} started: now following it")),
                    Err(e) => {
                        self.notices
                            .push(format!("cannot follow daemon pid {pid}: {e}"));
                        self.store = Some(Store::open_read_only(&self.path)?);
                        self.mode = OpenMode::ReadOnly;
                    }
                }
            }
            (OpenMode::Follow { .. }, Some(pid)) => self.mode = OpenMode::Follow { pid },
            _ => {}
        }
        if let Some(s) = &self.store {
            if matches!(self.mode, OpenMode::Follow { .. }) {
                s.catch_up()?;
                self.fresh_at = now;
            }
        }
        Ok(match holder {
            Some(pid) => DaemonStatus::Running(pid),
            None => DaemonStatus::NotRunning,
        })
    }

    pub(super) fn need(&self) -> Result<&Store, StoreError> {
        self.store
            .as_ref()
            .ok_or_else(|| StoreError::FormatNeedsMigration {
                path: self.path.clone(),
                found: self.probe.format.unwrap_or(0),
                supported: ankusa_store::FORMAT,
            })
    }
}
