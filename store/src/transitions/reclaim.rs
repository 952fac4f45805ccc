//! Reclaim: a hook nothing owes any more (no delivery row, no archive
//! obligation) carries a `CLEARED` mark, put by the batch that released it;
//! the reclaim pass deletes the hooks nothing owes and the marks of those
//! still owed, then checks each mark it deleted again and puts back the
//! mark of a hook released in between (delete, then verify, like the marker
//! cleanup). The archive's settle is one of the releases.

use super::enc;
use crate::batch::Batch;
use crate::counters::Field;
use crate::error::Result;
use crate::keys::{bounds, hook_key, prefix};
use crate::schema::Family;
use crate::store::{Dir, Store};
use crate::values::ArchiveValue;
use std::ops::ControlFlow;

/// Settles (the hook was archived) or drops (archiving gave up) an archive
/// obligation. Both make the hook reclaimable once no row owes it.
pub fn archive_settle(b: &mut Batch, seq: u64, v: &ArchiveValue) {
    b.delete(Family::Index, enc::seq_key(prefix::ARCHIVE, seq));
    b.put(
        Family::Index,
        enc::seq_key(prefix::CLEARED, seq),
        Vec::new(),
    );
    b.count(v.ord, Field::ArchivePending, -1);
}

/// Deletes a hook no delivery row and no archive obligation owes any more.
/// Callers use [`reclaim_pass`], which checks that.
fn reclaim(b: &mut Batch, seq: u64) {
    b.delete(Family::Hooks, hook_key(seq).to_vec());
    b.delete(Family::Index, enc::seq_key(prefix::CLEARED, seq));
}

/// Reclaims hooks that no delivery row and no archive obligation owes,
/// looking at up to `limit` cleared markers. Returns hooks deleted.
pub fn reclaim_pass(store: &Store, limit: usize) -> Result<u64> {
    let (reclaimed, still_owed) = reclaim_delete(store, limit)?;
    reclaim_verify(store, &still_owed)?;
    Ok(reclaimed)
}

/// First half of [`reclaim_pass`]: reclaims the hooks nobody owes and
/// deletes the cleared marker of those still owed (a remaining row, or the
/// archive settle, puts a fresh one when it goes). Returns the hooks
/// reclaimed and the seqs whose marker it deleted.
pub(crate) fn reclaim_delete(store: &Store, limit: usize) -> Result<(u64, Vec<u64>)> {
    store.require_writable()?;
    let (lo, hi) = bounds::family(prefix::CLEARED);
    let mut seqs = Vec::new();
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        seqs.push(crate::keys::decode_seq_key(
            k,
            prefix::CLEARED,
            "cleared key",
        )?);
        Ok(if seqs.len() >= limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })?;
    let mut b = Batch::new();
    let mut reclaimed = 0;
    let mut still_owed = Vec::new();
    for seq in seqs {
        if owed(store, seq)? {
            b.delete(Family::Index, enc::seq_key(prefix::CLEARED, seq));
            still_owed.push(seq);
        } else {
            reclaim(&mut b, seq);
            reclaimed += 1;
        }
    }
    store.commit(b, false)?;
    Ok((reclaimed, still_owed))
}

/// Second half of [`reclaim_pass`], delete-then-verify: an owner that
/// released a hook between the read and the delete put its marker *before*
/// the delete, which just erased it. So every hook whose marker was deleted
/// is checked again, and gets its marker back if nothing owes it any more;
/// an owner releasing after this check puts its own.
pub(crate) fn reclaim_verify(store: &Store, deleted: &[u64]) -> Result<Vec<u64>> {
    let mut restore = Batch::new();
    let mut restored = Vec::new();
    for &seq in deleted {
        if !owed(store, seq)? {
            restore.put(
                Family::Index,
                enc::seq_key(prefix::CLEARED, seq),
                Vec::new(),
            );
            restored.push(seq);
        }
    }
    store.commit(restore, false)?;
    Ok(restored)
}

/// Whether a delivery row or an archive obligation still owes hook `seq`.
pub(crate) fn owed(store: &Store, seq: u64) -> Result<bool> {
    let (dlo, dhi) = bounds::deliveries_of(seq);
    let mut owed = false;
    store.scan(Family::Deliveries, &dlo, &dhi, Dir::Forward, |_, _| {
        owed = true;
        Ok(ControlFlow::Break(()))
    })?;
    Ok(owed
        || store
            .get(Family::Index, &enc::seq_key(prefix::ARCHIVE, seq))?
            .is_some())
}
