//! The recorder: commits delivery outcomes in groups, on a thread of its
//! own.
//!
//! Why: an outcome is a small unsynced commit, but RocksDB makes every write
//! wait for the write group ahead of it, and the ingest writer's groups end
//! in an fsync. Committed from the delivery's task, each outcome held a
//! runtime worker for about an fsync (5-6 ms measured under `bench
//! delivery`), and on two cores the runtime has two workers: ingest,
//! deliveries and the sinks' answers queued behind the disk, and the row's
//! node slot stayed taken all that time (issue 19). Deliveries now hand
//! their batch to this thread and await its answer; it commits every
//! outcome waiting as one batch, so a group costs one wait whatever its
//! size.
//!
//! Invariants:
//! - An outcome is answered only after the commit that holds it returned,
//!   and with that commit's result: the row leaves inflight (the
//!   dispatcher's count) only once its outcome is in the store, as before.
//! - A failed group commit fails every outcome in it. Each row stays
//!   inflight, is counted unrecorded, and the next tick returns it to due:
//!   at least once, as for one outcome that failed alone.
//! - Memory is bounded by the rows in flight (`max_inflight`): every sender
//!   waits for its answer before it can send again, and a group holds at
//!   most [`GROUP_MAX`] outcomes.
//! - The thread ends when the last handle is dropped; outcomes it never
//!   committed are rows still inflight, which boot recovery returns to due.

use std::sync::mpsc;
use std::sync::Arc;

use ankusa_store::{Batch, Store, StoreError};
use tokio::sync::oneshot;

/// Outcomes committed together at most: a group stays a small write.
pub const GROUP_MAX: usize = 512;

/// Why an outcome was not recorded.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RecordError {
    /// The group's commit failed (every outcome in it shares this error).
    #[error("the outcome's commit failed: {0}")]
    Store(Arc<StoreError>),
    /// The recorder's thread is gone (the daemon is stopping).
    #[error("the outcome recorder has stopped")]
    Stopped,
}

/// Where an outcome's answer goes.
type Answer = oneshot::Sender<Result<(), RecordError>>;

struct Pending {
    batch: Batch,
    done: Answer,
}

/// A handle to the recorder's thread. Dropping it closes the channel and
/// joins the thread, so no commit of it is still running once its owner is
/// gone: a detached thread still inside RocksDB when the process exits
/// runs against RocksDB's static destructors, and RocksDB aborts
/// (`pthread lock: Invalid argument`, SIGABRT after "stopped cleanly").
pub struct Recorder {
    tx: Option<mpsc::Sender<Pending>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            // The thread ends once the channel is closed and its last
            // group committed; a panic in it was already reported.
            let _ = t.join();
        }
    }
}

impl Recorder {
    /// Starts the thread that commits to `store`.
    pub fn start(store: Arc<Store>) -> std::io::Result<Recorder> {
        let (tx, rx) = mpsc::channel::<Pending>();
        let thread = std::thread::Builder::new()
            .name("ankusa-record".into())
            .spawn(move || {
                while let Some((batch, waiting)) = next_group(&rx) {
                    let result = store
                        .fault("delivery.record")
                        .and_then(|()| store.commit(batch, false))
                        .map_err(|e| RecordError::Store(Arc::new(e)));
                    for done in waiting {
                        // A sender that stopped waiting (its task was
                        // dropped at shutdown) leaves a row boot recovers.
                        let _ = done.send(result.clone());
                    }
                }
            })?;
        Ok(Recorder {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Commits `batch` (unsynced) with whatever else is waiting, and
    /// answers once that commit returned.
    pub async fn commit(&self, batch: Batch) -> Result<(), RecordError> {
        let (done, answer) = oneshot::channel();
        self.tx
            .as_ref()
            .ok_or(RecordError::Stopped)?
            .send(Pending { batch, done })
            .map_err(|_| RecordError::Stopped)?;
        answer.await.map_err(|_| RecordError::Stopped)?
    }
}

/// Blocks for the next outcome, then takes every outcome already waiting,
/// up to [`GROUP_MAX`], as one batch. `None` once every handle is gone.
fn next_group(rx: &mpsc::Receiver<Pending>) -> Option<(Batch, Vec<Answer>)> {
    let first = rx.recv().ok()?;
    let mut batch = first.batch;
    let mut waiting = vec![first.done];
    while waiting.len() < GROUP_MAX {
        let Ok(p) = rx.try_recv() else {
            break;
        };
        match batch.absorb(p.batch) {
            Ok(()) => waiting.push(p.done),
            // Outcome batches are all alike; one that cannot join a group
            // is refused rather than committed on a path of its own.
            Err(_) => {
                let _ = p
                    .done
                    .send(Err(RecordError::Store(Arc::new(StoreError::Invalid(
                        "an outcome batch that cannot join a group".into(),
                    )))));
            }
        }
    }
    Some((batch, waiting))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_store::queries;
    use ankusa_store::transitions;

    /// `n` hooks of tenant 1 ingested and claimed; returns the claimed rows.
    fn claimed(store: &Store, n: u64) -> Vec<ankusa_store::InflightRow> {
        let mut b = Batch::new();
        for seq in 1..=n {
            ankusa_store::fixture::ingest_plain(&mut b, "s", seq, 1, 1_000, 1);
        }
        store.commit(b, true).unwrap();
        let due =
            queries::due_for_tenant(store, 1, 2_000, 0, 1_000, u64::MAX, &mut Vec::new()).unwrap();
        let mut b = Batch::new();
        let rows: Vec<_> = due.iter().map(|r| transitions::claim(&mut b, r)).collect();
        store.commit(b, false).unwrap();
        assert_eq!(rows.len() as u64, n);
        rows
    }

    fn delivered(row: &ankusa_store::InflightRow) -> Batch {
        let mut b = Batch::new();
        transitions::delivered(&mut b, row);
        b
    }

    /// Outcomes waiting when the thread looks are one group, one commit.
    #[test]
    fn waiting_outcomes_form_one_group() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let rows = claimed(&store, 5);
        let (tx, rx) = mpsc::channel();
        let mut answers = Vec::new();
        for r in &rows {
            let (done, answer) = oneshot::channel();
            tx.send(Pending {
                batch: delivered(r),
                done,
            })
            .unwrap();
            answers.push(answer);
        }
        let (batch, waiting) = next_group(&rx).unwrap();
        assert_eq!(waiting.len(), 5);
        store.commit(batch, false).unwrap();
        assert_eq!(queries::counters(&store, 1).unwrap().inflight, 0);
        drop(tx);
        assert!(next_group(&rx).is_none());
    }

    /// Every outcome is answered with its group's commit: all recorded, or,
    /// when the commit fails, all refused and every row still inflight.
    #[test]
    fn a_group_shares_its_commits_result() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::create_or_open(&dir.path().join("s")).unwrap());
        let rows = claimed(&store, 40);
        let rec = Recorder::start(store.clone()).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        store.arm_fault("delivery.record", Some(ankusa_store::faults::Action::Error));
        let rec = Arc::new(rec);
        let all = |rows: &[ankusa_store::InflightRow]| {
            let batches: Vec<Batch> = rows.iter().map(delivered).collect();
            let rec = rec.clone();
            rt.block_on(async move {
                let mut set = tokio::task::JoinSet::new();
                for b in batches {
                    let rec = rec.clone();
                    set.spawn(async move { rec.commit(b).await });
                }
                set.join_all().await
            })
        };
        let failed = all(&rows[..20]);
        assert!(failed
            .iter()
            .all(|r| matches!(r, Err(RecordError::Store(_)))));
        assert_eq!(queries::counters(&store, 1).unwrap().inflight, 40);
        store.arm_fault("delivery.record", None);
        let ok = all(&rows);
        assert!(ok.iter().all(Result::is_ok), "{ok:?}");
        assert_eq!(queries::counters(&store, 1).unwrap().inflight, 0);
    }
}
