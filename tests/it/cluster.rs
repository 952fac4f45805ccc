//! Three real daemons as one cluster (docs/cluster.md), with senders that
//! give every hook a unique idempotency key and a sink that records every
//! delivery. Faults: the leader SIGKILLed under load and restarted; the
//! leader frozen (SIGSTOP) past the election timeout, then thawed; a
//! follower's disk lost. After each: every hook answered `202` is
//! delivered, no key was answered with two ids, every store passes
//! `store check`, and the three digests are equal once caught up.

use crate::common;

use std::collections::{BTreeMap, HashSet};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use common::{client, Daemon};
use nix::sys::signal::{kill, Signal};

#[derive(Default)]
struct Sink {
    ids: Mutex<HashSet<String>>,
}

async fn record(State(s): State<Arc<Sink>>, h: HeaderMap) -> StatusCode {
    if let Some(id) = h.get("ankusa-hook-id").and_then(|v| v.to_str().ok()) {
        s.ids.lock().unwrap().insert(id.to_owned());
    }
    StatusCode::OK
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Cluster {
    dirs: Vec<PathBuf>,
    nodes: Vec<Option<Daemon>>,
}

impl Cluster {
    async fn start(root: &Path, sink: &str) -> Cluster {
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let peers = ports
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{{ id = {}, addr = \"127.0.0.1:{p}\" }}", i + 1))
            .collect::<Vec<_>>()
            .join(", ");
        let mut dirs = Vec::new();
        for (i, p) in ports.iter().enumerate() {
            let dir = root.join(format!("n{}", i + 1));
            std::fs::create_dir_all(&dir).unwrap();
            common::write_config(
                &dir,
                &format!(
                    "[store]\npath = \"store\"\n[http]\nlisten = \"127.0.0.1:0\"\n\
                     [dispatch]\ntick = \"20ms\"\n\
                     [[sources]]\nid = \"shop\"\ntenant_header = \"X-Tenant\"\n\
                     [[sources.sinks]]\nurl = \"{sink}\"\nbackoff_initial = \"100ms\"\nbackoff_max = \"1s\"\n\
                     [cluster]\nid = {}\nlisten = \"127.0.0.1:{p}\"\npeers = [{peers}]\n\
                     secret = \"a-cluster-secret-for-tests\"\nheartbeat = \"100ms\"\n\
                     election_timeout = \"500ms\"\nsnapshot_every = 50\n",
                    i + 1
                ),
            );
            dirs.push(dir);
        }
        let nodes = dirs.iter().map(|d| Some(Daemon::start(d))).collect();
        Cluster { dirs, nodes }
    }

    /// The member whose `/healthz/leader` answers 200, once one does.
    async fn leader(&self, c: &reqwest::Client) -> usize {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            for (i, n) in self.nodes.iter().enumerate() {
                let Some(n) = n else { continue };
                let r = c.get(format!("{}/healthz/leader", n.base)).send().await;
                if r.is_ok_and(|r| r.status() == 200) {
                    return i;
                }
            }
            assert!(Instant::now() < deadline, "no leader");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn bases(&self) -> Vec<String> {
        self.nodes
            .iter()
            .flatten()
            .map(|n| n.base.clone())
            .collect()
    }
}

/// Posts hooks with unique keys to whichever member takes them, retrying
/// a key on every other answer, until `stop`. Returns key → id.
async fn send(
    bases: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    tag: &'static str,
    acked: Arc<Mutex<Vec<Instant>>>,
) -> BTreeMap<String, String> {
    let c = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut out = BTreeMap::new();
    let mut k = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let key = format!("{tag}-{k}");
        'retry: loop {
            let targets = bases.lock().unwrap().clone();
            for b in targets {
                let r = c
                    .post(format!("{b}/v1/sources/shop/hooks"))
                    .header("x-tenant", tag)
                    .header("idempotency-key", &key)
                    .body(format!("{{\"k\":\"{key}\"}}"))
                    .send()
                    .await;
                if let Ok(r) = r {
                    if r.status() == 202 || r.status() == 200 {
                        let v: serde_json::Value = r.json().await.unwrap();
                        let id = v["id"].as_str().unwrap().to_owned();
                        if let Some(old) = out.insert(key.clone(), id.clone()) {
                            assert_eq!(old, id, "key {key} answered with two ids");
                        }
                        acked.lock().unwrap().push(Instant::now());
                        break 'retry;
                    }
                }
            }
            if stop.load(Ordering::SeqCst) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        k += 1;
    }
    out
}

async fn converge_and_check(cl: Cluster, sink: &Sink, acked: &BTreeMap<String, String>) {
    // Every acknowledged hook reaches the sink.
    let want: HashSet<&String> = acked.values().collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let missing = {
            let got = sink.ids.lock().unwrap();
            want.iter().filter(|id| !got.contains(**id)).count()
        };
        if missing == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{missing} of {} acknowledged hooks never delivered",
            want.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ids: HashSet<&String> = acked.values().collect();
    assert_eq!(ids.len(), acked.len(), "two keys answered with one id");
    // Caught up: let the followers apply the leader's last entries (a
    // member rebuilt from a snapshot may still be taking it).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let dirs = cl.dirs.clone();
    for n in cl.nodes.into_iter().flatten() {
        n.stop();
    }
    let mut digests = Vec::new();
    for (i, d) in dirs.iter().enumerate() {
        let store = d.join("store");
        if std::env::var_os("ANKUSA_KEEP_CLUSTER").is_some() {
            let _ = std::process::Command::new("cp")
                .arg("-r")
                .arg(d)
                .arg(format!("/tmp/kept-n{}", i + 1))
                .status();
        }
        common::store_check_when(&store, &format!("member {}", i + 1));
        let v = common::ankusa_json(&[
            "store",
            "digest",
            "--store",
            store.to_str().unwrap(),
            "--json",
        ]);
        digests.push(v["sha256"].as_str().unwrap().to_owned());
    }
    assert!(
        digests.iter().all(|d| *d == digests[0]),
        "replicas differ: {digests:?}"
    );
}

async fn start_sink() -> (Arc<Sink>, String) {
    let sink = Arc::new(Sink::default());
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(record))
        .with_state(sink.clone());
    let base = common::serve_loopback(app).await;
    (sink, format!("{base}/hook"))
}

/// A cluster under load: its sink, its members, and senders posting to
/// whichever member takes their hooks.
struct Rig {
    sink: Arc<Sink>,
    _root: tempfile::TempDir,
    cl: Cluster,
    c: reqwest::Client,
    leader: usize,
    bases: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<Instant>>>,
    senders: Vec<tokio::task::JoinHandle<BTreeMap<String, String>>>,
}

impl Rig {
    /// Three members and one sender per tenant, running for `warm`.
    async fn start(tenants: &[&'static str], warm: Duration) -> Rig {
        let (sink, url) = start_sink().await;
        let root = tempfile::tempdir().unwrap();
        let cl = Cluster::start(root.path(), &url).await;
        let c = client();
        let leader = cl.leader(&c).await;
        let bases = Arc::new(Mutex::new(cl.bases()));
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let senders = tenants
            .iter()
            .map(|t| tokio::spawn(send(bases.clone(), stop.clone(), t, acked.clone())))
            .collect();
        tokio::time::sleep(warm).await;
        assert!(!acked.lock().unwrap().is_empty(), "nothing acknowledged");
        Rig {
            sink,
            _root: root,
            cl,
            c,
            leader,
            bases,
            stop,
            acked,
            senders,
        }
    }

    /// Tells the senders which members are up now.
    fn members_changed(&self) {
        *self.bases.lock().unwrap() = self.cl.bases();
    }

    /// How long after `since` the first `202` came.
    async fn next_202(&self, since: Instant, what: &str) -> Duration {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(t) = self.acked.lock().unwrap().iter().find(|t| **t > since) {
                return *t - since;
            }
            assert!(Instant::now() < deadline, "no 202 {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the senders and checks the cluster (`converge_and_check`).
    /// Returns how many hooks were acknowledged.
    async fn finish(self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        let mut all = BTreeMap::new();
        for s in self.senders {
            all.extend(s.await.unwrap());
        }
        converge_and_check(self.cl, &self.sink, &all).await;
        all.len()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_leader_loses_no_acknowledged_hook() {
    let mut rig = Rig::start(&["acme", "beta"], Duration::from_millis(1_500)).await;
    let before = rig.acked.lock().unwrap().len();

    // SIGKILL the leader under load.
    let killed_at = Instant::now();
    let leader = rig.leader;
    rig.cl.nodes[leader].take().unwrap().kill9();
    rig.members_changed();
    let failover = rig.next_202(killed_at, "after the leader's kill").await;
    eprintln!("failover: next 202 {failover:?} after the SIGKILL");
    tokio::time::sleep(Duration::from_millis(1_000)).await;

    // The old leader comes back with its disk and catches up.
    rig.cl.nodes[leader] = Some(Daemon::start(&rig.cl.dirs[leader]));
    rig.members_changed();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let all = rig.finish().await;
    assert!(all > before, "hooks acknowledged after the failover too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_leader_loses_no_acknowledged_hook() {
    let rig = Rig::start(&["acme"], Duration::from_millis(1_000)).await;

    // SIGSTOP the leader past the election timeout: another leads; then
    // SIGCONT, and the old one follows.
    let pid = rig.cl.nodes[rig.leader].as_ref().unwrap().pid();
    kill(pid, Signal::SIGSTOP).unwrap();
    rig.next_202(Instant::now(), "while the leader was frozen")
        .await;
    kill(pid, Signal::SIGCONT).unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_ne!(
        rig.cl.leader(&rig.c).await,
        rig.leader,
        "the thawed member follows"
    );
    rig.finish().await;
}

/// Found by this test and not fixed yet (issue 49). A member whose disk
/// was lost, restarted empty while hooks flow, first panicked inside
/// openraft 0.9.25 (`raft_core.rs:779`) and its store failed `store
/// check`: the leader's replication read entries the leader had just
/// purged, got the later ones, and sent them as if they followed the
/// member's only entry (the group's first membership, which it writes
/// again at an empty first boot). Since `LogStore::limited_get_log_entries`
/// returns only the run that starts where it was asked (and an empty
/// member no longer initialises a group its peers formed), the member no
/// longer applies a log with a hole; but it stays empty: the leader's
/// stream for it keeps asking for the purged range from index 0, and
/// openraft takes the empty read for a heartbeat, never sending the
/// snapshot. Next: remove and re-add such a member as a learner, which
/// openraft documents for a wiped member and which starts a new stream.
/// The same fault in one process without load passes (`ankusa_cluster`'s
/// `three_members_replicate_fail_over_and_rebuild_a_lost_disk`).
/// Run it with `--run-ignored all`.
#[ignore = "a known failure under investigation: see the doc comment"]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_follower_disk_loses_no_acknowledged_hook() {
    let mut rig = Rig::start(&["acme"], Duration::from_millis(2_000)).await;

    // A follower loses its disk: killed, its store, log and snapshots
    // deleted, started again empty; it is rebuilt from the others.
    let victim = (0..3).find(|i| *i != rig.leader).unwrap();
    rig.cl.nodes[victim].take().unwrap().kill9();
    for d in ["store", "store.raft", "store.snapshots"] {
        let _ = std::fs::remove_dir_all(rig.cl.dirs[victim].join(d));
    }
    rig.members_changed();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    rig.cl.nodes[victim] = Some(Daemon::start(&rig.cl.dirs[victim]));
    rig.members_changed();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    rig.finish().await;
}
