//! openraft's own storage suite against [`LogStore`] and [`StoreMachine`]:
//! the contract Raft relies on (log state after appends, truncations and
//! purges; votes; applied state and membership; building a snapshot on one
//! member and installing it on another), checked by the library that
//! relies on it.

use std::sync::Arc;

use ankusa_store::Store;
use openraft::testing::{StoreBuilder, Suite};

use crate::types::{StorageError, TypeConfig};
use crate::{LogStore, StoreMachine};

struct OnDisk;

impl StoreBuilder<TypeConfig, LogStore, StoreMachine, tempfile::TempDir> for OnDisk {
    async fn build(&self) -> Result<(tempfile::TempDir, LogStore, StoreMachine), StorageError> {
        let dir = tempfile::tempdir().unwrap();
        let log = LogStore::open(&dir.path().join("raft")).unwrap();
        let store = Arc::new(Store::create_or_open(&dir.path().join("store")).unwrap());
        let sm = StoreMachine::new(store, &dir.path().join("snapshots")).unwrap();
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    Suite::test_all(OnDisk).unwrap();
}

use std::sync::Mutex;

use ankusa_store::digest;
use ankusa_store::fixture::{self, FixtureSpec};
use ankusa_store::replicate::{ReplicateError, Replicator};
use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
use openraft::{CommittedLeaderId, EntryPayload, LogId};

use crate::types::{Change, Entry};

/// Catches every change a store commits and applies it back to that store,
/// as a leader whose log commits everything at once would.
#[derive(Debug, Default)]
struct Catch {
    leader: Mutex<Option<std::sync::Weak<Store>>>,
    changes: Mutex<Vec<Vec<u8>>>,
}

impl Replicator for Catch {
    fn replicate(&self, entry: Vec<u8>) -> Result<(), ReplicateError> {
        let leader = self
            .leader
            .lock()
            .unwrap()
            .as_ref()
            .and_then(|w| w.upgrade());
        let leader = leader.ok_or(ReplicateError::NotLeader { leader: None })?;
        leader
            .apply(Some(&entry), &[])
            .map_err(|e| ReplicateError::Unknown(e.to_string()))?;
        self.changes.lock().unwrap().push(entry);
        Ok(())
    }
}

fn entry(index: u64, payload: EntryPayload<TypeConfig>) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 0), index),
        payload,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_that_apply_the_log_or_install_its_snapshot_hold_the_leaders_store() {
    let dir = tempfile::tempdir().unwrap();
    let leader = Arc::new(Store::create_or_open(&dir.path().join("leader")).unwrap());
    let catch = Arc::new(Catch::default());
    *catch.leader.lock().unwrap() = Some(Arc::downgrade(&leader));
    leader.set_replicator(catch.clone()).unwrap();
    fixture::write(
        &leader,
        &FixtureSpec::new(25, 2_500, 3, 1_800_000_000_000),
        |_, _| {},
    )
    .unwrap();
    let changes = std::mem::take(&mut *catch.changes.lock().unwrap());
    assert!(changes.len() >= 3, "{} changes", changes.len());

    // A follower applies the log: a blank entry, then every change.
    let follower = Arc::new(Store::create_or_open(&dir.path().join("follower")).unwrap());
    let mut sm = StoreMachine::new(follower.clone(), &dir.path().join("f-snaps")).unwrap();
    let mut log = vec![entry(1, EntryPayload::Blank)];
    for (i, c) in changes.into_iter().enumerate() {
        log.push(entry(i as u64 + 2, EntryPayload::Normal(Change(c))));
    }
    let last = log.last().unwrap().log_id;
    assert_eq!(sm.apply(log).await.unwrap().len() as u64, last.index);
    assert_eq!(sm.applied_state().await.unwrap().0, Some(last));
    let want = digest::run(&leader, |_, _| {}).unwrap();
    assert_eq!(digest::run(&follower, |_, _| {}).unwrap(), want);

    // A member that lost its disk is sent the follower's snapshot.
    let snap = sm.build_snapshot().await.unwrap();
    assert_eq!(snap.meta.last_log_id, Some(last));
    let empty = Arc::new(Store::create_or_open(&dir.path().join("empty")).unwrap());
    let mut fresh = StoreMachine::new(empty.clone(), &dir.path().join("e-snaps")).unwrap();
    let mut into = fresh.begin_receiving_snapshot().await.unwrap();
    let mut from = snap.snapshot;
    tokio::io::copy(&mut from, &mut *into).await.unwrap();
    fresh.install_snapshot(&snap.meta, into).await.unwrap();
    assert_eq!(fresh.applied_state().await.unwrap().0, Some(last));
    assert_eq!(digest::run(&empty, |_, _| {}).unwrap(), want);
    assert!(ankusa_store::check::run(&empty, |_, _| {}).unwrap().ok());
    let current = fresh.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(current.meta, snap.meta);
    // The installed store goes on taking entries.
    fresh
        .apply([entry(last.index + 1, EntryPayload::Blank)])
        .await
        .unwrap();
    assert_eq!(
        fresh.applied_state().await.unwrap().0.map(|l| l.index),
        Some(last.index + 1)
    );
}

/// Found by `tests/it/cluster.rs`: entries purged under a read came back
/// as the entries after `start - 1`, and openraft replicated them so; a
/// member rebuilt after losing its disk applied a log with a hole. A read
/// for replication returns only the run that starts at `start`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_read_returns_only_the_run_that_starts_where_it_was_asked() {
    use openraft::storage::RaftLogStorage;
    use openraft::RaftLogReader;

    let dir = tempfile::tempdir().unwrap();
    let mut log = LogStore::open(&dir.path().join("raft")).unwrap();
    // Entries 0..10 (openraft's append callback cannot be made outside
    // openraft: the rows are written as `append` writes them).
    log.write_entries((0..10).map(|i| entry(i, EntryPayload::Blank)))
        .unwrap();
    let idx = |v: Vec<Entry>| v.iter().map(|e| e.log_id.index).collect::<Vec<_>>();
    assert_eq!(
        idx(log.limited_get_log_entries(3, 6).await.unwrap()),
        vec![3, 4, 5]
    );
    // Purged up to 4: replication's read from 2 finds no run starting at
    // 2, while a plain read of the range gives what is there.
    log.purge(entry(4, EntryPayload::Blank).log_id)
        .await
        .unwrap();
    assert!(log.limited_get_log_entries(2, 8).await.unwrap().is_empty());
    assert_eq!(
        idx(log.try_get_log_entries(2..8).await.unwrap()),
        vec![5, 6, 7]
    );
    assert_eq!(
        idx(log.limited_get_log_entries(5, 8).await.unwrap()),
        vec![5, 6, 7]
    );
    assert_eq!(idx(log.try_get_log_entries(8..).await.unwrap()), vec![8, 9]);
}
