//! The migration's writes: rows copied from an older format into this one,
//! through the same key encoders and `put_due` as every other move, so a
//! migrated due row has its marker like any other.

use super::{enc, put_dead, put_due};
use crate::batch::Batch;
use crate::counters::Field;
use crate::keys::{prefix, InflightKey};
use crate::rows::{DeadRow, DueRow, InflightRow};
use crate::schema::Family;
use crate::values::{encode_size, ArchiveValue, Kind};

/// Format 2 -> 3: files an old due row under its tenant. Used only by the
/// migration, which deletes the old key in the same batch.
pub fn migrate_due(
    b: &mut Batch,
    ord: u32,
    at: u64,
    seq: u64,
    sink: u16,
    size: u32,
    kind: Kind,
) -> DueRow {
    b.count(ord, Field::Bytes, i64::from(size));
    put_due(b, ord, at, seq, sink, size, kind)
}

/// Format 2 -> 3: files an old inflight row under its tenant.
pub fn migrate_inflight(b: &mut Batch, ord: u32, seq: u64, sink: u16, size: u32) -> InflightRow {
    let key = InflightKey { ord, seq, sink };
    b.put(
        Family::Index,
        enc::inflight(&key),
        encode_size(size).to_vec(),
    );
    b.count(ord, Field::Inflight, 1);
    b.count(ord, Field::Bytes, i64::from(size));
    InflightRow {
        ord,
        seq,
        sink,
        size,
    }
}

/// Format 2 -> 3: rewrites an old dead row with its ordinal and companion.
pub fn migrate_dead(b: &mut Batch, dead: &DeadRow, size: u32) {
    put_dead(b, dead);
    b.count(dead.ord, Field::Bytes, i64::from(size));
}

/// Format 2 -> 3: rewrites an old archive obligation with its ordinal.
pub fn migrate_archive(b: &mut Batch, seq: u64, v: &ArchiveValue) {
    b.put(
        Family::Index,
        enc::seq_key(prefix::ARCHIVE, seq),
        v.encode().to_vec(),
    );
    b.count(v.ord, Field::ArchivePending, 1);
}
