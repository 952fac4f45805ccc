//! Tenant ordinals: dense `u32`s assigned at commit in first-sight order and
//! never reused.
//!
//! Invariants:
//! - Ordinal 0 is the node aggregate; tenants get 1, 2, 3, ...
//! - `t ord -> id` and `n id -> ord` are written together with `m:next_ord`
//!   in the same batch as the first rows that use the ordinal, so an ordinal
//!   is never visible without its rows or the other way round.
//! - Only one [`TenantAllocator`] writes (the daemon's writer, the fixture,
//!   the migration). Its cache is bounded and learns only committed ordinals.
//! - An erased tenant keeps its `t` row with an empty value (a tombstone):
//!   its ordinal is never handed out again.

use std::collections::HashMap;
use std::ops::ControlFlow;

use crate::batch::Batch;
use crate::codec::Reader;
use crate::counters::Counters;
use crate::error::{Result, StoreError};
use crate::keys::{self, bounds, meta, prefix};
use crate::schema::Family;
use crate::store::{Dir, Store};

/// Default `tenants.max`.
pub const DEFAULT_MAX: u32 = 1_000_000;
/// Entries in the writer's cache before it is cleared whole.
pub const CACHE_CAPACITY: usize = 65_536;
/// The tenant of a hook that names none.
pub const DEFAULT_TENANT: &str = "default";
/// Longest tenant id in bytes.
pub const MAX_ID_LEN: usize = 128;

/// Checks a tenant id: UTF-8 (given), 1 to 128 bytes, no control
/// characters (dedupe keys use NUL as a separator).
pub fn validate_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(StoreError::InvalidTenant("tenant id is empty".into()));
    }
    if id.len() > MAX_ID_LEN {
        return Err(StoreError::InvalidTenant(format!(
            "tenant id is {} bytes, the limit is {MAX_ID_LEN}",
            id.len()
        )));
    }
    if id.chars().any(char::is_control) {
        return Err(StoreError::InvalidTenant(
            "tenant id contains a control character".into(),
        ));
    }
    Ok(())
}

fn decode_ord(b: &[u8]) -> Result<u32> {
    let mut r = Reader::new(b, "tenant ordinal");
    let v = r.u32()?;
    r.finish()?;
    Ok(v)
}

/// The ordinal of a tenant id, if it has one.
pub fn ord_of(store: &Store, id: &str) -> Result<Option<u32>> {
    match store.get(Family::Tenants, &keys::ord_by_tenant_key(id))? {
        Some(b) => Ok(Some(decode_ord(&b)?)),
        None => Ok(None),
    }
}

/// What the `t` row of an ordinal says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Name {
    Live(String),
    /// The tenant was erased; the ordinal stays retired.
    Erased,
}

/// The tenant id of an ordinal.
pub fn name_of(store: &Store, ord: u32) -> Result<Option<Name>> {
    match store.get(Family::Tenants, &keys::tenant_by_ord_key(ord))? {
        None => Ok(None),
        Some(b) if b.is_empty() => Ok(Some(Name::Erased)),
        Some(b) => String::from_utf8(b)
            .map(|s| Some(Name::Live(s)))
            .map_err(|_| crate::error::DecodeError::new("tenant id", "not UTF-8").into()),
    }
}

/// Number of ordinals ever allocated (erased ones included).
pub fn allocated(store: &Store) -> Result<u32> {
    Ok(store.next_ord()?.saturating_sub(1))
}

/// A tenant with its counters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TenantInfo {
    pub ord: u32,
    pub id: String,
    pub counters: Counters,
}

/// Tenants in ordinal order after `after` (exclusive), at most `limit`,
/// with their counters. Erased tenants are skipped. Cost: one range scan of
/// `limit` rows plus six point reads per tenant.
pub fn page(store: &Store, after: Option<u32>, limit: usize) -> Result<Vec<TenantInfo>> {
    let start = after.map_or(Some(1), |a| a.checked_add(1));
    let Some(start) = start else {
        return Ok(Vec::new());
    };
    let lo = keys::tenant_by_ord_key(start).to_vec();
    let (_, hi) = bounds::family(prefix::TENANT_BY_ORD);
    let mut found = Vec::new();
    store.scan(Family::Tenants, &lo, &hi, Dir::Forward, |k, v| {
        let ord = keys::decode_tenant_by_ord_key(k)?;
        if !v.is_empty() {
            let id = String::from_utf8(v.to_vec())
                .map_err(|_| crate::error::DecodeError::new("tenant id", "not UTF-8"))?;
            found.push((ord, id));
        }
        Ok(if found.len() >= limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })?;
    let ords: Vec<u32> = found.iter().map(|(o, _)| *o).collect();
    let counters = crate::queries::counters_many(store, &ords)?;
    Ok(found
        .into_iter()
        .zip(counters)
        .map(|((ord, id), counters)| TenantInfo { ord, id, counters })
        .collect())
}

/// How a batch's tenants resolved: ordinals for known and newly allocated
/// tenants, and the refusals. Apply it with [`TenantAllocator::committed`]
/// only after the batch that carries it committed.
#[derive(Debug, Default)]
pub struct Resolution {
    ords: HashMap<String, u32>,
    refused: Vec<String>,
    fresh: Vec<(String, u32)>,
    next_ord: u32,
}

impl Resolution {
    /// The ordinal of a tenant, or [`StoreError::TenantLimit`] if it was
    /// refused.
    pub fn ord(&self, tenant: &str, max: u32) -> Result<u32> {
        self.ords
            .get(tenant)
            .copied()
            .ok_or(StoreError::TenantLimit { max })
    }

    pub fn refused(&self) -> &[String] {
        &self.refused
    }

    /// Tenants first seen in this batch, with their new ordinals.
    pub fn fresh(&self) -> &[(String, u32)] {
        &self.fresh
    }
}

/// The writer's ordinal allocator with its bounded cache.
#[derive(Debug)]
pub struct TenantAllocator {
    cache: HashMap<String, u32>,
    capacity: usize,
    next_ord: u32,
    max: u32,
}

impl TenantAllocator {
    /// Loads `m:next_ord`. `max` is `tenants.max`.
    pub fn load(store: &Store, max: u32) -> Result<Self> {
        Ok(Self {
            cache: HashMap::new(),
            capacity: CACHE_CAPACITY,
            next_ord: store.next_ord()?,
            max,
        })
    }

    /// A smaller cache, for tests of the eviction path.
    pub fn with_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity.max(1);
        self
    }

    pub fn max(&self) -> u32 {
        self.max
    }

    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    /// Resolves the distinct tenants of a batch: cache hits, then one
    /// multi-get of the misses, then new ordinals (in the order given, which
    /// is first-sight order) whose `t`, `n` and `m:next_ord` puts go into
    /// `batch`. A new tenant past `max` is refused; an existing one never is.
    pub fn resolve<'a>(
        &self,
        store: &Store,
        tenants: impl IntoIterator<Item = &'a str>,
        batch: &mut Batch,
    ) -> Result<Resolution> {
        let mut res = Resolution {
            next_ord: self.next_ord,
            ..Resolution::default()
        };
        let mut misses: Vec<&str> = Vec::new();
        for t in tenants {
            if res.ords.contains_key(t) || misses.contains(&t) {
                continue;
            }
            match self.cache.get(t) {
                Some(&o) => {
                    res.ords.insert(t.to_owned(), o);
                }
                None => misses.push(t),
            }
        }
        if misses.is_empty() {
            return Ok(res);
        }
        let keys: Vec<Vec<u8>> = misses.iter().map(|t| keys::ord_by_tenant_key(t)).collect();
        let found = store.multi_get(Family::Tenants, &keys)?;
        for (t, v) in misses.into_iter().zip(found) {
            match v {
                Some(b) => {
                    res.ords.insert(t.to_owned(), decode_ord(&b)?);
                }
                None => {
                    validate_id(t)?;
                    if res.next_ord.saturating_sub(1) >= self.max {
                        res.refused.push(t.to_owned());
                        continue;
                    }
                    let ord = res.next_ord;
                    res.next_ord = ord.checked_add(1).ok_or(StoreError::OrdinalsExhausted)?;
                    batch.put(
                        Family::Tenants,
                        keys::tenant_by_ord_key(ord).to_vec(),
                        t.as_bytes().to_vec(),
                    );
                    batch.put(
                        Family::Tenants,
                        keys::ord_by_tenant_key(t),
                        ord.to_be_bytes().to_vec(),
                    );
                    res.ords.insert(t.to_owned(), ord);
                    res.fresh.push((t.to_owned(), ord));
                }
            }
        }
        if !res.fresh.is_empty() {
            batch.put(
                Family::Meta,
                meta::NEXT_ORD.to_vec(),
                res.next_ord.to_be_bytes().to_vec(),
            );
        }
        Ok(res)
    }

    /// Learns a resolution after its batch committed. Not calling it (the
    /// commit failed) leaves the allocator as before, so the next batch
    /// allocates the same ordinals again: nothing was written.
    pub fn committed(&mut self, res: Resolution) {
        self.next_ord = self.next_ord.max(res.next_ord);
        for (t, o) in res.ords {
            if self.cache.len() >= self.capacity {
                self.cache.clear();
            }
            self.cache.insert(t, o);
        }
    }
}

/// Tenants with counters, sorted by one counter descending (ties by
/// ordinal), at most `limit`. Reads the counters family only (never a fold
/// of the row families), keeping a bounded top-`limit` set.
pub fn top_by(
    store: &Store,
    field: crate::counters::Field,
    limit: usize,
) -> Result<Vec<TenantInfo>> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    if limit == 0 {
        return Ok(Vec::new());
    }
    let mut heap: BinaryHeap<Reverse<(i64, Reverse<u32>)>> = BinaryHeap::new();
    let lo = keys::counter_key(1, 0).to_vec();
    let hi = vec![0xFF; 6];
    store.scan(Family::Counters, &lo, &hi, Dir::Forward, |k, v| {
        let (ord, f) = keys::decode_counter_key(k)?;
        if f == field as u8 {
            let value = crate::counters::decode_value(v).unwrap_or(0);
            heap.push(Reverse((value, Reverse(ord))));
            if heap.len() > limit {
                heap.pop();
            }
        }
        Ok(ControlFlow::Continue(()))
    })?;
    let mut picked: Vec<(i64, u32)> = heap
        .into_iter()
        .map(|Reverse((v, Reverse(o)))| (v, o))
        .collect();
    picked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let ords: Vec<u32> = picked.iter().map(|p| p.1).collect();
    let counters = crate::queries::counters_many(store, &ords)?;
    let mut out = Vec::with_capacity(ords.len());
    for (ord, counters) in ords.into_iter().zip(counters) {
        if let Some(Name::Live(id)) = name_of(store, ord)? {
            out.push(TenantInfo { ord, id, counters });
        }
    }
    Ok(out)
}
