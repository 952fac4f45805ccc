//! Policy as the dispatcher applies it: each tenant's weight, share, cap
//! and rate, and each sink's in-flight bound and rate, from the stored
//! overrides (`ankusa_store::policy`) over the configured defaults.
//!
//! Owns the cached policy table (read again only when the store's policy
//! version moved, so a change applies on the next tick) and the token
//! buckets of the rates.
//!
//! How each part binds (docs/fairness.md, "Policy"):
//! - `weight` is the tenant's share within its source's group;
//! - `share` is the scheduler's cap: the slots it is served up to before
//!   anyone borrows, bounded by the node's ceiling;
//! - `cap` bounds its rows in flight, borrowing included: the head walk
//!   reads no more rows than it leaves room for;
//! - a `rate` is a bucket of one second's claims (at least one), refilled
//!   continuously; a tenant or sink without tokens has no row to offer
//!   this tick, so like a paused one it is not ready and holds no floor,
//!   and its rows stay due without an attempt spent.
//!
//! Invariants: a bucket is charged only for rows whose claim committed;
//! the buckets kept are those not full (a full bucket and no bucket are
//! the same), so they are bounded by the tenants and sinks recently
//! served.

use std::collections::HashMap;
use std::sync::Arc;

use ankusa_store::policy::{Policies, Policy, Rate, SinkLimits};
use ankusa_store::{Store, StoreError};

use super::held::PolicyHeld;
use super::{DispatchSettings, SinkBounds, SinkKey, SinkMap};
use crate::config::Source;

/// A delivery in millionths: what a bucket counts in, so that the lowest
/// rate (a thousandth a second) still gains a whole number of units each
/// millisecond.
const UNIT: u64 = 1_000_000;

/// Buckets are swept of full ones every this many ticks.
const SWEEP_TICKS: u64 = 256;

/// A token bucket of one rate.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Millionths of a claim available at `at`.
    micro: u64,
    at: u64,
}

fn burst(rate: Rate) -> u64 {
    // One second of the rate, and at least one claim: a rate below one a
    // second still lets one claim through when its turn comes.
    rate.milli().saturating_mul(1000).max(UNIT)
}

impl Bucket {
    fn full(rate: Rate, now: u64) -> Bucket {
        Bucket {
            micro: burst(rate),
            at: now,
        }
    }

    /// Millionths available at `now` (never past the burst).
    fn level(&self, rate: Rate, now: u64) -> u64 {
        // rate.milli() thousandths a second gain that many millionths a
        // millisecond.
        let gained = now.saturating_sub(self.at).saturating_mul(rate.milli());
        self.micro.saturating_add(gained).min(burst(rate))
    }

    fn whole(&self, rate: Rate, now: u64) -> u32 {
        u32::try_from(self.level(rate, now) / UNIT).unwrap_or(u32::MAX)
    }

    fn spend(&mut self, rate: Rate, now: u64, claims: u32) {
        self.micro = self
            .level(rate, now)
            .saturating_sub(u64::from(claims).saturating_mul(UNIT));
        self.at = now;
    }
}

/// What one tenant may take this tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turn {
    /// Its weight in its group (the scheduler's `weight`).
    pub weight: u32,
    /// Its guaranteed slots (the scheduler's `cap`).
    pub share: u32,
    /// Its rows in flight at most, borrowing included.
    pub ceiling: u32,
    /// Claims its rate allows now (`u32::MAX` without a rate).
    pub tokens: u32,
    /// Whether its own cap (stored or configured) sets `ceiling`, not the
    /// node's.
    pub capped: bool,
}

impl Turn {
    /// Rows a visit may read for it with `busy` in flight.
    pub fn room(&self, busy: u32) -> u32 {
        self.ceiling.saturating_sub(busy).min(self.tokens)
    }

    /// Whether its rate, not its cap, is what leaves it no room.
    pub fn held_by_rate(&self, busy: u32) -> bool {
        self.tokens == 0 && self.ceiling > busy
    }

    /// Whether its policy (its cap or its rate), not the node's ceiling,
    /// sets its room with `busy` in flight: a visit that fills that room
    /// found the tenant over its policy.
    pub fn policy_binds(&self, busy: u32) -> bool {
        let room = self.room(busy);
        (self.tokens != u32::MAX && self.tokens == room)
            || (self.capped && self.ceiling.saturating_sub(busy) == room)
    }
}

/// The policies one tick plans with.
#[derive(Debug)]
pub struct TickPolicy<'a> {
    steer: &'a Steering,
    now: u64,
    /// The node's ceiling (`DispatchSettings::tenant_ceiling`).
    node_ceiling: u32,
    defaults: Policy,
}

impl TickPolicy<'_> {
    /// The turn of tenant `ord`: its policy over the defaults.
    pub fn turn(&self, ord: u32) -> Turn {
        let p = match self.steer.policies.tenant(ord) {
            Some(own) => own.over(&self.defaults),
            None => self.defaults,
        };
        let ceiling = p
            .cap
            .map_or(self.node_ceiling, |c| c.min(self.node_ceiling));
        let tokens = match p.rate {
            None => u32::MAX,
            Some(rate) => self
                .steer
                .tenant_buckets
                .get(&ord)
                .map_or_else(|| Bucket::full(rate, self.now), |b| *b)
                .whole(rate, self.now),
        };
        Turn {
            weight: p.weight.unwrap_or(1).max(1),
            share: p.share.unwrap_or(1).max(1).min(ceiling),
            ceiling,
            tokens,
            capped: ceiling < self.node_ceiling,
        }
    }
}

/// The dispatcher's policy state, kept across ticks.
#[derive(Debug, Default)]
pub struct Steering {
    policies: Policies,
    /// The sinks with a limit (configured or stored), rebuilt when the
    /// configuration or the policies changed: (routes generation, policy
    /// version) it was built for.
    limited: Vec<(SinkKey, SinkLimits)>,
    limited_for: Option<(u64, u64)>,
    /// Whether `policies` was read (else the first refresh reads it).
    loaded: bool,
    tenant_buckets: HashMap<u32, Bucket>,
    sink_buckets: HashMap<SinkKey, Bucket>,
    ticks: u64,
    /// The tick of the last sweep of full buckets.
    swept_at: u64,
    /// The tenants found over their policy, and since when.
    pub held: PolicyHeld,
    /// When the metrics' view of `held` was last rebuilt.
    pub held_reported_at: Option<u64>,
}

impl Steering {
    /// A steering that holds `policies` as read at version 0 (tests and
    /// benches that set policies without writing them).
    pub fn with_policies(policies: Policies) -> Steering {
        Steering {
            policies: Policies {
                version: 0,
                ..policies
            },
            loaded: true,
            ..Steering::default()
        }
    }

    /// Reads the policy table again if the store's version moved, and the
    /// limited sinks if that or the configuration changed.
    /// `generation` and `sources`: the live configuration's.
    pub fn refresh(
        &mut self,
        store: &Store,
        generation: u64,
        sources: &[Arc<Source>],
        map: &SinkMap,
    ) -> Result<(), StoreError> {
        if self.loaded {
            // The policies changed since the last tick, read from the
            // change log: O(changed), not the table.
            self.policies.update(store)?;
        } else {
            self.policies = Policies::load(store)?;
            self.loaded = true;
        }
        let stamp = (generation, self.policies.version);
        if self.limited_for != Some(stamp) {
            let mut limited = HashMap::new();
            // By the map's key, not the position in the file: a reload keeps
            // each source's index (`SinkMap::reconfigured`) while the file's
            // order may change.
            for src in sources {
                for (p, k) in src.sinks.iter().enumerate() {
                    let base = SinkLimits {
                        max_in_flight: k
                            .max_in_flight
                            .map(|n| u32::try_from(n.0).unwrap_or(u32::MAX)),
                        rate: k.rate,
                    };
                    let Some(key) = u16::try_from(p).ok().and_then(|p| map.key(&src.id, p)) else {
                        continue;
                    };
                    if !base.is_empty() {
                        limited.insert(key, base);
                    }
                }
            }
            for (s, own) in &self.policies.sinks {
                if let Some(k) = map.key(&s.source, s.sink) {
                    let base = limited.get(&k).copied().unwrap_or_default();
                    limited.insert(k, own.over(&base));
                }
            }
            self.limited = limited.into_iter().collect();
            self.limited_for = Some(stamp);
            // A bucket of a sink whose rate went stays behind harmlessly
            // until the sweep; one whose rate changed keeps its level,
            // capped at the new burst when next read.
        }
        self.ticks = self.ticks.wrapping_add(1);
        Ok(())
    }

    /// Whether [`SWEEP_TICKS`] ticks have passed since the last sweep of
    /// full buckets (and so it is one now). Counted from the last sweep,
    /// not as a multiple of the tick count: the sweep runs where claims are
    /// charged, on the ticks that claim, which need not ever fall on a
    /// multiple (claims every other tick, on the odd ones, never did).
    fn sweep_due(&mut self) -> bool {
        if self.ticks.wrapping_sub(self.swept_at) < SWEEP_TICKS {
            return false;
        }
        self.swept_at = self.ticks;
        true
    }

    /// Tenants and sinks with a stored policy.
    pub fn stored(&self) -> (usize, usize) {
        (self.policies.tenants.len(), self.policies.sinks.len())
    }

    pub fn tick<'a>(&'a self, now: u64, s: &DispatchSettings, defaults: Policy) -> TickPolicy<'a> {
        TickPolicy {
            steer: self,
            now,
            node_ceiling: s.tenant_ceiling(),
            defaults: Policy {
                share: defaults.share.or(Some(s.per_tenant)),
                ..defaults
            },
        }
    }

    /// The limited sinks' bounds at `now`.
    pub fn sink_bounds(&self, now: u64) -> SinkBounds {
        let mut b = SinkBounds::default();
        for &(k, l) in &self.limited {
            if let Some(n) = l.max_in_flight {
                b.in_flight.insert(k, n);
            }
            if let Some(rate) = l.rate {
                let level = self
                    .sink_buckets
                    .get(&k)
                    .map_or_else(|| Bucket::full(rate, now), |x| *x)
                    .whole(rate, now);
                b.tokens.insert(k, level);
            }
        }
        b
    }

    /// Charges the rates for the rows a committed claim took: per tenant
    /// and per sink.
    pub fn charge(
        &mut self,
        now: u64,
        defaults: Policy,
        tenants: impl IntoIterator<Item = (u32, u32)>,
        sinks: impl IntoIterator<Item = (SinkKey, u32)>,
    ) {
        for (ord, n) in tenants {
            let rate = self
                .policies
                .tenant(ord)
                .and_then(|p| p.rate)
                .or(defaults.rate);
            if let Some(rate) = rate {
                self.tenant_buckets
                    .entry(ord)
                    .or_insert_with(|| Bucket::full(rate, now))
                    .spend(rate, now, n);
            }
        }
        let rates: HashMap<SinkKey, Rate> = self
            .limited
            .iter()
            .filter_map(|&(k, l)| Some((k, l.rate?)))
            .collect();
        for (k, n) in sinks {
            if let Some(&rate) = rates.get(&k) {
                self.sink_buckets
                    .entry(k)
                    .or_insert_with(|| Bucket::full(rate, now))
                    .spend(rate, now, n);
            }
        }
        if self.sweep_due() {
            let pol = &self.policies;
            self.tenant_buckets.retain(|ord, b| {
                let rate = pol.tenant(*ord).and_then(|p| p.rate).or(defaults.rate);
                rate.is_some_and(|r| b.level(r, now) < burst(r))
            });
            self.sink_buckets
                .retain(|k, b| rates.get(k).is_some_and(|&r| b.level(r, now) < burst(r)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 47: the sweep was asked only on ticks that claim, and ran on
    /// those whose number was a multiple of 256: with claims on odd ticks
    /// only, never.
    #[test]
    fn full_buckets_are_swept_every_256_ticks_whatever_ticks_claim() {
        let mut s = Steering::default();
        let mut sweeps = 0;
        for tick in 1..=1024u64 {
            s.ticks = tick;
            if tick % 2 == 1 && s.sweep_due() {
                sweeps += 1;
            }
        }
        assert_eq!(sweeps, 3, "at ticks 257, 513 and 769");
    }

    #[test]
    fn a_bucket_refills_at_its_rate_up_to_one_second_of_it() {
        let rate: Rate = "50/s".parse().unwrap();
        let mut b = Bucket::full(rate, 0);
        assert_eq!(b.whole(rate, 0), 50, "starts with one second's claims");
        b.spend(rate, 0, 50);
        assert_eq!(b.whole(rate, 0), 0);
        assert_eq!(b.whole(rate, 19), 0, "19 ms earn 0.95 of a claim");
        assert_eq!(b.whole(rate, 20), 1);
        assert_eq!(b.whole(rate, 500), 25);
        assert_eq!(b.whole(rate, 60_000), 50, "never more than the burst");
        // Spending more than there is leaves nothing, never a debt that
        // wraps.
        b.spend(rate, 100, 1_000);
        assert_eq!(b.whole(rate, 100), 0);
    }

    #[test]
    fn a_slow_rate_still_lets_one_claim_through() {
        let rate: Rate = "30/m".parse().unwrap();
        let mut b = Bucket::full(rate, 0);
        assert_eq!(b.whole(rate, 0), 1);
        b.spend(rate, 0, 1);
        assert_eq!(b.whole(rate, 1_999), 0);
        assert_eq!(b.whole(rate, 2_000), 1, "one every two seconds");
    }

    /// A sink's configured rate binds the sink the map names, whatever the
    /// file's order: after a reload the map keeps each source's index.
    /// Guard: keying by the position in the file put `b`'s rate on `a`.
    #[test]
    fn a_configured_sink_rate_binds_that_sink_by_the_maps_index() {
        let text = "[store]\npath = \"s\"\n\n\
            [[sources]]\nid = \"a\"\n[[sources.sinks]]\nurl = \"http://127.0.0.1:9/\"\n\n\
            [[sources]]\nid = \"b\"\n[[sources.sinks]]\nurl = \"http://127.0.0.1:9/\"\nrate = \"10/s\"\n";
        let settings = crate::config::Settings::parse(
            text,
            std::path::Path::new("ankusa.toml"),
            std::path::Path::new("/tmp"),
        )
        .unwrap();
        let sources: Vec<Arc<Source>> = settings.sources.iter().cloned().map(Arc::new).collect();
        // `b` kept index 0 from an earlier configuration; `a` came after.
        let map = SinkMap::of([("b", 1), ("a", 1)]);
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let mut steer = Steering::default();
        steer.refresh(&store, 1, &sources, &map).unwrap();
        let bounds = steer.sink_bounds(0);
        let b = SinkKey { source: 0, sink: 0 };
        assert_eq!(bounds.tokens.get(&b), Some(&10), "{bounds:?}");
        assert_eq!(bounds.tokens.len(), 1, "{bounds:?}");
    }

    #[test]
    fn a_turn_binds_by_cap_and_rate_and_the_share_stays_under_the_ceiling() {
        let t = Turn {
            weight: 1,
            share: 4,
            ceiling: 10,
            tokens: 3,
            capped: true,
        };
        assert_eq!(t.room(0), 3, "the rate binds");
        assert_eq!(t.room(8), 2, "the cap binds");
        assert!(!t.held_by_rate(0));
        let none = Turn { tokens: 0, ..t };
        assert!(none.held_by_rate(0));
        assert!(!none.held_by_rate(10), "at its cap, the cap holds it");
    }
}
