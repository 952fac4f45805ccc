//! Several nodes side by side (docs/fleet.md).
//!
//! - `two_nodes_mint_disjoint_ids_and_refuse_each_others`: two daemons with
//!   their own node ids and stores take the same traffic; every id names its
//!   node, no id is minted twice, the sink gets each as `webhook-id`, and a
//!   node refuses another node's id naming the owner; each node's `/metrics`
//!   (`ankusa_node_info`) and `node status` name it.
//! - `an_id_from_before_the_node_had_one_still_finds_its_hook`: a hook the
//!   store held before it had an identity keeps its `hk_<16 hex>` id, which
//!   `dlq show` and `dlq replay` take; hooks after it carry the node.
//! - `haproxy_keeps_each_tenant_on_one_node_and_routes_around_a_drain`: two
//!   daemons behind a real HAProxy running docs/fleet/haproxy.cfg (only the
//!   addresses and the check interval changed): each tenant lands on one
//!   node, both get tenants; a drained node is taken out within a few
//!   checks, delivers what it holds and reports empty; undrain brings its
//!   tenants back to it.

use crate::common;

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    ankusa, ankusa_ok, client, config_dispatching, seq_of, store_check, write_config, Daemon,
};

/// A sink that refuses every hook for good (410), so each lands in the DLQ
/// after one attempt, and records the `webhook-id` it was sent (the
/// Standard Webhooks id of a signed delivery, which receivers deduplicate
/// on), after checking it equals `ankusa-hook-id`.
async fn start_refusing_sink(seen: Arc<Mutex<Vec<String>>>) -> String {
    let app = axum::Router::new()
        .route(
            "/s",
            axum::routing::post(
                |axum::extract::State(seen): axum::extract::State<Arc<Mutex<Vec<String>>>>,
                 headers: axum::http::HeaderMap| async move {
                    let id = |h: &str| {
                        headers
                            .get(h)
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_owned)
                    };
                    let wid = id("webhook-id");
                    assert_eq!(wid, id("ankusa-hook-id"));
                    seen.lock().unwrap().extend(wid);
                    (axum::http::StatusCode::GONE, "gone")
                },
            ),
        )
        .with_state(seen);
    let base = crate::common::serve_loopback(app).await;
    format!("{base}/s")
}

fn node_config(dir: &Path, node: &str, sink: &str) {
    let sources = format!(
        "[[sources]]\nid = \"shared\"\n[[sources.sinks]]\nurl = \"{sink}\"\nmax_attempts = 1\n\
         signing_secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n"
    );
    let node = if node.is_empty() {
        String::new()
    } else {
        format!("[node]\nid = \"{node}\"\n")
    };
    write_config(dir, &config_dispatching("tick = \"20ms\"", &node, &sources));
}

async fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn post(c: &reqwest::Client, d: &Daemon, tenant: &str, i: usize) -> String {
    let r = c
        .post(d.url("shared"))
        .header("x-tenant", tenant)
        .body(format!("{{\"i\":{i}}}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let v: serde_json::Value = r.json().await.unwrap();
    v["id"].as_str().unwrap().to_owned()
}

fn is_dead(store: &str, id: &str) -> bool {
    ankusa(&["dlq", "show", id, "--store", store])
        .status
        .success()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_nodes_mint_disjoint_ids_and_refuse_each_others() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = start_refusing_sink(seen.clone()).await;
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    node_config(da.path(), "a", &sink);
    node_config(db.path(), "b", &sink);
    let (a, b) = (Daemon::start(da.path()), Daemon::start(db.path()));
    let c = client();
    let (mut ids_a, mut ids_b) = (Vec::new(), Vec::new());
    // The same traffic on both: the same seqs, so only the node tells
    // the ids apart.
    for i in 0..20 {
        let tenant = format!("t{}", i % 5);
        ids_a.push(post(&c, &a, &tenant, i).await);
        ids_b.push(post(&c, &b, &tenant, i).await);
    }
    assert!(ids_a.iter().all(|id| id.starts_with("hk_a_")), "{ids_a:?}");
    assert!(ids_b.iter().all(|id| id.starts_with("hk_b_")), "{ids_b:?}");
    let all: HashSet<&String> = ids_a.iter().chain(&ids_b).collect();
    assert_eq!(all.len(), 40, "an id was minted twice");
    assert_eq!(seq_of(&ids_a[3]), seq_of(&ids_b[3]), "same seq, other node");

    wait_for("every hook sent once", Duration::from_secs(30), || {
        seen.lock().unwrap().len() >= 40
    })
    .await;
    let sent: HashSet<String> = seen.lock().unwrap().iter().cloned().collect();
    assert_eq!(
        sent,
        all.iter().map(|s| s.to_string()).collect::<HashSet<_>>(),
        "the sink sees the ids the clients got"
    );

    let (sa, sb) = (
        a.store.to_str().unwrap().to_owned(),
        b.store.to_str().unwrap().to_owned(),
    );
    wait_for(
        "the last hooks dead-lettered",
        Duration::from_secs(30),
        || is_dead(&sa, &ids_a[19]) && is_dead(&sb, &ids_b[19]),
    )
    .await;
    let show = ankusa_ok(&["dlq", "show", &ids_a[0], "--store", &sa]);
    assert!(show.contains(&ids_a[0]), "{show}");
    let list = ankusa_ok(&["dlq", "list", "--store", &sb]);
    assert!(list.contains(&ids_b[0]), "{list}");
    // Another node's id is refused naming its owner, on show and replay
    // alike, not answered "not found".
    for args in [
        vec!["dlq", "show", ids_b[0].as_str(), "--store", &sa],
        vec![
            "dlq",
            "replay",
            "--id",
            ids_b[0].as_str(),
            "--yes",
            "--store",
            &sa,
        ],
    ] {
        let o = ankusa(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("{} belongs to node b", ids_b[0])) && err.contains("(a)"),
            "{err}"
        );
    }
    // Each node names itself to Prometheus and to the operator.
    for (d, store, node) in [(&a, &sa, "a"), (&b, &sb, "b")] {
        let m = c
            .get(format!("{}/metrics", d.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let info = format!(
            "ankusa_node_info{{node=\"{node}\",version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        assert!(m.lines().any(|l| l == info), "{info} missing from\n{m}");
        let st: serde_json::Value =
            serde_json::from_str(&ankusa_ok(&["node", "status", "--store", store, "--json"]))
                .unwrap();
        assert_eq!(st["node"].as_str(), Some(node), "{st}");
        assert!(ankusa_ok(&["node", "status", "--store", store])
            .contains(&format!("node       {node}\n")));
    }
    a.stop_clean();
    b.stop_clean();
    store_check(&da.path().join("store"));
    store_check(&db.path().join("store"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_id_from_before_the_node_had_one_still_finds_its_hook() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = start_refusing_sink(seen.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    node_config(dir.path(), "", &sink);
    let d = Daemon::start(dir.path());
    let store = d.store.to_str().unwrap().to_owned();
    let c = client();
    let first = post(&c, &d, "acme", 0).await;
    // A config without [node] gets an id generated at the first boot.
    assert!(
        first.starts_with("hk_n") && first.len() == 3 + 9 + 1 + 16,
        "{first}"
    );
    wait_for("the hook dead-lettered", Duration::from_secs(30), || {
        is_dead(&store, &first)
    })
    .await;
    d.stop_clean();
    // The store as an earlier release left it: no identity.
    {
        let db = common::raw_open(&store);
        db.delete(ankusa_store::keys::meta::NODE).unwrap();
    }
    let old = format!("hk_{:016x}", seq_of(&first));
    node_config(dir.path(), "eu-1", &sink);
    let d = Daemon::start(dir.path());
    let later = post(&c, &d, "acme", 1).await;
    assert!(later.starts_with("hk_eu-1_"), "{later}");
    let list = ankusa_ok(&["dlq", "list", "--store", &store]);
    assert!(list.contains(&old), "the old hook keeps its old id: {list}");
    let show = ankusa_ok(&["dlq", "show", &old, "--store", &store]);
    assert!(show.contains(&old), "{show}");
    let replay = ankusa_ok(&["dlq", "replay", "--id", &old, "--yes", "--store", &store]);
    assert!(replay.contains("replayed 1 dead row"), "{replay}");
    // The replayed attempt goes out under the id the client was given
    // before the node had an identity.
    wait_for("the replayed attempt", Duration::from_secs(30), || {
        seen.lock().unwrap().iter().filter(|s| **s == old).count() >= 1
    })
    .await;
    d.stop_clean();
    store_check(&dir.path().join("store"));
}

/// The documented HAProxy configuration, with this test's addresses and a
/// short check interval (the only changes).
fn haproxy_config(bind: &str, nodes: &[&str]) -> String {
    let template = include_str!("../../docs/fleet/haproxy.cfg");
    let mut cfg = template
        .replace("bind :8080", &format!("bind {bind}"))
        .replace("inter 1s", "inter 100ms");
    for (i, addr) in nodes.iter().enumerate() {
        let documented = format!("10.0.0.{}:8080", i + 1);
        assert!(cfg.contains(&documented), "template lost {documented}");
        cfg = cfg.replace(&documented, addr);
    }
    assert!(!cfg.contains("10.0.0."), "a node the test does not run");
    cfg
}

/// A running `haproxy`, killed on drop so a failed test leaves no process.
pub(crate) struct Haproxy(pub(crate) std::process::Child);

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Checks `cfg` with `haproxy -c` (a refusal names what it could not
/// read) and starts HAProxy on it in the foreground; it stops when the
/// guard drops.
pub(crate) fn start_haproxy(haproxy: &str, cfg: &Path) -> Haproxy {
    let check = Command::new(haproxy)
        .arg("-c")
        .arg("-f")
        .arg(cfg)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    Haproxy(
        Command::new(haproxy)
            .arg("-db")
            .arg("-f")
            .arg(cfg)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    )
}

pub(crate) fn haproxy_bin() -> &'static str {
    for p in [
        "/usr/sbin/haproxy",
        "/usr/bin/haproxy",
        "/usr/local/sbin/haproxy",
    ] {
        if Path::new(p).exists() {
            return p;
        }
    }
    panic!("haproxy is not installed: `make prereqs` installs it (scripts/prereqs.sh)");
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A sink that accepts after a short pause, so a node holds a backlog for
/// a moment, and counts the deliveries of each hook id.
async fn start_slow_sink(seen: Arc<Mutex<Vec<String>>>) -> String {
    let app = axum::Router::new()
        .route(
            "/s",
            axum::routing::post(
                |axum::extract::State(seen): axum::extract::State<Arc<Mutex<Vec<String>>>>,
                 headers: axum::http::HeaderMap| async move {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    if let Some(id) = headers.get("ankusa-hook-id").and_then(|v| v.to_str().ok()) {
                        seen.lock().unwrap().push(id.to_owned());
                    }
                    "ok"
                },
            ),
        )
        .with_state(seen);
    let base = crate::common::serve_loopback(app).await;
    format!("{base}/s")
}

/// Posts one hook for `tenant` through `front` and returns the node that
/// took it (from its id).
async fn via(c: &reqwest::Client, front: &str, tenant: &str, i: usize) -> (String, String) {
    let r = c
        .post(format!("{front}/v1/sources/hooks/hooks"))
        .header("x-tenant", tenant)
        .body(format!("{{\"i\":{i}}}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202, "through haproxy");
    let v: serde_json::Value = r.json().await.unwrap();
    let id = v["id"].as_str().unwrap().to_owned();
    let node = ankusa_store::HookId::parse(&id)
        .unwrap()
        .node
        .expect("a node in the id")
        .to_owned();
    (node, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn haproxy_keeps_each_tenant_on_one_node_and_routes_around_a_drain() {
    let haproxy = haproxy_bin();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = start_slow_sink(seen.clone()).await;
    let sources = format!(
        "[[sources]]\nid = \"hooks\"\ntenant_header = \"x-tenant\"\n[[sources.sinks]]\nurl = \"{sink}\"\n"
    );
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for (dir, node) in [(&da, "a"), (&db, "b")] {
        write_config(
            dir.path(),
            &config_dispatching(
                "tick = \"20ms\"",
                &format!("[node]\nid = \"{node}\"\n"),
                &sources,
            ),
        );
    }
    let (a, b) = (Daemon::start(da.path()), Daemon::start(db.path()));
    let bind = format!("127.0.0.1:{}", free_port());
    let cfg = da.path().join("haproxy.cfg");
    let addr = |d: &Daemon| d.base.trim_start_matches("http://").to_owned();
    std::fs::write(&cfg, haproxy_config(&bind, &[&addr(&a), &addr(&b)])).unwrap();
    let _proxy = start_haproxy(haproxy, &cfg);
    let front = format!("http://{bind}");
    let c = client();
    wait_for("haproxy to listen", Duration::from_secs(20), || {
        std::net::TcpStream::connect(&bind).is_ok()
    })
    .await;

    // Many tenants through the balancer: each on exactly one node.
    let tenants: Vec<String> = (0..41).map(|i| format!("tenant-{i:02}")).collect();
    let mut home = std::collections::HashMap::new();
    let mut ids = HashSet::new();
    for round in 0..3 {
        // Another order each round (and an odd count), so a balancer that
        // ignored the tenant could not keep them apart by chance.
        let order: Vec<&String> = if round % 2 == 0 {
            tenants.iter().collect()
        } else {
            tenants.iter().rev().collect()
        };
        for t in order {
            let (node, id) = via(&c, &front, t, round).await;
            assert!(ids.insert(id.clone()), "{id} minted twice");
            let first = home.entry(t.clone()).or_insert_with(|| node.clone());
            assert_eq!(*first, node, "{t} moved between nodes");
        }
    }
    let on_a: Vec<&String> = tenants.iter().filter(|t| home[*t] == "a").collect();
    let on_b = tenants.len() - on_a.len();
    assert!(
        !on_a.is_empty() && on_b > 0,
        "both nodes get tenants: {home:?}"
    );

    // Drain a: within a few checks everything goes to b, and a delivers
    // what it holds and says it is empty.
    let (sa, sb) = (
        a.store.to_str().unwrap().to_owned(),
        b.store.to_str().unwrap().to_owned(),
    );
    ankusa_ok(&["node", "drain", "--store", &sa]);
    let mut probes = 0;
    let started = Instant::now();
    loop {
        let (node, id) = via(&c, &front, on_a[0], 100 + probes).await;
        ids.insert(id);
        probes += 1;
        if node == "b" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "haproxy still sends to the drained node"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for t in &tenants {
        let (node, id) = via(&c, &front, t, 200).await;
        assert_eq!(node, "b", "{t} sent to the drained node");
        assert!(ids.insert(id.clone()), "{id} minted twice");
    }
    let done: serde_json::Value = serde_json::from_str(&ankusa_ok(&[
        "node", "drain", "--wait", "--store", &sa, "--json",
    ]))
    .unwrap();
    assert_eq!(
        (done["empty"].as_bool(), done["owed"].as_u64()),
        (Some(true), Some(0)),
        "{done}"
    );

    // Undrain: a's tenants come back to it (the hash is consistent).
    ankusa_ok(&["node", "undrain", "--store", &sa]);
    let started = Instant::now();
    loop {
        let (node, id) = via(&c, &front, on_a[0], 300).await;
        ids.insert(id);
        if node == "a" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "haproxy does not send to the undrained node"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for t in &tenants {
        let (node, id) = via(&c, &front, t, 400).await;
        assert_eq!(node, home[t], "{t} did not come back to its node");
        assert!(ids.insert(id.clone()), "{id} minted twice");
    }
    wait_for("every hook delivered", Duration::from_secs(60), || {
        let seen = seen.lock().unwrap();
        ids.iter().all(|id| seen.contains(id))
    })
    .await;
    ankusa_ok(&["node", "drain", "--wait", "--store", &sb]);
    a.stop_clean();
    b.stop_clean();
    store_check(&da.path().join("store"));
    store_check(&db.path().join("store"));
}
