//! The transitions' unit tests: each family's moves against a real store.

use std::ops::ControlFlow;

use crate::batch::Batch;
use crate::keys::{bounds, bucket_of, prefix, ActiveKey};
use crate::rows::DueRow;
use crate::schema::Family;
use crate::store::{Dir, Store};
use crate::values::Envelope;

use super::markers::{cleanup_delete, cleanup_verify};
use super::reclaim::reclaim_verify;
use super::*;
use crate::error::StoreError;
use crate::tenants::TenantAllocator;

fn ingest_at(store: &Store, alloc: &mut TenantAllocator, tenant: &str, at: u64) -> DueRow {
    let mut b = Batch::new();
    let res = alloc.resolve(store, [tenant], &mut b).unwrap();
    let env = Envelope {
        received_at: at,
        source_id: "s".into(),
        tenant: tenant.into(),
        idempotency_key: None,
        event_type: None,
        headers: vec![],
        body: vec![1],
    };
    let seq = store.next_seq().unwrap();
    let rows = ingest(
        &mut b,
        &IngestHook {
            seq,
            ord: res.ord(tenant, 10).unwrap(),
            envelope: &env,
            sinks: SinkSet::first(1),
            archive: false,
            dedupe_expires_at: None,
        },
    );
    store.commit(b, true).unwrap();
    alloc.committed(res);
    rows[0]
}

/// Reclaim's delete-then-verify, driven step by step: the last row of a
/// hook is delivered after the pass saw it owed but before its marker
/// delete. Without the verify the hook keeps no marker and is never
/// reclaimed.
#[test]
fn reclaim_does_not_lose_a_hook_released_during_its_pass() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create_or_open(&dir.path().join("s")).unwrap();
    let mut alloc = TenantAllocator::load(&store, 10).unwrap();
    // One hook, two sinks: deliver sink 0 (cleared marker), keep sink 1.
    let mut b = Batch::new();
    let res = alloc.resolve(&store, ["a"], &mut b).unwrap();
    let env = Envelope {
        received_at: 1,
        source_id: "s".into(),
        tenant: "a".into(),
        idempotency_key: None,
        event_type: None,
        headers: vec![],
        body: vec![1],
    };
    let rows = ingest(
        &mut b,
        &IngestHook {
            seq: 1,
            ord: res.ord("a", 10).unwrap(),
            envelope: &env,
            sinks: SinkSet::first(2),
            archive: false,
            dedupe_expires_at: None,
        },
    );
    store.commit(b, true).unwrap();
    alloc.committed(res);
    let mut b = Batch::new();
    let f0 = claim(&mut b, &rows[0]);
    let f1 = claim(&mut b, &rows[1]);
    delivered(&mut b, &f0);
    store.commit(b, false).unwrap();

    // The pass reads the hook as owed (sink 1) and deletes its marker,
    // while sink 1's delivery commits in between (its marker put lands
    // before the pass's delete, modelled by committing it first: the
    // pass's batch was built from the earlier read).
    let mut b = Batch::new();
    delivered(&mut b, &f1);
    let (lo, hi) = bounds::family(prefix::CLEARED);
    let mut seqs = Vec::new();
    store
        .scan(Family::Index, &lo, &hi, Dir::Forward, |k, _| {
            seqs.push(crate::keys::decode_seq_key(k, prefix::CLEARED, "c").unwrap());
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
    assert_eq!(seqs, vec![1]);
    assert!(owed(&store, 1).unwrap());
    store.commit(b, false).unwrap();
    let mut del = Batch::new();
    del.delete(Family::Index, enc::seq_key(prefix::CLEARED, 1));
    store.commit(del, false).unwrap();

    assert_eq!(
        reclaim_verify(&store, &[1]).unwrap(),
        vec![1],
        "the marker must come back"
    );
    assert_eq!(
        reclaim_pass(&store, 10).unwrap(),
        1,
        "and the next pass reclaims the hook"
    );
    assert!(crate::queries::hook(&store, 1).unwrap().is_none());
    let rep = crate::check::run(&store, |_, _| {}).unwrap();
    assert!(rep.ok(), "{:#?}", rep.mismatches);
}

/// The delete-then-verify argument, driven step by step: a writer's
/// commit lands between the cleanup's delete and its verify, into two of
/// the deleted seconds (both behind the tenant's first due row at delete
/// time). Both markers must come back, not only the earliest.
#[test]
fn verify_restores_every_marker_deleted_under_a_concurrent_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create_or_open(&dir.path().join("s")).unwrap();
    let mut alloc = TenantAllocator::load(&store, 10).unwrap();
    let r3 = ingest_at(&store, &mut alloc, "a", 3_000);
    let r5 = ingest_at(&store, &mut alloc, "a", 5_000);
    ingest_at(&store, &mut alloc, "a", 90_000);
    let mut b = Batch::new();
    claim(&mut b, &r3);
    claim(&mut b, &r5);
    store.commit(b, false).unwrap();

    let visit = MarkerVisit {
        ord: r3.ord,
        scanned: &[3, 5],
        from: crate::queries::DueFrom::At(0),
    };
    let (deleted, _) = cleanup_delete(&store, &[visit], 100_000).unwrap().remove(0);
    assert_eq!(deleted, vec![3, 5]);
    ingest_at(&store, &mut alloc, "a", 3_100);
    ingest_at(&store, &mut alloc, "a", 5_100);
    let restored = cleanup_verify(&store, r3.ord, &deleted).unwrap();
    assert_eq!(restored, vec![3, 5]);
    let rep = crate::check::run(&store, |_, _| {}).unwrap();
    assert!(rep.ok(), "{:#?}", rep.mismatches);
}

fn has_marker(store: &Store, ord: u32, bucket: u64) -> bool {
    store
        .get(Family::Index, &enc::active(&ActiveKey { bucket, ord }))
        .unwrap()
        .is_some()
}

/// What a cleanup stopped between its delete and its verify leaves when
/// a writer's commit landed between the cleanup's read and its delete: a
/// due row (second 3) whose marker is gone, the tenant still known by a
/// later marker (second 90). The next cleanup of the tenant puts it back,
/// even when it does not look at second 3 at all.
#[test]
fn a_cleanup_puts_back_the_missing_marker_of_the_first_due_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create_or_open(&dir.path().join("s")).unwrap();
    let mut alloc = TenantAllocator::load(&store, 10).unwrap();
    let r3 = ingest_at(&store, &mut alloc, "a", 3_100);
    ingest_at(&store, &mut alloc, "a", 90_000);
    let mut b = Batch::new();
    b.delete(
        Family::Index,
        enc::active(&ActiveKey {
            bucket: 3,
            ord: r3.ord,
        }),
    );
    store.commit(b, false).unwrap();
    assert!(!crate::check::run(&store, |_, _| {}).unwrap().ok());

    let c = cleanup_markers(&store, r3.ord, &[90], 0, 100_000).unwrap();
    assert_eq!(c.healed, Some(3));
    assert!(has_marker(&store, r3.ord, 3));
    let rep = crate::check::run(&store, |_, _| {}).unwrap();
    assert!(rep.ok(), "{:#?}", rep.mismatches);
}

/// A fault between the delete and the verify: the cleanup returns the
/// error with the delete committed and nothing verified. A tenant whose
/// every marker is gone is found again by the boot repair, from its
/// counters, and only it.
#[test]
fn the_boot_repair_finds_a_tenant_whose_every_marker_was_lost() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create_or_open(&dir.path().join("s")).unwrap();
    let mut alloc = TenantAllocator::load(&store, 10).unwrap();
    let lost = ingest_at(&store, &mut alloc, "lost", 3_000);
    let kept = ingest_at(&store, &mut alloc, "kept", 4_000);
    // "lost" has a stale marker (second 2) and its row's marker (3);
    // the row's is lost the way a crashed cleanup loses it.
    let mut b = Batch::new();
    b.put(
        Family::Index,
        enc::active(&ActiveKey {
            bucket: 2,
            ord: lost.ord,
        }),
        Vec::new(),
    );
    b.delete(
        Family::Index,
        enc::active(&ActiveKey {
            bucket: 3,
            ord: lost.ord,
        }),
    );
    store.commit(b, false).unwrap();
    store.arm_fault("cleanup.after_delete", Some(crate::faults::Action::Error));
    let err = cleanup_markers(&store, lost.ord, &[2], 0, 100_000).unwrap_err();
    assert!(
        matches!(err, StoreError::Fault("cleanup.after_delete")),
        "{err}"
    );
    assert!(!has_marker(&store, lost.ord, 2), "the delete was committed");
    assert!(!has_marker(&store, lost.ord, 3));

    let healed = repair_markers(&store).unwrap();
    assert_eq!(healed, vec![lost.ord]);
    assert!(has_marker(&store, lost.ord, 3));
    assert!(has_marker(&store, kept.ord, 4));
    assert_eq!(repair_markers(&store).unwrap(), Vec::<u32>::new());
    let rep = crate::check::run(&store, |_, _| {}).unwrap();
    assert!(rep.ok(), "{:#?}", rep.mismatches);
}

/// The cleanup's search for the tenant's first due row starts at the
/// floor the dispatcher knows, so it does not step over the tombstones
/// of the rows just claimed at the head of the tenant's range (it did,
/// on every tick, until a compaction).
#[test]
fn the_cleanup_skips_no_tombstones_below_its_floor() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create_or_open(&dir.path().join("s")).unwrap();
    let mut alloc = TenantAllocator::load(&store, 10).unwrap();
    let rows: Vec<DueRow> = (0..400u64)
        .map(|i| ingest_at(&store, &mut alloc, "a", 1_000 + i * 100))
        .collect();
    let mut b = Batch::new();
    for r in &rows[..399] {
        claim(&mut b, r);
    }
    store.commit(b, false).unwrap();
    let last = rows[399];
    let floor = bucket_of(last.at) * 1000;
    let second = [bucket_of(last.at)];
    let (done, skipped) = crate::tombstones::skipped_by(|| {
        cleanup_markers(&store, last.ord, &second, floor, 100_000)
    });
    done.unwrap();
    let (done, unbounded) =
        crate::tombstones::skipped_by(|| cleanup_markers(&store, last.ord, &second, 0, 100_000));
    done.unwrap();
    assert!(
        unbounded >= 300,
        "the unbounded search steps over tombstones ({unbounded})"
    );
    assert!(
        skipped < 20,
        "the floored search stepped over {skipped} tombstones"
    );
}
