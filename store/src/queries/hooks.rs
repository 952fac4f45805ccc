//! "What is this hook": point reads of one hook's body, source, delivery
//! row, dedupe entry and archive obligations, by sequence number.

use crate::error::Result;
use crate::keys::{self, bounds, prefix};
use crate::schema::Family;
use crate::store::{Dir, Store};
use crate::values::{ArchiveValue, DedupeValue, DeliveryRow, Envelope};
use std::ops::ControlFlow;

/// A hook's envelope.
pub fn hook(store: &Store, seq: u64) -> Result<Option<Envelope>> {
    match store.get(Family::Hooks, &keys::hook_key(seq))? {
        Some(b) => Ok(Some(Envelope::decode(&b)?)),
        None => Ok(None),
    }
}

/// The source id of a hook (`None` once the hook is gone).
pub fn hook_source(store: &Store, seq: u64) -> Result<Option<String>> {
    match store.get(Family::Hooks, &keys::hook_key(seq))? {
        Some(b) => Ok(Some(Envelope::decode_source(&b)?)),
        None => Ok(None),
    }
}

/// A delivery row.
pub fn delivery(store: &Store, seq: u64, sink: u16) -> Result<Option<DeliveryRow>> {
    match store.get(Family::Deliveries, &keys::delivery_key(seq, sink))? {
        Some(b) => Ok(Some(DeliveryRow::decode(&b)?)),
        None => Ok(None),
    }
}

/// The live dedupe entry of an idempotency key at `now`, if any.
pub fn dedupe(store: &Store, tenant: &str, key: &str, now: u64) -> Result<Option<DedupeValue>> {
    store.fault("dedupe.read")?;
    match store.get(Family::Index, &keys::dedupe_key(tenant, key))? {
        Some(b) => {
            let v = DedupeValue::decode(&b)?;
            Ok((v.expires_at > now).then_some(v))
        }
        None => Ok(None),
    }
}

/// Unsettled archive obligations with `seq > after_seq` (all when `None`),
/// in seq order, at most `limit`: one bounded forward scan of the `a` keys.
/// The archiver resumes from the last seq it settled, so settled (deleted)
/// obligations behind it are never walked again.
pub fn archive_obligations(
    store: &Store,
    after_seq: Option<u64>,
    limit: usize,
) -> Result<Vec<(u64, ArchiveValue)>> {
    let (mut lo, hi) = bounds::family(prefix::ARCHIVE);
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    if let Some(after) = after_seq {
        // Nothing sorts after `a u64::MAX` inside the family.
        let Some(start) = after.checked_add(1) else {
            return Ok(out);
        };
        lo.extend_from_slice(&start.to_be_bytes());
    }
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
        let seq = keys::decode_seq_key(k, prefix::ARCHIVE, "archive key")?;
        out.push((seq, ArchiveValue::decode(v)?));
        Ok(if out.len() >= limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })?;
    Ok(out)
}
