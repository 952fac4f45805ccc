//! Column families and their options: the one function every opener uses.
//!
//! The daemon, the console, the CLI, the migration and the tests all open a
//! store through [`db_options`] and [`family_options`], so the counters
//! family can never be opened without its merge operator (reading a merge
//! operand without the operator is an error in RocksDB, and writing one with a
//! different operator would corrupt the sums).

use rocksdb::{BlockBasedOptions, Cache, ColumnFamilyDescriptor, DBCompressionType, Options};

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

/// Database-wide options. `create` is true only for the primary opener of a
/// store that may not exist yet.
pub fn db_options(create: bool) -> Options {
    let mut o = Options::default();
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

/// Options of one family. The only place family options are decided.
pub fn family_options(f: Family) -> Options {
    let mut o = Options::default();
    let mut table = BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    // RocksDB's default block cache is 8 MiB for everything; hooks and
    // deliveries are read in due-time order, i.e. at random by seq (the
    // dispatcher, replay, the migration), and the index is read on every
    // tick. LRU caches grow on use, so a small store costs nothing extra.
    let cache_mib = match f {
        Family::Hooks | Family::Deliveries | Family::Index => 64,
        _ => 8,
    };
    table.set_block_cache(&Cache::new_lru_cache(cache_mib << 20));
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

pub fn descriptor(f: Family) -> ColumnFamilyDescriptor {
    ColumnFamilyDescriptor::new(f.name(), family_options(f))
}
