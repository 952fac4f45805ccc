//! A hook goes only where it was addressed (issue 47). A source had sinks
//! `a`, `b`, `c`; `b` failed, so its rows waited; the daemon was stopped
//! and `b` taken out of the file. The next start quietly gave `c` b's
//! position, and `c` received b's waiting hooks a second time. Now the
//! start is refused naming the sink and its rows, and a sink that was
//! retired, drained and then dropped keeps its position as a tombstone:
//! nothing of it reaches another sink, before or after new sinks come.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use nix::sys::signal::{kill, Signal};

use crate::common::{self, write_config, Daemon};

/// Hook ids each sink path received (2xx answers only), and whether `b`
/// fails.
#[derive(Clone, Default)]
struct Sinks {
    got: Arc<Mutex<HashMap<String, Vec<String>>>>,
    b_fails: Arc<AtomicBool>,
}

impl Sinks {
    fn got(&self, path: &str) -> Vec<String> {
        self.got
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .unwrap_or_default()
    }
}

async fn take(State(s): State<Sinks>, UrlPath(path): UrlPath<String>, h: HeaderMap) -> StatusCode {
    if path == "b" && s.b_fails.load(Ordering::Relaxed) {
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    let id = h
        .get("ankusa-hook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    s.got.lock().unwrap().entry(path).or_default().push(id);
    StatusCode::OK
}

/// `shop` with these sinks: (name, extra keys); each at `SINK/NAME`.
fn config(sink: &str, sinks: &[(&str, &str)]) -> String {
    let mut s = String::from(
        "[store]\npath = \"store\"\n\n[http]\nlisten = \"127.0.0.1:0\"\n\n[dispatch]\ntick = \"10ms\"\n\n\
         [[sources]]\nid = \"shop\"\ntenant = \"acme\"\n\n",
    );
    for (name, extra) in sinks {
        s.push_str(&format!(
            "[[sources.sinks]]\nname = \"{name}\"\nurl = \"{sink}/{name}\"\nbackoff_initial = \"50ms\"\n\
             backoff_max = \"1s\"\nmax_attempts = 100\n{extra}\n\n"
        ));
    }
    s
}

async fn post(d: &Daemon, n: usize) -> Vec<String> {
    let c = common::client();
    let mut ids = Vec::new();
    for i in 0..n {
        let r = c
            .post(d.url("shop"))
            .header("content-type", "application/json")
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

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_taken_out_of_the_middle_never_hands_its_rows_to_another() {
    let sinks = Sinks::default();
    sinks.b_fails.store(true, Ordering::Relaxed);
    let app = axum::Router::new()
        .route("/{path}", axum::routing::post(take))
        .with_state(sinks.clone());
    let url = common::serve_loopback(app).await;
    let dir = tempfile::tempdir().unwrap();
    let abc = [("a", ""), ("b", ""), ("c", "")];
    write_config(dir.path(), &config(&url, &abc));

    // b fails: its three rows wait for retries while a and c take theirs.
    let d = Daemon::start(dir.path());
    let first = post(&d, 3).await;
    wait_for("a and c to get the first hooks", || {
        sinks.got("a").len() == 3 && sinks.got("c").len() == 3
    })
    .await;
    d.stop_clean();

    // b taken out of the middle: the start is refused, naming b and its
    // rows, and says what to do.
    write_config(dir.path(), &config(&url, &[("a", ""), ("c", "")]));
    let Err(err) = Daemon::try_start(dir.path()) else {
        panic!("the daemon started without b, which rows are owed to");
    };
    assert!(
        err.contains("sink shop/b is gone from the file but 3 rows are owed to it")
            && err.contains("retired = true"),
        "{err}"
    );

    // Retired first (it takes no new hook), healed, drained.
    write_config(
        dir.path(),
        &config(&url, &[("a", ""), ("b", "retired = true"), ("c", "")]),
    );
    let d = Daemon::start(dir.path());
    sinks.b_fails.store(false, Ordering::Relaxed);
    let second = post(&d, 2).await;
    wait_for("b to drain", || sinks.got("b").len() == 3).await;
    wait_for("a and c to get the second hooks", || {
        sinks.got("a").len() == 5 && sinks.got("c").len() == 5
    })
    .await;
    assert_eq!(
        sorted(sinks.got("b")),
        sorted(first.clone()),
        "b got what it was owed, and nothing new"
    );
    d.stop_clean();

    // Then dropped: the start takes it, and b's position stays b's.
    write_config(dir.path(), &config(&url, &[("a", ""), ("c", "")]));
    let d = Daemon::start(dir.path());
    let third = post(&d, 2).await;
    wait_for("a and c to get the third hooks", || {
        sinks.got("a").len() == 7 && sinks.got("c").len() == 7
    })
    .await;
    assert!(d.log().contains("sink dropped"), "{}", d.log_tail(20));

    // A sink added by a reload takes a new position, not b's.
    write_config(
        dir.path(),
        &config(&url, &[("a", ""), ("c", ""), ("d", "")]),
    );
    kill(d.pid(), Signal::SIGHUP).unwrap();
    wait_for("the reload", || d.log().contains("configuration reloaded")).await;
    let fourth = post(&d, 2).await;
    wait_for("d to get the fourth hooks", || sinks.got("d").len() == 2).await;
    wait_for("c to get the fourth hooks", || sinks.got("c").len() == 9).await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let all: Vec<String> = [&first, &second, &third, &fourth]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    assert_eq!(
        sorted(sinks.got("c")),
        sorted(all.clone()),
        "c got each hook once, none of b's again"
    );
    assert_eq!(sorted(sinks.got("a")), sorted(all), "a got each hook once");
    assert_eq!(
        sorted(sinks.got("d")),
        sorted(fourth),
        "d got only what came after it"
    );
    assert_eq!(sinks.got("b").len(), 3, "nothing new for the dropped sink");

    // The catalog keeps b as a tombstone: not listed, and d at position 3.
    let list = common::ankusa_json(&[
        "sinks",
        "list",
        "--store",
        d.store.to_str().unwrap(),
        "--json",
    ]);
    let names: Vec<String> = list["sinks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| format!("{}@{}", s["name"].as_str().unwrap_or(""), s["index"]))
        .collect();
    assert_eq!(names, ["a@0", "c@2", "d@3"], "{list}");
    let store = d.store.clone();
    d.stop_clean();
    common::store_check(&store);
}
