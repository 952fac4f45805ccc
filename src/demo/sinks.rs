//! The demo's four loopback sinks and what they observed.
//!
//! Owns the HTTP endpoints the demo daemon delivers to (healthy, slow,
//! flaky with `Retry-After`, always failing) and the observations the
//! summary is built from: per-sink answer counts, each tenant's first
//! delivery, and how long first attempts waited between the load
//! generator's send and their arrival here.
//!
//! Why the observations live here and not in the daemon: they are the view
//! from the receiving end, which is what a tenant experiences; the daemon's
//! own counters (`/metrics`, the store) are reported beside them.
//!
//! Invariants:
//! - Every answer is decided from the request alone (hook id, attempt, the
//!   seed), so a run's failure pattern does not depend on arrival order.
//! - Memory is bounded: one map entry per tenant (the load generator bounds
//!   the tenants) and fixed-size histograms for delays.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use color_eyre::eyre::{Result, WrapErr};
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::summary::LogHistogram;

/// How a sink answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// `200` at once.
    Healthy,
    /// `200` after 200 to 800 ms.
    Slow,
    /// Half of the attempts get `503` with `Retry-After: 1`, the rest `200`.
    Flaky,
    /// `500` every time, so rows exhaust their attempts and dead-letter.
    Failing,
}

impl Behaviour {
    pub const ALL: [Behaviour; 4] = [
        Behaviour::Healthy,
        Behaviour::Slow,
        Behaviour::Flaky,
        Behaviour::Failing,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Behaviour::Healthy => "healthy",
            Behaviour::Slow => "slow",
            Behaviour::Flaky => "flaky",
            Behaviour::Failing => "failing",
        }
    }
}

/// Requests one sink received and how it answered them.
#[derive(Debug, Default)]
pub struct SinkCounts {
    pub requests: AtomicU64,
    /// Answered 2xx (delivered).
    pub ok: AtomicU64,
    /// Answered with a failure (503 or 500).
    pub failed: AtomicU64,
}

/// What every sink records, shared by the four.
#[derive(Debug)]
pub struct Observed {
    /// The demo's time origin; every time below is milliseconds since it.
    origin: Instant,
    flood_tenant: String,
    /// Tenant -> arrival of its first request a sink accepted.
    first_delivery: Mutex<HashMap<String, u64>>,
    /// Send-to-arrival time of accepted first attempts, flood and others.
    flood_delay: Mutex<LogHistogram>,
    light_delay: Mutex<LogHistogram>,
}

impl Observed {
    pub fn new(origin: Instant, flood_tenant: &str) -> Self {
        Self {
            origin,
            flood_tenant: flood_tenant.to_owned(),
            first_delivery: Mutex::new(HashMap::new()),
            flood_delay: Mutex::new(LogHistogram::default()),
            light_delay: Mutex::new(LogHistogram::default()),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn record(&self, tenant: &str, attempt: u32, sent_ms: Option<u64>) {
        let now = self.now_ms();
        if let Ok(mut m) = self.first_delivery.lock() {
            if !m.contains_key(tenant) {
                m.insert(tenant.to_owned(), now);
            }
        }
        // Retries wait on purpose (backoff, Retry-After); only a first
        // attempt's wait is queueing.
        if attempt != 1 {
            return;
        }
        if let Some(sent) = sent_ms {
            let hist = if tenant == self.flood_tenant {
                &self.flood_delay
            } else {
                &self.light_delay
            };
            if let Ok(mut h) = hist.lock() {
                h.observe(now.saturating_sub(sent));
            }
        }
    }

    /// Tenant -> first delivery (ms since the origin).
    pub fn first_deliveries(&self) -> HashMap<String, u64> {
        self.first_delivery
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }

    pub fn delivered_tenants(&self) -> usize {
        self.first_delivery.lock().map(|m| m.len()).unwrap_or(0)
    }

    pub fn flood_delay(&self) -> LogHistogram {
        self.flood_delay
            .lock()
            .map(|h| h.clone())
            .unwrap_or_default()
    }

    pub fn light_delay(&self) -> LogHistogram {
        self.light_delay
            .lock()
            .map(|h| h.clone())
            .unwrap_or_default()
    }
}

struct SinkState {
    behaviour: Behaviour,
    seed: u64,
    counts: Arc<SinkCounts>,
    observed: Arc<Observed>,
}

/// A running sink.
pub struct Sink {
    pub behaviour: Behaviour,
    pub url: String,
    pub counts: Arc<SinkCounts>,
    task: tokio::task::JoinHandle<()>,
}

impl Sink {
    /// Binds a loopback port and serves until `stop` turns true.
    pub async fn start(
        behaviour: Behaviour,
        seed: u64,
        observed: Arc<Observed>,
        mut stop: watch::Receiver<bool>,
    ) -> Result<Sink> {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .wrap_err_with(|| format!("cannot bind the {} sink", behaviour.name()))?;
        let addr = listener
            .local_addr()
            .wrap_err("cannot read the sink's address")?;
        let counts = Arc::new(SinkCounts::default());
        let state = Arc::new(SinkState {
            behaviour,
            seed,
            counts: counts.clone(),
            observed,
        });
        let app = Router::new()
            .route("/hooks", post(receive))
            .with_state(state);
        let server = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        });
        let name = behaviour.name();
        let task = tokio::spawn(async move {
            if let Err(e) = server.await {
                tracing::error!(sink = name, error = %e, "demo sink stopped");
            }
        });
        Ok(Sink {
            behaviour,
            url: format!("http://{addr}/hooks"),
            counts,
            task,
        })
    }

    /// Waits for the server to finish after the stop signal (bounded: the
    /// daemon, its only client, has already closed its connections).
    pub async fn join(self) {
        let mut task = self.task;
        if tokio::time::timeout(Duration::from_secs(5), &mut task)
            .await
            .is_err()
        {
            task.abort();
        }
    }
}

/// The part of the load generator's body the sinks read.
#[derive(Deserialize)]
struct Probe {
    sent_ms: Option<u64>,
}

async fn receive(State(s): State<Arc<SinkState>>, headers: HeaderMap, body: Bytes) -> Response {
    s.counts.requests.fetch_add(1, Ordering::Relaxed);
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let tenant = text("ankusa-tenant").unwrap_or("default");
    let hook = text("ankusa-hook-id").unwrap_or("");
    let attempt: u32 = text("ankusa-attempt")
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    let roll = roll(s.seed, s.behaviour, hook, attempt);
    let accept = match s.behaviour {
        Behaviour::Healthy | Behaviour::Slow => true,
        Behaviour::Flaky => roll & 1 == 0,
        Behaviour::Failing => false,
    };
    if accept {
        let sent = serde_json::from_slice::<Probe>(&body)
            .ok()
            .and_then(|p| p.sent_ms);
        // Recorded on arrival: the slow sink's sleep is the sink's time,
        // not the relay's.
        s.observed.record(tenant, attempt, sent);
    }
    match s.behaviour {
        Behaviour::Slow => {
            tokio::time::sleep(Duration::from_millis(200 + roll % 601)).await;
        }
        Behaviour::Healthy | Behaviour::Flaky | Behaviour::Failing => {}
    }
    if accept {
        s.counts.ok.fetch_add(1, Ordering::Relaxed);
        return StatusCode::OK.into_response();
    }
    s.counts.failed.fetch_add(1, Ordering::Relaxed);
    if s.behaviour == Behaviour::Flaky {
        let mut r = StatusCode::SERVICE_UNAVAILABLE.into_response();
        r.headers_mut()
            .insert("retry-after", HeaderValue::from_static("1"));
        return r;
    }
    (StatusCode::INTERNAL_SERVER_ERROR, "the demo's failing sink").into_response()
}

/// A deterministic number for one attempt of one hook at one sink.
fn roll(seed: u64, behaviour: Behaviour, hook: &str, attempt: u32) -> u64 {
    // `DefaultHasher::new()` has fixed keys, so the roll is reproducible.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (seed, behaviour.name(), hook, attempt).hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flaky_roll_fails_about_half_and_is_reproducible() {
        let fails = (0..1000)
            .filter(|i| roll(7, Behaviour::Flaky, &format!("hk_{i:016x}"), 1) & 1 == 1)
            .count();
        assert!((400..600).contains(&fails), "{fails}");
        assert_eq!(
            roll(7, Behaviour::Flaky, "hk_1", 2),
            roll(7, Behaviour::Flaky, "hk_1", 2)
        );
    }

    #[test]
    fn only_first_attempts_count_as_delay_and_the_first_delivery_sticks() {
        let o = Observed::new(Instant::now(), "noisy");
        o.record("t01", 2, Some(0));
        o.record("noisy", 1, Some(0));
        o.record("t01", 1, Some(0));
        let first = o.first_deliveries();
        assert_eq!(first.len(), 2);
        assert_eq!(o.flood_delay().stats().count, 1);
        assert_eq!(o.light_delay().stats().count, 1);
    }
}
