//! End-to-end tests of the archive (`[archive]`): the real binary, a real
//! loopback sink, the archive files read back with flate2, and the store
//! audited afterwards.

use crate::common;

use std::collections::HashMap;
use std::io::Read as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ankusa_store::{queries, Store};
use common::{
    client, config_dispatching, config_with, metric, seq_of, store_check, write_config, Daemon,
};

const FAST: &str = "tick = \"10ms\"\nreclaim_interval = \"20ms\"\ndrain_timeout = \"2s\"";

/// A sink that answers 200 and counts what it got.
async fn start_sink() -> (String, Arc<AtomicU64>) {
    let hits = Arc::new(AtomicU64::new(0));
    let h = hits.clone();
    let app = axum::Router::new().route(
        "/ok",
        axum::routing::post(move || {
            let h = h.clone();
            async move {
                h.fetch_add(1, Ordering::Relaxed);
                "ok"
            }
        }),
    );
    let base = crate::common::serve_loopback(app).await;
    (format!("{base}/ok"), hits)
}

fn source(url: &str) -> String {
    format!(
        "[[sources]]\nid = \"shop\"\ntenant = \"acme\"\nforward_headers = [\"x-trace\"]\n\n[[sources.sinks]]\nurl = \"{url}\"\n"
    )
}

async fn wait_metric(c: &reqwest::Client, d: &Daemon, name: &str, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = metric(c, d, name).await;
        if v >= want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} stuck at {v}, want {want}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Posts `n` hooks; returns their ids.
async fn post_many(c: &reqwest::Client, d: &Daemon, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let r = c
            .post(d.url("shop"))
            .header("content-type", "application/json")
            .header("x-trace", format!("t{i}"))
            .body(format!("{{\"n\":{i}}}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
        let v: serde_json::Value = r.json().await.unwrap();
        ids.push(v["id"].as_str().unwrap().to_owned());
    }
    ids
}

/// Every line of every archive file in `dir`, parsed.
fn read_archive(dir: &Path) -> Vec<serde_json::Value> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    let mut out = Vec::new();
    for p in names {
        assert!(p.to_string_lossy().ends_with(".jsonl.gz"), "{p:?}");
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(std::fs::File::open(&p).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        for line in text.lines() {
            out.push(serde_json::from_str(line).unwrap());
        }
    }
    out
}

fn node(store: &Path) -> ankusa_store::Counters {
    let s = Store::open_read_only(store).unwrap();
    queries::node_counters(&s).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn archived_hooks_are_in_the_files_settled_and_reclaimed() {
    let dir = tempfile::tempdir().unwrap();
    let (url, hits) = start_sink().await;
    let archive = "[archive]\nenabled = true\ndir = \"arch\"\ninterval = \"20ms\"\nbatch = 7\nmax_file_bytes = 4096";
    write_config(
        dir.path(),
        &config_dispatching(FAST, archive, &source(&url)),
    );
    let d = Daemon::start(dir.path());
    let c = client();
    let n = 60;
    let ids = post_many(&c, &d, n).await;
    wait_metric(&c, &d, "ankusa_delivery_delivered_total", n as u64).await;
    wait_metric(&c, &d, "ankusa_archive_hooks_total", n as u64).await;
    wait_metric(&c, &d, "ankusa_reclaimed_hooks_total", n as u64).await;
    d.stop_clean();
    assert!(hits.load(Ordering::Relaxed) >= n as u64);

    let lines = read_archive(&dir.path().join("arch"));
    let mut by_id: HashMap<String, serde_json::Value> = HashMap::new();
    for l in lines {
        by_id.insert(l["id"].as_str().unwrap().to_owned(), l);
    }
    for (i, id) in ids.iter().enumerate() {
        let l = by_id.get(id).unwrap_or_else(|| panic!("{id} not archived"));
        assert_eq!(l["seq"].as_u64(), Some(seq_of(id)));
        assert_eq!(l["tenant"], "acme");
        assert_eq!(l["source"], "shop");
        assert!(l["received_at"].as_u64().unwrap() > 0);
        let body = base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            l["body"].as_str().unwrap(),
        )
        .unwrap();
        assert_eq!(body, format!("{{\"n\":{i}}}").into_bytes());
        let headers = l["headers"].as_array().unwrap();
        assert!(
            headers
                .iter()
                .any(|h| h["name"] == "x-trace" && h["value"] == format!("t{i}")),
            "{headers:?}"
        );
    }
    // max_file_bytes is small and batch is 7: the archive rolled.
    let files = std::fs::read_dir(dir.path().join("arch")).unwrap().count();
    assert!(files >= 1);

    let store = dir.path().join("store");
    assert_eq!(node(&store).archive_pending, 0);
    {
        let s = Store::open_read_only(&store).unwrap();
        for id in &ids {
            assert!(
                queries::hook(&s, seq_of(id)).unwrap().is_none(),
                "{id} not reclaimed"
            );
        }
        assert!(queries::archive_obligations(&s, None, 10)
            .unwrap()
            .is_empty());
        let rep = ankusa_store::check::run(&s, |_, _| {}).unwrap();
        assert!(rep.ok(), "{:#?}", rep.mismatches);
    }
    store_check(&store);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unwritable_archive_delivers_but_never_reclaims() {
    let dir = tempfile::tempdir().unwrap();
    // A directory under a regular file cannot be created.
    std::fs::write(dir.path().join("plain"), b"not a directory").unwrap();
    let (url, _hits) = start_sink().await;
    let archive = "[archive]\nenabled = true\ndir = \"plain/arch\"\ninterval = \"20ms\"";
    write_config(
        dir.path(),
        &config_dispatching(FAST, archive, &source(&url)),
    );
    let d = Daemon::start(dir.path());
    let c = client();
    let n = 20;
    let ids = post_many(&c, &d, n).await;
    wait_metric(&c, &d, "ankusa_delivery_delivered_total", n as u64).await;
    wait_metric(&c, &d, "ankusa_archive_write_errors_total", 3).await;
    // Several reclaim passes after the last delivery.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(metric(&c, &d, "ankusa_archive_hooks_total").await, 0);
    assert_eq!(metric(&c, &d, "ankusa_archive_failing").await, 1);
    assert_eq!(metric(&c, &d, "ankusa_reclaimed_hooks_total").await, 0);
    d.stop_clean();

    let store = dir.path().join("store");
    let counters = node(&store);
    assert_eq!(counters.archive_pending, n as i64);
    assert_eq!(counters.pending + counters.scheduled + counters.inflight, 0);
    {
        let s = Store::open_read_only(&store).unwrap();
        for id in &ids {
            assert!(
                queries::hook(&s, seq_of(id)).unwrap().is_some(),
                "{id} reclaimed"
            );
        }
        let rep = ankusa_store::check::run(&s, |_, _| {}).unwrap();
        assert!(rep.ok(), "{:#?}", rep.mismatches);
    }
    store_check(&store);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_the_archive_off_no_obligation_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let archive = "[archive]\nenabled = false\ndir = \"arch\"";
    write_config(
        dir.path(),
        &config_with(archive, &source("http://127.0.0.1:9/ok")),
    );
    let d = Daemon::start(dir.path());
    let c = client();
    post_many(&c, &d, 10).await;
    d.stop_clean();
    let store = dir.path().join("store");
    assert_eq!(node(&store).archive_pending, 0);
    let s = Store::open_read_only(&store).unwrap();
    assert!(queries::archive_obligations(&s, None, 10)
        .unwrap()
        .is_empty());
    assert!(!dir.path().join("arch").exists());
}
