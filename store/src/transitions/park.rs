//! Parking: the due rows of a paused sink move to the second
//! [`PARKED_AT`], which no tick reaches, and back to due when the sink
//! resumes (bounded chunks under the row lock, resumable by a cursor).
//!
//! Only the unpark deletes the parked second's markers: the marker
//! cleanup never visits that second.

use super::{delete_due, enc, put_due, CHUNK, VISIT_MAX};
use crate::batch::Batch;
use crate::error::Result;
use crate::keys::{bounds, bucket_of, prefix, ActiveKey};
use crate::pauses::PARKED_AT;
use crate::rows::DueRow;
use crate::schema::Family;
use crate::store::{Dir, Store};
use std::ops::ControlFlow;

/// Due -> parked: the row of a paused sink moves to due time
/// [`PARKED_AT`] with its kind (so its counters and attempts do not
/// change) and a marker in that second, which no tick reaches.
pub fn park(b: &mut Batch, row: &DueRow) -> DueRow {
    delete_due(b, row);
    put_due(b, row.ord, PARKED_AT, row.seq, row.sink, row.size, row.kind)
}

/// Where an unpark walk has got: the tenant it is in and the last parked
/// row it looked at there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnparkCursor {
    pub ord: u32,
    pub after: Option<(u64, u16)>,
}

/// What one unpark chunk did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unparked {
    /// Rows made due again.
    pub rows: u64,
    /// Whether the walk has passed every parked row.
    pub done: bool,
}

/// The tenants with a parked-row marker, from `from` on, at most `limit`.
fn parked_tenants(store: &Store, from: u32, limit: usize) -> Result<Vec<u32>> {
    let bucket = bucket_of(PARKED_AT);
    let lo = enc::active(&ActiveKey { bucket, ord: from });
    let (_, hi) = bounds::active_upto(bucket);
    let mut out = Vec::new();
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        out.push(ActiveKey::decode(k)?.ord);
        Ok(if out.len() >= limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })?;
    Ok(out)
}

/// One synced chunk of an unpark: walks parked rows (of `only` when it
/// names a tenant, else of every tenant with parked rows) from `cursor`,
/// makes due at `now` those `pick(ord, seq, sink)` accepts, at most
/// [`CHUNK`] rows and [`VISIT_MAX`] keys, and commits them with `extra`'s
/// operations (the job record). A tenant whose parked rows are all gone has
/// its parked-second marker deleted in the same batch: the dispatcher's
/// cleanup never visits that second, and the caller holds the row lock, so
/// no park can race the check. `pick` errors stop the chunk.
pub fn unpark_chunk(
    store: &Store,
    only: Option<u32>,
    cursor: &mut UnparkCursor,
    now: u64,
    mut pick: impl FnMut(u32, u64, u16) -> Result<bool>,
    extra: impl FnOnce(&mut Batch, &Unparked, &UnparkCursor),
) -> Result<Unparked> {
    store.require_writable()?;
    let mut b = Batch::new();
    let mut next = *cursor;
    let mut out = Unparked::default();
    let mut visited = 0usize;
    let ords = match only {
        Some(o) if o >= next.ord => {
            if parked_tenants(store, o, 1)?.first() == Some(&o) {
                vec![o]
            } else {
                Vec::new()
            }
        }
        Some(_) => Vec::new(),
        None => parked_tenants(store, next.ord, VISIT_MAX)?,
    };
    let mut stopped = false;
    for ord in ords {
        if ord != next.ord {
            next = UnparkCursor { ord, after: None };
        }
        let lo = match next.after {
            Some((seq, sink)) => {
                let mut k = bounds::tenant_full(prefix::DUE, ord, PARKED_AT, seq, sink);
                k.push(0);
                k
            }
            None => bounds::tenant_at(prefix::DUE, ord, PARKED_AT),
        };
        let (_, hi) = bounds::tenant(prefix::DUE, ord);
        let mut left = false;
        let mut end_of_tenant = true;
        let mut err = None;
        store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
            if out.rows as usize >= CHUNK || visited >= VISIT_MAX {
                end_of_tenant = false;
                return Ok(ControlFlow::Break(()));
            }
            visited += 1;
            let row = match DueRow::decode(k, v) {
                Ok(r) => r,
                // An undecodable parked row stays where it is, counted as
                // left so its marker stays: `store check` names it and
                // `store repair` quarantines it.
                Err(_) => {
                    left = true;
                    return Ok(ControlFlow::Continue(()));
                }
            };
            next.after = Some((row.seq, row.sink));
            match pick(ord, row.seq, row.sink) {
                Ok(true) => {
                    delete_due(&mut b, &row);
                    put_due(&mut b, ord, now, row.seq, row.sink, row.size, row.kind);
                    out.rows += 1;
                }
                Ok(false) => left = true,
                Err(e) => {
                    err = Some(e);
                    return Ok(ControlFlow::Break(()));
                }
            }
            Ok(ControlFlow::Continue(()))
        })?;
        if let Some(e) = err {
            return Err(e);
        }
        if !end_of_tenant {
            stopped = true;
            break;
        }
        // Every parked row of this tenant was walked in this chunk or an
        // earlier one; if none is left, neither is the reason for its marker.
        if !left && !parked_left_before(store, ord, cursor)? {
            b.delete(
                Family::Index,
                enc::active(&ActiveKey {
                    bucket: bucket_of(PARKED_AT),
                    ord,
                }),
            );
        }
        // The next tenant.
        match ord.checked_add(1) {
            Some(n) => {
                next = UnparkCursor {
                    ord: n,
                    after: None,
                }
            }
            None => {
                next.after = None;
                break;
            }
        }
        if visited >= VISIT_MAX || out.rows as usize >= CHUNK {
            stopped = true;
            break;
        }
    }
    out.done = !stopped
        && match only {
            Some(_) => true,
            None => parked_tenants(store, next.ord, 1)?.is_empty(),
        };
    extra(&mut b, &out, &next);
    store.commit(b, true)?;
    *cursor = next;
    Ok(out)
}

/// What a bounded search of the parked rows found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParkedFind {
    /// The first parked row `pick` accepted.
    pub row: Option<DueRow>,
    /// Whether the search passed the last parked row (the cursor is back at
    /// the start).
    pub done: bool,
}

/// Looks for one parked row that `pick(row)` accepts, from `cursor`, reading
/// at most `visit` rows; the cursor moves past what was read so the next
/// search goes on from there. Read only: the caller claims the row (a
/// parked row is a due row, so [`claim`] takes it; its parked-second marker
/// stays until an unpark walk finds the tenant has no parked row left).
/// `pick` errors stop the search.
pub fn find_parked(
    store: &Store,
    cursor: &mut UnparkCursor,
    visit: usize,
    mut pick: impl FnMut(&DueRow) -> Result<bool>,
) -> Result<ParkedFind> {
    let mut out = ParkedFind::default();
    let mut seen = 0usize;
    let ords = parked_tenants(store, cursor.ord, visit.max(1))?;
    for ord in ords {
        if ord != cursor.ord {
            *cursor = UnparkCursor { ord, after: None };
        }
        let lo = match cursor.after {
            Some((seq, sink)) => {
                let mut k = bounds::tenant_full(prefix::DUE, ord, PARKED_AT, seq, sink);
                k.push(0);
                k
            }
            None => bounds::tenant_at(prefix::DUE, ord, PARKED_AT),
        };
        let (_, hi) = bounds::tenant(prefix::DUE, ord);
        let mut err = None;
        let mut full = false;
        store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
            if seen >= visit {
                full = true;
                return Ok(ControlFlow::Break(()));
            }
            seen += 1;
            // An undecodable row is `store check`'s to name; skip it.
            let Ok(row) = DueRow::decode(k, v) else {
                return Ok(ControlFlow::Continue(()));
            };
            cursor.after = Some((row.seq, row.sink));
            match pick(&row) {
                Ok(true) => {
                    out.row = Some(row);
                    Ok(ControlFlow::Break(()))
                }
                Ok(false) => Ok(ControlFlow::Continue(())),
                Err(e) => {
                    err = Some(e);
                    Ok(ControlFlow::Break(()))
                }
            }
        })?;
        if let Some(e) = err {
            return Err(e);
        }
        if out.row.is_some() || full {
            return Ok(out);
        }
        match ord.checked_add(1) {
            Some(n) => {
                *cursor = UnparkCursor {
                    ord: n,
                    after: None,
                }
            }
            None => break,
        }
        if seen >= visit {
            return Ok(out);
        }
    }
    if parked_tenants(store, cursor.ord, 1)?.is_empty() || cursor.ord == u32::MAX {
        *cursor = UnparkCursor::default();
        out.done = true;
    }
    Ok(out)
}

/// Whether a parked row of `ord` that this chunk did not walk remains
/// (rows before where the chunk started, which an earlier chunk kept).
fn parked_left_before(store: &Store, ord: u32, started: &UnparkCursor) -> Result<bool> {
    let Some((seq, sink)) = started.after.filter(|_| started.ord == ord) else {
        return Ok(false);
    };
    let lo = bounds::tenant_at(prefix::DUE, ord, PARKED_AT);
    let mut hi = bounds::tenant_full(prefix::DUE, ord, PARKED_AT, seq, sink);
    hi.push(0);
    let mut any = false;
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |_, _| {
        any = true;
        Ok(ControlFlow::Break(()))
    })?;
    Ok(any)
}
