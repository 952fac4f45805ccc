//! Opening and creating a store: the modes (one writer, read-only,
//! secondary), the format checks, the column families and their options
//! within the memory budget, and the copies (`backup`, `checkpoint`). A
//! store of another format, or missing a family, is refused here with an
//! error that says which.

use super::{existing_descriptors, map_open_error, probe, Mode, Store};
use crate::error::{Result, StoreError};
use crate::keys::meta;
use crate::schema::{self, Family, MemoryBudget, FORMAT, FORMAT_V2};
use rocksdb::{WriteBatch, WriteOptions, DB};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, RwLock};

impl Store {
    /// Opens the store at `path` as its one writer, creating it (at format 3)
    /// when the directory holds no store.
    pub fn create_or_open(path: &Path) -> Result<Store> {
        Self::create_or_open_within(path, MemoryBudget::default())
    }

    /// [`Store::create_or_open`] with RocksDB's memory bounded by `budget`
    /// (the daemon's `[store] cache`) instead of the default.
    pub fn create_or_open_within(path: &Path, budget: MemoryBudget) -> Result<Store> {
        if !path.join("CURRENT").exists() {
            return Self::create_stamped(path, &Family::ALL, FORMAT, budget);
        }
        Self::open_within(path, budget)
    }

    /// Opens an existing format 3 store as its one writer.
    pub fn open(path: &Path) -> Result<Store> {
        Self::open_within(path, MemoryBudget::default())
    }

    /// [`Store::open`] within `budget`.
    pub fn open_within(path: &Path, budget: MemoryBudget) -> Result<Store> {
        let db = Self::open_raw(path, Mode::Primary, &budget)?;
        Self::checked(db, path, Mode::Primary, budget)
    }

    /// Opens an existing format 3 store read-only (no lock taken; sees the
    /// state at open time).
    pub fn open_read_only(path: &Path) -> Result<Store> {
        let budget = MemoryBudget::default();
        let db = Self::open_raw(path, Mode::ReadOnly, &budget)?;
        Self::checked(db, path, Mode::ReadOnly, budget)
    }

    /// Opens a follower of the primary at `path`, keeping its own info log
    /// and state in `secondary_dir`. Call [`Store::catch_up`] to see new
    /// writes.
    pub fn open_secondary(path: &Path, secondary_dir: &Path) -> Result<Store> {
        let mode = Mode::Secondary {
            dir: secondary_dir.to_path_buf(),
        };
        let budget = MemoryBudget::default();
        let db = Self::open_raw(path, mode.clone(), &budget)?;
        Self::checked(db, path, mode, budget)
    }

    /// Opens a primary store whatever its format, for the migration (and
    /// fixtures of older formats). Missing families are created.
    pub fn open_any_format(path: &Path) -> Result<Store> {
        if !path.join("CURRENT").exists() {
            return Err(StoreError::Missing(path.to_path_buf()));
        }
        let budget = MemoryBudget::default();
        let mut o = schema::db_options(true, &budget);
        o.create_if_missing(false);
        let db = DB::open_cf_descriptors(
            &o,
            path,
            Family::ALL.map(|f| schema::descriptor(f, &budget)),
        )
        .map_err(|e| map_open_error(path, e))?;
        Ok(Store::handle(db, path, Mode::Primary, budget))
    }

    /// Creates a store in the previous release's layout (format 2: no
    /// tenants or counters family), for fixtures and upgrade tests only.
    pub fn create_v2(path: &Path) -> Result<Store> {
        if path.join("CURRENT").exists() {
            return Err(StoreError::Io {
                path: path.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "a store already exists here",
                ),
            });
        }
        Self::create_stamped(path, &Family::V2, FORMAT_V2, MemoryBudget::default())
    }

    /// Creates a new store with `families`, stamped `format` in a synced
    /// write before anyone can see it.
    pub(super) fn create_stamped(
        path: &Path,
        families: &[Family],
        format: u32,
        budget: MemoryBudget,
    ) -> Result<Store> {
        std::fs::create_dir_all(path).map_err(|source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let db = DB::open_cf_descriptors(
            &schema::db_options(true, &budget),
            path,
            families.iter().map(|f| schema::descriptor(*f, &budget)),
        )
        .map_err(|e| map_open_error(path, e))?;
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        let mut wb = WriteBatch::default();
        wb.put(meta::FORMAT, format.to_be_bytes());
        if format == FORMAT {
            // Empty, so every row waiting is counted from the first commit.
            wb.put(meta::WAITING_COUNTED, []);
        }
        db.write_opt(wb, &wo)?;
        Ok(Store::handle(db, path, Mode::Primary, budget))
    }

    /// Opens whatever families a store has, read-only, whatever its format:
    /// for looking at a store before migrating it (dry-run, console).
    pub fn open_read_only_any_format(path: &Path) -> Result<Store> {
        let budget = MemoryBudget::default();
        let descriptors = existing_descriptors(path, &budget)?;
        let db = DB::open_cf_descriptors_read_only(
            &schema::db_options(false, &budget),
            path,
            descriptors,
            false,
        )
        .map_err(|e| map_open_error(path, e))?;
        Ok(Store::handle(db, path, Mode::ReadOnly, budget))
    }

    /// Writes a consistent copy of the store at `out` (a RocksDB checkpoint:
    /// hard links where possible), opening it as its writer without changing
    /// its families, so a format 2 store stays a format 2 store.
    pub fn backup(path: &Path, out: &Path) -> Result<()> {
        let budget = MemoryBudget::default();
        let descriptors = existing_descriptors(path, &budget)?;
        let mut o = schema::db_options(false, &budget);
        o.create_if_missing(false);
        let db =
            DB::open_cf_descriptors(&o, path, descriptors).map_err(|e| map_open_error(path, e))?;
        Store::handle(db, path, Mode::Primary, budget).checkpoint(out)
    }

    /// Writes a consistent copy of this open store at `out`, which must not
    /// exist: a RocksDB checkpoint taken with this handle, so the daemon
    /// takes one beside its own writes. It holds every write committed
    /// before the call (RocksDB flushes the memtables and copies the live
    /// WAL), hard links where `out` is on the store's filesystem, copies
    /// elsewhere; RocksDB writes it under `out.tmp` and renames it when
    /// complete. Only the store's writer can take one.
    pub fn checkpoint(&self, out: &Path) -> Result<()> {
        self.require_writable()?;
        if out.exists() {
            return Err(StoreError::Io {
                path: out.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "backup target already exists",
                ),
            });
        }
        let db = self.db()?;
        let cp = rocksdb::checkpoint::Checkpoint::new(&db)?;
        cp.create_checkpoint(out)?;
        Ok(())
    }

    pub(super) fn open_raw(path: &Path, mode: Mode, budget: &MemoryBudget) -> Result<DB> {
        let p = probe(path)?;
        match p.format {
            Some(f) if f > FORMAT => {
                return Err(StoreError::FormatNewer {
                    path: path.to_path_buf(),
                    found: f,
                    supported: FORMAT,
                })
            }
            _ if p.migrating => {
                return Err(StoreError::MigrationInProgress {
                    path: path.to_path_buf(),
                    target: FORMAT,
                })
            }
            Some(f) if f <= FORMAT_V2 => {
                return Err(StoreError::FormatNeedsMigration {
                    path: path.to_path_buf(),
                    found: f,
                    supported: FORMAT,
                })
            }
            Some(_) => {}
            None => {
                return Err(StoreError::Unstamped {
                    path: path.to_path_buf(),
                })
            }
        }
        let descriptors = Family::ALL.map(|f| schema::descriptor(f, budget));
        let db = match &mode {
            Mode::Primary => {
                let mut o = schema::db_options(true, budget);
                o.create_if_missing(false);
                DB::open_cf_descriptors(&o, path, descriptors)
            }
            Mode::ReadOnly => DB::open_cf_descriptors_read_only(
                &schema::db_options(false, budget),
                path,
                descriptors,
                false,
            ),
            Mode::Secondary { dir } => {
                let mut o = schema::db_options(false, budget);
                // A follower must keep every file open: the primary may
                // delete files the follower still reads (RocksDB's rule for
                // secondary instances).
                o.set_max_open_files(-1);
                DB::open_cf_descriptors_as_secondary(&o, path, dir, descriptors)
            }
        };
        db.map_err(|e| map_open_error(path, e))
    }

    pub(super) fn checked(db: DB, path: &Path, mode: Mode, budget: MemoryBudget) -> Result<Store> {
        Self::check_families(&db)?;
        let store = Store::handle(db, path, mode, budget);
        store.load_node()?;
        Ok(store)
    }

    pub(super) fn check_families(db: &DB) -> Result<()> {
        for f in Family::ALL {
            if db.cf_handle(f.name()).is_none() {
                return Err(StoreError::MissingFamily(f.name()));
            }
        }
        Ok(())
    }

    pub(super) fn handle(db: DB, path: &Path, mode: Mode, budget: MemoryBudget) -> Store {
        Store {
            budget,
            db: RwLock::new(Some(Arc::new(db))),
            fault: Mutex::new(None),
            damage: Mutex::new(None),
            generation: AtomicU64::new(0),
            path: path.to_path_buf(),
            mode,
            migration: Mutex::new(None),
            faults: crate::faults::Faults::from_env(),
            node: std::sync::OnceLock::new(),
            due_writes: Default::default(),
            replicator: std::sync::OnceLock::new(),
        }
    }
}
