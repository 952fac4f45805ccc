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

use serde::{Deserialize, Serialize};

use crate::batch::Batch;
use crate::codec::{put_str16, Reader};
use crate::error::{DecodeError, Result};
use crate::keys::meta;
use crate::schema::Family;
use crate::store::Store;

const V1: u8 = 1;

/// Longest node id, in bytes: it is part of every hook id.
pub const MAX_NODE_ID: usize = 32;

/// A node's id in the fleet: 1 to [`MAX_NODE_ID`] bytes of lowercase ASCII
/// letters, digits and `-`, not starting or ending with `-`. No `_`: a hook
/// id splits on it (`hk_<node>_<seq>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NodeId(String);

/// Why a string is not a [`NodeId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{id:?} is not a node id: {reason} (1 to 32 lowercase letters, digits and '-', not starting or ending with '-')")]
pub struct InvalidNodeId {
    pub id: String,
    pub reason: &'static str,
}

impl NodeId {
    pub fn parse(s: &str) -> std::result::Result<NodeId, InvalidNodeId> {
        let bad = |reason| {
            Err(InvalidNodeId {
                id: s.to_owned(),
                reason,
            })
        };
        if s.is_empty() {
            return bad("it is empty");
        }
        if s.len() > MAX_NODE_ID {
            return bad("it is too long");
        }
        if !s
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return bad("it has a character other than a-z, 0-9 and '-'");
        }
        if s.starts_with('-') || s.ends_with('-') {
            return bad("it starts or ends with '-'");
        }
        Ok(NodeId(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for NodeId {
    type Error = InvalidNodeId;
    fn try_from(s: String) -> std::result::Result<Self, Self::Error> {
        NodeId::parse(&s)
    }
}

impl From<NodeId> for String {
    fn from(n: NodeId) -> String {
        n.0
    }
}

/// A node's stored identity: its id, and the first seq it minted under it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeIdentity {
    pub id: NodeId,
    /// Hooks from this seq on carry the id; older ones keep `hk_<seq>`.
    pub since_seq: u64,
}

impl NodeIdentity {
    fn encode(&self) -> Vec<u8> {
        let mut v = vec![V1];
        v.extend_from_slice(&self.since_seq.to_be_bytes());
        put_str16(&mut v, self.id.as_str());
        v
    }

    fn decode(b: &[u8]) -> std::result::Result<NodeIdentity, DecodeError> {
        let mut r = Reader::new(b, "node identity");
        r.expect_u8(V1)?;
        let since_seq = r.u64()?;
        let id = r.str16()?;
        r.finish()?;
        let id =
            NodeId::parse(&id).map_err(|e| DecodeError::new("node identity", e.to_string()))?;
        Ok(NodeIdentity { id, since_seq })
    }
}

/// The stored identity, if any (one point read, then cached on the handle).
pub fn identity(store: &Store) -> Result<Option<NodeIdentity>> {
    if let Some(n) = store.node() {
        return Ok(Some(n.clone()));
    }
    match store.get(Family::Meta, meta::NODE)? {
        Some(v) => {
            let n = NodeIdentity::decode(&v)?;
            store.cache_node(n.clone());
            Ok(Some(n))
        }
        None => Ok(None),
    }
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
