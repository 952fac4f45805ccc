//! Repair writes: a missing marker, a counter delta or a `CLEARED` mark
//! that `store repair` found derivable, and the boot-time pass that gives
//! each tenant with due rows the marker of its first due row back.

use super::{enc, marker_exists};
use crate::batch::Batch;
use crate::counters::Field;
use crate::error::Result;
use crate::keys::{bucket_of, prefix, ActiveKey};
use crate::schema::Family;
use crate::store::Store;

/// `store repair` only: the marker of a due row's second, where it is
/// missing (repair found the row; the marker is what it derives).
pub(crate) fn repair_marker(b: &mut Batch, ord: u32, bucket: u64) {
    b.put(
        Family::Index,
        enc::active(&ActiveKey { bucket, ord }),
        Vec::new(),
    );
}

/// `store repair` only: a counter brought to its fold. A delta on a tenant
/// is mirrored into the node, like every transition's.
pub(crate) fn repair_counter(b: &mut Batch, ord: u32, field: Field, delta: i64) {
    b.count(ord, field, delta);
}

/// `store repair` only: the reclaim marker of a hook nothing owes.
pub(crate) fn repair_cleared(b: &mut Batch, seq: u64) {
    b.put(
        Family::Index,
        enc::seq_key(prefix::CLEARED, seq),
        Vec::new(),
    );
}

/// Puts the marker of `bucket` for `ord` if it is missing. Returns the
/// bucket when it put one.
pub(super) fn heal_marker(store: &Store, ord: u32, bucket: u64) -> Result<Option<u64>> {
    if marker_exists(store, ord, bucket)? {
        return Ok(None);
    }
    let mut b = Batch::new();
    b.put(
        Family::Index,
        enc::active(&ActiveKey { bucket, ord }),
        Vec::new(),
    );
    store.commit(b, false)?;
    Ok(Some(bucket))
}

/// Boot-time repair of the active index: every tenant whose counters say it
/// has due rows gets the marker of its first due row back if it lost it (a
/// crash between a cleanup's delete and its verify, or a power loss that
/// kept the delete and not the verify). Costs one counters read per tenant
/// and a seek per tenant with work, never a walk of the rows; together with
/// the cleanup's own heal ([`cleanup_markers`]) every due row is reached.
/// Returns the tenants whose marker it put back. Synced.
///
/// The markers are looked up [`REPAIR_CHUNK`] at a time in one batched
/// read: a point read per tenant, in ordinal order, hit a different table
/// file's filter block on each read, and with a block cache smaller than the
/// store each of those (megabytes, checksummed on every load) was evicted
/// before its next use. On a 10^6-row store of 10^5 tenants with `cache =
/// 64 MiB` boot spent 30 s here (issue 19, measured with `perf`).
pub fn repair_markers(store: &Store) -> Result<Vec<u32>> {
    store.require_writable()?;
    let mut with_work = Vec::new();
    crate::queries::each_tenant_counters(store, |ord, c| {
        if c.queued() > 0 {
            with_work.push(ord);
        }
    })?;
    let mut healed = Vec::new();
    let mut b = Batch::new();
    for chunk in with_work.chunks(REPAIR_CHUNK) {
        let mut firsts = Vec::with_capacity(chunk.len());
        for &ord in chunk {
            if let Some(first) =
                crate::queries::first_due_time(store, ord, crate::queries::DueFrom::At(0))?
            {
                firsts.push(ActiveKey {
                    bucket: bucket_of(first),
                    ord,
                });
            }
        }
        let keys: Vec<Vec<u8>> = firsts.iter().map(enc::active).collect();
        for ((k, key), found) in firsts
            .iter()
            .zip(&keys)
            .zip(store.multi_get(Family::Index, &keys)?)
        {
            if found.is_none() {
                b.put(Family::Index, key.clone(), Vec::new());
                healed.push(k.ord);
            }
        }
    }
    store.commit(b, true)?;
    Ok(healed)
}

/// Tenants whose markers [`repair_markers`] looks up in one batched read.
pub const REPAIR_CHUNK: usize = 4_096;
