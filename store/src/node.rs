//! The node's own state in its store: its identity in the fleet, and
//! whether it is draining.
//!
//! Identity: a node's id ([`NodeId`]) is stored once, at the first boot of
//! a daemon that knows about ids (`m:node`), and never changes afterwards:
//! hook ids carry it ([`crate::HookId::public`]), so a node that changed
//! its id would disown every id it handed out. Ids of hooks the store held
//! before it had an identity (seq below `since_seq`) keep their old form,
//! so a retry after the upgrade sends a sink the id it may already have
//! seen. The handle caches the identity once read ([`Store::node`]): it is
//! immutable once stored, so the cache can never be stale.
//! Value (version 1): `1:u8 since_seq:u64 id:str16`.
//!
//! Drain: a draining node fails its readiness check, so a load balancer
//! stops sending to it, and goes on delivering what it holds. The flag is a
//! meta row (`m:drain`), so a restart keeps draining until an operator
//! undrains. Value (version 1): `1:u8 since:u64 by:str16`.

use crate::batch::Batch;
use crate::codec::{put_str16, Reader};
use crate::error::{DecodeError, Result};
use crate::keys::meta;
use crate::schema::Family;
use crate::store::Store;

pub use crate::node_id::{InvalidNodeId, NodeId, NodeIdentity, MAX_NODE_ID};

/// Version byte of the drain value.
const V1: u8 = 1;

/// The stored identity, if any (one point read, then cached on the handle).
pub fn identity(store: &Store) -> Result<Option<NodeIdentity>> {
    store.load_node()?;
    Ok(store.node().cloned())
}

/// Stores `id` as the node's identity, from the next seq on. Only for a
/// store with none ([`identity`] is `None`): an identity never changes.
pub fn record_identity(store: &Store, id: NodeId) -> Result<NodeIdentity> {
    if let Some(n) = identity(store)? {
        return Err(crate::error::StoreError::Invalid(format!(
            "the store already has the node id {:?}; a node id never changes",
            n.id.as_str()
        )));
    }
    let n = NodeIdentity {
        id,
        since_seq: store.next_seq()?,
    };
    let mut b = Batch::new();
    b.put(Family::Meta, meta::NODE.to_vec(), n.encode());
    store.commit(b, true)?;
    store.cache_node(n.clone());
    Ok(n)
}

/// A drain in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drain {
    /// Since when (ms).
    pub since: u64,
    /// Who asked (the audit's principal name).
    pub by: String,
}

impl Drain {
    fn encode(&self) -> Vec<u8> {
        let mut v = vec![V1];
        v.extend_from_slice(&self.since.to_be_bytes());
        put_str16(&mut v, &self.by);
        v
    }

    fn decode(b: &[u8]) -> std::result::Result<Drain, DecodeError> {
        let mut r = Reader::new(b, "drain value");
        r.expect_u8(V1)?;
        let since = r.u64()?;
        let by = r.str16()?;
        r.finish()?;
        Ok(Drain { since, by })
    }
}

/// The drain in force, if any (one point read).
pub fn drain(store: &Store) -> Result<Option<Drain>> {
    match store.get(Family::Meta, meta::DRAIN)? {
        Some(v) => Ok(Some(Drain::decode(&v)?)),
        None => Ok(None),
    }
}

/// Puts the node in drain (in `b`).
pub fn set_drain(b: &mut Batch, d: &Drain) {
    b.put(Family::Meta, meta::DRAIN.to_vec(), d.encode());
}

/// Ends a drain (in `b`).
pub fn clear_drain(b: &mut Batch) {
    b.delete(Family::Meta, meta::DRAIN.to_vec());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drain_is_stored_read_and_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        assert_eq!(drain(&store).unwrap(), None);
        let d = Drain {
            since: 5,
            by: "me".into(),
        };
        let mut b = Batch::new();
        set_drain(&mut b, &d);
        store.commit(b, true).unwrap();
        assert_eq!(drain(&store).unwrap(), Some(d.clone()));
        let mut bad = d.encode();
        bad.push(0);
        assert!(Drain::decode(&bad).is_err());
        let mut b = Batch::new();
        clear_drain(&mut b);
        store.commit(b, true).unwrap();
        assert_eq!(drain(&store).unwrap(), None);
    }
}
