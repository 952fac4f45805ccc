//! Rows that could not be decoded, moved aside so that one bad row never
//! stops the node.
//!
//! A row of the index family whose key or value does not decode (a due row
//! the dispatcher or a purge meets, an old row the migration meets, an old
//! row whose hook names no valid tenant) is *quarantined*: in one batch its
//! key is deleted, a `Q original_key` row records what it was, and the
//! counters it was counted in are taken down, so the counters keep equalling
//! a fold of the index and every reader after that skips it. The node's
//! count of quarantined rows is a merge-operand counter
//! ([`crate::counters::QUARANTINED`] on ord 0): `/metrics`, `store info` and
//! the console read it in O(1).
//!
//! Invariants:
//! - Only `transitions` writes or deletes `Q` rows (the quarantine and the
//!   drop are transitions, with their counter deltas).
//! - A quarantined due row's delivery row is kept (its hook stays owed and
//!   readable, for an operator to look at); dropping the row deletes it and
//!   lets reclaim collect the hook.
//! - What the quarantine took off the counters is recorded in the row
//!   ([`Counted`]), so the quarantine is exact where the row told enough. A
//!   due row whose kind byte is unreadable is taken as a first attempt: if it
//!   was a retry, `store check` shows pending one low and scheduled one high
//!   for its tenant, and `store repair` rebuilds both from the fold.
//!
//! Value layout (version 1): `1:u8 at:u64 ord:u32 field:u8 size:u32
//! reason:str16 original_value:rest`, where `field` is the counter the row was
//! taken off (0 none, else a [`Field`] byte) and `size` the bytes taken off.

use std::ops::ControlFlow;

use serde::Serialize;

use crate::codec::{put_str16, Reader};
use crate::counters::{decode_value, Field, QUARANTINED};
use crate::error::{DecodeError, Result};
use crate::keys::{self, bounds, prefix};
use crate::schema::Family;
use crate::store::{Dir, Store};

const V1: u8 = 1;

/// What a quarantine took off the counters of `ord`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// The row counter (pending, scheduled, inflight or dead), if any.
    pub field: Option<Field>,
    /// Bytes taken off `bytes`.
    pub size: u32,
}

/// One quarantined row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuarantinedRow {
    /// The row's original key in the index family (its first byte says
    /// which index it was in).
    #[serde(serialize_with = "hex")]
    pub key: Vec<u8>,
    /// When it was quarantined (ms).
    pub at: u64,
    /// Its tenant's ordinal when the key told it, else 0.
    pub ord: u32,
    #[serde(skip)]
    pub counted: Counted,
    /// Why: the decoder's message.
    pub reason: String,
    /// The original value, as found.
    #[serde(serialize_with = "hex")]
    pub value: Vec<u8>,
}

fn hex<S: serde::Serializer>(b: &[u8], s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&to_hex(b))
}

/// Lower-case hex, how keys are shown and given back to `drop`.
pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Parses [`to_hex`]'s output.
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}

impl QuarantinedRow {
    /// The `Q` key of this row.
    pub fn q_key(&self) -> Vec<u8> {
        q_key(&self.key)
    }

    pub fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24 + self.reason.len() + self.value.len());
        out.push(V1);
        out.extend_from_slice(&self.at.to_be_bytes());
        out.extend_from_slice(&self.ord.to_be_bytes());
        out.push(self.counted.field.map_or(0, |f| f as u8));
        out.extend_from_slice(&self.counted.size.to_be_bytes());
        put_str16(&mut out, &self.reason);
        out.extend_from_slice(&self.value);
        out
    }

    /// Decodes a `Q` row.
    pub fn decode(q_key: &[u8], v: &[u8]) -> std::result::Result<Self, DecodeError> {
        let key = match q_key.split_first() {
            Some((&prefix::QUARANTINE, rest)) => rest.to_vec(),
            _ => return Err(DecodeError::new("quarantine key", "not a Q key")),
        };
        let mut r = Reader::new(v, "quarantine row");
        r.expect_u8(V1)?;
        let at = r.u64()?;
        let ord = r.u32()?;
        let field = match r.u8()? {
            0 => None,
            b => Some(
                Field::from_u8(b)
                    .ok_or_else(|| DecodeError::new("quarantine row", format!("field {b}")))?,
            ),
        };
        let size = r.u32()?;
        let reason = r.str16()?;
        let value = r.rest().to_vec();
        Ok(Self {
            key,
            at,
            ord,
            counted: Counted { field, size },
            reason,
            value,
        })
    }
}

/// `Q original_key`.
pub fn q_key(original: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + original.len());
    k.push(prefix::QUARANTINE);
    k.extend_from_slice(original);
    k
}

/// The node's count of quarantined rows (one point read).
pub fn count(store: &Store) -> Result<i64> {
    Ok(store
        .get(Family::Counters, &keys::counter_key(0, QUARANTINED))?
        .as_deref()
        .and_then(decode_value)
        .unwrap_or(0))
}

/// One page of quarantined rows in key order, after `after` (a `Q` key's
/// original key), at most `limit`. Returns the rows and where the next page
/// starts, if there is one.
pub fn page(
    store: &Store,
    after: Option<&[u8]>,
    limit: usize,
) -> Result<(Vec<QuarantinedRow>, Option<Vec<u8>>)> {
    let (lo, hi) = bounds::family(prefix::QUARANTINE);
    let lo = match after {
        Some(a) => {
            let mut k = q_key(a);
            k.push(0);
            k
        }
        None => lo,
    };
    let mut rows = Vec::new();
    let mut more = false;
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
        if rows.len() >= limit {
            more = true;
            return Ok(ControlFlow::Break(()));
        }
        rows.push(QuarantinedRow::decode(k, v)?);
        Ok(ControlFlow::Continue(()))
    })?;
    let next = if more {
        rows.last().map(|r| r.key.clone())
    } else {
        None
    };
    Ok((rows, next))
}

/// The quarantined row whose original key is `key`, if any.
pub fn get(store: &Store, key: &[u8]) -> Result<Option<QuarantinedRow>> {
    let q = q_key(key);
    match store.get(Family::Index, &q)? {
        Some(v) => Ok(Some(QuarantinedRow::decode(&q, &v)?)),
        None => Ok(None),
    }
}

/// The delivery row `(seq, sink)` a quarantined key names, when its layout
/// tells one: a format 3 due key, or a format 2 due, inflight or dead key.
pub fn delivery_of(key: &[u8]) -> Option<(u64, u16)> {
    use crate::keys::{DeadKey, DueKey, V2DueKey, V2InflightKey};
    match *key.first()? {
        prefix::DUE => DueKey::decode(key).ok().map(|k| (k.seq, k.sink)),
        prefix::V2_DUE => V2DueKey::decode(key).ok().map(|k| (k.seq, k.sink)),
        prefix::V2_INFLIGHT => V2InflightKey::decode(key).ok().map(|k| (k.seq, k.sink)),
        prefix::DEAD => DeadKey::decode(key).ok().map(|k| (k.seq, k.sink)),
        _ => None,
    }
}

/// A row a reader could not decode: what it hands to the quarantine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecodable {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub error: DecodeError,
}
