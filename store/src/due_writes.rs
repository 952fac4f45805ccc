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
    use crate::fixture::{self, Hook};
    use crate::tenants::TenantAllocator;
    use crate::{Envelope, Store};

    fn hook(tenant: &str, at: u64) -> Hook {
        Hook {
            envelope: Envelope {
                received_at: at,
                source_id: "s".into(),
                tenant: tenant.into(),
                idempotency_key: None,
                event_type: None,
                headers: vec![],
                body: vec![1],
            },
            sinks: crate::transitions::SinkSet::first(2),
            archive: false,
        }
    }

    /// Through the store's commits: the record keeps, per tenant, the
    /// earliest due key of all the commits since the last take, so a later
    /// write does not hide an earlier one whatever order they commit in.
    #[test]
    fn the_record_keeps_each_tenants_earliest_due_key_until_taken() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let mut alloc = TenantAllocator::load(&store, 16).unwrap();
        // Seq 1 (tenant a: ordinal 1) before recording is on.
        fixture::ingest(&store, &mut alloc, &[hook("a", 5_000)]).unwrap();
        assert_eq!(store.take_due_writes(), None, "off until watched");
        store.watch_due_writes();
        // Seqs 2, 3, 4 for a; 5 for b (ordinal 2), in separate commits.
        for h in [
            hook("a", 5_000),
            hook("a", 4_000),
            hook("a", 6_000),
            hook("b", 9_000),
        ] {
            fixture::ingest(&store, &mut alloc, &[h]).unwrap();
        }
        let got = store.take_due_writes().unwrap();
        let at = |o: u32| got.get(&o).map(|k| (k.at, k.seq, k.sink));
        assert_eq!((at(1), at(2)), (Some((4_000, 3, 0)), Some((9_000, 5, 0))));
        assert_eq!(got.len(), 2);
        assert!(
            store.take_due_writes().unwrap().is_empty(),
            "taken: empty again"
        );
    }
}
