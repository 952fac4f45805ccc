//! Which tenants had due rows written: for a reader that keeps what it
//! learned of tenants' heads between reads (the dispatcher keeps a tenant
//! whose due rows all wait for full sinks out of its walks until something
//! changes for it, issue 19).
//!
//! Off until [`Store::watch_due_writes`]: a handle nobody asks (the CLI,
//! the console, a daemon without a dispatcher) records nothing, and once
//! on, the set holds at most one entry per tenant between two takes.
//!
//! Invariant: a tenant is recorded *after* the commit that put one of its
//! due rows returns, whatever it returned (a failed write may still have
//! reached the WAL). So a reader that takes the set and then reads sees
//! every row recorded in what it took, and every row committed after its
//! read is in its next take. Every due row goes through [`Store::commit`]
//! (the store's other writes touch only the meta family), so none escapes.
//!
//! [`Store::watch_due_writes`]: crate::store::Store::watch_due_writes
//! [`Store::commit`]: crate::store::Store::commit

use std::collections::HashSet;
use std::sync::Mutex;

use crate::batch::{Op, OpKind};
use crate::keys::{prefix, DueKey};
use crate::schema::Family;

/// The tenants recorded since the last take, or `None` while off.
#[derive(Debug, Default)]
pub(crate) struct DueWrites(Mutex<Option<HashSet<u32>>>);

impl DueWrites {
    pub(crate) fn watch(&self) {
        let mut g = self.lock();
        if g.is_none() {
            *g = Some(HashSet::new());
        }
    }

    /// Records the tenants whose due rows `ops` put.
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
                        set.insert(k.ord);
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

    /// The tenants recorded since the last take; `None` when recording is
    /// off (then the reader must assume every tenant changed).
    pub(crate) fn take(&self) -> Option<HashSet<u32>> {
        self.lock().as_mut().map(std::mem::take)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<HashSet<u32>>> {
        // The set is a hint rebuilt by its reader's next full walk; a
        // panic while it was held leaves a valid set.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
