//! Column families and their options: the one function every opener uses.
//!
//! The daemon, the console, the CLI, the migration and the tests all open a
//! store through [`db_options`] and [`family_options_within`], so the
//! counters family can never be opened without its merge operator (reading a
//! merge operand without the operator is an error in RocksDB, and writing one
//! with a different operator would corrupt the sums).
//!
//! RocksDB's memory for one open store is bounded by one figure, its
//! [`MemoryBudget`]: every family shares one block cache of that size; the
//! index and filter blocks of open table files are charged to it (instead
//! of living beside it, one set per open file); and the memtables of all
//! families are bounded by a write buffer manager that reserves their
//! memory in the same cache. So what RocksDB holds does not grow with the
//! backlog, the number of table files or the number of families, only with
//! the configured budget (docs/configuration.md, `[store] cache`).

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DBCompressionType, Options,
    WriteBufferManager,
};

use crate::counters;

/// The format this release reads and writes.
pub const FORMAT: u32 = 3;
/// The previous release's format: opened only by the migration.
pub const FORMAT_V2: u32 = 2;

/// A column family of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// `m:*` meta keys.
    Meta,
    /// Accepted hooks by seq.
    Hooks,
    /// One row per (hook, sink).
    Deliveries,
    /// Every queue index: due, inflight, dead, archive, active, dedupe.
    Index,
    /// Tenant ordinals both ways.
    Tenants,
    /// Per-tenant counters (merge operands).
    Counters,
    /// Audit trail of destructive operator actions.
    Audit,
}

impl Family {
    pub const ALL: [Family; 7] = [
        Family::Meta,
        Family::Hooks,
        Family::Deliveries,
        Family::Index,
        Family::Tenants,
        Family::Counters,
        Family::Audit,
    ];

    /// Families a format 2 store has (no tenants, no counters).
    pub const V2: [Family; 5] = [
        Family::Meta,
        Family::Hooks,
        Family::Deliveries,
        Family::Index,
        Family::Audit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Family::Meta => "default",
            Family::Hooks => "hooks",
            Family::Deliveries => "deliveries",
            Family::Index => "index",
            Family::Tenants => "tenants",
            Family::Counters => "counters",
            Family::Audit => "audit",
        }
    }

    pub fn from_name(s: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == s)
    }
}

/// RocksDB's memory budget for one open store: a block cache shared by every
/// family, with the memtables' memory reserved in it (see the module doc).
/// Cheap to clone: clones share the cache.
#[derive(Clone)]
pub struct MemoryBudget {
    bytes: usize,
    cache: Cache,
    buffers: WriteBufferManager,
}

impl std::fmt::Debug for MemoryBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBudget")
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl MemoryBudget {
    /// The budget of a store opened without one (`[store] cache`'s default).
    pub const DEFAULT_BYTES: usize = 256 << 20;
    /// The smallest budget: below it the memtables' share (half) would be
    /// smaller than one family's write buffer, and flushes would follow
    /// every few writes.
    pub const MIN_BYTES: usize = 8 << 20;

    /// A budget of `bytes` (at least [`Self::MIN_BYTES`]). Memtables may
    /// take up to half of it; blocks read (data, index, filter) take the
    /// rest, and all of it while the memtables are small.
    pub fn new(bytes: usize) -> Self {
        let bytes = bytes.max(Self::MIN_BYTES);
        let cache = Cache::new_lru_cache(bytes);
        // No stall: past its size the manager flushes the largest
        // memtable; stalling the writer would hold acknowledgements on a
        // memory figure rather than on the disk.
        let buffers = WriteBufferManager::new_write_buffer_manager_with_cache(
            bytes / 2,
            false,
            cache.clone(),
        );
        MemoryBudget {
            bytes,
            cache,
            buffers,
        }
    }

    /// The configured size, in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes the shared cache holds now: blocks read, and the memtables'
    /// reservation.
    pub(crate) fn cache_usage(&self) -> usize {
        self.cache.get_usage()
    }

    /// Bytes of memtable memory reserved in the cache.
    pub(crate) fn memtable_usage(&self) -> usize {
        self.buffers.get_usage()
    }
}

impl Default for MemoryBudget {
    fn default() -> Self {
        MemoryBudget::new(Self::DEFAULT_BYTES)
    }
}

/// Database-wide options. `create` is true only for the primary opener of a
/// store that may not exist yet.
pub fn db_options(create: bool, budget: &MemoryBudget) -> Options {
    let mut o = Options::default();
    o.set_write_buffer_manager(&budget.buffers);
    o.create_if_missing(create);
    o.create_missing_column_families(create);
    // Two cores on the reference machine: one flush and one compaction lane.
    o.set_max_background_jobs(2);
    o.set_keep_log_file_num(4);
    // Readers (the console's follower, read-only tools) replay the
    // unflushed WAL when they open: keeping it small keeps opening fast.
    o.set_max_total_wal_size(64 << 20);
    // Bounded, so the daemon can count its descriptors at boot (RocksDB's
    // default keeps every table file open, which grows with the store).
    o.set_max_open_files(MAX_OPEN_FILES);
    o
}

/// Table files RocksDB keeps open at most (its table cache).
pub const MAX_OPEN_FILES: i32 = 512;

/// Memtable size of a family (bytes).
fn write_buffer_size(f: Family) -> usize {
    match f {
        Family::Hooks | Family::Deliveries => 32 << 20,
        Family::Index => 16 << 20,
        // A small buffer flushes often, and a flush collapses the memtable's
        // merge operands, which bounds a counter read.
        Family::Counters => 1 << 20,
        Family::Meta | Family::Tenants | Family::Audit => 4 << 20,
    }
}

/// The families the 2 → 3 migration rewrites row by row.
pub(crate) const MIGRATION_FAMILIES: [Family; 2] = [Family::Index, Family::Deliveries];

/// Mutable options of [`MIGRATION_FAMILIES`] while a migration's due phase
/// runs on a handle (`on`), and the values that restore [`family_options`]
/// (`!on`).
///
/// The due phase rewrites most rows, and every old row it moves becomes
/// garbage: automatic compaction would merge each flush of new keys into the
/// whole level below, again and again (measured write amplification 4.6 at
/// 10^6 rows, its CPU taken from the migration on two cores), so it is off
/// and runs once afterwards, beside the other phases. Memtables are small
/// (4 MiB) because random-order inserts into a memtable larger than the CPU
/// caches cost more per row the larger it grows; flushing is linear.
pub(crate) fn migration_options(f: Family, on: bool) -> [(&'static str, String); 2] {
    if on {
        [
            ("disable_auto_compactions", "true".to_owned()),
            ("write_buffer_size", (4usize << 20).to_string()),
        ]
    } else {
        [
            ("disable_auto_compactions", "false".to_owned()),
            ("write_buffer_size", write_buffer_size(f).to_string()),
        ]
    }
}

/// Options of one family, with a budget of its own: for tests that open a
/// store with RocksDB directly and need the families' options (the merge
/// operator above all). A store's openers use [`family_options_within`]
/// with the one budget of the open store.
pub fn family_options(f: Family) -> Options {
    family_options_within(f, &MemoryBudget::default())
}

/// Options of one family, its blocks cached in `budget`. The only place
/// family options are decided.
pub fn family_options_within(f: Family, budget: &MemoryBudget) -> Options {
    let mut o = Options::default();
    let mut table = BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    // One cache for every family: which family's blocks deserve the memory
    // (hooks and deliveries read at random by seq, the index on every tick)
    // is the cache's choice by use, not a split fixed in advance.
    table.set_block_cache(&budget.cache);
    // Index and filter blocks in the cache, charged to the budget: left
    // beside it, each open table file keeps its own for as long as it is
    // open, which grows with the store. Those of level 0 files, read by
    // every lookup, stay pinned while their file lives.
    table.set_cache_index_and_filter_blocks(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    match f {
        Family::Hooks | Family::Deliveries => {
            o.set_compression_type(DBCompressionType::Lz4);
        }
        Family::Index => {
            o.set_compression_type(DBCompressionType::None);
            // A queue index is mostly deletes (every row is put, then moved
            // or removed), and scans step over tombstones until compaction
            // drops them: compact files where half of any 10,000 consecutive
            // entries are deletes.
            o.add_compact_on_deletion_collector_factory(10_000, 5_000, 0.5);
        }
        Family::Counters => {
            o.set_compression_type(DBCompressionType::None);
            o.set_merge_operator_associative(counters::I64_ADD, counters::i64_add);
        }
        Family::Meta | Family::Tenants | Family::Audit => {
            o.set_compression_type(DBCompressionType::None);
        }
    }
    o.set_write_buffer_size(write_buffer_size(f));
    o.set_block_based_table_factory(&table);
    o
}

pub fn descriptor(f: Family, budget: &MemoryBudget) -> ColumnFamilyDescriptor {
    ColumnFamilyDescriptor::new(f.name(), family_options_within(f, budget))
}
