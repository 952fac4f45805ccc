//! Counting the tombstones a read steps over, for tests and benches that
//! must show a walk does not grow with what was deleted before it.
//!
//! A queue on RocksDB deletes every row it hands out, and a scan from the
//! start of a range steps over each tombstone until a compaction drops it:
//! walks that start at a fixed floor grow with the rows already claimed.
//! RocksDB counts those steps per thread (its perf context); this wraps
//! that count so callers need not depend on RocksDB themselves.

use rocksdb::perf::{set_perf_stats, PerfContext, PerfMetric, PerfStatsLevel};

/// Runs `f` on this thread and returns its result with the number of
/// deleted entries RocksDB's iterators stepped over meanwhile (reads on
/// other threads are not counted). Counting costs a little on every read
/// of this thread while `f` runs, and is off again afterwards.
pub fn skipped_by<R>(f: impl FnOnce() -> R) -> (R, u64) {
    set_perf_stats(PerfStatsLevel::EnableCount);
    let mut ctx = PerfContext::default();
    ctx.reset();
    let out = f();
    let skipped = ctx.metric(PerfMetric::InternalDeleteSkippedCount);
    set_perf_stats(PerfStatsLevel::Disable);
    (out, skipped)
}
