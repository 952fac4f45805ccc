//! "Which tenants have work": the active index (one marker per tenant and
//! second holding due rows) walked up to now, bounded by a limit and a
//! marker budget, so idle tenants cost nothing and a huge backlog costs
//! at most the budget.

use crate::counters::{decode_value, Field};
use crate::error::Result;
use crate::keys::{self, bounds, bucket_of, prefix, ActiveKey};
use crate::schema::Family;
use crate::store::{Dir, Store};
use std::collections::HashSet;
use std::ops::ControlFlow;

/// A tenant with work due, as the active index sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveTenant {
    pub ord: u32,
    /// The oldest second this tenant has a marker for.
    pub bucket: u64,
}

/// Tenants with a marker at or before `now`'s second, oldest first, each
/// once, at most `limit`. Never touches a tenant with nothing due.
pub fn active_tenants(store: &Store, now: u64, limit: usize) -> Result<Vec<ActiveTenant>> {
    let (out, _) = active_markers(store, now, limit)?;
    Ok(out)
}

/// An active marker as `(ordinal, bucket)`.
pub type Marker = (u32, u64);

/// Like [`active_tenants`], also returning every marker bucket seen per
/// tenant (what the dispatcher hands to `cleanup_markers`).
pub fn active_markers(
    store: &Store,
    now: u64,
    limit: usize,
) -> Result<(Vec<ActiveTenant>, Vec<Marker>)> {
    let (lo, hi) = bounds::active_upto(bucket_of(now));
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut markers = Vec::new();
    if limit == 0 {
        return Ok((out, markers));
    }
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        let a = ActiveKey::decode(k)?;
        if seen.insert(a.ord) {
            if out.len() >= limit {
                return Ok(ControlFlow::Break(()));
            }
            out.push(ActiveTenant {
                ord: a.ord,
                bucket: a.bucket,
            });
        }
        markers.push((a.ord, a.bucket));
        Ok(ControlFlow::Continue(()))
    })?;
    Ok((out, markers))
}

/// Every active marker with `from <= bucket <= to`, in (bucket, ordinal)
/// order, as `(ordinal, bucket)`. The dispatcher walks a window of recent
/// seconds with it each tick instead of the whole index.
pub fn markers_between(
    store: &Store,
    from: u64,
    to: u64,
    mut f: impl FnMut(u32, u64),
) -> Result<()> {
    let mut lo = vec![prefix::ACTIVE];
    lo.extend_from_slice(&from.to_be_bytes());
    let (_, hi) = bounds::active_upto(to);
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        let a = ActiveKey::decode(k)?;
        f(a.ord, a.bucket);
        Ok(ControlFlow::Continue(()))
    })
}

/// A tenant with its pending counter, for the top-N gauge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingTenant {
    pub ord: u32,
    pub pending: i64,
}

/// Distinct tenants read from the active index for the top-N gauge.
pub const TOP_SCAN: usize = 10_000;

/// Markers a stateless reader (a gauge, `store info`) walks at most. The
/// active index has one marker per (tenant, due second): a deep backlog of
/// many tenants can hold hundreds of thousands up to now, and a one-shot
/// reader must stay bounded, so it reports what it saw and whether it saw
/// everything. The oldest markers come first, so a bounded walk sees the
/// tenants that have waited longest.
pub const MARKER_BUDGET: usize = 100_000;

/// Tenants with work due now, counted by a bounded walk of the markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveSummary {
    /// Distinct tenants seen.
    pub tenants: usize,
    pub markers_walked: usize,
    /// False when the walk stopped at the budget: `tenants` is a lower bound.
    pub complete: bool,
}

/// A bounded walk of the active index: the first `limit` distinct tenants
/// with a marker at or before `now`'s second (oldest first), walking at most
/// `budget` markers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveWalk {
    pub tenants: Vec<ActiveTenant>,
    pub markers_walked: usize,
    /// False when the walk stopped at the budget before finding `limit`
    /// tenants or the end of the markers: more tenants may be active.
    pub complete: bool,
}

/// See [`ActiveWalk`]. Unlike [`active_tenants`], a store with few
/// tenants and a deep backlog (one marker per tenant and due second) is not
/// walked to its end to prove there is no further tenant.
pub fn active_within(store: &Store, now: u64, limit: usize, budget: usize) -> Result<ActiveWalk> {
    let (lo, hi) = bounds::active_upto(bucket_of(now));
    let mut seen = HashSet::new();
    let mut walk = ActiveWalk {
        tenants: Vec::new(),
        markers_walked: 0,
        complete: true,
    };
    if limit == 0 {
        return Ok(walk);
    }
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        if walk.markers_walked >= budget {
            walk.complete = false;
            return Ok(ControlFlow::Break(()));
        }
        walk.markers_walked += 1;
        let a = ActiveKey::decode(k)?;
        if seen.insert(a.ord) {
            walk.tenants.push(ActiveTenant {
                ord: a.ord,
                bucket: a.bucket,
            });
            if walk.tenants.len() >= limit {
                return Ok(ControlFlow::Break(()));
            }
        }
        Ok(ControlFlow::Continue(()))
    })?;
    Ok(walk)
}

/// Counts the tenants with a marker at or before `now`'s second, walking at
/// most `budget` markers.
pub fn active_summary(store: &Store, now: u64, budget: usize) -> Result<ActiveSummary> {
    let w = active_within(store, now, usize::MAX, budget)?;
    Ok(ActiveSummary {
        tenants: w.tenants.len(),
        markers_walked: w.markers_walked,
        complete: w.complete,
    })
}

/// The `n` tenants with the most pending rows among the first
/// [`TOP_SCAN`] distinct tenants of the active index up to `now` (those that
/// have waited longest, within a walk of at most [`MARKER_BUDGET`] markers);
/// one counter read each. A tenant with pending rows has a marker at or
/// before the current second, so no scan of the counters family is needed.
pub fn top_pending(store: &Store, now: u64, n: usize) -> Result<Vec<PendingTenant>> {
    let ords: Vec<u32> = active_within(store, now, TOP_SCAN, MARKER_BUDGET)?
        .tenants
        .iter()
        .map(|a| a.ord)
        .collect();
    let keys: Vec<Vec<u8>> = ords
        .iter()
        .map(|&o| keys::counter_key(o, Field::Pending as u8).to_vec())
        .collect();
    let values = store.multi_get(Family::Counters, &keys)?;
    let mut out: Vec<PendingTenant> = ords
        .into_iter()
        .zip(values)
        .map(|(ord, v)| PendingTenant {
            ord,
            pending: v.as_deref().and_then(decode_value).unwrap_or(0),
        })
        .filter(|p| p.pending > 0)
        .collect();
    out.sort_by(|a, b| b.pending.cmp(&a.pending).then(a.ord.cmp(&b.ord)));
    out.truncate(n);
    Ok(out)
}
