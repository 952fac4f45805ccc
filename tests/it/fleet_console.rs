//! The fleet commands and the fleet console against real nodes: two real
//! daemons (one reached on its admin socket, one on its TCP admin listener
//! with a token) and a third node whose socket accepts connections and
//! never answers (a hung daemon).
//!
//! - `ankusa tenants list --fleet --json`: every tenant of both live nodes
//!   with its node, the fleet totals equal to the sum of each node's own
//!   `ankusa store info` counters, the hung node named (JSON and stderr),
//!   exit 4, and the whole call bounded by the fleet's timeout.
//! - `ankusa dlq list --fleet` names the hung node the same way; without it
//!   in the file both commands exit 0.
//! - The real fleet console in a pseudo-terminal: keys work while the hung
//!   node holds the first survey, the node is then shown unreachable beside
//!   the live ones, the merged tenants carry the node column and totals,
//!   and `D` drains a live node through the guard (its `node status` then
//!   says draining, and its audit log has the drain), after which the
//!   terminal is restored.

use crate::common;
use crate::console_pty::Console;

use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{client, config_with, write_config, Daemon, BIN};

const TOKEN: &str = "fleet-console-token-0123456789";

fn ankusa(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run ankusa")
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// A daemon with node id `id`, dispatch off (its rows stay where ingest put
/// them), a source taking the tenant from `x-tenant`; `tcp` adds an admin
/// listener on TCP with an admin token.
fn node(dir: &Path, id: &str, tcp: bool) -> Daemon {
    let mut sections = format!("[node]\nid = \"{id}\"\n");
    if tcp {
        sections.push_str(&format!(
            "[admin]\nlisten = \"127.0.0.1:0\"\n[[admin.tokens]]\nname = \"fleet\"\ntoken = \"{TOKEN}\"\n"
        ));
    }
    let sources = "[[sources]]\nid = \"hooks\"\ntenant_header = \"x-tenant\"\n[[sources.sinks]]\nurl = \"http://127.0.0.1:9/none\"\n";
    write_config(dir, &config_with(&sections, sources));
    Daemon::start(dir)
}

async fn post(d: &Daemon, tenant: &str, n: usize) {
    let c = client();
    for i in 0..n {
        let r = c
            .post(d.url("hooks"))
            .header("x-tenant", tenant)
            .body(format!("{{\"n\":{i}}}"))
            .send()
            .await
            .expect("post");
        assert_eq!(r.status().as_u16(), 202, "{:?}", r.text().await);
    }
}

/// The node counters `ankusa store info --json` prints for a store.
fn info_counters(store: &Path) -> serde_json::Value {
    let o = ankusa(&[
        "store",
        "info",
        "--store",
        &store.to_string_lossy(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    json(&o)["node"].clone()
}

struct Nodes {
    _dirs: Vec<tempfile::TempDir>,
    eu1: Daemon,
    eu2: Daemon,
    /// Accepts connections (the kernel's backlog) and never answers.
    _hung: UnixListener,
    /// The fleet file: eu-1 (socket), eu-2 (TCP + token), hung.
    fleet: String,
    /// The same without the hung node.
    live: String,
}

async fn nodes(timeout: &str) -> Nodes {
    let (d1, d2, d3) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let eu1 = node(d1.path(), "eu-1", false);
    let eu2 = node(d2.path(), "eu-2", true);
    post(&eu1, "acme", 5).await;
    post(&eu1, "globex", 3).await;
    post(&eu2, "initech", 4).await;
    post(&eu2, "acme", 2).await;
    let hung_path = d3.path().join("hung.sock");
    let hung = UnixListener::bind(&hung_path).unwrap();
    let admin = eu2.admin.clone().expect("eu-2's admin listener");
    let live = format!(
        "timeout = \"{timeout}\"\n\
         [[nodes]]\nname = \"eu-1\"\nsocket = \"{}\"\n\
         [[nodes]]\nname = \"eu-2\"\nurl = \"{admin}\"\ntoken = \"{TOKEN}\"\n",
        ankusa_ops::socket_path(&eu1.store).display()
    );
    let with_hung = format!(
        "{live}[[nodes]]\nname = \"hung\"\nsocket = \"{}\"\n",
        hung_path.display()
    );
    let fleet = d3.path().join("fleet.toml");
    std::fs::write(&fleet, with_hung).unwrap();
    let live_path = d3.path().join("live.toml");
    std::fs::write(&live_path, live).unwrap();
    Nodes {
        eu1,
        eu2,
        _hung: hung,
        fleet: fleet.to_string_lossy().into_owned(),
        live: live_path.to_string_lossy().into_owned(),
        _dirs: vec![d1, d2, d3],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_commands_merge_the_live_nodes_and_name_the_hung_one() {
    let n = nodes("1s").await;

    let t0 = Instant::now();
    let o = ankusa(&["tenants", "list", "--fleet", &n.fleet, "--json"]);
    let took = t0.elapsed();
    eprintln!("tenants list --fleet with a hung node took {took:?}");
    assert_eq!(
        o.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        took < Duration::from_secs(4),
        "bounded by the 1s timeout: {took:?}"
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("node hung (") && stderr.contains("is unreachable"),
        "{stderr}"
    );
    let v = json(&o);
    assert_eq!(v["unreachable"], serde_json::json!(["hung"]));
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(
        nodes
            .iter()
            .map(|n| (
                n["name"].as_str().unwrap(),
                n["reachable"].as_bool().unwrap()
            ))
            .collect::<Vec<_>>(),
        vec![("eu-1", true), ("eu-2", true), ("hung", false)]
    );
    assert_eq!(nodes[1]["id"], "eu-2");
    let mut rows: Vec<(String, String, i64)> = v["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["node"].as_str().unwrap().to_owned(),
                t["id"].as_str().unwrap().to_owned(),
                t["counters"]["pending"].as_i64().unwrap(),
            )
        })
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        vec![
            ("eu-1".into(), "acme".into(), 5),
            ("eu-1".into(), "globex".into(), 3),
            ("eu-2".into(), "acme".into(), 2),
            ("eu-2".into(), "initech".into(), 4),
        ]
    );
    // The fleet totals are each node's own figures summed, as `store info`
    // prints them on each node.
    let (a, b) = (info_counters(&n.eu1.store), info_counters(&n.eu2.store));
    for f in [
        "pending",
        "scheduled",
        "inflight",
        "dead",
        "bytes",
        "archive_pending",
    ] {
        assert_eq!(
            v["totals"][f].as_i64().unwrap(),
            a[f].as_i64().unwrap() + b[f].as_i64().unwrap(),
            "{f}"
        );
    }
    assert_eq!(v["totals"]["pending"], 14);

    // The text form: a node column and the totals line.
    let o = ankusa(&["tenants", "list", "--fleet", &n.live, "--sort", "pending"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let first = text.lines().nth(1).unwrap_or("");
    assert!(
        first.starts_with("eu-1") && first.contains("acme"),
        "{text}"
    );
    assert!(
        text.contains("fleet totals (2 of 2 nodes): pending 14"),
        "{text}"
    );

    let o = ankusa(&["dlq", "list", "--fleet", &n.fleet, "--json"]);
    assert_eq!(o.status.code(), Some(4));
    let v = json(&o);
    assert_eq!(v["unreachable"], serde_json::json!(["hung"]));
    assert_eq!(v["entries"], serde_json::json!([]));
    let o = ankusa(&["dlq", "list", "--fleet", &n.live]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // A fleet file that names TLS is refused before anything is asked.
    let bad = Path::new(&n.live).with_file_name("tls.toml");
    std::fs::write(
        &bad,
        format!("[[nodes]]\nname = \"eu-2\"\nurl = \"https://127.0.0.1:1\"\ntoken = \"{TOKEN}\"\n"),
    )
    .unwrap();
    let o = ankusa(&["tenants", "list", "--fleet", &bad.to_string_lossy()]);
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("TLS is not supported yet"), "{stderr}");
    assert!(stderr.contains("tls.toml"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_console_with_one_node_down() {
    let n = nodes("3s").await;
    let t0 = Instant::now();
    let mut c = Console::spawn(
        &["console", "--fleet", &n.fleet, "--refresh", "1s"],
        &[],
        100,
        30,
    );
    // The hung node holds the first survey for up to 3 s: keys answer
    // meanwhile.
    c.wait_for(&["asking every node"]);
    c.send("2");
    c.wait_for(&["[2 Tenants]", "asking every node"]);
    c.send("1");
    c.wait_for(&["[1 Nodes]", "UNREACHABLE", "2/3 up, 1 unreachable"]);
    eprintln!(
        "the hung node was shown unreachable {:?} after the console started (timeout 3s)",
        t0.elapsed()
    );
    let s = c.screen();
    for line in ["eu-1", "eu-2"] {
        assert!(
            s.lines().any(|l| l.contains(line) && l.contains(" up ")),
            "{line} is up:\n{s}"
        );
    }
    assert!(
        s.contains("hung: no answer since the console opened"),
        "{s}"
    );

    c.send("2");
    c.wait_for(&["initech", "globex", "totals, 2 of 3 nodes"]);
    let s = c.screen();
    assert!(
        s.lines()
            .any(|l| l.contains("eu-2") && l.contains("initech")),
        "{s}"
    );

    // Drain eu-2 through the guard.
    c.send("1");
    c.send("j");
    c.send("D");
    c.wait_for(&["On node: eu-2", "drain node eu-2"]);
    c.send("eu-2\r");
    c.wait_for(&["node eu-2 drains"]);
    c.send("\r");
    c.wait_for(&["[1 Nodes]"]);
    let o = ankusa(&[
        "node",
        "status",
        "--store",
        &n.eu2.store.to_string_lossy(),
        "--json",
    ]);
    let v = json(&o);
    assert!(v["draining"].is_object(), "{v}");
    let audit = ankusa_store::Store::open_read_only(&n.eu2.store).unwrap();
    let who = ankusa_ops::access::Principal::local(&ankusa_ops::access::Peer::me());
    let records = ankusa_ops::jobs::audit_page(&audit, &who, None, 50).unwrap();
    assert!(
        records
            .records
            .iter()
            .any(|r| r.action == "drain" && r.who.name == "fleet"),
        "the drain is audited under the fleet file's token: {:?}",
        records.records
    );
    // eu-1 was not touched.
    let o = ankusa(&[
        "node",
        "status",
        "--store",
        &n.eu1.store.to_string_lossy(),
        "--json",
    ]);
    assert!(json(&o)["draining"].is_null());

    c.send("Q");
    let st = c.wait_exit();
    assert!(st.success(), "{st:?}");
    c.assert_restored();
    drop(n.eu1);
    drop(n.eu2);
}
