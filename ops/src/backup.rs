//! Backups of a node's store, and their restore: `ankusa store backup --to`
//! (through the daemon's admin API when one runs, on the stopped store
//! otherwise) and `ankusa store restore`.
//!
//! A backup is a directory `BACKUPS/ankusa-backup-<UTC time>-<node>`
//! (`ankusa-backup-20261201T190353.123Z-eu-1`: fixed-width time first, so
//! names sort in time order) holding a RocksDB checkpoint of the store and
//! a marker file, [`MARKER`], naming the node and the time. The store is
//! the whole of a node's state: hooks, rows, counters, tenants, DLQ, pauses,
//! the drain flag, jobs, the audit trail, the sink catalog and the node's
//! identity (`m:node`) are all RocksDB keys. What is not in it: the
//! configuration file and the archive files (`archive.dir`), which are
//! backed up with the machine's other files.
//!
//! Invariants:
//! - **A backup that looks whole is whole.** It is written under a hidden
//!   partial name (`.NAME.partial`; RocksDB itself writes the checkpoint
//!   under `.NAME.partial.tmp` first), its marker is written and synced
//!   last, and only then is it renamed to `NAME` and the directory synced.
//!   A crash leaves a partial: never counted, and removed by the next backup
//!   of the same node.
//! - **Retention deletes only this node's backups**: directories whose name
//!   parses as a backup of this node *and* that hold the marker. Nothing
//!   else in `BACKUPS` is touched, so several nodes can share it.
//! - **One backup at a time per process** ([`ONE_AT_A_TIME`]): with the
//!   store's writer lock (a stopped store's backup takes it, a daemon holds
//!   it) that makes a node's backups sequential, so a partial of this node
//!   found when a backup starts is a crash's leftover, not a backup in
//!   progress.
//! - **A restore writes over nothing**: its target must be missing or
//!   empty and held by no process. `CURRENT` (RocksDB's pointer to the
//!   live manifest) is copied last, so an interrupted restore leaves a
//!   directory that no opener takes for a store.
//! - **A restored node never mints an id twice.** The lost store went on
//!   minting `hk_<node>_<seq>` after the backup; the restore moves the
//!   next seq [`SEQ_GAP`] past the backup's, so no new hook gets an id a
//!   sink may already hold (and deduplicate away).

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, UNIX_EPOCH};

use ankusa_store::{node, NodeId, Store, StoreError};
use serde::{Deserialize, Serialize};

use crate::access::Principal;
use crate::model::{BackupDone, BackupRequest, Restored};
use crate::{jobs, OpsError, Result};

/// The marker file in every complete backup (JSON, [`Marker`]). A restore
/// does not copy it.
pub const MARKER: &str = "ANKUSA_BACKUP";

/// Every backup's name starts with this.
const PREFIX: &str = "ankusa-backup-";

/// The suffix of a backup being written (a crash's leftover, when no
/// backup runs).
const PARTIAL: &str = ".partial";

/// Width of the time in a name: `20261201T190353.123Z`.
const STAMP: usize = 20;

/// How far a restore moves the next seq: 2^40 ids, more than a node
/// mints between two backups (a million hooks a second for twelve days).
pub const SEQ_GAP: u64 = 1 << 40;

/// Serializes this process's backups (see the module's invariants).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What the marker file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// The node's id, none for a store that has none yet.
    pub node: Option<String>,
    /// When the checkpoint was taken (ms since the epoch).
    pub taken_at: u64,
    /// The store's directory then.
    pub store: String,
    /// The release that wrote it.
    pub version: String,
}

/// A backup's directory name: the time, then the node.
pub fn name(taken_at: u64, node: Option<&str>) -> String {
    let t = humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(taken_at))
        .to_string()
        .replace(['-', ':'], "");
    match node {
        Some(n) => format!("{PREFIX}{t}-{n}"),
        None => format!("{PREFIX}{t}"),
    }
}

/// The node a backup's name carries (`Some(None)`: a store without an id),
/// or `None` when `name` is not a backup's name.
pub fn parse_name(name: &str) -> Option<Option<String>> {
    let rest = name.strip_prefix(PREFIX)?;
    let stamp = rest.get(..STAMP)?;
    let shape = stamp.bytes().enumerate().all(|(i, b)| match i {
        8 => b == b'T',
        15 => b == b'.',
        19 => b == b'Z',
        _ => b.is_ascii_digit(),
    });
    if !shape {
        return None;
    }
    match &rest[STAMP..] {
        "" => Some(None),
        tail => {
            let id = tail.strip_prefix('-')?;
            NodeId::parse(id).ok().map(|n| Some(n.to_string()))
        }
    }
}

/// Takes a backup of `store` into `req.to` and applies the retention;
/// admin-only, audited. `store` is held as its writer: the daemon's own
/// handle, or the command line's on a stopped store.
pub fn take(store: &Store, who: &Principal, req: &BackupRequest, now: u64) -> Result<BackupDone> {
    who.require_admin("a backup")?;
    jobs::writable(store)?;
    if !req.to.is_absolute() {
        return Err(OpsError::BadRequest(format!(
            "the backup directory {} is not an absolute path (the daemon's working directory is not the caller's)",
            req.to.display()
        )));
    }
    if req.keep == Some(0) {
        return Err(OpsError::BadRequest(
            "--keep 0 would delete the backup just taken: keep at least 1".into(),
        ));
    }
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let to = &req.to;
    std::fs::create_dir_all(to).map_err(io(to))?;
    let node = node::identity(store)?.map(|n| n.id.to_string());
    let cleaned = clean_partials(to, node.as_deref())?;
    let name = name(now, node.as_deref());
    let done = to.join(&name);
    if done.exists() {
        return Err(OpsError::Conflict(format!(
            "{} already exists (a backup in the same millisecond?); nothing was written",
            done.display()
        )));
    }
    let partial = to.join(format!(".{name}{PARTIAL}"));
    if let Err(e) = write_partial(store, &partial, node.as_deref(), now) {
        // Our own leftovers (RocksDB's `.tmp` too): removed now rather
        // than at the next backup.
        let _ = std::fs::remove_dir_all(&partial);
        let _ = std::fs::remove_dir_all(to.join(format!(".{name}{PARTIAL}.tmp")));
        return Err(e);
    }
    std::fs::rename(&partial, &done).map_err(io(&done))?;
    sync_dir(to)?;
    let (files, bytes) = size_of(&done)?;
    let mut removed = Vec::new();
    if let Some(keep) = req.keep {
        let mut mine = backups_of(to, node.as_deref())?;
        mine.sort();
        mine.reverse();
        for old in mine.into_iter().skip(keep) {
            let path = to.join(&old);
            std::fs::remove_dir_all(&path).map_err(io(&path))?;
            removed.push(old);
        }
        if !removed.is_empty() {
            sync_dir(to)?;
        }
    }
    jobs::audit_store_action(store, who, "backup", &name, "done", 0, now)?;
    Ok(BackupDone {
        path: done.display().to_string(),
        name,
        node,
        taken_at: now,
        files,
        bytes,
        removed,
        cleaned,
    })
}

/// The checkpoint and its marker, under the partial name.
fn write_partial(store: &Store, partial: &Path, node: Option<&str>, now: u64) -> Result<()> {
    store.checkpoint(partial)?;
    let marker = Marker {
        node: node.map(str::to_owned),
        taken_at: now,
        store: store.path().display().to_string(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
    };
    let path = partial.join(MARKER);
    let bytes = serde_json::to_vec_pretty(&marker)
        .map_err(|e| OpsError::Internal(format!("cannot encode the backup marker: {e}")))?;
    let mut f = File::options()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(io(&path))?;
    f.write_all(&bytes).map_err(io(&path))?;
    f.sync_all().map_err(io(&path))?;
    sync_dir(partial)
}

/// Removes this node's partial backups (`.NAME.partial` and RocksDB's
/// `.NAME.partial.tmp`) left by a crash; returns their names.
fn clean_partials(to: &Path, node: Option<&str>) -> Result<Vec<String>> {
    let mut cleaned = Vec::new();
    for name in entries(to)? {
        let Some(inner) = name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".tmp").or(Some(n)))
            .and_then(|n| n.strip_suffix(PARTIAL))
        else {
            continue;
        };
        if parse_name(inner).is_some_and(|n| n.as_deref() == node) {
            let path = to.join(&name);
            if path.is_dir() {
                std::fs::remove_dir_all(&path).map_err(io(&path))?;
                cleaned.push(name);
            }
        }
    }
    Ok(cleaned)
}

/// The complete backups of `node` in `to`: named as one, a directory, with
/// the marker. Names only.
pub fn backups_of(to: &Path, node: Option<&str>) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for name in entries(to)? {
        if parse_name(&name).is_some_and(|n| n.as_deref() == node)
            && to.join(&name).join(MARKER).is_file()
        {
            out.push(name);
        }
    }
    Ok(out)
}

/// The names in a directory that are valid UTF-8 (a backup's always is).
fn entries(dir: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io(dir))? {
        let e = e.map_err(io(dir))?;
        if let Ok(n) = e.file_name().into_string() {
            out.push(n);
        }
    }
    Ok(out)
}

/// Reads a backup's marker; a directory without one is not a backup.
pub fn marker(backup: &Path) -> Result<Marker> {
    if !backup.is_dir() {
        return Err(OpsError::NotFound(format!(
            "no backup at {}: the directory does not exist",
            backup.display()
        )));
    }
    let path = backup.join(MARKER);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(OpsError::BadRequest(format!(
                "{} is not a complete Ankusa backup (no {MARKER} file): a backup interrupted before its end has none",
                backup.display()
            )))
        }
        Err(e) => return Err(io(&path)(e)),
    };
    serde_json::from_slice(&bytes).map_err(|e| {
        OpsError::BadRequest(format!(
            "{} is not an Ankusa backup marker: {e}",
            path.display()
        ))
    })
}

/// Copies the backup at `from` into `target` (missing or empty, held by
/// no process), `CURRENT` last; `progress(bytes copied, bytes in all)` is
/// called as it goes. The copy is then opened as its writer: it must name
/// the backup's node; its next seq moves [`SEQ_GAP`] on, and the restore
/// is audited there.
pub fn restore(
    from: &Path,
    target: &Path,
    who: &Principal,
    now: u64,
    mut progress: impl FnMut(u64, u64),
) -> Result<Restored> {
    let m = marker(from)?;
    if let Some(pid) = ankusa_store::lock::holder(target)? {
        return Err(OpsError::Conflict(format!(
            "a process (pid {pid}) holds the store at {}: stop the daemon before restoring",
            target.display()
        )));
    }
    if target.exists() {
        let mut listing = std::fs::read_dir(target).map_err(io(target))?;
        if listing.next().is_some() {
            return Err(OpsError::BadRequest(format!(
                "{} is not empty: a restore writes only into a new or empty directory (move the old store aside first)",
                target.display()
            )));
        }
    }
    // The files to copy: RocksDB's, flat, CURRENT last.
    let mut files = Vec::new();
    let mut total = 0u64;
    for name in entries(from)? {
        if name == MARKER {
            continue;
        }
        let path = from.join(&name);
        let meta = std::fs::metadata(&path).map_err(io(&path))?;
        if !meta.is_file() {
            return Err(OpsError::BadRequest(format!(
                "{} holds {name}, which is not a file: not a backup this release wrote",
                from.display()
            )));
        }
        total += meta.len();
        files.push(name);
    }
    if !files.iter().any(|n| n == "CURRENT") {
        return Err(OpsError::BadRequest(format!(
            "{} has no CURRENT file: not a store checkpoint",
            from.display()
        )));
    }
    files.sort_by_key(|n| n == "CURRENT");
    std::fs::create_dir_all(target).map_err(io(target))?;
    let mut done = 0u64;
    progress(0, total);
    let mut buf = vec![0u8; 1 << 20];
    for name in &files {
        let (src, dst) = (from.join(name), target.join(name));
        let mut r = File::open(&src).map_err(io(&src))?;
        let mut w = File::options()
            .write(true)
            .create_new(true)
            .open(&dst)
            .map_err(io(&dst))?;
        loop {
            let n = r.read(&mut buf).map_err(io(&src))?;
            if n == 0 {
                break;
            }
            w.write_all(&buf[..n]).map_err(io(&dst))?;
            done += n as u64;
            progress(done, total);
        }
        w.sync_all().map_err(io(&dst))?;
        if name != "CURRENT" {
            continue;
        }
        // Everything CURRENT points at is synced: make the names durable.
        sync_dir(target)?;
    }
    let s = Store::open(target)?;
    let id = node::identity(&s)?.map(|n| n.id.to_string());
    if id != m.node {
        return Err(OpsError::Internal(format!(
            "the restored store names node {id:?} but the backup's marker {:?}",
            m.node
        )));
    }
    let next_seq = s.skip_seqs(SEQ_GAP)?;
    let scope = format!(
        "from {}, next seq {next_seq}",
        from.file_name().map_or_else(
            || from.display().to_string(),
            |n| n.to_string_lossy().into_owned()
        )
    );
    jobs::audit_store_action(&s, who, "restore", &scope, "done", 0, now)?;
    Ok(Restored {
        store: target.display().to_string(),
        from: from.display().to_string(),
        node: id,
        taken_at: m.taken_at,
        files: files.len() as u64,
        bytes: total,
        next_seq,
    })
}

/// Files and bytes in a backup.
fn size_of(dir: &Path) -> Result<(u64, u64)> {
    let (mut files, mut bytes) = (0, 0);
    for e in std::fs::read_dir(dir).map_err(io(dir))? {
        let e = e.map_err(io(dir))?;
        let m = e.metadata().map_err(io(&e.path()))?;
        files += 1;
        bytes += m.len();
    }
    Ok((files, bytes))
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> OpsError + '_ {
    move |source| {
        OpsError::Store(StoreError::Io {
            path: PathBuf::from(path),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_sorts_by_time_and_parses_back_to_its_node() {
        let a = name(1_764_615_833_123, Some("eu-1"));
        assert_eq!(a, "ankusa-backup-20251201T190353.123Z-eu-1");
        assert_eq!(parse_name(&a), Some(Some("eu-1".to_owned())));
        let b = name(1_764_615_833_124, Some("eu-1"));
        assert!(a < b);
        let none = name(5, None);
        assert_eq!(none, "ankusa-backup-19700101T000000.005Z");
        assert_eq!(parse_name(&none), Some(None));
        for bad in [
            "ankusa-backup-",
            "ankusa-backup-20251201T190353.123Z-",
            "ankusa-backup-20251201T190353.123Z-EU",
            "ankusa-backup-20251201x190353.123Z-eu-1",
            "ankusa-backup-20251201T190353.123Zeu",
            "backup-20251201T190353.123Z-eu-1",
        ] {
            assert_eq!(parse_name(bad), None, "{bad}");
        }
    }
}
