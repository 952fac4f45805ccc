//! The durability promise under `kill -9`: clients post continuously, the
//! daemon is killed with SIGKILL at random moments several times, and after
//! each kill every hook that was answered `202` is in the store (its
//! envelope and one delivery row per sink) and `ankusa store check` passes.
//! Idempotency keys acknowledged before a crash still answer their
//! original id after it.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use ankusa_store::{queries, Field, Store};
use common::{client, config_with, seq_of, store_check, write_config, Daemon};
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
    let mut workers = Vec::new();
    for w in 0..CLIENTS {
        let (base, acked, done) = (base.clone(), acked.clone(), done.clone());
        workers.push(tokio::spawn(async move {
            let c = client();
            let mut n = 0u64;
            while !done.load(Ordering::Relaxed) {
                let url = base.read().unwrap().clone();
                let Some(url) = url else {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                n += 1;
                let tenant = format!("tenant-{}", (w as u64 * 7 + n) % 23);
                let key = format!("w{w}-n{n}");
                let r = c
                    .post(format!("{url}/v1/sources/crash/hooks"))
                    .header("x-tenant", &tenant)
                    .header("idempotency-key", &key)
                    .header("content-type", "application/json")
                    .body(format!("{{\"w\":{w},\"n\":{n}}}"))
                    .send()
                    .await;
                // A kill cuts connections: errors and unanswered requests
                // are expected and promise nothing.
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
                        tenant: tenant.clone(),
                        key,
                    });
                }
            }
        }));
    }

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
    assert!(d.stop().success());
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
