//! Backups and restores of a node's store (docs/fleet.md, "When a machine
//! is lost"; docs/cli.md, `store backup` and `store restore`).
//!
//! - `a_backup_beside_a_busy_daemon_restores_every_acknowledged_hook`: with
//!   ingest, dispatch, delivery and a replay job all running, three backups
//!   through the daemon's admin API (`--keep 2`: the oldest is deleted);
//!   the newest, restored into a new directory, passes `store check`, holds
//!   every hook acknowledged before it started that the node still owed or
//!   had dead-lettered (and every delivered one is in it or reached the
//!   sink), carries the node id, and boots a daemon that delivers what it
//!   held and mints no id the original store had minted, after the backup
//!   included.
//! - `retention_counts_only_this_nodes_complete_backups`: on a stopped
//!   store, partial backups a crash left are refused by restore, not
//!   counted, and removed by the next backup; `--keep 2` keeps exactly the
//!   newest two of this node's and touches nothing else in the directory
//!   (another node's backups, a look-alike without the marker, other
//!   files).
//! - `restore_refuses_a_used_target_and_keeps_the_node_identity`: a
//!   non-empty target (exit 2, nothing written) and a running daemon's
//!   store (exit 4) are refused; a daemon configured with another node id
//!   refuses the restored store naming both.
//! - `the_backup_route_is_for_admins_and_refuses_what_it_does_not_understand`:
//!   `POST /v1/admin/node/backup` is 401 without a token, 403 for a tenant
//!   token, 400 for a relative directory, `keep: 0` or an unknown field,
//!   writing nothing; an admin's backup is named after the generated node
//!   id and passes `store check`.

use crate::common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    ankusa, ankusa_json, ankusa_ok, client, config_dispatching, config_with, seq_of, store_check,
    write_config, Daemon,
};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Takes a backup with the command line; its JSON answer.
fn backup(store: &Path, to: &Path, keep: u32) -> serde_json::Value {
    ankusa_json(&[
        "store",
        "backup",
        "--store",
        s(store),
        "--to",
        s(to),
        "--keep",
        &keep.to_string(),
        "--json",
    ])
}

/// The backups (complete or not) and everything else in `dir`, by name.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

/// A sink per class of tenant: `/ok` accepts, `/hold` answers 503 (a retry)
/// until `release` is set, `/gone` refuses for good (410: the DLQ). Every
/// id it accepted is recorded.
struct Sink {
    base: String,
    release: Arc<AtomicBool>,
    accepted: Arc<Mutex<Vec<String>>>,
}

async fn start_sink() -> Sink {
    #[derive(Clone)]
    struct St {
        release: Arc<AtomicBool>,
        accepted: Arc<Mutex<Vec<String>>>,
    }
    let st = St {
        release: Arc::new(AtomicBool::new(false)),
        accepted: Arc::new(Mutex::new(Vec::new())),
    };
    let handler = |class: &'static str| {
        move |axum::extract::State(st): axum::extract::State<St>, headers: axum::http::HeaderMap| async move {
            let id = headers
                .get("ankusa-hook-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let accept = match class {
                "ok" => true,
                "hold" => st.release.load(Ordering::SeqCst),
                _ => false,
            };
            if accept {
                st.accepted.lock().unwrap().push(id);
                axum::http::StatusCode::OK
            } else if class == "hold" {
                axum::http::StatusCode::SERVICE_UNAVAILABLE
            } else {
                axum::http::StatusCode::GONE
            }
        }
    };
    let app = axum::Router::new()
        .route("/ok", axum::routing::post(handler("ok")))
        .route("/hold", axum::routing::post(handler("hold")))
        .route("/gone", axum::routing::post(handler("gone")))
        .with_state(st.clone());
    let base = crate::common::serve_loopback(app).await;
    Sink {
        base,
        release: st.release,
        accepted: st.accepted,
    }
}

/// Three sources, one per class, each with its sink; dispatch on.
fn busy_config(dir: &Path, node: &str, sink: &str) {
    let mut sources = String::new();
    for (class, extra) in [
        ("ok", ""),
        (
            "hold",
            "max_attempts = 100\nbackoff_initial = \"50ms\"\nbackoff_max = \"1s\"\n",
        ),
        ("gone", "max_attempts = 1\n"),
    ] {
        sources.push_str(&format!(
            "[[sources]]\nid = \"{class}\"\ntenant_header = \"x-tenant\"\n[[sources.sinks]]\nurl = \"{sink}/{class}\"\n{extra}\n"
        ));
    }
    write_config(
        dir,
        &config_dispatching(
            "tick = \"20ms\"\nreclaim_interval = \"50ms\"",
            &format!("[node]\nid = \"{node}\"\n"),
            &sources,
        ),
    );
}

const CLASSES: [&str; 3] = ["ok", "hold", "gone"];

/// Posts round robin over the classes and 4 tenants each until `stop`;
/// every acknowledged id is pushed with its class.
async fn load(base: String, acked: Arc<Mutex<Vec<(&'static str, String)>>>, stop: Arc<AtomicBool>) {
    let c = client();
    let mut i = 0usize;
    while !stop.load(Ordering::SeqCst) {
        let class = CLASSES[i % 3];
        let r = c
            .post(format!("{base}/v1/sources/{class}/hooks"))
            .header("x-tenant", format!("{class}-{}", (i / 3) % 4))
            .body(format!("{{\"i\":{i}}}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202, "ingest refused a hook");
        let v: serde_json::Value = r.json().await.unwrap();
        acked
            .lock()
            .unwrap()
            .push((class, v["id"].as_str().unwrap().to_owned()));
        i += 1;
    }
}

async fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_beside_a_busy_daemon_restores_every_acknowledged_hook() {
    let sink = start_sink().await;
    let dir = tempfile::tempdir().unwrap();
    busy_config(dir.path(), "eu-1", &sink.base);
    let d = Daemon::start(dir.path());
    let store = d.store.clone();
    let backups = dir.path().join("backups");
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let loader = tokio::spawn(load(d.base.clone(), acked.clone(), stop.clone()));
    wait_for("a load under way", Duration::from_secs(60), || {
        acked.lock().unwrap().len() >= 150
    })
    .await;
    // A job as well: the dead rows of one tenant replayed (they die again).
    let st = store.clone();
    let replay = tokio::task::spawn_blocking(move || {
        ankusa_ok(&[
            "dlq",
            "replay",
            "--tenant",
            "gone-0",
            "--yes",
            "--store",
            s(&st),
        ])
    });

    let mut taken = Vec::new();
    let mut before_last = Vec::new();
    for n in 0..3 {
        if n == 2 {
            before_last = acked.lock().unwrap().clone();
        }
        let (st, to) = (store.clone(), backups.clone());
        let b = tokio::task::spawn_blocking(move || backup(&st, &to, 2))
            .await
            .unwrap();
        assert_eq!(b["node"].as_str(), Some("eu-1"), "{b}");
        taken.push(b);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let more = acked.lock().unwrap().len();
    wait_for(
        "hooks acknowledged after the last backup",
        Duration::from_secs(60),
        || acked.lock().unwrap().len() >= more + 30,
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    loader.await.unwrap();
    replay.await.unwrap();
    d.stop_clean();
    store_check(&store);

    // --keep 2: the first backup went when the third was taken.
    let name = |b: &serde_json::Value| b["name"].as_str().unwrap().to_owned();
    assert_eq!(names(&backups), vec![name(&taken[1]), name(&taken[2])]);
    assert_eq!(taken[2]["removed"], serde_json::json!([name(&taken[0])]));
    assert_eq!(backup_audits(&store), 3, "each backup audited");

    // Restore the newest into a new directory.
    let home = tempfile::tempdir().unwrap();
    let restored = home.path().join("store");
    let from = taken[2]["path"].as_str().unwrap().to_owned();
    let r = ankusa_json(&[
        "store",
        "restore",
        "--from",
        &from,
        "--store",
        s(&restored),
        "--json",
    ]);
    assert_eq!(r["node"].as_str(), Some("eu-1"), "{r}");
    store_check(&restored);
    let seen: HashSet<String> = sink.accepted.lock().unwrap().iter().cloned().collect();
    let mut held = Vec::new();
    {
        let s = ankusa_store::Store::open_read_only(&restored).unwrap();
        let mut counted = [0usize; 3];
        for (class, id) in &before_last {
            let there = ankusa_store::queries::hook(&s, seq_of(id))
                .unwrap()
                .is_some();
            match *class {
                // Owed (retrying) or dead: the store keeps the hook.
                "hold" | "gone" => assert!(there, "{class} hook {id} missing from the restore"),
                // Delivered and reclaimed before the backup, or still there.
                _ => assert!(
                    there || seen.contains(id),
                    "{id} is neither in the restore nor at the sink"
                ),
            }
            if *class == "hold" {
                held.push(id.clone());
            }
            counted[CLASSES.iter().position(|c| c == class).unwrap()] += 1;
        }
        assert!(counted.iter().all(|n| *n > 10), "{counted:?}");
        eprintln!(
            "restore: {} hooks acknowledged before the backup ({counted:?} ok/hold/gone), all accounted for; {} acknowledged after it",
            before_last.len(),
            acked.lock().unwrap().len() - before_last.len()
        );
    }

    // The restored store boots as the same node and delivers what it held.
    sink.release.store(true, Ordering::SeqCst);
    busy_config(home.path(), "eu-1", &sink.base);
    let d = Daemon::start(home.path());
    wait_for(
        "the held hooks delivered from the restore",
        Duration::from_secs(60),
        || {
            let seen = sink.accepted.lock().unwrap();
            let seen: HashSet<&String> = seen.iter().collect();
            held.iter().all(|id| seen.contains(id))
        },
    )
    .await;
    let st: serde_json::Value = serde_json::from_str(&ankusa_ok(&[
        "node",
        "status",
        "--store",
        s(&restored),
        "--json",
    ]))
    .unwrap();
    assert_eq!(st["node"].as_str(), Some("eu-1"), "{st}");
    // No id the lost store minted, after the backup too, is minted again.
    let newest = acked
        .lock()
        .unwrap()
        .iter()
        .map(|(_, id)| seq_of(id))
        .max()
        .unwrap();
    let fresh = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let one = tokio::spawn(load(d.base.clone(), fresh.clone(), stop.clone()));
    wait_for(
        "a hook on the restored node",
        Duration::from_secs(30),
        || !fresh.lock().unwrap().is_empty(),
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    one.await.unwrap();
    for (_, id) in fresh.lock().unwrap().iter() {
        assert!(id.starts_with("hk_eu-1_"), "{id}");
        assert!(
            seq_of(id) > newest,
            "{id} reuses a seq the lost store minted"
        );
    }
    d.stop_clean();
    store_check(&restored);
}

/// A store with a node identity and a few hooks, stopped.
fn small_store(dir: &Path, node: &str) -> PathBuf {
    write_config(
        dir,
        &config_with(
            &format!("[node]\nid = \"{node}\"\n"),
            "[[sources]]\nid = \"s\"\ntenant = \"acme\"\n[[sources.sinks]]\nurl = \"http://127.0.0.1:9/\"\n",
        ),
    );
    let d = Daemon::start(dir);
    let raw = |body: &str| {
        common::raw(
            &d.base,
            format!(
                "POST /v1/sources/s/hooks HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
    };
    for i in 0..5 {
        assert_eq!(raw(&format!("{{\"i\":{i}}}")).status, 202);
    }
    let store = d.store.clone();
    d.stop_clean();
    store
}

/// A copy of a directory's files (a backup's, to make look-alikes).
fn copy_dir(from: &Path, to: &Path, skip: &str) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() != skip {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn retention_counts_only_this_nodes_complete_backups() {
    let dir = tempfile::tempdir().unwrap();
    let store = small_store(dir.path(), "eu-1");
    let to = dir.path().join("backups");
    let first = backup(&store, &to, 2);
    let first_path = PathBuf::from(first["path"].as_str().unwrap());
    let first_name = first["name"].as_str().unwrap().to_owned();
    assert!(first_name.starts_with("ankusa-backup-") && first_name.ends_with("-eu-1"));

    // What a crash mid-backup leaves: the checkpoint without its marker
    // under the partial name, or RocksDB's own unfinished `.tmp`.
    let crashed = [
        to.join(".ankusa-backup-20200101T000000.000Z-eu-1.partial"),
        to.join(".ankusa-backup-20200101T000001.000Z-eu-1.partial.tmp"),
    ];
    for c in &crashed {
        copy_dir(&first_path, c, "ANKUSA_BACKUP");
    }
    // Not ours: another node's complete backup (older than all of ours),
    // a look-alike of ours without the marker, a file, a directory.
    let other = to.join("ankusa-backup-20200101T000000.000Z-us-2");
    copy_dir(&first_path, &other, "");
    let lookalike = to.join("ankusa-backup-20200101T000002.000Z-eu-1");
    copy_dir(&first_path, &lookalike, "ANKUSA_BACKUP");
    std::fs::write(to.join("README"), "backups of eu-1 and us-2\n").unwrap();
    std::fs::create_dir(to.join("notes")).unwrap();

    // A partial is not a backup: restore refuses it (exit 2).
    let target = dir.path().join("restored");
    let o = ankusa(&[
        "store",
        "restore",
        "--from",
        s(&crashed[0]),
        "--store",
        s(&target),
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a complete Ankusa backup"));
    assert!(!target.exists());

    let mut ours = vec![first_name];
    let second = backup(&store, &to, 2);
    // The crash's leftovers are removed first and were never counted: the
    // first backup survives a --keep 2 with two partials beside it.
    let mut cleaned: Vec<String> = second["cleaned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    cleaned.sort();
    assert_eq!(
        cleaned,
        crashed
            .iter()
            .map(|c| c.file_name().unwrap().to_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    );
    assert_eq!(second["removed"], serde_json::json!([]));
    ours.push(second["name"].as_str().unwrap().to_owned());
    for _ in 0..3 {
        let b = backup(&store, &to, 2);
        ours.push(b["name"].as_str().unwrap().to_owned());
        assert_eq!(b["removed"].as_array().unwrap().len(), 1, "{b}");
    }
    let mut expect = vec![
        "README".to_owned(),
        other.file_name().unwrap().to_str().unwrap().to_owned(),
        lookalike.file_name().unwrap().to_str().unwrap().to_owned(),
        ours[3].clone(),
        ours[4].clone(),
        "notes".to_owned(),
    ];
    expect.sort();
    assert_eq!(names(&to), expect, "exactly this node's newest two kept");
    assert!(other.join("ANKUSA_BACKUP").is_file());
    // Each kept backup restores into a store that passes the check.
    let o = ankusa_ok(&[
        "store",
        "restore",
        "--from",
        s(&to.join(&ours[4])),
        "--store",
        s(&target),
    ]);
    assert!(o.contains("node eu-1"), "{o}");
    store_check(&target);
    assert_eq!(backup_audits(&store), 5, "each backup audited");
}

/// The store's audit records of backups (a stopped store).
fn backup_audits(store: &Path) -> usize {
    let st = ankusa_store::Store::open_read_only(store).unwrap();
    ankusa_store::audit::page(&st, None, 1000)
        .unwrap()
        .iter()
        .filter(|r| {
            let v: serde_json::Value = serde_json::from_slice(&r.record).unwrap();
            v["action"] == "backup" && v["outcome"] == "done"
        })
        .count()
}

#[test]
fn restore_refuses_a_used_target_and_keeps_the_node_identity() {
    let dir = tempfile::tempdir().unwrap();
    let store = small_store(dir.path(), "eu-1");
    let to = dir.path().join("backups");
    let b = backup(&store, &to, 1);
    let from = b["path"].as_str().unwrap().to_owned();

    // A non-empty target: refused, nothing written.
    let used = dir.path().join("used");
    std::fs::create_dir(&used).unwrap();
    std::fs::write(used.join("keep-me"), "x").unwrap();
    let o = ankusa(&["store", "restore", "--from", &from, "--store", s(&used)]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not empty"));
    assert_eq!(names(&used), vec!["keep-me".to_owned()]);

    // A running daemon's store: refused naming the daemon.
    let d = Daemon::start(dir.path());
    let o = ankusa(&["store", "restore", "--from", &from, "--store", s(&store)]);
    assert_eq!(
        o.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("stop the daemon"));
    d.stop_clean();

    // An empty directory (a freshly mounted volume) takes it; a daemon
    // configured as another node refuses it, naming both ids.
    let other = tempfile::tempdir().unwrap();
    std::fs::create_dir(other.path().join("store")).unwrap();
    ankusa_ok(&[
        "store",
        "restore",
        "--from",
        &from,
        "--store",
        s(&other.path().join("store")),
    ]);
    store_check(&other.path().join("store"));
    write_config(
        other.path(),
        &config_with(
            "[node]\nid = \"eu-2\"\n",
            "[[sources]]\nid = \"s\"\ntenant = \"acme\"\n[[sources.sinks]]\nurl = \"http://127.0.0.1:9/\"\n",
        ),
    );
    let err = match Daemon::try_start(other.path()) {
        Ok(d) => {
            d.stop();
            panic!("a daemon with another node id served the restored store");
        }
        Err(e) => e,
    };
    assert!(err.contains("eu-1") && err.contains("eu-2"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backup_route_is_for_admins_and_refuses_what_it_does_not_understand() {
    use crate::admin_api::{config, Api, ACME, ADMIN};
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    config(dir.path());
    let d = Daemon::start(dir.path());
    let api = Api::new(&d);
    let route = "/v1/admin/node/backup";
    let to = dir.path().join("backups");
    let body = json!({ "to": to, "keep": 3 });
    assert_eq!(api.post(None, route, body.clone()).await.0, 401);
    assert_eq!(api.post(Some(ACME), route, body.clone()).await.0, 403);
    for (bad, code) in [
        (json!({ "to": "backups" }), "bad_request"),
        (json!({ "to": to, "keep": 0 }), "bad_request"),
        (json!({ "to": to, "kept": 3 }), "unknown_field"),
    ] {
        let (status, answer) = api.post(Some(ADMIN), route, bad.clone()).await;
        assert_eq!(
            (status, answer["error"].as_str()),
            (400, Some(code)),
            "{bad}: {answer}"
        );
    }
    assert!(!to.exists(), "a refused backup wrote nothing");
    let (status, done) = api.post(Some(ADMIN), route, body).await;
    assert_eq!(status, 200, "{done}");
    let name = done["name"].as_str().unwrap();
    // No [node] in the config: the id the first boot generated names it.
    assert!(parse_node(name).starts_with('n'), "{done}");
    assert_eq!(names(&to), vec![name.to_owned()]);
    d.stop_clean();
    store_check(&to.join(name));
}

/// The node a backup's name ends with.
fn parse_node(name: &str) -> &str {
    name.rsplit_once("Z-").map_or("", |(_, n)| n)
}
