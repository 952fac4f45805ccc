//! Idempotency-key entries: `u tenant NUL key -> (seq, expires_at)` with an
//! expiry index `e expires_at tenant NUL key`.
//!
//! Invariant: a sweep deletes a `u` entry only when its stored expiry equals
//! the `e` key being swept, so an expired key reused later (a new entry with
//! a later expiry) is never deleted by the old entry's sweep.

use std::ops::ControlFlow;

use crate::batch::Batch;
use crate::error::Result;
use crate::keys::{self, bounds};
use crate::schema::Family;
use crate::store::{Dir, Store};
use crate::values::DedupeValue;

/// Deletes up to `limit` dedupe entries that expired at or before `now`.
/// Returns how many expiry keys were swept.
pub fn sweep(store: &Store, now: u64, limit: usize) -> Result<usize> {
    store.require_writable()?;
    let (lo, hi) = bounds::expiry_upto(now);
    let mut expired = Vec::new();
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        expired.push((k.to_vec(), keys::decode_expiry_key(k)?));
        Ok(if expired.len() >= limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })?;
    if expired.is_empty() {
        return Ok(0);
    }
    let ukeys: Vec<Vec<u8>> = expired
        .iter()
        .map(|(_, (_, t, k))| keys::dedupe_key(t, k))
        .collect();
    let current = store.multi_get(Family::Index, &ukeys)?;
    let mut b = Batch::new();
    for (((ekey, (at, _, _)), ukey), cur) in expired.iter().zip(ukeys).zip(current) {
        b.delete(Family::Index, ekey.clone());
        if let Some(v) = cur {
            if DedupeValue::decode(&v).map_or(true, |d| d.expires_at == *at) {
                b.delete(Family::Index, ukey);
            }
        }
    }
    let n = expired.len();
    store.commit(b, false)?;
    Ok(n)
}
