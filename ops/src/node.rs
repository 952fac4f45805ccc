//! Drain and undrain: the node stops taking new work from its balancer and
//! delivers what it holds.
//!
//! Draining only sets a flag the daemon's readiness check reads (`/healthz`
//! answers `503 draining`, so a balancer that checks it stops sending);
//! ingest still accepts what arrives meanwhile, and delivery, retries and
//! the DLQ go on as before. The node is *empty* when it owes no delivery
//! (nothing pending, scheduled or inflight; dead rows stay, for an operator
//! to replay or purge). Both actions are admin-only and audited.

use ankusa_store::node::{self, Drain};
use ankusa_store::{queries, Batch, Store};

use crate::access::Principal;
use crate::model::NodeState;
use crate::{jobs, Result};

/// Whether the node drains, and what it still owes (point reads).
pub fn state(store: &Store, who: &Principal) -> Result<NodeState> {
    who.require_admin("the node's state")?;
    let n = queries::node_counters(store)?;
    let owed = u64::try_from(n.pending + n.scheduled + n.inflight).unwrap_or(0);
    Ok(NodeState {
        node: node::identity(store)?.map(|n| n.id),
        draining: node::drain(store)?,
        owed,
        dead: u64::try_from(n.dead).unwrap_or(0),
        empty: owed == 0,
    })
}

/// Starts a drain (audited); draining again changes nothing.
pub fn drain(store: &Store, who: &Principal, now: u64) -> Result<NodeState> {
    who.require_admin("draining the node")?;
    jobs::writable(store)?;
    if node::drain(store)?.is_none() {
        let mut b = Batch::new();
        node::set_drain(
            &mut b,
            &Drain {
                since: now,
                by: who.name.clone(),
            },
        );
        jobs::audit_in(&mut b, who, "drain", "node", "done", 0, now)?;
        store.commit(b, true)?;
    }
    state(store, who)
}

/// Ends a drain (audited); a node not draining is left as it is.
pub fn undrain(store: &Store, who: &Principal, now: u64) -> Result<NodeState> {
    who.require_admin("undraining the node")?;
    jobs::writable(store)?;
    if node::drain(store)?.is_some() {
        let mut b = Batch::new();
        node::clear_drain(&mut b);
        jobs::audit_in(&mut b, who, "undrain", "node", "done", 0, now)?;
        store.commit(b, true)?;
    }
    state(store, who)
}
