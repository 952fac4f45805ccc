//! The node's health, and its recovery from a store that stopped taking
//! writes.
//!
//! Owns the two health paths of the ingest listener and the loop that
//! brings the store back ([`recover_loop`]):
//! - `GET /healthz` (readiness, what a load balancer checks): `200` while
//!   the store takes writes, `503` with the fault while it does not, so a
//!   balancer takes the node out for as long as it could only refuse hooks,
//!   `503 store_damaged` once a read met a damaged table file (until the
//!   store is restored), and `503 draining` while an operator drains the
//!   node.
//! - `GET /livez` (liveness): `200` while the process serves HTTP at all;
//!   a store fault is not a reason to restart the process.
//!
//! Invariants:
//! - Recovery never needs a restart. While the store has a write fault the
//!   loop, every [`RECHECK`], first probes with an empty synced write
//!   (RocksDB may have recovered by itself); if that fails it reopens the
//!   store in place ([`ankusa_store::Store::reopen`]) and probes again.
//!   Out of descriptors or out of disk, the probe or the open fails until
//!   the cause is gone, then the next round succeeds.
//! - A reopen loses nothing acknowledged: every `202` was answered after
//!   its WAL sync, and the open replays the WAL. What the failed writes
//!   may have left is handled by their owners, who watch the store's
//!   generation: the writer reloads its sequence, the dispatcher returns
//!   inflight rows it does not hold to due.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ankusa_ops::wire::{DamageJson, Via};
use ankusa_store::{Store, StoreError};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use tokio::sync::watch;

use super::metrics::Metrics;

/// How often a faulted store is tried again.
pub const RECHECK: Duration = Duration::from_millis(500);
/// How long a reopen waits for operations in progress on the old handle.
pub const REOPEN_WAIT: Duration = Duration::from_secs(5);

/// `GET /healthz`.
pub fn readiness(store: &Store) -> Response {
    if let (None, Some(d)) = (store.write_fault(), store.damage()) {
        // Not ready for good: some reads fail on every try, and a restart
        // would not mend the file (liveness stays 200, so nothing
        // restarts the process into a loop).
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({
                "status": "unavailable",
                "reason": "store_damaged",
                "message": "a table file of the store is damaged: reads that need it fail; stop the daemon and restore the store from a backup (docs/deployment.md, \"A damaged table file\")",
                "damage": Via::<DamageJson, _>::new(&d),
            })),
        )
            .into_response();
    }
    match store.write_fault() {
        None => match ankusa_store::node::drain(store) {
            Ok(None) => Json(json!({"status": "ok"})).into_response(),
            // A balancer stops sending; what arrives is still accepted.
            Ok(Some(d)) => (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({
                    "status": "draining",
                    "reason": "draining",
                    "message": "the node drains: it delivers what it holds and takes no new work from its balancer; `ankusa node undrain` ends it",
                    "since": d.since,
                    "by": d.by,
                })),
            )
                .into_response(),
            Err(e) => (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"status": "unavailable", "reason": "store_error", "message": e.to_string()})),
            )
                .into_response(),
        },
        Some(f) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [("retry-after", "5")],
            Json(json!({
                "status": "unavailable",
                "reason": "store_fault",
                "message": "the store refuses writes; the node recovers by itself when the cause is gone",
                // The admin API's shape of a fault (`daemon.store_fault`).
                "store_fault": ankusa_ops::model::StoreFault::from(f),
            })),
        )
            .into_response(),
    }
}

/// `GET /livez`.
pub fn liveness() -> Response {
    Json(json!({"status": "alive"})).into_response()
}

/// How a fault ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovered {
    /// A probe write succeeded without a reopen.
    ByItself,
    /// The store was reopened in place, then a probe write succeeded.
    Reopened,
}

/// One recovery attempt.
pub fn recover(store: &Store) -> Result<Recovered, StoreError> {
    if store.probe_write().is_ok() {
        return Ok(Recovered::ByItself);
    }
    store.reopen(REOPEN_WAIT)?;
    store.probe_write()?;
    Ok(Recovered::Reopened)
}

/// Watches the store's write fault and recovers from it, until `stop`.
pub async fn recover_loop(
    store: Arc<Store>,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) {
    let mut fault_started: Option<Instant> = None;
    let mut last_logged: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(RECHECK) => {}
            _ = super::listener::stopped(&mut stop) => return,
        }
        if store.write_fault().is_none() {
            metrics.store_fault.store(0, Ordering::Relaxed);
            fault_started = None;
            continue;
        }
        metrics.store_fault.store(1, Ordering::Relaxed);
        let started = *fault_started.get_or_insert_with(Instant::now);
        let s = store.clone();
        match tokio::task::spawn_blocking(move || recover(&s)).await {
            Ok(Ok(how)) => {
                metrics.store_fault.store(0, Ordering::Relaxed);
                metrics.store_recoveries.fetch_add(1, Ordering::Relaxed);
                fault_started = None;
                tracing::warn!(
                    how = ?how,
                    seconds = started.elapsed().as_secs_f64(),
                    "the store takes writes again; the node is ready"
                );
            }
            Ok(Err(e)) => {
                if last_logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                    tracing::error!(error = %e, "the store still refuses writes; retrying");
                    last_logged = Some(Instant::now());
                }
            }
            Err(e) => tracing::error!(error = %e, "the store recovery task failed"),
        }
    }
}
