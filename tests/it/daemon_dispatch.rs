//! Delivery end to end: the real `ankusa serve` delivers to loopback sinks
//! this test runs (axum), and the store is inspected after it stops.
//!
//! - `every_sink_behaviour_ends_delivered_or_dead`: healthy, slow, flaky
//!   then healthy, always 500, `Retry-After`, 400, a first attempt that
//!   times out, and a signed sink; each row ends delivered or dead as the
//!   contract says, with the right attempts on the sink and on the delivery
//!   row; delivered hooks are reclaimed; `store check` passes.
//! - `a_light_tenant_is_served_during_a_flood`: one tenant floods 10,000
//!   hooks, then a light tenant posts 10; the light tenant's first delivery
//!   comes within a bounded number of ticks, long before the flood drains.
//! - `large_and_small_bodies_get_equal_bytes`: one tenant's 512 KiB bodies and
//!   another's 2 KiB bodies, both backlogged against one sink under 1 MiB in
//!   flight, refill ticks on: while both have work, each gets within 10% of
//!   half the bytes.
//! - `sigkill_during_delivery_loses_nothing`: killed with deliveries in
//!   flight, restarted: every acknowledged hook reaches the sink at least
//!   once (or is dead), nothing stays owed, `store check` passes.
//! - `a_source_that_mints_tenants_gets_one_sources_share`: a source minting
//!   100 tenants against a one-tenant source, a 1 s sink: the one-tenant
//!   source gets at least half an even split of the node (issue 31).
//! - `replay_by_tenant_and_by_id_redelivers_dead_rows`: `ankusa dlq replay`
//!   (dry run counts, then revives) on a stopped store; the restarted
//!   daemon delivers the replayed rows.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_store::{queries, Field, Store};
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use common::{client, config_dispatching, metric, seq_of, store_check, write_config, Daemon};

/// One request a sink received.
#[derive(Debug, Clone)]
struct Hit {
    path: String,
    hook: String,
    attempt: u32,
    tenant: String,
    at: Instant,
    status: u16,
    /// Body length as received.
    bytes: usize,
}

#[derive(Clone, Default)]
struct Sink {
    hits: Arc<Mutex<Vec<Hit>>>,
    /// The signing key the `signed` route verifies with.
    key: Arc<Vec<u8>>,
    /// Latency of the `hold` and `paced` routes.
    hold_ms: Arc<std::sync::atomic::AtomicU64>,
    /// Hook ids whose 2xx answer was fully produced (the handler was not
    /// cancelled by the daemon dying mid-request).
    completed: Arc<Mutex<Vec<String>>>,
    /// Requests being answered now, and the most at once (`hold`/`paced`).
    busy: Arc<std::sync::atomic::AtomicI64>,
    peak: Arc<std::sync::atomic::AtomicI64>,
}

impl Sink {
    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }
    fn of(&self, path: &str) -> Vec<Hit> {
        self.hits().into_iter().filter(|h| h.path == path).collect()
    }
}

fn header(h: &HeaderMap, name: &str) -> String {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

async fn sink_handler(
    State(sink): State<Sink>,
    UrlPath(path): UrlPath<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let attempt: u32 = header(&headers, "ankusa-attempt").parse().unwrap_or(0);
    let hold = Duration::from_millis(sink.hold_ms.load(std::sync::atomic::Ordering::Relaxed));
    // Decide the answer and its delay first, and record the hit on arrival,
    // so a request the daemon gave up on (timeout) is recorded in order.
    let (status, delay, retry_after, text) = match path.as_str() {
        "ok" => (200, Duration::ZERO, false, ""),
        "slow" => (204, Duration::from_millis(300), false, ""),
        "flaky" if attempt < 3 => (500, Duration::ZERO, false, ""),
        "flaky" => (200, Duration::ZERO, false, ""),
        "fail" => (500, Duration::ZERO, false, "boom"),
        "retry-after" if attempt == 1 => (429, Duration::ZERO, true, ""),
        "retry-after" => (200, Duration::ZERO, false, ""),
        "bad" => (400, Duration::ZERO, false, "no such customer"),
        "timeout" if attempt == 1 => (200, Duration::from_secs(3), false, ""),
        "timeout" => (200, Duration::ZERO, false, ""),
        "signed" => {
            let id = header(&headers, "webhook-id");
            let ts: u64 = header(&headers, "webhook-timestamp").parse().unwrap_or(0);
            let want = common::sign(&sink.key, &id, ts, &body);
            let ok = header(&headers, "webhook-signature") == want
                && id == header(&headers, "ankusa-hook-id");
            (if ok { 200 } else { 401 }, Duration::ZERO, false, "")
        }
        "hold" | "paced" => (200, hold, false, ""),
        _ => (404, Duration::ZERO, false, ""),
    };
    sink.hits.lock().unwrap().push(Hit {
        path,
        hook: header(&headers, "ankusa-hook-id"),
        attempt,
        tenant: header(&headers, "ankusa-tenant"),
        at: Instant::now(),
        status,
        bytes: body.len(),
    });
    let held = delay > Duration::ZERO;
    if held {
        let now = sink.busy.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        sink.peak
            .fetch_max(now, std::sync::atomic::Ordering::SeqCst);
    }
    tokio::time::sleep(delay).await;
    if held {
        sink.busy.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
    if status / 100 == 2 {
        sink.completed
            .lock()
            .unwrap()
            .push(header(&headers, "ankusa-hook-id"));
    }
    let code = StatusCode::from_u16(status).unwrap();
    if retry_after {
        (code, [("retry-after", "1")], text).into_response()
    } else {
        (code, text).into_response()
    }
}

/// Starts the sink on a free loopback port; returns its base URL.
async fn start_sink(sink: Sink) -> String {
    let app = axum::Router::new()
        .route("/{path}", axum::routing::post(sink_handler))
        .with_state(sink);
    let base = crate::common::serve_loopback(app).await;
    base
}

/// A source with a fixed tenant and one sink.
fn source(id: &str, tenant: &str, url: &str, extra: &str) -> String {
    format!(
        "[[sources]]\nid = \"{id}\"\ntenant = \"{tenant}\"\n\n[[sources.sinks]]\nurl = \"{url}\"\n{extra}\n\n"
    )
}

/// Waits (bounded) until `cond` holds, polling.
async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !cond().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the running daemon's store owes nothing due or inflight,
/// read through a secondary instance (the daemon holds the primary).
async fn wait_settled(store: &Path, timeout: Duration) {
    let sec = tempfile::tempdir().unwrap();
    let s = Store::open_secondary(store, sec.path()).expect("open secondary");
    let deadline = Instant::now() + timeout;
    loop {
        s.catch_up().unwrap();
        let n = queries::node_counters(&s).unwrap();
        let owed = n.get(Field::Pending) + n.get(Field::Scheduled) + n.get(Field::Inflight);
        if owed == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "store still owes {owed} rows");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn post(c: &reqwest::Client, d: &Daemon, source: &str, body: &str) -> String {
    let r = c
        .post(d.url(source))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202, "{source}");
    let v: serde_json::Value = r.json().await.unwrap();
    v["id"].as_str().unwrap().to_owned()
}

/// The offline audit on the stopped store, through the library.
fn check_store(path: &Path) {
    let s = Store::open_read_only(path).expect("open stopped store");
    let rep = ankusa_store::check::run(&s, |_, _| {}).unwrap();
    assert!(rep.ok(), "{:#?}", rep.mismatches);
    drop(s);
    store_check(path);
}

const FAST: &str = "tick = \"10ms\"\nreclaim_interval = \"20ms\"\ndrain_timeout = \"2s\"";
const RETRY: &str =
    "max_attempts = 3\nbackoff_initial = \"10ms\"\nbackoff_max = \"1s\"\ntimeout = \"1s\"";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_sink_behaviour_ends_delivered_or_dead() {
    let key = b"sink-signing-key-0123456789".to_vec();
    let sink = Sink {
        key: Arc::new(key.clone()),
        ..Sink::default()
    };
    let base = start_sink(sink.clone()).await;
    use base64::Engine as _;
    let secret = format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(&key)
    );
    let routes = [
        "ok",
        "slow",
        "flaky",
        "fail",
        "retry-after",
        "bad",
        "timeout",
        "signed",
    ];
    let mut sources = String::new();
    for r in routes {
        let extra = match r {
            "timeout" => "max_attempts = 3\nbackoff_initial = \"10ms\"\nbackoff_max = \"1s\"\ntimeout = \"500ms\"".to_owned(),
            "signed" => format!("{RETRY}\nsigning_secret = \"{secret}\""),
            _ => RETRY.to_owned(),
        };
        sources.push_str(&source(
            r,
            &format!("t-{r}"),
            &format!("{base}/{r}"),
            &extra,
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &config_dispatching(FAST, "", &sources));
    let d = Daemon::start(dir.path());
    let c = client();
    const N: usize = 3;
    let mut ids: HashMap<&str, Vec<String>> = HashMap::new();
    for r in routes {
        for i in 0..N {
            ids.entry(r)
                .or_default()
                .push(post(&c, &d, r, &format!("{{\"n\":{i}}}")).await);
        }
    }
    let total = (routes.len() * N) as u64;
    wait_settled(&d.store, Duration::from_secs(60)).await;
    let ended = metric(&c, &d, "ankusa_delivery_delivered_total").await
        + metric(&c, &d, "ankusa_delivery_dead_total").await;
    assert_eq!(ended, total, "every row ended exactly once");
    // Delivered hooks are reclaimed (6 routes deliver).
    wait_until("reclaim", Duration::from_secs(30), || async {
        metric(&c, &d, "ankusa_reclaimed_hooks_total").await >= (6 * N) as u64
    })
    .await;
    d.stop_clean();

    let s = Store::open_read_only(&d_store(&dir)).unwrap();
    let per_hook = |path: &str| -> HashMap<String, Vec<Hit>> {
        let mut m: HashMap<String, Vec<Hit>> = HashMap::new();
        for h in sink.of(path) {
            m.entry(h.hook.clone()).or_default().push(h);
        }
        m
    };
    for r in ["ok", "slow", "flaky", "retry-after", "timeout", "signed"] {
        let hits = per_hook(r);
        for id in &ids[r] {
            let seq = seq_of(id);
            assert!(
                queries::delivery(&s, seq, 0).unwrap().is_none(),
                "{r}: {id} still owed"
            );
            assert!(
                queries::hook(&s, seq).unwrap().is_none(),
                "{r}: {id} not reclaimed"
            );
            let h = &hits[id];
            assert_eq!(h.last().unwrap().status / 100, 2, "{r}: {id} {h:?}");
            assert!(h.iter().all(|x| x.tenant == format!("t-{r}")));
            let want = match r {
                "flaky" => 3,
                "retry-after" | "timeout" => 2,
                _ => 1,
            };
            let attempts: Vec<u32> = h.iter().map(|x| x.attempt).collect();
            assert_eq!(attempts, (1..=want).collect::<Vec<_>>(), "{r}: {id}");
            if r == "retry-after" {
                // The sink asked for one second; jitter alone is below 20 ms.
                let gap = h[1].at - h[0].at;
                assert!(
                    gap >= Duration::from_millis(900),
                    "{r}: retried after {gap:?}"
                );
            }
        }
    }
    for (r, attempts, status) in [("fail", 3u16, 500u16), ("bad", 1, 400)] {
        let hits = per_hook(r);
        let dlq = queries::dlq_page(&s, None, 100).unwrap();
        for id in &ids[r] {
            let seq = seq_of(id);
            let row = queries::delivery(&s, seq, 0)
                .unwrap()
                .expect("dead row kept");
            assert_eq!(row.attempts, attempts, "{r}: {id}");
            assert_eq!(row.last().unwrap().status, status, "{r}: {id}");
            assert_eq!(hits[id].len(), usize::from(attempts), "{r}: {id}");
            assert!(
                dlq.entries.iter().any(|e| e.seq == seq),
                "{r}: {id} not in the DLQ"
            );
        }
    }
    let n = queries::node_counters(&s).unwrap();
    assert_eq!(n.get(Field::Dead), (2 * N) as i64);
    assert_eq!(
        n.get(Field::Pending) + n.get(Field::Scheduled) + n.get(Field::Inflight),
        0
    );
    drop(s);
    check_store(&d_store(&dir));
}

fn d_store(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("store")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_light_tenant_is_served_during_a_flood() {
    let sink = Sink::default();
    sink.hold_ms.store(20, std::sync::atomic::Ordering::Relaxed);
    let base = start_sink(sink.clone()).await;
    let sources = source("heavy", "heavy", &format!("{base}/paced"), RETRY)
        + &source("light", "light", &format!("{base}/paced"), RETRY);
    let dir = tempfile::tempdir().unwrap();
    // Eight deliveries at once, 20 ms each: the flood takes ~25 s to drain.
    let dispatch = format!("{FAST}\nmax_inflight = 8\nper_tenant = 8\ntick_rows = 8");
    write_config(dir.path(), &config_dispatching(&dispatch, "", &sources));
    let d = Daemon::start(dir.path());
    let c = client();
    const FLOOD: usize = 10_000;
    let url = d.url("heavy");
    let mut workers = Vec::new();
    for w in 0..32 {
        let (c, url) = (c.clone(), url.clone());
        workers.push(tokio::spawn(async move {
            for i in (w..FLOOD).step_by(32) {
                let r = c
                    .post(&url)
                    .body(format!("{{\"i\":{i}}}"))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 202);
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    let ticks0 = metric(&c, &d, "ankusa_dispatch_ticks_total").await;
    let t0 = Instant::now();
    for i in 0..10 {
        post(&c, &d, "light", &format!("{{\"light\":{i}}}")).await;
    }
    let mut ticks1 = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    let first = loop {
        if let Some(h) = sink.hits().into_iter().find(|h| h.tenant == "light") {
            break h;
        }
        ticks1 = metric(&c, &d, "ankusa_dispatch_ticks_total").await;
        assert!(
            Instant::now() < deadline,
            "the light tenant was never served"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let ticks1 = ticks1.max(metric(&c, &d, "ankusa_dispatch_ticks_total").await);
    let heavy_before = sink
        .hits()
        .iter()
        .filter(|h| h.tenant == "heavy" && h.at <= first.at)
        .count();
    let ms = (first.at - t0).as_millis();
    let ticks = ticks1 - ticks0;
    eprintln!(
        "fairness e2e: light tenant's first delivery after <= {ticks} ticks, {ms} ms \
         (from its first post); heavy deliveries by then: {heavy_before} of {FLOOD}"
    );
    // Bounded in ticks (10 posts take a few ticks themselves), and long
    // before the flood drained.
    assert!(ticks <= 100, "light tenant waited {ticks} ticks");
    assert!(
        heavy_before < FLOOD / 2,
        "light tenant served only after {heavy_before} heavy deliveries"
    );
    // Speed the sink up and let everything drain.
    sink.hold_ms.store(0, std::sync::atomic::Ordering::Relaxed);
    let _ = d.stop();
}

/// Issue 19: a lone tenant is not held to its cap while the node has idle
/// slots nobody else waits for; a tenant that arrives then is served at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lone_tenant_borrows_idle_slots_and_a_newcomer_is_served_at_once() {
    let sink = Sink::default();
    sink.hold_ms
        .store(300, std::sync::atomic::Ordering::Relaxed);
    let base = start_sink(sink.clone()).await;
    let sources = source("heavy", "heavy", &format!("{base}/paced"), RETRY)
        + &source("light", "light", &format!("{base}/paced"), RETRY);
    let dir = tempfile::tempdir().unwrap();
    let dispatch = format!("{FAST}\nmax_inflight = 32\nper_tenant = 4\nper_sink = 16");
    write_config(dir.path(), &config_dispatching(&dispatch, "", &sources));
    let d = Daemon::start(dir.path());
    let c = client();
    for i in 0..200 {
        post(&c, &d, "heavy", &format!("{{\"i\":{i}}}")).await;
    }
    wait_until("the heavy tenant borrows", Duration::from_secs(20), || {
        let p = sink.peak.load(std::sync::atomic::Ordering::SeqCst);
        async move { p >= 12 }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let alone = sink.peak.load(std::sync::atomic::Ordering::SeqCst);
    let t0 = Instant::now();
    post(&c, &d, "light", "{}").await;
    wait_until(
        "the light tenant's delivery",
        Duration::from_secs(20),
        || {
            let served = sink.hits().iter().any(|h| h.tenant == "light");
            async move { served }
        },
    )
    .await;
    let waited = t0.elapsed();
    eprintln!(
        "work-conserving e2e: lone tenant peak {alone} in flight (cap 4, ceiling 16); light tenant served {} ms after posting",
        waited.as_millis()
    );
    // The sink's own bound holds (the light source has its own).
    assert!(alone <= 16, "peak {alone} past the sink's bound");
    // Served from the reserve on the next tick, not after a borrowed row
    // (300 ms) finished.
    assert!(
        waited < Duration::from_millis(250),
        "light tenant waited {waited:?}"
    );
    sink.hold_ms.store(0, std::sync::atomic::Ordering::Relaxed);
    let _ = d.stop();
}

/// Issue 19: a slot freed by a finished delivery is refilled at once, not at
/// the next periodic tick. With the default 100 ms tick and `per_tenant = 4`,
/// a tick-bound dispatcher delivers at most 4 rows per periodic tick; this
/// one delivers several times that against a fast sink.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_freed_slot_is_refilled_before_the_next_tick() {
    let sink = Sink::default();
    let base = start_sink(sink.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let sources = source("one", "one", &format!("{base}/ok"), RETRY);
    // The default tick; a small per-tenant cap and ceiling make the
    // tick-bound rate low and easy to beat.
    // The backlog is written with dispatch off, then served.
    write_config(
        dir.path(),
        &config_dispatching("enabled = false", "", &sources),
    );
    let d = Daemon::start(dir.path());
    let c = client();
    const N: usize = 600;
    for i in 0..N {
        post(&c, &d, "one", &format!("{{\"i\":{i}}}")).await;
    }
    d.stop();
    write_config(
        dir.path(),
        &config_dispatching("per_tenant = 4\nper_sink = 4", "", &sources),
    );
    let d = Daemon::start(dir.path());
    let ticks0 = metric(&c, &d, "ankusa_dispatch_ticks_total").await;
    let refills0 = metric(&c, &d, "ankusa_dispatch_refills_total").await;
    let done0 = sink.of("ok").len();
    let t0 = Instant::now();
    wait_until("the backlog drained", Duration::from_secs(120), || {
        let n = sink.of("ok").len();
        async move { n >= N }
    })
    .await;
    let elapsed = t0.elapsed();
    let ticks = metric(&c, &d, "ankusa_dispatch_ticks_total").await - ticks0;
    let refills = metric(&c, &d, "ankusa_dispatch_refills_total").await - refills0;
    let periodic = ticks.saturating_sub(refills).max(1);
    let delivered = (N - done0) as u64;
    eprintln!(
        "refill e2e: {delivered} delivered in {} ms over {periodic} periodic ticks and {refills} refills ({:.0}/s; tick-bound would be 40/s)",
        elapsed.as_millis(),
        delivered as f64 / elapsed.as_secs_f64()
    );
    assert!(refills > 0, "no refill tick ran");
    assert!(
        delivered > 3 * 4 * periodic,
        "{delivered} rows over {periodic} periodic ticks: bound by the tick"
    );
    let _ = d.stop();
}

/// Posts `n` bodies of exactly `size` bytes to `source`, 16 at a time.
async fn post_sized(c: &reqwest::Client, d: &Daemon, source: &str, n: usize, size: usize) {
    let url = d.url(source);
    let mut workers = Vec::new();
    for w in 0..16 {
        let (c, url) = (c.clone(), url.clone());
        workers.push(tokio::spawn(async move {
            for i in (w..n).step_by(16) {
                let head = format!("{{\"i\":{i},\"p\":\"");
                let pad = size - head.len() - 2;
                let body = format!("{head}{}\"}}", "x".repeat(pad));
                assert_eq!(body.len(), size);
                let r = c
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 202);
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
}

// Issue 15: the scheduler is fair in bytes, not rows, when rows are large. Both
// backlogs are ingested with dispatch off, so both are backlogged from the first tick.
// The dispatcher runs as configured by default, refill ticks on: a tick starts whenever
// a delivery ends. 1 MiB in flight (`max_inflight_bytes`) is the binding limit, with
// row slots to spare (`per_sink` is counted when rows are claimed, so it is set above
// the small tenant's 256 rows of share: at 256 the sink's bound, not the scheduler,
// would decide the split), so each tick claims what deliveries freed and the split is the
// scheduler's: 512 KiB in flight to each, and bytes delivered in that ratio. Bytes are
// counted until the large tenant's last delivery, while both had work.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn large_and_small_bodies_get_equal_bytes() {
    const LARGE: usize = 20;
    const LARGE_SIZE: usize = 512 * 1024;
    const SMALL_SIZE: usize = 2 * 1024;
    // One tick and a half more than the large tenant's share, so it drains first.
    const SMALL: usize = LARGE * 256 + 384;
    let sink = Sink::default();
    let base = start_sink(sink.clone()).await;
    let sources = source("large", "large", &format!("{base}/ok"), RETRY)
        + &source("small", "small", &format!("{base}/ok"), RETRY);
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &common::config_with("", &sources));
    let d = Daemon::start(dir.path());
    let c = client();
    post_sized(&c, &d, "large", LARGE, LARGE_SIZE).await;
    post_sized(&c, &d, "small", SMALL, SMALL_SIZE).await;
    d.stop_clean();

    let dispatch = "reclaim_interval = \"200ms\"\ndrain_timeout = \"2s\"\n\
                    max_inflight_bytes = 1048576\ntick_rows = 1024\nscan_rows = 1024\n\
                    per_tenant = 4096\nmax_inflight = 8192\nper_sink = 1024";
    write_config(dir.path(), &config_dispatching(dispatch, "", &sources));
    let d = Daemon::start(dir.path());
    wait_until(
        "the large tenant's deliveries",
        Duration::from_secs(120),
        || {
            let n = sink.hits().iter().filter(|h| h.tenant == "large").count();
            async move { n >= LARGE }
        },
    )
    .await;
    let hits = sink.hits();
    let cut = hits
        .iter()
        .filter(|h| h.tenant == "large")
        .map(|h| h.at)
        .max()
        .unwrap();
    let bytes = |tenant: &str| -> usize {
        hits.iter()
            .filter(|h| h.tenant == tenant && h.at <= cut && h.status / 100 == 2)
            .map(|h| h.bytes)
            .sum()
    };
    let (large, small) = (bytes("large"), bytes("small"));
    let small_left = SMALL
        - hits
            .iter()
            .filter(|h| h.tenant == "small" && h.at <= cut)
            .count();
    eprintln!(
        "byte split e2e: large {large} bytes ({} rows), small {small} bytes ({} rows), \
         {:.3} of the total to large; small rows still owed at the cut: {small_left}",
        large / LARGE_SIZE,
        small / SMALL_SIZE,
        large as f64 / (large + small) as f64
    );
    assert!(
        small_left > 0,
        "the small tenant drained first; no window with both"
    );
    let mean = (large + small) as f64 / 2.0;
    for (who, b) in [("large", large), ("small", small)] {
        assert!(
            (b as f64 - mean).abs() <= 0.10 * mean,
            "{who} got {b} bytes of {} while both were backlogged",
            large + small
        );
    }
    let _ = d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_during_delivery_loses_nothing() {
    let sink = Sink::default();
    sink.hold_ms
        .store(300, std::sync::atomic::Ordering::Relaxed);
    let base = start_sink(sink.clone()).await;
    let sources = source("k", "killed", &format!("{base}/hold"), RETRY);
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        &config_dispatching(&format!("{FAST}\nmax_inflight = 16"), "", &sources),
    );
    let d = Daemon::start(dir.path());
    let c = client();
    let mut acked = Vec::new();
    for i in 0..200 {
        acked.push(post(&c, &d, "k", &format!("{{\"k\":{i}}}")).await);
    }
    // Kill with deliveries mid-request and outcomes mid-commit.
    wait_until("deliveries in flight", Duration::from_secs(30), || async {
        sink.hits().len() >= 20
    })
    .await;
    let _ = d.kill9();
    sink.hold_ms.store(0, std::sync::atomic::Ordering::Relaxed);
    let d = Daemon::start(dir.path());
    wait_settled(&d.store, Duration::from_secs(60)).await;
    d.stop_clean();
    // Only answers the sink finished count: a request cut by the kill was
    // not delivered.
    let seen: HashSet<String> = sink.completed.lock().unwrap().iter().cloned().collect();
    let s = Store::open_read_only(&d_store(&dir)).unwrap();
    for id in &acked {
        let seq = seq_of(id);
        let owed = queries::delivery(&s, seq, 0).unwrap();
        assert!(
            seen.contains(id) || owed.is_some_and(|r| r.attempts > 0),
            "{id} was neither delivered nor dead"
        );
    }
    let n = queries::node_counters(&s).unwrap();
    assert_eq!(
        n.get(Field::Pending) + n.get(Field::Scheduled) + n.get(Field::Inflight),
        0
    );
    assert_eq!(n.get(Field::Dead), 0, "a healthy sink kills nothing");
    drop(s);
    check_store(&d_store(&dir));
}

/// The store's cumulative totals beside a real daemon and a real sink: the
/// admin stats (node) and the tenant detail report accepted, delivered,
/// retried and dead-lettered rows exactly, `/metrics` exports the node's,
/// and the stopped store checks (the totals are no fold, and not compared).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_admin_api_reports_the_cumulative_totals() {
    const ADMIN: &str = "admin-token-0123456789";
    let sink = Sink::default();
    let base = start_sink(sink.clone()).await;
    let mut sources = source("good", "t-good", &format!("{base}/ok"), RETRY);
    sources.push_str(&source("bad", "t-bad", &format!("{base}/fail"), RETRY));
    let admin = format!(
        "[admin]\nlisten = \"127.0.0.1:0\"\n\n[[admin.tokens]]\nname = \"ops\"\ntoken = \"{ADMIN}\"\n"
    );
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &config_dispatching(FAST, &admin, &sources));
    let d = Daemon::start(dir.path());
    let c = client();
    for i in 0..5 {
        post(&c, &d, "good", &format!("{{\"n\":{i}}}")).await;
    }
    for i in 0..2 {
        post(&c, &d, "bad", &format!("{{\"n\":{i}}}")).await;
    }
    wait_settled(&d.store, Duration::from_secs(60)).await;
    let api = d.admin.clone().expect("admin listener");
    let get = |path: String| {
        let c = c.clone();
        async move {
            let r = c.get(path).bearer_auth(ADMIN).send().await.unwrap();
            assert_eq!(r.status(), 200);
            r.json::<serde_json::Value>().await.unwrap()
        }
    };
    let stats = get(format!("{api}/v1/admin/stats")).await;
    let good = get(format!("{api}/v1/admin/tenants/t-good")).await;
    let bad = get(format!("{api}/v1/admin/tenants/t-bad")).await;
    let t = |v: &serde_json::Value, f: &str| v["totals"][f].as_u64().unwrap_or(u64::MAX);
    // 3 attempts each: 2 retries then the dead letter.
    assert_eq!(
        [
            t(&good, "accepted"),
            t(&good, "delivered"),
            t(&good, "retried"),
            t(&good, "dead_lettered")
        ],
        [5, 5, 0, 0],
        "{good}"
    );
    assert_eq!(
        [
            t(&bad, "accepted"),
            t(&bad, "delivered"),
            t(&bad, "retried"),
            t(&bad, "dead_lettered")
        ],
        [2, 0, 4, 2],
        "{bad}"
    );
    assert_eq!(
        [
            t(&stats, "accepted"),
            t(&stats, "delivered"),
            t(&stats, "retried"),
            t(&stats, "dead_lettered")
        ],
        [7, 5, 4, 2],
        "{stats}"
    );
    let text = common::metrics_without_node(&c, &d).await;
    for (kind, n) in [
        ("accepted", 7),
        ("delivered", 5),
        ("retried", 4),
        ("dead_lettered", 2),
    ] {
        let line = format!("ankusa_store_rows_total{{transition=\"{kind}\"}} {n}\n");
        assert!(text.contains(&line), "no {line:?} in /metrics");
    }
    d.stop();
    store_check(&dir.path().join("store"));
}

/// A sink that answers `200` at once and then trickles its body, a byte
/// every 500 ms for 20 s (a raw socket: the status line and headers first,
/// the body after). Sets `finished` once the last byte is written.
async fn start_trickling_sink(finished: Arc<std::sync::atomic::AtomicBool>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let finished = finished.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                const BODY: usize = 40;
                let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {BODY}\r\n\r\n");
                if sock.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
                for _ in 0..BODY {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    if sock.write_all(b"x").await.is_err() {
                        return;
                    }
                }
                finished.store(true, std::sync::atomic::Ordering::SeqCst);
            });
        }
    });
    format!("http://{addr}/trickle")
}

/// The status line decides an attempt (docs/delivery.md): a `200` whose
/// body trickles for 20 s is recorded delivered while the body is still
/// coming, not after it (which kept the row in flight, and a crash in that
/// window delivered the hook twice). The sink's timeout is longer than the
/// trickle, so only the daemon's own bound on the body can end the read.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_2xx_is_delivered_on_its_status_line_while_its_body_trickles() {
    let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let url = start_trickling_sink(finished.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        &config_dispatching(
            FAST,
            "",
            &source("drip", "acme", &url, "timeout = \"60s\"\nmax_attempts = 3"),
        ),
    );
    let d = Daemon::start(dir.path());
    let c = client();
    post(&c, &d, "drip", "{}").await;
    wait_until(
        "the delivery to be recorded before the body ends",
        Duration::from_secs(15),
        || async { metric(&c, &d, "ankusa_delivery_delivered_total").await == 1 },
    )
    .await;
    assert!(
        !finished.load(std::sync::atomic::Ordering::SeqCst),
        "the delivery waited for the whole body"
    );
    assert_eq!(metric(&c, &d, "ankusa_delivery_attempts_total").await, 1);
    d.stop_clean();
    check_store(&dir.path().join("store"));
}

/// Issue 31, the sybil case: source `sybil` takes its tenant from a header
/// and has four sinks; it posts 100 tenants x 20 hooks (8,000 rows against
/// a sink that answers after 1 s, about 31 s of the node's 256 slots).
/// Then source `legit` (one fixed tenant, one sink) posts 200 hooks. The
/// dispatcher groups by source, so legit gets half the claims while it has
/// rows: an even split gives it its 64 sink slots, all 200 within about
/// 4 s. It must get at least half of that split (100) in 15 s. Grouping
/// every tenant as one (the daemon before) gave it about 1/101 of the
/// claims: 2.5 a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_source_that_mints_tenants_gets_one_sources_share() {
    let sink = Sink::default();
    sink.hold_ms
        .store(1_000, std::sync::atomic::Ordering::Relaxed);
    let base = start_sink(sink.clone()).await;
    let hold = format!("{base}/hold");
    let sybil = format!(
        "[[sources]]\nid = \"sybil\"\ntenant_header = \"x-tenant\"\n\n{}",
        (0..4)
            .map(|_| format!("[[sources.sinks]]\nurl = \"{hold}\"\ntimeout = \"10s\"\n\n"))
            .collect::<String>()
    );
    let sources = sybil + &source("legit", "legit", &hold, "timeout = \"10s\"");
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &config_dispatching(FAST, "", &sources));
    let d = Daemon::start(dir.path());
    let c = client();
    let url = d.url("sybil");
    let mut workers = Vec::new();
    for w in 0..32usize {
        let (c, url) = (c.clone(), url.clone());
        workers.push(tokio::spawn(async move {
            for i in (w..2_000).step_by(32) {
                let r = c
                    .post(&url)
                    .header("x-tenant", format!("minted-{}", i % 100))
                    .body(format!("{{\"i\":{i}}}"))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 202);
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let t0 = Instant::now();
    let legit_url = d.url("legit");
    let mut workers = Vec::new();
    for w in 0..8usize {
        let (c, url) = (c.clone(), legit_url.clone());
        workers.push(tokio::spawn(async move {
            for i in (w..200).step_by(8) {
                let r = c
                    .post(&url)
                    .body(format!("{{\"legit\":{i}}}"))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 202);
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    let window = Duration::from_secs(15);
    let count = |tenant_is_legit: bool| {
        sink.hits()
            .iter()
            .filter(|h| h.at >= t0 && h.at <= t0 + window)
            .filter(|h| (h.tenant == "legit") == tenant_is_legit)
            .count()
    };
    while t0.elapsed() < window && count(true) < 200 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (legit, sybil) = (count(true), count(false));
    let took = t0.elapsed();
    eprintln!(
        "sybil e2e: legit {legit} of 200 delivered within {took:?} of its first post; sybil {sybil} rows meanwhile"
    );
    assert!(
        legit >= 100,
        "legit got {legit} of 200 in {took:?} (sybil {sybil}): below half an even split"
    );
    sink.hold_ms.store(0, std::sync::atomic::Ordering::Relaxed);
    let _ = d.stop();
}

/// Posts `n` hooks of `tenant` to `source` (by its `x-tenant` header)
/// from 16 concurrent clients.
async fn post_tenant(c: &reqwest::Client, d: &Daemon, source: &str, tenant: &str, n: usize) {
    let url = d.url(source);
    let mut workers = Vec::new();
    for w in 0..16usize {
        let (c, url, tenant) = (c.clone(), url.clone(), tenant.to_owned());
        workers.push(tokio::spawn(async move {
            for i in (w..n).step_by(16) {
                let r = c
                    .post(&url)
                    .header("x-tenant", &tenant)
                    .body(format!("{{\"i\":{i}}}"))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 202);
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
}

/// `ankusa ARGS` on a blocking thread; its standard output.
async fn cli(args: Vec<String>) -> String {
    tokio::task::spawn_blocking(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        common::ankusa_ok(&a)
    })
    .await
    .unwrap()
}

fn one_tenant_header_source(id: &str, url: &str) -> String {
    format!(
        "[[sources]]\nid = \"{id}\"\ntenant_header = \"x-tenant\"\n\n[[sources.sinks]]\nurl = \"{url}\"\ntimeout = \"10s\"\n\n"
    )
}

/// Issue 31's weighted target: two tenants of one source, weights 1 and
/// 4 (set through `ankusa tenants policy set` against the running
/// daemon), both backlogged against a 200 ms sink of 10 slots, are
/// delivered 1:4 within 10%. Every tenant weighing 1 (the daemon before)
/// delivers them 1:1.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_tenants_weighted_one_to_four_are_delivered_one_to_four() {
    let sink = Sink::default();
    sink.hold_ms
        .store(200, std::sync::atomic::Ordering::Relaxed);
    let base = start_sink(sink.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let dispatch = format!("{FAST}\nper_sink = 10\nper_tenant = 10");
    let sources = one_tenant_header_source("w", &format!("{base}/hold"));
    write_config(dir.path(), &config_dispatching(&dispatch, "", &sources));
    let d = Daemon::start(dir.path());
    let c = client();
    let store = dir.path().join("store").display().to_string();
    post_tenant(&c, &d, "w", "light", 1).await;
    post_tenant(&c, &d, "w", "heavy", 1).await;
    let out = cli([
        "tenants", "policy", "set", "heavy", "--weight", "4", "--store", &store,
    ]
    .map(String::from)
    .to_vec())
    .await;
    assert!(out.contains("weight 4"), "{out}");
    post_tenant(&c, &d, "w", "light", 600).await;
    post_tenant(&c, &d, "w", "heavy", 600).await;
    // From when both backlogs are in, for 8 s: 50 deliveries a second.
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(8)).await;
    let count = |t: &str| {
        sink.hits()
            .iter()
            .filter(|h| h.at >= t0 && h.tenant == t)
            .count()
    };
    let (light, heavy) = (count("light"), count("heavy"));
    let ratio = heavy as f64 / light.max(1) as f64;
    eprintln!("weighted e2e: light {light}, heavy {heavy} in 8 s: ratio {ratio:.2}");
    assert!(
        light + heavy >= 200,
        "too little delivered to judge: {light} + {heavy}"
    );
    assert!(
        (3.6..=4.4).contains(&ratio),
        "heavy:light {ratio:.2} ({heavy}:{light}), want 4 within 10%"
    );
    sink.hold_ms.store(0, std::sync::atomic::Ordering::Relaxed);
    let _ = d.stop();
    let s = Store::open_read_only(&dir.path().join("store")).unwrap();
    let who = ankusa_ops::access::Principal::local(&ankusa_ops::access::Peer::me());
    let audit = ankusa_ops::jobs::audit_page(&s, &who, None, 100).unwrap();
    assert!(
        audit
            .records
            .iter()
            .any(|r| r.action == "tenant_policy" && r.scope == "tenant heavy: weight default -> 4"),
        "{:?}",
        audit.records
    );
}

/// A tenant rate of 50/s (issue 31's target) against a backlog: after its one-second burst it
/// is delivered 50 a second within 10%, while another tenant of the same
/// source, posted behind it, is delivered at once. Clearing the policy
/// lifts the rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rated_tenant_is_delivered_at_its_rate_and_the_others_are_not_held() {
    let sink = Sink::default();
    let base = start_sink(sink.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let sources = one_tenant_header_source("r", &format!("{base}/ok"));
    write_config(dir.path(), &config_dispatching(FAST, "", &sources));
    let d = Daemon::start(dir.path());
    let c = client();
    let store = dir.path().join("store").display().to_string();
    post_tenant(&c, &d, "r", "rated", 1).await;
    cli([
        "tenants", "policy", "set", "rated", "--rate", "50/s", "--store", &store,
    ]
    .map(String::from)
    .to_vec())
    .await;
    // Its burst refills while the backlog is posted.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    post_tenant(&c, &d, "r", "rated", 600).await;
    let posted = Instant::now();
    post_tenant(&c, &d, "r", "free", 100).await;
    let free_done = {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let n = sink.hits().iter().filter(|h| h.tenant == "free").count();
            if n >= 100 {
                break posted.elapsed();
            }
            assert!(Instant::now() < deadline, "free got {n} of 100");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    // Past the burst (one second of the rate), 4 s at the rate.
    let from = posted + Duration::from_secs(1);
    tokio::time::sleep_until((from + Duration::from_secs(4)).into()).await;
    let rated: Vec<Instant> = sink
        .hits()
        .iter()
        .filter(|h| h.tenant == "rated")
        .map(|h| h.at)
        .collect();
    let window = rated
        .iter()
        .filter(|&&at| at >= from && at < from + Duration::from_secs(4))
        .count();
    let per_s = window as f64 / 4.0;
    eprintln!(
        "rate e2e: rated {per_s:.1}/s over 4 s (set 50/s); free's 100 delivered {free_done:?} after the backlog"
    );
    assert!((45.0..=55.0).contains(&per_s), "rated at {per_s}/s");
    cli(["tenants", "policy", "clear", "rated", "--store", &store]
        .map(String::from)
        .to_vec())
    .await;
    wait_until(
        "the rest of the backlog after the clear",
        Duration::from_secs(10),
        || {
            let n = sink.hits().iter().filter(|h| h.tenant == "rated").count();
            async move { n >= 601 }
        },
    )
    .await;
    let _ = d.stop();
}

/// A policy change applies within a few ticks of the admin API's answer:
/// a tenant capped at 1 against a 3 s sink has one delivery in flight;
/// raising its cap to 8 puts 7 more at the sink.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_policy_change_applies_within_ticks_of_its_answer() {
    let sink = Sink::default();
    sink.hold_ms
        .store(3_000, std::sync::atomic::Ordering::Relaxed);
    let base = start_sink(sink.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let sources = one_tenant_header_source("p", &format!("{base}/hold"));
    write_config(dir.path(), &config_dispatching(FAST, "", &sources));
    let d = Daemon::start(dir.path());
    let c = client();
    let store = dir.path().join("store").display().to_string();
    post_tenant(&c, &d, "p", "acme", 1).await;
    cli([
        "tenants", "policy", "set", "acme", "--cap", "1", "--store", &store,
    ]
    .map(String::from)
    .to_vec())
    .await;
    // Wait out the first hook, then give it a backlog.
    wait_until("the first delivery", Duration::from_secs(10), || {
        let n = sink.hits().len();
        async move { n >= 1 }
    })
    .await;
    post_tenant(&c, &d, "p", "acme", 30).await;
    wait_until("one in flight under cap 1", Duration::from_secs(10), || {
        let n = sink.busy.load(std::sync::atomic::Ordering::SeqCst);
        async move { n >= 1 }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(sink.busy.load(std::sync::atomic::Ordering::SeqCst), 1);
    let before = sink.hits().len();
    cli([
        "tenants", "policy", "set", "acme", "--cap", "8", "--store", &store,
    ]
    .map(String::from)
    .to_vec())
    .await;
    let answered = Instant::now();
    wait_until("seven more at the sink", Duration::from_secs(5), || {
        let n = sink.hits().len();
        async move { n >= before + 7 }
    })
    .await;
    let seventh = sink.hits()[before + 6].at;
    let first = sink.hits()[before].at;
    eprintln!(
        "policy change e2e: first claim under cap 8 reached the sink {:?} after the answer, the seventh {:?}",
        first.saturating_duration_since(answered),
        seventh.saturating_duration_since(answered)
    );
    sink.hold_ms.store(0, std::sync::atomic::Ordering::Relaxed);
    let _ = d.stop();
}
