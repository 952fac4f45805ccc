//! Quarantine: a row whose value does not decode is moved aside with what
//! could be read of it, its counts taken off only when they were counted,
//! so a bad row neither blocks its tenant nor vanishes unseen.

use super::{drop_delivery, pending_field};
use crate::batch::Batch;
use crate::counters::Field;
use crate::keys::DueKey;
use crate::quarantine::{Counted, QuarantinedRow, Undecodable};
use crate::schema::Family;
use crate::values::Kind;

/// Moves a row of the index family aside into the quarantine (see
/// [`crate::quarantine`]): deletes it, records it under `Q`, takes off the
/// counters what `counted` says it was counted as, and counts it.
fn quarantine(
    b: &mut Batch,
    key: &[u8],
    value: &[u8],
    reason: &str,
    ord: u32,
    counted: Counted,
    now: u64,
) -> QuarantinedRow {
    let row = QuarantinedRow {
        key: key.to_vec(),
        at: now,
        ord,
        counted,
        reason: reason.to_owned(),
        value: value.to_vec(),
    };
    b.delete(Family::Index, key.to_vec());
    b.put(Family::Index, row.q_key(), row.encode_value());
    if let Some(f) = counted.field {
        b.count(ord, f, -1);
    }
    b.count(ord, Field::Bytes, -i64::from(counted.size));
    b.count_quarantined(1);
    // Logged where every quarantine is made (dispatcher, purge, repair,
    // migration), with the key an operator passes to `store quarantine`.
    tracing::error!(
        key = %crate::quarantine::to_hex(key),
        ord,
        reason,
        "row does not decode: moved to the quarantine"
    );
    row
}

/// Quarantines a due row that does not decode. What it was counted as comes
/// from whatever part of it decodes: the ordinal from the key; the size from
/// the value, else `size_hint` (its delivery row's); the kind from the value,
/// else a first attempt. A key that is not a due key at all was never
/// counted, and nothing is taken off.
pub fn quarantine_due(
    b: &mut Batch,
    bad: &Undecodable,
    size_hint: Option<u32>,
    now: u64,
) -> QuarantinedRow {
    let reason = bad.error.to_string();
    let Ok(key) = DueKey::decode(&bad.key) else {
        let ord = bad
            .key
            .get(1..5)
            .and_then(|o| <[u8; 4]>::try_from(o).ok())
            .map_or(0, u32::from_be_bytes);
        let none = Counted {
            field: None,
            size: 0,
        };
        return quarantine(b, &bad.key, &bad.value, &reason, ord, none, now);
    };
    let (size, kind) = match <[u8; 5]>::try_from(bad.value.as_slice()) {
        Ok(v) => (
            u32::from_be_bytes([v[0], v[1], v[2], v[3]]),
            Kind::from_u8(v[4]).unwrap_or(Kind::First),
        ),
        Err(_) => (size_hint.unwrap_or(0), Kind::First),
    };
    let counted = Counted {
        field: Some(pending_field(kind)),
        size,
    };
    b.move_due(key.seq, key.sink, -1);
    quarantine(b, &bad.key, &bad.value, &reason, key.ord, counted, now)
}

/// Quarantines an old (format 2) row the migration cannot move: nothing was
/// counted for it yet.
pub(crate) fn quarantine_uncounted(
    b: &mut Batch,
    key: &[u8],
    value: &[u8],
    reason: &str,
    now: u64,
) -> QuarantinedRow {
    let none = Counted {
        field: None,
        size: 0,
    };
    quarantine(b, key, value, reason, 0, none, now)
}

/// Drops a quarantined row for good: its `Q` row, its count, and the
/// delivery row its key names (if any), so reclaim can collect the hook.
pub fn drop_quarantined(b: &mut Batch, row: &QuarantinedRow) {
    b.delete(Family::Index, row.q_key());
    b.count_quarantined(-1);
    if let Some((seq, sink)) = crate::quarantine::delivery_of(&row.key) {
        drop_delivery(b, row.ord, seq, sink, 0);
    }
}
