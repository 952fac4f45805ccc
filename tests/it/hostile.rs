//! Hostile input against the real daemon over loopback: requests that could
//! be read two ways, look-alike tenant ids, slow clients, connection floods
//! and a too-low open-file limit. Each case asserts the status, the JSON
//! error code (or the documented bare answer of the HTTP layer), that
//! nothing was stored or changed, and that the daemon still serves after.
//!
//! What was tried is listed in docs/delivery.md ("Refusals") and
//! docs/admin-api.md ("Errors"); a case added here belongs there too.

use crate::admin_api::{config as admin_config, fixture, ACME, ADMIN, OWN};
use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use ankusa_store::{queries, tenants, Store};
use common::{client, config_with, raw, write_config, Daemon};
use serde_json::Value;

/// One raw request: what it is, its bytes, and the answer expected.
struct Case {
    what: &'static str,
    request: Vec<u8>,
    status: u16,
    /// `Some(code)`: a JSON refusal with this `error`; `None`: the HTTP
    /// layer's bare answer (documented as such).
    code: Option<&'static str>,
}

fn case(what: &'static str, request: Vec<u8>, status: u16, code: Option<&'static str>) -> Case {
    Case {
        what,
        request,
        status,
        code,
    }
}

/// Runs every case and returns how many answered as expected (all, or it
/// panics with the first that did not).
fn run(base: &str, cases: &[Case]) -> usize {
    for c in cases {
        let a = raw(base, &c.request);
        assert_eq!(a.status, c.status, "{}: {a:?}", c.what);
        match c.code {
            Some(code) => {
                assert!(a.is_json(), "{}: not JSON: {a:?}", c.what);
                assert_eq!(a.code().as_deref(), Some(code), "{}: {a:?}", c.what);
            }
            None => assert!(!a.is_json(), "{}: documented as bare: {a:?}", c.what),
        }
    }
    cases.len()
}

fn admin_get(path: &str, extra: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ADMIN}\r\n{extra}connection: close\r\n\r\n"
    )
    .into_bytes()
}

fn admin_post(path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ADMIN}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_requests_that_could_mean_something_else_are_refused_as_json_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), 8, 4000);
    admin_config(dir.path());
    let d = Daemon::start(dir.path());
    let base = d.admin.clone().expect("admin.listen");
    let c = client();
    let get = |path: String| {
        let c = c.clone();
        let url = format!("{base}{path}");
        async move {
            let r = c.get(url).bearer_auth(ADMIN).send().await.unwrap();
            let st = r.status().as_u16();
            (st, r.json::<Value>().await.unwrap())
        }
    };
    let (_, before) = get("/v1/admin/stats".into()).await;
    let (_, own_before) = get(format!("/v1/admin/tenants/{OWN}")).await;
    assert!(own_before["counters"]["dead"].as_i64().unwrap() > 0);

    let replay = "/v1/admin/replay";
    let purge = format!("/v1/admin/tenants/{OWN}/purge");
    let big = format!(
        "{{\"ids\":[{}]}}",
        vec!["\"hk_0000000000000001\""; 60_000].join(",")
    );
    let cases = vec![
        // 1. A misspelt dry_run must not run the job for real.
        case(
            "replay with dryRun",
            admin_post(replay, &format!("{{\"tenant\":\"{OWN}\",\"dryRun\":true}}")),
            400,
            Some("unknown_field"),
        ),
        case(
            "purge with dryrun",
            admin_post(&purge, "{\"kinds\":[\"pending\"],\"dryrun\":true}"),
            400,
            Some("unknown_field"),
        ),
        case(
            "purge with dry_run in the query",
            admin_post(
                &format!("{purge}?dry_run=true"),
                "{\"kinds\":[\"pending\"]}",
            ),
            400,
            Some("unknown_field"),
        ),
        case(
            "replay with an extra field",
            admin_post(
                replay,
                &format!("{{\"tenant\":\"{OWN}\",\"dry_run\":true,\"force\":1}}"),
            ),
            400,
            Some("unknown_field"),
        ),
        case(
            "tenants with a misspelt limit",
            admin_get("/v1/admin/tenants?limt=5", ""),
            400,
            Some("unknown_field"),
        ),
        case(
            "dlq with another listing's parameter",
            admin_get("/v1/admin/dlq?sort=dead", ""),
            400,
            Some("unknown_field"),
        ),
        case(
            "stats with a query",
            admin_get("/v1/admin/stats?verbose=1", ""),
            400,
            Some("unknown_field"),
        ),
        case(
            "a parameter twice",
            admin_get("/v1/admin/tenants?limit=1&limit=2", ""),
            400,
            Some("bad_request"),
        ),
        case(
            "jobs limit 0",
            admin_get("/v1/admin/jobs?limit=0", ""),
            400,
            Some("bad_request"),
        ),
        case(
            "audit limit 0",
            admin_get("/v1/admin/audit?limit=0", ""),
            400,
            Some("bad_request"),
        ),
        // 4. Refusals as JSON wherever our code can answer.
        case(
            "tenant path not UTF-8",
            admin_get("/v1/admin/tenants/%FF%FE", ""),
            400,
            Some("path_invalid"),
        ),
        case(
            "dlq path not UTF-8",
            admin_get("/v1/admin/dlq/%FF%FE", ""),
            400,
            Some("path_invalid"),
        ),
        case(
            "job path not UTF-8",
            admin_get("/v1/admin/jobs/%FF%FE", ""),
            400,
            Some("path_invalid"),
        ),
        case(
            "purge path not UTF-8",
            admin_post("/v1/admin/tenants/%FF%FE/purge", "{\"kinds\":[\"dead\"]}"),
            400,
            Some("path_invalid"),
        ),
        case(
            "oversize body",
            admin_post(replay, &big),
            413,
            Some("body_too_large"),
        ),
        case(
            "body not JSON",
            admin_post(replay, "tenant=x"),
            400,
            Some("bad_request"),
        ),
        // 5. Look-alike tenant ids are named as invalid, not as missing.
        case(
            "zero-width space",
            admin_get("/v1/admin/tenants/tenant-000004%E2%80%8B", ""),
            400,
            Some("tenant_invalid"),
        ),
        case(
            "bidi override",
            admin_post(
                replay,
                "{\"tenant\":\"\u{202E}400000-tnanet\",\"dry_run\":true}",
            ),
            400,
            Some("tenant_invalid"),
        ),
        // 6. Two credentials: which caller is it?
        case(
            "two Authorization headers, the right one first",
            admin_get("/v1/admin/stats", "authorization: Bearer wrong-token\r\n"),
            400,
            Some("header_ambiguous"),
        ),
        case(
            "two Authorization headers on a destructive route",
            {
                let mut r = admin_post(replay, &format!("{{\"tenant\":\"{OWN}\"}}"));
                let at = r.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
                r.splice(
                    at..at,
                    format!("authorization: Bearer {ACME}\r\n").into_bytes(),
                );
                r
            },
            400,
            Some("header_ambiguous"),
        ),
        // The HTTP layer's own refusal, before our code runs (documented).
        case(
            "a 100 KB query string",
            admin_get(
                &format!("/v1/admin/tenants?cursor={}", "a".repeat(100_000)),
                "",
            ),
            414,
            None,
        ),
    ];
    let n = run(&base, &cases);
    eprintln!("admin: {n} hostile requests refused as documented");

    // Nothing changed: counters, jobs, audit.
    let (_, after) = get("/v1/admin/stats".into()).await;
    assert_eq!(before["node"], after["node"], "node counters changed");
    let (_, own_after) = get(format!("/v1/admin/tenants/{OWN}")).await;
    assert_eq!(own_before["counters"], own_after["counters"]);
    let (st, jobs) = get("/v1/admin/jobs".into()).await;
    assert_eq!(st, 200);
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 0, "{jobs}");
    let (st, audit) = get("/v1/admin/audit".into()).await;
    assert_eq!(st, 200);
    assert_eq!(audit["records"].as_array().unwrap().len(), 0, "{audit}");
    // And the API still serves, including the real thing done right.
    let (st, dry) = {
        let r = c
            .post(format!("{base}{replay}"))
            .bearer_auth(ADMIN)
            .json(&serde_json::json!({"tenant": OWN, "dry_run": true}))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json::<Value>().await.unwrap())
    };
    assert_eq!(st, 200, "{dry}");
    assert_eq!(dry["rows"], own_before["counters"]["dead"], "{dry}");
    d.stop_clean();
}

const SOURCES: &str = r#"
[[sources]]
id = "shop"
tenant_header = "x-tenant"
token = "shop-token-123"

[[sources.sinks]]
url = "http://127.0.0.1:9/a"
"#;

fn hook(extra: &str, body: &str) -> Vec<u8> {
    format!(
        "POST /v1/sources/shop/hooks HTTP/1.1\r\nhost: x\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn good(extra: &str) -> Vec<u8> {
    hook(
        &format!("authorization: Bearer shop-token-123\r\nx-tenant: acme\r\n{extra}"),
        "{}",
    )
}

fn with_tenant(tenant: &str) -> Vec<u8> {
    hook(
        &format!("authorization: Bearer shop-token-123\r\nx-tenant: {tenant}\r\n"),
        "{}",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_requests_that_could_mean_something_else_are_refused_and_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &config_with("", SOURCES));
    let d = Daemon::start(dir.path());
    let mut cases = vec![
        // 5. Look-alike tenant ids.
        case(
            "zero-width space",
            with_tenant("acme\u{200B}"),
            400,
            Some("tenant_invalid"),
        ),
        case(
            "right-to-left override",
            with_tenant("\u{202E}emca"),
            400,
            Some("tenant_invalid"),
        ),
        case(
            "byte order mark",
            with_tenant("\u{FEFF}acme"),
            400,
            Some("tenant_invalid"),
        ),
        case(
            "no-break space",
            with_tenant("ac\u{A0}me"),
            400,
            Some("tenant_invalid"),
        ),
        case(
            "decomposed accent (not NFC)",
            with_tenant("cafe\u{301}"),
            400,
            Some("tenant_invalid"),
        ),
        case(
            "C1 control",
            with_tenant("acme\u{85}"),
            400,
            Some("tenant_invalid"),
        ),
        case("tab", with_tenant("ac\tme"), 400, Some("tenant_invalid")),
        case(
            "not UTF-8",
            {
                let mut r = with_tenant("acme");
                let at = r.windows(4).position(|w| w == b"acme").unwrap();
                r[at + 3] = 0xFF;
                r
            },
            400,
            Some("tenant_invalid"),
        ),
        // 6. Headers that must appear once.
        case(
            "two tenant headers",
            good("x-tenant: evil\r\n"),
            400,
            Some("header_ambiguous"),
        ),
        case(
            "two Authorization headers, the right one first",
            good("authorization: Bearer wrong\r\n"),
            400,
            Some("header_ambiguous"),
        ),
        case(
            "two idempotency keys",
            good("idempotency-key: a\r\nidempotency-key: b\r\n"),
            400,
            Some("header_ambiguous"),
        ),
        // The request-smuggling shape, in both orders.
        case(
            "Content-Length then Transfer-Encoding",
            b"POST /v1/sources/shop/hooks HTTP/1.1\r\nhost: x\r\nauthorization: Bearer shop-token-123\r\n\
              x-tenant: acme\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
                .to_vec(),
            400,
            Some("header_ambiguous"),
        ),
        case(
            "Transfer-Encoding then Content-Length",
            b"POST /v1/sources/shop/hooks HTTP/1.1\r\nhost: x\r\nauthorization: Bearer shop-token-123\r\n\
              x-tenant: acme\r\ntransfer-encoding: chunked\r\ncontent-length: 2\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
                .to_vec(),
            400,
            Some("header_ambiguous"),
        ),
    ];
    // What the HTTP layer refuses before our code runs: bare answers, and
    // each documented in docs/delivery.md.
    let bare: Vec<(&'static str, Vec<u8>, u16)> = vec![
        (
            "control character in a header",
            good("x-note: a\x01b\r\n"),
            400,
        ),
        ("bare CR in a header", good("x-note: a\rb\r\n"), 400),
        (
            "header flood",
            good(&"x-flood: 1\r\n".repeat(150)),
            431,
        ),
        (
            "Content-Length not a number",
            b"POST /v1/sources/shop/hooks HTTP/1.1\r\nhost: x\r\ncontent-length: abc\r\n\r\n{}"
                .to_vec(),
            400,
        ),
        (
            "two different Content-Lengths",
            b"POST /v1/sources/shop/hooks HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}"
                .to_vec(),
            400,
        ),
        (
            "unknown HTTP version",
            b"POST /v1/sources/shop/hooks HTTP/3.0\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}".to_vec(),
            400,
        ),
        (
            "a 100 KB path",
            format!(
                "POST /v1/sources/{}/hooks HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{{}}",
                "s".repeat(100_000)
            )
            .into_bytes(),
            414,
        ),
    ];
    for (what, request, status) in bare {
        cases.push(case(what, request, status, None));
    }
    let n = run(&d.base, &cases);
    eprintln!("ingest: {n} hostile requests refused as documented");

    // The daemon still serves, and the real thing is accepted: with a
    // length, and chunked alone (a chunked body is not refused; only both
    // framings at once are).
    let ok = raw(&d.base, &good(""));
    assert_eq!(ok.status, 202, "{ok:?}");
    let chunked = raw(
        &d.base,
        b"POST /v1/sources/shop/hooks HTTP/1.1\r\nhost: x\r\nauthorization: Bearer shop-token-123\r\n\
          x-tenant: acme\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    );
    assert_eq!(chunked.status, 202, "{chunked:?}");
    d.stop_clean();
    let s = Store::open_read_only(&dir.path().join("store")).unwrap();
    assert_eq!(
        queries::node_counters(&s).unwrap().pending,
        2,
        "only the two good hooks were stored"
    );
    assert_eq!(tenants::allocated(&s).unwrap(), 1, "only `acme`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_request_heads_are_cut_off_at_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        &config_with("", SOURCES).replacen(
            "listen = \"127.0.0.1:0\"\n",
            "listen = \"127.0.0.1:0\"\nheader_timeout = \"1s\"\n",
            1,
        ),
    );
    let d = Daemon::start(dir.path());
    let addr = d.base.trim_start_matches("http://").to_owned();
    // 50 clients that send one header line a second, and one that sends
    // nothing at all after connecting.
    let mut slow: Vec<TcpStream> = (0..51)
        .map(|_| {
            let s = TcpStream::connect(&addr).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            s
        })
        .collect();
    for s in slow.iter_mut().take(50) {
        s.write_all(b"POST /v1/sources/shop/hooks HTTP/1.1\r\n")
            .unwrap();
    }
    let started = Instant::now();
    let mut closed = vec![false; slow.len()];
    while closed.iter().any(|c| !c) && started.elapsed() < Duration::from_secs(30) {
        for (i, s) in slow.iter_mut().enumerate() {
            if closed[i] {
                continue;
            }
            if i < 50 {
                // Keep dribbling: a header line now and then is not a head.
                let _ = s.write_all(b"x-slow: 1\r\n");
            }
            let mut b = [0u8; 256];
            match s.read(&mut b) {
                Ok(0) => closed[i] = true,
                Ok(_) => closed[i] = true,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => closed[i] = true,
                Err(_) => {}
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let open = closed.iter().filter(|c| !**c).count();
    assert_eq!(
        open,
        0,
        "{open} slow connections still open after {:?}",
        started.elapsed()
    );
    eprintln!("51 slow heads cut off within {:?}", started.elapsed());
    let c = client();
    let m = common::metric(&c, &d, "ankusa_http_header_timeouts_total").await;
    assert!(m >= 51, "{m} header timeouts counted");
    // The node still serves.
    assert_eq!(raw(&d.base, &good("")).status, 202);
    d.stop_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_are_refused_and_the_node_serves_again_when_they_go() {
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        &config_with("", SOURCES).replacen(
            "listen = \"127.0.0.1:0\"\n",
            "listen = \"127.0.0.1:0\"\nmax_connections = 20\n",
            1,
        ),
    );
    let d = Daemon::start(dir.path());
    let addr = d.base.trim_start_matches("http://").to_owned();
    // Idle half-requests fill the cap.
    let mut idle: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut s = TcpStream::connect(&addr).unwrap();
            s.write_all(b"POST /v1/sources/shop/hooks HTTP/1.1\r\n")
                .unwrap();
            s
        })
        .collect();
    // Let the daemon accept them all before the next one knocks.
    std::thread::sleep(Duration::from_millis(300));
    let refused = raw(&d.base, &good(""));
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.code().as_deref(), Some("connections_full"));
    assert!(refused.head.contains("retry-after: 1"), "{refused:?}");
    // 300 more: every one refused at once, none hangs.
    let started = Instant::now();
    for _ in 0..300 {
        let a = raw(&d.base, &good(""));
        assert_eq!(a.status, 503, "{a:?}");
    }
    eprintln!(
        "300 connections past the cap refused in {:?}",
        started.elapsed()
    );
    idle.clear();
    // Once the idle ones are gone, hooks are accepted again.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let a = raw(&d.base, &good(""));
        if a.status == 202 {
            break;
        }
        assert!(Instant::now() < deadline, "still refused: {a:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let c = client();
    let n = common::metric(&c, &d, "ankusa_http_connections_refused_total").await;
    assert!(n >= 301, "{n}");
    d.stop_clean();
}

#[test]
fn below_the_open_file_minimum_the_daemon_refuses_to_start_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &config_with("", SOURCES));
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 600 && exec \"$0\" serve --config \"$1\"")
        .arg(common::BIN)
        .arg(dir.path().join("ankusa.toml"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the daemon started with 600 open files");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(err.contains("open-file limit is 600"), "{err}");
    assert!(err.contains("http.max_connections"), "{err}");
    // The same store starts with a configuration that fits the limit.
    write_config(
        dir.path(),
        &config_with("", SOURCES).replacen(
            "listen = \"127.0.0.1:0\"\n",
            "listen = \"127.0.0.1:0\"\nmax_connections = 100\n",
            1,
        ),
    );
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 1000 && exec \"$0\" serve --config \"$1\"")
        .arg(common::BIN)
        .arg(dir.path().join("ankusa.toml"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut r = std::io::BufReader::new(child.stdout.take().unwrap());
    let _ = std::io::BufRead::read_line(&mut r, &mut line);
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains("listening on"), "{line:?}");
}
