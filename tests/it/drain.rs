//! Drain end to end: `/healthz` fails while the node drains (and after a
//! crash), ingest still accepts, `ankusa node drain --wait` returns once the
//! node owes nothing, undrain makes it ready again; both are audited.

use crate::common;

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{client, config_dispatching, store_check, write_config, Daemon, BIN};

async fn start_sink(hits: Arc<AtomicUsize>) -> String {
    let app = axum::Router::new()
        .route(
            "/s",
            axum::routing::post(
                |axum::extract::State(h): axum::extract::State<Arc<AtomicUsize>>| async move {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    h.fetch_add(1, Ordering::SeqCst);
                    "ok"
                },
            ),
        )
        .with_state(hits);
    let base = crate::common::serve_loopback(app).await;
    format!("{base}/s")
}

fn ankusa(args: &[&str]) -> String {
    let o = Command::new(BIN).args(args).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "ankusa {args:?}: {out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

async fn healthz(c: &reqwest::Client, d: &Daemon) -> (u16, serde_json::Value) {
    let r = c.get(format!("{}/healthz", d.base)).send().await.unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_drained_node_fails_readiness_delivers_what_it_holds_and_keeps_draining_across_a_crash() {
    let hits = Arc::new(AtomicUsize::new(0));
    let url = start_sink(hits.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let sources = format!(
        "[[sources]]\nid = \"shop\"\ntenant = \"acme\"\n[[sources.sinks]]\nurl = \"{url}\"\n"
    );
    write_config(
        dir.path(),
        &config_dispatching("per_tenant = 2\nper_sink = 2", "", &sources),
    );
    let d = Daemon::start(dir.path());
    let store = d.store.to_str().unwrap().to_owned();
    let c = client();
    assert_eq!(healthz(&c, &d).await.0, 200);
    for i in 0..100 {
        let r = c
            .post(d.url("shop"))
            .body(format!("{{\"i\":{i}}}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
    }
    // The daemon's last hour starts with a sample at boot (admin API).
    let dir_store = d.store.clone();
    let h: ankusa_ops::model::NodeHistory = tokio::task::spawn_blocking(move || {
        // The operator client is blocking: off the test's runtime.
        let probe = ankusa_ops::client::Client::probe(&dir_store, None).unwrap();
        let ankusa_ops::client::Probe::Daemon(admin) = probe else {
            panic!("no daemon on the socket");
        };
        admin.get(ankusa_ops::routes::HISTORY).unwrap()
    })
    .await
    .unwrap();
    assert_eq!(h.step_ms, 10_000);
    assert!(!h.samples.is_empty(), "a sample at boot");
    ankusa(&["node", "drain", "--store", &store]);
    let (status, v) = healthz(&c, &d).await;
    assert_eq!(
        (status, v["status"].as_str()),
        (503, Some("draining")),
        "{v}"
    );
    // What still arrives is accepted: a drain loses nothing.
    let r = c
        .post(d.url("shop"))
        .body("{\"late\":1}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let st: serde_json::Value =
        serde_json::from_str(&ankusa(&["node", "status", "--store", &store, "--json"])).unwrap();
    assert!(st["owed"].as_u64().unwrap() > 0, "{st}");

    // A crash keeps the drain.
    d.kill9();
    let d = Daemon::start(dir.path());
    assert_eq!(healthz(&c, &d).await.0, 503);
    let done: serde_json::Value = serde_json::from_str(&ankusa(&[
        "node", "drain", "--wait", "--store", &store, "--json",
    ]))
    .unwrap();
    assert_eq!(
        (done["empty"].as_bool(), done["owed"].as_u64()),
        (Some(true), Some(0)),
        "{done}"
    );
    assert!(
        hits.load(Ordering::SeqCst) >= 101,
        "every hook reached the sink at least once"
    );
    ankusa(&["node", "undrain", "--store", &store]);
    assert_eq!(healthz(&c, &d).await.0, 200);
    d.stop();

    let s = ankusa_store::Store::open_read_only(&dir.path().join("store")).unwrap();
    let who = ankusa_ops::access::Principal::local(&ankusa_ops::access::Peer::me());
    let audit = ankusa_ops::jobs::audit_page(&s, &who, None, 100).unwrap();
    let actions: Vec<&str> = audit.records.iter().map(|r| r.action.as_str()).collect();
    assert!(
        actions.contains(&"drain") && actions.contains(&"undrain"),
        "{actions:?}"
    );
    drop(s);
    store_check(&dir.path().join("store"));
}
