//! The group-commit writer: the one place ingest writes to the store.
//!
//! Owns: the hook sequence counter, the [`TenantAllocator`] (so ordinals are
//! allocated by exactly one writer, in the same batch as the rows that use
//! them), idempotency-key lookups, and the dedupe sweep.
//!
//! Request handlers hand a [`Submission`] to a bounded queue through
//! [`WriterHandle::submit`], which never waits: a full queue (by count or
//! by bytes) is an immediate refusal, so memory is bounded and a slow disk
//! turns into `503 queue_full`, not into piled-up connections.
//!
//! The writer runs on its own OS thread (RocksDB's synced write blocks; it
//! must not stall the async runtime). Each round it takes the first job,
//! gathers more until `max_batch` jobs, `max_batch_bytes` body bytes, or
//! the first job has waited `linger`, then makes **one synced commit** and
//! answers every job of the batch. While a commit is in flight, new jobs
//! queue up and form the next batch: that is the group commit.
//!
//! Invariants:
//! - A job is answered `Accepted` only after the commit holding its hook
//!   returned with the WAL synced.
//! - A failed commit changes nothing in memory: the allocator learns a
//!   resolution and the sequence advances only after a successful commit.
//!   But a failed write may still have reached the WAL (RocksDB refuses a
//!   write whose sync failed, and replays it at the next open), so after a
//!   failure, and after the store was reopened, the next batch first reloads
//!   the sequence and the next ordinal from the store: a seq or an ordinal
//!   is never handed out twice whichever way the failed write ended.
//! - A new tenant past `tenants.max` is refused job by job; the other jobs
//!   of the batch still commit.
//! - Two jobs of one batch with the same (tenant, idempotency key) become
//!   one hook; the second is answered as a duplicate of the first.
//! - The dedupe sweep runs on this thread, between batches. The sweep reads
//!   an entry and deletes it in a later write; run concurrently with ingest
//!   it could delete an entry re-created in between, so it is serialized
//!   with the only writer of entries instead.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_store::tenants::TenantAllocator;
use ankusa_store::transitions::{self, IngestHook, SinkSet};
use ankusa_store::{dedupe, queries, Batch, Envelope, HookId, Store, StoreError};
use tokio::sync::oneshot;

use super::clock::SharedClock;
use super::config::WriterSettings;
use super::metrics::Metrics;
use super::outcome::Outcome;

/// Bytes charged per job beyond its body (envelope fields, headers, keys),
/// so a flood of empty bodies is bounded by `queue_bytes` too.
const JOB_OVERHEAD: usize = 512;
/// Sweep commits per sweep round, so a large expiry backlog never holds
/// ingest back for long.
const SWEEP_ROUNDS: usize = 16;

/// What the writer answers for a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Committed and synced.
    Accepted(HookId),
    /// The idempotency key already names this (committed) hook.
    Duplicate(HookId),
    /// Not written; the outcome says why.
    Refused(Outcome),
}

/// Why a job did not enter the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitError {
    Full,
    Closed,
}

/// Hooks waiting for the writer: one, or a batch request's entries, which
/// are always written by one commit.
#[derive(Debug)]
pub struct Submission {
    /// Each hook and the sink positions it owes rows to (its routing).
    pub entries: Vec<(Envelope, SinkSet)>,
    enqueued: Instant,
    charged: usize,
    reply: Reply,
    /// The configuration generation the request was admitted under, held
    /// until the hooks are committed: a reload drops a retired sink only
    /// once no admission of a generation that still routed to it can write
    /// (`crate::slots`), and a client that goes away does not end that.
    _admitted: Option<Arc<crate::config::Generation>>,
}

#[derive(Debug)]
enum Reply {
    One(oneshot::Sender<WriteOutcome>),
    All(oneshot::Sender<Vec<WriteOutcome>>),
}

impl Submission {
    fn body_bytes(&self) -> usize {
        self.entries.iter().map(|(e, _)| e.body.len()).sum()
    }
}

/// The request side of the writer queue. Cloned into every handler.
#[derive(Debug, Clone)]
pub struct WriterHandle {
    tx: SyncSender<Submission>,
    queued_bytes: Arc<AtomicUsize>,
    max_bytes: usize,
    metrics: Arc<Metrics>,
}

impl WriterHandle {
    /// Queues a hook without waiting. The receiver yields the outcome once
    /// the writer has committed (or refused) it.
    pub fn submit(
        &self,
        envelope: Envelope,
        sinks: SinkSet,
        admitted: Option<Arc<crate::config::Generation>>,
    ) -> Result<oneshot::Receiver<WriteOutcome>, SubmitError> {
        let (reply, rx) = oneshot::channel();
        self.enqueue(vec![(envelope, sinks)], Reply::One(reply), admitted)?;
        Ok(rx)
    }

    /// Queues a batch request's hooks as one job: they are written by one
    /// synced commit, and the receiver yields one outcome per entry, in
    /// order.
    pub fn submit_all(
        &self,
        entries: Vec<(Envelope, SinkSet)>,
        admitted: Option<Arc<crate::config::Generation>>,
    ) -> Result<oneshot::Receiver<Vec<WriteOutcome>>, SubmitError> {
        let (reply, rx) = oneshot::channel();
        self.enqueue(entries, Reply::All(reply), admitted)?;
        Ok(rx)
    }

    fn enqueue(
        &self,
        entries: Vec<(Envelope, SinkSet)>,
        reply: Reply,
        admitted: Option<Arc<crate::config::Generation>>,
    ) -> Result<(), SubmitError> {
        let charged = entries
            .iter()
            .map(|(e, _)| e.body.len().saturating_add(JOB_OVERHEAD))
            .sum::<usize>();
        let before = self.queued_bytes.fetch_add(charged, Ordering::SeqCst);
        // An empty queue admits any one job, so a body at the size limit is
        // never refused forever by a small `queue_bytes`.
        if before > 0 && before.saturating_add(charged) > self.max_bytes {
            self.queued_bytes.fetch_sub(charged, Ordering::SeqCst);
            return Err(SubmitError::Full);
        }
        let job = Submission {
            entries,
            enqueued: Instant::now(),
            charged,
            reply,
            _admitted: admitted,
        };
        match self.tx.try_send(job) {
            Ok(()) => {
                self.metrics.queue_depth.fetch_add(1, Ordering::Relaxed);
                self.metrics.queue_bytes.fetch_add(
                    i64::try_from(charged).unwrap_or(i64::MAX),
                    Ordering::Relaxed,
                );
                Ok(())
            }
            Err(e) => {
                self.queued_bytes.fetch_sub(charged, Ordering::SeqCst);
                Err(match e {
                    TrySendError::Full(_) => SubmitError::Full,
                    TrySendError::Disconnected(_) => SubmitError::Closed,
                })
            }
        }
    }
}

/// The writer's state; lives on the writer thread.
pub struct Writer {
    store: Arc<Store>,
    alloc: TenantAllocator,
    next_seq: u64,
    clock: SharedClock,
    settings: WriterSettings,
    metrics: Arc<Metrics>,
    rx: Receiver<Submission>,
    queued_bytes: Arc<AtomicUsize>,
    /// The store's generation the sequence and allocator were loaded at;
    /// `None` after a failed commit: reload before the next one.
    loaded_at: Option<u64>,
    /// Sizes of the committed batches, for `bench ingest` (which replays
    /// the same batches straight to the store for its ceiling).
    pub batch_log: Option<Arc<Mutex<Vec<usize>>>>,
    /// One more each turn of the loop (at least every [`BEAT`]): what the
    /// systemd watchdog reads to know the writer thread is alive.
    beats: Arc<AtomicU64>,
}

/// The longest the writer waits for a job before it turns its loop (and
/// beats) anyway.
pub const BEAT: Duration = Duration::from_secs(1);

impl Writer {
    /// Loads the allocator and the sequence from the store and makes the
    /// queue. Nothing runs until [`Writer::spawn`].
    pub fn new(
        store: Arc<Store>,
        clock: SharedClock,
        settings: WriterSettings,
        metrics: Arc<Metrics>,
    ) -> Result<(Writer, WriterHandle), StoreError> {
        let loaded_at = Some(store.generation());
        let alloc = TenantAllocator::load(&store, settings.tenants_max)?;
        let next_seq = store.next_seq()?;
        let (tx, rx) = mpsc::sync_channel(settings.queue);
        let queued_bytes = Arc::new(AtomicUsize::new(0));
        let handle = WriterHandle {
            tx,
            queued_bytes: queued_bytes.clone(),
            max_bytes: settings.queue_bytes,
            metrics: metrics.clone(),
        };
        Ok((
            Writer {
                store,
                alloc,
                next_seq,
                clock,
                settings,
                metrics,
                rx,
                queued_bytes,
                loaded_at,
                batch_log: None,
                beats: Arc::new(AtomicU64::new(0)),
            },
            handle,
        ))
    }

    /// The writer loop's turn count (see [`BEAT`]).
    pub fn beats(&self) -> Arc<AtomicU64> {
        self.beats.clone()
    }

    /// Runs the writer on its own thread until every [`WriterHandle`] is
    /// dropped and the queue is drained.
    pub fn spawn(self) -> std::io::Result<std::thread::JoinHandle<()>> {
        std::thread::Builder::new()
            .name("ankusa-writer".into())
            .spawn(move || self.run())
    }

    fn run(mut self) {
        let mut next_sweep = Instant::now() + self.settings.sweep_interval;
        loop {
            self.beats.fetch_add(1, Ordering::Relaxed);
            let wait = next_sweep
                .saturating_duration_since(Instant::now())
                .min(BEAT);
            match self.rx.recv_timeout(wait) {
                Ok(first) => {
                    let jobs = self.gather(first);
                    self.write(jobs);
                }
                Err(RecvTimeoutError::Timeout) => {}
                // Every handle is gone (shutdown) and the queue is empty:
                // every job ever queued has been answered.
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if Instant::now() >= next_sweep {
                self.sweep();
                next_sweep = Instant::now() + self.settings.sweep_interval;
            }
        }
        tracing::debug!("writer stopped: queue closed and drained");
    }

    /// Collects a batch behind `first`: whatever is queued, then waits for
    /// more until the first job has waited `linger` (measured from when it
    /// was queued, so a job that queued behind a slow commit does not wait
    /// again) or the batch is full.
    fn gather(&self, first: Submission) -> Vec<Submission> {
        let deadline = first.enqueued + self.settings.linger;
        let mut bytes = first.body_bytes();
        let mut hooks = first.entries.len();
        let mut jobs = vec![first];
        while hooks < self.settings.max_batch && bytes < self.settings.max_batch_bytes {
            let next = match self.rx.try_recv() {
                Ok(j) => Some(j),
                Err(mpsc::TryRecvError::Empty) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        None
                    } else {
                        self.rx.recv_timeout(left).ok()
                    }
                }
                Err(mpsc::TryRecvError::Disconnected) => None,
            };
            let Some(j) = next else { break };
            bytes = bytes.saturating_add(j.body_bytes());
            hooks = hooks.saturating_add(j.entries.len());
            jobs.push(j);
        }
        jobs
    }

    /// Resolves, writes and commits one batch, then answers every job.
    pub fn write(&mut self, jobs: Vec<Submission>) {
        let envs: Vec<(&Envelope, SinkSet)> = jobs
            .iter()
            .flat_map(|j| j.entries.iter().map(|(e, s)| (e, *s)))
            .collect();
        let mut outcomes = self.commit(&envs).into_iter();
        for job in jobs {
            let mine: Vec<WriteOutcome> = outcomes.by_ref().take(job.entries.len()).collect();
            self.queued_bytes.fetch_sub(job.charged, Ordering::SeqCst);
            self.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
            self.metrics.queue_bytes.fetch_sub(
                i64::try_from(job.charged).unwrap_or(i64::MAX),
                Ordering::Relaxed,
            );
            // The client may have gone; its hook is stored all the same and
            // a retry with the same Idempotency-Key gets this id.
            match job.reply {
                Reply::One(r) => {
                    if let Some(&o) = mine.first() {
                        let _ = r.send(o);
                    }
                }
                Reply::All(r) => {
                    let _ = r.send(mine);
                }
            }
        }
    }

    /// The outcome of each job, in order, after one synced commit.
    /// Reloads the sequence and the next ordinal when a failed commit or a
    /// reopen may have left them behind the store.
    fn reload_if_stale(&mut self) -> Result<(), StoreError> {
        let generation = self.store.generation();
        if self.loaded_at == Some(generation) {
            return Ok(());
        }
        self.alloc = TenantAllocator::load(&self.store, self.settings.tenants_max)?;
        self.next_seq = self.store.next_seq()?;
        self.loaded_at = Some(generation);
        tracing::info!(
            next_seq = self.next_seq,
            "reloaded the sequence and the tenant allocator"
        );
        Ok(())
    }

    fn commit(&mut self, jobs: &[(&Envelope, SinkSet)]) -> Vec<WriteOutcome> {
        if let Err(e) = self.reload_if_stale() {
            tracing::error!(error = %e, jobs = jobs.len(), "cannot reload the sequence; batch refused");
            self.metrics.commit_failures.fetch_add(1, Ordering::Relaxed);
            return vec![WriteOutcome::Refused(Outcome::StoreUnavailable); jobs.len()];
        }
        let now = self.clock.now_ms();
        let ttl = u64::try_from(self.settings.dedupe_ttl.as_millis()).unwrap_or(u64::MAX);
        let mut batch = Batch::new();
        // Every job's answer that needs no new row comes first: invalid
        // tenant ids (refused at the HTTP layer too; re-checked so one bad
        // job can never fail the allocator's resolve for the batch), and
        // idempotency keys already stored. Only then are ordinals allocated,
        // and only for jobs that will write a row: a refused job must not
        // commit a tenant (a read failure used to commit one anyway).
        let early: Vec<Option<WriteOutcome>> = jobs
            .iter()
            .map(|(e, _)| self.answer_without_writing(e, now))
            .collect();
        let tenants = jobs
            .iter()
            .zip(&early)
            .filter(|(_, e)| e.is_none())
            .map(|((e, _), _)| e.tenant.as_str());
        let resolution = match self.alloc.resolve(&self.store, tenants, &mut batch) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, jobs = jobs.len(), "cannot resolve tenants; batch refused");
                self.metrics.commit_failures.fetch_add(1, Ordering::Relaxed);
                return vec![WriteOutcome::Refused(Outcome::StoreUnavailable); jobs.len()];
            }
        };
        let max = self.alloc.max();
        let mut seq = self.next_seq;
        let mut in_batch: HashMap<(&str, &str), u64> = HashMap::new();
        let mut outcomes = Vec::with_capacity(jobs.len());
        let mut written = 0usize;
        for (&(env, sinks), early) in jobs.iter().zip(early) {
            if let Some(answer) = early {
                outcomes.push(answer);
                continue;
            }
            let Ok(ord) = resolution.ord(&env.tenant, max) else {
                outcomes.push(WriteOutcome::Refused(Outcome::TenantLimit));
                continue;
            };
            if let Some(key) = env.idempotency_key.as_deref() {
                if let Some(&orig) = in_batch.get(&(env.tenant.as_str(), key)) {
                    outcomes.push(WriteOutcome::Duplicate(HookId(orig)));
                    continue;
                }
                in_batch.insert((env.tenant.as_str(), key), seq);
            }
            transitions::ingest(
                &mut batch,
                &IngestHook {
                    seq,
                    ord,
                    envelope: env,
                    sinks,
                    archive: self.settings.archive,
                    dedupe_expires_at: env
                        .idempotency_key
                        .as_ref()
                        .map(|_| now.saturating_add(ttl)),
                },
            );
            outcomes.push(WriteOutcome::Accepted(HookId(seq)));
            seq += 1;
            written += 1;
        }
        let fresh = resolution.fresh().len();
        let started = Instant::now();
        match self.store.commit(batch, true) {
            Ok(()) => {
                self.metrics.commit_latency.observe(started.elapsed());
                self.alloc.committed(resolution);
                self.next_seq = seq;
                if written > 0 {
                    self.metrics.batches.fetch_add(1, Ordering::Relaxed);
                    self.metrics
                        .batch_hooks
                        .fetch_add(written as u64, Ordering::Relaxed);
                    if let Some(log) = &self.batch_log {
                        if let Ok(mut l) = log.lock() {
                            l.push(written);
                        }
                    }
                }
                self.metrics
                    .tenants_allocated
                    .fetch_add(fresh as u64, Ordering::Relaxed);
                outcomes
            }
            Err(e) => {
                tracing::error!(error = %e, jobs = jobs.len(), "synced commit failed; batch refused");
                self.metrics.commit_failures.fetch_add(1, Ordering::Relaxed);
                self.loaded_at = None;
                // Duplicates of hooks committed earlier stay true; a
                // duplicate of a hook in this very batch does not.
                let first_new = self.next_seq;
                outcomes
                    .into_iter()
                    .map(|o| match o {
                        WriteOutcome::Accepted(_) => {
                            WriteOutcome::Refused(Outcome::StoreUnavailable)
                        }
                        WriteOutcome::Duplicate(id) if id.0 >= first_new => {
                            WriteOutcome::Refused(Outcome::StoreUnavailable)
                        }
                        other => other,
                    })
                    .collect()
            }
        }
    }

    /// The answer to a job that writes nothing: an invalid tenant id, or an
    /// idempotency key already stored (the original id), or a failed dedupe
    /// read. `None`: the job needs a row (and perhaps a new tenant).
    fn answer_without_writing(&self, env: &Envelope, now: u64) -> Option<WriteOutcome> {
        if ankusa_store::tenants::validate_id(&env.tenant).is_err() {
            return Some(WriteOutcome::Refused(Outcome::TenantInvalid));
        }
        let key = env.idempotency_key.as_deref()?;
        match queries::dedupe(&self.store, &env.tenant, key, now) {
            Ok(Some(v)) => Some(WriteOutcome::Duplicate(HookId(v.seq))),
            Ok(None) => None,
            Err(e) => {
                tracing::error!(error = %e, "dedupe lookup failed");
                Some(WriteOutcome::Refused(Outcome::StoreUnavailable))
            }
        }
    }

    /// Deletes expired idempotency keys, a bounded amount per call.
    pub fn sweep(&mut self) {
        let now = self.clock.now_ms();
        for _ in 0..SWEEP_ROUNDS {
            match dedupe::sweep(&self.store, now, self.settings.sweep_batch) {
                Ok(n) => {
                    self.metrics
                        .dedupe_swept
                        .fetch_add(n as u64, Ordering::Relaxed);
                    if n < self.settings.sweep_batch {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "dedupe sweep failed; will retry next interval");
                    return;
                }
            }
        }
    }

    /// Takes every job queued right now (tests drive the writer by hand).
    #[cfg(test)]
    fn drain(&self) -> Vec<Submission> {
        self.rx.try_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, FakeClock};
    use ankusa_store::{tenants, Field};
    use std::time::Duration;

    const T0: u64 = 1_800_000_000_000;

    fn settings() -> WriterSettings {
        WriterSettings {
            queue: 16,
            queue_bytes: 1 << 20,
            max_batch: 64,
            max_batch_bytes: 1 << 20,
            linger: Duration::ZERO,
            dedupe_ttl: Duration::from_secs(60),
            sweep_interval: Duration::from_secs(3600),
            sweep_batch: 2,
            tenants_max: 2,
            archive: false,
        }
    }

    fn env(tenant: &str, key: Option<&str>) -> Envelope {
        Envelope {
            received_at: T0,
            source_id: "src".into(),
            tenant: tenant.into(),
            idempotency_key: key.map(Into::into),
            event_type: None,
            headers: vec![("content-type".into(), b"application/json".to_vec())],
            body: b"{\"n\":1}".to_vec(),
        }
    }

    struct Rig {
        _dir: tempfile::TempDir,
        store: Arc<Store>,
        clock: Arc<FakeClock>,
        writer: Writer,
        handle: WriterHandle,
    }

    fn rig(s: WriterSettings) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::create_or_open(&dir.path().join("store")).unwrap());
        let clock = FakeClock::at(T0);
        let (writer, handle) = Writer::new(
            store.clone(),
            clock.clone(),
            s,
            Arc::new(Metrics::default()),
        )
        .unwrap();
        Rig {
            _dir: dir,
            store,
            clock,
            writer,
            handle,
        }
    }

    /// Submits each envelope, writes them all as one batch, returns the outcomes.
    fn one_batch(r: &mut Rig, envs: Vec<Envelope>) -> Vec<WriteOutcome> {
        let rxs: Vec<_> = envs
            .into_iter()
            .map(|e| r.handle.submit(e, SinkSet::first(2), None).unwrap())
            .collect();
        let jobs = r.writer.drain();
        r.writer.write(jobs);
        rxs.into_iter()
            .map(|rx| rx.blocking_recv().unwrap())
            .collect()
    }

    #[test]
    fn a_batch_commits_every_hook_with_rows_per_sink_and_counters() {
        let mut r = rig(settings());
        let out = one_batch(&mut r, vec![env("a", None), env("b", None), env("a", None)]);
        assert_eq!(
            out,
            vec![
                WriteOutcome::Accepted(HookId(1)),
                WriteOutcome::Accepted(HookId(2)),
                WriteOutcome::Accepted(HookId(3))
            ]
        );
        let a = tenants::ord_of(&r.store, "a").unwrap().unwrap();
        let c = queries::counters(&r.store, a).unwrap();
        assert_eq!(c.get(Field::Pending), 4, "two hooks, two sinks each");
        assert_eq!(c.get(Field::Bytes), 4 * 7);
        assert_eq!(
            queries::node_counters(&r.store)
                .unwrap()
                .get(Field::Pending),
            6
        );
        let rep = ankusa_store::check::run(&r.store, |_, _| {}).unwrap();
        assert!(rep.ok(), "{:#?}", rep.mismatches);
    }

    #[test]
    fn duplicates_answer_the_original_within_the_ttl_and_not_after() {
        let mut r = rig(settings());
        let out = one_batch(
            &mut r,
            vec![
                env("a", Some("k1")),
                env("a", Some("k1")),
                env("b", Some("k1")),
            ],
        );
        assert_eq!(out[0], WriteOutcome::Accepted(HookId(1)));
        assert_eq!(out[1], WriteOutcome::Duplicate(HookId(1)), "same batch");
        assert_eq!(
            out[2],
            WriteOutcome::Accepted(HookId(2)),
            "keys are per tenant"
        );

        r.clock.advance(59_000);
        let out = one_batch(&mut r, vec![env("a", Some("k1"))]);
        assert_eq!(
            out[0],
            WriteOutcome::Duplicate(HookId(1)),
            "later batch, within the TTL"
        );

        r.clock.advance(1_000);
        let out = one_batch(&mut r, vec![env("a", Some("k1"))]);
        assert_eq!(
            out[0],
            WriteOutcome::Accepted(HookId(3)),
            "expired keys no longer dedupe"
        );
    }

    #[test]
    fn the_sweep_removes_expired_keys_but_not_a_reused_one() {
        let mut r = rig(settings());
        one_batch(
            &mut r,
            vec![
                env("a", Some("k1")),
                env("a", Some("k2")),
                env("a", Some("k3")),
            ],
        );
        r.clock.advance(60_000);
        // k1 is reused after expiry: its new entry must survive the sweep
        // of the old one.
        let out = one_batch(&mut r, vec![env("a", Some("k1"))]);
        assert_eq!(out[0], WriteOutcome::Accepted(HookId(4)));
        r.writer.sweep();
        assert_eq!(
            r.writer.metrics.dedupe_swept.load(Ordering::Relaxed),
            3,
            "swept in rounds of 2"
        );
        let now = r.clock.now_ms();
        assert!(queries::dedupe(&r.store, "a", "k2", now).unwrap().is_none());
        let k1 = queries::dedupe(&r.store, "a", "k1", now).unwrap();
        assert_eq!(k1.map(|v| v.seq), Some(4));
        let rep = ankusa_store::check::run(&r.store, |_, _| {}).unwrap();
        assert!(rep.ok(), "{:#?}", rep.mismatches);
    }

    #[test]
    fn a_new_tenant_past_the_limit_is_refused_and_the_rest_of_the_batch_commits() {
        let mut r = rig(settings());
        let out = one_batch(
            &mut r,
            vec![
                env("a", None),
                env("b", None),
                env("c", None),
                env("a", None),
            ],
        );
        assert_eq!(out[2], WriteOutcome::Refused(Outcome::TenantLimit));
        assert_eq!(out[0], WriteOutcome::Accepted(HookId(1)));
        assert_eq!(out[1], WriteOutcome::Accepted(HookId(2)));
        assert_eq!(
            out[3],
            WriteOutcome::Accepted(HookId(3)),
            "seqs stay dense past a refusal"
        );
        assert!(tenants::ord_of(&r.store, "c").unwrap().is_none());
        // Existing tenants are never refused, even at the limit.
        let out = one_batch(&mut r, vec![env("b", None), env("d", None)]);
        assert_eq!(out[0], WriteOutcome::Accepted(HookId(4)));
        assert_eq!(out[1], WriteOutcome::Refused(Outcome::TenantLimit));
        let rep = ankusa_store::check::run(&r.store, |_, _| {}).unwrap();
        assert!(rep.ok(), "{:#?}", rep.mismatches);
    }

    /// A job refused because its idempotency key could not be read must
    /// not commit its new tenant: the ordinal was allocated before the read
    /// and committed with the rest of the batch.
    #[test]
    fn a_failed_dedupe_read_commits_no_tenant() {
        let mut r = rig(settings());
        r.store
            .arm_fault("dedupe.read", Some(ankusa_store::faults::Action::Error));
        let out = one_batch(&mut r, vec![env("new", Some("k")), env("a", None)]);
        assert_eq!(out[0], WriteOutcome::Refused(Outcome::StoreUnavailable));
        assert_eq!(out[1], WriteOutcome::Accepted(HookId(1)));
        assert!(tenants::ord_of(&r.store, "new").unwrap().is_none());
        r.store.arm_fault("dedupe.read", None);
        let out = one_batch(&mut r, vec![env("new", Some("k"))]);
        assert_eq!(out[0], WriteOutcome::Accepted(HookId(2)));
        let rep = ankusa_store::check::run(&r.store, |_, _| {}).unwrap();
        assert!(rep.ok(), "{:#?}", rep.mismatches);
    }

    #[test]
    fn an_invalid_tenant_is_refused_alone() {
        let mut r = rig(settings());
        let out = one_batch(&mut r, vec![env("bad\u{1}id", None), env("a", None)]);
        assert_eq!(out[0], WriteOutcome::Refused(Outcome::TenantInvalid));
        assert_eq!(out[1], WriteOutcome::Accepted(HookId(1)));
    }

    #[test]
    fn a_full_queue_refuses_at_once_by_count_and_by_bytes() {
        let mut s = settings();
        s.queue = 2;
        let r = rig(s);
        assert!(r
            .handle
            .submit(env("a", None), SinkSet::first(1), None)
            .is_ok());
        assert!(r
            .handle
            .submit(env("a", None), SinkSet::first(1), None)
            .is_ok());
        assert_eq!(
            r.handle
                .submit(env("a", None), SinkSet::first(1), None)
                .unwrap_err(),
            SubmitError::Full
        );

        let mut s = settings();
        s.queue_bytes = 2000;
        let r = rig(s);
        let mut big = env("a", None);
        big.body = vec![0; 1800];
        assert!(
            r.handle
                .submit(big.clone(), SinkSet::first(1), None)
                .is_ok(),
            "an empty queue admits any one job"
        );
        assert_eq!(
            r.handle
                .submit(env("a", None), SinkSet::first(1), None)
                .unwrap_err(),
            SubmitError::Full
        );
    }

    #[test]
    fn the_sequence_resumes_after_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        for round in 0..2u64 {
            let store = Arc::new(Store::create_or_open(&path).unwrap());
            let (mut w, h) = Writer::new(
                store,
                FakeClock::at(T0),
                settings(),
                Arc::new(Metrics::default()),
            )
            .unwrap();
            let rx = h.submit(env("a", None), SinkSet::first(1), None).unwrap();
            let jobs = w.drain();
            w.write(jobs);
            assert_eq!(
                rx.blocking_recv().unwrap(),
                WriteOutcome::Accepted(HookId(round + 1))
            );
        }
    }

    /// What a step of [`no_hook_id_or_tenant_ordinal_is_given_twice`] does.
    #[derive(Debug, Clone)]
    enum Step {
        /// A hook of tenant `t{tenant}`, with key `k{key}` if any.
        Submit {
            tenant: u8,
            key: Option<u8>,
        },
        /// The writer takes what is queued and commits it.
        Write,
        /// The next write fails before reaching the WAL.
        FailBefore,
        /// The next write reaches the WAL and is reported failed.
        FailAfter,
        /// The store is closed and opened again under the writer.
        Reopen,
        Advance(u64),
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            6 => (0u8..4, proptest::option::of(0u8..3)).prop_map(|(tenant, key)| Step::Submit { tenant, key }),
            4 => Just(Step::Write),
            1 => Just(Step::FailBefore),
            1 => Just(Step::FailAfter),
            1 => Just(Step::Reopen),
            1 => (0u64..40_000).prop_map(Step::Advance),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Under writes that fail before or after reaching the WAL and
        /// store reopens: a hook id is answered `Accepted` once, and names
        /// the very hook that was submitted; a duplicate names a stored
        /// hook of the same tenant and key; a key acknowledged within the
        /// TTL is never stored twice; a tenant keeps its ordinal and no two
        /// tenants share one; nothing is refused but for the armed fault or
        /// the tenant limit; the store check passes after every write.
        #[test]
        fn no_hook_id_or_tenant_ordinal_is_given_twice(steps in proptest::collection::vec(step(), 1..50)) {
            use proptest::prop_assert;
            use proptest::prop_assert_eq;
            let mut r = rig(settings());
            let mut accepted: HashMap<u64, Vec<u8>> = HashMap::new();
            let mut ords: HashMap<String, u32> = HashMap::new();
            // (tenant, key) -> when its hook was acknowledged.
            let mut keys: HashMap<(String, String), u64> = HashMap::new();
            let ttl = u64::try_from(settings().dedupe_ttl.as_millis()).unwrap();
            let mut queued = Vec::new();
            let mut fault: Option<&'static str> = None;
            let mut n = 0u64;
            for s in steps {
                match s {
                    Step::Submit { tenant, key } => {
                        n += 1;
                        let mut e = env(&format!("t{tenant}"), key.map(|k| format!("k{k}")).as_deref());
                        e.body = format!("{{\"n\":{n}}}").into_bytes();
                        // A full queue refuses at once (its own test); the
                        // rest go on.
                        match r.handle.submit(e.clone(), SinkSet::first(1), None) {
                            Ok(rx) => queued.push((e, rx)),
                            Err(err) => prop_assert_eq!(err, SubmitError::Full),
                        }
                    }
                    Step::FailBefore => fault = Some("commit.before_write"),
                    Step::FailAfter => fault = Some("commit.after_write"),
                    Step::Reopen => r.store.reopen(Duration::from_secs(5)).unwrap(),
                    Step::Advance(ms) => r.clock.advance(ms),
                    Step::Write => {
                        let now = r.clock.now_ms();
                        // What the store already holds for each key, before the write.
                        let before: Vec<Option<u64>> = queued
                            .iter()
                            .map(|(e, _)| {
                                e.idempotency_key.as_deref().and_then(|k| {
                                    queries::dedupe(&r.store, &e.tenant, k, now).unwrap().map(|v| v.seq)
                                })
                            })
                            .collect();
                        let armed = fault.take();
                        if let Some(point) = armed {
                            r.store.arm_fault(point, Some(ankusa_store::faults::Action::Error));
                        }
                        let jobs = r.writer.drain();
                        r.writer.write(jobs);
                        if let Some(point) = armed {
                            r.store.arm_fault(point, None);
                        }
                        let registered = (0..4u8)
                            .filter(|t| tenants::ord_of(&r.store, &format!("t{t}")).unwrap().is_some())
                            .count();
                        for ((e, rx), held) in queued.drain(..).zip(before) {
                            let got = rx.blocking_recv().unwrap();
                            match got {
                                WriteOutcome::Accepted(HookId(seq)) => {
                                    prop_assert!(held.is_none(), "{:?} stored again as {seq}: key held by {held:?}", e.idempotency_key);
                                    prop_assert!(accepted.insert(seq, e.body.clone()).is_none(), "id {seq} accepted twice");
                                    if let Some(k) = &e.idempotency_key {
                                        let last = keys.insert((e.tenant.clone(), k.clone()), now);
                                        prop_assert!(last.is_none_or(|at| at + ttl <= now), "key {k} acknowledged twice within the TTL");
                                    }
                                    let stored = queries::hook(&r.store, seq).unwrap();
                                    prop_assert_eq!(stored.map(|h| h.body), Some(e.body.clone()));
                                }
                                WriteOutcome::Duplicate(HookId(seq)) => {
                                    let stored = queries::hook(&r.store, seq).unwrap();
                                    prop_assert!(stored.as_ref().is_some_and(|h| h.tenant == e.tenant && h.idempotency_key == e.idempotency_key), "duplicate of {seq} names {stored:?}");
                                    if let Some(h) = held {
                                        prop_assert_eq!(seq, h);
                                    }
                                }
                                WriteOutcome::Refused(Outcome::StoreUnavailable) => {
                                    prop_assert!(armed.is_some(), "refused with no fault armed");
                                }
                                WriteOutcome::Refused(Outcome::TenantLimit) => {
                                    // settings(): two tenants at most.
                                    prop_assert!(tenants::ord_of(&r.store, &e.tenant).unwrap().is_none());
                                    prop_assert!(registered >= 2 || armed.is_some());
                                }
                                other => prop_assert!(false, "unexpected {other:?}"),
                            }
                        }
                        // Ordinals: each tenant keeps its own, none shared.
                        let mut seen = std::collections::HashSet::new();
                        for t in 0..4u8 {
                            let name = format!("t{t}");
                            if let Some(o) = tenants::ord_of(&r.store, &name).unwrap() {
                                prop_assert!(seen.insert(o), "ordinal {o} shared");
                                prop_assert_eq!(*ords.entry(name).or_insert(o), o);
                            }
                        }
                        let rep = ankusa_store::check::run(&r.store, |_, _| {}).unwrap();
                        prop_assert!(rep.ok(), "{:#?}", rep.mismatches);
                    }
                }
            }
        }
    }
}
