//! The circuit breaker end to end, with a real daemon and a real loopback
//! sink that fails and recovers: the breaker trips after its failures, the
//! sink's rows park (no attempt burns, nothing dead-letters while open),
//! one probe at a time fails and doubles the wait, a SIGKILL keeps the
//! breaker's pause and the next run rebuilds the breaker from it, the sink
//! recovers, the probe succeeds, the breaker closes and the backlog drains;
//! the audit log holds the breaker's pause and resume; `store check` passes.

use crate::common;

use std::collections::HashSet;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use common::{client, config_dispatching, metric, store_check, write_config, Daemon, BIN};

#[derive(Default)]
struct Sink {
    down: AtomicBool,
    /// `(hook id, answered ok)` of every request.
    hits: Mutex<Vec<(String, bool)>>,
}

async fn answer(State(s): State<Arc<Sink>>, h: HeaderMap) -> (StatusCode, &'static str) {
    let id = h
        .get("ankusa-hook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let down = s.down.load(Ordering::SeqCst);
    s.hits.lock().unwrap().push((id, !down));
    if down {
        (StatusCode::SERVICE_UNAVAILABLE, "down")
    } else {
        (StatusCode::OK, "ok")
    }
}

async fn start_sink(s: Arc<Sink>) -> String {
    let app = axum::Router::new()
        .route("/hooks", axum::routing::post(answer))
        .with_state(s);
    let base = crate::common::serve_loopback(app).await;
    format!("{base}/hooks")
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

/// The sink `shop/0` as `ankusa sinks list --json` shows it.
fn sink_view(store: &str) -> serde_json::Value {
    let out = ankusa(&["sinks", "list", "--store", store, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["sinks"][0].clone()
}

async fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

const TRIPS: &str = "ankusa_sink_breaker_trips_total{source=\"shop\",sink=\"0\"}";
const STATE: &str = "ankusa_sink_breaker_state{source=\"shop\",sink=\"0\"}";
const DEAD: &str = "ankusa_queue_rows{state=\"dead\"}";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_sink_trips_its_breaker_parks_its_rows_and_a_good_probe_drains_them() {
    let sink = Arc::new(Sink::default());
    sink.down.store(true, Ordering::SeqCst);
    let url = start_sink(sink.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    // Without the breaker, 4 attempts 0.1 to 1 s apart would dead-letter
    // every row within a few seconds.
    let sources = format!(
        "[[sources]]\nid = \"shop\"\ntenant_header = \"X-Tenant\"\n\
         [[sources.sinks]]\nurl = \"{url}\"\nmax_attempts = 4\nbackoff_initial = \"100ms\"\nbackoff_max = \"1s\"\n\
         [sources.sinks.breaker]\nfailures = 3\nopen_for = \"400ms\"\nopen_max = \"1s\"\n"
    );
    write_config(
        dir.path(),
        &config_dispatching("tick = \"10ms\"\ndrain_timeout = \"2s\"", "", &sources),
    );
    let d = Daemon::start(dir.path());
    let store = d.store.to_str().unwrap().to_owned();
    let c = client();
    let mut ids = HashSet::new();
    for i in 0..10 {
        let r = c
            .post(d.url("shop"))
            .header("x-tenant", if i % 2 == 0 { "acme" } else { "beta" })
            .body(format!("{{\"i\":{i}}}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
        let v: serde_json::Value = r.json().await.unwrap();
        ids.insert(v["id"].as_str().unwrap().to_owned());
    }

    // Tripped: the breaker's pause is in force and shown.
    wait_for("the breaker to open", Duration::from_secs(20), || {
        let v = sink_view(&store);
        v["paused"] == true && v["health"]["breaker"]["state"] != "closed"
    })
    .await;
    let v = sink_view(&store);
    let b = &v["health"]["breaker"];
    assert_eq!(b["trips"], 1, "{v}");
    assert_eq!(b["reason"], "3 consecutive failures", "{v}");
    let opened_at = b["opened_at"].as_u64().unwrap();
    let pauses = ankusa(&["sinks", "list", "--store", &store]);
    assert!(
        pauses.contains("PAUSED") && pauses.contains("OPEN"),
        "{pauses}"
    );

    // Open, then half-open: one probe at a time, each failing, the wait
    // doubling (400 ms, 800 ms, then the 1 s cap). Without the breaker the
    // 10 rows would have been tried about 40 times by now.
    let at_trip = sink.hits.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(2_600)).await;
    let probes = sink.hits.lock().unwrap().len() - at_trip;
    assert!(
        (1..=4).contains(&probes),
        "{probes} attempts while open (one probe per backoff expected)"
    );
    let v = sink_view(&store);
    let b = &v["health"]["breaker"];
    assert!(b["backoff_ms"].as_u64().unwrap() >= 800, "doubled: {v}");
    assert_eq!(b["trips"], 1, "{v}");
    assert_eq!(b["opened_at"], opened_at, "{v}");
    assert_eq!(
        metric(&c, &d, DEAD).await,
        0,
        "nothing dead-lettered while open"
    );
    assert_eq!(metric(&c, &d, TRIPS).await, 1);
    assert!(metric(&c, &d, "ankusa_dispatch_parked_total").await >= 1);

    // A crash with the breaker's pause in force: the pause stays, and the
    // next run rebuilds the breaker from it (open since the trip, no new
    // trip counted) and keeps probing.
    let first_log = d.log();
    for want in [
        "tripped: 3 consecutive failures",
        "the probe failed; next probe in",
    ] {
        assert!(
            first_log.contains(want),
            "{want:?} not logged:\n{first_log}"
        );
    }
    d.kill9();
    let d = Daemon::start(dir.path());
    let v = sink_view(&store);
    assert_eq!(
        v["paused"], true,
        "the breaker's pause survives a crash: {v}"
    );
    wait_for("the rebuilt breaker", Duration::from_secs(10), || {
        let v = sink_view(&store);
        v["health"]["breaker"]["opened_at"].as_u64() == Some(opened_at)
    })
    .await;
    assert_eq!(sink_view(&store)["health"]["breaker"]["trips"], 0);

    // The sink recovers: the next probe succeeds, the breaker closes, its
    // pause is lifted and the parked rows drain.
    sink.down.store(false, Ordering::SeqCst);
    wait_for("every hook delivered", Duration::from_secs(20), || {
        let hits = sink.hits.lock().unwrap();
        let ok: HashSet<&String> = hits
            .iter()
            .filter(|(_, ok)| *ok)
            .map(|(id, _)| id)
            .collect();
        ids.iter().all(|id| ok.contains(id))
    })
    .await;
    wait_for("the breaker to close", Duration::from_secs(10), || {
        let v = sink_view(&store);
        v["paused"] == false && v["health"]["breaker"]["state"] == "closed"
    })
    .await;
    assert_eq!(metric(&c, &d, DEAD).await, 0, "nothing dead-lettered");
    assert_eq!(metric(&c, &d, STATE).await, 0);
    let log = d.log();
    d.stop();
    for want in ["(from the last run)", "the probe succeeded", "sink resumed"] {
        assert!(log.contains(want), "{want:?} not logged:\n{log}");
    }

    // The audit log holds the breaker's pause and resume.
    let s = ankusa_store::Store::open_read_only(&dir.path().join("store")).unwrap();
    let who = ankusa_ops::access::Principal::local(&ankusa_ops::access::Peer::me());
    let audit = ankusa_ops::jobs::audit_page(&s, &who, None, 100).unwrap();
    let actions: Vec<(String, String, String, String)> = audit
        .records
        .iter()
        .map(|r| {
            (
                r.action.clone(),
                r.scope.clone(),
                r.outcome.clone(),
                r.who.name.clone(),
            )
        })
        .collect();
    for want in [
        ("pause", "sink shop/0", "done"),
        ("resume", "sink shop/0", "started"),
        ("resume", "sink shop/0", "done"),
    ] {
        assert!(
            actions
                .iter()
                .any(|(a, s, o, w)| (a.as_str(), s.as_str(), o.as_str()) == want
                    && w == "circuit-breaker"),
            "{want:?} by the breaker not in {actions:?}"
        );
    }
    drop(s);
    store_check(&dir.path().join("store"));
}

/// A sink that holds every request until it is let go.
#[derive(Default)]
struct Gate {
    open: AtomicBool,
    hits: std::sync::atomic::AtomicUsize,
}

async fn hold(State(g): State<Arc<Gate>>) -> StatusCode {
    g.hits.fetch_add(1, Ordering::SeqCst);
    while !g.open.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    StatusCode::OK
}

/// A probe is a claim like any other: a half-open breaker's probe of a
/// tenant's row waits while that tenant's cap is spent elsewhere, and goes
/// as soon as the cap has room (issue 47: probes skipped the tenant's cap,
/// its rate and the sink's bound).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_breakers_probe_waits_for_room_under_its_tenants_cap() {
    let gate = Arc::new(Gate::default());
    gate.open.store(true, Ordering::SeqCst);
    let gate_url = format!(
        "{}/hold",
        common::serve_loopback(
            axum::Router::new()
                .route("/hold", axum::routing::post(hold))
                .with_state(gate.clone())
        )
        .await
    );
    let flaky = Arc::new(Sink::default());
    flaky.down.store(true, Ordering::SeqCst);
    let flaky_url = start_sink(flaky.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let sources = format!(
        "[[sources]]\nid = \"shop\"\ntenant = \"acme\"\n\
         [[sources.sinks]]\nname = \"gate\"\nurl = \"{gate_url}\"\ntimeout = \"60s\"\n\
         [[sources.sinks]]\nname = \"flaky\"\nurl = \"{flaky_url}\"\nbackoff_initial = \"50ms\"\nbackoff_max = \"1s\"\n\
         [sources.sinks.breaker]\nfailures = 1\nopen_for = \"100ms\"\nopen_max = \"200ms\"\n"
    );
    write_config(
        dir.path(),
        &config_dispatching("tick = \"10ms\"", "[tenants]\ncap = 1\n", &sources),
    );
    let d = Daemon::start(dir.path());
    let c = client();
    let post = |i: u32| {
        let c = c.clone();
        let url = d.url("shop");
        async move {
            let r = c
                .post(url)
                .body(format!("{{\"i\":{i}}}"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 202);
        }
    };
    // Several parked rows, so that a probe always has one to take.
    for i in 0..6 {
        post(i).await;
    }
    let trip = "ankusa_sink_breaker_trips_total{source=\"shop\",sink=\"1\"}";
    let deadline = Instant::now() + Duration::from_secs(20);
    while metric(&c, &d, trip).await == 0 {
        assert!(Instant::now() < deadline, "the breaker did not trip");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }

    // The gate now holds its next request: acme's one slot is spent there.
    gate.open.store(false, Ordering::SeqCst);
    let at_gate = gate.hits.load(Ordering::SeqCst);
    post(6).await;
    wait_for(
        "the gate to hold acme's row",
        Duration::from_secs(20),
        || gate.hits.load(Ordering::SeqCst) > at_gate,
    )
    .await;
    let at_hold = flaky.hits.lock().unwrap().len();
    // Many times the breaker's longest wait: a probe would have gone.
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    assert_eq!(
        flaky.hits.lock().unwrap().len(),
        at_hold,
        "a probe went out while acme's cap of 1 was in flight at the gate"
    );

    // The gate lets go: acme has room, and the probe goes.
    gate.open.store(true, Ordering::SeqCst);
    wait_for("the probe", Duration::from_secs(20), || {
        flaky.hits.lock().unwrap().len() > at_hold
    })
    .await;
    d.stop();
    store_check(&dir.path().join("store"));
}
