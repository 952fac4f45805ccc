//! The guided migration's store work, for the migration screen: the
//! status poll (read without the lock, so it works beside `ankusa store
//! migrate` in another process), the backup, the dry run, one step at a
//! time, the check, and reopening the migrated store. It never writes with
//! `--read-only` or while another process holds the store, and each step
//! is one synced write with its cursor, so a pause or a crash between
//! steps leaves nothing to undo.

use std::path::Path;

use ankusa_store::migrate::{self, Migration, StepOutcome};
use ankusa_store::{check, lock, tenants, Store, StoreError};

use super::feed::Feed;
use super::open::{OpenError, OpenRequest};
use super::request::Reply;

impl Feed {
    /// The migration screen's poll: the migration status read without the
    /// lock (it works beside `ankusa store migrate` running in another
    /// process), and who holds the store.
    pub(super) fn migration_status(&self, now: u64) -> Result<Reply, StoreError> {
        Ok(Reply::MigrationStatus {
            status: migrate::status(&self.path)?,
            holder: lock::holder(&self.path)?,
            at: now,
        })
    }

    /// The guided migration writes: never with `--read-only`, never while
    /// another process holds the store (a daemon, or `ankusa store migrate`).
    fn guided_write_allowed(&self) -> Result<(), StoreError> {
        if self.read_only_forced {
            return Err(StoreError::ReadOnly("with --read-only"));
        }
        // Our own lock is not reported (POSIX record locks are per process),
        // so while we run the migration this only sees other processes.
        if lock::holder(&self.path)?.is_some() {
            return Err(StoreError::Locked {
                path: self.path.clone(),
            });
        }
        Ok(())
    }

    pub(super) fn migration_backup(&mut self, out: &Path) -> Result<Reply, StoreError> {
        self.guided_write_allowed()?;
        // The backup opens the store as its writer: let go of ours first
        // (a step is never half done: each one is one synced write).
        self.migrator = None;
        Store::backup(&self.path, out)?;
        Ok(Reply::BackedUp(out.to_path_buf()))
    }

    pub(super) fn migration_plan(&self) -> Result<Reply, StoreError> {
        let plan = match &self.migrator {
            Some(s) => migrate::plan(s)?,
            None => migrate::plan(&Store::open_read_only_any_format(&self.path)?)?,
        };
        Ok(Reply::Plan(plan))
    }

    /// One step of the migration: at most `migrate::STEP_ROWS` rows in one
    /// synced write with its cursor. The migration is re-entered from its
    /// stored cursor every step, so stopping between steps (pause, quit,
    /// a crash) leaves nothing to undo and resuming is just another step.
    pub(super) fn migration_step(&mut self, now: u64) -> Result<Reply, StoreError> {
        if self.migrator.is_none() {
            self.guided_write_allowed()?;
            self.migrator = Some(Store::open_any_format(&self.path)?);
        }
        let Some(s) = self.migrator.as_ref() else {
            return Err(StoreError::Missing(self.path.clone()));
        };
        let mut m = Migration::start(s, now, tenants::DEFAULT_MAX)?;
        let finished = m.step()? == StepOutcome::Finished;
        if finished && m.over_limit > 0 {
            self.notices.push(over_limit(m.over_limit));
        }
        Ok(Reply::Stepped {
            cursor: m.cursor().clone(),
            finished,
        })
    }

    pub(super) fn migration_check(&self) -> Result<Reply, StoreError> {
        let report = match &self.migrator {
            Some(s) => check::run(s, |_, _| {})?,
            None => check::run(&Store::open_read_only(&self.path)?, |_, _| {})?,
        };
        Ok(Reply::Checked(Box::new(report)))
    }

    /// After a finished migration: open the store the ordinary way.
    pub(super) fn reopen(&mut self, now: u64) -> Result<Reply, OpenError> {
        self.migrator = None;
        self.store = None;
        let req = OpenRequest {
            path: self.path.clone(),
            read_only: self.read_only_forced,
            write: self.write_requested,
            token: self.token.clone(),
        };
        *self = Feed::open(&req, now)?;
        Ok(Reply::Reopened {
            mode: self.mode.clone(),
            format: self.probe.format,
        })
    }
}

/// The notice of a migration that found more tenants than `tenants.max`
/// (it fits the footer at 80 columns, [`crate::app::STATUS_MAX`]).
pub fn over_limit(n: u32) -> String {
    format!("{n} tenants over tenants.max: they keep working; new tenants are refused")
}
