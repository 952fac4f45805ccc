//! Purge: a row or a whole tenant's rows removed for good, by kind (due,
//! dead), in bounded chunks a job resumes from a cursor. A row that does
//! not decode is quarantined rather than dropped unread.

use super::{delete_dead, delete_due, drop_delivery, enc, quarantine_due, CHUNK, VISIT_MAX};
use crate::batch::Batch;
use crate::error::Result;
use crate::keys::{bounds, delivery_key, prefix, DueKey};
use crate::quarantine::Undecodable;
use crate::rows::{DeadRow, DueRow};
use crate::schema::Family;
use crate::store::{Dir, Store};
use crate::values::{DeadValue, DeliveryRow, Kind};
use std::ops::ControlFlow;

/// Removes a due row and its delivery row (a purge).
pub fn purge_due(b: &mut Batch, row: &DueRow) {
    delete_due(b, row);
    drop_delivery(b, row.ord, row.seq, row.sink, row.size);
}

/// Removes a dead row and its delivery row (a purge). `size` is the
/// delivery row's.
pub fn purge_dead(b: &mut Batch, dead: &DeadRow, size: u32) {
    delete_dead(b, dead);
    drop_delivery(b, dead.ord, dead.seq, dead.sink, size);
}

/// Which of a tenant's rows a purge removes. Inflight rows are never purged:
/// their delivery is under way and its outcome will be recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PurgeKinds {
    /// Due rows, first attempts and retries alike.
    pub pending: bool,
    pub dead: bool,
}

/// Rows removed by a purge (so far).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PurgeCount {
    pub pending: u64,
    pub scheduled: u64,
    pub dead: u64,
}

impl PurgeCount {
    pub fn total(&self) -> u64 {
        self.pending + self.scheduled + self.dead
    }
    fn add(&mut self, o: PurgeCount) {
        self.pending += o.pending;
        self.scheduled += o.scheduled;
        self.dead += o.dead;
    }
}

/// One chunk of a tenant purge: at most [`CHUNK`] rows, one synced commit.
/// Returns what it removed and whether the tenant has nothing left of the
/// requested kinds. Idempotent: calling it again after a crash resumes.
pub fn purge_tenant_step(store: &Store, ord: u32, kinds: PurgeKinds) -> Result<(PurgeCount, bool)> {
    let mut from_start = PurgeCursor::default();
    purge_tenant_chunk(
        store,
        ord,
        kinds,
        u64::MAX,
        &mut from_start,
        |_, _, _, _| {},
    )
}

/// Where a purge has got to in the tenant's due (`D`) and dead (`X`)
/// ranges. The next chunk seeks past the last key it visited instead of
/// stepping again over the tombstones of every row purged so far, which
/// would make a large purge quadratic. A row that becomes due (or dead)
/// behind the cursor after the purge passed is kept: it was inflight, or
/// of the other kind, when the purge went by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgeCursor {
    /// The last due key visited (`at`, `seq`, `sink`).
    pub due_after: Option<(u64, u64, u16)>,
    pub due_done: bool,
    /// The last dead key visited (`at`, `seq`, `sink`).
    pub dead_after: Option<(u64, u64, u16)>,
    pub dead_done: bool,
}

/// A tenant range's scan start: its beginning, or just past `after`.
fn resume_at(p: u8, ord: u32, after: Option<(u64, u64, u16)>) -> Vec<u8> {
    match after {
        Some((at, seq, sink)) => {
            let mut k = bounds::tenant_full(p, ord, at, seq, sink);
            k.push(0);
            k
        }
        None => bounds::tenant(p, ord).0,
    }
}

/// One chunk of a tenant purge that leaves hooks newer than `max_seq`
/// alone, so a purge of a tenant that keeps receiving hooks ends, and
/// continues from `cursor` (advanced only when the chunk commits). `extra`
/// adds to the chunk's batch before it commits (a job's progress record),
/// given what the chunk removes, the cursor after it, and whether it is the
/// last.
pub fn purge_tenant_chunk(
    store: &Store,
    ord: u32,
    kinds: PurgeKinds,
    max_seq: u64,
    cursor: &mut PurgeCursor,
    extra: impl FnOnce(&mut Batch, &PurgeCount, &PurgeCursor, bool),
) -> Result<(PurgeCount, bool)> {
    store.require_writable()?;
    let mut b = Batch::new();
    let mut n = PurgeCount::default();
    let mut next = *cursor;
    let mut taken = 0usize;
    if kinds.pending && !next.due_done {
        let lo = resume_at(prefix::DUE, ord, next.due_after);
        let (_, hi) = bounds::tenant(prefix::DUE, ord);
        let mut stopped = false;
        let mut visited = 0usize;
        store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
            if taken >= CHUNK || visited >= VISIT_MAX {
                stopped = true;
                return Ok(ControlFlow::Break(()));
            }
            visited += 1;
            let row = match DueRow::decode(k, v) {
                Ok(r) => r,
                Err(error) => {
                    // A bad row must not stop the purge (it would stop at it
                    // on every retry): it goes to the quarantine in this
                    // chunk's batch. The time is only the record's note.
                    let bad = Undecodable {
                        key: k.to_vec(),
                        value: v.to_vec(),
                        error,
                    };
                    let size = crate::quarantine::delivery_of(k)
                        .and_then(|(seq, sink)| crate::queries::delivery(store, seq, sink).ok())
                        .flatten()
                        .map(|d| d.size);
                    quarantine_due(&mut b, &bad, size, crate::clock::system_now_ms());
                    if let Ok(key) = DueKey::decode(k) {
                        next.due_after = Some((key.at, key.seq, key.sink));
                    }
                    return Ok(ControlFlow::Continue(()));
                }
            };
            next.due_after = Some((row.at, row.seq, row.sink));
            if row.seq > max_seq {
                return Ok(ControlFlow::Continue(()));
            }
            purge_due(&mut b, &row);
            match row.kind {
                Kind::First => n.pending += 1,
                Kind::Retry => n.scheduled += 1,
            }
            taken += 1;
            Ok(ControlFlow::Continue(()))
        })?;
        next.due_done = !stopped;
    }
    if kinds.dead && !next.dead_done && taken < CHUNK {
        let want = CHUNK - taken;
        let (dead, last, end) =
            crate::queries::dead_keys_of_tenant(store, ord, max_seq, next.dead_after, want)?;
        if let Some(last) = last {
            next.dead_after = Some(last);
        }
        next.dead_done = end;
        if !dead.is_empty() {
            let xkeys: Vec<Vec<u8>> = dead.iter().map(|k| enc::dead(&k.dead_key())).collect();
            let values = store.multi_get(Family::Index, &xkeys)?;
            let dkeys: Vec<Vec<u8>> = dead
                .iter()
                .map(|k| delivery_key(k.seq, k.sink).to_vec())
                .collect();
            let drows = store.multi_get(Family::Deliveries, &dkeys)?;
            for ((key, xv), dr) in dead.iter().zip(values).zip(drows) {
                let (source_id, hook_id) = match xv {
                    Some(v) => {
                        let v = DeadValue::decode(&v)?;
                        (v.source_id, v.hook_id)
                    }
                    None => (String::new(), String::new()),
                };
                let size = match dr {
                    Some(v) => DeliveryRow::decode(&v)?.size,
                    None => 0,
                };
                let row = DeadRow::from_parts(
                    key,
                    DeadValue {
                        source_id,
                        hook_id,
                        ord,
                        event_type: None,
                    },
                    store.node(),
                );
                purge_dead(&mut b, &row, size);
                n.dead += 1;
            }
        }
    }
    let done = (!kinds.pending || next.due_done) && (!kinds.dead || next.dead_done);
    extra(&mut b, &n, &next, done);
    store.commit(b, true)?;
    *cursor = next;
    Ok((n, done))
}

/// Purges a tenant's rows of the given kinds in chunks, reporting progress
/// after each chunk.
pub fn purge_tenant(
    store: &Store,
    ord: u32,
    kinds: PurgeKinds,
    mut progress: impl FnMut(&PurgeCount),
) -> Result<PurgeCount> {
    let mut total = PurgeCount::default();
    let mut cursor = PurgeCursor::default();
    loop {
        let (n, done) =
            purge_tenant_chunk(store, ord, kinds, u64::MAX, &mut cursor, |_, _, _, _| {})?;
        total.add(n);
        progress(&total);
        if done {
            return Ok(total);
        }
    }
}
