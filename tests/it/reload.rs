//! Reloading the configuration of a running daemon under steady load:
//! `SIGHUP` and `ankusa config reload` add a sink and a source, retire and
//! then drop a sink, refuse a broken file and a change that needs a
//! restart, and `ankusa config check` prints the diff first. Through all
//! of it the same process serves, no request is refused, every
//! acknowledged hook reaches the sink that was there from the start, and
//! the store checks clean.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path as UrlPath, State};
use axum::http::HeaderMap;
use nix::sys::signal::{kill, Signal};

use crate::common::{self, write_config, Daemon};

/// Hook ids each sink path received.
#[derive(Clone, Default)]
struct Sinks(Arc<Mutex<HashMap<String, Vec<String>>>>);

impl Sinks {
    fn got(&self, path: &str) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .unwrap_or_default()
    }
}

async fn take(
    State(s): State<Sinks>,
    UrlPath(path): UrlPath<String>,
    h: HeaderMap,
) -> &'static str {
    let id = h
        .get("ankusa-hook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    s.0.lock().unwrap().entry(path).or_default().push(id);
    "ok"
}

async fn start_sinks(s: Sinks) -> String {
    let app = axum::Router::new()
        .route("/{path}", axum::routing::post(take))
        .with_state(s);
    common::serve_loopback(app).await
}

/// The file: `shop` with the given sinks (name, path, extra keys), and
/// `blog` when `blog` is set.
fn config(sink: &str, sinks: &[(&str, &str, &str)], blog: bool, listen: &str) -> String {
    let mut s = format!(
        "[store]\npath = \"store\"\n\n[http]\nlisten = \"{listen}\"\n\n[dispatch]\ntick = \"10ms\"\n\n\
         [[sources]]\nid = \"shop\"\ntenant = \"acme\"\ntoken = \"shop-token-1\"\n\n"
    );
    for (name, path, extra) in sinks {
        s.push_str(&format!(
            "[[sources.sinks]]\nname = \"{name}\"\nurl = \"{sink}/{path}\"\nbackoff_initial = \"10ms\"\n{extra}\n\n"
        ));
    }
    if blog {
        s.push_str(&format!(
            "[[sources]]\nid = \"blog\"\ntenant = \"blogger\"\n\n[[sources.sinks]]\nurl = \"{sink}/blog\"\n\n"
        ));
    }
    s
}

/// Steady load on `shop`: 4 clients posting as fast as the daemon answers.
struct Load {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<String>>>,
    /// Answers other than 202, with their status.
    refused: Arc<Mutex<Vec<String>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(url: String) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let refused = Arc::new(Mutex::new(Vec::new()));
        let tasks = (0..4)
            .map(|_| {
                let (stop, acked, refused, url) =
                    (stop.clone(), acked.clone(), refused.clone(), url.clone());
                tokio::spawn(async move {
                    let c = common::client();
                    while !stop.load(Ordering::Relaxed) {
                        let r = c
                            .post(&url)
                            .bearer_auth("shop-token-1")
                            .header("content-type", "application/json")
                            .body("{\"n\":1}")
                            .send()
                            .await;
                        match r {
                            Ok(r) if r.status() == 202 => {
                                let v: serde_json::Value = r.json().await.unwrap();
                                acked
                                    .lock()
                                    .unwrap()
                                    .push(v["id"].as_str().unwrap().to_owned());
                            }
                            Ok(r) => refused.lock().unwrap().push(format!("{}", r.status())),
                            Err(e) => refused.lock().unwrap().push(e.to_string()),
                        }
                    }
                })
            })
            .collect();
        Load {
            stop,
            acked,
            refused,
            tasks,
        }
    }

    fn acked(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    async fn finish(self) -> (Vec<String>, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await.unwrap();
        }
        let acked = self.acked.lock().unwrap().clone();
        let refused = self.refused.lock().unwrap().clone();
        (acked, refused)
    }
}

async fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `ankusa ARGS` off the runtime's workers; (exit code, stdout, stderr).
async fn run(args: &[&str]) -> (i32, String, String) {
    common::ankusa_async(args).await
}

fn hup(d: &Daemon) {
    kill(d.pid(), Signal::SIGHUP).unwrap();
}

/// Waits until the daemon's log has `n` lines containing `needle`.
async fn wait_log(d: &Daemon, needle: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = d.log().matches(needle).count();
        if got >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no {n}x {needle:?} in the log:\n{}",
            d.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn audit_records(store: &Path) -> Vec<ankusa_ops::model::AuditRecord> {
    let s = ankusa_store::Store::open_read_only(store).unwrap();
    let who = ankusa_ops::access::Principal::local(&ankusa_ops::access::Peer::me());
    ankusa_ops::jobs::audit_page(&s, &who, None, 100)
        .unwrap()
        .records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_daemon_under_load_takes_ten_reloads_without_a_restart_or_a_refused_request() {
    let dir = tempfile::tempdir().unwrap();
    let sinks = Sinks::default();
    let sink = start_sinks(sinks.clone()).await;
    let cfg = dir.path().join("ankusa.toml");
    let cfg_s = cfg.to_str().unwrap().to_owned();
    let edit = |text: String| write_config(dir.path(), &text);
    edit(config(&sink, &[("main", "main", "")], false, "127.0.0.1:0"));
    let d = Daemon::start(dir.path());
    let pid = d.pid();
    // The file's value is compared, not the port bound: keeping `:0` is no
    // change.
    let listen = "127.0.0.1:0";
    let main = [("main", "main", "")];
    let load = Load::start(d.url("shop"));
    wait_for("the first deliveries", Duration::from_secs(20), || {
        sinks.got("main").len() >= 20
    })
    .await;

    // 1. The same file: a reload that changes nothing.
    let (code, out, err) = run(&["config", "reload", "--config", &cfg_s]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("(configuration generation 1): no changes"),
        "{out}"
    );

    // 2. A sink added at the end, checked first: it receives hooks accepted
    // from then on, without a restart.
    let with_audit = [("main", "main", ""), ("audit", "audit", "")];
    edit(config(&sink, &with_audit, false, listen));
    let (code, out, err) = run(&["config", "check", "--config", &cfg_s]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("valid (1 sources, 2 sinks, 0 admin tokens)"),
        "{out}"
    );
    assert!(
        out.contains("a reload would make 1 change") && out.contains("+ sink shop/audit"),
        "{out}"
    );
    hup(&d);
    wait_log(&d, "configuration reloaded", 2).await;
    wait_for(
        "deliveries to the new sink",
        Duration::from_secs(10),
        || sinks.got("audit").len() >= 20,
    )
    .await;

    // 3. A broken file: refused with its line, the old one keeps serving.
    edit(config(&sink, &with_audit, false, listen).replace("tick =", "tikc ="));
    let (code, out, err) = run(&["config", "check", "--config", &cfg_s]).await;
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("line 8") && err.contains("tikc"), "{err}");
    hup(&d);
    wait_log(&d, "configuration reload refused", 1).await;
    let before = sinks.got("audit").len();
    wait_for(
        "deliveries after the refusal",
        Duration::from_secs(10),
        || sinks.got("audit").len() >= before + 20,
    )
    .await;

    // 4. A change that needs a restart is refused by name.
    edit(config(&sink, &with_audit, false, "127.0.0.1:1"));
    let (code, out, err) = run(&["config", "check", "--config", &cfg_s]).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("http.listen changed") && out.contains("restart needed"),
        "{out}"
    );
    let (code, _, err) = run(&["config", "reload", "--config", &cfg_s]).await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("reload refused") && err.contains("http.listen"),
        "{err}"
    );

    // 5. The sinks listed in the other order: each keeps its position (the
    // rows name positions), so main's and audit's hooks still reach them;
    // a sink in another's place is refused. 6. A new source is taken.
    let swapped = [("audit", "audit", ""), ("main", "main", "")];
    edit(config(&sink, &swapped, false, listen));
    let (code, out, err) = run(&["config", "reload", "--config", &cfg_s]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("~ source shop: sinks listed in another order: each keeps its position"),
        "{out}"
    );
    let before = (sinks.got("main").len(), sinks.got("audit").len());
    wait_for(
        "both sinks after the reorder",
        Duration::from_secs(20),
        || sinks.got("main").len() >= before.0 + 20 && sinks.got("audit").len() >= before.1 + 20,
    )
    .await;
    let replaced = [("main", "main", ""), ("other", "other", "")];
    edit(config(&sink, &replaced, false, listen));
    let (code, _, err) = run(&["config", "reload", "--config", &cfg_s]).await;
    assert_eq!(code, 2, "{err}");
    // Another sink where audit was: a new sink at a new position, and
    // audit may not leave (it was not retired, and rows are owed to it).
    assert!(
        err.contains("sink shop/audit is gone from the file")
            && (err.contains("owed to it") || err.contains("was not retired")),
        "{err}"
    );
    edit(config(&sink, &with_audit, true, listen));
    let (code, out, err) = run(&["config", "reload", "--config", &cfg_s]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("+ source blog"), "{out}");
    let r = common::client()
        .post(d.url("blog"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    wait_for("the new source's hook", Duration::from_secs(10), || {
        sinks.got("blog").len() == 1
    })
    .await;

    // 7. The audit sink retired: it takes no new hooks.
    let retired = [("main", "main", ""), ("audit", "audit", "retired = true")];
    edit(config(&sink, &retired, true, listen));
    hup(&d);
    wait_log(&d, "configuration reloaded", 4).await;
    let acked_at_retire = load.acked();
    let main_at_retire = sinks.got("main").len();
    wait_for(
        "hooks accepted after the retirement",
        Duration::from_secs(10),
        || sinks.got("main").len() >= main_at_retire + 200,
    )
    .await;
    let audit_seen: HashSet<String> = sinks.got("audit").into_iter().collect();
    let later: Vec<String> = load.acked.lock().unwrap()[acked_at_retire + 50..].to_vec();
    wait_for("the later hooks at main", Duration::from_secs(10), || {
        let main: HashSet<String> = sinks.got("main").into_iter().collect();
        later.iter().take(100).all(|id| main.contains(id))
    })
    .await;
    assert!(
        later.iter().take(100).all(|id| !audit_seen.contains(id)),
        "a retired sink got a hook accepted after its retirement"
    );

    // 8. Then dropped, once nothing waits for it (until its backlog is
    // delivered the reload is refused, naming the count).
    edit(config(&sink, &main, true, listen));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, out, err) = run(&["config", "reload", "--config", &cfg_s]).await;
        if code == 0 {
            assert!(out.contains("- sink shop/audit"), "{out}");
            break;
        }
        // Rows owed, or a request admitted before the retirement still in
        // flight: both pass.
        assert!(
            err.contains("rows are owed to it") || err.contains("admitted under generation"),
            "{err}"
        );
        assert!(
            Instant::now() < deadline,
            "the retired sink's backlog never drained: {err}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // 9 and 10. A token rotation for the new source, twice.
    let mut with_token = config(&sink, &main, true, listen).replace(
        "tenant = \"blogger\"",
        "tenant = \"blogger\"\ntoken = \"blog-token-1\"",
    );
    edit(with_token.clone());
    hup(&d);
    wait_log(&d, "configuration reloaded", 6).await;
    let c = common::client();
    let post_blog =
        |token: &'static str| c.post(d.url("blog")).bearer_auth(token).body("{}").send();
    assert_eq!(post_blog("blog-token-1").await.unwrap().status(), 202);
    with_token = with_token.replace("blog-token-1", "blog-token-2");
    edit(with_token);
    let (code, out, err) = run(&["config", "reload", "--config", &cfg_s]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("~ source blog: token changed"), "{out}");
    assert!(!out.contains("blog-token"), "a secret was printed: {out}");
    assert_eq!(post_blog("blog-token-1").await.unwrap().status(), 401);
    assert_eq!(post_blog("blog-token-2").await.unwrap().status(), 202);

    let (acked, refused) = load.finish().await;
    assert!(
        refused.is_empty(),
        "requests refused during reloads: {refused:?}"
    );
    assert_eq!(d.pid(), pid, "the same process serves");
    assert!(
        acked.len() > 200,
        "the load was light: {} hooks",
        acked.len()
    );
    wait_for(
        "every acknowledged hook at main",
        Duration::from_secs(30),
        || {
            let main: HashSet<String> = sinks.got("main").into_iter().collect();
            acked.iter().all(|id| main.contains(id))
        },
    )
    .await;
    let sent = load_sent(&acked, &refused);
    d.stop_clean();
    common::store_check(&dir.path().join("store"));
    let audits = audit_records(&dir.path().join("store"));
    let reloads: Vec<_> = audits
        .iter()
        .filter(|r| r.action == "config_reload")
        .collect();
    assert_eq!(
        reloads.iter().filter(|r| r.outcome == "done").count(),
        8,
        "{reloads:#?}"
    );
    assert!(reloads
        .iter()
        .any(|r| r.scope.contains("added sink shop/audit")));
    assert!(reloads
        .iter()
        .any(|r| r.outcome == "failed" && r.scope.contains("tikc")));
    assert!(reloads.iter().any(|r| r.who.name == "signal:SIGHUP"));
    assert!(reloads
        .iter()
        .any(|r| r.outcome == "done" && r.scope.contains("another order")));
    println!(
        "reloads: {} applied, {} refused; {} hooks acknowledged under load of {sent} requests, none refused",
        reloads.iter().filter(|r| r.outcome == "done").count(),
        reloads.iter().filter(|r| r.outcome == "failed").count(),
        acked.len()
    );
}

fn load_sent(acked: &[String], refused: &[String]) -> usize {
    acked.len() + refused.len()
}

fn whsec(key: &[u8]) -> String {
    use base64::Engine as _;
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

/// One delivery as a receiver verifies it: `webhook-id`,
/// `webhook-timestamp`, `webhook-signature` and the body.
type Signed = (String, String, String, Vec<u8>);

/// What a receiver saw, in order.
#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<Signed>>>);

async fn receive(State(r): State<Receiver>, h: HeaderMap, body: axum::body::Bytes) -> &'static str {
    let get = |n: &str| {
        h.get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    r.0.lock().unwrap().push((
        get("webhook-id"),
        get("webhook-timestamp"),
        get("webhook-signature"),
        body.to_vec(),
    ));
    "ok"
}

/// Whether the receiver's last delivery verifies with `key` (any entry of
/// its one header), and how many entries it carried.
fn verifies(r: &Receiver, key: &[u8]) -> (bool, usize) {
    let got = r.0.lock().unwrap();
    let (id, ts, sig, body) = got.last().expect("a delivery").clone();
    let want = common::sign(key, &id, ts.parse().unwrap(), &body);
    let entries: Vec<&str> = sig.split(' ').collect();
    (entries.contains(&want.as_str()), entries.len())
}

/// A rotation done by reload, on both sides. The source moves from secret
/// S1 to S2 with S1 kept until an `expires` two seconds out: requests
/// signed with either are taken, then S1's are refused without another
/// reload. The sink moves from K1 to K2: during the overlap each delivery
/// carries both signatures in its one header, so a receiver holding either
/// key verifies it; after, only K2's. Ingest tokens overlap the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_rotate_by_reload_with_an_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let rx = Receiver::default();
    let app = axum::Router::new()
        .route("/in", axum::routing::post(receive))
        .with_state(rx.clone());
    let sink = format!("{}/in", common::serve_loopback(app).await);
    let (s1, s2) = (
        b"source-secret-one-0123".as_slice(),
        b"source-secret-two-4567".as_slice(),
    );
    let (k1, k2) = (
        b"sink-secret-one-0123456".as_slice(),
        b"sink-secret-two-7890123".as_slice(),
    );
    let file = |source_keys: &str, sink_keys: &str| {
        format!(
            "[store]\npath = \"store\"\n[http]\nlisten = \"127.0.0.1:0\"\n[dispatch]\ntick = \"10ms\"\n\n\
             [[sources]]\nid = \"shop\"\n{source_keys}\n[[sources.sinks]]\nurl = \"{sink}\"\n{sink_keys}\n"
        )
    };
    write_config(
        dir.path(),
        &file(
            &format!(
                "token = \"tok-one-123\"\nsigning_secret = \"{}\"",
                whsec(s1)
            ),
            &format!("signing_secret = \"{}\"", whsec(k1)),
        ),
    );
    let d = Daemon::start(dir.path());
    let c = common::client();
    let post = |key: &'static [u8], token: &'static str| {
        let id = format!("msg_{}", rand_id());
        let ts = common::now_s();
        let body = b"{\"rotate\":true}".to_vec();
        let sig = common::sign(key, &id, ts, &body);
        c.post(d.url("shop"))
            .bearer_auth(token)
            .header("webhook-id", id)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", sig)
            .body(body)
            .send()
    };
    let delivered = |n: usize| {
        let rx = rx.clone();
        async move {
            wait_for("a delivery", Duration::from_secs(10), || {
                rx.0.lock().unwrap().len() >= n
            })
            .await
        }
    };
    assert_eq!(post(s1, "tok-one-123").await.unwrap().status(), 202);
    delivered(1).await;
    assert_eq!(verifies(&rx, k1), (true, 1));

    // The overlap: S2 and T2 added, S1 and T1 kept until two seconds from
    // now; the sink signs with K2 and K1.
    let until =
        humantime::format_rfc3339_seconds(std::time::SystemTime::now() + Duration::from_secs(3));
    write_config(
        dir.path(),
        &file(
            &format!(
                "tokens = [{{ token = \"tok-two-456\" }}, {{ token = \"tok-one-123\", expires = \"{until}\" }}]\n\
                 signing_secrets = [{{ secret = \"{}\" }}, {{ secret = \"{}\", expires = \"{until}\" }}]",
                whsec(s2),
                whsec(s1)
            ),
            &format!(
                "signing_secrets = [{{ secret = \"{}\" }}, {{ secret = \"{}\" }}]",
                whsec(k2),
                whsec(k1)
            ),
        ),
    );
    let cfg = dir.path().join("ankusa.toml");
    let (code, out, err) = run(&["config", "reload", "--config", cfg.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("tokens: 1 added, with a new expiry")
            || out.contains("tokens: 1 added, 1 with a new expiry"),
        "{out}"
    );
    for (key, token) in [
        (s1, "tok-one-123"),
        (s2, "tok-two-456"),
        (s2, "tok-one-123"),
    ] {
        assert_eq!(post(key, token).await.unwrap().status(), 202);
    }
    delivered(4).await;
    assert_eq!(verifies(&rx, k1), (true, 2), "a receiver still on K1");
    assert_eq!(verifies(&rx, k2), (true, 2), "a receiver already on K2");

    // S1 and T1 expire by themselves.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert_eq!(
        post(s1, "tok-two-456").await.unwrap().status(),
        401,
        "an expired secret"
    );
    assert_eq!(
        post(s2, "tok-one-123").await.unwrap().status(),
        401,
        "an expired token"
    );
    assert_eq!(post(s2, "tok-two-456").await.unwrap().status(), 202);

    // The end of the sink's rotation: K1 dropped by a reload.
    write_config(
        dir.path(),
        &file(
            &format!(
                "token = \"tok-two-456\"\nsigning_secret = \"{}\"",
                whsec(s2)
            ),
            &format!("signing_secret = \"{}\"", whsec(k2)),
        ),
    );
    hup(&d);
    wait_log(&d, "configuration reloaded", 2).await;
    assert_eq!(post(s2, "tok-two-456").await.unwrap().status(), 202);
    delivered(6).await;
    assert_eq!(verifies(&rx, k2), (true, 1));
    assert_eq!(verifies(&rx, k1), (false, 1));
    d.stop_clean();
    common::store_check(&dir.path().join("store"));
}

fn rand_id() -> u64 {
    use std::sync::atomic::AtomicU64;
    static N: AtomicU64 = AtomicU64::new(1);
    N.fetch_add(1, Ordering::Relaxed)
}
