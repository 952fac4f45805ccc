//! The durability promise under `kill -9`: clients post continuously, the
//! daemon is killed with SIGKILL at random moments several times, and after
//! each kill every hook that was answered `202` is in the store (its
//! envelope and one delivery row per sink) and `ankusa store check` passes.
//! Idempotency keys acknowledged before a crash still answer their
//! original id after it.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use ankusa_store::{queries, Field, Store};
use common::{client, config_with, metric, seq_of, store_check, write_config, Daemon};
use rand::Rng;

const KILLS: usize = 5;
const CLIENTS: usize = 12;
const SINKS: u16 = 2;

const SOURCES: &str = r#"
[[sources]]
id = "crash"
tenant_header = "x-tenant"

[[sources.sinks]]
url = "http://127.0.0.1:9/a"

[[sources.sinks]]
url = "http://127.0.0.1:9/b"
"#;

/// An acknowledged hook: its id, tenant and idempotency key.
#[derive(Debug, Clone)]
struct Acked {
    id: String,
    tenant: String,
    key: String,
}

/// Every acknowledged hook is in the (stopped) store with its rows.
fn verify(store_path: &std::path::Path, acked: &[Acked]) {
    let s = Store::open_read_only(store_path).expect("open stopped store");
    for a in acked {
        let seq = seq_of(&a.id);
        let env = queries::hook(&s, seq).unwrap();
        let env = env.unwrap_or_else(|| panic!("acknowledged hook {} is missing", a.id));
        assert_eq!(env.tenant, a.tenant, "{}", a.id);
        assert_eq!(env.idempotency_key.as_deref(), Some(a.key.as_str()));
        for sink in 0..SINKS {
            assert!(
                queries::delivery(&s, seq, sink).unwrap().is_some(),
                "{} lacks its delivery row for sink {sink}",
                a.id
            );
        }
    }
    let pending = queries::node_counters(&s).unwrap().get(Field::Pending);
    assert!(pending >= (acked.len() as i64) * i64::from(SINKS));
    drop(s);
    store_check(store_path);
}

/// `CLIENTS` clients posting continuously to whichever daemon `base` names
/// (none while it is down), each hook with its own idempotency key and the
/// tenant `tenant(worker, n)`; every `202` is recorded in `acked`. A kill
/// cuts connections: errors and unanswered requests promise nothing.
fn clients(
    base: &Arc<RwLock<Option<String>>>,
    acked: &Arc<Mutex<Vec<Acked>>>,
    done: &Arc<AtomicBool>,
    tenant: fn(usize, u64) -> String,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..CLIENTS)
        .map(|w| {
            let (base, acked, done) = (base.clone(), acked.clone(), done.clone());
            tokio::spawn(async move {
                let c = client();
                let mut n = 0u64;
                while !done.load(Ordering::Relaxed) {
                    let url = base.read().unwrap().clone();
                    let Some(url) = url else {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        continue;
                    };
                    n += 1;
                    let tenant = tenant(w, n);
                    let key = format!("w{w}-n{n}");
                    let r = c
                        .post(format!("{url}/v1/sources/crash/hooks"))
                        .header("x-tenant", &tenant)
                        .header("idempotency-key", &key)
                        .header("content-type", "application/json")
                        .body(format!("{{\"w\":{w},\"n\":{n}}}"))
                        .send()
                        .await;
                    let Ok(r) = r else { continue };
                    if r.status() != 202 {
                        continue;
                    }
                    let Ok(v) = r.json::<serde_json::Value>().await else {
                        continue;
                    };
                    if let Some(id) = v["id"].as_str() {
                        acked.lock().unwrap().push(Acked {
                            id: id.to_owned(),
                            tenant,
                            key,
                        });
                    }
                }
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_acknowledged_hook_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        &config_with("[writer]\nlinger = \"2ms\"", SOURCES),
    );
    let store_path = dir.path().join("store");

    let base: Arc<RwLock<Option<String>>> = Arc::new(RwLock::new(None));
    let acked: Arc<Mutex<Vec<Acked>>> = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(AtomicBool::new(false));
    let workers = clients(&base, &acked, &done, |w, n| {
        format!("tenant-{}", (w as u64 * 7 + n) % 23)
    });

    let mut rng = rand::rng();
    let mut per_kill = Vec::new();
    for kill in 0..KILLS {
        let d = Daemon::start(dir.path());
        *base.write().unwrap() = Some(d.base.clone());
        let before = acked.lock().unwrap().len();
        // Wait for this incarnation to acknowledge something, then a random
        // extra moment, so kills land at different points of the pipeline.
        for _ in 0..2000 {
            if acked.lock().unwrap().len() > before + 20 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..300))).await;
        let status = d.kill9();
        *base.write().unwrap() = None;
        assert!(
            !status.success(),
            "kill {kill}: the daemon was killed, not stopped"
        );
        let snapshot = acked.lock().unwrap().clone();
        per_kill.push(snapshot.len() - before);
        verify(&store_path, &snapshot);
    }
    done.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }

    // One more boot: recovery leaves a consistent store, and every key
    // acknowledged before a crash still answers its original id.
    let d = Daemon::start(dir.path());
    let all = acked.lock().unwrap().clone();
    let c = client();
    for a in all.iter().step_by((all.len() / 40).max(1)) {
        let r = c
            .post(d.url("crash"))
            .header("x-tenant", &a.tenant)
            .header("idempotency-key", &a.key)
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
        let v: serde_json::Value = r.json().await.unwrap();
        assert_eq!(
            v["id"].as_str(),
            Some(a.id.as_str()),
            "{} after a crash",
            a.key
        );
        assert_eq!(v["duplicate"], true);
    }
    d.stop_clean();
    verify(&store_path, &all);
    assert!(
        per_kill.iter().all(|&n| n > 0),
        "every incarnation acknowledged hooks: {per_kill:?}"
    );
    eprintln!(
        "crash test: {KILLS} SIGKILLs, {} acknowledged hooks checked after each kill (per incarnation: {per_kill:?})",
        all.len()
    );
}

/// What the crash loop's sinks answered 2xx to: `(hook id, sink)`.
type Delivered = Arc<Mutex<std::collections::HashSet<(String, u16)>>>;

/// The loop's sinks. Sink 0 fails the first attempt of every third hook
/// (a retry follows); sink 1 refuses every hook of `t-dead` with a 400 (a
/// permanent failure: straight to the DLQ) and takes the rest.
async fn loop_sink(
    axum::extract::State(got): axum::extract::State<Delivered>,
    axum::extract::Path(sink): axum::extract::Path<u16>,
    headers: axum::http::HeaderMap,
) -> axum::http::StatusCode {
    let h = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let id = h("ankusa-hook-id");
    let attempt: u32 = h("ankusa-attempt").parse().unwrap_or(0);
    let fail = match sink {
        0 => attempt <= 1 && seq_of(&id).is_multiple_of(3),
        _ => h("ankusa-tenant") == "t-dead",
    };
    if fail {
        return if sink == 0 {
            axum::http::StatusCode::INTERNAL_SERVER_ERROR
        } else {
            axum::http::StatusCode::BAD_REQUEST
        };
    }
    got.lock().unwrap().insert((id, sink));
    axum::http::StatusCode::OK
}

/// Runs `ankusa` with `args` in the background (an operator's job against
/// the running daemon); its outcome is not checked, a kill may cut it.
fn spawn_cli(args: &[&str]) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_ankusa"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn ankusa")
}

/// The whole promise with everything running: ingest from many clients,
/// dispatch to real loopback sinks (retries and dead letters included), a
/// purge job and a replay job started against every incarnation, and a
/// SIGKILL at a random moment, `ANKUSA_CRASH_KILLS` times (50 by default),
/// with `store check` on the stopped store after every kill (sink 0 retries
/// every third hook, so rows of one hook wait at different times for its
/// two sinks). After the last restart the queue drains, and then every acknowledged hook
/// reached each sink at least once or is in the DLQ (or belonged to the
/// purged tenant); nothing is left due or inflight, and `store check`
/// passes (counters equal a fold, every due row has its marker).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_acknowledged_hook_is_delivered_or_dead_under_a_sigkill_loop() {
    let kills: usize = std::env::var("ANKUSA_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let got: Delivered = Arc::default();
    let app = axum::Router::new()
        .route("/{sink}", axum::routing::post(loop_sink))
        .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sink = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir().unwrap();
    let sinks = format!(
        r#"
[[sources]]
id = "crash"
tenant_header = "x-tenant"

[[sources.sinks]]
url = "{sink}/0"
backoff_initial = "10ms"
backoff_max = "1s"
max_attempts = 5

[[sources.sinks]]
url = "{sink}/1"
backoff_initial = "10ms"
backoff_max = "1s"
max_attempts = 5
"#
    );
    write_config(
        dir.path(),
        &common::config_dispatching(
            "tick = \"5ms\"\nreclaim_interval = \"50ms\"",
            "[writer]\nlinger = \"2ms\"",
            &sinks,
        ),
    );
    let store_path = dir.path().join("store");
    let store_arg = store_path.to_str().unwrap().to_owned();

    let base: Arc<RwLock<Option<String>>> = Arc::new(RwLock::new(None));
    let acked: Arc<Mutex<Vec<Acked>>> = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(AtomicBool::new(false));
    let workers = clients(&base, &acked, &done, |_, n| match n % 10 {
        0 => "t-dead".to_owned(),
        1 => "t-doomed".to_owned(),
        k => format!("t{k}"),
    });

    let mut rng = rand::rng();
    for kill in 0..kills {
        let d = Daemon::start(dir.path());
        *base.write().unwrap() = Some(d.base.clone());
        let mut jobs = vec![
            spawn_cli(&[
                "tenants",
                "purge",
                "t-doomed",
                "--kinds",
                "pending,dead",
                "--yes",
                "--store",
                &store_arg,
            ]),
            spawn_cli(&[
                "dlq", "replay", "--tenant", "t-dead", "--yes", "--store", &store_arg,
            ]),
        ];
        tokio::time::sleep(Duration::from_millis(rng.random_range(20..400))).await;
        let status = d.kill9();
        *base.write().unwrap() = None;
        assert!(!status.success(), "kill {kill}: the daemon was killed");
        for j in &mut jobs {
            let _ = j.kill();
            let _ = j.wait();
        }
        // The stopped store is consistent after every kill, before the next
        // boot could repair or recount anything: a derived count that
        // drifts shows here, at the kill that made it drift.
        common::store_check_when(&store_path, &format!("after kill {kill}"));
    }
    done.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }

    // The last incarnation runs until nothing is due or inflight.
    let d = Daemon::start(dir.path());
    let c = client();
    let started = std::time::Instant::now();
    loop {
        let mut owed = 0;
        for state in ["pending", "scheduled", "inflight"] {
            owed += metric(&c, &d, &format!("ankusa_queue_rows{{state=\"{state}\"}}")).await;
        }
        if owed == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the queue did not drain: {owed} rows still owed:\n{}",
            d.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    d.stop_clean();

    let all = acked.lock().unwrap().clone();
    let s = Store::open_read_only(&store_path).expect("open stopped store");
    let mut dead = std::collections::HashSet::new();
    let mut cursor = None;
    loop {
        let page = queries::dlq_page(&s, cursor, 1000).unwrap();
        dead.extend(page.entries.iter().map(|r| (r.seq, r.sink)));
        match page.next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let got = got.lock().unwrap().clone();
    let (mut delivered, mut dead_rows) = (0u64, 0u64);
    for a in all.iter().filter(|a| a.tenant != "t-doomed") {
        for sink in 0..SINKS {
            if got.contains(&(a.id.clone(), sink)) {
                delivered += 1;
            } else if dead.contains(&(seq_of(&a.id), sink)) {
                dead_rows += 1;
            } else {
                panic!(
                    "acknowledged hook {} ({}) neither reached sink {sink} nor is dead",
                    a.id, a.tenant
                );
            }
        }
    }
    let node = queries::node_counters(&s).unwrap();
    assert_eq!(node.queued() + node.get(Field::Inflight), 0);
    // The operator jobs really ran against the incarnations that were killed.
    let (mut purges, mut replays) = (0, 0);
    for row in ankusa_store::audit::page(&s, None, 100_000).unwrap() {
        let r: serde_json::Value = serde_json::from_slice(&row.record).unwrap();
        match (r["action"].as_str(), r["outcome"].as_str()) {
            (Some("purge"), Some("started")) => purges += 1,
            (Some("replay"), Some("started")) => replays += 1,
            _ => {}
        }
    }
    assert!(
        purges > 0 && replays > 0,
        "purges {purges}, replays {replays}"
    );
    drop(s);
    store_check(&store_path);
    assert!(dead_rows > 0 && delivered > 0);
    eprintln!(
        "crash loop: {kills} SIGKILLs with dispatch running; {purges} purge and {replays} replay jobs started; {} hooks acknowledged; {delivered} rows delivered, {dead_rows} dead",
        all.len()
    );
}

/// One due row whose value no longer decodes (bit rot, a bug of an older
/// release): the dispatcher quarantines it and delivers everything else; it
/// used to fail every tick for every tenant. The quarantined row shows on
/// `/metrics`, and `store check` passes afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_due_row_is_quarantined_and_everything_else_is_delivered() {
    let got: Delivered = Arc::default();
    let app = axum::Router::new()
        .route("/{sink}", axum::routing::post(loop_sink))
        .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sink = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let sources = format!(
        "[[sources]]\nid = \"crash\"\ntenant_header = \"x-tenant\"\n\n[[sources.sinks]]\nurl = \"{sink}/2\"\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("store");

    // Ingest only, then stop.
    write_config(dir.path(), &config_with("", &sources));
    let d = Daemon::start(dir.path());
    let c = client();
    let mut ids = Vec::new();
    for i in 0..40 {
        let r = c
            .post(d.url("crash"))
            .header("x-tenant", if i % 2 == 0 { "a" } else { "b" })
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
        let v: serde_json::Value = r.json().await.unwrap();
        ids.push(v["id"].as_str().unwrap().to_owned());
    }
    d.stop_clean();

    // Corrupt the value of tenant a's first due row.
    let bad_seq = {
        let s = Store::open(&store_path).unwrap();
        let ord = ankusa_store::tenants::ord_of(&s, "a").unwrap().unwrap();
        drop(s);
        let db = common::raw_open(&store_path);
        let index = db.cf_handle("index").unwrap();
        let mut lo = vec![b'D'];
        lo.extend_from_slice(&ord.to_be_bytes());
        let (k, _) = db.prefix_iterator_cf(index, &lo).next().unwrap().unwrap();
        assert_eq!(&k[..5], &lo[..]);
        db.put_cf(index, &k, [0xFF]).unwrap();
        u64::from_be_bytes(k[13..21].try_into().unwrap())
    };

    write_config(
        dir.path(),
        &common::config_dispatching("tick = \"5ms\"", "", &sources),
    );
    let d = Daemon::start(dir.path());
    let started = std::time::Instant::now();
    while got.lock().unwrap().len() < ids.len() - 1 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "only {} of {} delivered:\n{}",
            got.lock().unwrap().len(),
            ids.len() - 1,
            d.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(metric(&c, &d, "ankusa_quarantined_rows").await, 1);
    d.stop_clean();
    let got = got.lock().unwrap().clone();
    for id in &ids {
        let delivered = got.contains(&(id.clone(), 2));
        assert_eq!(delivered, seq_of(id) != bad_seq, "{id}");
    }
    store_check(&store_path);
    let s = Store::open_read_only(&store_path).unwrap();
    assert_eq!(ankusa_store::quarantine::count(&s).unwrap(), 1);
    let (rows, _) = ankusa_store::quarantine::page(&s, None, 10).unwrap();
    assert_eq!(rows.len(), 1);
    assert!(rows[0].reason.contains("due value"), "{}", rows[0].reason);
}
