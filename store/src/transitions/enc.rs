//! The only encoders of `D`, `F`, `x`, `X`, `a`, `c` and `A` keys. Private to
//! `transitions`: Rust visibility, not review, keeps every other module from
//! writing an index row without its marker and counter deltas.

use crate::keys::{prefix, ActiveKey, DeadByTenantKey, DeadKey, DueKey, InflightKey};

pub(super) fn due(k: &DueKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(DueKey::LEN);
    out.push(prefix::DUE);
    out.extend_from_slice(&k.ord.to_be_bytes());
    out.extend_from_slice(&k.at.to_be_bytes());
    out.extend_from_slice(&k.seq.to_be_bytes());
    out.extend_from_slice(&k.sink.to_be_bytes());
    out
}

pub(super) fn inflight(k: &InflightKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(InflightKey::LEN);
    out.push(prefix::INFLIGHT);
    out.extend_from_slice(&k.ord.to_be_bytes());
    out.extend_from_slice(&k.seq.to_be_bytes());
    out.extend_from_slice(&k.sink.to_be_bytes());
    out
}

pub(super) fn dead(k: &DeadKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(DeadKey::LEN);
    out.push(prefix::DEAD);
    out.extend_from_slice(&k.at.to_be_bytes());
    out.extend_from_slice(&k.seq.to_be_bytes());
    out.extend_from_slice(&k.sink.to_be_bytes());
    out
}

pub(super) fn dead_by_tenant(k: &DeadByTenantKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(DeadByTenantKey::LEN);
    out.push(prefix::DEAD_BY_TENANT);
    out.extend_from_slice(&k.ord.to_be_bytes());
    out.extend_from_slice(&k.at.to_be_bytes());
    out.extend_from_slice(&k.seq.to_be_bytes());
    out.extend_from_slice(&k.sink.to_be_bytes());
    out
}

pub(super) fn active(k: &ActiveKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(ActiveKey::LEN);
    out.push(prefix::ACTIVE);
    out.extend_from_slice(&k.bucket.to_be_bytes());
    out.extend_from_slice(&k.ord.to_be_bytes());
    out
}

pub(super) fn seq_key(p: u8, seq: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(9);
    out.push(p);
    out.extend_from_slice(&seq.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::decode_seq_key;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn index_keys_round_trip(ord: u32, at: u64, seq: u64, sink: u16, bucket: u64) {
            let d = DueKey { ord, at, seq, sink };
            prop_assert_eq!(DueKey::decode(&due(&d)).unwrap(), d);
            let f = InflightKey { ord, seq, sink };
            prop_assert_eq!(InflightKey::decode(&inflight(&f)).unwrap(), f);
            let x = DeadKey { at, seq, sink };
            prop_assert_eq!(DeadKey::decode(&dead(&x)).unwrap(), x);
            let xx = DeadByTenantKey { ord, at, seq, sink };
            prop_assert_eq!(DeadByTenantKey::decode(&dead_by_tenant(&xx)).unwrap(), xx);
            let a = ActiveKey { bucket, ord };
            prop_assert_eq!(ActiveKey::decode(&active(&a)).unwrap(), a);
            prop_assert_eq!(decode_seq_key(&seq_key(prefix::ARCHIVE, seq), prefix::ARCHIVE, "a").unwrap(), seq);
        }

        #[test]
        fn due_keys_sort_by_tenant_then_time(a in (any::<u32>(), any::<u64>(), any::<u64>(), any::<u16>()), b in (any::<u32>(), any::<u64>(), any::<u64>(), any::<u16>())) {
            let ka = DueKey { ord: a.0, at: a.1, seq: a.2, sink: a.3 };
            let kb = DueKey { ord: b.0, at: b.1, seq: b.2, sink: b.3 };
            prop_assert_eq!(ka.cmp(&kb), due(&ka).cmp(&due(&kb)));
        }
    }
}
