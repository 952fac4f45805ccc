//! Which tenants had due rows written: for a reader that keeps what it
//! learned of tenants' heads between reads (the dispatcher keeps a tenant
//! whose due rows all wait for full sinks out of its walks until something
//! changes for it, issue 19).
//!
//! Off until [`Store::watch_due_writes`]: a handle nobody asks (the CLI,
//! the console, a daemon without a dispatcher) records nothing, and once
//! on, the record holds at most one entry per tenant between two takes:
//! the earliest due key written for it. The key, not only the tenant: a
//! hook's due time is taken before its commit, so a row can land before a
//! place the reader has already walked past (the dispatcher's skip point),
//! and the reader must know to walk there again.
//!
//! Invariant: a tenant is recorded *after* the commit that put one of its
//! due rows returns, whatever it returned (a failed write may still have
//! reached the WAL). So a reader that takes the record and then reads sees
//! every row recorded in what it took, and every row committed after its
//! read is in its next take. Every due row goes through [`Store::commit`]
//! (the store's other writes touch only the meta family), so none escapes.
//!
//! [`Store::watch_due_writes`]: crate::store::Store::watch_due_writes
//! [`Store::commit`]: crate::store::Store::commit

use std::collections::HashMap;
use std::sync::Mutex;

use crate::batch::{Op, OpKind};
use crate::keys::{prefix, DueKey};
use crate::schema::Family;

/// Per tenant recorded since the last take, the earliest due key written;
/// `None` while off.
#[derive(Debug, Default)]
pub(crate) struct DueWrites(Mutex<Option<HashMap<u32, DueKey>>>);

impl DueWrites {
    pub(crate) fn watch(&self) {
        let mut g = self.lock();
        if g.is_none() {
            *g = Some(HashMap::new());
        }
    }

    /// Records the tenants whose due rows `ops` put, with the earliest key.
    pub(crate) fn note(&self, ops: &[Op]) {
        let mut g = self.lock();
        let Some(set) = g.as_mut() else {
            return;
        };
        for op in ops {
            if op.fam == Family::Index
                && op.key.first() == Some(&prefix::DUE)
                && matches!(op.kind, OpKind::Put(_))
            {
                match DueKey::decode(&op.key) {
                    Ok(k) => {
                        let e = set.entry(k.ord).or_insert(k);
                        if k < *e {
                            *e = k;
                        }
                    }
                    // A key this store's own transitions built always
                    // decodes; if one did not, no reader could rely on
                    // the set, so it is switched off for good.
                    Err(_) => {
                        *g = None;
                        return;
                    }
                }
            }
        }
    }

    /// The tenants recorded since the last take, each with the earliest
    /// due key written for it; `None` when recording is off (then the
    /// reader must assume every tenant changed anywhere).
    pub(crate) fn take(&self) -> Option<HashMap<u32, DueKey>> {
        self.lock().as_mut().map(std::mem::take)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<HashMap<u32, DueKey>>> {
        // The set is a hint rebuilt by its reader's next full walk; a
        // panic while it was held leaves a valid set.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transitions::{self, IngestHook};
    use crate::{Batch, Envelope};

    fn ingest(seq: u64, ord: u32, at: u64) -> Batch {
        let env = Envelope {
            received_at: at,
            source_id: "s".into(),
            tenant: format!("t{ord}"),
            idempotency_key: None,
            headers: vec![],
            body: vec![1],
        };
        let mut b = Batch::new();
        transitions::ingest(
            &mut b,
            &IngestHook {
                seq,
                ord,
                envelope: &env,
                sinks: 2,
                archive: false,
                dedupe_expires_at: None,
            },
        );
        b
    }

    /// The record keeps, per tenant, the earliest due key of all the
    /// commits since the last take: a later write does not hide an earlier
    /// one, whatever order they commit in.
    #[test]
    fn the_record_keeps_each_tenants_earliest_due_key_until_taken() {
        let w = DueWrites::default();
        w.note(&ingest(1, 7, 5_000).ops);
        assert_eq!(w.take(), None, "off until watched");
        w.watch();
        w.note(&ingest(2, 7, 5_000).ops);
        w.note(&ingest(3, 7, 4_000).ops);
        w.note(&ingest(4, 7, 6_000).ops);
        w.note(&ingest(5, 8, 9_000).ops);
        let got = w.take().unwrap();
        let at = |o: u32| got.get(&o).map(|k| (k.at, k.seq, k.sink));
        assert_eq!((at(7), at(8)), (Some((4_000, 3, 0)), Some((9_000, 5, 0))));
        assert_eq!(w.take(), Some(HashMap::new()), "taken: empty again");
    }
}
