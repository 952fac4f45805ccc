//! "How much": a tenant's or the node's counters and cumulative totals,
//! point reads only (a batched read for many tenants), and the gauges the
//! metrics render (node counters, the oldest due row, the top tenants).
//! Never a fold of the rows: that is `store check`'s job.

use super::{oldest_due, top_pending, OldestDue, PendingTenant};
use crate::counters::{decode_value, Counters, Field, Total, Totals};
use crate::error::Result;
use crate::keys;
use crate::schema::Family;
use crate::store::{Dir, Store};
use std::ops::ControlFlow;

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

/// The node gauges one metrics tick reads: node counters, oldest-due age
/// and the top tenants by pending. Its cost does not grow with the backlog.
#[derive(Debug, Clone, PartialEq, Eq)]
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
