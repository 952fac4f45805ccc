//! A store that stops taking writes, for real: the daemon's process runs
//! out of descriptors (its limit lowered under it with `prlimit`), or its
//! store's filesystem fills up (a size-limited tmpfs, grown back with a
//! remount). With ingest, dispatch and delivery on, each test checks that
//! while the fault lasts ingest answers `503 store_unavailable` with
//! `Retry-After` and `/healthz` is not ready (the fault in its body) while
//! `/livez` is; that the node recovers by itself once the cause is gone,
//! with no restart; and that every hook answered `202` reached the sink or
//! is still in the store, which passes `store check`.

use crate::common;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_store::{queries, HookId, Store};
use common::{config_dispatching, raw, store_check, write_config, Daemon};
use serde_json::Value;

/// A kept-alive HTTP/1.1 connection, for asking a daemon that cannot
/// accept new connections (out of descriptors) how it is.
struct Conn(TcpStream);

impl Conn {
    fn open(base: &str) -> Conn {
        let s = TcpStream::connect(base.trim_start_matches("http://")).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Conn(s)
    }

    /// Sends one request and reads one answer: status, head, body.
    fn send(&mut self, req: &[u8]) -> (u16, String, String) {
        self.0.write_all(req).unwrap();
        let mut buf = Vec::new();
        let mut byte = [0u8; 1];
        while !buf.ends_with(b"\r\n\r\n") {
            let n = self.0.read(&mut byte).unwrap();
            assert!(
                n > 0,
                "closed mid-answer: {}",
                String::from_utf8_lossy(&buf)
            );
            buf.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        let mut body = vec![0u8; len];
        self.0.read_exact(&mut body).unwrap();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap();
        (status, head, String::from_utf8_lossy(&body).into_owned())
    }
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").into_bytes()
}

fn post(tenant: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST /v1/sources/shop/hooks HTTP/1.1\r\nhost: x\r\nx-tenant: {tenant}\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// [`post`] on a connection of its own, closed after the answer.
fn post_once(tenant: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST /v1/sources/shop/hooks HTTP/1.1\r\nhost: x\r\nx-tenant: {tenant}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

fn get_once(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").into_bytes()
}

fn id_of(body: &str) -> Option<String> {
    let v: Value = serde_json::from_str(body).ok()?;
    v.get("id")?.as_str().map(str::to_owned)
}

/// A sink that answers 200 and remembers every hook id it was given.
async fn start_sink() -> (String, Arc<Mutex<HashSet<String>>>) {
    let got = Arc::new(Mutex::new(HashSet::new()));
    let seen = got.clone();
    let app = axum::Router::new().route(
        "/in",
        axum::routing::post(move |h: axum::http::HeaderMap| {
            let seen = seen.clone();
            async move {
                if let Some(id) = h.get("ankusa-hook-id").and_then(|v| v.to_str().ok()) {
                    seen.lock().unwrap().insert(id.to_owned());
                }
                "ok"
            }
        }),
    );
    let base = crate::common::serve_loopback(app).await;
    (format!("{base}/in"), got)
}

fn config(dir: &Path, store: &str, sink: &str) {
    write_config(
        dir,
        &config_dispatching(
            "enabled = true\ntick = \"20ms\"",
            "",
            &format!(
                "[[sources]]\nid = \"shop\"\ntenant_header = \"x-tenant\"\n\n[[sources.sinks]]\nurl = \"{sink}\"\n"
            ),
        )
        .replacen("path = \"store\"", &format!("path = \"{store}\""), 1),
    );
}

/// Posts large hooks over `conn` until one is refused; returns the ids
/// acknowledged on the way and the refusal.
fn fill_until_refused(conn: &mut Conn, acked: &mut Vec<String>) -> (u16, String, String) {
    let big = vec![b'x'; 512 * 1024];
    for _ in 0..2000 {
        let (st, head, body) = conn.send(&post("bulk", &big));
        match st {
            202 => acked.push(id_of(&body).expect("an id")),
            _ => return (st, head, body),
        }
    }
    panic!("2000 large hooks and no write failed");
}

/// Everything a fault test checks while the fault lasts.
fn assert_faulted(refused: &(u16, String, String), probe: &mut Conn) {
    let (st, head, body) = refused;
    assert_eq!(*st, 503, "{head}{body}");
    assert!(body.contains("\"store_unavailable\""), "{body}");
    assert!(head.contains("retry-after: 5"), "{head}");
    // The same kept-alive connection, so no new descriptor is needed.
    let (st, _, body) = probe.send(&get("/healthz"));
    assert_eq!(st, 503, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["reason"], "store_fault", "{v}");
    assert!(
        v["store_fault"]["failed_writes"].as_u64().unwrap() >= 1,
        "{v}"
    );
    let (st, _, body) = probe.send(&get("/livez"));
    assert_eq!(st, 200, "{body}");
}

/// Posts small hooks on new connections until one is accepted; returns
/// how long that took.
fn wait_recovered(base: &str, acked: &mut Vec<String>) -> Duration {
    let started = Instant::now();
    loop {
        let tried = std::panic::catch_unwind(|| raw(base, &post_once("after", b"{}")));
        if let Ok(a) = tried {
            if a.status == 202 {
                acked.push(id_of(&a.body).expect("an id"));
                return started.elapsed();
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "not recovered after 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// After the daemon stopped: every acknowledged hook reached the sink or
/// is still in the store, and the store checks.
fn assert_nothing_lost(store: &Path, acked: &[String], delivered: &HashSet<String>) {
    store_check(store);
    let s = Store::open_read_only(store).unwrap();
    let mut kept = 0;
    for id in acked {
        if delivered.contains(id) {
            continue;
        }
        let seq = HookId::parse(id).unwrap().hook.0;
        assert!(
            matches!(queries::hook(&s, seq), Ok(Some(_))),
            "{id} acknowledged and lost"
        );
        kept += 1;
    }
    eprintln!(
        "{} acknowledged: {} delivered, {kept} still in the store",
        acked.len(),
        acked.len() - kept
    );
}

fn prlimit(pid: i32, soft: u64, hard: u64) {
    let st = std::process::Command::new("prlimit")
        .arg(format!("--pid={pid}"))
        .arg(format!("--nofile={soft}:{hard}"))
        .status()
        .unwrap();
    assert!(st.success(), "prlimit failed");
}

fn open_fds(pid: i32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count() as u64
}

fn hard_limit(pid: i32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    line.split_whitespace().nth(4).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_descriptors_the_node_refuses_honestly_and_recovers_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (sink, delivered) = start_sink().await;
    config(dir.path(), "store", &sink);
    let d = Daemon::start(dir.path());
    let pid = d.pid().as_raw();
    let mut probe = Conn::open(&d.base);
    let mut poster = Conn::open(&d.base);
    let mut acked = Vec::new();
    for _ in 0..20 {
        let (st, _, body) = poster.send(&post("t1", b"{}"));
        assert_eq!(st, 202, "{body}");
        acked.push(id_of(&body).unwrap());
    }
    let hard = hard_limit(pid);
    // No descriptor to spare: every open (a new WAL, a table file, a socket)
    // fails with EMFILE from here on.
    prlimit(pid, open_fds(pid), hard);
    let refused = fill_until_refused(&mut poster, &mut acked);
    let faulted_at = Instant::now();
    assert_faulted(&refused, &mut probe);
    // The recovery loop reopens the store, which gives back the store's
    // own descriptors before it takes them again: it may be ready again
    // for a while with the limit still low, until its next new file fails
    // (so the node goes in and out of the balancer; nothing is lost either
    // way). Asked on the kept connection.
    let mut ready_low = None;
    while faulted_at.elapsed() < Duration::from_secs(10) {
        if probe.send(&get("/healthz")).0 == 200 {
            ready_low = Some(faulted_at.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("ready again with the limit still low: {ready_low:?} after the fault");

    prlimit(pid, hard, hard);
    let took = wait_recovered(&d.base, &mut acked);
    for l in d.log().lines().filter(|l| {
        l.contains("reopen") || l.contains("takes writes") || l.contains("still refuses")
    }) {
        eprintln!("log: {l}");
    }
    eprintln!("descriptors back: the node took hooks again after {took:?}");
    assert_eq!(raw(&d.base, &get_once("/healthz")).status, 200);
    let c = common::client();
    assert!(common::metric(&c, &d, "ankusa_store_recoveries_total").await >= 1);
    for _ in 0..20 {
        let a = raw(&d.base, &post_once("t2", b"{}"));
        assert_eq!(a.status, 202, "{a:?}");
        acked.push(id_of(&a.body).unwrap());
    }
    // Let delivery catch up a little, then stop.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let t = Instant::now();
    d.stop_clean();
    eprintln!("stopped in {:?}", t.elapsed());
    let got = delivered.lock().unwrap().clone();
    let t = Instant::now();
    assert_nothing_lost(&dir.path().join("store"), &acked, &got);
    eprintln!("checked in {:?}", t.elapsed());
}

/// Unmounts the tmpfs when the test ends, however it ends.
struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_full_disk_the_node_refuses_honestly_and_recovers_when_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let st = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=48m", "tmpfs"])
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(
        st.success(),
        "this test needs to mount a size-limited tmpfs (root, or CAP_SYS_ADMIN)"
    );
    let _mount = Mount(mnt.clone());
    let (sink, delivered) = start_sink().await;
    config(dir.path(), "mnt/store", &sink);
    let d = Daemon::start(dir.path());
    let mut probe = Conn::open(&d.base);
    let mut poster = Conn::open(&d.base);
    let mut acked = Vec::new();
    let refused = fill_until_refused(&mut poster, &mut acked);
    assert_faulted(&refused, &mut probe);
    eprintln!("disk full after {} large hooks", acked.len());

    let st = std::process::Command::new("mount")
        .args(["-o", "remount,size=512m"])
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(st.success());
    let took = wait_recovered(&d.base, &mut acked);
    eprintln!("space back: the node took hooks again after {took:?}");
    assert_eq!(raw(&d.base, &get_once("/healthz")).status, 200);
    for _ in 0..20 {
        let a = raw(&d.base, &post_once("t2", b"{}"));
        assert_eq!(a.status, 202, "{a:?}");
        acked.push(id_of(&a.body).unwrap());
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    d.stop_clean();
    let got = delivered.lock().unwrap().clone();
    assert_nothing_lost(&mnt.join("store"), &acked, &got);
}
