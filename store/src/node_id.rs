//! A node's identity in the fleet as a value: its id ([`NodeId`]) and the
//! first seq minted under it ([`NodeIdentity`]), with the stored form of
//! `m:node`. Nothing here reads or writes the store ([`crate::node`] does),
//! so the store handle, which caches the identity, and the hook ids, which
//! carry it, can depend on these types without depending on each other.

use serde::{Deserialize, Serialize};

use crate::codec::{put_str16, Reader};
use crate::error::DecodeError;

const V1: u8 = 1;

/// Longest node id, in bytes: it is part of every hook id.
pub const MAX_NODE_ID: usize = 32;

/// A node's id in the fleet: 1 to [`MAX_NODE_ID`] bytes of lowercase ASCII
/// letters, digits and `-`, not starting or ending with `-`. No `_`: a hook
/// id splits on it (`hk_<node>_<seq>`). Written and read as its text, as
/// the configuration file and the admin API have it; reading refuses a
/// string that is not an id.
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    pub id: NodeId,
    /// Hooks from this seq on carry the id; older ones keep `hk_<seq>`.
    pub since_seq: u64,
}

impl NodeIdentity {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = vec![V1];
        v.extend_from_slice(&self.since_seq.to_be_bytes());
        put_str16(&mut v, self.id.as_str());
        v
    }

    pub(crate) fn decode(b: &[u8]) -> std::result::Result<NodeIdentity, DecodeError> {
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
