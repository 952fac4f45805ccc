//! Active markers' cleanup: the dispatcher deletes the markers of seconds
//! it found empty, then verifies each second is still empty and restores
//! the marker of any that a concurrent writer filled (delete, then
//! verify). Also the point reads `store check` and repair use to ask
//! whether a marker, a `CLEARED` mark or a dead row exists.

use super::{enc, heal_marker};
use crate::batch::Batch;
use crate::error::Result;
use crate::keys::{bounds, bucket_of, prefix, ActiveKey, DeadByTenantKey, DeadKey};
use crate::rows::DueRow;
use crate::schema::Family;
use crate::store::{Dir, Store};
use std::ops::ControlFlow;

/// Result of one marker cleanup.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cleanup {
    /// Markers deleted.
    pub deleted: Vec<u64>,
    /// Markers put back because a due row turned up in their second.
    pub restored: Vec<u64>,
    /// The marker of the tenant's first due row, put because it was missing
    /// (a cleanup interrupted between its delete and its verify).
    pub healed: Option<u64>,
}

/// Delete-then-verify cleanup of a tenant's stale active markers, run only by
/// the dispatcher after it claimed from the tenant.
///
/// `scanned` are the buckets of this tenant's markers that the tick saw;
/// `floor` (ms) is a time before which the tenant has no due row (the start
/// of its oldest marker's second), where the search for its first due row
/// starts. A marker is stale when its second is before both the tenant's
/// first due row and the current second. Deleted markers are then verified:
/// any deleted second that holds a due row (a writer committed one
/// concurrently) gets its marker back. Writers only ever put markers, so
/// whichever way a concurrent commit interleaves with the delete, the row
/// keeps a marker.
///
/// The delete and the verify are two writes, and a crash or an error between
/// them can leave a due row without its marker. So the cleanup also puts the
/// marker of the tenant's first due row when it is missing: a tenant the
/// dispatcher visits can lose at most the markers *after* its first row, and
/// each of those rows is the first row when its turn comes. A tenant whose
/// every marker was lost is found at boot by [`repair_markers`].
pub fn cleanup_markers(
    store: &Store,
    ord: u32,
    scanned: &[u64],
    floor: u64,
    now: u64,
) -> Result<Cleanup> {
    let visit = MarkerVisit {
        ord,
        scanned,
        from: crate::queries::DueFrom::At(floor),
    };
    let mut done = cleanup_markers_of(store, std::slice::from_ref(&visit), now)?;
    Ok(done.pop().unwrap_or_default())
}

/// One tenant's part of a cleanup: see [`cleanup_markers`].
#[derive(Debug, Clone, Copy)]
pub struct MarkerVisit<'a> {
    pub ord: u32,
    pub scanned: &'a [u64],
    /// Where the search for the tenant's first due row starts: no due row
    /// of the tenant sorts before it (a row committed there meanwhile gets
    /// its marker back from the verify, like any concurrent writer's).
    pub from: crate::queries::DueFrom,
}

/// [`cleanup_markers`] for the tenants of a whole tick, with their deletes
/// in one commit: a commit per tenant waited for the ingest writer's fsync
/// each time, and with a thousand tenants visited a tick took 80 ms of
/// which most was waiting (issue 19). The verify follows the one delete,
/// as for one tenant. Returns one [`Cleanup`] per visit, in order.
pub fn cleanup_markers_of(
    store: &Store,
    visits: &[MarkerVisit<'_>],
    now: u64,
) -> Result<Vec<Cleanup>> {
    let found = cleanup_delete(store, visits, now)?;
    store.fault("cleanup.after_delete")?;
    let mut out = Vec::with_capacity(visits.len());
    for (v, (deleted, first)) in visits.iter().zip(found) {
        let restored = cleanup_verify(store, v.ord, &deleted)?;
        let healed = match first {
            Some(at) => heal_marker(store, v.ord, bucket_of(at))?,
            None => None,
        };
        out.push(Cleanup {
            deleted,
            restored,
            healed,
        });
    }
    Ok(out)
}

/// Step 1-2 of [`cleanup_markers`]: find and delete the stale markers of
/// every visit, in one commit. Returns, per visit, them and the due time
/// of the tenant's first due row.
pub(crate) fn cleanup_delete(
    store: &Store,
    visits: &[MarkerVisit<'_>],
    now: u64,
) -> Result<Vec<(Vec<u64>, Option<u64>)>> {
    store.require_writable()?;
    store.fault("cleanup.before_delete")?;
    let now_bucket = bucket_of(now);
    let mut b = Batch::new();
    let mut out = Vec::with_capacity(visits.len());
    for v in visits {
        let first = crate::queries::first_due_time(store, v.ord, v.from)?;
        let limit = first.map_or(now_bucket, |at| bucket_of(at).min(now_bucket));
        let mut stale: Vec<u64> = v.scanned.iter().copied().filter(|&b| b < limit).collect();
        stale.sort_unstable();
        stale.dedup();
        for &bucket in &stale {
            b.delete(
                Family::Index,
                enc::active(&ActiveKey { bucket, ord: v.ord }),
            );
        }
        out.push((stale, first));
    }
    if out.iter().any(|(stale, _)| !stale.is_empty()) {
        store.commit(b, false)?;
    }
    Ok(out)
}

/// Whether tenant `ord` has its active marker in second `bucket`.
pub(crate) fn marker_exists(store: &Store, ord: u32, bucket: u64) -> Result<bool> {
    Ok(store
        .get(Family::Index, &enc::active(&ActiveKey { bucket, ord }))?
        .is_some())
}

/// Checks, over due rows read in key order, that each (tenant, second) has
/// its active marker: one point read per second, not per row (a tenant's
/// rows come in time order). Shared by `store check` and `store repair`.
#[derive(Debug, Default)]
pub(crate) struct SecondMarkers {
    last: Option<(u32, u64)>,
}

impl SecondMarkers {
    /// `Some(second)` when `row` is the first of its tenant's second and
    /// that second has no marker.
    pub(crate) fn missing(&mut self, store: &Store, row: &DueRow) -> Result<Option<u64>> {
        let second = (row.ord, bucket_of(row.at));
        if self.last == Some(second) {
            return Ok(None);
        }
        self.last = Some(second);
        Ok((!marker_exists(store, row.ord, second.1)?).then_some(second.1))
    }
}

/// Whether hook `seq` has a reclaim marker (`store repair`).
pub(crate) fn cleared_exists(store: &Store, seq: u64) -> Result<bool> {
    Ok(store
        .get(Family::Index, &enc::seq_key(prefix::CLEARED, seq))?
        .is_some())
}

/// Whether the `x` key of a dead row exists (`store check`'s pairing).
pub(crate) fn dead_exists(store: &Store, k: &DeadKey) -> Result<bool> {
    Ok(store.get(Family::Index, &enc::dead(k))?.is_some())
}

/// Whether the `X` key of a dead row exists (`store check`'s pairing).
pub(crate) fn dead_by_tenant_exists(store: &Store, k: &DeadByTenantKey) -> Result<bool> {
    Ok(store.get(Family::Index, &enc::dead_by_tenant(k))?.is_some())
}

/// Step 3 of [`cleanup_markers`]: put back the marker of any deleted second
/// that holds a due row now.
pub(crate) fn cleanup_verify(store: &Store, ord: u32, deleted: &[u64]) -> Result<Vec<u64>> {
    let mut restored = Vec::new();
    for &bucket in deleted {
        let lo = bounds::tenant_at(prefix::DUE, ord, bucket.saturating_mul(1000));
        let hi = bounds::tenant_at(
            prefix::DUE,
            ord,
            bucket.saturating_add(1).saturating_mul(1000),
        );
        let mut any = false;
        store.scan(Family::Index, &lo, &hi, Dir::Forward, |_, _| {
            any = true;
            Ok(ControlFlow::Break(()))
        })?;
        if any {
            restored.push(bucket);
        }
    }
    if !restored.is_empty() {
        let mut b = Batch::new();
        for &bucket in &restored {
            b.put(
                Family::Index,
                enc::active(&ActiveKey { bucket, ord }),
                Vec::new(),
            );
        }
        store.commit(b, false)?;
    }
    Ok(restored)
}
