//! The store as Raft's state machine.
//!
//! Applying an entry replays its `WriteBatch` bytes into the store and
//! records the entry's log id (and, for a membership entry, the
//! membership) under `m:raft:` in the same write ([`Store::apply`]), so a
//! crash leaves a store whose marks say exactly which entries it holds.
//!
//! A snapshot is a RocksDB checkpoint of the store packed into one file
//! ([`crate::snapshot_file`]) in the snapshot directory, with its metadata
//! beside it; the metadata is read from the checkpoint itself, so it names
//! what the checkpoint holds even while entries go on being applied.
//! Installing one unpacks it beside the store and swaps it in
//! ([`Store::replace_with`]). Only the newest snapshot is kept.
//!
//! Every call into the store blocks: it runs on tokio's blocking threads.

use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ankusa_store::Store;
use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
use openraft::{AnyError, EntryPayload, OptionalSend, StorageIOError};

use crate::types::{
    Entry, LogId, Snapshot, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};

/// The last applied log id (`Option<LogId>`, postcard).
pub const APPLIED: &[u8] = b"m:raft:applied";
/// The last membership applied (`StoredMembership`, postcard).
pub const MEMBERSHIP: &[u8] = b"m:raft:membership";
/// The current snapshot's metadata, in the snapshot directory.
const CURRENT: &str = "current.meta";
/// How long an install waits for the store's readers to let go of it.
const SWAP_WAIT: Duration = Duration::from_secs(30);

fn any(e: impl std::error::Error + 'static) -> AnyError {
    AnyError::new(&e)
}

/// The store of one member, as Raft's state machine.
#[derive(Debug, Clone)]
pub struct StoreMachine {
    store: Arc<Store>,
    snapshots: PathBuf,
}

impl StoreMachine {
    /// The state machine over `store`, with its snapshots in `snapshots`
    /// (created if missing; on the store's filesystem, so an installed
    /// snapshot is renamed into place, not copied).
    pub fn new(store: Arc<Store>, snapshots: &Path) -> std::io::Result<StoreMachine> {
        std::fs::create_dir_all(snapshots)?;
        Ok(StoreMachine {
            store,
            snapshots: snapshots.to_path_buf(),
        })
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The log id and membership the store's marks record.
    pub fn marks(store: &Store) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let read = |k: &[u8]| {
            store
                .replication_mark(k)
                .map_err(|e| StorageIOError::read_state_machine(any(e)))
        };
        let applied = match read(APPLIED)? {
            Some(v) => {
                postcard::from_bytes(&v).map_err(|e| StorageIOError::read_state_machine(any(e)))?
            }
            None => None,
        };
        let membership = match read(MEMBERSHIP)? {
            Some(v) => {
                postcard::from_bytes(&v).map_err(|e| StorageIOError::read_state_machine(any(e)))?
            }
            None => StoredMembership::default(),
        };
        Ok((applied, membership))
    }

    async fn blocking<T, F>(&self, f: F) -> Result<T, StorageError>
    where
        T: Send + 'static,
        F: FnOnce(&StoreMachine) -> Result<T, StorageError> + Send + 'static,
    {
        let me = self.clone();
        tokio::task::spawn_blocking(move || f(&me))
            .await
            .map_err(|e| StorageIOError::write_state_machine(any(e)))?
    }

    fn snap_path(&self, id: &str) -> PathBuf {
        self.snapshots.join(format!("{id}.snap"))
    }

    /// Makes `archive` (already at its final path) the current snapshot and
    /// deletes every other.
    fn make_current(&self, meta: &SnapshotMeta) -> Result<(), StorageError> {
        let w = |e: std::io::Error| StorageIOError::write_snapshot(Some(meta.signature()), any(e));
        let bytes = postcard::to_stdvec(meta)
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), any(e)))?;
        let tmp = self.snapshots.join(format!("{CURRENT}.tmp"));
        std::fs::write(&tmp, bytes).map_err(w)?;
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(w)?;
        std::fs::rename(&tmp, self.snapshots.join(CURRENT)).map_err(w)?;
        let keep = format!("{}.snap", meta.snapshot_id);
        for e in std::fs::read_dir(&self.snapshots).map_err(w)? {
            let e = e.map_err(w)?;
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name != keep && name != CURRENT {
                let p = e.path();
                let gone = if p.is_dir() {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
                if let Err(e) = gone {
                    tracing::warn!(path = %p.display(), error = %e, "cannot delete an old snapshot file");
                }
            }
        }
        Ok(())
    }

    fn current_meta(&self) -> Result<Option<SnapshotMeta>, StorageError> {
        match std::fs::read(self.snapshots.join(CURRENT)) {
            Ok(b) => {
                Ok(Some(postcard::from_bytes(&b).map_err(|e| {
                    StorageIOError::read_snapshot(None, any(e))
                })?))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StorageIOError::read_snapshot(None, any(e)).into()),
        }
    }

    fn build(&self) -> Result<SnapshotMeta, StorageError> {
        let unique = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let w = |e: std::io::Error| StorageIOError::write_snapshot(None, any(e));
        let cp = self.snapshots.join(format!("build-{unique}"));
        self.store
            .checkpoint(&cp)
            .map_err(|e| StorageIOError::write_snapshot(None, any(e)))?;
        let (applied, membership) = {
            let copy = Store::open_read_only(&cp)
                .map_err(|e| StorageIOError::write_snapshot(None, any(e)))?;
            Self::marks(&copy)?
        };
        let id = match applied {
            Some(l) => format!(
                "{}-{}-{}-{unique}",
                l.leader_id.term, l.leader_id.node_id, l.index
            ),
            None => format!("none-{unique}"),
        };
        let meta = SnapshotMeta {
            last_log_id: applied,
            last_membership: membership,
            snapshot_id: id.clone(),
        };
        let tmp = self.snapshots.join(format!("{id}.snap.tmp"));
        crate::snapshot_file::pack(&cp, &tmp).map_err(w)?;
        std::fs::rename(&tmp, self.snap_path(&id)).map_err(w)?;
        std::fs::remove_dir_all(&cp).map_err(w)?;
        self.make_current(&meta)?;
        Ok(meta)
    }

    async fn open_snapshot(&self, meta: SnapshotMeta) -> Result<Snapshot, StorageError> {
        let f = tokio::fs::File::open(self.snap_path(&meta.snapshot_id))
            .await
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), any(e)))?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(f),
        })
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StoreMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let meta = self.blocking(|me| me.build()).await?;
        self.open_snapshot(meta).await
    }
}

impl RaftStateMachine<TypeConfig> for StoreMachine {
    type SnapshotBuilder = StoreMachine;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        self.blocking(|me| Self::marks(&me.store)).await
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        self.blocking(move |me| {
            let mut out = Vec::with_capacity(entries.len());
            for e in entries {
                let id = e.log_id;
                let fail = |x: &dyn std::fmt::Display| {
                    StorageIOError::apply(id, AnyError::error(x.to_string()))
                };
                let applied = postcard::to_stdvec(&Some(id)).map_err(|x| fail(&x))?;
                let result = match &e.payload {
                    EntryPayload::Blank => me.store.apply(None, &[(APPLIED, &applied)]),
                    EntryPayload::Normal(change) => {
                        me.store.apply(Some(&change.0), &[(APPLIED, &applied)])
                    }
                    EntryPayload::Membership(m) => {
                        let stored = StoredMembership::new(Some(id), m.clone());
                        let m = postcard::to_stdvec(&stored).map_err(|x| fail(&x))?;
                        me.store
                            .apply(None, &[(APPLIED, &applied), (MEMBERSHIP, &m)])
                    }
                };
                result.map_err(|x| fail(&x))?;
                out.push(());
            }
            Ok(out)
        })
        .await
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<tokio::fs::File>, StorageError> {
        let unique = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let f = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(self.snapshots.join(format!("receiving-{unique}.part")))
            .await
            .map_err(|e| StorageIOError::write_snapshot(None, any(e)))?;
        Ok(Box::new(f))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<tokio::fs::File>,
    ) -> Result<(), StorageError> {
        let file = snapshot.into_std().await;
        let meta = meta.clone();
        self.blocking(move |me| {
            let sig = Some(meta.signature());
            let w = |e: std::io::Error| StorageIOError::write_snapshot(sig.clone(), any(e));
            let mut file = file;
            file.seek(SeekFrom::Start(0)).map_err(w)?;
            let dir = me.snapshots.join(format!("install-{}", meta.snapshot_id));
            if dir.exists() {
                std::fs::remove_dir_all(&dir).map_err(w)?;
            }
            crate::snapshot_file::unpack_from(&mut file, &dir).map_err(w)?;
            // The archive is kept as this member's current snapshot.
            file.seek(SeekFrom::Start(0)).map_err(w)?;
            let keep = me.snap_path(&meta.snapshot_id);
            let tmp = keep.with_extension("snap.tmp");
            {
                let mut out = std::fs::File::create(&tmp).map_err(w)?;
                std::io::copy(&mut file, &mut out).map_err(w)?;
                out.sync_all().map_err(w)?;
            }
            std::fs::rename(&tmp, &keep).map_err(w)?;
            me.store
                .replace_with(&dir, SWAP_WAIT)
                .map_err(|e| StorageIOError::write_snapshot(sig.clone(), any(e)))?;
            let (applied, _) = Self::marks(&me.store)?;
            if applied != meta.last_log_id {
                return Err(StorageIOError::write_snapshot(
                    sig,
                    AnyError::error(format!(
                        "the installed store records {applied:?}, its snapshot says {:?}",
                        meta.last_log_id
                    )),
                )
                .into());
            }
            me.make_current(&meta)
        })
        .await
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        match self.blocking(|me| me.current_meta()).await? {
            Some(meta) => Ok(Some(self.open_snapshot(meta).await?)),
            None => Ok(None),
        }
    }
}
