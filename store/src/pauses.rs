//! Pauses: scopes whose rows stay queued and are not claimed.
//!
//! A pause names a tenant, a sink (`source/index`), or a sink for one
//! tenant. It is a meta row (`m:pause:` + scope), so it survives a restart
//! and any opener (daemon, console, command line) sees the same set.
//!
//! How the dispatcher applies them (the reason for the two mechanisms):
//! - A paused **tenant** is simply not offered to the scheduler: its rows
//!   stay where they are, its markers stay, it takes no place in the scan
//!   window, and resuming it costs nothing (its rows are already due).
//! - A paused **sink** (node-wide or for one tenant) cannot be skipped that
//!   way: its rows are mixed with the tenant's other rows in due order, and
//!   leaving them at the head would block the tenant's other sinks. The
//!   dispatcher instead *parks* such a row when it meets it: the row moves
//!   to due time [`PARKED_AT`] (same kind, same attempts, same counters),
//!   with its marker in that far second, which no tick ever reaches.
//!   Resuming the scope unparks its rows (due now) in chunks.
//!
//! Invariants:
//! - At most [`MAX_PAUSES`] pauses; more are refused.
//! - A due row with `at >= PARKED_AT` is parked, and only `transitions`
//!   parks or unparks rows.
//!
//! Key layout: `m:pause:` then the scope: `t tenant:str16`,
//! `s source:str16 sink:u16`, or `b tenant:str16 source:str16 sink:u16`.
//! Value (version 1): `1:u8 at:u64 origin:u8 by:str16` (origin 0 operator,
//! 1 circuit breaker).

use std::collections::HashSet;
use std::ops::ControlFlow;

use crate::batch::Batch;
use crate::codec::{put_str16, Reader};
use crate::error::{DecodeError, Result, StoreError};
use crate::schema::Family;
use crate::store::{Dir, Store};
use crate::tenants;

/// The due time of a parked row: 9999-12-31T23:59:59Z, a second no clock
/// reaches, so no tick claims it and no walk of "due up to now" meets it.
pub const PARKED_AT: u64 = 253_402_300_799_000;

/// Pauses one store holds at most.
pub const MAX_PAUSES: usize = 10_000;

const PREFIX: &[u8] = b"m:pause:";
const V1: u8 = 1;

pub use crate::sinks::SinkRef;

/// What a pause covers: a tenant, a sink, or a sink for one tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scope {
    pub tenant: Option<String>,
    pub sink: Option<SinkRef>,
}

impl Scope {
    pub fn tenant(t: &str) -> Scope {
        Scope {
            tenant: Some(t.to_owned()),
            sink: None,
        }
    }

    pub fn sink(source: &str, sink: u16) -> Scope {
        Scope {
            tenant: None,
            sink: Some(SinkRef {
                source: source.to_owned(),
                sink,
            }),
        }
    }

    /// Whether resuming this scope has rows to unpark (only sink scopes
    /// park rows).
    pub fn parks(&self) -> bool {
        self.sink.is_some()
    }

    fn key(&self) -> Result<Vec<u8>> {
        let mut k = PREFIX.to_vec();
        match (&self.tenant, &self.sink) {
            (Some(t), None) => {
                k.push(b't');
                put_str16(&mut k, t);
            }
            (None, Some(s)) => {
                k.push(b's');
                put_str16(&mut k, &s.source);
                k.extend_from_slice(&s.sink.to_be_bytes());
            }
            (Some(t), Some(s)) => {
                k.push(b'b');
                put_str16(&mut k, t);
                put_str16(&mut k, &s.source);
                k.extend_from_slice(&s.sink.to_be_bytes());
            }
            (None, None) => {
                return Err(StoreError::Invalid(
                    "a pause names a tenant, a sink, or both".into(),
                ))
            }
        }
        Ok(k)
    }

    fn decode_key(k: &[u8]) -> std::result::Result<Scope, DecodeError> {
        let rest = k
            .strip_prefix(PREFIX)
            .ok_or_else(|| DecodeError::new("pause key", "missing m:pause: prefix"))?;
        let mut r = Reader::new(rest, "pause key");
        let scope = match r.u8()? {
            b't' => Scope::tenant(&r.str16()?),
            b's' => {
                let source = r.str16()?;
                Scope::sink(&source, r.u16()?)
            }
            b'b' => {
                let tenant = r.str16()?;
                let source = r.str16()?;
                Scope {
                    tenant: Some(tenant),
                    sink: Some(SinkRef {
                        source,
                        sink: r.u16()?,
                    }),
                }
            }
            other => {
                return Err(DecodeError::new(
                    "pause key",
                    format!("unknown scope byte {other:#04x}"),
                ))
            }
        };
        r.finish()?;
        Ok(scope)
    }
}

impl Scope {
    /// What operators read: [`Scope`]'s words with the sink by its name
    /// ([`crate::sinks::display`]): `sink shop/billing for tenant acme`.
    pub fn label(&self, catalog: &[crate::sinks::SinkEntry]) -> String {
        let sink = |s: &SinkRef| crate::sinks::display(catalog, &s.source, s.sink);
        match (&self.tenant, &self.sink) {
            (Some(t), None) => format!("tenant {t}"),
            (None, Some(s)) => format!("sink {}", sink(s)),
            (Some(t), Some(s)) => format!("sink {} for tenant {t}", sink(s)),
            (None, None) => "nothing".into(),
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.tenant, &self.sink) {
            (Some(t), None) => write!(f, "tenant {t}"),
            (None, Some(s)) => write!(f, "sink {s}"),
            (Some(t), Some(s)) => write!(f, "sink {s} for tenant {t}"),
            (None, None) => write!(f, "nothing"),
        }
    }
}

/// Who put a pause in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Operator,
    /// The sink's circuit breaker.
    Breaker,
}

/// A pause in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pause {
    pub scope: Scope,
    /// Since when (ms).
    pub at: u64,
    pub origin: Origin,
    /// Who paused it (the audit's principal name).
    pub by: String,
}

impl Pause {
    fn encode(&self) -> Vec<u8> {
        let mut v = vec![V1];
        v.extend_from_slice(&self.at.to_be_bytes());
        v.push(match self.origin {
            Origin::Operator => 0,
            Origin::Breaker => 1,
        });
        put_str16(&mut v, &self.by);
        v
    }

    fn decode(scope: Scope, v: &[u8]) -> std::result::Result<Pause, DecodeError> {
        let mut r = Reader::new(v, "pause value");
        r.expect_u8(V1)?;
        let at = r.u64()?;
        let origin = match r.u8()? {
            0 => Origin::Operator,
            1 => Origin::Breaker,
            other => {
                return Err(DecodeError::new(
                    "pause value",
                    format!("unknown origin {other}"),
                ))
            }
        };
        let by = r.str16()?;
        r.finish()?;
        Ok(Pause {
            scope,
            at,
            origin,
            by,
        })
    }
}

/// Puts a pause in `b` (replacing one of the same scope).
pub fn put(b: &mut Batch, p: &Pause) -> Result<()> {
    b.put(Family::Meta, p.scope.key()?, p.encode());
    Ok(())
}

/// Deletes the pause of `scope` in `b`.
pub fn delete(b: &mut Batch, scope: &Scope) -> Result<()> {
    b.delete(Family::Meta, scope.key()?);
    Ok(())
}

/// The pause of exactly `scope`, if any.
pub fn get(store: &Store, scope: &Scope) -> Result<Option<Pause>> {
    match store.get(Family::Meta, &scope.key()?)? {
        Some(v) => Ok(Some(Pause::decode(scope.clone(), &v)?)),
        None => Ok(None),
    }
}

/// Every pause in force, in key order (tenants, then sink-for-tenant, then
/// sinks). At most [`MAX_PAUSES`].
pub fn list(store: &Store) -> Result<Vec<Pause>> {
    let lo = PREFIX.to_vec();
    let mut hi = PREFIX.to_vec();
    if let Some(last) = hi.last_mut() {
        *last += 1;
    }
    let mut out = Vec::new();
    store.scan(Family::Meta, &lo, &hi, Dir::Forward, |k, v| {
        let scope = Scope::decode_key(k)?;
        out.push(Pause::decode(scope, v)?);
        Ok(if out.len() >= MAX_PAUSES {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })?;
    Ok(out)
}

/// The pauses in force, resolved for the dispatcher: tenants by ordinal.
/// A pause of a tenant the store does not know covers nothing yet (it is
/// refused when made; this only happens after a tenant's erasure).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Paused {
    tenants: HashSet<u32>,
    sinks: HashSet<SinkRef>,
    tenant_sinks: HashSet<(u32, SinkRef)>,
    /// Sink positions some sink pause names: a row of another position is
    /// not paused without reading its hook's source.
    positions: HashSet<u16>,
}

impl Paused {
    /// Reads the pauses (one bounded scan, one point read per tenant pause).
    pub fn load(store: &Store) -> Result<Paused> {
        let mut p = Paused::default();
        for pause in list(store)? {
            let ord = match &pause.scope.tenant {
                Some(t) => match tenants::ord_of(store, t)? {
                    Some(o) => Some(o),
                    None => continue,
                },
                None => None,
            };
            match (ord, pause.scope.sink) {
                (Some(o), None) => {
                    p.tenants.insert(o);
                }
                (None, Some(s)) => {
                    p.positions.insert(s.sink);
                    p.sinks.insert(s);
                }
                (Some(o), Some(s)) => {
                    p.positions.insert(s.sink);
                    p.tenant_sinks.insert((o, s));
                }
                (None, None) => {}
            }
        }
        Ok(p)
    }

    pub fn is_empty(&self) -> bool {
        self.tenants.is_empty() && self.sinks.is_empty() && self.tenant_sinks.is_empty()
    }

    /// Whether the tenant is paused as a whole.
    pub fn tenant(&self, ord: u32) -> bool {
        self.tenants.contains(&ord)
    }

    /// Whether a row for sink position `sink` could be paused: if not, its
    /// source need not be read.
    pub fn may_cover(&self, sink: u16) -> bool {
        self.positions.contains(&sink)
    }

    /// Whether a row of tenant `ord` for `sink` of `source` is paused by a
    /// sink pause (node-wide or for the tenant).
    pub fn row(&self, ord: u32, source: &str, sink: u16) -> bool {
        if !self.positions.contains(&sink) {
            return false;
        }
        let s = SinkRef {
            source: source.to_owned(),
            sink,
        };
        self.sinks.contains(&s) || self.tenant_sinks.contains(&(ord, s))
    }

    /// Whether the tenant's own pause of `sink` of `source` holds its rows
    /// (not a node-wide pause of the sink).
    pub fn tenant_sink(&self, ord: u32, source: &str, sink: u16) -> bool {
        self.positions.contains(&sink)
            && self.tenant_sinks.contains(&(
                ord,
                SinkRef {
                    source: source.to_owned(),
                    sink,
                },
            ))
    }

    /// Pauses of tenants, of sinks, and of sinks for one tenant.
    pub fn counts(&self) -> (usize, usize, usize) {
        (
            self.tenants.len(),
            self.sinks.len(),
            self.tenant_sinks.len(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scope_round_trips_through_its_key() {
        let scopes = [
            Scope::tenant("acme"),
            Scope::sink("shop", 3),
            Scope {
                tenant: Some("ü-tenant".into()),
                sink: Some(SinkRef {
                    source: "billing".into(),
                    sink: 0,
                }),
            },
        ];
        for s in scopes {
            let k = s.key().unwrap();
            assert_eq!(Scope::decode_key(&k).unwrap(), s);
        }
        assert!(Scope {
            tenant: None,
            sink: None
        }
        .key()
        .is_err());
        assert!(Scope::decode_key(b"m:pause:z").is_err());
        let mut k = Scope::sink("shop", 3).key().unwrap();
        k.push(0);
        assert!(Scope::decode_key(&k).is_err(), "trailing bytes refused");
    }

    #[test]
    fn a_value_round_trips_and_a_bad_one_is_refused() {
        let p = Pause {
            scope: Scope::tenant("a"),
            at: 42,
            origin: Origin::Breaker,
            by: "breaker".into(),
        };
        assert_eq!(Pause::decode(p.scope.clone(), &p.encode()).unwrap(), p);
        let mut bad = p.encode();
        bad[9] = 7;
        assert!(Pause::decode(p.scope.clone(), &bad).is_err());
    }

    #[test]
    fn parked_rows_are_beyond_any_clock_and_do_not_overflow() {
        let b = crate::keys::bucket_of(PARKED_AT);
        assert!(b.checked_mul(1000).is_some());
        assert!(PARKED_AT > crate::clock::system_now_ms() * 100);
    }
}
