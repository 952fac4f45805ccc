//! Pause and resume end to end, with dispatch, delivery and a real sink:
//! a paused tenant's rows stay queued while another tenant is served; a
//! paused sink's rows are parked while the tenant's other sink is served;
//! a SIGKILL keeps the pause; resume delivers everything; every action is
//! audited and `store check` passes.

use crate::common;

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path as UrlPath, State};
use axum::http::HeaderMap;
use common::{client, config_dispatching, metric, store_check, write_config, Daemon, BIN};

type Hits = Arc<Mutex<Vec<(String, String)>>>;

async fn sink(
    State(hits): State<Hits>,
    UrlPath(path): UrlPath<String>,
    h: HeaderMap,
) -> (axum::http::StatusCode, &'static str) {
    let tenant = h
        .get("ankusa-tenant")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let down = path == "down";
    hits.lock().unwrap().push((path, tenant));
    if down {
        (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "down for maintenance",
        )
    } else {
        (axum::http::StatusCode::OK, "ok")
    }
}

async fn start_sink(hits: Hits) -> String {
    let app = axum::Router::new()
        .route("/{path}", axum::routing::post(sink))
        .with_state(hits);
    let base = crate::common::serve_loopback(app).await;
    base
}

fn count(hits: &Hits, path: &str, tenant: &str) -> usize {
    hits.lock()
        .unwrap()
        .iter()
        .filter(|(p, t)| p == path && t == tenant)
        .count()
}

fn ankusa(args: &[&str]) -> String {
    let o = Command::new(BIN).args(args).output().unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(o.status.success(), "ankusa {args:?}: {out}{err}");
    out
}

async fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn post(c: &reqwest::Client, d: &Daemon, tenant: &str, n: usize) {
    for i in 0..n {
        let r = c
            .post(d.url("shop"))
            .header("x-tenant", tenant)
            .body(format!("{{\"i\":{i}}}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn paused_tenants_and_sinks_hold_their_rows_across_a_crash_and_resume_delivers_them() {
    let hits: Hits = Arc::default();
    let base = start_sink(hits.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let sources = format!(
        "[[sources]]\nid = \"shop\"\ntenant_header = \"X-Tenant\"\n\
         [[sources.sinks]]\nurl = \"{base}/a\"\nname = \"alpha\"\n\
         [[sources.sinks]]\nurl = \"{base}/b\"\nname = \"bravo\"\n\
         [[sources]]\nid = \"ops\"\ntenant_header = \"X-Tenant\"\n\
         [[sources.sinks]]\nurl = \"{base}/down\"\nbackoff_initial = \"50ms\"\n"
    );
    write_config(
        dir.path(),
        &config_dispatching("tick = \"10ms\"\ndrain_timeout = \"2s\"", "", &sources),
    );
    let d = Daemon::start(dir.path());
    let store = d.store.to_str().unwrap().to_owned();
    let c = client();
    // Tenants exist once they have sent something.
    post(&c, &d, "acme", 1).await;
    post(&c, &d, "beta", 1).await;
    wait_for("first deliveries", Duration::from_secs(20), || {
        count(&hits, "a", "acme") == 1 && count(&hits, "b", "beta") == 1
    })
    .await;

    // A paused tenant: nothing of it goes out; another tenant is served.
    ankusa(&["tenants", "pause", "acme", "--store", &store]);
    let listed = ankusa(&["tenants", "show", "acme", "--store", &store, "--json"]);
    assert!(listed.contains("\"paused\""), "{listed}");
    post(&c, &d, "acme", 20).await;
    post(&c, &d, "beta", 20).await;
    wait_for("beta served", Duration::from_secs(20), || {
        count(&hits, "a", "beta") == 21 && count(&hits, "b", "beta") == 21
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        count(&hits, "a", "acme") + count(&hits, "b", "acme"),
        2,
        "a paused tenant was served"
    );

    // A paused sink (by name) for every tenant, then the tenant resumed:
    // its rows for the other sink go out, those for the paused sink park.
    ankusa(&["sinks", "pause", "shop/bravo", "--store", &store]);
    ankusa(&["tenants", "resume", "acme", "--store", &store]);
    post(&c, &d, "beta", 10).await;
    wait_for("the unpaused sink served", Duration::from_secs(20), || {
        count(&hits, "a", "acme") == 21 && count(&hits, "a", "beta") == 31
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(count(&hits, "b", "acme"), 1, "the paused sink was served");
    assert_eq!(count(&hits, "b", "beta"), 21, "the paused sink was served");
    assert!(metric(&c, &d, "ankusa_dispatch_parked_total").await >= 30);
    let sinks = ankusa(&["sinks", "list", "--store", &store]);
    assert!(
        sinks.contains("shop/bravo") && sinks.contains("PAUSED"),
        "{sinks}"
    );

    // Sink health beside the daemon: the failing sink names its status,
    // its streak and the tenant whose deliveries fail.
    let r = c
        .post(d.url("ops"))
        .header("x-tenant", "acme")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    wait_for("failing attempts", Duration::from_secs(20), || {
        count(&hits, "down", "acme") >= 2
    })
    .await;
    let sinks = ankusa(&["sinks", "list", "--store", &store, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&sinks).unwrap();
    let find = |v: &serde_json::Value, src: &str, i: u64| {
        v["sinks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["source"] == src && s["index"] == i)
            .cloned()
            .unwrap()
    };
    let down = &find(&v, "ops", 0)["health"];
    assert_eq!(down["last_status"], 503, "{sinks}");
    assert!(
        down["consecutive_failures"].as_u64().unwrap() >= 2,
        "{sinks}"
    );
    assert_eq!(down["failing_tenants"][0], "acme", "{sinks}");
    assert!(
        find(&v, "shop", 0)["health"]["delivered_1m"]
            .as_u64()
            .unwrap()
            >= 40,
        "{sinks}"
    );
    let shown = ankusa(&["sinks", "show", "ops/0", "--store", &store]);
    assert!(
        shown.contains("down for maintenance") && shown.contains("acme"),
        "{shown}"
    );

    // A crash keeps the pause.
    d.kill9();
    let d = Daemon::start(dir.path());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(count(&hits, "b", "acme") + count(&hits, "b", "beta"), 22);
    let sinks = ankusa(&["sinks", "list", "--store", &store, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&sinks).unwrap();
    assert_eq!(
        v["sinks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "bravo")
            .unwrap()["paused"],
        true,
        "{sinks}"
    );
    // The store counts what waits for each sink: the 30 parked rows,
    // nothing for the sink that was served.
    let waiting = |v: &serde_json::Value, name: &str| {
        v["sinks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()["waiting"]
            .as_i64()
    };
    assert_eq!(waiting(&v, "bravo"), Some(30), "{sinks}");
    assert_eq!(waiting(&v, "alpha"), Some(0), "{sinks}");

    // Resume (by position) unparks everything.
    let out = ankusa(&["sinks", "resume", "shop/1", "--store", &store]);
    assert!(out.contains("30 parked rows"), "{out}");
    wait_for("the resumed sink drained", Duration::from_secs(20), || {
        count(&hits, "b", "acme") == 21 && count(&hits, "b", "beta") == 31
    })
    .await;
    d.stop();
    let sinks = ankusa(&["sinks", "list", "--store", &store, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&sinks).unwrap();
    assert_eq!(waiting(&v, "bravo"), Some(0), "drained: {sinks}");

    // Audited, and the store is consistent.
    let s = ankusa_store::Store::open_read_only(&dir.path().join("store")).unwrap();
    let who = ankusa_ops::access::Principal::local(&ankusa_ops::access::Peer::me());
    let audit = ankusa_ops::jobs::audit_page(&s, &who, None, 100).unwrap();
    let actions: Vec<(String, String, String)> = audit
        .records
        .iter()
        .map(|r| (r.action.clone(), r.scope.clone(), r.outcome.clone()))
        .collect();
    for want in [
        ("pause", "tenant acme", "done"),
        ("resume", "tenant acme", "done"),
        ("pause", "sink shop/bravo", "done"),
        ("resume", "sink shop/bravo", "started"),
        ("resume", "sink shop/bravo", "done"),
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
