//! The Raft log on RocksDB: a database of its own beside the store, so the
//! store's families, and the ids its `WriteBatch`es name them by, stay what
//! every replica has.
//!
//! Families: `log` (an entry by its index, 8 bytes big-endian, so key order
//! is log order) and `state` (the vote, the last purged log id, the
//! committed log id).
//!
//! Invariants:
//! - An append, a vote, a truncation and a purge are **synced** writes
//!   before openraft hears they are done: the leader counts an entry as
//!   held by a member only once that member's disk has it, so `202` means
//!   fsynced on a majority (docs/cluster.md).
//! - The log has no holes: entries are appended after the last, truncated
//!   from an index to the end, purged from the start to an index; and a
//!   read returns only the run that starts where it was asked to, so no
//!   reader ever sees one.
//! - The last purged log id is written before the entries it covers are
//!   deleted, in the same write.
//! - RocksDB's calls block: they run on tokio's blocking threads, never on
//!   the task that drives Raft.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{AnyError, OptionalSend, RaftLogReader, StorageIOError};
use rocksdb::{
    ColumnFamilyDescriptor, Direction, IteratorMode, Options, WriteBatch, WriteOptions, DB,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::types::{Entry, LogId, StorageError, TypeConfig, Vote};

const LOG: &str = "log";
const STATE: &str = "state";
const VOTE: &[u8] = b"vote";
const PURGED: &[u8] = b"purged";
const COMMITTED: &[u8] = b"committed";

/// The Raft log of one member. Cheap to clone: clones share the database.
#[derive(Clone)]
pub struct LogStore {
    db: Arc<DB>,
}

impl Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore")
            .field("path", &self.db.path())
            .finish()
    }
}

fn key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>, postcard::Error> {
    postcard::to_stdvec(v)
}

fn decode<T: DeserializeOwned>(b: &[u8]) -> Result<T, postcard::Error> {
    postcard::from_bytes(b)
}

fn io_err(e: impl std::error::Error + 'static) -> AnyError {
    AnyError::new(&e)
}

impl LogStore {
    /// Opens the log at `path`, creating it if missing.
    pub fn open(path: &Path) -> Result<LogStore, rocksdb::Error> {
        let mut o = Options::default();
        o.create_if_missing(true);
        o.create_missing_column_families(true);
        let families = [LOG, STATE].map(|n| ColumnFamilyDescriptor::new(n, Options::default()));
        let db = DB::open_cf_descriptors(&o, path, families)?;
        Ok(LogStore { db: Arc::new(db) })
    }

    /// Runs a RocksDB call on a blocking thread.
    async fn blocking<T, F>(&self, f: F) -> Result<T, StorageError>
    where
        T: Send + 'static,
        F: FnOnce(&DB) -> Result<T, StorageError> + Send + 'static,
    {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&db))
            .await
            .map_err(|e| StorageIOError::write(io_err(e)))?
    }

    fn cf<'a>(db: &'a DB, name: &str) -> Result<&'a rocksdb::ColumnFamily, StorageError> {
        db.cf_handle(name).ok_or_else(|| {
            StorageIOError::read(AnyError::error(format!("the log has no `{name}` family"))).into()
        })
    }

    fn synced() -> WriteOptions {
        let mut w = WriteOptions::default();
        w.set_sync(true);
        w
    }

    fn read_state<T: DeserializeOwned>(db: &DB, k: &[u8]) -> Result<Option<T>, StorageError> {
        let cf = Self::cf(db, STATE)?;
        match db
            .get_cf(cf, k)
            .map_err(|e| StorageIOError::read(io_err(e)))?
        {
            Some(v) => Ok(Some(
                decode(&v).map_err(|e| StorageIOError::read(io_err(e)))?,
            )),
            None => Ok(None),
        }
    }

    fn last_entry_id(db: &DB) -> Result<Option<LogId>, StorageError> {
        let cf = Self::cf(db, LOG)?;
        let mut it = db.iterator_cf(cf, IteratorMode::End);
        match it.next() {
            Some(Ok((_, v))) => {
                let e: Entry = decode(&v).map_err(|e| StorageIOError::read_logs(io_err(e)))?;
                Ok(Some(e.log_id))
            }
            Some(Err(e)) => Err(StorageIOError::read_logs(io_err(e)).into()),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
impl LogStore {
    /// Writes entries as `append` does, without its callback.
    pub(crate) fn write_entries(
        &self,
        entries: impl IntoIterator<Item = Entry>,
    ) -> Result<(), StorageError> {
        let cf = Self::cf(&self.db, LOG)?;
        let mut wb = WriteBatch::default();
        for e in entries {
            let v = encode(&e).map_err(|x| StorageIOError::write_logs(io_err(x)))?;
            wb.put_cf(cf, key(e.log_id.index), v);
        }
        self.db
            .write_opt(wb, &Self::synced())
            .map_err(|e| StorageIOError::write_logs(io_err(e)).into())
    }
}

impl LogStore {
    /// The entries in `[start, end)`; with `from_start`, only the run that
    /// starts at `start` and has no hole.
    async fn read(
        &self,
        start: u64,
        end: Option<u64>,
        from_start: bool,
    ) -> Result<Vec<Entry>, StorageError> {
        self.blocking(move |db| {
            let cf = Self::cf(db, LOG)?;
            let mut out = Vec::new();
            let it = db.iterator_cf(cf, IteratorMode::From(&key(start), Direction::Forward));
            for item in it {
                let (k, v) = item.map_err(|e| StorageIOError::read_logs(io_err(e)))?;
                let index = <[u8; 8]>::try_from(&k[..])
                    .map(u64::from_be_bytes)
                    .map_err(|e| StorageIOError::read_logs(io_err(e)))?;
                if end.is_some_and(|end| index >= end)
                    || (from_start && index != start + out.len() as u64)
                {
                    break;
                }
                out.push(decode(&v).map_err(|e| StorageIOError::read_logs(io_err(e)))?);
            }
            Ok(out)
        })
        .await
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    /// What the range holds: openraft reads from below the first entry and
    /// expects what is there.
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let start = match range.start_bound() {
            Bound::Included(i) => *i,
            Bound::Excluded(i) => i.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(i) => Some(i.saturating_add(1)),
            Bound::Excluded(i) => Some(*i),
            Bound::Unbounded => None,
        };
        self.read(start, end, false).await
    }

    /// Only the run that starts at `start`: openraft's replication sends
    /// what this returns as the entries right after `start - 1`. Entries
    /// purged while the read ran would otherwise go out under the wrong
    /// indexes, and a follower would apply a log with a hole in it.
    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<Entry>, StorageError> {
        self.read(start, Some(end), true).await
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        self.blocking(|db| {
            let purged: Option<LogId> = Self::read_state(db, PURGED)?;
            let last = Self::last_entry_id(db)?.or(purged);
            Ok(LogState {
                last_purged_log_id: purged,
                last_log_id: last,
            })
        })
        .await
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let v = encode(vote).map_err(|e| StorageIOError::write_vote(io_err(e)))?;
        self.blocking(move |db| {
            let cf = Self::cf(db, STATE)?;
            db.put_cf_opt(cf, VOTE, v, &Self::synced())
                .map_err(|e| StorageIOError::write_vote(io_err(e)).into())
        })
        .await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        self.blocking(|db| Self::read_state(db, VOTE)).await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let v = encode(&committed).map_err(|e| StorageIOError::write(io_err(e)))?;
        // Not synced: a committed id lost in a crash is learnt again from
        // the leader; it only saves re-applying on a restart.
        self.blocking(move |db| {
            let cf = Self::cf(db, STATE)?;
            db.put_cf(cf, COMMITTED, v)
                .map_err(|e| StorageIOError::write(io_err(e)).into())
        })
        .await
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        self.blocking(|db| Ok(Self::read_state::<Option<LogId>>(db, COMMITTED)?.flatten()))
            .await
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut rows = Vec::new();
        for e in entries {
            let v = encode(&e).map_err(|x| StorageIOError::write_logs(io_err(x)))?;
            rows.push((key(e.log_id.index), v));
        }
        let written = self
            .blocking(move |db| {
                let cf = Self::cf(db, LOG)?;
                let mut wb = WriteBatch::default();
                for (k, v) in rows {
                    wb.put_cf(cf, k, v);
                }
                db.write_opt(wb, &Self::synced())
                    .map_err(|e| StorageIOError::write_logs(io_err(e)).into())
            })
            .await;
        // Only after the synced write: openraft counts the entries as this
        // member's from here on.
        callback.log_io_completed(
            written
                .as_ref()
                .map(|_| ())
                .map_err(|e| std::io::Error::other(e.to_string())),
        );
        written
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.blocking(move |db| {
            let cf = Self::cf(db, LOG)?;
            let mut wb = WriteBatch::default();
            wb.delete_range_cf(cf, key(log_id.index), key(u64::MAX));
            wb.delete_cf(cf, key(u64::MAX));
            db.write_opt(wb, &Self::synced())
                .map_err(|e| StorageIOError::write_logs(io_err(e)).into())
        })
        .await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let v = encode(&log_id).map_err(|e| StorageIOError::write_logs(io_err(e)))?;
        self.blocking(move |db| {
            let (log, state) = (Self::cf(db, LOG)?, Self::cf(db, STATE)?);
            let mut wb = WriteBatch::default();
            wb.put_cf(state, PURGED, v);
            wb.delete_range_cf(log, key(0), key(log_id.index.saturating_add(1)));
            db.write_opt(wb, &Self::synced())
                .map_err(|e| StorageIOError::write_logs(io_err(e)).into())
        })
        .await
    }
}
