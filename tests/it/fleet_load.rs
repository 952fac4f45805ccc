//! The fleet under load (docs/fleet.md): three nodes behind the documented
//! HAProxy, a node killed and one drained while producers keep sending.
//!
//! - `a_fleet_under_load_loses_no_acknowledged_hook_through_a_kill_and_a_drain`:
//!   three daemons with node ids on loopback behind a real HAProxy running
//!   docs/fleet/haproxy.cfg (only the addresses and the check interval
//!   changed, and one more `server` line, as the file says: one per node).
//!   Several producers send a seeded load over many tenants through it,
//!   retrying connection failures and 5xx answers as a real producer does.
//!   Mid-load node `b` is SIGKILLed and restarted; later node `c` is drained
//!   (`node drain`, then `--wait`) and stopped. Afterwards: no two
//!   acknowledged hooks share an id; every acknowledged hook reached the sink
//!   at least once or is in its node's DLQ (the sink refuses a tenth of the
//!   tenants for good); each node's `store check` passes; and the sum over
//!   the nodes of `store info`'s totals equals what the test counted, and
//!   so do the totals of the fleet view (`tenants list --fleet`) over the
//!   three nodes started again. It
//!   prints the figures docs/fleet.md quotes: hooks acknowledged,
//!   delivered, duplicates the sink saw, dead-lettered, and the time until
//!   HAProxy routed the killed node's tenants elsewhere.

use crate::common;
use crate::fleet::{free_port, haproxy_bin, start_haproxy};

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{ankusa_json, config_dispatching, store_check, write_config, Daemon};

/// Tenants in the load; every [`REFUSED_EVERY`]-th is refused by the sink
/// (410: dead-lettered at the first attempt).
const TENANTS: usize = 200;
const REFUSED_EVERY: usize = 10;
/// Hooks acknowledged in all, and the producers sending them.
const HOOKS: usize = 2400;
const PRODUCERS: usize = 6;
const SEED: u64 = 0x5eed_f1ee7;

fn tenant(i: usize) -> String {
    if i.is_multiple_of(REFUSED_EVERY) {
        format!("r-{i:03}")
    } else {
        format!("t-{i:03}")
    }
}

/// The tenant of hook `k`: a fixed pseudo-random choice (splitmix64 of the
/// seed and `k`), skewed so that some tenants send far more than others.
fn tenant_of(k: usize) -> usize {
    let mut z = SEED.wrapping_add((k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    // Half the hooks go to the first tenth of the tenants.
    if z & 1 == 0 {
        ((z >> 1) % (TENANTS as u64 / 10)) as usize
    } else {
        ((z >> 1) % TENANTS as u64) as usize
    }
}

/// What the loopback sink saw: deliveries accepted per hook id, and the
/// ids it refused.
#[derive(Default)]
struct SinkLog {
    accepted: HashMap<String, u32>,
    refused: HashSet<String>,
}

/// Accepts every tenant's hooks but the refused ones' (410 for good).
async fn start_sink(log: Arc<Mutex<SinkLog>>) -> String {
    let app = axum::Router::new()
        .route(
            "/s",
            axum::routing::post(
                |axum::extract::State(log): axum::extract::State<Arc<Mutex<SinkLog>>>,
                 headers: axum::http::HeaderMap| async move {
                    let h = |n: &str| {
                        headers
                            .get(n)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned()
                    };
                    let (id, tenant) = (h("ankusa-hook-id"), h("ankusa-tenant"));
                    let mut log = log.lock().unwrap();
                    if tenant.starts_with("r-") {
                        log.refused.insert(id);
                        axum::http::StatusCode::GONE
                    } else {
                        *log.accepted.entry(id).or_default() += 1;
                        axum::http::StatusCode::OK
                    }
                },
            ),
        )
        .with_state(log);
    let base = crate::common::serve_loopback(app).await;
    format!("{base}/s")
}

/// One acknowledged hook.
#[derive(Debug, Clone)]
struct Ack {
    tenant: usize,
    id: String,
    node: String,
    at: Instant,
}

#[derive(Default)]
struct Producers {
    acks: Mutex<Vec<Ack>>,
    /// Requests that failed to connect or got a 5xx, retried.
    retried: AtomicUsize,
}

/// Sends hooks `next..HOOKS` (shared with the other producers) through
/// `front`, each with its own idempotency key, retrying a connection
/// failure or a 5xx (a node that died mid-request: the hook may have been
/// stored without its answer) until it is acknowledged.
async fn produce(front: String, next: Arc<AtomicUsize>, out: Arc<Producers>) {
    let c = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    loop {
        let k = next.fetch_add(1, Ordering::SeqCst);
        if k >= HOOKS {
            return;
        }
        let t = tenant_of(k);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            assert!(Instant::now() < deadline, "hook {k} never acknowledged");
            let sent = c
                .post(format!("{front}/v1/sources/hooks/hooks"))
                .header("x-tenant", tenant(t))
                .header("idempotency-key", format!("k-{k}"))
                .body(format!("{{\"k\":{k}}}"))
                .send()
                .await;
            let r = match sent {
                Ok(r) if r.status().is_server_error() => None,
                Ok(r) => Some(r),
                Err(_) => None,
            };
            let Some(r) = r else {
                out.retried.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            };
            let status = r.status();
            let v: serde_json::Value = r.json().await.unwrap();
            assert!(status == 200 || status == 202, "{status}: {v}");
            let id = v["id"].as_str().unwrap().to_owned();
            let node = ankusa_store::HookId::parse(&id)
                .unwrap()
                .node
                .expect("a node in the id")
                .to_owned();
            out.acks.lock().unwrap().push(Ack {
                tenant: t,
                id,
                node,
                at: Instant::now(),
            });
            break;
        }
    }
}

async fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The documented HAProxy configuration for `nodes`: the test's addresses,
/// a short check interval, and a `server` line per node beyond the two the
/// file shows, numbered as the file's comment says.
fn haproxy_config(bind: &str, nodes: &[&str]) -> String {
    let template = include_str!("../../docs/fleet/haproxy.cfg");
    let last = "    server node-b 10.0.0.2:8080 check id 2\n";
    assert!(template.contains(last), "the template's server lines moved");
    let mut extra = String::new();
    for i in 3..=nodes.len() {
        let name = char::from(b'a' + u8::try_from(i - 1).unwrap());
        extra.push_str(&format!(
            "    server node-{name} 10.0.0.{i}:8080 check id {i}\n"
        ));
    }
    let mut cfg = template
        .replace(last, &format!("{last}{extra}"))
        .replace("bind :8080", &format!("bind {bind}"))
        .replace("inter 1s", "inter 100ms");
    for (i, addr) in nodes.iter().enumerate() {
        cfg = cfg.replace(&format!("10.0.0.{}:8080", i + 1), addr);
    }
    assert!(!cfg.contains("10.0.0."), "a node the test does not run");
    cfg
}

/// One node: its directory, fixed ingest port (a restart keeps its
/// address in HAProxy's `server` line) and id.
struct Node {
    id: &'static str,
    dir: tempfile::TempDir,
    addr: String,
}

impl Node {
    fn new(id: &'static str, sink: &str) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let sources = format!(
            "[[sources]]\nid = \"hooks\"\ntenant_header = \"x-tenant\"\n[[sources.sinks]]\nurl = \"{sink}\"\n"
        );
        let cfg = config_dispatching(
            "tick = \"20ms\"\nreclaim_interval = \"100ms\"",
            &format!("[node]\nid = \"{id}\"\n"),
            &sources,
        )
        .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"{addr}\""));
        write_config(dir.path(), &cfg);
        Node { id, dir, addr }
    }

    fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    fn store_str(&self) -> String {
        self.store().to_str().unwrap().to_owned()
    }

    fn start(&self) -> Daemon {
        Daemon::start(self.dir.path())
    }
}

/// Every dead hook id of a node, every page of `dlq list`.
fn dlq_ids(store: &Path) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = vec![
            "dlq",
            "list",
            "--store",
            store.to_str().unwrap(),
            "--limit",
            "1000",
            "--json",
        ];
        if let Some(c) = &cursor {
            args.extend(["--cursor", c.as_str()]);
        }
        let page = ankusa_json(&args);
        for e in page["entries"].as_array().unwrap() {
            ids.push(e["hook_id"].as_str().unwrap().to_owned());
        }
        match page["next"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return ids,
        }
    }
}

/// The fleet's figures from one source (the nodes' `store info` summed
/// now; a fleet-wide view can be compared with the same numbers).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Figures {
    accepted: u64,
    delivered: u64,
    dead_lettered: u64,
    /// Rows still owed (pending, scheduled, inflight): 0 at the end.
    owed: u64,
    dead: u64,
}

impl std::ops::Add for Figures {
    type Output = Figures;
    fn add(self, o: Figures) -> Figures {
        Figures {
            accepted: self.accepted + o.accepted,
            delivered: self.delivered + o.delivered,
            dead_lettered: self.dead_lettered + o.dead_lettered,
            owed: self.owed + o.owed,
            dead: self.dead + o.dead,
        }
    }
}

/// A stopped node's figures, from `ankusa store info --json`.
fn store_figures(store: &Path) -> Figures {
    let i = ankusa_json(&[
        "store",
        "info",
        "--store",
        store.to_str().unwrap(),
        "--json",
    ]);
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or_else(|| panic!("{i}"));
    Figures {
        accepted: n(&i["totals"]["accepted"]),
        delivered: n(&i["totals"]["delivered"]),
        dead_lettered: n(&i["totals"]["dead_lettered"]),
        owed: n(&i["node"]["pending"]) + n(&i["node"]["scheduled"]) + n(&i["node"]["inflight"]),
        dead: n(&i["node"]["dead"]),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fleet_under_load_loses_no_acknowledged_hook_through_a_kill_and_a_drain() {
    let haproxy = haproxy_bin();
    let log = Arc::new(Mutex::new(SinkLog::default()));
    let sink = start_sink(log.clone()).await;
    let nodes = [
        Node::new("a", &sink),
        Node::new("b", &sink),
        Node::new("c", &sink),
    ];
    let mut daemons: Vec<Option<Daemon>> = nodes.iter().map(|n| Some(n.start())).collect();

    let bind = format!("127.0.0.1:{}", free_port());
    let cfg = nodes[0].dir.path().join("haproxy.cfg");
    let addrs: Vec<&str> = nodes.iter().map(|n| n.addr.as_str()).collect();
    std::fs::write(&cfg, haproxy_config(&bind, &addrs)).unwrap();
    let _proxy = start_haproxy(haproxy, &cfg);
    wait_for("haproxy to listen", Duration::from_secs(20), || {
        std::net::TcpStream::connect(&bind).is_ok()
    })
    .await;

    let front = format!("http://{bind}");
    let next = Arc::new(AtomicUsize::new(0));
    let out = Arc::new(Producers::default());
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|_| tokio::spawn(produce(front.clone(), next.clone(), out.clone())))
        .collect();
    let acked = || out.acks.lock().unwrap().len();

    // Each tenant's home node, from what it acknowledged so far.
    let homes = |before: Instant| -> HashMap<usize, String> {
        let mut h = HashMap::new();
        for a in out.acks.lock().unwrap().iter().filter(|a| a.at < before) {
            let home = h.entry(a.tenant).or_insert_with(|| a.node.clone());
            assert_eq!(*home, a.node, "tenant {} on two nodes", tenant(a.tenant));
        }
        h
    };

    // 1. Node b dies mid-load (SIGKILL) and comes back.
    wait_for("a third of the load", Duration::from_secs(120), || {
        acked() >= HOOKS / 3
    })
    .await;
    let b = daemons[1].take().unwrap();
    let killed = Instant::now();
    b.kill9();
    let home = homes(killed);
    let on_b: HashSet<usize> = home
        .iter()
        .filter(|(_, n)| *n == "b")
        .map(|(t, _)| *t)
        .collect();
    assert!(
        !on_b.is_empty() && on_b.len() < home.len(),
        "b had some tenants: {home:?}"
    );
    let mut rerouted = None;
    wait_for(
        "b's tenants acknowledged elsewhere",
        Duration::from_secs(60),
        || {
            rerouted = out
                .acks
                .lock()
                .unwrap()
                .iter()
                .filter(|a| a.at > killed && on_b.contains(&a.tenant) && a.node != "b")
                .map(|a| a.at - killed)
                .min();
            rerouted.is_some()
        },
    )
    .await;
    let reroute = rerouted.unwrap();
    daemons[1] = Some(nodes[1].start());

    // 2. Node c is drained, delivers what it holds, and is stopped.
    wait_for("two thirds of the load", Duration::from_secs(120), || {
        acked() >= 2 * HOOKS / 3
    })
    .await;
    let c_store = nodes[2].store_str();
    ankusa_json(&["node", "drain", "--store", &c_store, "--json"]);
    let drained = Instant::now();
    // c's own tenants (b's came back to b when it returned).
    let on_c: HashSet<usize> = home
        .iter()
        .filter(|(_, n)| *n == "c")
        .map(|(t, _)| *t)
        .collect();
    wait_for("c taken out by haproxy", Duration::from_secs(60), || {
        out.acks
            .lock()
            .unwrap()
            .iter()
            .any(|a| a.at > drained && on_c.contains(&a.tenant) && a.node != "c")
    })
    .await;
    let st = c_store.clone();
    let empty = tokio::task::spawn_blocking(move || {
        ankusa_json(&["node", "drain", "--wait", "--store", &st, "--json"])
    })
    .await
    .unwrap();
    assert_eq!(empty["owed"].as_u64(), Some(0), "{empty}");
    daemons[2].take().unwrap().stop_clean();

    for p in producers {
        p.await.unwrap();
    }

    // 3. Everything owed is delivered or dead on the nodes still running.
    for (n, _) in nodes.iter().zip(&daemons).filter(|(_, d)| d.is_some()) {
        let st = n.store_str();
        wait_for(
            &format!("node {} owing nothing", n.id),
            Duration::from_secs(120),
            || {
                ankusa_json(&["node", "status", "--store", &st, "--json"])["owed"].as_u64()
                    == Some(0)
            },
        )
        .await;
    }
    for d in daemons.iter_mut() {
        if let Some(d) = d.take() {
            d.stop_clean();
        }
    }

    // 4. The accounting.
    let acks = out.acks.lock().unwrap().clone();
    let ids: HashSet<&String> = acks.iter().map(|a| &a.id).collect();
    assert_eq!(ids.len(), acks.len(), "two acknowledged hooks share an id");
    assert_eq!(acks.len(), HOOKS);
    let mut dead: HashSet<String> = HashSet::new();
    let mut per_node = Vec::new();
    for n in &nodes {
        store_check(&n.store());
        let node_dead = dlq_ids(&n.store());
        let f = store_figures(&n.store());
        assert_eq!(f.dead, node_dead.len() as u64, "node {}: {f:?}", n.id);
        dead.extend(node_dead);
        per_node.push((n.id, f));
    }
    let log = log.lock().unwrap();
    let mut lost = Vec::new();
    for a in &acks {
        let refused = a.tenant.is_multiple_of(REFUSED_EVERY);
        let arrived = if refused {
            dead.contains(&a.id)
        } else {
            log.accepted.contains_key(&a.id)
        };
        if !arrived {
            lost.push(a);
        }
    }
    assert!(
        lost.is_empty(),
        "acknowledged but neither at the sink nor in a DLQ: {lost:?}"
    );
    let delivered: u64 = log.accepted.len() as u64;
    let received: u64 = log.accepted.values().map(|n| u64::from(*n)).sum();
    let stored: HashSet<&String> = log.accepted.keys().chain(dead.iter()).collect();
    // What the test counted, against the sum of the nodes' own figures.
    let counted = Figures {
        accepted: stored.len() as u64,
        delivered,
        dead_lettered: dead.len() as u64,
        owed: 0,
        dead: dead.len() as u64,
    };
    // Every view of the fleet's figures must equal what the test counted;
    // a fleet-wide view (a merged listing over the nodes) is one more line
    // in this list.
    let views = [(
        "the nodes' store info, summed",
        per_node.iter().fold(Figures::default(), |s, (_, f)| s + *f),
    )];
    for (view, figures) in views {
        assert_eq!(figures, counted, "{view}: per node {per_node:?}");
    }
    // The fleet-wide view an operator reads (`tenants list --fleet`, what the
    // fleet console shows): the nodes started again (c still drained) and
    // asked at once.
    let again: Vec<Daemon> = nodes.iter().map(Node::start).collect();
    let fleet_file = nodes[0].dir.path().join("fleet.toml");
    let fleet_toml: String = nodes
        .iter()
        .map(|n| {
            format!(
                "[[nodes]]\nname = \"{}\"\nsocket = \"{}\"\n",
                n.id,
                n.store().join("admin.sock").display()
            )
        })
        .collect();
    std::fs::write(&fleet_file, fleet_toml).unwrap();
    let v = ankusa_json(&[
        "tenants",
        "list",
        "--fleet",
        fleet_file.to_str().unwrap(),
        "--json",
    ]);
    let n = |x: &serde_json::Value| x.as_u64().unwrap_or_else(|| panic!("{v}"));
    let (t, c) = (&v["totals"], &v["cumulative"]);
    let fleet = Figures {
        accepted: n(&c["accepted"]),
        delivered: n(&c["delivered"]),
        dead_lettered: n(&c["dead_lettered"]),
        owed: n(&t["pending"]) + n(&t["scheduled"]) + n(&t["inflight"]),
        dead: n(&t["dead"]),
    };
    assert_eq!(fleet, counted, "the fleet view's totals: {v}");
    for d in again {
        d.stop_clean();
    }
    assert!(
        dead.iter().all(|id| !log.accepted.contains_key(id)),
        "a hook both delivered and dead"
    );

    eprintln!(
        "fleet load: {} hooks acknowledged over {} tenants by {PRODUCERS} producers \
         ({} requests retried); {} stored (acknowledged or not: a request cut by the kill); \
         {delivered} delivered, {} deliveries received by the sink ({} duplicates); \
         {} dead-lettered; per node {}; reroute after the kill {} ms",
        acks.len(),
        acks.iter().map(|a| a.tenant).collect::<HashSet<_>>().len(),
        out.retried.load(Ordering::Relaxed),
        stored.len(),
        received,
        received - delivered,
        dead.len(),
        per_node
            .iter()
            .map(|(id, f)| format!("{id}: {} accepted", f.accepted))
            .collect::<Vec<_>>()
            .join(", "),
        reroute.as_millis(),
    );
}
