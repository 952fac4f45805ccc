//! Boot recovery: rows left in flight by a process that died are due
//! again (their outcome was never recorded), in bounded synced chunks;
//! a running node can spare the rows it still holds.

use super::{delete_inflight, put_due, CHUNK};
use crate::batch::Batch;
use crate::error::Result;
use crate::keys::{bounds, prefix};
use crate::rows::{DueRow, InflightRow};
use crate::schema::Family;
use crate::store::{Dir, Store};
use crate::values::Kind;
use std::collections::HashSet;
use std::ops::ControlFlow;

/// Inflight -> due (kind 0) at `at`: boot recovery of rows whose delivery
/// outcome was never recorded.
pub fn recover_inflight(b: &mut Batch, row: &InflightRow, at: u64) -> DueRow {
    delete_inflight(b, row);
    put_due(b, row.ord, at, row.seq, row.sink, row.size, Kind::First)
}

/// Boot recovery: every inflight row back to due (kind 0) at `now`, in
/// synced chunks. Returns the number of rows recovered.
pub fn recover_all_inflight(store: &Store, now: u64) -> Result<u64> {
    recover_inflight_except(store, now, &HashSet::new())
}

/// Every inflight row except those in `held` (`(seq, sink)`: the rows
/// whose delivery is in progress in this process) back to due at `now`, in
/// synced chunks. At boot nothing is held; a running dispatcher passes what
/// it delivers, after an outcome it could not record or a store reopen left
/// rows inflight that nobody delivers. Returns the number of rows moved.
pub fn recover_inflight_except(store: &Store, now: u64, held: &HashSet<(u64, u16)>) -> Result<u64> {
    store.require_writable()?;
    let (lo, hi) = bounds::family(prefix::INFLIGHT);
    let mut start = lo;
    let mut total = 0u64;
    loop {
        let mut rows = Vec::new();
        let mut seen = 0usize;
        let mut last = None;
        store.scan(Family::Index, &start, &hi, Dir::Forward, |k, v| {
            let r = InflightRow::decode(k, v)?;
            seen += 1;
            if !held.contains(&(r.seq, r.sink)) {
                rows.push(r);
            }
            last = Some(k.to_vec());
            Ok(if seen >= CHUNK {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        })?;
        let mut b = Batch::new();
        for r in &rows {
            recover_inflight(&mut b, r, now);
        }
        store.commit(b, true)?;
        total += rows.len() as u64;
        match last {
            // Resume strictly after the last key seen: the rows moved are
            // tombstones now, and re-seeking from the start would walk them.
            Some(mut k) if seen >= CHUNK => {
                k.push(0);
                start = k;
            }
            _ => return Ok(total),
        }
    }
}
