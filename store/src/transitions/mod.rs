//! Every state change of a delivery row, as batch operations *with* their
//! counter deltas.
//!
//! This module owns the index layout's write side. Invariants:
//! - Only this module can encode `D`, `F`, `X` and `A` keys (see `enc`,
//!   which is private), so no other code can write a due row.
//! - Every function that writes a due row writes its active marker in the
//!   same batch ([`put_due`] is the single place that does either).
//! - Every function records its counter deltas in the batch; the batch
//!   mirrors them into ord 0 and turns them into merge operands on commit.
//!   Ingest, delivered, retry and dead-letter also count themselves in the
//!   tenant's cumulative totals ([`Total`]), in the same batch; revive,
//!   recovery, purge, archive and the migration count in none.
//! - Row moves are delete-old + put-new in one batch, so a row always has
//!   exactly one index key.
//! - Active markers are deleted only by [`cleanup_markers`], the dispatcher's
//!   delete-then-verify step, and by [`unpark_chunk`] for the parked second
//!   only (which the cleanup never reaches), under the row lock.
//!
//! Row lifecycle (`pending`/`scheduled` are due rows of kind 0/1):
//!
//! ```text
//! ingest -> due(0) --claim--> inflight --delivered--> (gone; hook reclaimable)
//!                               |  \--retry--> due(1) --claim--> inflight ...
//!                               |  \--dead_letter--> dead --revive--> due(0)
//!           inflight --recover_inflight (boot)--> due(0)
//!           due/dead --purge--> (gone)
//!           due --park (sink paused)--> due at PARKED_AT --unpark--> due(now)
//! ```
//!
//! The files, one family of transitions each: `moves` (ingest, claim and an
//! attempt's outcomes), `park`, `purge`, `reclaim` (and the archive's
//! settle), `migrate`, `quarantine`, `repair`, `recovery` (boot) and
//! `markers` (cleanup and the existence checks). This file keeps the
//! primitives every family writes through: [`put_due`] and the deletes.

mod enc;
mod markers;
mod migrate;
mod moves;
mod park;
mod purge;
mod quarantine;
mod reclaim;
mod recovery;
mod repair;
#[cfg(test)]
mod tests;

use moves::put_dead;
use repair::heal_marker;

pub use markers::{cleanup_markers, cleanup_markers_of, Cleanup, MarkerVisit};
pub(crate) use markers::{
    cleared_exists, dead_by_tenant_exists, dead_exists, marker_exists, SecondMarkers,
};
pub use migrate::{migrate_archive, migrate_dead, migrate_due, migrate_inflight};
pub use moves::{claim, dead_letter, delivered, ingest, retry, revive, IngestHook, SinkSet};
pub use park::{find_parked, park, unpark_chunk, ParkedFind, UnparkCursor, Unparked};
pub use purge::{
    purge_dead, purge_due, purge_tenant, purge_tenant_chunk, purge_tenant_step, PurgeCount,
    PurgeCursor, PurgeKinds,
};
pub(crate) use quarantine::quarantine_uncounted;
pub use quarantine::{drop_quarantined, quarantine_due};
pub(crate) use reclaim::owed;
pub use reclaim::{archive_settle, reclaim_pass};
pub use recovery::{recover_all_inflight, recover_inflight, recover_inflight_except};
pub(crate) use repair::{repair_cleared, repair_counter, repair_marker};
pub use repair::{repair_markers, REPAIR_CHUNK};

use crate::batch::Batch;
use crate::counters::Field;
use crate::keys::{
    bucket_of, delivery_key, prefix, ActiveKey, DeadByTenantKey, DeadKey, DueKey, InflightKey,
};
use crate::rows::{DeadRow, DueRow, InflightRow};
use crate::schema::Family;
use crate::values::{DueValue, Kind};

/// Rows per purge/recovery chunk: one synced batch each.
pub const CHUNK: usize = 500;

pub use crate::queries::VISIT_MAX;
// A purge chunk must fit in the keys it may look at.
const _: () = assert!(VISIT_MAX >= CHUNK);

fn pending_field(kind: Kind) -> Field {
    match kind {
        Kind::First => Field::Pending,
        Kind::Retry => Field::Scheduled,
    }
}

/// Writes a due row and its active marker. The single place either is
/// written, which is what makes "no due row without a marker" structural.
fn put_due(b: &mut Batch, ord: u32, at: u64, seq: u64, sink: u16, size: u32, kind: Kind) -> DueRow {
    let key = DueKey { ord, at, seq, sink };
    b.put(
        Family::Index,
        enc::due(&key),
        DueValue { size, kind }.encode(),
    );
    let bucket = bucket_of(at);
    if b.markers.insert((bucket, ord)) {
        b.put(
            Family::Index,
            enc::active(&ActiveKey { bucket, ord }),
            Vec::new(),
        );
    }
    b.count(ord, pending_field(kind), 1);
    b.move_due(seq, sink, 1);
    DueRow {
        ord,
        at,
        seq,
        sink,
        size,
        kind,
    }
}

fn delete_due(b: &mut Batch, row: &DueRow) {
    let key = DueKey {
        ord: row.ord,
        at: row.at,
        seq: row.seq,
        sink: row.sink,
    };
    b.delete(Family::Index, enc::due(&key));
    b.count(row.ord, pending_field(row.kind), -1);
    b.move_due(row.seq, row.sink, -1);
}

fn delete_inflight(b: &mut Batch, row: &InflightRow) {
    let key = InflightKey {
        ord: row.ord,
        seq: row.seq,
        sink: row.sink,
    };
    b.delete(Family::Index, enc::inflight(&key));
    b.count(row.ord, Field::Inflight, -1);
}

fn delete_dead(b: &mut Batch, row: &DeadRow) {
    b.delete(
        Family::Index,
        enc::dead(&DeadKey {
            at: row.at,
            seq: row.seq,
            sink: row.sink,
        }),
    );
    b.delete(
        Family::Index,
        enc::dead_by_tenant(&DeadByTenantKey {
            ord: row.ord,
            at: row.at,
            seq: row.seq,
            sink: row.sink,
        }),
    );
    b.count(row.ord, Field::Dead, -1);
}

/// Removes the delivery row of (seq, sink) and notes the hook for reclaim.
fn drop_delivery(b: &mut Batch, ord: u32, seq: u64, sink: u16, size: u32) {
    b.delete(Family::Deliveries, delivery_key(seq, sink).to_vec());
    b.put(
        Family::Index,
        enc::seq_key(prefix::CLEARED, seq),
        Vec::new(),
    );
    b.count(ord, Field::Bytes, -i64::from(size));
}
