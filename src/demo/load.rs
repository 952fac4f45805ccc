//! The demo's load generator: real HTTP hooks posted to the daemon.
//!
//! Owns the traffic mix: one tenant flooding the `orders` source, a few
//! dozen regular tenants with Zipf-skewed rates across all three sources,
//! a `signups` source minting new tenants over time, repeated
//! `Idempotency-Key`s (duplicates) and Standard Webhooks signatures on the
//! `payments` source that are now and then wrong or stale.
//!
//! Invariants:
//! - Every random choice comes from one RNG seeded by `--seed`, drawn in
//!   one task, so a seed gives the same schedule of arrivals (which
//!   tenant, which source, duplicate or not, signed how). Only the
//!   idempotency keys carry the run's start time as well.
//! - Bounded: at most [`CONCURRENCY`] requests in flight; the schedule
//!   waits for a free slot instead of queueing, and drops arrivals it fell
//!   more than a second behind on. The tenant set is bounded too
//!   ([`MINT_MAX`] minted tenants), and so is every map keyed by tenant.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sha2::Sha256;
use tokio::sync::{watch, Semaphore};

/// Requests in flight at once.
pub const CONCURRENCY: usize = 64;
/// Tenants the sign-up source mints at most.
pub const MINT_MAX: usize = 1000;
/// The flooding tenant.
pub const FLOOD_TENANT: &str = "noisy";
/// Hooks per second of the flood.
const FLOOD_RATE: f64 = 200.0;
/// Regular tenants, and their hooks per second all together (tenant `k`
/// gets a share proportional to `1/k`).
const REGULARS: usize = 36;
const REGULAR_RATE: f64 = 60.0;
/// New tenants per second on the sign-up source.
const MINT_RATE: f64 = 2.0;
/// How often a regular hook repeats a recent idempotency key.
const DUPLICATE_P: f64 = 0.05;
/// On `payments`: how often the signature is made with the wrong key, or
/// with a timestamp an hour old.
const BAD_SIGNATURE_P: f64 = 0.05;
const STALE_SIGNATURE_P: f64 = 0.01;
/// Recent keys a duplicate is drawn from.
const RECENT_KEYS: usize = 64;

/// The demo's sources, as configured in the daemon (`mod.rs`).
pub const SOURCE_ORDERS: &str = "orders";
pub const SOURCE_PAYMENTS: &str = "payments";
pub const SOURCE_SIGNUPS: &str = "signups";

/// What the load generator counted.
#[derive(Debug, Default)]
pub struct LoadStats {
    pub sent: AtomicU64,
    pub accepted: AtomicU64,
    pub duplicates: AtomicU64,
    pub refused: AtomicU64,
    /// No HTTP answer (connection error or timeout).
    pub errors: AtomicU64,
    /// Tenant -> send time (ms since the origin) of its first request that
    /// was accepted (not a duplicate).
    first_accepted: Mutex<HashMap<String, u64>>,
}

impl LoadStats {
    pub fn first_accepted(&self) -> HashMap<String, u64> {
        self.first_accepted
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }

    pub fn accepted_tenants(&self) -> usize {
        self.first_accepted.lock().map(|m| m.len()).unwrap_or(0)
    }
}

/// How a `payments` request is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signing {
    Good,
    WrongKey,
    Stale,
}

/// One request to send.
#[derive(Debug, Clone)]
struct Post {
    source: &'static str,
    tenant: String,
    key: String,
    /// Only on `payments`.
    signing: Option<Signing>,
    kind: &'static str,
}

/// Who sends next, and when.
#[derive(Debug, Clone, Copy)]
enum Stream {
    Flood,
    Regular(usize),
    Mint,
}

/// Everything a sending task needs.
pub struct Target {
    pub client: reqwest::Client,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    /// The `payments` source's signing key (decoded).
    pub signing_key: Vec<u8>,
    pub origin: Instant,
}

fn regular_name(i: usize) -> String {
    format!("t{:02}", i + 1)
}

/// Runs until `stop` turns true, then waits (bounded) for the requests in
/// flight.
pub async fn run(
    target: Arc<Target>,
    seed: u64,
    stats: Arc<LoadStats>,
    mut stop: watch::Receiver<bool>,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let harmonic: f64 = (1..=REGULARS).map(|k| 1.0 / k as f64).sum();
    let mut streams: Vec<(Stream, f64)> = vec![(Stream::Flood, FLOOD_RATE)];
    for i in 0..REGULARS {
        streams.push((Stream::Regular(i), REGULAR_RATE / harmonic / (i + 1) as f64));
    }
    streams.push((Stream::Mint, MINT_RATE));
    let mut next_at: Vec<f64> = streams
        .iter()
        .map(|(_, rate)| exp(&mut rng, *rate))
        .collect();
    let mut serial = 0u64;
    // Idempotency keys name the run too: a store reused with the same seed
    // must not answer this run's hooks as duplicates of the last run's.
    let run = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut minted = 0usize;
    let mut recent: VecDeque<Post> = VecDeque::with_capacity(RECENT_KEYS);
    let slots = Arc::new(Semaphore::new(CONCURRENCY));
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);

    'run: loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => break 'run,
        }
        let now = target.origin.elapsed().as_secs_f64();
        let mut due: Vec<Post> = Vec::new();
        for (i, (stream, rate)) in streams.iter().enumerate() {
            if next_at[i] < now - 1.0 {
                // Fell behind (a slow machine, a full slot pool): drop the
                // missed arrivals rather than bursting them.
                next_at[i] = now;
            }
            while next_at[i] <= now {
                next_at[i] += exp(&mut rng, *rate);
                match *stream {
                    Stream::Flood => {
                        serial += 1;
                        due.push(Post {
                            source: SOURCE_ORDERS,
                            tenant: FLOOD_TENANT.to_owned(),
                            key: format!("{FLOOD_TENANT}-{run:x}-{serial}"),
                            signing: None,
                            kind: "order.created",
                        });
                    }
                    Stream::Regular(k) => {
                        if !recent.is_empty() && rng.random_bool(DUPLICATE_P) {
                            let pick = rng.random_range(0..recent.len());
                            if let Some(p) = recent.get(pick) {
                                due.push(p.clone());
                                continue;
                            }
                        }
                        serial += 1;
                        let tenant = regular_name(k);
                        let roll: f64 = rng.random();
                        let (source, kind) = if roll < 0.5 {
                            (SOURCE_ORDERS, "order.updated")
                        } else if roll < 0.8 {
                            (SOURCE_PAYMENTS, "payment.captured")
                        } else {
                            (SOURCE_SIGNUPS, "user.invited")
                        };
                        let signing = (source == SOURCE_PAYMENTS).then(|| {
                            let s: f64 = rng.random();
                            if s < BAD_SIGNATURE_P {
                                Signing::WrongKey
                            } else if s < BAD_SIGNATURE_P + STALE_SIGNATURE_P {
                                Signing::Stale
                            } else {
                                Signing::Good
                            }
                        });
                        let post = Post {
                            key: format!("{tenant}-{run:x}-{serial}"),
                            tenant,
                            source,
                            signing,
                            kind,
                        };
                        if !matches!(post.signing, Some(Signing::WrongKey | Signing::Stale)) {
                            if recent.len() == RECENT_KEYS {
                                recent.pop_front();
                            }
                            recent.push_back(post.clone());
                        }
                        due.push(post);
                    }
                    Stream::Mint => {
                        if minted >= MINT_MAX {
                            continue;
                        }
                        minted += 1;
                        let tenant = format!("new-{minted:04}");
                        for _ in 0..rng.random_range(1..=3) {
                            serial += 1;
                            due.push(Post {
                                source: SOURCE_SIGNUPS,
                                key: format!("{tenant}-{run:x}-{serial}"),
                                tenant: tenant.clone(),
                                signing: None,
                                kind: "user.signed_up",
                            });
                        }
                    }
                }
            }
        }
        for post in due {
            let permit = tokio::select! {
                p = slots.clone().acquire_owned() => p,
                _ = stop.wait_for(|s| *s) => break 'run,
            };
            let Ok(permit) = permit else { break 'run };
            let target = target.clone();
            let stats = stats.clone();
            tokio::spawn(async move {
                send(&target, &stats, post).await;
                drop(permit);
            });
        }
    }
    // Every request has a client timeout, so this wait is bounded too.
    let all = u32::try_from(CONCURRENCY).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(Duration::from_secs(15), slots.acquire_many(all)).await;
}

/// An exponential inter-arrival time (seconds) for a Poisson stream.
fn exp(rng: &mut StdRng, rate: f64) -> f64 {
    let u: f64 = rng.random_range(f64::EPSILON..1.0);
    -u.ln() / rate
}

async fn send(target: &Target, stats: &LoadStats, post: Post) {
    let sent_ms = u64::try_from(target.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
    let body = serde_json::json!({
        "type": post.kind,
        "tenant": post.tenant,
        "key": post.key,
        "sent_ms": sent_ms,
    })
    .to_string();
    let mut req = target
        .client
        .post(format!("{}/v1/sources/{}/hooks", target.base, post.source))
        .header("content-type", "application/json")
        .header("x-tenant", &post.tenant)
        .header("idempotency-key", &post.key);
    if let Some(signing) = post.signing {
        let now_s = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let (key, ts): (&[u8], u64) = match signing {
            Signing::Good => (&target.signing_key, now_s),
            Signing::WrongKey => (b"not-the-payments-signing-key", now_s),
            Signing::Stale => (&target.signing_key, now_s.saturating_sub(3600)),
        };
        let id = format!("msg_{}", post.key);
        req = req
            .header("webhook-id", &id)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", sign(key, &id, ts, body.as_bytes()));
    }
    stats.sent.fetch_add(1, Ordering::Relaxed);
    let resp = match req.body(body).send().await {
        Ok(r) => r,
        Err(e) => {
            stats.errors.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(error = %e, "demo load: no answer");
            return;
        }
    };
    if resp.status() != reqwest::StatusCode::ACCEPTED {
        stats.refused.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let duplicate = resp
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v.as_bytes() == b"true");
    if duplicate {
        stats.duplicates.fetch_add(1, Ordering::Relaxed);
        return;
    }
    stats.accepted.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut m) = stats.first_accepted.lock() {
        m.entry(post.tenant).or_insert(sent_ms);
    }
}

/// A Standard Webhooks `v1,<base64>` signature, as a sender makes it.
fn sign(key: &[u8], id: &str, ts: u64, body: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        // HMAC takes keys of any length; an empty signature is refused by
        // the daemon like any other bad one.
        return String::new();
    };
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(body);
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_daemon::signature::{verify, Signed};

    #[test]
    fn good_signatures_verify_and_bad_ones_do_not() {
        let key = b"0123456789abcdef0123";
        let now_s = 1_800_000_000;
        let good = sign(key, "msg_1", now_s, b"{}");
        let signed = Signed {
            id: "msg_1",
            timestamp: "1800000000",
            signature: &good,
        };
        assert!(verify(key, signed, b"{}", now_s * 1000, 300).is_ok());
        let bad = sign(b"another key entirely", "msg_1", now_s, b"{}");
        let signed = Signed {
            signature: &bad,
            ..signed
        };
        assert!(verify(key, signed, b"{}", now_s * 1000, 300).is_err());
    }

    #[test]
    fn the_schedule_is_a_function_of_the_seed() {
        let draw = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..8).map(|_| exp(&mut rng, 10.0)).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
        assert!(draw(3).iter().all(|x| *x > 0.0 && x.is_finite()));
    }
}
