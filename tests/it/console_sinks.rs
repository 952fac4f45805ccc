//! The sinks screen in the real console, beside a real daemon and a real
//! loopback sink that starts failing: the screen shows the sink FAILING
//! within two refreshes; the operator pauses it through the guard; while it
//! is paused nothing reaches it, its backlog holds and nothing is
//! dead-lettered; the resume (through the guard) drains it; and the audit
//! log holds both actions.

use crate::common;
use crate::console_pty::Console;

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use common::{client, config_dispatching, store_check, write_config, Daemon, BIN};

#[derive(Default)]
struct Sink {
    failing: AtomicBool,
    delivered: AtomicUsize,
    failed: AtomicUsize,
    /// When the first failing answer went out.
    first_failure: Mutex<Option<Instant>>,
}

async fn answer(State(s): State<Arc<Sink>>) -> (axum::http::StatusCode, &'static str) {
    if s.failing.load(Ordering::SeqCst) {
        s.failed.fetch_add(1, Ordering::SeqCst);
        s.first_failure
            .lock()
            .unwrap()
            .get_or_insert_with(Instant::now);
        (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "down for maintenance",
        )
    } else {
        s.delivered.fetch_add(1, Ordering::SeqCst);
        (axum::http::StatusCode::OK, "ok")
    }
}

async fn start_sink(s: Arc<Sink>) -> String {
    let app = axum::Router::new()
        .route("/hooks", axum::routing::post(answer))
        .with_state(s);
    crate::common::serve_loopback(app).await
}

fn ankusa(args: &[&str]) -> String {
    let o = Command::new(BIN).args(args).output().unwrap();
    assert!(
        o.status.success(),
        "ankusa {args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The tenant's (queued, dead) rows, through the daemon.
fn backlog(store: &str) -> (i64, i64) {
    let out = ankusa(&["tenants", "show", "acme", "--store", store, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let c = &v["counters"];
    let n = |f: &str| c[f].as_i64().unwrap_or(-1);
    (n("pending") + n("scheduled") + n("inflight"), n("dead"))
}

async fn post(d: &Daemon, n: usize) {
    let c = client();
    for i in 0..n {
        let r = c
            .post(d.url("shop"))
            .header("x-tenant", "acme")
            .body(format!("{{\"i\":{i}}}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
    }
}

async fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

const REFRESH_MS: u64 = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_sink_is_seen_paused_held_resumed_and_drained_from_the_console() {
    let sink = Arc::new(Sink::default());
    let base = start_sink(sink.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    // Retries are quick and many, so the failing sink's rows keep coming
    // back (and none is dead-lettered before the pause).
    let sources = format!(
        "[[sources]]\nid = \"shop\"\ntenant_header = \"X-Tenant\"\n\
         [[sources.sinks]]\nurl = \"{base}/hooks\"\nname = \"hooks\"\n\
         max_attempts = 100\nbackoff_initial = \"50ms\"\nbackoff_max = \"1s\"\n"
    );
    write_config(
        dir.path(),
        &config_dispatching("tick = \"10ms\"\ndrain_timeout = \"2s\"", "", &sources),
    );
    let d = Daemon::start(dir.path());
    let store = d.store.to_str().unwrap().to_owned();
    post(&d, 5).await;
    wait_until("first deliveries", Duration::from_secs(20), || {
        sink.delivered.load(Ordering::SeqCst) == 5
    })
    .await;

    let refresh = format!("{REFRESH_MS}ms");
    let mut con = Console::spawn(
        &["console", "--store", &store, "--refresh", &refresh],
        &[],
        80,
        24,
    );
    con.wait_for(&["FOLLOW", "Overview"]);
    con.send("7");
    con.wait_for(&["Sinks (1, 0 failing", "shop/hooks", " ok "]);

    // The sink starts failing: the screen says so within two refreshes.
    sink.failing.store(true, Ordering::SeqCst);
    post(&d, 10).await;
    wait_until("a failed attempt", Duration::from_secs(20), || {
        sink.first_failure.lock().unwrap().is_some()
    })
    .await;
    let failed_at = sink.first_failure.lock().unwrap().unwrap();
    con.wait_for(&["FAILING", "1 failing"]);
    let seen = failed_at.elapsed();
    assert!(
        seen <= Duration::from_millis(2 * REFRESH_MS + 500),
        "FAILING shown {seen:?} after the first failure (refresh {REFRESH_MS} ms)"
    );
    // Its detail names the failing tenant and the last error.
    con.send("\r");
    con.wait_for(&["Sink shop/hooks", "failing tenants   acme", "HTTP 503"]);

    // Paused through the guard: the exact scope, the typed SOURCE/NAME.
    con.send("H");
    con.wait_for(&[
        "Scope: pause sink shop/hooks for every tenant",
        "Type \"shop/hooks\"",
    ]);
    con.send("shop/hooks\r");
    con.wait_for(&["Done. Paused sink shop/hooks: its rows stay queued."]);
    con.send("\r");
    con.wait_for(&["PAUSED for every tenant"]);

    // Inflight attempts finish and due retries are parked: then nothing
    // reaches the sink, the backlog holds, nothing is dead-lettered.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let hits = sink.failed.load(Ordering::SeqCst) + sink.delivered.load(Ordering::SeqCst);
    let held = backlog(&store);
    assert_eq!(
        held,
        (10, 0),
        "the failing sink's rows are queued, none dead"
    );
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(
        sink.failed.load(Ordering::SeqCst) + sink.delivered.load(Ordering::SeqCst),
        hits,
        "a paused sink was called"
    );
    assert_eq!(backlog(&store), held, "the paused backlog moved");

    // The sink recovers; resumed through the guard, its rows drain.
    sink.failing.store(false, Ordering::SeqCst);
    con.send("U");
    con.wait_for(&["Scope: resume sink shop/hooks for every tenant"]);
    con.send("shop/hooks\r");
    con.wait_for(&["Done. Resumed: 10 parked row(s) made due."]);
    con.send("\r");
    wait_until("the resumed sink drained", Duration::from_secs(20), || {
        sink.delivered.load(Ordering::SeqCst) == 15
    })
    .await;
    wait_until("an empty backlog", Duration::from_secs(20), || {
        backlog(&store) == (0, 0)
    })
    .await;
    con.send("1");
    con.send("Q");
    con.wait_exit();
    con.assert_restored();
    d.stop();

    // Both actions are in the audit log, under the console's operator.
    let s = ankusa_store::Store::open_read_only(&dir.path().join("store")).unwrap();
    let who = ankusa_ops::access::Principal::local(&ankusa_ops::access::Peer::me());
    let audit = ankusa_ops::jobs::audit_page(&s, &who, None, 100).unwrap();
    let actions: Vec<(String, String, String)> = audit
        .records
        .iter()
        .map(|r| (r.action.clone(), r.scope.clone(), r.outcome.clone()))
        .collect();
    for want in [
        ("pause", "sink shop/hooks", "done"),
        ("resume", "sink shop/hooks", "started"),
        ("resume", "sink shop/hooks", "done"),
    ] {
        assert!(
            actions
                .iter()
                .any(|(a, s, o)| (a.as_str(), s.as_str(), o.as_str()) == want),
            "{want:?} not in {actions:?}"
        );
    }
    drop(s);
    store_check(&dir.path().join("store"));
}
