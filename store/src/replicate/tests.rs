//! Unit tests of `replicate`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::*;
use crate::batch::Batch;
use crate::digest;
use crate::error::StoreError;
use crate::fixture::{self, FixtureSpec};
use crate::schema::Family;
use crate::Store;

const APPLIED: &[u8] = b"m:raft:applied";

/// A log of one leader and one follower: every entry is applied to both,
/// in order, with its index; `refuse` makes the next entries fail.
#[derive(Debug)]
struct Mirror {
    leader: Mutex<Weak<Store>>,
    follower: Arc<Store>,
    index: AtomicU64,
    refuse: AtomicBool,
}

impl Replicator for Mirror {
    fn replicate(&self, entry: Vec<u8>) -> std::result::Result<(), ReplicateError> {
        if self.refuse.load(Ordering::SeqCst) {
            return Err(ReplicateError::NotLeader { leader: None });
        }
        let i = self.index.fetch_add(1, Ordering::SeqCst) + 1;
        let mark = i.to_be_bytes();
        let leader = self.leader.lock().unwrap().upgrade().unwrap();
        for s in [&leader, &self.follower] {
            s.apply(Some(&entry), &[(APPLIED, &mark)])
                .map_err(|e| ReplicateError::Unknown(e.to_string()))?;
        }
        Ok(())
    }
}

fn pair() -> (tempfile::TempDir, Arc<Store>, Arc<Store>, Arc<Mirror>) {
    let dir = tempfile::tempdir().unwrap();
    let leader = Arc::new(Store::create_or_open(&dir.path().join("leader")).unwrap());
    let follower = Arc::new(Store::create_or_open(&dir.path().join("follower")).unwrap());
    let mirror = Arc::new(Mirror {
        leader: Mutex::new(Arc::downgrade(&leader)),
        follower: follower.clone(),
        index: AtomicU64::new(0),
        refuse: AtomicBool::new(false),
    });
    leader.set_replicator(mirror.clone()).unwrap();
    (dir, leader, follower, mirror)
}

#[test]
fn a_follower_that_applies_every_entry_holds_the_leaders_store() {
    let (_d, leader, follower, mirror) = pair();
    assert!(leader.is_replicated() && !follower.is_replicated());
    // Hooks, rows, tenants, counter merges (with their per-sink deltas
    // read from the leader's hooks), many commits.
    fixture::write(
        &leader,
        &FixtureSpec::new(30, 3_000, 11, 1_800_000_000_000),
        |_, _| {},
    )
    .unwrap();
    let entries = mirror.index.load(Ordering::SeqCst);
    assert!(entries >= 3, "{entries} entries");
    let (l, f) = (
        digest::run(&leader, |_, _| {}).unwrap(),
        digest::run(&follower, |_, _| {}).unwrap(),
    );
    assert_eq!(l, f);
    assert!(l.keys > 3_000);
    for s in [&leader, &follower] {
        assert!(crate::check::run(s, |_, _| {}).unwrap().ok());
        assert_eq!(
            s.replication_mark(APPLIED).unwrap(),
            Some(entries.to_be_bytes().to_vec())
        );
    }
}

#[test]
fn a_change_the_log_refused_is_nowhere() {
    let (_d, leader, follower, mirror) = pair();
    let mut b = Batch::new();
    b.put(Family::Audit, b"one".to_vec(), b"1".to_vec());
    leader.commit(b, true).unwrap();
    let before = digest::run(&leader, |_, _| {}).unwrap();
    mirror.refuse.store(true, Ordering::SeqCst);
    let mut b = Batch::new();
    b.put(Family::Audit, b"two".to_vec(), b"2".to_vec());
    let e = leader.commit(b, true).unwrap_err();
    assert!(
        matches!(e, StoreError::Replication(ReplicateError::NotLeader { .. })),
        "{e}"
    );
    assert_eq!(digest::run(&leader, |_, _| {}).unwrap(), before);
    assert_eq!(digest::run(&follower, |_, _| {}).unwrap(), before);
}

#[test]
fn bookkeeping_is_only_under_its_prefix_and_a_replicator_is_installed_once() {
    let (_d, leader, _f, mirror) = pair();
    let e = leader.apply(None, &[(b"m:next_seq", b"x")]).unwrap_err();
    assert!(e.to_string().contains("m:raft:"), "{e}");
    assert!(leader.replication_mark(b"m:next_seq").is_err());
    assert!(leader.set_replicator(mirror).is_err());
    // A content-free entry moves only the mark.
    let before = digest::run(&leader, |_, _| {}).unwrap();
    leader
        .apply(None, &[(APPLIED, &7u64.to_be_bytes())])
        .unwrap();
    assert_eq!(digest::run(&leader, |_, _| {}).unwrap(), before);
    assert_eq!(
        leader.replication_mark(APPLIED).unwrap(),
        Some(7u64.to_be_bytes().to_vec())
    );
}
