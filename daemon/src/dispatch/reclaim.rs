//! The reclaim task: deletes, in passes, the hooks no row owes any more.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ankusa_store::{transitions, Store};
use tokio::sync::watch;

use crate::metrics::Metrics;

/// Periodically deletes hooks no row owes any more.
pub(super) async fn reclaim_loop(
    store: Arc<Store>,
    metrics: Arc<Metrics>,
    interval: Duration,
    batch: usize,
    mut stop: watch::Receiver<bool>,
    mut external: watch::Receiver<bool>,
) {
    let mut every = tokio::time::interval(interval);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
            _ = external.wait_for(|s| *s) => return,
        }
        let s = store.clone();
        match tokio::task::spawn_blocking(move || transitions::reclaim_pass(&s, batch)).await {
            Ok(Ok(n)) => {
                metrics.dispatch.reclaimed.fetch_add(n, Ordering::Relaxed);
            }
            Ok(Err(e)) => tracing::error!(error = %e, "reclaim pass failed; retrying"),
            Err(e) => tracing::error!(error = %e, "reclaim pass panicked"),
        }
    }
}
