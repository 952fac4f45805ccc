//! The chaos ledger: a real daemon, a loopback sink that misbehaves the way
//! real endpoints do, producers that retry what was not answered with the
//! same `Idempotency-Key`, and (in one variant) a daemon that is killed and
//! frozen. A ledger of every `202` and of every `2xx` the sink sent decides:
//!
//! - every acknowledged hook reached every sink of its source with a `2xx`
//!   at least once, except where the configuration calls for a dead letter
//!   (a redirect: not followed, permanent);
//! - nothing else is dead;
//! - `store check` passes after every kill and at the end;
//! - every duplicate (a second `2xx` for one hook and sink) has its first
//!   `2xx` inside a kill's or a freeze's window; without kills or freezes
//!   there are none.
//!
//! It prints the duplicate rate and the first-delivery latency of the light
//! tenants and the flood. `ANKUSA_CHAOS_SECS` makes a longer run (figures in
//! docs/testing.md); the default is a short run for `make test`.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use ankusa_store::{queries, Store};
use common::{metric, seq_of, store_check, store_check_when, write_config, Daemon};
use nix::sys::signal::{kill, Signal};
use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The sink's timeout in the daemon's configuration; a hang outlasts it.
const SINK_TIMEOUT: Duration = Duration::from_secs(1);
/// The tenant whose rows sink `b` redirects: dead by configuration.
const MOVED: &str = "t-moved";
/// The tenant that floods; the light ones are `l0`..`l3`.
const FLOOD: &str = "t-flood";

/// What the sink did with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Closes the connection with a reset before any answer.
    Reset,
    /// Answers nothing for longer than the sink timeout, then closes.
    Hang,
    /// `200` at once, then a body of 20 bytes, one every 100 ms.
    Trickle,
    /// `429` with `Retry-After: 1`.
    TooMany,
    /// `503` with `Retry-After: 1`.
    Unavailable,
    /// `301` to another host.
    Redirect,
    /// `200`.
    Ok,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::Reset => "reset",
            Fault::Hang => "hang",
            Fault::Trickle => "trickle",
            Fault::TooMany => "429",
            Fault::Unavailable => "503",
            Fault::Redirect => "301",
            Fault::Ok => "200",
        }
    }
}

/// The fault for an attempt: first attempts of most hooks misbehave in
/// turn (by hook sequence), later ones succeed; sink `b` always redirects
/// the moved tenant.
fn fault_for(seq: u64, attempt: u32, sink: &str, tenant: &str) -> Fault {
    if sink == "b" && tenant == MOVED {
        return Fault::Redirect;
    }
    if attempt > 1 {
        return Fault::Ok;
    }
    match seq % 8 {
        0 => Fault::Reset,
        1 => Fault::Hang,
        2 => Fault::Trickle,
        3 => Fault::TooMany,
        4 => Fault::Unavailable,
        _ => Fault::Ok,
    }
}

/// The sink's ledger: every `2xx` it sent, by `(hook id, sink)`, with when.
#[derive(Default)]
struct SinkLedger {
    ok: HashMap<(String, String), Vec<Instant>>,
    requests: u64,
    faults: HashMap<&'static str, u64>,
}

/// The misbehaving sink: a minimal HTTP/1.1 server on a raw socket (so it
/// can reset, hang and trickle), keep-alive, paths `/a` and `/b`. `down`
/// stops the listener, and every connection closes at its next request
/// without answering it (an answer already being written is finished, so
/// the ledger never counts a `2xx` the daemon could not have read); `up`
/// binds it again on the same address.
struct ChaosSink {
    addr: SocketAddr,
    ledger: Arc<Mutex<SinkLedger>>,
    serving: Mutex<Option<tokio::task::JoinHandle<()>>>,
    down: Arc<AtomicBool>,
}

impl ChaosSink {
    async fn start() -> Arc<ChaosSink> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let sink = Arc::new(ChaosSink {
            addr: listener.local_addr().unwrap(),
            ledger: Arc::default(),
            serving: Mutex::new(None),
            down: Arc::default(),
        });
        sink.serve(listener);
        sink
    }

    fn serve(&self, listener: tokio::net::TcpListener) {
        let (ledger, down) = (self.ledger.clone(), self.down.clone());
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(connection(sock, ledger.clone(), down.clone()));
            }
        });
        *self.serving.lock().unwrap() = Some(task);
    }

    /// The endpoint disappears: no listener, no answer on any connection.
    fn down(&self) {
        self.down.store(true, Ordering::SeqCst);
        if let Some(t) = self.serving.lock().unwrap().take() {
            t.abort();
        }
    }

    /// The endpoint comes back on its address.
    async fn up(&self) {
        let listener = loop {
            match tokio::net::TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        self.down.store(false, Ordering::SeqCst);
        self.serve(listener);
    }
}

fn header<'a>(head: &'a str, name: &str) -> &'a str {
    head.lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then_some(v.trim())
        })
        .unwrap_or("")
}

/// One keep-alive connection: requests until the peer closes or a fault
/// ends it.
async fn connection(
    mut sock: tokio::net::TcpStream,
    ledger: Arc<Mutex<SinkLedger>>,
    down: Arc<AtomicBool>,
) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let len: usize = header(&head, "content-length").parse().unwrap_or(0);
        while buf.len() < head_end + len {
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..head_end + len);
        if down.load(Ordering::SeqCst) {
            return;
        }
        let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
        let sink = path.trim_start_matches('/').to_owned();
        let id = header(&head, "ankusa-hook-id").to_owned();
        let attempt: u32 = header(&head, "ankusa-attempt").parse().unwrap_or(0);
        let tenant = header(&head, "ankusa-tenant").to_owned();
        let fault = fault_for(seq_of(&id), attempt, &sink, &tenant);
        {
            let mut l = ledger.lock().unwrap();
            l.requests += 1;
            *l.faults.entry(fault.name()).or_insert(0) += 1;
        }
        let simple = |status: &str, extra: &str| {
            format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n{extra}\r\n")
        };
        let ok = |ledger: &Arc<Mutex<SinkLedger>>| {
            ledger
                .lock()
                .unwrap()
                .ok
                .entry((id.clone(), sink.clone()))
                .or_default()
                .push(Instant::now());
        };
        match fault {
            Fault::Reset => {
                let _ = sock.set_zero_linger();
                return;
            }
            Fault::Hang => {
                tokio::time::sleep(SINK_TIMEOUT + Duration::from_millis(500)).await;
                return;
            }
            Fault::Trickle => {
                if sock
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 20\r\n\r\n")
                    .await
                    .is_err()
                {
                    return;
                }
                ok(&ledger);
                for _ in 0..20 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if sock.write_all(b"x").await.is_err() {
                        return;
                    }
                }
            }
            Fault::TooMany | Fault::Unavailable | Fault::Redirect | Fault::Ok => {
                let answer = match fault {
                    Fault::TooMany => simple("429 Too Many Requests", "retry-after: 1\r\n"),
                    Fault::Unavailable => simple("503 Service Unavailable", "retry-after: 1\r\n"),
                    Fault::Redirect => simple(
                        "301 Moved Permanently",
                        "location: http://127.0.0.1:9/elsewhere\r\n",
                    ),
                    _ => simple("200 OK", ""),
                };
                if sock.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
                if fault == Fault::Ok {
                    ok(&ledger);
                }
            }
        }
    }
}

/// An acknowledged hook.
#[derive(Debug, Clone)]
struct Acked {
    id: String,
    tenant: String,
    at: Instant,
}

/// Producers: the flood posts back to back, each light tenant every 50 ms.
/// A request that gets no answer (the daemon killed or frozen) is sent
/// again with the same key until it is answered `202`.
fn producers(
    base: &Arc<RwLock<Option<String>>>,
    acked: &Arc<Mutex<Vec<Acked>>>,
    done: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let flood = (FLOOD.to_owned(), Duration::from_millis(2));
    let tenants: Vec<(String, Duration)> = [flood.clone(), flood]
        .into_iter()
        .chain(std::iter::once((
            MOVED.to_owned(),
            Duration::from_millis(100),
        )))
        .chain((0..4).map(|i| (format!("l{i}"), Duration::from_millis(50))))
        .collect();
    tenants
        .into_iter()
        .enumerate()
        .map(|(w, (tenant, pause))| {
            let (base, acked, done) = (base.clone(), acked.clone(), done.clone());
            tokio::spawn(async move {
                let c = reqwest::Client::builder()
                    .timeout(Duration::from_secs(2))
                    .build()
                    .unwrap();
                let mut n = 0u64;
                while !done.load(Ordering::Relaxed) {
                    n += 1;
                    let key = format!("w{w}-n{n}");
                    // Until answered, or the run ends (then it promises nothing).
                    while !done.load(Ordering::Relaxed) {
                        let url = base.read().unwrap().clone();
                        let Some(url) = url else {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            continue;
                        };
                        let r = c
                            .post(format!("{url}/v1/sources/chaos/hooks"))
                            .header("x-tenant", &tenant)
                            .header("idempotency-key", &key)
                            .header("content-type", "application/json")
                            .body(format!("{{\"w\":{w},\"n\":{n}}}"))
                            .send()
                            .await;
                        let id = match r {
                            Ok(r) if r.status() == 202 => r
                                .json::<serde_json::Value>()
                                .await
                                .ok()
                                .and_then(|v| v["id"].as_str().map(str::to_owned)),
                            _ => None,
                        };
                        if let Some(id) = id {
                            acked.lock().unwrap().push(Acked {
                                id,
                                tenant: tenant.clone(),
                                at: Instant::now(),
                            });
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    tokio::time::sleep(pause).await;
                }
            })
        })
        .collect()
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// A run of `secs` seconds: producers throughout, the sink's listener down
/// for `outage` from a third of the way in, and with `daemon_faults` a
/// SIGKILL or a 3 s SIGSTOP every few seconds. Returns the duplicate count.
async fn run(secs: u64, outage: Duration, daemon_faults: bool) -> u64 {
    let sink = ChaosSink::start().await;
    let url = format!("http://{}", sink.addr);
    let dir = tempfile::tempdir().unwrap();
    let sink_conf = |name: &str| {
        format!(
            "[[sources.sinks]]\nname = \"{name}\"\nurl = \"{url}/{name}\"\ntimeout = \"1s\"\nmax_attempts = 100\nbackoff_initial = \"50ms\"\nbackoff_max = \"1s\"\nretry_after_max = \"2s\"\n"
        )
    };
    write_config(
        dir.path(),
        &common::config_dispatching(
            "tick = \"10ms\"\nreclaim_interval = \"100ms\"\ndrain_timeout = \"2s\"",
            "[writer]\nlinger = \"2ms\"",
            &format!(
                "[[sources]]\nid = \"chaos\"\ntenant_header = \"x-tenant\"\n\n{}\n{}",
                sink_conf("a"),
                sink_conf("b")
            ),
        ),
    );
    let store_path = dir.path().join("store");
    let base: Arc<RwLock<Option<String>>> = Arc::new(RwLock::new(None));
    let acked: Arc<Mutex<Vec<Acked>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let mut d = Daemon::start(dir.path());
    *base.write().unwrap() = Some(d.base.clone());
    let workers = producers(&base, &acked, &done);

    let started = Instant::now();
    let run_for = Duration::from_secs(secs);
    let outage_at = run_for / 3;
    let mut outage_done = false;
    // Windows in which a 2xx may not have been recorded: before a kill, or
    // from before a freeze to after it ends (plus the sink timeout, which
    // the frozen daemon's timers may fire on when it wakes).
    let mut windows: Vec<(Instant, Instant)> = Vec::new();
    let (mut kills, mut freezes) = (0u32, 0u32);
    let mut rng = rand::rng();
    while started.elapsed() < run_for {
        tokio::time::sleep(Duration::from_millis(rng.random_range(1500..3500))).await;
        if !outage_done && started.elapsed() >= outage_at {
            outage_done = true;
            sink.down();
            let sink2 = sink.clone();
            tokio::spawn(async move {
                tokio::time::sleep(outage).await;
                sink2.up().await;
            });
        }
        if !daemon_faults || started.elapsed() >= run_for {
            continue;
        }
        if rng.random_bool(0.5) {
            let now = Instant::now();
            *base.write().unwrap() = None;
            let status = d.kill9();
            assert!(!status.success(), "the daemon was killed");
            windows.push((now - Duration::from_secs(3), Instant::now()));
            kills += 1;
            store_check_when(&store_path, &format!("after kill {kills}"));
            d = Daemon::start(dir.path());
            *base.write().unwrap() = Some(d.base.clone());
        } else {
            let from = Instant::now();
            kill(d.pid(), Signal::SIGSTOP).expect("SIGSTOP");
            tokio::time::sleep(Duration::from_secs(3)).await;
            kill(d.pid(), Signal::SIGCONT).expect("SIGCONT");
            windows.push((
                from - Duration::from_secs(3),
                Instant::now() + SINK_TIMEOUT + Duration::from_secs(3),
            ));
            freezes += 1;
        }
    }
    done.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    if !outage_done {
        sink.down();
        tokio::time::sleep(outage).await;
        sink.up().await;
    }

    // The daemon drains everything it owes. The backlog grows with the run
    // (the sink refuses or stalls about a third of the requests), so the
    // bound does too: a 300 s run without daemon faults took 297 s to drain.
    let c = common::client();
    let drain = Instant::now();
    let drain_bound = Duration::from_secs(120.max(2 * secs));
    loop {
        let mut owed = 0;
        for state in ["pending", "scheduled", "inflight"] {
            owed += metric(&c, &d, &format!("ankusa_queue_rows{{state=\"{state}\"}}")).await;
        }
        if owed == 0 {
            break;
        }
        assert!(
            drain.elapsed() < drain_bound,
            "the queue did not drain in {drain_bound:?}: {owed} rows still owed; the daemon's log ends:\n{}",
            d.log_tail(40)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let drained = drain.elapsed();
    d.stop_clean();
    store_check(&store_path);

    // The verdict, from the two ledgers and the stopped store.
    let acked = acked.lock().unwrap().clone();
    let ledger = sink.ledger.lock().unwrap();
    let s = Store::open_read_only(&store_path).expect("open the stopped store");
    let mut dead: HashSet<(u64, u16)> = HashSet::new();
    let mut cursor = None;
    loop {
        let page = queries::dlq_page(&s, cursor, 1000).unwrap();
        dead.extend(page.entries.iter().map(|r| (r.seq, r.sink)));
        match page.next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let mut ids = HashSet::new();
    let (mut light, mut flood) = (Vec::new(), Vec::new());
    let mut expected_dead = 0usize;
    for a in &acked {
        assert!(ids.insert(a.id.clone()), "{} acknowledged twice", a.id);
        for (index, name) in [(0u16, "a"), (1, "b")] {
            let got = ledger.ok.get(&(a.id.clone(), name.to_owned()));
            if a.tenant == MOVED && name == "b" {
                assert!(got.is_none(), "{} was delivered through a redirect", a.id);
                assert!(
                    dead.contains(&(seq_of(&a.id), index)),
                    "{}: a redirect is permanent, the row must be dead",
                    a.id
                );
                expected_dead += 1;
                continue;
            }
            let got = got.unwrap_or_else(|| {
                panic!(
                    "acknowledged hook {} ({}) never reached sink {name} with a 2xx",
                    a.id, a.tenant
                )
            });
            let first = got[0].saturating_duration_since(a.at);
            if a.tenant == FLOOD {
                flood.push(first);
            } else if a.tenant != MOVED {
                light.push(first);
            }
        }
    }
    // Nothing else is dead (a redirected hook the run ended before it was
    // answered may be dead too: it is not in the ledger, but it is moved).
    assert!(dead.len() >= expected_dead);
    for (seq, sink) in &dead {
        let hook = queries::hook(&s, *seq).unwrap();
        let tenant = hook.map(|h| h.tenant).unwrap_or_default();
        assert!(
            *sink == 1 && tenant == MOVED,
            "dead without the configuration calling for it: hook {seq} ({tenant}) at sink {sink}"
        );
    }
    let (mut dups, mut unexplained) = (0u64, Vec::new());
    let mut oks = 0u64;
    for ((id, sink_name), times) in &ledger.ok {
        oks += times.len() as u64;
        for pair in times.windows(2) {
            dups += 1;
            let first = pair[0];
            if !windows
                .iter()
                .any(|(from, to)| first >= *from && first <= *to)
            {
                unexplained.push(format!("{id} at {sink_name}"));
            }
        }
    }
    let rate = if oks == 0 {
        0.0
    } else {
        dups as f64 * 100.0 / oks as f64
    };
    eprintln!(
        "chaos ledger ({secs} s, outage {:?}, {kills} kills, {freezes} freezes): {} hooks acknowledged, {} requests to the sink, faults {:?}; {oks} 2xx, {dups} duplicates ({rate:.2}%), {} unexplained; first delivery light p50 {:?} p99 {:?}, flood p50 {:?} p99 {:?}; drained {drained:?} after the producers stopped",
        outage,
        acked.len(),
        ledger.requests,
        ledger.faults,
        unexplained.len(),
        percentile(&mut light, 0.5),
        percentile(&mut light, 0.99),
        percentile(&mut flood, 0.5),
        percentile(&mut flood, 0.99),
    );
    assert!(
        unexplained.is_empty(),
        "duplicates outside every kill and freeze window: {unexplained:?}"
    );
    assert!(
        acked.len() > 100,
        "the producers got {} hooks in",
        acked.len()
    );
    for f in ["reset", "hang", "trickle", "429", "503", "301", "200"] {
        assert!(
            ledger.faults.get(f).copied().unwrap_or(0) > 0,
            "the sink never played {f}"
        );
    }
    dups
}

fn secs() -> u64 {
    std::env::var("ANKUSA_CHAOS_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

/// The sink misbehaves, the daemon does not: not one duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_acknowledged_hook_survives_a_misbehaving_sink_without_duplicates() {
    let secs = secs();
    let outage = Duration::from_secs(if secs >= 60 { 20 } else { 3 });
    let dups = run(secs, outage, false).await;
    assert_eq!(dups, 0, "duplicates without a kill or a freeze");
}

/// The sink misbehaves and the daemon is killed and frozen: every
/// acknowledged hook still arrives, and every duplicate is explained.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_acknowledged_hook_survives_kills_freezes_and_a_misbehaving_sink() {
    let secs = secs();
    let outage = Duration::from_secs(if secs >= 60 { 20 } else { 3 });
    run(secs, outage, true).await;
}
