//! The archiver: copies every hook that carries an archive obligation into
//! rolling, gzip-compressed JSON-lines files, then settles the obligation.
//!
//! Owns: the archive directory's files (their names, rolling by size and
//! age, and their syncing), the in-memory cursor over the obligations and
//! the `ankusa_archive_*` metrics. The obligations themselves are store
//! rows written by the writer (`archive: true` at ingest) and removed only
//! here, through `transitions::archive_settle`.
//!
//! Invariants:
//! - **Never settle before the data is on disk.** Each step appends its
//!   hooks as one complete gzip member, `fsync`s the file (and the
//!   directory when the file is new), and only then commits the settle
//!   batch, synced. Reclaim deletes a hook only after its obligation is
//!   settled, so a hook is never gone from both the store and the archive.
//! - **A failed write settles nothing.** The file is abandoned (it may end in
//!   a torn member; later hooks go to a new file), the error is logged once
//!   per failure streak and counted, and the same obligations are retried on
//!   the next pass. Delivery is unaffected; reclaim simply waits.
//! - **At least once, not exactly once.** A crash (or a failed settle
//!   commit) between the sync and the settle leaves the obligations in
//!   place, so the hooks are appended again, to a new file, after restart.
//!   Readers dedupe by `id`.
//! - A process never appends to a file an earlier process wrote: names are
//!   created with `create_new`, so a torn tail from a crash stays at the end
//!   of its own file.
//! - The cursor only moves past obligations that were settled (or whose hook
//!   is missing, which `store check` reports); obligations are created in seq
//!   order, so everything unsettled is always at or after it.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ankusa_store::values::ArchiveValue;
use ankusa_store::{
    queries, transitions, Batch, Envelope, HookId, NodeIdentity, Store, StoreError,
};
use base64::Engine as _;
use flate2::write::GzEncoder;
use flate2::Compression;
use tokio::sync::watch;

use super::clock::SharedClock;
pub use super::config::ArchiveSettings;
use super::metrics::Metrics;

/// Why a step stopped.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("cannot read archive obligations: {0}")]
    Store(#[from] StoreError),
    #[error("cannot write the archive file {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot settle archived hooks (they will be appended again): {0}")]
    Settle(StoreError),
}

/// The file being appended to.
struct OpenArchive {
    file: File,
    path: PathBuf,
    /// Bytes on disk (complete, synced gzip members only).
    bytes: u64,
    opened_ms: u64,
}

/// The archiver's state; [`Archiver::pass`] is blocking I/O.
pub struct Archiver {
    store: Arc<Store>,
    clock: SharedClock,
    settings: ArchiveSettings,
    metrics: Arc<Metrics>,
    current: Option<OpenArchive>,
    cursor: Option<u64>,
}

impl Archiver {
    pub fn new(
        store: Arc<Store>,
        clock: SharedClock,
        settings: ArchiveSettings,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            store,
            clock,
            settings,
            metrics,
            current: None,
            cursor: None,
        }
    }

    /// Archives and settles obligations until none are left (or a step
    /// fails). Returns the hooks settled.
    pub fn pass(&mut self) -> Result<u64, ArchiveError> {
        let mut total = 0;
        loop {
            let (seen, settled) = self.step()?;
            total += settled;
            if seen < self.settings.batch {
                return Ok(total);
            }
        }
    }

    /// One bounded step: read up to `batch` obligations, append their hooks
    /// as one gzip member, sync, settle. Returns (obligations seen, settled).
    fn step(&mut self) -> Result<(usize, u64), ArchiveError> {
        let obligations =
            queries::archive_obligations(&self.store, self.cursor, self.settings.batch)?;
        let Some(&(last, _)) = obligations.last() else {
            return Ok((0, 0));
        };
        let mut payload = Vec::new();
        let mut settle: Vec<(u64, ArchiveValue)> = Vec::with_capacity(obligations.len());
        for &(seq, v) in &obligations {
            match queries::hook(&self.store, seq)? {
                Some(env) => {
                    payload.extend_from_slice(line(seq, self.store.node(), &env).as_bytes());
                    payload.push(b'\n');
                    settle.push((seq, v));
                }
                // Reclaim waits for the obligation, so this is damage that
                // `store check` reports; skipping it keeps the rest moving.
                None => tracing::error!(
                    id = %HookId(seq).public(self.store.node()),
                    "archive obligation without its hook; left unsettled"
                ),
            }
        }
        if !settle.is_empty() {
            self.append(settle[0].0, &payload)?;
            let mut b = Batch::new();
            for (seq, v) in &settle {
                transitions::archive_settle(&mut b, *seq, v);
            }
            if let Err(e) = self.store.commit(b, true) {
                self.metrics
                    .archive
                    .settle_errors
                    .fetch_add(1, Ordering::Relaxed);
                return Err(ArchiveError::Settle(e));
            }
            self.metrics
                .archive
                .archived
                .fetch_add(settle.len() as u64, Ordering::Relaxed);
        }
        self.cursor = Some(last);
        Ok((obligations.len(), settle.len() as u64))
    }

    /// Appends `payload` as one complete gzip member and syncs it. On any
    /// error the file is abandoned, so a torn member can only be a file's
    /// last.
    fn append(&mut self, first_seq: u64, payload: &[u8]) -> Result<(), ArchiveError> {
        let now = self.clock.now_ms();
        let roll = self.current.as_ref().is_some_and(|f| {
            f.bytes >= self.settings.max_file_bytes
                || Duration::from_millis(now.saturating_sub(f.opened_ms))
                    >= self.settings.max_file_age
        });
        if roll {
            // Already synced after its last member: closing loses nothing.
            self.current = None;
        }
        if self.current.is_none() {
            let opened = open_new(&self.settings.dir, now, first_seq)
                .map_err(|(path, e)| ArchiveError::Write { path, source: e })?;
            self.metrics
                .archive
                .files_opened
                .fetch_add(1, Ordering::Relaxed);
            self.current = Some(opened);
        }
        let Some(f) = self.current.as_mut() else {
            return Ok(());
        };
        let written = write_member(&mut f.file, payload);
        match written {
            Ok(len) => {
                f.bytes = len;
                Ok(())
            }
            Err(e) => {
                let path = f.path.clone();
                self.current = None;
                Err(ArchiveError::Write { path, source: e })
            }
        }
    }
}

/// Compresses `payload` into one gzip member at the end of `file`, syncs
/// the data, and returns the file's new length.
fn write_member(file: &mut File, payload: &[u8]) -> io::Result<u64> {
    let mut gz = GzEncoder::new(&mut *file, Compression::default());
    gz.write_all(payload)?;
    gz.finish()?;
    // The settle that follows is the promise that these bytes survive.
    file.sync_data()?;
    Ok(file.metadata()?.len())
}

/// Creates a fresh file `hooks-<ms>-<first seq>[-n].jsonl.gz` and syncs the
/// directory so the file's name survives a crash with its data.
fn open_new(dir: &Path, now_ms: u64, first_seq: u64) -> Result<OpenArchive, (PathBuf, io::Error)> {
    std::fs::create_dir_all(dir).map_err(|e| (dir.to_path_buf(), e))?;
    let mut n = 0u32;
    let (file, path) = loop {
        let suffix = if n == 0 {
            String::new()
        } else {
            format!("-{n}")
        };
        let path = dir.join(format!(
            "hooks-{now_ms:013}-{first_seq:020}{suffix}.jsonl.gz"
        ));
        match OpenOptions::new().append(true).create_new(true).open(&path) {
            Ok(f) => break (f, path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
            Err(e) => return Err((path, e)),
        }
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| (dir.to_path_buf(), e))?;
    Ok(OpenArchive {
        file,
        path,
        bytes: 0,
        opened_ms: now_ms,
    })
}

/// One archive line: the hook as the store keeps it. Header values that are
/// not UTF-8 are written as `value_b64` instead of `value`.
fn line(seq: u64, node: Option<&NodeIdentity>, env: &Envelope) -> String {
    let b64 = &base64::engine::general_purpose::STANDARD;
    let headers: Vec<serde_json::Value> = env
        .headers
        .iter()
        .map(|(name, value)| match std::str::from_utf8(value) {
            Ok(v) => serde_json::json!({ "name": name, "value": v }),
            Err(_) => serde_json::json!({ "name": name, "value_b64": b64.encode(value) }),
        })
        .collect();
    let mut obj = serde_json::json!({
        "id": HookId(seq).public(node),
        "seq": seq,
        "tenant": env.tenant,
        "source": env.source_id,
        "received_at": env.received_at,
        "headers": headers,
        "body": b64.encode(&env.body),
    });
    if let (Some(key), Some(map)) = (&env.idempotency_key, obj.as_object_mut()) {
        map.insert("idempotency_key".into(), serde_json::json!(key));
    }
    obj.to_string()
}

/// The running archiver task.
pub struct ArchiveHandle {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl ArchiveHandle {
    /// Stops after the pass in progress (if any) finishes.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Starts the archive loop: a pass every `interval` until `external` (or
/// [`ArchiveHandle::shutdown`]) says stop.
pub fn start(archiver: Archiver, mut external: watch::Receiver<bool>) -> ArchiveHandle {
    let (stop_tx, mut stop) = watch::channel(false);
    let task = tokio::spawn(async move {
        let mut every = tokio::time::interval(archiver.settings.interval);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let metrics = archiver.metrics.clone();
        let mut archiver = archiver;
        loop {
            tokio::select! {
                _ = every.tick() => {}
                _ = stop.wait_for(|s| *s) => return,
                _ = external.wait_for(|s| *s) => return,
            }
            let joined = tokio::task::spawn_blocking(move || {
                let r = archiver.pass();
                (archiver, r)
            })
            .await;
            let (back, result) = match joined {
                Ok(v) => v,
                Err(e) => {
                    // The state went with the panic; obligations stay in the
                    // store and the next boot resumes them.
                    tracing::error!(error = %e, "archiver panicked; archiving stops until restart");
                    metrics.archive.failing.store(1, Ordering::Relaxed);
                    return;
                }
            };
            archiver = back;
            let was_failing = metrics.archive.failing.load(Ordering::Relaxed) == 1;
            match result {
                Ok(_) => {
                    if was_failing {
                        tracing::info!("archive writes work again; settling resumed");
                    }
                    metrics.archive.failing.store(0, Ordering::Relaxed);
                }
                Err(e) => {
                    if matches!(e, ArchiveError::Write { .. }) {
                        metrics.archive.write_errors.fetch_add(1, Ordering::Relaxed);
                    }
                    // Once per streak: a broken disk would otherwise log
                    // every interval; the counter keeps the rate.
                    if !was_failing {
                        tracing::error!(error = %e, "archiving failed; hooks are delivered but not reclaimed until it works");
                    }
                    metrics.archive.failing.store(1, Ordering::Relaxed);
                }
            }
        }
    });
    ArchiveHandle {
        stop: stop_tx,
        task,
    }
}
