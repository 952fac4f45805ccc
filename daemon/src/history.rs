//! The node's last hour, kept by the daemon: one sample every
//! [`STEP`] of its cumulative totals, backlog and oldest-due age, so a
//! console opened at 3 a.m. shows the trends of the hour before it opened
//! (`GET /v1/admin/history`).
//!
//! Invariants: at most [`KEEP`] samples (an hour), memory bounded whatever
//! the load; each sample is a few point reads of the node aggregate and one
//! seek of the active index, never a fold; nothing of it is stored (a
//! restart starts the hour again).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ankusa_ops::model::{HistorySample, NodeHistory};
use ankusa_store::{queries, Store};
use tokio::sync::watch;

use super::clock::SharedClock;

/// Time between samples.
pub const STEP: Duration = Duration::from_secs(10);
/// Samples kept: an hour.
pub const KEEP: usize = 360;

/// The ring of samples.
#[derive(Debug, Default)]
pub struct History {
    samples: Mutex<VecDeque<HistorySample>>,
}

impl History {
    fn push(&self, s: HistorySample) {
        let mut ring = self
            .samples
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if ring.len() == KEEP {
            ring.pop_front();
        }
        ring.push_back(s);
    }

    /// The samples, oldest first.
    pub fn snapshot(&self) -> NodeHistory {
        let ring = self
            .samples
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        NodeHistory {
            step_ms: u64::try_from(STEP.as_millis()).unwrap_or(u64::MAX),
            samples: ring.iter().cloned().collect(),
        }
    }
}

/// One sample of the node now.
pub fn sample(store: &Store, now: u64) -> Result<HistorySample, ankusa_store::StoreError> {
    let (node, totals) = queries::tallies(store, 0)?;
    let oldest = queries::oldest_due(store)?;
    Ok(HistorySample {
        at: now,
        totals,
        backlog: node.pending + node.scheduled,
        oldest_due_age_ms: oldest.map_or(0, |o| now.saturating_sub(o.at)),
    })
}

/// Samples every [`STEP`] until `stop`.
pub fn start(
    store: Arc<Store>,
    clock: SharedClock,
    history: Arc<History>,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(STEP);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = every.tick() => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            let (s, now) = (store.clone(), clock.now_ms());
            match tokio::task::spawn_blocking(move || sample(&s, now)).await {
                Ok(Ok(x)) => history.push(x),
                Ok(Err(e)) => tracing::debug!(error = %e, "history sample skipped"),
                Err(e) => tracing::error!(error = %e, "history sample panicked"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_the_last_hour_oldest_first() {
        let h = History::default();
        for i in 0..(KEEP as u64 + 5) {
            h.push(HistorySample {
                at: i,
                totals: Default::default(),
                backlog: i as i64,
                oldest_due_age_ms: 0,
            });
        }
        let s = h.snapshot();
        assert_eq!(s.samples.len(), KEEP);
        assert_eq!(s.samples[0].at, 5);
        assert_eq!(s.samples[KEEP - 1].at, KEEP as u64 + 4);
        assert_eq!(s.step_ms, 10_000);
    }
}
