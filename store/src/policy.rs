//! Policy: what an operator set for a tenant (its weight, guaranteed
//! share, hard cap and rate) or for a sink (its in-flight bound and rate),
//! over the defaults of the daemon's configuration.
//!
//! Stored as meta rows, like pauses, so a policy survives a restart,
//! travels with a backup and is the same for every opener. Every write
//! moves [`version`] in the batch that changes a policy, and logs which
//! policy it changed under the new version, so a tick costs one point read
//! while nothing changes, and after a change reads the policies that
//! changed ([`Policies::update`]), not the table: setting 10,000 policies
//! one by one costs each tick after a set a few point reads (issue 47).
//!
//! Invariants:
//! - A stored policy sets at least one field, each within [`Policy::check`]'s
//!   ranges; clearing the last field deletes the row.
//! - At most [`MAX_POLICIES`] rows, counted in `m:policy_count` (once
//!   present) by the batch that adds or deletes one.
//! - Every put and delete goes through [`put_tenant`] or [`put_sink`], which
//!   move the version and log the change in the same batch; at most one
//!   change a batch (every caller's), since the version and the count are
//!   read from the store, not the batch.
//! - The log keeps the last [`LOG_KEEP`] versions; a reader further behind
//!   reads the table whole.
//!
//! Keys: `m:policy:t tenant:str16` and `m:policy:s source:str16 sink:u16`;
//! the version is `m:policy_version`, the count `m:policy_count` and the
//! log `m:policy_log: version:u64` -> the policy keys that version changed,
//! each `len:u16 key` (all three outside that prefix). Values
//! (version 1): tenant `1:u8 set:u8 weight:u32 share:u32 cap:u32
//! rate:u64 at:u64 by:str16`, sink `1:u8 set:u8 in_flight:u32 rate:u64
//! at:u64 by:str16`, where `set` has one bit per field present (in that
//! order) and a rate is in thousandths of a delivery per second.

use std::collections::HashMap;
use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use crate::batch::{Batch, PolicyPending};
use crate::codec::{put_str16, Reader};
use crate::error::{DecodeError, Result};
use crate::pauses::SinkRef;
use crate::schema::Family;
use crate::store::{Dir, Store};
use crate::tenants;

const PREFIX: &[u8] = b"m:policy:";
const VERSION: &[u8] = b"m:policy_version";
const COUNT: &[u8] = b"m:policy_count";
const LOG: &[u8] = b"m:policy_log:";
const V1: u8 = 1;

/// Versions the change log keeps.
pub const LOG_KEEP: u64 = 4096;

/// Policy rows one store holds at most (tenants and sinks together).
pub const MAX_POLICIES: usize = 100_000;

/// The highest weight: a tenant of weight 1000 gets 1000 claims for each
/// one of a tenant of weight 1 in its group.
pub const MAX_WEIGHT: u32 = 1000;

/// The largest share, cap or in-flight bound accepted (the node's
/// `max_inflight` bounds them all anyway).
pub const MAX_SLOTS: u32 = 1_000_000;

/// A rate: deliveries per second, kept in thousandths. The smallest is one
/// thousandth (3.6 an hour), and a rate is rounded to the nearest
/// thousandth: one a minute is 17 thousandths (1.02 a minute), ten an hour
/// 3 (10.8 an hour).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate {
    milli: u64,
}

/// The lowest rate: a thousandth of a delivery a second (3.6 an hour).
pub const MIN_RATE_MILLI: u64 = 1;
/// The highest rate: a million deliveries a second.
pub const MAX_RATE_MILLI: u64 = 1_000_000_000;

impl Rate {
    pub fn from_milli(milli: u64) -> Rate {
        Rate { milli }
    }

    /// Thousandths of a delivery per second.
    pub fn milli(self) -> u64 {
        self.milli
    }

    /// Deliveries per second.
    pub fn per_second(self) -> f64 {
        self.milli as f64 / 1000.0
    }
}

/// Why a rate did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rate {0:?}: write N/s, N/m or N/h with N a positive number (e.g. 50/s, 30/m)")]
pub struct RateError(pub String);

impl std::str::FromStr for Rate {
    type Err = RateError;

    /// `50/s`, `2.5/s`, `30/m`, `10/h`; a bare number is per second.
    fn from_str(s: &str) -> std::result::Result<Rate, RateError> {
        let bad = || RateError(s.to_owned());
        let t = s.trim();
        let (n, per) = match t.split_once('/') {
            Some((n, unit)) => {
                let per = match unit.trim() {
                    "s" | "sec" | "second" => 1.0,
                    "m" | "min" | "minute" => 60.0,
                    "h" | "hour" => 3600.0,
                    _ => return Err(bad()),
                };
                (n.trim(), per)
            }
            None => (t, 1.0),
        };
        let n: f64 = n.parse().map_err(|_| bad())?;
        if !n.is_finite() || n <= 0.0 {
            return Err(bad());
        }
        let milli = (n * 1000.0 / per).round();
        if !(MIN_RATE_MILLI as f64..=MAX_RATE_MILLI as f64).contains(&milli) {
            return Err(RateError(format!(
                "{s} (between 0.001/s, which is 3.6/h, and 1000000/s)"
            )));
        }
        Ok(Rate {
            milli: milli as u64,
        })
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A rate read from a stored row can be any u64: no multiplication
        // that can overflow.
        let per_minute = self.milli.checked_mul(60);
        if self.milli.is_multiple_of(1000) {
            write!(f, "{}/s", self.milli / 1000)
        } else if let Some(m) = per_minute.filter(|m| m.is_multiple_of(1000)) {
            write!(f, "{}/m", m / 1000)
        } else {
            write!(f, "{}/s", self.per_second())
        }
    }
}

/// A rate is written and read as its text (`20/s`, `90/m`): the form the
/// command line, the configuration file and the admin API all share.
impl Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Rate, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A tenant's policy: each field set overrides the configuration's
/// default (`[tenants]`, and `[dispatch] per_tenant` for the share).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Policy {
    /// Its share within its source's group (1 to [`MAX_WEIGHT`]).
    pub weight: Option<u32>,
    /// In-flight slots it is guaranteed before anyone borrows.
    pub share: Option<u32>,
    /// Deliveries in flight at most, borrowing included.
    pub cap: Option<u32>,
    /// Deliveries started per second at most.
    pub rate: Option<Rate>,
}

impl Policy {
    pub fn is_empty(&self) -> bool {
        *self == Policy::default()
    }

    /// `self`'s fields, and `base`'s where `self` has none.
    pub fn over(&self, base: &Policy) -> Policy {
        Policy {
            weight: self.weight.or(base.weight),
            share: self.share.or(base.share),
            cap: self.cap.or(base.cap),
            rate: self.rate.or(base.rate),
        }
    }

    /// Refuses what is out of range or contradicts itself, naming the
    /// field.
    pub fn check(&self) -> std::result::Result<(), String> {
        if let Some(w) = self.weight {
            if !(1..=MAX_WEIGHT).contains(&w) {
                return Err(format!("weight {w}: between 1 and {MAX_WEIGHT}"));
            }
        }
        for (name, v) in [("share", self.share), ("cap", self.cap)] {
            if let Some(v) = v {
                if !(1..=MAX_SLOTS).contains(&v) {
                    return Err(format!(
                        "{name} {v}: between 1 and {MAX_SLOTS} (to stop a tenant, pause it)"
                    ));
                }
            }
        }
        if let (Some(s), Some(c)) = (self.share, self.cap) {
            if s > c {
                return Err(format!(
                    "share {s} above cap {c}: a tenant cannot be guaranteed more than it may use"
                ));
            }
        }
        if let Some(r) = self.rate {
            if !(MIN_RATE_MILLI..=MAX_RATE_MILLI).contains(&r.milli) {
                return Err(format!("rate {r}: between 0.001/s and 1000000/s"));
            }
        }
        Ok(())
    }

    fn encode(&self, at: u64, by: &str) -> Vec<u8> {
        let set = u8::from(self.weight.is_some())
            | u8::from(self.share.is_some()) << 1
            | u8::from(self.cap.is_some()) << 2
            | u8::from(self.rate.is_some()) << 3;
        let mut v = vec![V1, set];
        for x in [self.weight, self.share, self.cap] {
            v.extend_from_slice(&x.unwrap_or(0).to_be_bytes());
        }
        v.extend_from_slice(&self.rate.map_or(0, Rate::milli).to_be_bytes());
        v.extend_from_slice(&at.to_be_bytes());
        put_str16(&mut v, by);
        v
    }

    fn decode(v: &[u8]) -> std::result::Result<(Policy, u64, String), DecodeError> {
        let mut r = Reader::new(v, "tenant policy");
        r.expect_u8(V1)?;
        let set = r.u8()?;
        if set & !0x0f != 0 || set == 0 {
            return Err(DecodeError::new(
                "tenant policy",
                format!("field bits {set:#04x}"),
            ));
        }
        let (w, s, c, rate) = (r.u32()?, r.u32()?, r.u32()?, r.u64()?);
        let at = r.u64()?;
        let by = r.str16()?;
        r.finish()?;
        let p = Policy {
            weight: (set & 1 != 0).then_some(w),
            share: (set & 2 != 0).then_some(s),
            cap: (set & 4 != 0).then_some(c),
            rate: (set & 8 != 0).then_some(Rate::from_milli(rate)),
        };
        p.check()
            .map_err(|e| DecodeError::new("tenant policy", e))?;
        Ok((p, at, by))
    }
}

impl std::fmt::Display for Policy {
    /// `weight 4, cap 20, rate 50/s`; `none` for a policy with no field.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(w) = self.weight {
            parts.push(format!("weight {w}"));
        }
        if let Some(s) = self.share {
            parts.push(format!("share {s}"));
        }
        if let Some(c) = self.cap {
            parts.push(format!("cap {c}"));
        }
        if let Some(r) = self.rate {
            parts.push(format!("rate {r}"));
        }
        if parts.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// A sink's limits: each field set overrides the sink's configuration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SinkLimits {
    /// Deliveries to it in flight at most (every tenant's together).
    pub max_in_flight: Option<u32>,
    /// Requests started per second at most.
    pub rate: Option<Rate>,
}

impl std::fmt::Display for SinkLimits {
    /// `max_in_flight 4, rate 20/s`; `none` for no limit.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(n) = self.max_in_flight {
            parts.push(format!("max_in_flight {n}"));
        }
        if let Some(r) = self.rate {
            parts.push(format!("rate {r}"));
        }
        if parts.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

impl SinkLimits {
    pub fn is_empty(&self) -> bool {
        *self == SinkLimits::default()
    }

    pub fn over(&self, base: &SinkLimits) -> SinkLimits {
        SinkLimits {
            max_in_flight: self.max_in_flight.or(base.max_in_flight),
            rate: self.rate.or(base.rate),
        }
    }

    pub fn check(&self) -> std::result::Result<(), String> {
        if let Some(v) = self.max_in_flight {
            if !(1..=MAX_SLOTS).contains(&v) {
                return Err(format!(
                    "max_in_flight {v}: between 1 and {MAX_SLOTS} (to stop a sink, pause it)"
                ));
            }
        }
        if let Some(r) = self.rate {
            if !(MIN_RATE_MILLI..=MAX_RATE_MILLI).contains(&r.milli) {
                return Err(format!("rate {r}: between 0.001/s and 1000000/s"));
            }
        }
        Ok(())
    }

    fn encode(&self, at: u64, by: &str) -> Vec<u8> {
        let set = u8::from(self.max_in_flight.is_some()) | u8::from(self.rate.is_some()) << 1;
        let mut v = vec![V1, set];
        v.extend_from_slice(&self.max_in_flight.unwrap_or(0).to_be_bytes());
        v.extend_from_slice(&self.rate.map_or(0, Rate::milli).to_be_bytes());
        v.extend_from_slice(&at.to_be_bytes());
        put_str16(&mut v, by);
        v
    }

    fn decode(v: &[u8]) -> std::result::Result<(SinkLimits, u64, String), DecodeError> {
        let mut r = Reader::new(v, "sink limits");
        r.expect_u8(V1)?;
        let set = r.u8()?;
        if set & !0x03 != 0 || set == 0 {
            return Err(DecodeError::new(
                "sink limits",
                format!("field bits {set:#04x}"),
            ));
        }
        let (n, rate) = (r.u32()?, r.u64()?);
        let at = r.u64()?;
        let by = r.str16()?;
        r.finish()?;
        let l = SinkLimits {
            max_in_flight: (set & 1 != 0).then_some(n),
            rate: (set & 2 != 0).then_some(Rate::from_milli(rate)),
        };
        l.check().map_err(|e| DecodeError::new("sink limits", e))?;
        Ok((l, at, by))
    }
}

/// What a policy row applies to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subject {
    Tenant(String),
    Sink(SinkRef),
}

impl Subject {
    fn key(&self) -> Vec<u8> {
        let mut k = PREFIX.to_vec();
        match self {
            Subject::Tenant(t) => {
                k.push(b't');
                put_str16(&mut k, t);
            }
            Subject::Sink(s) => {
                k.push(b's');
                put_str16(&mut k, &s.source);
                k.extend_from_slice(&s.sink.to_be_bytes());
            }
        }
        k
    }

    fn decode_key(k: &[u8]) -> std::result::Result<Subject, DecodeError> {
        let rest = k
            .strip_prefix(PREFIX)
            .ok_or_else(|| DecodeError::new("policy key", "missing m:policy: prefix"))?;
        let mut r = Reader::new(rest, "policy key");
        let s = match r.u8()? {
            b't' => Subject::Tenant(r.str16()?),
            b's' => {
                let source = r.str16()?;
                Subject::Sink(SinkRef {
                    source,
                    sink: r.u16()?,
                })
            }
            other => {
                return Err(DecodeError::new(
                    "policy key",
                    format!("unknown subject byte {other:#04x}"),
                ))
            }
        };
        r.finish()?;
        Ok(s)
    }
}

/// A tenant's stored policy, with who set it and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantPolicy {
    pub tenant: String,
    pub policy: Policy,
    /// When it was last changed (ms).
    pub at: u64,
    /// Who changed it (the audit's principal name).
    pub by: String,
}

/// A sink's stored limits, with who set them and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSinkLimits {
    pub sink: SinkRef,
    pub limits: SinkLimits,
    pub at: u64,
    pub by: String,
}

/// The version the dispatcher compares: it moves with every change.
pub fn version(store: &Store) -> Result<u64> {
    match store.get(Family::Meta, VERSION)? {
        Some(v) => {
            let mut r = Reader::new(&v, "policy version");
            let n = r.u64()?;
            r.finish()?;
            Ok(n)
        }
        None => Ok(0),
    }
}

fn log_key(version: u64) -> Vec<u8> {
    let mut k = LOG.to_vec();
    k.extend_from_slice(&version.to_be_bytes());
    k
}

/// A log entry's value: the policy keys its version changed, each as
/// `len:u16 key`.
fn log_value<'a>(keys: impl IntoIterator<Item = &'a Vec<u8>>) -> Vec<u8> {
    let mut v = Vec::new();
    for k in keys {
        v.extend_from_slice(&u16::try_from(k.len()).unwrap_or(u16::MAX).to_be_bytes());
        v.extend_from_slice(k);
    }
    v
}

/// Puts `value` (`None`: deletes) at the policy key `key` in `b`, with the
/// new version, its log entry and the count. The caller serialises its
/// read-modify-write; the store has one writer. Several changes in one
/// batch are one version.
fn change(store: &Store, b: &mut Batch, key: Vec<u8>, value: Option<Vec<u8>>) -> Result<()> {
    let mut pending = match b.policies.take() {
        Some(p) => p,
        None => PolicyPending {
            version: version(store)?.wrapping_add(1),
            ..PolicyPending::default()
        },
    };
    let existed = match pending.present.get(&key) {
        Some(&p) => p,
        None => store.get(Family::Meta, &key)?.is_some(),
    };
    let next = pending.version;
    b.put(Family::Meta, VERSION.to_vec(), next.to_be_bytes().to_vec());
    if next > LOG_KEEP {
        // A point delete: range tombstones in the memtable slowed every
        // read of the family until a flush.
        b.delete(Family::Meta, log_key(next - LOG_KEEP));
    }
    let exists = value.is_some();
    if existed != exists {
        let n = match pending.count {
            Some(n) => n,
            None => count(store)?,
        };
        let n = if exists { n + 1 } else { n.saturating_sub(1) };
        pending.count = Some(n);
        b.put(
            Family::Meta,
            COUNT.to_vec(),
            (n as u64).to_be_bytes().to_vec(),
        );
    }
    pending.present.insert(key.clone(), exists);
    // Every key the batch changed so far: the last put of the entry wins.
    let mut keys: Vec<&Vec<u8>> = pending.present.keys().collect();
    keys.sort_unstable();
    b.put(Family::Meta, log_key(next), log_value(keys));
    b.policies = Some(pending);
    match value {
        Some(v) => b.put(Family::Meta, key, v),
        None => b.delete(Family::Meta, key),
    }
    Ok(())
}

/// Puts a tenant's policy in `b`, replacing any; an empty one deletes it.
pub fn put_tenant(store: &Store, b: &mut Batch, t: &TenantPolicy) -> Result<()> {
    let key = Subject::Tenant(t.tenant.clone()).key();
    let value = (!t.policy.is_empty()).then(|| t.policy.encode(t.at, &t.by));
    change(store, b, key, value)
}

/// Puts a sink's limits in `b`, replacing any; empty ones delete them.
pub fn put_sink(store: &Store, b: &mut Batch, s: &StoredSinkLimits) -> Result<()> {
    let key = Subject::Sink(s.sink.clone()).key();
    let value = (!s.limits.is_empty()).then(|| s.limits.encode(s.at, &s.by));
    change(store, b, key, value)
}

/// The stored policy of a tenant, if any.
pub fn tenant(store: &Store, tenant: &str) -> Result<Option<TenantPolicy>> {
    let key = Subject::Tenant(tenant.to_owned()).key();
    match store.get(Family::Meta, &key)? {
        Some(v) => {
            let (policy, at, by) = Policy::decode(&v)?;
            Ok(Some(TenantPolicy {
                tenant: tenant.to_owned(),
                policy,
                at,
                by,
            }))
        }
        None => Ok(None),
    }
}

/// The stored limits of a sink, if any.
pub fn sink(store: &Store, sink: &SinkRef) -> Result<Option<StoredSinkLimits>> {
    let key = Subject::Sink(sink.clone()).key();
    match store.get(Family::Meta, &key)? {
        Some(v) => {
            let (limits, at, by) = SinkLimits::decode(&v)?;
            Ok(Some(StoredSinkLimits {
                sink: sink.clone(),
                limits,
                at,
                by,
            }))
        }
        None => Ok(None),
    }
}

/// Every stored policy: tenants (in id order), then sinks. At most
/// [`MAX_POLICIES`] rows in all.
pub fn list(store: &Store) -> Result<(Vec<TenantPolicy>, Vec<StoredSinkLimits>)> {
    let lo = PREFIX.to_vec();
    let mut hi = PREFIX.to_vec();
    if let Some(last) = hi.last_mut() {
        *last += 1;
    }
    let (mut ts, mut ss) = (Vec::new(), Vec::new());
    store.scan(Family::Meta, &lo, &hi, Dir::Forward, |k, v| {
        match Subject::decode_key(k)? {
            Subject::Tenant(tenant) => {
                let (policy, at, by) = Policy::decode(v)?;
                ts.push(TenantPolicy {
                    tenant,
                    policy,
                    at,
                    by,
                });
            }
            Subject::Sink(sink) => {
                let (limits, at, by) = SinkLimits::decode(v)?;
                ss.push(StoredSinkLimits {
                    sink,
                    limits,
                    at,
                    by,
                });
            }
        }
        Ok(if ts.len() + ss.len() >= MAX_POLICIES {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })?;
    Ok((ts, ss))
}

/// How many policy rows are stored (what [`MAX_POLICIES`] bounds): one
/// point read, or on a store no change has counted yet, a scan.
pub fn count(store: &Store) -> Result<usize> {
    if let Some(v) = store.get(Family::Meta, COUNT)? {
        let mut r = Reader::new(&v, "policy count");
        let n = r.u64()?;
        r.finish()?;
        return Ok(usize::try_from(n).unwrap_or(usize::MAX));
    }
    let (t, s) = list(store)?;
    Ok(t.len() + s.len())
}

/// The policy keys changed by the versions in `(after, upto]`, each once;
/// `None` when the log does not hold every one of them (pruned, or written
/// before the log existed).
fn changed_since(store: &Store, after: u64, upto: u64) -> Result<Option<Vec<Vec<u8>>>> {
    if upto <= after || upto - after > LOG_KEEP {
        return Ok(None);
    }
    let mut lo = LOG.to_vec();
    lo.extend_from_slice(&(after + 1).to_be_bytes());
    let mut hi = LOG.to_vec();
    hi.extend_from_slice(&(upto.saturating_add(1)).to_be_bytes());
    let mut versions = 0u64;
    let mut keys = Vec::new();
    store.scan(Family::Meta, &lo, &hi, Dir::Forward, |_, v| {
        versions += 1;
        let mut r = Reader::new(v, "policy log entry");
        while !r.at_end() {
            keys.push(r.bytes16()?.to_vec());
        }
        Ok(ControlFlow::Continue(()))
    })?;
    if versions != upto - after {
        return Ok(None);
    }
    keys.sort_unstable();
    keys.dedup();
    Ok(Some(keys))
}

/// The stored policies resolved for the dispatcher: tenants by ordinal.
/// A policy of a tenant the store no longer knows (erased) covers nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policies {
    /// The [`version`] this was read at.
    pub version: u64,
    pub tenants: HashMap<u32, Policy>,
    pub sinks: HashMap<SinkRef, SinkLimits>,
}

impl Policies {
    /// Reads the table (one bounded scan, one point read per tenant).
    pub fn load(store: &Store) -> Result<Policies> {
        // Read first: a change committed during the scan moves the version
        // past this one, so the next comparison reads again.
        let version = version(store)?;
        let (ts, ss) = list(store)?;
        let mut tenants = HashMap::with_capacity(ts.len());
        for t in ts {
            if let Some(ord) = tenants::ord_of(store, &t.tenant)? {
                tenants.insert(ord, t.policy);
            }
        }
        Ok(Policies {
            version,
            tenants,
            sinks: ss.into_iter().map(|s| (s.sink, s.limits)).collect(),
        })
    }

    /// Brings this up to the store's [`version`]: nothing when it has not
    /// moved, a point read for each policy changed since when the log has
    /// them all, else the table whole ([`Policies::load`]).
    pub fn update(&mut self, store: &Store) -> Result<()> {
        let now = version(store)?;
        if now == self.version {
            return Ok(());
        }
        let Some(keys) = changed_since(store, self.version, now)? else {
            *self = Policies::load(store)?;
            return Ok(());
        };
        for key in keys {
            let value = store.get(Family::Meta, &key)?;
            match Subject::decode_key(&key)? {
                Subject::Tenant(tenant) => {
                    let Some(ord) = tenants::ord_of(store, &tenant)? else {
                        continue;
                    };
                    match value {
                        Some(v) => {
                            self.tenants.insert(ord, Policy::decode(&v)?.0);
                        }
                        None => {
                            self.tenants.remove(&ord);
                        }
                    }
                }
                Subject::Sink(sink) => match value {
                    Some(v) => {
                        self.sinks.insert(sink, SinkLimits::decode(&v)?.0);
                    }
                    None => {
                        self.sinks.remove(&sink);
                    }
                },
            }
        }
        // A change committed after the version was read is read again by
        // the next update (its version is past this one).
        self.version = now;
        Ok(())
    }

    pub fn tenant(&self, ord: u32) -> Option<&Policy> {
        self.tenants.get(&ord)
    }
}

#[cfg(test)]
mod tests;
