//! Opening a store and the primitive reads and writes every other module
//! builds on. The openers live in `store/open.rs`; this file keeps the
//! handle, its reads, writes and faults.
//!
//! Invariants owned here:
//! - Every opener uses [`crate::schema`]'s options. Only a running 2 → 3
//!   migration changes two families' mutable options, on its own handle and
//!   for the due phase ([`crate::schema::migration_options`]).
//! - A store is used only at the format this release understands: newer is
//!   refused naming both formats, format 2 and a half-done migration are
//!   refused naming the migration command.
//! - Every scan checks the iterator's status when it stops: a scan cut
//!   short by an error is an error, never a short result. Scans use iterate
//!   bounds, never prefix iteration without a prefix extractor.
//! - A failed write is kept as the store's [`WriteFault`] until a write
//!   succeeds again. RocksDB refuses every write after some failures (a
//!   WAL it could not create for want of descriptors, a full disk) until the
//!   database is opened again: [`Store::reopen`] does that in place, for
//!   the daemon's recovery ([`Store::probe_write`] tells when it is needed).

mod open;

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rocksdb::{ColumnFamily, DBRawIterator, ReadOptions, WriteBatch, WriteOptions, DB};

use crate::batch::{Batch, OpKind};
use crate::error::{Result, StoreError};
use crate::keys::meta;
use crate::schema::{self, Family, MemoryBudget};

/// How a store was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// The one writer (daemon, CLI on a stopped store, fixture).
    Primary,
    /// A read-only snapshot of a store nobody else need hold.
    ReadOnly,
    /// A follower of a running daemon; see [`Store::catch_up`].
    Secondary { dir: PathBuf },
}

impl Mode {
    pub fn label(&self) -> &'static str {
        match self {
            Mode::Primary => "primary",
            Mode::ReadOnly => "read-only",
            Mode::Secondary { .. } => "follower",
        }
    }
}

/// Scan direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Forward,
    Reverse,
}

/// A write the store could not make, kept until a write succeeds again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteFault {
    /// When the first failed write of this fault happened (ms since the epoch).
    pub since_ms: u64,
    /// RocksDB's words for the last failure.
    pub error: String,
    /// Writes refused since `since_ms`.
    pub failed_writes: u64,
}

/// An open store at format 3.
///
/// The RocksDB handle sits behind a lock so that [`Store::reopen`] can
/// replace it in place: every operation takes a reference to the current
/// handle for its own duration (a point read, one write, one bounded scan)
/// and none keeps it, so a reopen waits at most for the operations in
/// progress.
pub struct Store {
    db: RwLock<Option<Arc<DB>>>,
    /// Set by a failed write, cleared by a successful one.
    fault: Mutex<Option<WriteFault>>,
    /// Set by the first read that met a damaged table file; never cleared
    /// on this handle ([`crate::damage`]).
    damage: Mutex<Option<crate::damage::Damage>>,
    /// Bumped by every reopen: in-memory state derived from the store
    /// (the writer's sequence, the dispatcher's inflight set) is checked
    /// again when it changes.
    generation: AtomicU64,
    path: PathBuf,
    mode: Mode,
    /// What a 2 → 3 migration keeps between its steps on this handle (the
    /// console runs one step per call): `migrate`'s own state, opaque here
    /// so the handle does not depend on the migration built on it.
    pub(crate) migration: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    /// Armed fault points (tests only; see [`crate::faults`]).
    pub(crate) faults: crate::faults::Faults,
    /// The node's identity once read or recorded ([`crate::node`]): it
    /// never changes once stored, so it is read at most once per handle.
    node: std::sync::OnceLock<crate::node_id::NodeIdentity>,
    /// RocksDB's memory for this handle, kept for [`Store::reopen`] and
    /// [`Store::memory`].
    budget: MemoryBudget,
    /// Tenants whose due rows were written since the dispatcher last asked
    /// ([`crate::due_writes`]); off until [`Store::watch_due_writes`].
    due_writes: crate::due_writes::DueWrites,
    /// Where commits go on a clustered store ([`crate::replicate`]).
    pub(crate) replicator: std::sync::OnceLock<Arc<dyn crate::replicate::Replicator>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .finish()
    }
}

/// What [`probe`] learns about a directory without committing to an opener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub format: Option<u32>,
    pub migrating: bool,
    /// The migration cursor (`m:migrating:3`), decoded by `migrate::Cursor`.
    pub cursor: Option<Vec<u8>>,
    pub families: Vec<String>,
}

fn map_open_error(path: &Path, e: rocksdb::Error) -> StoreError {
    let msg = e.to_string();
    if msg.contains("lock") || msg.contains("LOCK") {
        StoreError::Locked {
            path: path.to_path_buf(),
        }
    } else {
        StoreError::Rocks(e)
    }
}

fn decode_u32_meta(b: &[u8], what: &'static str) -> Result<u32> {
    let mut r = crate::codec::Reader::new(b, what);
    let v = r.u32()?;
    r.finish()?;
    Ok(v)
}

fn decode_u64_meta(b: &[u8], what: &'static str) -> Result<u64> {
    let mut r = crate::codec::Reader::new(b, what);
    let v = r.u64()?;
    r.finish()?;
    Ok(v)
}

/// Descriptors for the families a store has (whatever its format), with
/// the one set of options.
fn existing_descriptors(
    path: &Path,
    budget: &MemoryBudget,
) -> Result<Vec<rocksdb::ColumnFamilyDescriptor>> {
    Ok(probe(path)?
        .families
        .iter()
        .filter_map(|n| Family::from_name(n))
        .map(|f| schema::descriptor(f, budget))
        .collect())
}

/// Reads the format stamp and families of a store without taking its lock
/// (a read-only open of the meta family only), so it works beside a daemon.
pub fn probe(path: &Path) -> Result<Probe> {
    if !path.join("CURRENT").exists() {
        return Err(StoreError::Missing(path.to_path_buf()));
    }
    // A few meta keys are read: the smallest budget is plenty.
    let budget = MemoryBudget::new(MemoryBudget::MIN_BYTES);
    let families = DB::list_cf(&schema::db_options(false, &budget), path)?;
    let db = DB::open_cf_descriptors_read_only(
        &schema::db_options(false, &budget),
        path,
        vec![schema::descriptor(Family::Meta, &budget)],
        false,
    )?;
    let format = match db.get(meta::FORMAT)? {
        Some(b) => Some(decode_u32_meta(&b, "format stamp")?),
        None => None,
    };
    let cursor = db.get(meta::MIGRATING_3)?;
    Ok(Probe {
        format,
        migrating: cursor.is_some(),
        cursor,
        families,
    })
}

impl Store {
    /// Starts recording which tenants get due rows written (see
    /// [`crate::due_writes`]); [`Store::take_due_writes`] hands them over.
    pub fn watch_due_writes(&self) {
        self.due_writes.watch();
    }

    /// The tenants whose due rows were put since the last call, each with
    /// the earliest due key put for it, or `None` if recording is off (then
    /// any tenant may have changed).
    pub fn take_due_writes(&self) -> Option<std::collections::HashMap<u32, crate::keys::DueKey>> {
        self.due_writes.take()
    }

    /// The node's identity, when the store has one and this handle has
    /// read it (every open of a format 3 store does; a follower also at
    /// each [`Store::catch_up`] until its primary records one).
    pub fn node(&self) -> Option<&crate::node_id::NodeIdentity> {
        self.node.get()
    }

    pub(crate) fn cache_node(&self, n: crate::node_id::NodeIdentity) {
        // A second set can only offer the same immutable value.
        let _ = self.node.set(n);
    }

    /// Reads `m:node` into the handle's cache, unless it is there already
    /// (one point read; the identity never changes once stored).
    pub(crate) fn load_node(&self) -> Result<()> {
        if self.node().is_none() {
            if let Some(v) = self.get(Family::Meta, crate::keys::meta::NODE)? {
                self.cache_node(crate::node_id::NodeIdentity::decode(&v)?);
            }
        }
        Ok(())
    }

    /// The current RocksDB handle, for one operation.
    pub(crate) fn db(&self) -> Result<Arc<DB>> {
        let slot = self
            .db
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        slot.clone().ok_or(StoreError::Reopening)
    }

    /// The column family `f` of `db`.
    pub(crate) fn cf_in(db: &DB, f: Family) -> Result<&ColumnFamily> {
        db.cf_handle(f.name())
            .ok_or(StoreError::MissingFamily(f.name()))
    }

    /// The write fault in force, if the last write failed.
    pub fn write_fault(&self) -> Option<WriteFault> {
        self.fault
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// How many times this handle was reopened.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    pub(crate) fn record_write(
        &self,
        result: std::result::Result<(), rocksdb::Error>,
    ) -> Result<()> {
        let mut fault = self
            .fault
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match result {
            Ok(()) => {
                if let Some(f) = fault.take() {
                    tracing::info!(
                        since_ms = f.since_ms,
                        failed_writes = f.failed_writes,
                        "the store takes writes again"
                    );
                }
                Ok(())
            }
            Err(e) => {
                let now = crate::clock::system_now_ms();
                match fault.as_mut() {
                    Some(f) => {
                        f.failed_writes += 1;
                        f.error = e.to_string();
                    }
                    None => {
                        tracing::error!(error = %e, "a store write failed; the store is faulted until a write succeeds");
                        *fault = Some(WriteFault {
                            since_ms: now,
                            error: e.to_string(),
                            failed_writes: 1,
                        });
                    }
                }
                Err(StoreError::Rocks(e))
            }
        }
    }

    /// Routes every later [`Store::commit`] through `r`
    /// ([`crate::replicate`]). Installed once,
    /// before anything writes; a store without one writes directly.
    pub fn set_replicator(&self, r: Arc<dyn crate::replicate::Replicator>) -> Result<()> {
        self.require_writable()?;
        self.replicator
            .set(r)
            .map_err(|_| StoreError::Invalid("a replicator is already installed".into()))
    }

    /// Whether commits go through a replicator.
    pub fn is_replicated(&self) -> bool {
        self.replicator.get().is_some()
    }

    /// Applies one committed entry: `entry`'s bytes (absent for an entry
    /// that changes no content, such as a membership change) and the
    /// replication bookkeeping `marks` (keys under `m:raft:`), in one
    /// write, not synced: the log holds the entry durably, and the marks
    /// say how far this store got.
    pub fn apply(&self, entry: Option<&[u8]>, marks: &[(&[u8], &[u8])]) -> Result<()> {
        self.require_writable()?;
        let db = self.db()?;
        let mut wb = match entry {
            Some(bytes) => WriteBatch::from_data(bytes),
            None => WriteBatch::default(),
        };
        let meta = Self::cf_in(&db, Family::Meta)?;
        for (k, v) in marks {
            if !k.starts_with(meta::REPLICATION_PREFIX) {
                return Err(StoreError::Invalid(format!(
                    "replication bookkeeping must be under m:raft:, not {}",
                    String::from_utf8_lossy(k)
                )));
            }
            wb.put_cf(meta, k, v);
        }
        let written = db.write_opt(wb, &WriteOptions::default());
        self.record_write(written)
    }

    /// A replication bookkeeping value (a key under `m:raft:`).
    pub fn replication_mark(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if !key.starts_with(meta::REPLICATION_PREFIX) {
            return Err(StoreError::Invalid(format!(
                "replication bookkeeping is under m:raft:, not {}",
                String::from_utf8_lossy(key)
            )));
        }
        self.get(Family::Meta, key)
    }

    /// Writes and syncs an empty change (a key put and deleted in one
    /// batch): whether the store takes synced writes now. Clears the fault
    /// when it does.
    pub fn probe_write(&self) -> Result<()> {
        self.require_writable()?;
        let db = self.db()?;
        let meta = Self::cf_in(&db, Family::Meta)?;
        let mut wb = WriteBatch::default();
        wb.put_cf(meta, meta::PROBE, []);
        wb.delete_cf(meta, meta::PROBE);
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.record_write(db.write_opt(wb, &wo))
    }

    /// Closes the RocksDB handle and opens it again, in place, so a write
    /// fault RocksDB keeps until the next open (it refuses every write after
    /// it could not create a file) ends without restarting the process.
    /// Waits up to `wait` for the operations in progress to let go of the
    /// old handle; meanwhile new ones fail with [`StoreError::Reopening`].
    /// If the open fails the handle stays closed and the next call tries
    /// again. Primary opens only.
    pub fn reopen(&self, wait: Duration) -> Result<()> {
        self.require_writable()?;
        self.close_handle(wait)?;
        self.open_handle()?;
        tracing::warn!(path = %self.path.display(), "reopened the store");
        Ok(())
    }

    /// Replaces the store's whole content with the store directory `from`
    /// (a snapshot from another replica, unpacked: docs/cluster.md), in
    /// place: the handle closes as for [`Store::reopen`], `from` is renamed
    /// into the store's path and the old directory is deleted. `from` must
    /// be on the store's filesystem. If the open fails the handle stays
    /// closed.
    pub fn replace_with(&self, from: &Path, wait: Duration) -> Result<()> {
        self.require_writable()?;
        let aside = self.path.with_extension("replaced");
        let io = |path: &Path, source: std::io::Error| StoreError::Io {
            path: path.to_path_buf(),
            source,
        };
        if aside.exists() {
            std::fs::remove_dir_all(&aside).map_err(|e| io(&aside, e))?;
        }
        self.close_handle(wait)?;
        std::fs::rename(&self.path, &aside).map_err(|e| io(&self.path, e))?;
        if let Err(e) = std::fs::rename(from, &self.path) {
            // Put the old store back rather than leave none.
            std::fs::rename(&aside, &self.path).map_err(|e| io(&aside, e))?;
            self.open_handle()?;
            return Err(io(from, e));
        }
        self.open_handle()?;
        std::fs::remove_dir_all(&aside).map_err(|e| io(&aside, e))?;
        tracing::warn!(path = %self.path.display(), "replaced the store's content");
        Ok(())
    }

    /// Takes the RocksDB handle away and closes it, waiting up to `wait`
    /// for the operations in progress to let go of it; meanwhile new ones
    /// fail with [`StoreError::Reopening`].
    fn close_handle(&self, wait: Duration) -> Result<()> {
        let old = self
            .db
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(old) = old {
            let started = Instant::now();
            while Arc::strong_count(&old) > 1 {
                if started.elapsed() > wait {
                    *self
                        .db
                        .write()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(old);
                    return Err(StoreError::Busy(
                        "operations in progress held the store past the reopen's wait",
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            // The only handle left: dropping it closes the database and
            // releases its lock, which the next open takes again.
            drop(old);
        }
        Ok(())
    }

    fn open_handle(&self) -> Result<()> {
        let db = Self::open_raw(&self.path, Mode::Primary, &self.budget)?;
        Self::check_families(&db)?;
        *self
            .db
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(db));
        self.generation.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Arms (or, with `None`, disarms) a fault point on this handle. Does
    /// nothing unless built for tests or with the `faults` feature.
    pub fn arm_fault(&self, point: &str, action: Option<crate::faults::Action>) {
        self.faults.arm(point, action);
    }

    /// Reaches a fault point: `Ok` unless a test armed it.
    pub fn fault(&self, point: &'static str) -> Result<()> {
        self.faults.hit(point)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn mode(&self) -> &Mode {
        &self.mode
    }

    /// Brings a follower up to date with its primary. A no-op elsewhere.
    pub fn catch_up(&self) -> Result<()> {
        if let Mode::Secondary { .. } = self.mode {
            self.db()?.try_catch_up_with_primary()?;
            if self.node().is_none() {
                self.load_node()?;
            }
        }
        Ok(())
    }

    pub(crate) fn require_writable(&self) -> Result<()> {
        match self.mode {
            Mode::Primary => Ok(()),
            Mode::ReadOnly => Err(StoreError::ReadOnly("read-only")),
            Mode::Secondary { .. } => Err(StoreError::ReadOnly("as a follower")),
        }
    }

    /// The format stamp (`m:format`).
    pub fn format(&self) -> Result<Option<u32>> {
        match self.get(Family::Meta, meta::FORMAT)? {
            Some(b) => Ok(Some(decode_u32_meta(&b, "format stamp")?)),
            None => Ok(None),
        }
    }

    /// The next tenant ordinal to allocate (`m:next_ord`, 1 when absent).
    pub fn next_ord(&self) -> Result<u32> {
        match self.get(Family::Meta, meta::NEXT_ORD)? {
            Some(b) => decode_u32_meta(&b, "next ordinal"),
            None => Ok(1),
        }
    }

    /// The next hook seq: the larger of the stored high-water mark and one
    /// past the newest hook, so a seq is never handed out twice even if the
    /// newest hooks were reclaimed.
    pub fn next_seq(&self) -> Result<u64> {
        let stored = match self.get(Family::Meta, meta::NEXT_SEQ)? {
            Some(b) => decode_u64_meta(&b, "next seq")?,
            None => 1,
        };
        let mut last = None;
        self.scan(Family::Hooks, &[], &[0xFF; 9], Dir::Reverse, |k, _| {
            last = Some(crate::keys::decode_hook_key(k)?);
            Ok(ControlFlow::Break(()))
        })?;
        Ok(stored.max(last.map_or(1, |s| s.saturating_add(1))))
    }

    /// Moves the next seq forward by `gap` (a synced write of
    /// `m:next_seq`) and returns the new next seq. A restored backup does
    /// this: the lost store may have minted ids past the backup's, and a
    /// sink that deduplicates on the id must never see one of them again
    /// on another hook.
    pub fn skip_seqs(&self, gap: u64) -> Result<u64> {
        self.require_writable()?;
        let next = self.next_seq()?.saturating_add(gap);
        let mut b = Batch::new();
        b.put(
            Family::Meta,
            meta::NEXT_SEQ.to_vec(),
            next.to_be_bytes().to_vec(),
        );
        self.commit(b, true)?;
        Ok(next)
    }

    pub(crate) fn get(&self, f: Family, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let db = self.db()?;
        db.get_cf(Self::cf_in(&db, f)?, key)
            .map_err(|e| self.read_failed(&db, f.name(), e))
    }

    pub(crate) fn multi_get(&self, f: Family, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        let db = self.db()?;
        let cf = Self::cf_in(&db, f)?;
        let res = db.batched_multi_get_cf(cf, keys, false);
        res.into_iter()
            .map(|r| {
                r.map(|o| o.map(|p| p.to_vec()))
                    .map_err(|e| self.read_failed(&db, f.name(), e))
            })
            .collect()
    }

    /// Commits a batch: its row operations and its counter deltas (mirrored
    /// into ord 0) in one RocksDB write. `sync` fsyncs the WAL before
    /// returning, which is what "acknowledged" means for ingest.
    pub fn commit(&self, batch: Batch, sync: bool) -> Result<()> {
        self.require_writable()?;
        if batch.is_empty() {
            return Ok(());
        }
        // A write refused before it reached the WAL.
        self.fault("commit.before_write")?;
        let db = self.db()?;
        let mut wb = WriteBatch::default();
        for op in write_order(&batch.ops) {
            let cf = Self::cf_in(&db, op.fam)?;
            match &op.kind {
                OpKind::Put(v) => wb.put_cf(cf, &op.key, v),
                OpKind::Delete => wb.delete_cf(cf, &op.key),
                OpKind::DeleteRange(to) => wb.delete_range_cf(cf, &op.key, to),
            }
        }
        if !batch.deltas.is_empty() {
            let counters = Self::cf_in(&db, Family::Counters)?;
            // In key order, for the reason of `write_order`: the operands
            // come grouped by kind (fields, then totals), each group by
            // ordinal. Merges on one key commute, so any order is correct.
            let mut merges = batch.deltas.merge_ops();
            merges.sort_unstable_by_key(|m| m.0);
            for (k, v) in merges {
                wb.merge_cf(counters, k, v);
            }
            if !batch.sinks_uncounted {
                let hooks = Self::cf_in(&db, Family::Hooks)?;
                let per_sink = batch.deltas.sink_deltas(|seq| {
                    Ok(db
                        .get_pinned_cf(hooks, crate::keys::hook_key(seq))
                        .map_err(|e| self.read_failed(&db, "hooks", e))?
                        .and_then(|v| crate::values::Envelope::decode_source(&v).ok()))
                })?;
                for ((source, sink), delta) in per_sink {
                    wb.merge_cf(
                        counters,
                        crate::keys::sink_counter_key(&source, sink),
                        delta.to_le_bytes(),
                    );
                }
            }
        }
        let written = match self.replicator.get() {
            // The entry comes back through `apply`, synced on a majority's
            // logs, whatever `sync` asked for.
            Some(r) => {
                drop(db);
                r.replicate(wb.data().to_vec()).map_err(StoreError::from)
            }
            None => {
                let mut wo = WriteOptions::default();
                wo.set_sync(sync);
                self.record_write(db.write_opt(wb, &wo))
            }
        };
        // After the write, whatever it returned: see `due_writes`.
        self.due_writes.note(&batch.ops);
        written?;
        // A write that reached the WAL and was reported failed all the same
        // (RocksDB does that when the sync fails): its rows are there at
        // the next read or open, and the caller must not assume otherwise.
        self.fault("commit.after_write")
    }

    /// Visits every key of a family in order, unbounded (a bound in the
    /// key space would have to guess the longest key).
    pub(crate) fn scan_family<F>(&self, fam: Family, f: F) -> Result<()>
    where
        F: FnMut(&[u8], &[u8]) -> Result<ControlFlow<()>>,
    {
        let db = self.db()?;
        let it = db.raw_iterator_cf_opt(Self::cf_in(&db, fam)?, ReadOptions::default());
        drive(RocksCursor(it), fam.name(), Dir::Forward, f).map_err(|e| match e {
            StoreError::Scan { family, message } if crate::damage::is_corruption(&message) => {
                self.damaged(&db, family, message)
            }
            e => e,
        })
    }

    /// Visits keys in `[lo, hi)` of a family in order until `f` breaks.
    /// Returns an error if the iterator stopped on one.
    pub(crate) fn scan<F>(&self, fam: Family, lo: &[u8], hi: &[u8], dir: Dir, f: F) -> Result<()>
    where
        F: FnMut(&[u8], &[u8]) -> Result<ControlFlow<()>>,
    {
        let mut ro = ReadOptions::default();
        ro.set_iterate_lower_bound(lo.to_vec());
        ro.set_iterate_upper_bound(hi.to_vec());
        let db = self.db()?;
        let it = db.raw_iterator_cf_opt(Self::cf_in(&db, fam)?, ro);
        drive(RocksCursor(it), fam.name(), dir, f).map_err(|e| match e {
            StoreError::Scan { family, message } if crate::damage::is_corruption(&message) => {
                self.damaged(&db, family, message)
            }
            e => e,
        })
    }

    /// The error for a read of `family` that RocksDB failed: a damaged
    /// table file is recorded and named ([`Store::damaged`]); any other
    /// failure stays RocksDB's own error.
    pub(crate) fn read_failed(
        &self,
        db: &DB,
        family: &'static str,
        e: rocksdb::Error,
    ) -> StoreError {
        if e.kind() == rocksdb::ErrorKind::Corruption {
            self.damaged(db, family, e.into_string())
        } else {
            StoreError::Rocks(e)
        }
    }

    /// Records that a read of `family` met a damaged table file
    /// ([`Store::damage`]: the first file stays named, every failed read
    /// is counted) and returns the error that names it.
    fn damaged(&self, db: &DB, family: &'static str, message: String) -> StoreError {
        let named = crate::damage::file_named(&message);
        let mut damage = self
            .damage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let file = match damage.as_mut() {
            Some(d) => {
                d.failed_reads += 1;
                match &d.file {
                    Some(f) if Some(&f.name) == named.as_ref() => Some(f.clone()),
                    _ => named.and_then(|n| crate::damage::describe(db, &n)),
                }
            }
            None => {
                let file = named.and_then(|n| crate::damage::describe(db, &n));
                tracing::error!(
                    family,
                    file = %file.as_ref().map_or("(unnamed)".to_string(), |f| f.to_string()),
                    error = %message,
                    "a table file of the store is damaged: reads that need it fail until the store is restored from a backup"
                );
                *damage = Some(crate::damage::Damage {
                    since_ms: crate::clock::system_now_ms(),
                    file: file.clone(),
                    error: message.clone(),
                    failed_reads: 1,
                });
                file
            }
        };
        StoreError::Damaged {
            family,
            file: file.map(|f| f.to_string()),
            message,
        }
    }

    /// The damage this handle met, if a read failed on a damaged table
    /// file since it was opened.
    pub fn damage(&self) -> Option<crate::damage::Damage> {
        self.damage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Flushes every memtable (benches and tests that need SST files).
    pub fn flush(&self) -> Result<()> {
        self.require_writable()?;
        let db = self.db()?;
        for f in Family::ALL {
            db.flush_cf(Self::cf_in(&db, f)?)?;
        }
        Ok(())
    }

    /// Compacts a whole family (benches and maintenance; blocks until done).
    pub fn compact(&self, f: Family) -> Result<()> {
        self.require_writable()?;
        let db = self.db()?;
        db.compact_range_cf(Self::cf_in(&db, f)?, None::<&[u8]>, None::<&[u8]>);
        Ok(())
    }

    /// Flushes the memtables of the families this store has (a format 2
    /// store lacks some).
    pub fn flush_existing(&self) -> Result<()> {
        self.require_writable()?;
        let db = self.db()?;
        for f in Family::ALL {
            if let Some(cf) = db.cf_handle(f.name()) {
                db.flush_cf(cf)?;
            }
        }
        Ok(())
    }

    /// Migration only: applies (`on`) or lifts the migration's options of
    /// the families it rewrites ([`schema::migration_options`]). Changes
    /// this open handle only: every opener passes the options of
    /// [`crate::schema`], so the next open of the store is unaffected.
    pub(crate) fn set_migration_options(&self, on: bool) -> Result<()> {
        for f in schema::MIGRATION_FAMILIES {
            let opts = schema::migration_options(f, on);
            let opts: Vec<(&str, &str)> = opts.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let db = self.db()?;
            db.set_options_cf(Self::cf_in(&db, f)?, &opts)?;
        }
        Ok(())
    }

    /// Blocks until the flushes and compactions RocksDB has queued are done.
    pub(crate) fn wait_for_compactions(&self) -> Result<()> {
        self.db()?
            .wait_for_compact(&rocksdb::WaitForCompactOptions::default())?;
        Ok(())
    }

    /// RocksDB's own memory: the part of a process's resident memory the
    /// store's [`MemoryBudget`] bounds (blocks in the shared cache, index
    /// and filter blocks included; memtables; what open table files keep
    /// outside the cache), so a reader can tell it from the rest.
    pub fn memory(&self) -> Result<StoreMemory> {
        let db = self.db()?;
        let mut m = StoreMemory {
            budget: self.budget.bytes() as u64,
            ..StoreMemory::default()
        };
        for f in Family::ALL {
            let Ok(cf) = Self::cf_in(&db, f) else {
                continue;
            };
            let prop = |name: &str| -> Result<u64> {
                Ok(db.property_int_value_cf(cf, name)?.unwrap_or(0))
            };
            m.memtables += prop("rocksdb.cur-size-all-mem-tables")?;
            m.table_readers += prop("rocksdb.estimate-table-readers-mem")?;
        }
        // The cache is shared by the families (a per-family property would
        // count it once per family) and holds the memtables' reservation,
        // which is counted above.
        m.block_cache = self
            .budget
            .cache_usage()
            .saturating_sub(self.budget.memtable_usage()) as u64;
        Ok(m)
    }

    /// RocksDB's estimate of the keys in a family (cheap; approximate).
    pub fn estimate_keys(&self, f: Family) -> Result<u64> {
        let db = self.db()?;
        Ok(db
            .property_int_value_cf(Self::cf_in(&db, f)?, "rocksdb.estimate-num-keys")?
            .unwrap_or(0))
    }
}

/// The order in which a batch's operations go into RocksDB's write batch:
/// by family and key, operations on one key in the order they were added
/// (a stable sort), unless the batch deletes a range.
///
/// Why: RocksDB inserts a write batch into each family's skip-list memtable
/// one key at a time, starting from the previous insert's position; a key
/// far from the last one recomputes that position from the top levels
/// (`InlineSkipList::RecomputeSpliceLevels`, 32% of the ingest writer's
/// CPU with a batch's keys in transition order: a hook's row, its index
/// keys, the next hook's row...). In key order each insert starts next to
/// the previous one. Operations on different keys commute, so the state a
/// batch leaves is the same; operations on one key keep their order. A
/// range delete does not commute with a put inside its range, so a batch
/// holding one is written as built (the migration sorts its own steps,
/// whose range deletes cover only keys no other operation writes).
fn write_order(ops: &[crate::batch::Op]) -> Vec<&crate::batch::Op> {
    let mut out: Vec<&crate::batch::Op> = ops.iter().collect();
    if !ops.iter().any(|o| matches!(o.kind, OpKind::DeleteRange(_))) {
        out.sort_by(|x, y| (x.fam, &x.key).cmp(&(y.fam, &y.key)));
    }
    out
}

/// The part of an iterator a scan needs; a trait so the error path can be
/// tested with a cursor that fails on demand.
pub(crate) trait Cursor {
    fn seek_first(&mut self);
    fn seek_last(&mut self);
    fn valid(&self) -> bool;
    fn item(&self) -> Option<(&[u8], &[u8])>;
    fn next(&mut self);
    fn prev(&mut self);
    fn status(&self) -> std::result::Result<(), String>;
}

struct RocksCursor<'a>(DBRawIterator<'a>);

impl Cursor for RocksCursor<'_> {
    fn seek_first(&mut self) {
        self.0.seek_to_first()
    }
    fn seek_last(&mut self) {
        self.0.seek_to_last()
    }
    fn valid(&self) -> bool {
        self.0.valid()
    }
    fn item(&self) -> Option<(&[u8], &[u8])> {
        self.0.item()
    }
    fn next(&mut self) {
        self.0.next()
    }
    fn prev(&mut self) {
        self.0.prev()
    }
    fn status(&self) -> std::result::Result<(), String> {
        self.0.status().map_err(|e| e.into_string())
    }
}

pub(crate) fn drive<C, F>(mut c: C, family: &'static str, dir: Dir, mut f: F) -> Result<()>
where
    C: Cursor,
    F: FnMut(&[u8], &[u8]) -> Result<ControlFlow<()>>,
{
    match dir {
        Dir::Forward => c.seek_first(),
        Dir::Reverse => c.seek_last(),
    }
    while c.valid() {
        let Some((k, v)) = c.item() else { break };
        if f(k, v)?.is_break() {
            return Ok(());
        }
        match dir {
            Dir::Forward => c.next(),
            Dir::Reverse => c.prev(),
        }
    }
    // An invalid iterator means either the end of the range or an error;
    // only the status tells them apart.
    c.status()
        .map_err(|message| StoreError::Scan { family, message })
}

/// RocksDB's memory by part, in bytes ([`Store::memory`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreMemory {
    /// The configured budget ([`MemoryBudget::bytes`]): block cache and
    /// memtables together stay near it.
    pub budget: u64,
    /// Blocks held by the shared block cache (data, index and filter).
    pub block_cache: u64,
    /// Active and immutable memtables.
    pub memtables: u64,
    /// What open table files keep outside the cache (their index and
    /// filter blocks are in it).
    pub table_readers: u64,
}

#[cfg(test)]
mod tests;
