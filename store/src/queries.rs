//! Reads whose cost is bounded by what they return, never by the backlog.
//!
//! - Counters are point reads (six per ordinal).
//! - The active index answers "which tenants have work due now" and "how old
//!   is the oldest due row" without touching idle tenants.
//! - Per-tenant reads are one range of the tenant's own keys.
//! - DLQ pages are bounded reverse scans resumed from a cursor.

use std::collections::HashSet;
use std::ops::ControlFlow;

use serde::Serialize;

use crate::counters::{decode_value, Counters, Field, Total, Totals};
use crate::error::Result;
use crate::keys::{self, bounds, bucket_of, prefix, ActiveKey, DeadByTenantKey, DeadKey};
use crate::quarantine::Undecodable;
use crate::rows::{DeadRow, DueRow};
use crate::schema::Family;
use crate::store::{Dir, Store};
use crate::values::{ArchiveValue, DeadValue, DedupeValue, DeliveryRow, Envelope};

/// Keys a bounded walk of one tenant's rows looks at most (a page of its
/// dead keys, a purge chunk), kept rows included: such a walk may hold the
/// dispatcher's row lock, so its work stays bounded even on a tenant whose
/// newest rows are all being kept. Four purge chunks
/// ([`crate::transitions::CHUNK`]).
pub const VISIT_MAX: usize = 2_000;
/// Undecodable rows one read hands back for the quarantine at most.
pub const MAX_UNDECODABLE: usize = 64;

/// Counters of one ordinal: six point reads (ord 0 is the node).
pub fn counters(store: &Store, ord: u32) -> Result<Counters> {
    Ok(counters_many(store, &[ord])?.pop().unwrap_or_default())
}

/// Node-aggregate counters (ord 0).
pub fn node_counters(store: &Store) -> Result<Counters> {
    counters(store, 0)
}

/// Counters of several ordinals in one multi-get.
pub fn counters_many(store: &Store, ords: &[u32]) -> Result<Vec<Counters>> {
    let keys: Vec<Vec<u8>> = ords
        .iter()
        .flat_map(|&o| Field::ALL.map(|f| keys::counter_key(o, f as u8).to_vec()))
        .collect();
    let values = store.multi_get(Family::Counters, &keys)?;
    let mut out = Vec::with_capacity(ords.len());
    for chunk in values.chunks(Field::ALL.len()) {
        let mut c = Counters::default();
        for (f, v) in Field::ALL.into_iter().zip(chunk) {
            *c.get_mut(f) = v.as_deref().and_then(decode_value).unwrap_or(0);
        }
        out.push(c);
    }
    Ok(out)
}

/// Counters and cumulative totals of several ordinals in one multi-get
/// (ten point reads per ordinal).
pub fn tallies_many(store: &Store, ords: &[u32]) -> Result<Vec<(Counters, Totals)>> {
    const PER: usize = Field::ALL.len() + Total::ALL.len();
    let keys: Vec<Vec<u8>> = ords
        .iter()
        .flat_map(|&o| {
            Field::ALL
                .map(|f| keys::counter_key(o, f as u8).to_vec())
                .into_iter()
                .chain(Total::ALL.map(|t| keys::counter_key(o, t as u8).to_vec()))
        })
        .collect();
    let values = store.multi_get(Family::Counters, &keys)?;
    let mut out = Vec::with_capacity(ords.len());
    for chunk in values.chunks(PER) {
        let (fields, totals) = chunk.split_at(Field::ALL.len());
        let mut c = Counters::default();
        for (f, v) in Field::ALL.into_iter().zip(fields) {
            *c.get_mut(f) = v.as_deref().and_then(decode_value).unwrap_or(0);
        }
        let mut t = Totals::default();
        for (f, v) in Total::ALL.into_iter().zip(totals) {
            t.set_stored(f, v.as_deref().and_then(decode_value).unwrap_or(0));
        }
        out.push((c, t));
    }
    Ok(out)
}

/// Counters and totals of one ordinal (ord 0: the node).
pub fn tallies(store: &Store, ord: u32) -> Result<(Counters, Totals)> {
    Ok(tallies_many(store, &[ord])?.pop().unwrap_or_default())
}

/// Visits every tenant's counters (ord 1 and up) in ordinal order: one
/// sequential read of the counters family, memory bounded by one tenant.
/// An undecodable key is an error; an undecodable value reads as 0, as in
/// [`counters_many`].
pub fn each_tenant_counters(store: &Store, mut f: impl FnMut(u32, &Counters)) -> Result<()> {
    let lo = keys::counter_key(1, 0).to_vec();
    let hi = vec![0xFF; 6];
    let mut cur: Option<(u32, Counters)> = None;
    store.scan(Family::Counters, &lo, &hi, Dir::Forward, |k, v| {
        let (ord, field) = keys::decode_counter_key(k)?;
        if cur.as_ref().is_some_and(|(o, _)| *o != ord) {
            if let Some((o, c)) = cur.take() {
                f(o, &c);
            }
        }
        let (_, c) = cur.get_or_insert_with(|| (ord, Counters::default()));
        if let Some(field) = Field::from_u8(field) {
            *c.get_mut(field) = decode_value(v).unwrap_or(0);
        }
        Ok(ControlFlow::Continue(()))
    })?;
    if let Some((o, c)) = cur {
        f(o, &c);
    }
    Ok(())
}

/// A tenant with work due, as the active index sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ActiveTenant {
    pub ord: u32,
    /// The oldest second this tenant has a marker for.
    pub bucket: u64,
}

/// Tenants with a marker at or before `now`'s second, oldest first, each
/// once, at most `limit`. Never touches a tenant with nothing due.
pub fn active_tenants(store: &Store, now: u64, limit: usize) -> Result<Vec<ActiveTenant>> {
    let (out, _) = active_markers(store, now, limit)?;
    Ok(out)
}

/// An active marker as `(ordinal, bucket)`.
pub type Marker = (u32, u64);

/// Like [`active_tenants`], also returning every marker bucket seen per
/// tenant (what the dispatcher hands to `cleanup_markers`).
pub fn active_markers(
    store: &Store,
    now: u64,
    limit: usize,
) -> Result<(Vec<ActiveTenant>, Vec<Marker>)> {
    let (lo, hi) = bounds::active_upto(bucket_of(now));
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut markers = Vec::new();
    if limit == 0 {
        return Ok((out, markers));
    }
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        let a = ActiveKey::decode(k)?;
        if seen.insert(a.ord) {
            if out.len() >= limit {
                return Ok(ControlFlow::Break(()));
            }
            out.push(ActiveTenant {
                ord: a.ord,
                bucket: a.bucket,
            });
        }
        markers.push((a.ord, a.bucket));
        Ok(ControlFlow::Continue(()))
    })?;
    Ok((out, markers))
}

/// Every active marker with `from <= bucket <= to`, in (bucket, ordinal)
/// order, as `(ordinal, bucket)`. The dispatcher walks a window of recent
/// seconds with it each tick instead of the whole index.
pub fn markers_between(
    store: &Store,
    from: u64,
    to: u64,
    mut f: impl FnMut(u32, u64),
) -> Result<()> {
    let mut lo = vec![prefix::ACTIVE];
    lo.extend_from_slice(&from.to_be_bytes());
    let (_, hi) = bounds::active_upto(to);
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        let a = ActiveKey::decode(k)?;
        f(a.ord, a.bucket);
        Ok(ControlFlow::Continue(()))
    })
}

/// A tenant's due rows with `floor <= at <= now`, in due order, at most
/// `limit` rows and `byte_budget` bytes. The first row is returned even if
/// it alone exceeds the budget, so an oversized row cannot be stranded.
pub fn due_for_tenant(
    store: &Store,
    ord: u32,
    now: u64,
    floor: u64,
    limit: usize,
    byte_budget: u64,
    bad: &mut Vec<Undecodable>,
) -> Result<Vec<DueRow>> {
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    let mut bytes = 0u64;
    visit_due(
        store,
        ord,
        DueFrom::At(floor),
        now,
        usize::MAX,
        bad,
        |row| {
            let next = bytes + u64::from(row.size);
            if !out.is_empty() && next > byte_budget {
                return ControlFlow::Break(());
            }
            bytes = next;
            out.push(row);
            if out.len() >= limit {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        },
    )?;
    Ok(out)
}

/// Where a walk of a tenant's due rows starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DueFrom {
    /// At the first row due at or after this time (ms).
    At(u64),
    /// Strictly after the row with this due time, seq and sink: where an
    /// earlier walk stopped.
    After { at: u64, seq: u64, sink: u16 },
}

impl DueFrom {
    /// The due time (ms) the walk starts at.
    pub fn at(self) -> u64 {
        match self {
            DueFrom::At(at) | DueFrom::After { at, .. } => at,
        }
    }

    /// The first key of tenant `ord`'s due rows a walk from here may meet.
    fn lower_bound(self, ord: u32) -> Vec<u8> {
        match self {
            DueFrom::At(at) => bounds::tenant_at(prefix::DUE, ord, at),
            DueFrom::After { at, seq, sink } => {
                let mut k = bounds::tenant_full(prefix::DUE, ord, at, seq, sink);
                k.push(0);
                k
            }
        }
    }
}

/// Hands `f` the tenant's due rows from `from` up to `now`, in due order,
/// until it breaks or `max_keys` rows were handed over. Rows that do not
/// decode go to `bad` (up to a bound) and are not counted. Returns the rows
/// handed over. The one walk of a tenant's head: [`due_for_tenant`] and the
/// dispatcher's sink-aware visit share it.
pub fn visit_due(
    store: &Store,
    ord: u32,
    from: DueFrom,
    now: u64,
    max_keys: usize,
    bad: &mut Vec<Undecodable>,
    mut f: impl FnMut(DueRow) -> ControlFlow<()>,
) -> Result<usize> {
    if from.at() > now {
        return Ok(0);
    }
    let lo = from.lower_bound(ord);
    let hi = bounds::tenant_at(prefix::DUE, ord, now.saturating_add(1));
    let mut seen = 0usize;
    if max_keys == 0 {
        return Ok(0);
    }
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
        let row = match DueRow::decode(k, v) {
            Ok(r) => r,
            // One bad row must not stop the tenant (or the tick): it is
            // handed back for the quarantine and the walk goes on, up to a
            // bounded number of them.
            Err(error) => {
                bad.push(Undecodable {
                    key: k.to_vec(),
                    value: v.to_vec(),
                    error,
                });
                return Ok(if bad.len() >= MAX_UNDECODABLE {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                });
            }
        };
        seen += 1;
        if f(row).is_break() || seen >= max_keys {
            return Ok(ControlFlow::Break(()));
        }
        Ok(ControlFlow::Continue(()))
    })?;
    Ok(seen)
}

/// The tenant's earliest due row (due now or later): one seek.
pub fn first_due(store: &Store, ord: u32) -> Result<Option<DueRow>> {
    first_due_from(store, ord, 0)
}

/// The tenant's first due row at or after `from` (ms). Callers that know a
/// second before which the tenant has no due row (its oldest active marker)
/// pass its start, so the seek skips the tombstones of the rows claimed at
/// the head of the range instead of stepping over each until a compaction.
pub fn first_due_from(store: &Store, ord: u32, from: u64) -> Result<Option<DueRow>> {
    let lo = bounds::tenant_at(prefix::DUE, ord, from);
    let (_, hi) = bounds::tenant(prefix::DUE, ord);
    let mut out = None;
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, v| {
        out = Some(DueRow::decode(k, v)?);
        Ok(ControlFlow::Break(()))
    })?;
    Ok(out)
}

/// The due time of the tenant's first due row at or after `from` (ms), read
/// from the keys alone: a row whose value does not decode still counts (the
/// dispatcher quarantines it when it comes due), and a key that does not
/// decode is stepped over, so a bad row can never fail a marker cleanup.
pub fn first_due_at(store: &Store, ord: u32, from: u64) -> Result<Option<u64>> {
    first_due_time(store, ord, DueFrom::At(from))
}

/// [`first_due_at`] from any start: a caller that knows every row of the
/// tenant before `from` is gone (the dispatcher, after claiming them)
/// starts past their tombstones instead of stepping over each.
pub fn first_due_time(store: &Store, ord: u32, from: DueFrom) -> Result<Option<u64>> {
    let lo = from.lower_bound(ord);
    let (_, hi) = bounds::tenant(prefix::DUE, ord);
    let mut out = None;
    let mut skipped = 0usize;
    store.scan(
        Family::Index,
        &lo,
        &hi,
        Dir::Forward,
        |k, _| match keys::DueKey::decode(k) {
            Ok(key) => {
                out = Some(key.at);
                Ok(ControlFlow::Break(()))
            }
            Err(_) if skipped < MAX_UNDECODABLE => {
                skipped += 1;
                Ok(ControlFlow::Continue(()))
            }
            Err(e) => Err(e.into()),
        },
    )?;
    Ok(out)
}

/// The oldest due row of the node, from the active index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OldestDue {
    pub ord: u32,
    /// Due time in ms; exact when `exact`, else the start of the marker's second.
    pub at: u64,
    pub exact: bool,
}

impl OldestDue {
    /// Age at `now` in ms (0 when not yet due).
    pub fn age_ms(&self, now: u64) -> u64 {
        now.saturating_sub(self.at)
    }
}

/// Markers skipped as stale before reporting a marker's second unverified.
pub const OLDEST_DUE_SKIP: usize = 32;

/// The oldest due row, read from the first marker and verified against that
/// tenant's first due row; stale markers (tenant drained, cleanup pending)
/// are skipped, at most [`OLDEST_DUE_SKIP`], after which the marker's second
/// is reported. O(1) in the backlog: exact to the second.
pub fn oldest_due(store: &Store) -> Result<Option<OldestDue>> {
    let (lo, hi) = bounds::family(prefix::ACTIVE);
    let mut candidates = Vec::new();
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        candidates.push(ActiveKey::decode(k)?);
        Ok(if candidates.len() > OLDEST_DUE_SKIP {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })?;
    for (i, a) in candidates.iter().enumerate() {
        // No marker of this tenant is older than `a` (markers are walked in
        // second order), and every due row has a marker in its second.
        if let Some(first) = first_due_from(store, a.ord, a.bucket.saturating_mul(1000))? {
            if bucket_of(first.at) == a.bucket {
                return Ok(Some(OldestDue {
                    ord: a.ord,
                    at: first.at,
                    exact: true,
                }));
            }
        }
        if i >= OLDEST_DUE_SKIP {
            return Ok(Some(OldestDue {
                ord: a.ord,
                at: a.bucket.saturating_mul(1000),
                exact: false,
            }));
        }
    }
    Ok(None)
}

/// Where a DLQ page stopped; pass it back for the next (older) page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DlqPage {
    pub entries: Vec<DeadRow>,
    pub next: Option<DlqCursor>,
}

/// The node-wide DLQ, newest first, `limit` entries after `cursor`.
pub fn dlq_page(store: &Store, cursor: Option<DlqCursor>, limit: usize) -> Result<DlqPage> {
    node_page(store, Dir::Reverse, cursor, limit)
}

/// Which end of the DLQ a page starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
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

/// A tenant with its pending counter, for the top-N gauge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingTenant {
    pub ord: u32,
    pub pending: i64,
}

/// Distinct tenants read from the active index for the top-N gauge.
pub const TOP_SCAN: usize = 10_000;

/// Markers a stateless reader (a gauge, `store info`) walks at most. The
/// active index has one marker per (tenant, due second): a deep backlog of
/// many tenants can hold hundreds of thousands up to now, and a one-shot
/// reader must stay bounded, so it reports what it saw and whether it saw
/// everything. The oldest markers come first, so a bounded walk sees the
/// tenants that have waited longest.
pub const MARKER_BUDGET: usize = 100_000;

/// Tenants with work due now, counted by a bounded walk of the markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ActiveSummary {
    /// Distinct tenants seen.
    pub tenants: usize,
    pub markers_walked: usize,
    /// False when the walk stopped at the budget: `tenants` is a lower bound.
    pub complete: bool,
}

/// A bounded walk of the active index: the first `limit` distinct tenants
/// with a marker at or before `now`'s second (oldest first), walking at most
/// `budget` markers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveWalk {
    pub tenants: Vec<ActiveTenant>,
    pub markers_walked: usize,
    /// False when the walk stopped at the budget before finding `limit`
    /// tenants or the end of the markers: more tenants may be active.
    pub complete: bool,
}

/// See [`ActiveWalk`]. Unlike [`active_tenants`], a store with few
/// tenants and a deep backlog (one marker per tenant and due second) is not
/// walked to its end to prove there is no further tenant.
pub fn active_within(store: &Store, now: u64, limit: usize, budget: usize) -> Result<ActiveWalk> {
    let (lo, hi) = bounds::active_upto(bucket_of(now));
    let mut seen = HashSet::new();
    let mut walk = ActiveWalk {
        tenants: Vec::new(),
        markers_walked: 0,
        complete: true,
    };
    if limit == 0 {
        return Ok(walk);
    }
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
        if walk.markers_walked >= budget {
            walk.complete = false;
            return Ok(ControlFlow::Break(()));
        }
        walk.markers_walked += 1;
        let a = ActiveKey::decode(k)?;
        if seen.insert(a.ord) {
            walk.tenants.push(ActiveTenant {
                ord: a.ord,
                bucket: a.bucket,
            });
            if walk.tenants.len() >= limit {
                return Ok(ControlFlow::Break(()));
            }
        }
        Ok(ControlFlow::Continue(()))
    })?;
    Ok(walk)
}

/// Counts the tenants with a marker at or before `now`'s second, walking at
/// most `budget` markers.
pub fn active_summary(store: &Store, now: u64, budget: usize) -> Result<ActiveSummary> {
    let w = active_within(store, now, usize::MAX, budget)?;
    Ok(ActiveSummary {
        tenants: w.tenants.len(),
        markers_walked: w.markers_walked,
        complete: w.complete,
    })
}

/// The `n` tenants with the most pending rows among the first
/// [`TOP_SCAN`] distinct tenants of the active index up to `now` (those that
/// have waited longest, within a walk of at most [`MARKER_BUDGET`] markers);
/// one counter read each. A tenant with pending rows has a marker at or
/// before the current second, so no scan of the counters family is needed.
pub fn top_pending(store: &Store, now: u64, n: usize) -> Result<Vec<PendingTenant>> {
    let ords: Vec<u32> = active_within(store, now, TOP_SCAN, MARKER_BUDGET)?
        .tenants
        .iter()
        .map(|a| a.ord)
        .collect();
    let keys: Vec<Vec<u8>> = ords
        .iter()
        .map(|&o| keys::counter_key(o, Field::Pending as u8).to_vec())
        .collect();
    let values = store.multi_get(Family::Counters, &keys)?;
    let mut out: Vec<PendingTenant> = ords
        .into_iter()
        .zip(values)
        .map(|(ord, v)| PendingTenant {
            ord,
            pending: v.as_deref().and_then(decode_value).unwrap_or(0),
        })
        .filter(|p| p.pending > 0)
        .collect();
    out.sort_by(|a, b| b.pending.cmp(&a.pending).then(a.ord.cmp(&b.ord)));
    out.truncate(n);
    Ok(out)
}

/// The node gauges one metrics tick reads: node counters, oldest-due age
/// and the top tenants by pending. Its cost does not grow with the backlog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gauges {
    pub node: Counters,
    /// The node's cumulative totals (four more point reads).
    pub totals: Totals,
    pub oldest_due: Option<OldestDue>,
    pub top: Vec<PendingTenant>,
}

pub fn gauges(store: &Store, now: u64, top_n: usize) -> Result<Gauges> {
    let (node, totals) = tallies(store, 0)?;
    Ok(Gauges {
        node,
        totals,
        oldest_due: oldest_due(store)?,
        top: top_pending(store, now, top_n)?,
    })
}

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

/// `D ord at`: the due-key prefix that bounds a tenant's rows by due time.
/// A full key sorts after every bound it starts with, and big-endian
/// `ord at` sorts like the pair, so `key < due_bound(ord, t)` is "this
/// tenant's row, due before `t`" for any key at or after the tenant's seek.
fn due_bound(ord: u32, at: u64) -> [u8; 13] {
    let mut k = [0u8; 13];
    k[0] = prefix::DUE;
    k[1..5].copy_from_slice(&ord.to_be_bytes());
    k[5..13].copy_from_slice(&at.to_be_bytes());
    k
}

/// The due time of a due key.
fn due_key_at(k: &[u8]) -> Result<u64> {
    match k.get(5..13) {
        Some(a) if k.len() == keys::DueKey::LEN => {
            let mut b = [0u8; 8];
            b.copy_from_slice(a);
            Ok(u64::from_be_bytes(b))
        }
        _ => Err(crate::error::DecodeError::new("due key", "wrong length").into()),
    }
}

/// Counts keys from the iterator's position while they sort before `end`,
/// at most `want`. Steps past every counted key but the `want`-th: the
/// caller seeks away from a saturated window, so that step would be wasted.
fn count_before(it: &mut rocksdb::DBRawIterator<'_>, end: &[u8], want: u32) -> u32 {
    let mut n = 0u32;
    while it.key().is_some_and(|k| k < end) {
        n += 1;
        if n >= want {
            break;
        }
        it.next();
    }
    n
}

/// Due rows of each tenant in `ords` per due-time window, each count capped
/// at `cap + 1` (a count above `cap` means "more than cap"). Window `i` is
/// `edges[i] <= at < edges[i + 1]`; rows outside `edges[0]..edges[last]`
/// are not counted. Cost: per tenant at most one seek per window and
/// `cap + 1` keys per window, whatever the backlog.
///
/// How: one iterator for all the rows, keys only, never values. A window is
/// counted from its first row, `cap + 1` keys at most; an empty stretch
/// costs nothing (the key after a window says which window is next); the
/// rest of a saturated window is passed with one seek, and the step past
/// its last counted row is not taken (the seek replaces it). Window ends
/// are compared as encoded key prefixes, so a key is decoded once per
/// window, not once per row counted.
///
/// Bound, whatever the backlog: per row at most `1 + windows` seeks and
/// `windows × (cap + 1)` keys read. On a tenant dense enough to saturate
/// every window the seeks dominate: each positions one cursor per sorted run
/// of the LSM tree, about 15 steps' worth on a store of four runs.
pub fn due_window_counts(
    store: &Store,
    ords: &[u32],
    edges: &[u64],
    cap: u32,
) -> Result<Vec<Vec<u32>>> {
    let cols = edges.len().saturating_sub(1);
    let mut out = vec![vec![0u32; cols]; ords.len()];
    if cols == 0 {
        return Ok(out);
    }
    let want = cap.saturating_add(1);
    let (lo, hi) = bounds::family(prefix::DUE);
    let mut ro = rocksdb::ReadOptions::default();
    ro.set_iterate_lower_bound(lo);
    ro.set_iterate_upper_bound(hi);
    let db = store.db()?;
    let mut it = db.raw_iterator_cf_opt(Store::cf_in(&db, Family::Index)?, ro);
    for (row, &ord) in out.iter_mut().zip(ords) {
        // Every key from the seek below up to `stop` is this tenant's, due
        // in edges[0]..edges[cols].
        let stop = due_bound(ord, edges[cols]);
        it.seek(due_bound(ord, edges[0]));
        let mut col = 0usize;
        while col < cols {
            let at = match it.key() {
                Some(k) if k < &stop[..] => due_key_at(k)?,
                _ => break,
            };
            // The window holding `at`, never before `col`: the iterator only
            // moves forward.
            let c = edges
                .partition_point(|&e| e <= at)
                .saturating_sub(1)
                .clamp(col, cols - 1);
            let end = due_bound(ord, edges[c + 1]);
            // The key under the iterator is the window's first row.
            let n = count_before(&mut it, &end, want);
            row[c] = n;
            col = c + 1;
            if n >= want && col < cols {
                // Saturated: skip the rest of the window with one seek.
                it.seek(end);
            }
        }
        // A scan that stops on an error is an error, never a short result.
        it.status()
            .map_err(|e| store.read_failed(&db, Family::Index.name(), e))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::Batch;
    use crate::transitions::{self, IngestHook, SinkSet};

    fn ingest(store: &Store, seq: u64, archive: bool) {
        let env = Envelope {
            received_at: 1_000,
            source_id: "s".into(),
            tenant: "t".into(),
            idempotency_key: None,
            event_type: None,
            headers: vec![],
            body: vec![1, 2, 3],
        };
        let mut b = Batch::new();
        transitions::ingest(
            &mut b,
            &IngestHook {
                seq,
                ord: 1,
                envelope: &env,
                sinks: SinkSet::first(1),
                archive,
                dedupe_expires_at: None,
            },
        );
        store.commit(b, true).unwrap();
    }

    /// Oldest-first pages walk the DLQ in the reverse order of newest-first
    /// ones, node-wide and per tenant, and their cursors resume exactly.
    #[test]
    fn oldest_first_pages_mirror_newest_first_ones() {
        let (_d, store) = store_with_due(&[(2, 10), (3, 20), (2, 30), (2, 40), (3, 50)]);
        let mut b = Batch::new();
        for ord in [2u32, 3] {
            for r in
                due_for_tenant(&store, ord, u64::MAX, 0, 10, u64::MAX, &mut Vec::new()).unwrap()
            {
                let f = transitions::claim(&mut b, &r);
                let d = crate::values::DeliveryRow::new(ord, f.size);
                transitions::dead_letter(&mut b, &f, &d, 100 + r.at, "s", None);
            }
        }
        store.commit(b, true).unwrap();
        let walk = |ord: Option<u32>, order: DlqOrder| -> Vec<u64> {
            let mut out = Vec::new();
            let mut cursor = None;
            loop {
                let p = dlq_page_ordered(&store, ord, order, cursor, 2).unwrap();
                out.extend(p.entries.iter().map(|r| r.at));
                match p.next {
                    Some(c) => cursor = Some(c),
                    None => return out,
                }
            }
        };
        for ord in [None, Some(2), Some(3)] {
            let newest = walk(ord, DlqOrder::NewestFirst);
            let mut oldest = walk(ord, DlqOrder::OldestFirst);
            assert!(!newest.is_empty());
            oldest.reverse();
            assert_eq!(newest, oldest, "{ord:?}");
        }
        assert_eq!(walk(Some(2), DlqOrder::OldestFirst), vec![110, 130, 140]);
    }

    /// A tenant's DLQ page reads that tenant's key range and nothing else:
    /// undecodable keys planted right below and right above it (the
    /// neighbouring ordinals' ranges) would fail the page if it touched
    /// them, as they fail a read of the neighbour.
    #[test]
    fn a_tenant_dlq_page_reads_only_that_tenants_key_range() {
        let (_d, store) = store_with_due(&[(2, 10), (2, 20), (2, 30)]);
        let mut b = Batch::new();
        for r in due_for_tenant(&store, 2, u64::MAX, 0, 10, u64::MAX, &mut Vec::new()).unwrap() {
            let f = transitions::claim(&mut b, &r);
            let d = crate::values::DeliveryRow::new(2, f.size);
            transitions::dead_letter(&mut b, &f, &d, 100 + r.at, "s", None);
        }
        store.commit(b, true).unwrap();
        let mut b = Batch::new();
        for ord in [1u32, 3] {
            let mut k = vec![crate::keys::prefix::DEAD_BY_TENANT];
            k.extend_from_slice(&ord.to_be_bytes());
            k.push(0xEE);
            b.put(Family::Index, k, b"garbage".to_vec());
        }
        store.commit(b, true).unwrap();
        let page = dlq_page_for_tenant(&store, 2, None, 100).unwrap();
        assert_eq!(page.entries.len(), 3);
        assert!(page.entries.iter().all(|r| r.ord == 2));
        assert!(
            dlq_page_for_tenant(&store, 3, None, 100).is_err(),
            "the planted key is there to be found"
        );
    }

    /// Due rows `(ord, at)` ingested straight by ordinal, one commit.
    fn store_with_due(rows: &[(u32, u64)]) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let mut b = Batch::new();
        for (i, &(ord, at)) in rows.iter().enumerate() {
            let env = Envelope {
                received_at: at,
                source_id: "s".into(),
                tenant: format!("t{ord}"),
                idempotency_key: None,
                event_type: None,
                headers: vec![],
                body: vec![1],
            };
            transitions::ingest(
                &mut b,
                &IngestHook {
                    seq: i as u64 + 1,
                    ord,
                    envelope: &env,
                    sinks: SinkSet::first(1),
                    archive: false,
                    dedupe_expires_at: None,
                },
            );
        }
        store.commit(b, true).unwrap();
        (dir, store)
    }

    /// The reference: every row of each tenant read and binned, then capped.
    fn counted_by_hand(
        rows: &[(u32, u64)],
        ords: &[u32],
        edges: &[u64],
        cap: u32,
    ) -> Vec<Vec<u32>> {
        let cols = edges.len() - 1;
        ords.iter()
            .map(|&o| {
                (0..cols)
                    .map(|c| {
                        let n = rows
                            .iter()
                            .filter(|&&(ro, at)| ro == o && edges[c] <= at && at < edges[c + 1])
                            .count() as u32;
                        n.min(cap + 1)
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn due_window_counts_count_each_window_capped_and_skip_empty_ones() {
        // Tenant 1: 1 row in [0,10), none in [10,20), 5 in [20,30), 2 in
        // [30, MAX). Tenant 3: one row. Tenant 2 has none.
        let mut rows = vec![(1, 5)];
        rows.extend([21, 22, 23, 24, 25].map(|a| (1, a)));
        rows.extend([(1, 40), (1, 1_000_000), (3, 7)]);
        let (_d, s) = store_with_due(&rows);
        let edges = [0, 10, 20, 30, u64::MAX];
        let c = due_window_counts(&s, &[1, 2, 3], &edges, 8).unwrap();
        assert_eq!(c, [vec![1, 0, 5, 2], vec![0; 4], vec![1, 0, 0, 0]]);
        // Capped: 5 rows with cap 3 read as 4 ("more than 3"); with cap 0
        // every non-empty window reads as 1.
        let c = due_window_counts(&s, &[1], &edges, 3).unwrap();
        assert_eq!(c[0], [1, 0, 4, 2]);
        let c = due_window_counts(&s, &[1], &edges, 0).unwrap();
        assert_eq!(c[0], [1, 0, 1, 1]);
        // Windows that start after 0 ignore older rows; rows at or after
        // the last edge are not counted.
        let c = due_window_counts(&s, &[1], &[20, 30, 50], 8).unwrap();
        assert_eq!(c[0], [5, 1]);
        assert_eq!(
            due_window_counts(&s, &[1], &[7], 8).unwrap(),
            [Vec::<u32>::new()]
        );
        assert!(due_window_counts(&s, &[], &edges, 8).unwrap().is_empty());
    }

    #[test]
    fn due_window_counts_match_reading_every_row() {
        // Tenants of every density around the cap: a saturated window right
        // before a sparse one, runs of rows on one millisecond, a window
        // with exactly cap and cap + 1 rows, rows on the edges themselves,
        // and neighbours on both sides of each tenant's key range.
        let mut rng = crate::fixture::Rng::new(7);
        let mut rows = Vec::new();
        for (ord, per_window) in [
            (1u32, 0u64),
            (2, 1),
            (3, 3),
            (4, 9),
            (5, 10),
            (6, 40),
            (7, 200),
        ] {
            for w in 0..12u64 {
                let n = if w % 4 == 3 {
                    per_window / 4
                } else {
                    per_window
                };
                for _ in 0..n {
                    rows.push((ord, 1_000 + w * 100 + rng.below(100)));
                }
            }
            rows.push((ord, 1_000 + 300));
            rows.push((ord, 1_000 + 300));
            rows.push((ord, 0));
            rows.push((ord, u64::MAX - 1));
        }
        let (_d, s) = store_with_due(&rows);
        let ords: Vec<u32> = (0..=8).collect();
        let mut edges = vec![0u64];
        edges.extend((0..12).map(|w| 1_000 + w * 100));
        edges.push(u64::MAX);
        for cap in [0, 1, 8, 9, 39] {
            let want = counted_by_hand(&rows, &ords, &edges, cap);
            assert_eq!(
                due_window_counts(&s, &ords, &edges, cap).unwrap(),
                want,
                "cap {cap}"
            );
        }
        // A screen that ends before the newest rows.
        let short = &edges[..6];
        assert_eq!(
            due_window_counts(&s, &ords, short, 8).unwrap(),
            counted_by_hand(&rows, &ords, short, 8)
        );
    }

    #[test]
    fn archive_obligations_are_bounded_resumable_and_skip_settled() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        for seq in 1..=6 {
            // Even seqs carry no obligation.
            ingest(&store, seq, seq % 2 == 1);
        }
        let all = archive_obligations(&store, None, 100).unwrap();
        assert_eq!(all.iter().map(|(s, _)| *s).collect::<Vec<_>>(), [1, 3, 5]);
        assert!(all.iter().all(|(_, v)| v.ord == 1 && v.size > 0));
        let first = archive_obligations(&store, None, 2).unwrap();
        assert_eq!(first.len(), 2);
        let rest = archive_obligations(&store, Some(3), 100).unwrap();
        assert_eq!(rest.iter().map(|(s, _)| *s).collect::<Vec<_>>(), [5]);
        assert!(archive_obligations(&store, Some(u64::MAX), 10)
            .unwrap()
            .is_empty());
        assert!(archive_obligations(&store, None, 0).unwrap().is_empty());

        let mut b = Batch::new();
        transitions::archive_settle(&mut b, 3, &all[1].1);
        store.commit(b, true).unwrap();
        let left = archive_obligations(&store, None, 100).unwrap();
        assert_eq!(left.iter().map(|(s, _)| *s).collect::<Vec<_>>(), [1, 5]);
        assert_eq!(node_counters(&store).unwrap().archive_pending, 2);
    }
}
