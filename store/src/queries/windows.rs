//! "How much is due when": each tenant's due rows counted per due-time
//! window, each count capped, by seeks over the keys (the heatmap's
//! question); the cost is bounded by the windows and caps, not the rows.

use crate::error::Result;
use crate::keys::{self, bounds, prefix};
use crate::schema::Family;
use crate::store::Store;

/// `D ord at`: the due-key prefix that bounds a tenant's rows by due time.
/// A full key sorts after every bound it starts with, and big-endian
/// `ord at` sorts like the pair, so `key < due_bound(ord, t)` is "this
/// tenant's row, due before `t`" for any key at or after the tenant's seek.
fn due_bound(ord: u32, at: u64) -> [u8; 13] {
    let mut k = [0u8; 13];
    k[0] = prefix::DUE;
    k[1..5].copy_from_slice(&ord.to_be_bytes());
    k[5..13].copy_from_slice(&at.to_be_bytes());
    k
}

/// The due time of a due key.
fn due_key_at(k: &[u8]) -> Result<u64> {
    match k.get(5..13) {
        Some(a) if k.len() == keys::DueKey::LEN => {
            let mut b = [0u8; 8];
            b.copy_from_slice(a);
            Ok(u64::from_be_bytes(b))
        }
        _ => Err(crate::error::DecodeError::new("due key", "wrong length").into()),
    }
}

/// Counts keys from the iterator's position while they sort before `end`,
/// at most `want`. Steps past every counted key but the `want`-th: the
/// caller seeks away from a saturated window, so that step would be wasted.
fn count_before(it: &mut rocksdb::DBRawIterator<'_>, end: &[u8], want: u32) -> u32 {
    let mut n = 0u32;
    while it.key().is_some_and(|k| k < end) {
        n += 1;
        if n >= want {
            break;
        }
        it.next();
    }
    n
}

/// Due rows of each tenant in `ords` per due-time window, each count capped
/// at `cap + 1` (a count above `cap` means "more than cap"). Window `i` is
/// `edges[i] <= at < edges[i + 1]`; rows outside `edges[0]..edges[last]`
/// are not counted. Cost: per tenant at most one seek per window and
/// `cap + 1` keys per window, whatever the backlog.
///
/// How: one iterator for all the rows, keys only, never values. A window is
/// counted from its first row, `cap + 1` keys at most; an empty stretch
/// costs nothing (the key after a window says which window is next); the
/// rest of a saturated window is passed with one seek, and the step past
/// its last counted row is not taken (the seek replaces it). Window ends
/// are compared as encoded key prefixes, so a key is decoded once per
/// window, not once per row counted.
///
/// Bound, whatever the backlog: per row at most `1 + windows` seeks and
/// `windows × (cap + 1)` keys read. On a tenant dense enough to saturate
/// every window the seeks dominate: each positions one cursor per sorted run
/// of the LSM tree, about 15 steps' worth on a store of four runs.
pub fn due_window_counts(
    store: &Store,
    ords: &[u32],
    edges: &[u64],
    cap: u32,
) -> Result<Vec<Vec<u32>>> {
    let cols = edges.len().saturating_sub(1);
    let mut out = vec![vec![0u32; cols]; ords.len()];
    if cols == 0 {
        return Ok(out);
    }
    let want = cap.saturating_add(1);
    let (lo, hi) = bounds::family(prefix::DUE);
    let mut ro = rocksdb::ReadOptions::default();
    ro.set_iterate_lower_bound(lo);
    ro.set_iterate_upper_bound(hi);
    let db = store.db()?;
    let mut it = db.raw_iterator_cf_opt(Store::cf_in(&db, Family::Index)?, ro);
    for (row, &ord) in out.iter_mut().zip(ords) {
        // Every key from the seek below up to `stop` is this tenant's, due
        // in edges[0]..edges[cols].
        let stop = due_bound(ord, edges[cols]);
        it.seek(due_bound(ord, edges[0]));
        let mut col = 0usize;
        while col < cols {
            let at = match it.key() {
                Some(k) if k < &stop[..] => due_key_at(k)?,
                _ => break,
            };
            // The window holding `at`, never before `col`: the iterator only
            // moves forward.
            let c = edges
                .partition_point(|&e| e <= at)
                .saturating_sub(1)
                .clamp(col, cols - 1);
            let end = due_bound(ord, edges[c + 1]);
            // The key under the iterator is the window's first row.
            let n = count_before(&mut it, &end, want);
            row[c] = n;
            col = c + 1;
            if n >= want && col < cols {
                // Saturated: skip the rest of the window with one seek.
                it.seek(end);
            }
        }
        // A scan that stops on an error is an error, never a short result.
        it.status()
            .map_err(|e| store.read_failed(&db, Family::Index.name(), e))?;
    }
    Ok(out)
}
