//! The daemon's background jobs (purge, replay, resume): each runs on a
//! blocking thread, and shutdown asks them all to stop after their current
//! chunk (a stopped job stays `running` and the next boot resumes it).
//!
//! Shared by the admin API, which starts jobs for operators, and the
//! circuit breaker, which starts a resume job when it closes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ankusa_ops::jobs;
use ankusa_ops::model::Job;
use ankusa_store::Store;

use super::clock::SharedClock;

/// Runs jobs on blocking threads and stops them on shutdown.
#[derive(Default)]
pub struct JobRunner {
    stop: Arc<AtomicBool>,
    running: Arc<AtomicU64>,
    threads: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl JobRunner {
    /// Runs `job` to its end (or to shutdown) in the background.
    pub fn spawn(&self, store: Arc<Store>, clock: SharedClock, job: Job) {
        let stop = self.stop.clone();
        let running = self.running.clone();
        running.fetch_add(1, Ordering::Relaxed);
        let id = job.id;
        let handle = tokio::task::spawn_blocking(move || {
            let now = || clock.now_ms();
            match jobs::run(&store, job, &now, &stop, |_| {}) {
                Ok(j) => {
                    tracing::info!(job = id, state = ?j.state, rows = j.progress.rows(), "job ended")
                }
                Err(e) => {
                    tracing::error!(job = id, error = %e, "job stopped on an error; it resumes at the next boot")
                }
            }
            running.fetch_sub(1, Ordering::Relaxed);
        });
        let mut threads = self
            .threads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        threads.retain(|h| !h.is_finished());
        threads.push(handle);
    }

    pub fn running(&self) -> u64 {
        self.running.load(Ordering::Relaxed)
    }

    /// Asks every job to stop after its current chunk and waits for them.
    pub async fn shutdown(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let threads = std::mem::take(
            &mut *self
                .threads
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for t in threads {
            let _ = t.await;
        }
    }
}
