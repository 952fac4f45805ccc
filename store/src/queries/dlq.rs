//! "What is dead": pages of dead-lettered rows, the node's or a tenant's,
//! newest or oldest first, resumed from a [`DlqCursor`]; each page is one
//! bounded scan of the dead index joined to the dead rows.

use super::VISIT_MAX;
use crate::error::Result;
use crate::keys::{bounds, prefix, DeadByTenantKey, DeadKey};
use crate::rows::DeadRow;
use crate::schema::Family;
use crate::store::{Dir, Store};
use crate::values::DeadValue;
use std::ops::ControlFlow;

/// Where a DLQ page stopped; pass it back for the next (older) page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DlqCursor {
    pub at: u64,
    pub seq: u64,
    pub sink: u16,
}

impl DlqCursor {
    /// Text form `at.seq.sink` for command lines and URLs.
    pub fn encode(&self) -> String {
        format!("{}.{}.{}", self.at, self.seq, self.sink)
    }

    pub fn parse(s: &str) -> Option<Self> {
        let mut it = s.split('.');
        let at = it.next()?.parse().ok()?;
        let seq = it.next()?.parse().ok()?;
        let sink = it.next()?.parse().ok()?;
        if it.next().is_some() {
            return None;
        }
        Some(Self { at, seq, sink })
    }
}

/// A page of dead rows, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DlqPage {
    pub entries: Vec<DeadRow>,
    pub next: Option<DlqCursor>,
}

/// The node-wide DLQ, newest first, `limit` entries after `cursor`.
pub fn dlq_page(store: &Store, cursor: Option<DlqCursor>, limit: usize) -> Result<DlqPage> {
    node_page(store, Dir::Reverse, cursor, limit)
}

/// Which end of the DLQ a page starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DlqOrder {
    /// The default: what just failed.
    #[default]
    NewestFirst,
    /// What has waited longest.
    OldestFirst,
}

/// A DLQ page in either order: node-wide (`ord` None) or one tenant's (a
/// scan of its `X` range only). The cursor is the last row of the previous
/// page in the same order.
pub fn dlq_page_ordered(
    store: &Store,
    ord: Option<u32>,
    order: DlqOrder,
    cursor: Option<DlqCursor>,
    limit: usize,
) -> Result<DlqPage> {
    let dir = match order {
        DlqOrder::NewestFirst => Dir::Reverse,
        DlqOrder::OldestFirst => Dir::Forward,
    };
    match ord {
        Some(o) => tenant_page(store, o, dir, cursor, limit),
        None => node_page(store, dir, cursor, limit),
    }
}

/// The scan range of a page: the whole range, cut at the cursor's row
/// (`key`) on the side the walk continues from. A reverse walk ends just
/// before `key`; a forward one starts just after it (`key` and a 0 byte is
/// the smallest key above it).
fn page_range(lo: Vec<u8>, hi: Vec<u8>, dir: Dir, key: Option<Vec<u8>>) -> (Vec<u8>, Vec<u8>) {
    match (key, dir) {
        (None, _) => (lo, hi),
        (Some(k), Dir::Reverse) => (lo, k),
        (Some(mut k), Dir::Forward) => {
            k.push(0);
            (k, hi)
        }
    }
}

fn node_page(store: &Store, dir: Dir, cursor: Option<DlqCursor>, limit: usize) -> Result<DlqPage> {
    let (lo, hi) = bounds::family(prefix::DEAD);
    let key = cursor.map(|c| bounds::dead_at(c.at, c.seq, c.sink));
    let (lo, hi) = page_range(lo, hi, dir, key);
    let mut entries = Vec::new();
    let mut more = false;
    store.scan(Family::Index, &lo, &hi, dir, |k, v| {
        if entries.len() >= limit {
            more = true;
            return Ok(ControlFlow::Break(()));
        }
        entries.push(DeadRow::decode(k, v, store.node())?);
        Ok(ControlFlow::Continue(()))
    })?;
    let next = next_cursor(&entries, more);
    Ok(DlqPage { entries, next })
}

fn tenant_page(
    store: &Store,
    ord: u32,
    dir: Dir,
    cursor: Option<DlqCursor>,
    limit: usize,
) -> Result<DlqPage> {
    let (lo, hi) = bounds::tenant(prefix::DEAD_BY_TENANT, ord);
    let key = cursor.map(|c| bounds::tenant_full(prefix::DEAD_BY_TENANT, ord, c.at, c.seq, c.sink));
    let (lo, hi) = page_range(lo, hi, dir, key);
    let mut keys = Vec::new();
    let mut more = false;
    store.scan(Family::Index, &lo, &hi, dir, |k, _| {
        if keys.len() >= limit {
            more = true;
            return Ok(ControlFlow::Break(()));
        }
        keys.push(DeadByTenantKey::decode(k)?);
        Ok(ControlFlow::Continue(()))
    })?;
    let entries = join_dead(store, &keys)?;
    let next = next_cursor(&entries, more);
    Ok(DlqPage { entries, next })
}

fn next_cursor(entries: &[DeadRow], more: bool) -> Option<DlqCursor> {
    if !more {
        return None;
    }
    entries.last().map(|e| DlqCursor {
        at: e.at,
        seq: e.seq,
        sink: e.sink,
    })
}

/// One tenant's DLQ, newest first: a reverse scan of its `X` range joined
/// to the `x` values by key. No hook is read.
pub fn dlq_page_for_tenant(
    store: &Store,
    ord: u32,
    cursor: Option<DlqCursor>,
    limit: usize,
) -> Result<DlqPage> {
    tenant_page(store, ord, Dir::Reverse, cursor, limit)
}

fn join_dead(store: &Store, keys: &[DeadByTenantKey]) -> Result<Vec<DeadRow>> {
    let xkeys: Vec<Vec<u8>> = keys
        .iter()
        .map(|k| bounds::dead_at(k.at, k.seq, k.sink))
        .collect();
    let values = store.multi_get(Family::Index, &xkeys)?;
    let mut out = Vec::with_capacity(keys.len());
    for (k, v) in keys.iter().zip(values) {
        let val = match v {
            Some(v) => DeadValue::decode(&v)?,
            // A missing x value is a broken pair that `store check` reports;
            // the page still shows the row rather than hiding it.
            None => DeadValue {
                source_id: String::new(),
                hook_id: String::new(),
                ord: k.ord,
                event_type: None,
            },
        };
        out.push(DeadRow::from_parts(k, val, store.node()));
    }
    Ok(out)
}

/// The oldest `limit` dead-by-tenant keys of a tenant with a seq up to
/// `max_seq`, after the key `after` (purge order). Also returns the last
/// key visited (taken or not) and whether the range's end was reached.
#[allow(clippy::type_complexity)]
pub(crate) fn dead_keys_of_tenant(
    store: &Store,
    ord: u32,
    max_seq: u64,
    after: Option<(u64, u64, u16)>,
    limit: usize,
) -> Result<(Vec<DeadByTenantKey>, Option<(u64, u64, u16)>, bool)> {
    let lo = match after {
        Some((at, seq, sink)) => {
            let mut k = bounds::tenant_full(prefix::DEAD_BY_TENANT, ord, at, seq, sink);
            k.push(0);
            k
        }
        None => bounds::tenant(prefix::DEAD_BY_TENANT, ord).0,
    };
    let (_, hi) = bounds::tenant(prefix::DEAD_BY_TENANT, ord);
    let mut keys = Vec::new();
    let mut last = None;
    let mut stopped = false;
    let mut visited = 0usize;
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        if keys.len() >= limit || visited >= VISIT_MAX {
            stopped = true;
            return Ok(ControlFlow::Break(()));
        }
        visited += 1;
        let key = DeadByTenantKey::decode(k)?;
        last = Some((key.at, key.seq, key.sink));
        if key.seq <= max_seq {
            keys.push(key);
        }
        Ok(ControlFlow::Continue(()))
    })?;
    Ok((keys, last, !stopped))
}

/// A dead row by its DLQ key.
pub fn dead_row(store: &Store, key: &DeadKey) -> Result<Option<DeadRow>> {
    let k = bounds::dead_at(key.at, key.seq, key.sink);
    match store.get(Family::Index, &k)? {
        Some(v) => Ok(Some(DeadRow::decode(&k, &v, store.node())?)),
        None => Ok(None),
    }
}
