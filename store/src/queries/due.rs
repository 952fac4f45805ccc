//! "What is due for a tenant": the walk of its head from a [`DueFrom`],
//! its first due row (or only that row's due time, from the keys), and the
//! node's oldest due row from the active index. One seek a tenant; rows that
//! do not decode are handed back for the quarantine, never fatal.

use super::MAX_UNDECODABLE;
use crate::error::Result;
use crate::keys::{self, bounds, bucket_of, prefix, ActiveKey};
use crate::quarantine::Undecodable;
use crate::rows::DueRow;
use crate::schema::Family;
use crate::store::{Dir, Store};
use std::ops::ControlFlow;

/// A tenant's due rows with `floor <= at <= now`, in due order, at most
/// `limit` rows and `byte_budget` bytes. The first row is returned even if
/// it alone exceeds the budget, so an oversized row cannot be stranded.
pub fn due_for_tenant(
    store: &Store,
    ord: u32,
    now: u64,
    floor: u64,
    limit: usize,
    byte_budget: u64,
    bad: &mut Vec<Undecodable>,
) -> Result<Vec<DueRow>> {
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    let mut bytes = 0u64;
    visit_due(
        store,
        ord,
        DueFrom::At(floor),
        now,
        usize::MAX,
        bad,
        |row| {
            let next = bytes + u64::from(row.size);
            if !out.is_empty() && next > byte_budget {
                return ControlFlow::Break(());
            }
            bytes = next;
            out.push(row);
            if out.len() >= limit {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        },
    )?;
    Ok(out)
}

/// Where a walk of a tenant's due rows starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DueFrom {
    /// At the first row due at or after this time (ms).
    At(u64),
    /// Strictly after the row with this due time, seq and sink: where an
    /// earlier walk stopped.
    After { at: u64, seq: u64, sink: u16 },
}

impl DueFrom {
    /// The due time (ms) the walk starts at.
    pub fn at(self) -> u64 {
        match self {
            DueFrom::At(at) | DueFrom::After { at, .. } => at,
        }
    }

    /// The first key of tenant `ord`'s due rows a walk from here may meet.
    fn lower_bound(self, ord: u32) -> Vec<u8> {
        match self {
            DueFrom::At(at) => bounds::tenant_at(prefix::DUE, ord, at),
            DueFrom::After { at, seq, sink } => {
                let mut k = bounds::tenant_full(prefix::DUE, ord, at, seq, sink);
                k.push(0);
                k
            }
        }
    }
}

/// Hands `f` the tenant's due rows from `from` up to `now`, in due order,
/// until it breaks or `max_keys` rows were handed over. Rows that do not
/// decode go to `bad` (up to a bound) and are not counted. Returns the rows
/// handed over. The one walk of a tenant's head: [`due_for_tenant`] and the
/// dispatcher's sink-aware visit share it.
pub fn visit_due(
    store: &Store,
    ord: u32,
    from: DueFrom,
    now: u64,
    max_keys: usize,
    bad: &mut Vec<Undecodable>,
    mut f: impl FnMut(DueRow) -> ControlFlow<()>,
) -> Result<usize> {
    if from.at() > now {
        return Ok(0);
    }
    let lo = from.lower_bound(ord);
    let hi = bounds::tenant_at(prefix::DUE, ord, now.saturating_add(1));
    let mut seen = 0usize;
    if max_keys == 0 {
        return Ok(0);
    }
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
        let row = match DueRow::decode(k, v) {
            Ok(r) => r,
            // One bad row must not stop the tenant (or the tick): it is
            // handed back for the quarantine and the walk goes on, up to a
            // bounded number of them.
            Err(error) => {
                bad.push(Undecodable {
                    key: k.to_vec(),
                    value: v.to_vec(),
                    error,
                });
                return Ok(if bad.len() >= MAX_UNDECODABLE {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                });
            }
        };
        seen += 1;
        if f(row).is_break() || seen >= max_keys {
            return Ok(ControlFlow::Break(()));
        }
        Ok(ControlFlow::Continue(()))
    })?;
    Ok(seen)
}

/// The tenant's first due row from `from` (due now or later): one seek.
/// `DueFrom::At(0)` asks for its earliest. Callers that know a second
/// before which the tenant has no due row (its oldest active marker), or
/// the last row they claimed, start there, so the seek skips the
/// tombstones of the rows claimed at the head of the range instead of
/// stepping over each until a compaction.
pub fn first_due(store: &Store, ord: u32, from: DueFrom) -> Result<Option<DueRow>> {
    let lo = from.lower_bound(ord);
    let (_, hi) = bounds::tenant(prefix::DUE, ord);
    let mut out = None;
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
        out = Some(DueRow::decode(k, v)?);
        Ok(ControlFlow::Break(()))
    })?;
    Ok(out)
}

/// [`first_due`]'s due time, read from the keys alone: a row whose value
/// does not decode still counts (the dispatcher quarantines it when it
/// comes due), and a key that does not decode is stepped over, so a bad row
/// can never fail a marker cleanup.
pub fn first_due_time(store: &Store, ord: u32, from: DueFrom) -> Result<Option<u64>> {
    let lo = from.lower_bound(ord);
    let (_, hi) = bounds::tenant(prefix::DUE, ord);
    let mut out = None;
    let mut skipped = 0usize;
    store.scan(
        Family::Index,
        &lo,
        &hi,
        Dir::Forward,
        |k, _| match keys::DueKey::decode(k) {
            Ok(key) => {
                out = Some(key.at);
                Ok(ControlFlow::Break(()))
            }
            Err(_) if skipped < MAX_UNDECODABLE => {
                skipped += 1;
                Ok(ControlFlow::Continue(()))
            }
            Err(e) => Err(e.into()),
        },
    )?;
    Ok(out)
}

/// The oldest due row of the node, from the active index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OldestDue {
    pub ord: u32,
    /// Due time in ms; exact when `exact`, else the start of the marker's second.
    pub at: u64,
    pub exact: bool,
}

impl OldestDue {
    /// Age at `now` in ms (0 when not yet due).
    pub fn age_ms(&self, now: u64) -> u64 {
        now.saturating_sub(self.at)
    }
}

/// Markers skipped as stale before reporting a marker's second unverified.
pub const OLDEST_DUE_SKIP: usize = 32;

/// The oldest due row, read from the first marker and verified against that
/// tenant's first due row; stale markers (tenant drained, cleanup pending)
/// are skipped, at most [`OLDEST_DUE_SKIP`], after which the marker's second
/// is reported. O(1) in the backlog: exact to the second.
pub fn oldest_due(store: &Store) -> Result<Option<OldestDue>> {
    let (lo, hi) = bounds::family(prefix::ACTIVE);
    let mut candidates = Vec::new();
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        candidates.push(ActiveKey::decode(k)?);
        Ok(if candidates.len() > OLDEST_DUE_SKIP {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })?;
    for (i, a) in candidates.iter().enumerate() {
        // No marker of this tenant is older than `a` (markers are walked in
        // second order), and every due row has a marker in its second.
        if let Some(first) = first_due(store, a.ord, DueFrom::At(a.bucket.saturating_mul(1000)))? {
            if bucket_of(first.at) == a.bucket {
                return Ok(Some(OldestDue {
                    ord: a.ord,
                    at: first.at,
                    exact: true,
                }));
            }
        }
        if i >= OLDEST_DUE_SKIP {
            return Ok(Some(OldestDue {
                ord: a.ord,
                at: a.bucket.saturating_mul(1000),
                exact: false,
            }));
        }
    }
    Ok(None)
}
