//! Key layout of format 3 (and the format 2 keys the migration reads).
//!
//! This module decodes keys and builds *scan bounds*. It deliberately cannot
//! build a full due (`D`), inflight (`F`), dead-by-tenant (`X`) or active
//! (`A`) key: those encoders are private to [`crate::transitions`], so the
//! only way to write an index row is through a transition that also writes
//! its marker and its counter deltas.
//!
//! All integers are big-endian and fixed width so that byte order is numeric
//! order; `at` is milliseconds since the Unix epoch; an active bucket is
//! `at / 1000`.

use crate::codec::Reader;
use crate::error::DecodeError;

/// One-byte family prefixes inside the `index` column family.
pub mod prefix {
    pub const DUE: u8 = b'D';
    pub const INFLIGHT: u8 = b'F';
    pub const DEAD: u8 = b'x';
    pub const DEAD_BY_TENANT: u8 = b'X';
    pub const ARCHIVE: u8 = b'a';
    pub const ACTIVE: u8 = b'A';
    pub const CLEARED: u8 = b'c';
    pub const DEDUPE: u8 = b'u';
    pub const EXPIRY: u8 = b'e';
    /// Format 2 due rows (`d at seq sink`), read only by the migration.
    pub const V2_DUE: u8 = b'd';
    /// Format 2 inflight rows (`f seq sink`), read only by the migration.
    pub const V2_INFLIGHT: u8 = b'f';
    /// Quarantined index rows: `Q original_key` (see `quarantine`).
    pub const QUARANTINE: u8 = b'Q';
    /// Tenants family: ordinal -> tenant id.
    pub const TENANT_BY_ORD: u8 = b't';
    /// Tenants family: tenant id -> ordinal.
    pub const ORD_BY_TENANT: u8 = b'n';
}

/// Keys of the `default` (meta) family.
pub mod meta {
    pub const FORMAT: &[u8] = b"m:format";
    pub const NEXT_ORD: &[u8] = b"m:next_ord";
    pub const NEXT_SEQ: &[u8] = b"m:next_seq";
    pub const MIGRATING_3: &[u8] = b"m:migrating:3";
    /// Present while the node drains ([`crate::node`]).
    pub const DRAIN: &[u8] = b"m:drain";
    /// The node's identity in the fleet ([`crate::node_id`], read and recorded by [`crate::node`]).
    pub const NODE: &[u8] = b"m:node";
    /// Put and deleted in one batch by [`crate::Store::probe_write`]: never
    /// stored.
    pub const PROBE: &[u8] = b"m:probe";
    /// Present once the rows waiting per sink are counted
    /// ([`crate::sinks::waiting`]): put when a store is created, or by the
    /// first recount on a store an earlier release wrote.
    pub const WAITING_COUNTED: &[u8] = b"m:waiting_counted";
    /// Keys under this prefix record where a replica is in the replicated
    /// log ([`crate::replicate`]), not what the store holds.
    pub const REPLICATION_PREFIX: &[u8] = b"m:raft:";
}

/// The active-index bucket of a due time: whole seconds since the epoch.
pub fn bucket_of(at_ms: u64) -> u64 {
    at_ms / 1000
}

/// `D ord at seq sink`: a due row (first attempt or retry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DueKey {
    pub ord: u32,
    pub at: u64,
    pub seq: u64,
    pub sink: u16,
}

/// `F ord seq sink`: a row being delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InflightKey {
    pub ord: u32,
    pub seq: u64,
    pub sink: u16,
}

/// `x at seq sink`: a dead row in node-wide time order (the DLQ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeadKey {
    pub at: u64,
    pub seq: u64,
    pub sink: u16,
}

/// `X ord at seq sink`: the by-tenant companion of a dead row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeadByTenantKey {
    pub ord: u32,
    pub at: u64,
    pub seq: u64,
    pub sink: u16,
}

/// `A bucket ord`: "tenant `ord` has a due row in second `bucket`".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ActiveKey {
    pub bucket: u64,
    pub ord: u32,
}

/// Format 2 `d at seq sink`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct V2DueKey {
    pub at: u64,
    pub seq: u64,
    pub sink: u16,
}

/// Format 2 `f seq sink`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct V2InflightKey {
    pub seq: u64,
    pub sink: u16,
}

fn header(r: &mut Reader<'_>, want: u8) -> Result<(), DecodeError> {
    r.expect_u8(want)
}

impl DueKey {
    pub const LEN: usize = 23;
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(b, "due key");
        header(&mut r, prefix::DUE)?;
        let k = Self {
            ord: r.u32()?,
            at: r.u64()?,
            seq: r.u64()?,
            sink: r.u16()?,
        };
        r.finish()?;
        Ok(k)
    }
}

impl InflightKey {
    pub const LEN: usize = 15;
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(b, "inflight key");
        header(&mut r, prefix::INFLIGHT)?;
        let k = Self {
            ord: r.u32()?,
            seq: r.u64()?,
            sink: r.u16()?,
        };
        r.finish()?;
        Ok(k)
    }
}

impl DeadKey {
    pub const LEN: usize = 19;
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(b, "dead key");
        header(&mut r, prefix::DEAD)?;
        let k = Self {
            at: r.u64()?,
            seq: r.u64()?,
            sink: r.u16()?,
        };
        r.finish()?;
        Ok(k)
    }
}

impl DeadByTenantKey {
    pub const LEN: usize = 23;
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(b, "dead-by-tenant key");
        header(&mut r, prefix::DEAD_BY_TENANT)?;
        let k = Self {
            ord: r.u32()?,
            at: r.u64()?,
            seq: r.u64()?,
            sink: r.u16()?,
        };
        r.finish()?;
        Ok(k)
    }
    pub fn dead_key(&self) -> DeadKey {
        DeadKey {
            at: self.at,
            seq: self.seq,
            sink: self.sink,
        }
    }
}

impl ActiveKey {
    pub const LEN: usize = 13;
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(b, "active key");
        header(&mut r, prefix::ACTIVE)?;
        let k = Self {
            bucket: r.u64()?,
            ord: r.u32()?,
        };
        r.finish()?;
        Ok(k)
    }
}

impl V2DueKey {
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(b, "format 2 due key");
        header(&mut r, prefix::V2_DUE)?;
        let k = Self {
            at: r.u64()?,
            seq: r.u64()?,
            sink: r.u16()?,
        };
        r.finish()?;
        Ok(k)
    }
    pub fn encode(&self) -> Vec<u8> {
        let mut k = Vec::with_capacity(19);
        k.push(prefix::V2_DUE);
        k.extend_from_slice(&self.at.to_be_bytes());
        k.extend_from_slice(&self.seq.to_be_bytes());
        k.extend_from_slice(&self.sink.to_be_bytes());
        k
    }
}

impl V2InflightKey {
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(b, "format 2 inflight key");
        header(&mut r, prefix::V2_INFLIGHT)?;
        let k = Self {
            seq: r.u64()?,
            sink: r.u16()?,
        };
        r.finish()?;
        Ok(k)
    }
    pub fn encode(&self) -> Vec<u8> {
        let mut k = Vec::with_capacity(11);
        k.push(prefix::V2_INFLIGHT);
        k.extend_from_slice(&self.seq.to_be_bytes());
        k.extend_from_slice(&self.sink.to_be_bytes());
        k
    }
}

/// `a seq` (archive obligation) and `c seq` (cleared: a delivery row of this
/// hook was removed, so reclaim should look at it).
pub fn decode_seq_key(b: &[u8], want: u8, what: &'static str) -> Result<u64, DecodeError> {
    let mut r = Reader::new(b, what);
    header(&mut r, want)?;
    let seq = r.u64()?;
    r.finish()?;
    Ok(seq)
}

/// `hooks` family key: the hook's commit sequence.
pub fn hook_key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

pub fn decode_hook_key(b: &[u8]) -> Result<u64, DecodeError> {
    let mut r = Reader::new(b, "hook key");
    let seq = r.u64()?;
    r.finish()?;
    Ok(seq)
}

/// `deliveries` family key: hook seq then sink index.
pub fn delivery_key(seq: u64, sink: u16) -> [u8; 10] {
    let mut k = [0u8; 10];
    k[..8].copy_from_slice(&seq.to_be_bytes());
    k[8..].copy_from_slice(&sink.to_be_bytes());
    k
}

pub fn decode_delivery_key(b: &[u8]) -> Result<(u64, u16), DecodeError> {
    let mut r = Reader::new(b, "delivery key");
    let seq = r.u64()?;
    let sink = r.u16()?;
    r.finish()?;
    Ok((seq, sink))
}

/// `t ord`.
pub fn tenant_by_ord_key(ord: u32) -> [u8; 5] {
    let mut k = [prefix::TENANT_BY_ORD, 0, 0, 0, 0];
    k[1..].copy_from_slice(&ord.to_be_bytes());
    k
}

pub fn decode_tenant_by_ord_key(b: &[u8]) -> Result<u32, DecodeError> {
    let mut r = Reader::new(b, "tenant-by-ordinal key");
    header(&mut r, prefix::TENANT_BY_ORD)?;
    let ord = r.u32()?;
    r.finish()?;
    Ok(ord)
}

/// `n tenant_id`.
pub fn ord_by_tenant_key(tenant: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + tenant.len());
    k.push(prefix::ORD_BY_TENANT);
    k.extend_from_slice(tenant.as_bytes());
    k
}

pub fn decode_ord_by_tenant_key(b: &[u8]) -> Result<String, DecodeError> {
    let mut r = Reader::new(b, "ordinal-by-tenant key");
    header(&mut r, prefix::ORD_BY_TENANT)?;
    std::str::from_utf8(r.rest())
        .map(str::to_owned)
        .map_err(|_| DecodeError::new("ordinal-by-tenant key", "tenant id is not UTF-8"))
}

/// `counters` family key: `ord field`.
pub fn counter_key(ord: u32, field: u8) -> [u8; 5] {
    let mut k = [0u8; 5];
    k[..4].copy_from_slice(&ord.to_be_bytes());
    k[4] = field;
    k
}

pub fn decode_counter_key(b: &[u8]) -> Result<(u32, u8), DecodeError> {
    let mut r = Reader::new(b, "counter key");
    let ord = r.u32()?;
    let field = r.u8()?;
    r.finish()?;
    Ok((ord, field))
}

/// Start of the `counters` family's per-sink keys: after every
/// `ord field` key (`[0xFF; 5]` at most), so the scans of the ordinals'
/// counters, which end at `[0xFF; 6]`, never reach them.
pub const SINK_COUNTER: [u8; 6] = [0xFF; 6];

/// `counters` family key of the rows waiting for one sink:
/// `0xFF{6} source:str16 sink:u16`.
pub fn sink_counter_key(source: &str, sink: u16) -> Vec<u8> {
    let mut k = Vec::with_capacity(SINK_COUNTER.len() + 4 + source.len());
    k.extend_from_slice(&SINK_COUNTER);
    crate::codec::put_str16(&mut k, source);
    k.extend_from_slice(&sink.to_be_bytes());
    k
}

pub fn decode_sink_counter_key(b: &[u8]) -> Result<(String, u16), DecodeError> {
    let rest = b
        .strip_prefix(&SINK_COUNTER[..])
        .ok_or_else(|| DecodeError::new("sink counter key", "missing 0xFF prefix"))?;
    let mut r = Reader::new(rest, "sink counter key");
    let source = r.str16()?;
    let sink = r.u16()?;
    r.finish()?;
    Ok((source, sink))
}

/// `u tenant 0x00 key`: the dedupe entry of an idempotency key.
pub fn dedupe_key(tenant: &str, key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + tenant.len() + key.len());
    k.push(prefix::DEDUPE);
    k.extend_from_slice(tenant.as_bytes());
    k.push(0);
    k.extend_from_slice(key.as_bytes());
    k
}

/// `e at tenant 0x00 key`: when the dedupe entry expires.
pub fn expiry_key(at: u64, tenant: &str, key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(10 + tenant.len() + key.len());
    k.push(prefix::EXPIRY);
    k.extend_from_slice(&at.to_be_bytes());
    k.extend_from_slice(tenant.as_bytes());
    k.push(0);
    k.extend_from_slice(key.as_bytes());
    k
}

/// Splits an expiry key into `(at, tenant, idempotency key)`.
pub fn decode_expiry_key(b: &[u8]) -> Result<(u64, String, String), DecodeError> {
    let mut r = Reader::new(b, "expiry key");
    header(&mut r, prefix::EXPIRY)?;
    let at = r.u64()?;
    let rest = r.rest();
    let nul = rest
        .iter()
        .position(|&c| c == 0)
        .ok_or_else(|| DecodeError::new("expiry key", "no NUL separator"))?;
    let tenant = std::str::from_utf8(&rest[..nul])
        .map_err(|_| DecodeError::new("expiry key", "tenant is not UTF-8"))?;
    let key = std::str::from_utf8(&rest[nul + 1..])
        .map_err(|_| DecodeError::new("expiry key", "idempotency key is not UTF-8"))?;
    Ok((at, tenant.to_owned(), key.to_owned()))
}

/// Scan bounds: `[lo, hi)` byte ranges. These are not keys and the write
/// path does not accept them as keys.
pub(crate) mod bounds {
    use super::prefix;

    /// Every key starting with `p`.
    pub fn family(p: u8) -> (Vec<u8>, Vec<u8>) {
        (vec![p], vec![p + 1])
    }

    /// Every key starting with `p ord`.
    pub fn tenant(p: u8, ord: u32) -> (Vec<u8>, Vec<u8>) {
        let mut lo = vec![p];
        lo.extend_from_slice(&ord.to_be_bytes());
        let hi = match ord.checked_add(1) {
            Some(next) => {
                let mut hi = vec![p];
                hi.extend_from_slice(&next.to_be_bytes());
                hi
            }
            None => vec![p + 1],
        };
        (lo, hi)
    }

    /// `p ord at` for seeking inside a tenant's time-ordered range.
    pub fn tenant_at(p: u8, ord: u32, at: u64) -> Vec<u8> {
        let mut k = vec![p];
        k.extend_from_slice(&ord.to_be_bytes());
        k.extend_from_slice(&at.to_be_bytes());
        k
    }

    /// The whole key `p ord at seq sink`, no byte appended. Callers resuming
    /// a forward scan push 0x00 themselves (the smallest key strictly above
    /// it); the reverse DLQ page uses it as it is, as the exclusive upper
    /// bound that stops just before the cursor's own row.
    pub fn tenant_full(p: u8, ord: u32, at: u64, seq: u64, sink: u16) -> Vec<u8> {
        let mut k = tenant_at(p, ord, at);
        k.extend_from_slice(&seq.to_be_bytes());
        k.extend_from_slice(&sink.to_be_bytes());
        k
    }

    /// `A` keys with bucket <= `bucket`.
    pub fn active_upto(bucket: u64) -> (Vec<u8>, Vec<u8>) {
        let lo = vec![prefix::ACTIVE];
        let hi = match bucket.checked_add(1) {
            Some(b) => {
                let mut hi = vec![prefix::ACTIVE];
                hi.extend_from_slice(&b.to_be_bytes());
                hi
            }
            None => vec![prefix::ACTIVE + 1],
        };
        (lo, hi)
    }

    /// `x at seq sink` as an exclusive upper bound for the next (older) DLQ page.
    pub fn dead_at(at: u64, seq: u64, sink: u16) -> Vec<u8> {
        let mut k = vec![prefix::DEAD];
        k.extend_from_slice(&at.to_be_bytes());
        k.extend_from_slice(&seq.to_be_bytes());
        k.extend_from_slice(&sink.to_be_bytes());
        k
    }

    /// `e` keys with `at` <= `now`.
    pub fn expiry_upto(now: u64) -> (Vec<u8>, Vec<u8>) {
        let lo = vec![prefix::EXPIRY];
        let mut hi = vec![prefix::EXPIRY];
        hi.extend_from_slice(&now.saturating_add(1).to_be_bytes());
        (lo, hi)
    }

    /// `deliveries` keys of one hook.
    pub fn deliveries_of(seq: u64) -> (Vec<u8>, Vec<u8>) {
        let lo = seq.to_be_bytes().to_vec();
        let hi = match seq.checked_add(1) {
            Some(n) => n.to_be_bytes().to_vec(),
            None => vec![0xFF; 11],
        };
        (lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = DueKey::decode(&b);
            let _ = InflightKey::decode(&b);
            let _ = DeadKey::decode(&b);
            let _ = DeadByTenantKey::decode(&b);
            let _ = ActiveKey::decode(&b);
            let _ = V2DueKey::decode(&b);
            let _ = V2InflightKey::decode(&b);
            let _ = decode_expiry_key(&b);
            let _ = decode_counter_key(&b);
            let _ = decode_delivery_key(&b);
            let _ = decode_ord_by_tenant_key(&b);
            let _ = decode_tenant_by_ord_key(&b);
        }

        #[test]
        fn v2_keys_round_trip(at: u64, seq: u64, sink: u16) {
            let d = V2DueKey { at, seq, sink };
            prop_assert_eq!(V2DueKey::decode(&d.encode()).unwrap(), d);
            let f = V2InflightKey { seq, sink };
            prop_assert_eq!(V2InflightKey::decode(&f.encode()).unwrap(), f);
        }

        #[test]
        fn plain_keys_round_trip(ord: u32, field: u8, seq: u64, sink: u16, tenant in "[a-z0-9_.-]{1,20}", key in "[ -~]{0,20}", at: u64) {
            prop_assert_eq!(decode_counter_key(&counter_key(ord, field)).unwrap(), (ord, field));
            prop_assert_eq!(decode_delivery_key(&delivery_key(seq, sink)).unwrap(), (seq, sink));
            prop_assert_eq!(decode_hook_key(&hook_key(seq)).unwrap(), seq);
            prop_assert_eq!(decode_tenant_by_ord_key(&tenant_by_ord_key(ord)).unwrap(), ord);
            prop_assert_eq!(decode_ord_by_tenant_key(&ord_by_tenant_key(&tenant)).unwrap(), tenant.clone());
            prop_assert_eq!(decode_expiry_key(&expiry_key(at, &tenant, &key)).unwrap(), (at, tenant, key));
        }

        #[test]
        fn byte_order_is_numeric_order(a: u64, b: u64) {
            prop_assert_eq!(a.cmp(&b), hook_key(a).cmp(&hook_key(b)));
        }
    }

    #[test]
    fn bounds_are_exclusive_of_the_next_tenant() {
        let (lo, hi) = bounds::tenant(prefix::DUE, 7);
        assert!(lo < bounds::tenant_at(prefix::DUE, 7, u64::MAX));
        assert!(bounds::tenant_at(prefix::DUE, 7, u64::MAX) < hi);
        assert!(hi <= bounds::tenant_at(prefix::DUE, 8, 0));
        let (_, hi) = bounds::tenant(prefix::DUE, u32::MAX);
        assert_eq!(hi, vec![prefix::DUE + 1]);
    }
}
