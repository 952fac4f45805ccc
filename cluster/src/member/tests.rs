//! Three members in one process over loopback HTTP: the cluster forms by
//! itself, a leader's commits reach every store, followers refuse writes,
//! the leader's loss elects another that goes on, a member restarted with
//! its disk catches up, and a member that lost its disk is rebuilt from a
//! snapshot. Digests are equal wherever applied indexes are.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ankusa_store::fixture::{self, FixtureSpec};
use ankusa_store::{digest, Store, StoreError};

use super::*;

const SECRET: &str = "sixteen-chars-or-more";

struct Node {
    member: Member,
    server: tokio::task::JoinHandle<()>,
}

fn paths(root: &Path, id: MemberId) -> (PathBuf, PathBuf, PathBuf) {
    let d = root.join(format!("n{id}"));
    (d.join("store"), d.join("raft"), d.join("snapshots"))
}

async fn start(
    root: &Path,
    id: MemberId,
    peers: &BTreeMap<MemberId, String>,
    listener: tokio::net::TcpListener,
) -> Node {
    let (store, log, snapshots) = paths(root, id);
    std::fs::create_dir_all(store.parent().unwrap()).unwrap();
    let store = Arc::new(Store::create_or_open(&store).unwrap());
    let cfg = MemberConfig {
        id,
        peers: peers.clone(),
        secret: SECRET.into(),
        log,
        snapshots,
        timing: Timing {
            heartbeat: Duration::from_millis(100),
            election: (Duration::from_millis(400), Duration::from_millis(800)),
            snapshot_every: 2,
            keep: 0,
        },
    };
    let member = Member::start(cfg, store).await.unwrap();
    let app = member.routes(SECRET, 64 << 20);
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Node { member, server }
}

async fn stop(n: Node) {
    n.member.shutdown().await.unwrap();
    n.server.abort();
    let _ = n.server.await;
}

/// The leader every live member names, once they have named the same one
/// for a while (the first elections of three members that all start at
/// once may take a term or two).
async fn leader_of(nodes: &[&Node]) -> Member {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut agreed: Option<(MemberId, Instant)> = None;
    loop {
        let named: Vec<Option<MemberId>> = nodes
            .iter()
            .map(|n| n.member.metrics().current_leader)
            .collect();
        let one = named[0].filter(|l| named.iter().all(|n| *n == Some(*l)));
        let leader = one.and_then(|l| {
            nodes
                .iter()
                .find(|n| n.member.id == l && n.member.is_leader())
        });
        match (leader, agreed) {
            (Some(n), Some((id, since))) if id == n.member.id => {
                if since.elapsed() > Duration::from_millis(500) {
                    return n.member.clone();
                }
            }
            (Some(n), _) => agreed = Some((n.member.id, Instant::now())),
            (None, _) => agreed = None,
        }
        assert!(Instant::now() < deadline, "no leader agreed: {named:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes `rows` delivery rows on the leader's store, through the log.
async fn write(leader: &Member, rows: u64, seed: u64) {
    let store = leader.store.clone();
    tokio::task::spawn_blocking(move || {
        fixture::write(
            &store,
            &FixtureSpec::new(10, rows, seed, 1_800_000_000_000),
            |_, _| {},
        )
        .unwrap();
    })
    .await
    .unwrap();
}

/// Waits until every member has applied as far as the leader, then
/// compares their digests.
async fn converged(leader: &Member, nodes: &[&Node]) -> digest::StoreDigest {
    let want = leader.metrics().last_applied;
    let deadline = Instant::now() + Duration::from_secs(30);
    for n in nodes {
        while n.member.metrics().last_applied < want {
            assert!(
                Instant::now() < deadline,
                "member {} stuck at {:?}, leader at {want:?}",
                n.member.id,
                n.member.metrics().last_applied
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let d = digest::run(&leader.store, |_, _| {}).unwrap();
    for n in nodes {
        assert_eq!(
            digest::run(&n.member.store, |_, _| {}).unwrap(),
            d,
            "member {}",
            n.member.id
        );
        assert!(ankusa_store::check::run(&n.member.store, |_, _| {})
            .unwrap()
            .ok());
    }
    d
}

async fn listen() -> (tokio::net::TcpListener, String) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap().to_string();
    (l, a)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_members_replicate_fail_over_and_rebuild_a_lost_disk() {
    let root = tempfile::tempdir().unwrap();
    let mut listeners = Vec::new();
    let mut peers = BTreeMap::new();
    for id in 1..=3 {
        let (l, a) = listen().await;
        peers.insert(id, a);
        listeners.push(l);
    }
    let mut nodes: Vec<Option<Node>> = Vec::new();
    for (i, l) in listeners.into_iter().enumerate() {
        nodes.push(Some(start(root.path(), i as u64 + 1, &peers, l).await));
    }
    let live = |nodes: &[Option<Node>]| -> Vec<MemberId> {
        nodes.iter().flatten().map(|n| n.member.id).collect()
    };
    assert_eq!(live(&nodes), vec![1, 2, 3]);

    // The cluster forms from the list alone; the leader's commits reach
    // every store.
    let refs: Vec<&Node> = nodes.iter().flatten().collect();
    let leader = leader_of(&refs).await;
    write(&leader, 300, 1).await;
    converged(&leader, &refs).await;

    // Peer traffic without the cluster's secret is refused unread.
    let http = reqwest::Client::new();
    for secret in [None, Some("not-the-secret-at-all")] {
        let mut r = http.post(format!("http://{}/raft/vote", peers[&leader.id]));
        if let Some(s) = secret {
            r = r.header(crate::network::SECRET_HEADER, s);
        }
        let r = r.body(vec![0u8; 8]).send().await.unwrap();
        assert_eq!(r.status(), 401, "{secret:?}");
    }

    // A follower refuses a write, and nothing of it is anywhere.
    let follower = refs.iter().find(|n| n.member.id != leader.id).unwrap();
    let fs = follower.member.store.clone();
    let e = tokio::task::spawn_blocking(move || {
        fixture::write(
            &fs,
            &FixtureSpec::new(3, 10, 9, 1_800_000_000_000),
            |_, _| {},
        )
    })
    .await
    .unwrap()
    .unwrap_err();
    assert!(
        matches!(
            &e,
            StoreError::Replication(ankusa_store::replicate::ReplicateError::NotLeader { .. })
        ),
        "{e}"
    );
    let before = converged(&leader, &refs).await;
    drop(refs);

    // The leader dies: another is elected, and goes on.
    let gone = leader.id;
    let dead = nodes[gone as usize - 1].take().unwrap();
    stop(dead).await;
    drop(leader);
    let refs: Vec<&Node> = nodes.iter().flatten().collect();
    let leader = leader_of(&refs).await;
    assert_ne!(leader.id, gone);
    write(&leader, 300, 2).await;
    let after = converged(&leader, &refs).await;
    assert!(after.keys > before.keys);
    drop(refs);

    // The old leader comes back with its disk and catches up.
    let (l, _) = {
        let l = tokio::net::TcpListener::bind(&peers[&gone]).await.unwrap();
        (l, ())
    };
    nodes[gone as usize - 1] = Some(start(root.path(), gone, &peers, l).await);
    let refs: Vec<&Node> = nodes.iter().flatten().collect();
    let leader = leader_of(&refs).await;
    converged(&leader, &refs).await;
    drop(refs);

    // A follower loses its disk: it comes back empty and is rebuilt from a
    // snapshot (the log it would need was purged).
    let victim = (1..=3).find(|id| *id != leader.id).unwrap();
    let dead = nodes[victim as usize - 1].take().unwrap();
    stop(dead).await;
    std::fs::remove_dir_all(root.path().join(format!("n{victim}"))).unwrap();
    write(&leader, 300, 3).await;
    let l = tokio::net::TcpListener::bind(&peers[&victim])
        .await
        .unwrap();
    nodes[victim as usize - 1] = Some(start(root.path(), victim, &peers, l).await);
    let refs: Vec<&Node> = nodes.iter().flatten().collect();
    let leader = leader_of(&refs).await;
    converged(&leader, &refs).await;
    let rebuilt = nodes[victim as usize - 1].as_ref().unwrap();
    assert!(
        rebuilt.member.metrics().snapshot.is_some(),
        "the lost disk was rebuilt from a snapshot"
    );
    drop(refs);
    for n in nodes.into_iter().flatten() {
        stop(n).await;
    }
}
