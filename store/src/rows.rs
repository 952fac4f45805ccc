//! Decoded index rows as the queries return them and the transitions take
//! them. A row is identified by its key; the value fields ride along so a
//! transition never needs a read to know a row's size or kind.

use crate::error::DecodeError;
use crate::keys::{DeadByTenantKey, DeadKey, DueKey, InflightKey};
use crate::node_id::NodeIdentity;
use crate::values::{decode_size, DeadValue, DueValue, HookId, Kind};

/// A due row: waiting for its first attempt or for a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DueRow {
    pub ord: u32,
    pub at: u64,
    pub seq: u64,
    pub sink: u16,
    pub size: u32,
    pub kind: Kind,
}

impl DueRow {
    pub fn decode(k: &[u8], v: &[u8]) -> Result<Self, DecodeError> {
        let key = DueKey::decode(k)?;
        let val = DueValue::decode(v)?;
        Ok(Self {
            ord: key.ord,
            at: key.at,
            seq: key.seq,
            sink: key.sink,
            size: val.size,
            kind: val.kind,
        })
    }
}

/// A row being delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InflightRow {
    pub ord: u32,
    pub seq: u64,
    pub sink: u16,
    pub size: u32,
}

impl InflightRow {
    pub fn decode(k: &[u8], v: &[u8]) -> Result<Self, DecodeError> {
        let key = InflightKey::decode(k)?;
        Ok(Self {
            ord: key.ord,
            seq: key.seq,
            sink: key.sink,
            size: decode_size(v)?,
        })
    }
}

/// A dead row (DLQ entry). `hook_id` is the public id, derived from the
/// seq and the node's identity: the id string the `x` value keeps is the
/// node-local form written at dead-letter time, never shown (docs/storage.md).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeadRow {
    pub ord: u32,
    pub at: u64,
    pub seq: u64,
    pub sink: u16,
    pub source_id: String,
    pub hook_id: String,
    /// The hook's event type, when its source routes by type.
    pub event_type: Option<String>,
}

impl DeadRow {
    pub fn decode(k: &[u8], v: &[u8], node: Option<&NodeIdentity>) -> Result<Self, DecodeError> {
        let key = DeadKey::decode(k)?;
        let val = DeadValue::decode(v)?;
        Ok(Self {
            ord: val.ord,
            at: key.at,
            seq: key.seq,
            sink: key.sink,
            source_id: val.source_id,
            hook_id: HookId(key.seq).public(node),
            event_type: val.event_type,
        })
    }

    pub fn from_parts(key: &DeadByTenantKey, val: DeadValue, node: Option<&NodeIdentity>) -> Self {
        Self {
            ord: key.ord,
            at: key.at,
            seq: key.seq,
            sink: key.sink,
            source_id: val.source_id,
            hook_id: HookId(key.seq).public(node),
            event_type: val.event_type,
        }
    }

    pub fn id(&self) -> HookId {
        HookId(self.seq)
    }
}
