//! Unit tests of `digest`.

use super::*;
use crate::batch::Batch;
use crate::fixture::{self, FixtureSpec};

const NOW: u64 = 1_800_000_000_000;

fn fixture_store(seed: u64) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create_or_open(&dir.path().join("s")).unwrap();
    fixture::write(&store, &FixtureSpec::new(20, 2_000, seed, NOW), |_, _| {}).unwrap();
    (dir, store)
}

fn digest(store: &Store) -> StoreDigest {
    run(store, |_, _| {}).unwrap()
}

#[test]
fn equal_content_gives_equal_digests_and_other_content_says_where() {
    let (_a, a) = fixture_store(7);
    let (_b, b) = fixture_store(7);
    let (_c, c) = fixture_store(8);
    let (da, db, dc) = (digest(&a), digest(&b), digest(&c));
    assert_eq!(da, db);
    assert!(da.keys > 2_000, "{da:?}");
    assert_ne!(da.sha256, dc.sha256);
    let parted: Vec<&str> = da
        .families
        .iter()
        .zip(&dc.families)
        .filter(|(x, y)| x.sha256 != y.sha256)
        .map(|(x, _)| x.family)
        .collect();
    assert!(parted.contains(&"deliveries"), "{parted:?}");
}

#[test]
fn one_changed_value_changes_the_digest_and_its_familys() {
    let (_a, a) = fixture_store(3);
    let before = digest(&a);
    let mut b = Batch::new();
    b.put(Family::Audit, b"zz-extra".to_vec(), b"v".to_vec());
    a.commit(b, false).unwrap();
    let after = digest(&a);
    assert_ne!(before.sha256, after.sha256);
    assert_eq!(after.keys, before.keys + 1);
    for (x, y) in before.families.iter().zip(&after.families) {
        assert_eq!(x.sha256 == y.sha256, x.family != "audit", "{}", x.family);
    }
}

#[test]
fn the_write_probe_and_the_replication_bookkeeping_are_not_content() {
    let (_a, a) = fixture_store(5);
    let before = digest(&a);
    a.probe_write().unwrap();
    let mut b = Batch::new();
    b.put(
        Family::Meta,
        b"m:raft:applied".to_vec(),
        42u64.to_be_bytes().to_vec(),
    );
    a.commit(b, false).unwrap();
    assert_eq!(digest(&a), before);
    // Any other meta key is content.
    let mut b = Batch::new();
    b.put(Family::Meta, b"m:rafts".to_vec(), vec![1]);
    a.commit(b, false).unwrap();
    assert_ne!(digest(&a), before);
}

#[test]
fn keys_and_values_are_delimited() {
    let one = tempfile::tempdir().unwrap();
    let two = tempfile::tempdir().unwrap();
    let (x, y) = (
        Store::create_or_open(&one.path().join("s")).unwrap(),
        Store::create_or_open(&two.path().join("s")).unwrap(),
    );
    let mut b = Batch::new();
    b.put(Family::Audit, b"ab".to_vec(), b"c".to_vec());
    x.commit(b, false).unwrap();
    let mut b = Batch::new();
    b.put(Family::Audit, b"a".to_vec(), b"bc".to_vec());
    y.commit(b, false).unwrap();
    assert_ne!(digest(&x).sha256, digest(&y).sha256);
}

#[test]
fn the_digest_survives_a_reopen_and_its_files_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let before = {
        let s = Store::create_or_open(&path).unwrap();
        fixture::write(&s, &FixtureSpec::new(10, 1_000, 9, NOW), |_, _| {}).unwrap();
        let d = digest(&s);
        s.flush().unwrap();
        for f in Family::ALL {
            s.compact(f).unwrap();
        }
        assert_eq!(
            digest(&s),
            d,
            "counters are read merged, whatever the files"
        );
        d
    };
    let s = Store::open_read_only(&path).unwrap();
    assert_eq!(digest(&s), before);
}
