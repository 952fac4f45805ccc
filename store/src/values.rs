//! Value encodings of format 3 (and of format 2 where they differ).
//!
//! Hand-written, versioned binary layouts rather than a serde format: the
//! bytes are documented in `docs/storage.md` so another RocksDB binding can
//! read them, and every decoder is total (garbage is an error, never a panic).

use crate::codec::{put_bytes16, put_bytes32, put_str16, truncate_utf8, Reader};
use crate::error::DecodeError;

/// Whether a due row is a first attempt or a retry. Drives which counter
/// (pending or scheduled) the row is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// First attempt, a replay revival or a recovered inflight row.
    First = 0,
    /// Waiting out (or just past) a retry backoff.
    Retry = 1,
}

impl Kind {
    pub fn from_u8(b: u8) -> Result<Self, DecodeError> {
        match b {
            0 => Ok(Kind::First),
            1 => Ok(Kind::Retry),
            other => Err(DecodeError::new(
                "due kind",
                format!("unknown kind {other}"),
            )),
        }
    }
}

/// `D` value: `size:u32 kind:u8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueValue {
    pub size: u32,
    pub kind: Kind,
}

impl DueValue {
    pub fn encode(&self) -> [u8; 5] {
        let s = self.size.to_be_bytes();
        [s[0], s[1], s[2], s[3], self.kind as u8]
    }
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(b, "due value");
        let size = r.u32()?;
        let kind = Kind::from_u8(r.u8()?)?;
        r.finish()?;
        Ok(Self { size, kind })
    }
}

/// `F` value and format 2 `d`/`f` values: `size:u32`.
pub fn encode_size(size: u32) -> [u8; 4] {
    size.to_be_bytes()
}

pub fn decode_size(b: &[u8]) -> Result<u32, DecodeError> {
    let mut r = Reader::new(b, "size value");
    let size = r.u32()?;
    r.finish()?;
    Ok(size)
}

/// `x` value in format 3: `source_id:str16 hook_id:str16 ord:u32
/// [event_type:str16]`, the event type only for a typed hook (so an untyped
/// store's values are what older binaries read). Format 2 has the same
/// layout without the trailing ordinal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadValue {
    pub source_id: String,
    pub hook_id: String,
    pub ord: u32,
    /// The hook's event type, kept here so a DLQ page filtered by type
    /// reads no hook.
    pub event_type: Option<String>,
}

impl DeadValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.source_id.len() + self.hook_id.len());
        put_str16(&mut out, &self.source_id);
        put_str16(&mut out, &self.hook_id);
        out.extend_from_slice(&self.ord.to_be_bytes());
        if let Some(t) = &self.event_type {
            put_str16(&mut out, t);
        }
        out
    }
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(b, "dead value");
        let source_id = r.str16()?;
        let hook_id = r.str16()?;
        let ord = r.u32()?;
        let event_type = if r.at_end() { None } else { Some(r.str16()?) };
        r.finish()?;
        Ok(Self {
            source_id,
            hook_id,
            ord,
            event_type,
        })
    }
    pub fn encode_v2(source_id: &str, hook_id: &str) -> Vec<u8> {
        let mut out = Vec::new();
        put_str16(&mut out, source_id);
        put_str16(&mut out, hook_id);
        out
    }
    pub fn decode_v2(b: &[u8]) -> Result<(String, String), DecodeError> {
        let mut r = Reader::new(b, "format 2 dead value");
        let s = r.str16()?;
        let h = r.str16()?;
        r.finish()?;
        Ok((s, h))
    }
}

/// `a` value in format 3: `size:u32 ord:u32` (format 2: `size:u32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveValue {
    pub size: u32,
    pub ord: u32,
}

impl ArchiveValue {
    pub fn encode(&self) -> [u8; 8] {
        let mut out = [0u8; 8];
        out[..4].copy_from_slice(&self.size.to_be_bytes());
        out[4..].copy_from_slice(&self.ord.to_be_bytes());
        out
    }
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(b, "archive value");
        let size = r.u32()?;
        let ord = r.u32()?;
        r.finish()?;
        Ok(Self { size, ord })
    }
}

/// The `u` (dedupe) value: the original hook's seq and when the entry
/// expires. The expiry is kept so a sweep of an old `e` key never deletes a
/// newer dedupe entry for the same key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DedupeValue {
    pub seq: u64,
    pub expires_at: u64,
}

impl DedupeValue {
    pub fn encode(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.seq.to_be_bytes());
        out[8..].copy_from_slice(&self.expires_at.to_be_bytes());
        out
    }
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(b, "dedupe value");
        let seq = r.u64()?;
        let expires_at = r.u64()?;
        r.finish()?;
        Ok(Self { seq, expires_at })
    }
}

/// A hook's handle in its node's store: its seq. Deriving the public id
/// from the seq makes replay-by-id a point read, with no id index to keep.
///
/// The public id ([`HookId::public`]) carries the node, so ids are unique
/// across a fleet: `hk_<node>_<16 hex digits of the seq>`. A hook the store
/// held before it had a node identity keeps the form it was given then,
/// `hk_<16 hex digits>`, and that form still names this node's seq.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HookId(pub u64);

/// A hook id as written, before it is checked against a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedHookId<'a> {
    /// The node named in the id; `None` for the old form.
    pub node: Option<&'a str>,
    pub hook: HookId,
}

/// Why a hook id does not name a hook of this node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookIdError {
    #[error(transparent)]
    Malformed(#[from] DecodeError),
    /// Well formed, minted by another node: its hook is in that node's
    /// store, never in this one.
    #[error("{id} belongs to node {owner}{}; ask that node", here.as_ref().map(|h| format!(", not to this node ({h})")).unwrap_or_default())]
    OtherNode {
        id: String,
        owner: String,
        here: Option<String>,
    },
}

impl HookId {
    /// The id clients, sinks and operators see for this hook on the node
    /// `node` (the store's [`crate::Store::node`]).
    pub fn public(self, node: Option<&crate::node_id::NodeIdentity>) -> String {
        match node {
            Some(n) if self.0 >= n.since_seq => format!("hk_{}_{:016x}", n.id, self.0),
            _ => format!("hk_{:016x}", self.0),
        }
    }

    /// Reads either form, without checking the node.
    pub fn parse(s: &str) -> Result<ParsedHookId<'_>, DecodeError> {
        let rest = s
            .strip_prefix("hk_")
            .ok_or_else(|| DecodeError::new("hook id", "must start with hk_"))?;
        let (node, hex) = match rest.rsplit_once('_') {
            Some((node, hex)) => {
                crate::node_id::NodeId::parse(node)
                    .map_err(|e| DecodeError::new("hook id", e.to_string()))?;
                (Some(node), hex)
            }
            None => (None, rest),
        };
        if hex.len() != 16 {
            return Err(DecodeError::new("hook id", "must end with 16 hex digits"));
        }
        // from_str_radix takes a leading '+', which is no hex digit.
        if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(DecodeError::new("hook id", "not hexadecimal"));
        }
        let seq = u64::from_str_radix(hex, 16)
            .map_err(|_| DecodeError::new("hook id", "not hexadecimal"))?;
        Ok(ParsedHookId {
            node,
            hook: HookId(seq),
        })
    }

    /// The hook `s` names on the node `node`: the old form always names
    /// this node's seq; the new form only when its node is this one.
    pub fn resolve(
        s: &str,
        node: Option<&crate::node_id::NodeIdentity>,
    ) -> Result<HookId, HookIdError> {
        let p = Self::parse(s)?;
        match (p.node, node) {
            (None, _) => Ok(p.hook),
            (Some(named), Some(here)) if named == here.id.as_str() => Ok(p.hook),
            (Some(named), here) => Err(HookIdError::OtherNode {
                id: s.to_owned(),
                owner: named.to_owned(),
                here: here.map(|h| h.id.to_string()),
            }),
        }
    }
}

/// A hook as accepted: the `hooks` family value.
///
/// Layout (version 1): `1:u8 received_at:u64 source:str16 tenant:str16
/// has_key:u8 [idempotency_key:str16] n_headers:u16 (name:str16
/// value:bytes16)* body:bytes32`.
///
/// Version 2 is version 1 with `event_type:str16` after the idempotency
/// key: written only for a hook that has a type (its source routes by event
/// type), so a store that never routes holds version 1 only and an older
/// binary reads it all. An older binary refuses a version 2 hook as
/// undecodable (docs/storage.md, "Hook envelope").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub received_at: u64,
    pub source_id: String,
    pub tenant: String,
    pub idempotency_key: Option<String>,
    /// The hook's event type, when its source says where to find one and
    /// the request had it (`invoice.paid`).
    pub event_type: Option<String>,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

const ENVELOPE_V1: u8 = 1;
const ENVELOPE_V2: u8 = 2;

impl Envelope {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.body.len());
        out.push(if self.event_type.is_some() {
            ENVELOPE_V2
        } else {
            ENVELOPE_V1
        });
        out.extend_from_slice(&self.received_at.to_be_bytes());
        put_str16(&mut out, &self.source_id);
        put_str16(&mut out, &self.tenant);
        match &self.idempotency_key {
            Some(k) => {
                out.push(1);
                put_str16(&mut out, k);
            }
            None => out.push(0),
        }
        if let Some(t) = &self.event_type {
            put_str16(&mut out, t);
        }
        let n = self.headers.len().min(u16::MAX as usize);
        out.extend_from_slice(&(n as u16).to_be_bytes());
        for (name, value) in self.headers.iter().take(n) {
            put_str16(&mut out, name);
            put_bytes16(&mut out, value);
        }
        put_bytes32(&mut out, &self.body);
        out
    }

    /// The version byte, refused unless known.
    fn version(r: &mut Reader<'_>) -> Result<u8, DecodeError> {
        match r.u8()? {
            v @ (ENVELOPE_V1 | ENVELOPE_V2) => Ok(v),
            v => Err(DecodeError::new(
                "hook envelope",
                format!("unknown version {v}"),
            )),
        }
    }

    /// The source id alone: what a pause check needs, without copying the
    /// headers and body.
    pub fn decode_source(b: &[u8]) -> Result<String, DecodeError> {
        let mut r = Reader::new(b, "hook envelope");
        Self::version(&mut r)?;
        r.u64()?;
        r.str16()
    }

    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(b, "hook envelope");
        let v = Self::version(&mut r)?;
        let received_at = r.u64()?;
        let source_id = r.str16()?;
        let tenant = r.str16()?;
        let idempotency_key = match r.u8()? {
            0 => None,
            1 => Some(r.str16()?),
            other => {
                return Err(DecodeError::new(
                    "hook envelope",
                    format!("bad idempotency flag {other}"),
                ))
            }
        };
        let event_type = if v == ENVELOPE_V2 {
            Some(r.str16()?)
        } else {
            None
        };
        let n = r.u16()?;
        let mut headers = Vec::with_capacity(n.min(64) as usize);
        for _ in 0..n {
            let name = r.str16()?;
            let value = r.bytes16()?.to_vec();
            headers.push((name, value));
        }
        let body = r.bytes32()?.to_vec();
        r.finish()?;
        Ok(Self {
            received_at,
            source_id,
            tenant,
            idempotency_key,
            event_type,
            headers,
            body,
        })
    }

    /// Reads only the tenant field: the migration needs nothing else of a
    /// hook and should not copy its body.
    pub fn decode_tenant(b: &[u8]) -> Result<String, DecodeError> {
        let mut r = Reader::new(b, "hook envelope");
        Self::version(&mut r)?;
        r.u64()?;
        r.bytes16()?;
        r.str16()
    }

    /// Size charged to the tenant's `bytes` counter for each delivery row.
    pub fn charged_size(&self) -> u32 {
        u32::try_from(self.body.len()).unwrap_or(u32::MAX)
    }
}

/// One delivery attempt kept on the delivery row for the DLQ detail view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub at: u64,
    /// HTTP status, or 0 when no response came (timeout, refused...).
    pub status: u16,
    pub error: String,
}

/// The `deliveries` family value: what the dispatcher knows about one
/// (hook, sink) beyond its index key.
///
/// Layout (version 1): `1:u8 ord:u32 size:u32 attempts:u16 n:u8
/// (at:u64 status:u16 error:str16)*`. The history keeps the last
/// [`DeliveryRow::HISTORY`] attempts, errors cut to [`DeliveryRow::ERROR_MAX`]
/// bytes, so a row never grows without bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRow {
    pub ord: u32,
    pub size: u32,
    pub attempts: u16,
    pub history: Vec<Attempt>,
}

const DELIVERY_V1: u8 = 1;

impl DeliveryRow {
    pub const HISTORY: usize = 8;
    pub const ERROR_MAX: usize = 200;

    pub fn new(ord: u32, size: u32) -> Self {
        Self {
            ord,
            size,
            attempts: 0,
            history: Vec::new(),
        }
    }

    /// Appends an entry to the history without counting an attempt (the
    /// migration's note of a dead-letter time the old release did not keep),
    /// keeping the history bounded.
    pub fn note(&mut self, at: u64, status: u16, error: &str) {
        let attempts = self.attempts;
        self.record(at, status, error);
        self.attempts = attempts;
    }

    /// Records an attempt, keeping the history bounded.
    pub fn record(&mut self, at: u64, status: u16, error: &str) {
        self.attempts = self.attempts.saturating_add(1);
        self.history.push(Attempt {
            at,
            status,
            error: truncate_utf8(error, Self::ERROR_MAX).to_owned(),
        });
        if self.history.len() > Self::HISTORY {
            let drop = self.history.len() - Self::HISTORY;
            self.history.drain(..drop);
        }
    }

    pub fn last(&self) -> Option<&Attempt> {
        self.history.last()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(12 + self.history.len() * 24);
        out.push(DELIVERY_V1);
        out.extend_from_slice(&self.ord.to_be_bytes());
        out.extend_from_slice(&self.size.to_be_bytes());
        out.extend_from_slice(&self.attempts.to_be_bytes());
        let n = self.history.len().min(u8::MAX as usize);
        out.push(n as u8);
        for a in self.history.iter().skip(self.history.len() - n) {
            out.extend_from_slice(&a.at.to_be_bytes());
            out.extend_from_slice(&a.status.to_be_bytes());
            put_str16(&mut out, &a.error);
        }
        out
    }

    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(b, "delivery row");
        let v = r.u8()?;
        if v != DELIVERY_V1 {
            return Err(DecodeError::new(
                "delivery row",
                format!("unknown version {v}"),
            ));
        }
        let ord = r.u32()?;
        let size = r.u32()?;
        let attempts = r.u16()?;
        let n = r.u8()?;
        let mut history = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let at = r.u64()?;
            let status = r.u16()?;
            let error = r.str16()?;
            history.push(Attempt { at, status, error });
        }
        r.finish()?;
        Ok(Self {
            ord,
            size,
            attempts,
            history,
        })
    }
}

/// Format 2 delivery rows carried no ordinal: `1:u8 size:u32 attempts:u16`
/// and the same history. Only fixtures and the migration touch them.
pub mod v2 {
    use super::*;

    pub fn encode_delivery(size: u32, attempts: u16, history: &[Attempt]) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + history.len() * 24);
        out.push(DELIVERY_V1);
        out.extend_from_slice(&size.to_be_bytes());
        out.extend_from_slice(&attempts.to_be_bytes());
        let n = history.len().min(u8::MAX as usize);
        out.push(n as u8);
        for a in &history[history.len() - n..] {
            out.extend_from_slice(&a.at.to_be_bytes());
            out.extend_from_slice(&a.status.to_be_bytes());
            put_str16(&mut out, &a.error);
        }
        out
    }

    /// `(size, attempts)`, skipping the history (what the migration's
    /// lookup keeps per row).
    pub fn decode_delivery(b: &[u8]) -> Result<(u32, u16), DecodeError> {
        decode_delivery_full(b).map(|(size, attempts, _)| (size, attempts))
    }

    /// `(size, attempts, history)`.
    pub fn decode_delivery_full(b: &[u8]) -> Result<(u32, u16, Vec<Attempt>), DecodeError> {
        let mut r = Reader::new(b, "format 2 delivery row");
        r.expect_u8(DELIVERY_V1)?;
        let size = r.u32()?;
        let attempts = r.u16()?;
        let n = r.u8()?;
        let mut history = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let at = r.u64()?;
            let status = r.u16()?;
            let error = r.str16()?;
            history.push(Attempt { at, status, error });
        }
        r.finish()?;
        Ok((size, attempts, history))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn envelope() -> impl Strategy<Value = Envelope> {
        (
            any::<u64>(),
            "[a-z]{1,10}",
            "[a-z0-9]{1,20}",
            proptest::option::of("[ -~]{1,30}"),
            proptest::option::of("[!-~]{1,40}"),
            proptest::collection::vec(
                (
                    "[a-z-]{1,12}",
                    proptest::collection::vec(any::<u8>(), 0..20),
                ),
                0..4,
            ),
            proptest::collection::vec(any::<u8>(), 0..200),
        )
            .prop_map(
                |(received_at, source_id, tenant, idempotency_key, event_type, headers, body)| {
                    Envelope {
                        received_at,
                        source_id,
                        tenant,
                        idempotency_key,
                        event_type,
                        headers,
                        body,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn envelope_round_trips(e in envelope()) {
            // Version 2 only for a typed hook: a store that never routes
            // stays readable by a binary that knows version 1 only.
            prop_assert_eq!(e.encode()[0], if e.event_type.is_some() { 2 } else { 1 });
            prop_assert_eq!(Envelope::decode_source(&e.encode()).unwrap(), e.source_id.clone());
            prop_assert_eq!(Envelope::decode_tenant(&e.encode()).unwrap(), e.tenant.clone());
            prop_assert_eq!(Envelope::decode(&e.encode()).unwrap(), e);
        }

        #[test]
        fn delivery_row_round_trips(ord: u32, size: u32, attempts in proptest::collection::vec((any::<u64>(), any::<u16>(), "[ -~]{0,300}"), 0..12)) {
            let mut row = DeliveryRow::new(ord, size);
            for (at, st, err) in &attempts {
                row.record(*at, *st, err);
            }
            prop_assert!(row.history.len() <= DeliveryRow::HISTORY);
            prop_assert_eq!(DeliveryRow::decode(&row.encode()).unwrap(), row);
        }

        #[test]
        fn small_values_round_trip(size: u32, ord: u32, seq: u64, exp: u64, retry: bool, s in "[a-z]{0,10}", h in "[a-z0-9_]{0,20}") {
            let kind = if retry { Kind::Retry } else { Kind::First };
            let d = DueValue { size, kind };
            prop_assert_eq!(DueValue::decode(&d.encode()).unwrap(), d);
            prop_assert_eq!(decode_size(&encode_size(size)).unwrap(), size);
            let x = DeadValue { source_id: s.clone(), hook_id: h.clone(), ord, event_type: None };
            prop_assert_eq!(DeadValue::decode(&x.encode()).unwrap(), x);
            prop_assert_eq!(DeadValue::decode_v2(&DeadValue::encode_v2(&s, &h)).unwrap(), (s, h));
            let a = ArchiveValue { size, ord };
            prop_assert_eq!(ArchiveValue::decode(&a.encode()).unwrap(), a);
            let u = DedupeValue { seq, expires_at: exp };
            prop_assert_eq!(DedupeValue::decode(&u.encode()).unwrap(), u);
            let node = crate::node_id::NodeIdentity { id: crate::NodeId::parse("n-1").unwrap(), since_seq: 0 };
            prop_assert_eq!(HookId::resolve(&HookId(seq).public(Some(&node)), Some(&node)).unwrap(), HookId(seq));
            prop_assert_eq!(HookId::resolve(&HookId(seq).public(None), Some(&node)).unwrap(), HookId(seq));
            prop_assert_eq!(HookId::resolve(&HookId(seq).public(None), None).unwrap(), HookId(seq));
            prop_assert_eq!(v2::decode_delivery(&v2::encode_delivery(size, 3, &[])).unwrap(), (size, 3));
        }

        #[test]
        fn hook_ids_are_unique_across_nodes(seq: u64, a in "[a-z0-9]{1,8}", b in "[a-z0-9]{1,8}") {
            prop_assume!(a != b);
            let na = crate::node_id::NodeIdentity { id: crate::NodeId::parse(&a).unwrap(), since_seq: 0 };
            let nb = crate::node_id::NodeIdentity { id: crate::NodeId::parse(&b).unwrap(), since_seq: 0 };
            prop_assert_ne!(HookId(seq).public(Some(&na)), HookId(seq).public(Some(&nb)));
            let refused = HookId::resolve(&HookId(seq).public(Some(&na)), Some(&nb));
            let owner = match refused {
                Err(HookIdError::OtherNode { owner, .. }) => owner,
                other => return Err(TestCaseError::fail(format!("{other:?}"))),
            };
            prop_assert_eq!(owner, a);
        }

        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Envelope::decode(&b);
            let _ = DeliveryRow::decode(&b);
            let _ = DueValue::decode(&b);
            let _ = DeadValue::decode(&b);
            let _ = ArchiveValue::decode(&b);
            let _ = DedupeValue::decode(&b);
            let _ = v2::decode_delivery(&b);
            let _ = decode_size(&b);
            let _ = HookId::parse(&String::from_utf8_lossy(&b));
        }
    }

    #[test]
    fn truncated_envelope_is_an_error() {
        let e = Envelope {
            received_at: 1,
            source_id: "s".into(),
            tenant: "t".into(),
            idempotency_key: None,
            event_type: None,
            headers: vec![],
            body: b"hello".to_vec(),
        };
        let bytes = e.encode();
        for cut in 0..bytes.len() {
            assert!(Envelope::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }
}

#[cfg(test)]
mod hook_id_tests {
    use super::*;
    use crate::node_id::{NodeId, NodeIdentity};

    fn node(id: &str, since_seq: u64) -> NodeIdentity {
        NodeIdentity {
            id: NodeId::parse(id).unwrap(),
            since_seq,
        }
    }

    #[test]
    fn a_hook_id_carries_its_node_from_the_identity_on() {
        let n = node("eu-1", 10);
        assert_eq!(HookId(9).public(Some(&n)), "hk_0000000000000009");
        assert_eq!(HookId(10).public(Some(&n)), "hk_eu-1_000000000000000a");
        assert_eq!(HookId(10).public(None), "hk_000000000000000a");
    }

    #[test]
    fn old_ids_still_name_this_nodes_hooks_and_other_nodes_are_named() {
        let n = node("eu-1", 10);
        assert_eq!(
            HookId::resolve("hk_0000000000000009", Some(&n)),
            Ok(HookId(9))
        );
        assert_eq!(
            HookId::resolve("hk_eu-1_0000000000000009", Some(&n)),
            Ok(HookId(9))
        );
        let e = HookId::resolve("hk_us-2_0000000000000009", Some(&n)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "hk_us-2_0000000000000009 belongs to node us-2, not to this node (eu-1); ask that node"
        );
        assert!(matches!(
            HookId::resolve("hk_us-2_0000000000000009", None),
            Err(HookIdError::OtherNode { .. })
        ));
        for bad in [
            "hk_EU_0000000000000009",
            "hk__0000000000000009",
            "hk_eu-1_000000000000009",
            "hk_eu-1_+000000000000009",
            "hk_a_b_0000000000000009",
            "0000000000000009",
        ] {
            assert!(
                matches!(
                    HookId::resolve(bad, Some(&n)),
                    Err(HookIdError::Malformed(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_node_id_is_short_lowercase_letters_digits_and_dashes() {
        for good in ["a", "eu-west-1", "n0", &"x".repeat(32)] {
            assert!(NodeId::parse(good).is_ok(), "{good}");
        }
        for bad in ["", "EU", "eu_1", "-a", "a-", "é", "a b", &"x".repeat(33)] {
            assert!(NodeId::parse(bad).is_err(), "{bad}");
        }
    }
}
