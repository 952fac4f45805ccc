//! `ankusa demo --no-console` end to end: the real binary runs its daemon,
//! sinks and load generator for 10 seconds and prints its JSON summary.
//!
//! - `a_headless_demo_shows_every_outcome_and_fair_first_deliveries`: hooks
//!   were accepted, deduplicated and refused; rows were delivered, retried
//!   and dead-lettered; light tenants got their first delivery long before
//!   the flood's backlog drained; `ankusa store check` passes on the kept
//!   store.
//! - `the_demo_refuses_a_directory_that_is_not_a_store` and
//!   `the_console_demo_needs_a_terminal`: clear errors, exit 2.

use crate::common;

use std::process::Command;

use common::{store_check, BIN};
use serde_json::Value;

fn num(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} missing or not a number in {v:#}"))
}

#[test]
fn a_headless_demo_shows_every_outcome_and_fair_first_deliveries() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let out = Command::new(BIN)
        .args([
            "demo",
            "--no-console",
            "--duration",
            "10s",
            "--json",
            "--seed",
            "7",
        ])
        .arg("--store")
        .arg(&store)
        .output()
        .expect("run ankusa demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "demo failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let s: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not the JSON summary ({e}):\n{stdout}\n{stderr}"));

    // Every path a hook can take happened, by the daemon's own counters.
    for path in [
        "/ingest/accepted",
        "/ingest/duplicates",
        "/ingest/refused",
        "/delivery/delivered",
        "/delivery/retried",
        "/delivery/dead",
        "/queue_at_exit/dead",
        "/sinks/healthy/ok",
        "/sinks/flaky/failed",
        "/sinks/failing/failed",
    ] {
        assert!(num(&s, path) > 0, "{path} is 0 in {s:#}");
    }
    assert!(
        num(&s, "/ingest/refused_by_code/signature_invalid") > 0,
        "{s:#}"
    );
    assert_eq!(s["store_kept"], Value::Bool(true), "{s:#}");

    // Fairness. The flood posts far more than the dispatcher can deliver,
    // so its hooks queue: by the end its first attempts waited seconds
    // (`flood_wait`, the age of its backlog when served). The dispatcher
    // is configured so the flood alone could take every delivery slot;
    // only the fair scheduler keeps room for the others. If it broke
    // (oldest-first, or a tenant admitted behind the backlog), a light
    // tenant arriving mid-run would wait about as long as the flood's
    // backlog, or still be waiting at the end (counted in the quantiles
    // with the time waited so far). So: light tenants' p95 first-delivery
    // latency must be under half the flood's worst wait. Both sides are
    // measured in the same run on the same machine, so a slow or busy
    // machine stretches them together; with fair dispatch the light p95 is
    // a few ticks (~100 ms) against a flood wait of ~9 s here.
    let flood_wait = num(&s, "/delivery_delay/flood/max_ms");
    assert!(
        flood_wait >= 2000,
        "the flood built no backlog (worst wait {flood_wait} ms), so this run shows nothing about fairness: {s:#}"
    );
    let light_p95 = num(&s, "/first_delivery/light/p95_ms");
    assert!(
        num(&s, "/first_delivery/light/tenants") >= 20,
        "too few light tenants to judge: {s:#}"
    );
    assert!(
        light_p95 * 2 < flood_wait,
        "light tenants' first deliveries waited behind the flood: p95 {light_p95} ms against a flood backlog of {flood_wait} ms: {s:#}"
    );
    assert_eq!(
        num(&s, "/first_delivery/light/waiting"),
        0,
        "light tenants never delivered: {s:#}"
    );
    assert!(num(&s, "/first_delivery/minted/tenants") > 0, "{s:#}");

    store_check(&store);
}

#[test]
fn the_demo_refuses_a_directory_that_is_not_a_store() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let out = Command::new(BIN)
        .args(["demo", "--no-console", "--duration", "1s", "--store"])
        .arg(dir.path())
        .output()
        .expect("run ankusa demo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is not an ankusa store"), "{stderr}");
    assert!(dir.path().join("notes.txt").exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn the_console_demo_needs_a_terminal() {
    // The test's stdout is a pipe, not a terminal.
    let out = Command::new(BIN)
        .args(["demo", "--duration", "1s"])
        .output()
        .expect("run ankusa demo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("--no-console"), "{stderr}");
}
