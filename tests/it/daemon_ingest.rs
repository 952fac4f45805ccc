//! End to end: the real `ankusa serve` binary on a loopback port with a
//! real store. Each test posts over HTTP, stops the daemon, and reads the
//! store read-only to see exactly what was committed.

use crate::common;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::time::Duration;

use ankusa_store::{queries, tenants, Field, Store};
use common::{client, config_with, raw_http, seq_of, store_check, write_config, Daemon};
use serde_json::Value;

const SHOP_AND_SHARED: &str = r#"
[[sources]]
id = "shop"
tenant = "acme"
token = "shop-token-123"

[[sources.sinks]]
url = "http://127.0.0.1:9/a"

[[sources.sinks]]
url = "http://127.0.0.1:9/b"

[[sources]]
id = "shared"
tenant_header = "x-tenant"
max_body = 64

[[sources.sinks]]
url = "http://127.0.0.1:9/c"
"#;

async fn json_of(r: reqwest::Response) -> (u16, reqwest::header::HeaderMap, Value) {
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let body = r.json::<Value>().await.unwrap_or(Value::Null);
    (status, headers, body)
}

fn far_future() -> u64 {
    ankusa_store::system_now_ms() + 3_600_000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_hooks_become_due_rows_under_their_tenant_with_counters_to_match() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &config_with("", SHOP_AND_SHARED));
    let d = Daemon::start(dir.path());
    let c = client();

    let mut shop = Vec::new();
    for i in 0..5 {
        let body = format!("{{\"order\":{i}}}");
        let r = c
            .post(d.url("shop"))
            .bearer_auth("shop-token-123")
            .header("content-type", "application/json")
            .header("webhook-id", format!("msg_{i}"))
            .header("x-not-kept", "zzz")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let (status, headers, v) = json_of(r).await;
        assert_eq!(status, 202, "{v}");
        assert!(headers.get("x-request-id").is_some());
        let id = v["id"].as_str().unwrap().to_owned();
        // The node's generated id (no [node] in this config) and the seq.
        let parsed = ankusa_store::HookId::parse(&id).expect("a hook id");
        assert!(parsed.node.is_some_and(|n| n.starts_with('n')), "{id}");
        assert!(v.get("duplicate").is_none());
        shop.push((id, body));
    }
    let mut shared = Vec::new();
    for (i, t) in ["t1", "t1", "t2", "t1", "t2"].iter().enumerate() {
        let r = c
            .post(d.url("shared"))
            .header("x-tenant", *t)
            .body(vec![b'x'; i + 1])
            .send()
            .await
            .unwrap();
        let (status, _, v) = json_of(r).await;
        assert_eq!(status, 202, "{v}");
        shared.push(v["id"].as_str().unwrap().to_owned());
    }
    let metrics = common::metrics_without_node(&c, &d).await;
    assert!(
        metrics.contains("ankusa_ingest_requests_total{outcome=\"accepted\"} 10"),
        "{metrics}"
    );

    let status = d.stop();
    assert!(status.success(), "graceful stop exits 0: {status}");

    let s = Store::open_read_only(&dir.path().join("store")).unwrap();
    // Ordinals in first-sight order.
    assert_eq!(tenants::ord_of(&s, "acme").unwrap(), Some(1));
    assert_eq!(tenants::ord_of(&s, "t1").unwrap(), Some(2));
    assert_eq!(tenants::ord_of(&s, "t2").unwrap(), Some(3));

    let acme = queries::counters(&s, 1).unwrap();
    let body_bytes: i64 = shop.iter().map(|(_, b)| b.len() as i64).sum();
    assert_eq!(acme.get(Field::Pending), 10, "5 hooks x 2 sinks");
    assert_eq!(acme.get(Field::Bytes), 2 * body_bytes);
    let rows =
        queries::due_for_tenant(&s, 1, far_future(), 0, 1000, u64::MAX, &mut Vec::new()).unwrap();
    assert_eq!(rows.len(), 10);
    let mut pairs: HashSet<(u64, u16)> = HashSet::new();
    for r in &rows {
        assert_eq!(r.ord, 1);
        assert_eq!(r.kind, ankusa_store::Kind::First);
        pairs.insert((r.seq, r.sink));
    }
    for (id, body) in &shop {
        let seq = seq_of(id);
        assert!(
            pairs.contains(&(seq, 0)) && pairs.contains(&(seq, 1)),
            "{id} has a row per sink"
        );
        let env = queries::hook(&s, seq).unwrap().expect("hook stored");
        assert_eq!(env.body, body.as_bytes());
        assert_eq!(env.tenant, "acme");
        assert_eq!(env.source_id, "shop");
        let names: Vec<&str> = env.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["content-type", "webhook-id"],
            "only the kept headers"
        );
        assert_eq!(env.headers[0].1, b"application/json");
    }
    assert_eq!(queries::counters(&s, 2).unwrap().get(Field::Pending), 3);
    assert_eq!(queries::counters(&s, 3).unwrap().get(Field::Pending), 2);
    assert_eq!(
        queries::counters(&s, 2).unwrap().get(Field::Bytes),
        1 + 2 + 4
    );
    let node = queries::node_counters(&s).unwrap();
    assert_eq!(node.get(Field::Pending), 15);
    for id in &shared {
        assert!(queries::delivery(&s, seq_of(id), 0).unwrap().is_some());
    }
    drop(s);
    store_check(&dir.path().join("store"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_idempotency_key_answers_the_original_id() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &config_with("", SHOP_AND_SHARED));
    let d = Daemon::start(dir.path());
    let c = client();
    let post = |tenant: &'static str, key: &'static str| {
        c.post(d.url("shared"))
            .header("x-tenant", tenant)
            .header("idempotency-key", key)
            .body("{}")
            .send()
    };
    let (st, h, first) = json_of(post("a", "order-1").await.unwrap()).await;
    assert_eq!(st, 202);
    assert!(h.get("idempotent-replayed").is_none());
    let (st, h, again) = json_of(post("a", "order-1").await.unwrap()).await;
    assert_eq!(st, 202, "a duplicate is a success");
    assert_eq!(again["id"], first["id"]);
    assert_eq!(again["duplicate"], true);
    assert_eq!(h.get("idempotent-replayed").unwrap(), "true");
    let (_, _, other) = json_of(post("b", "order-1").await.unwrap()).await;
    assert_ne!(other["id"], first["id"], "keys are per tenant");
    assert!(other.get("duplicate").is_none());

    // Many at once with one key: they share batches, and exactly one hook
    // is stored whichever batch each lands in.
    let mut tasks = Vec::new();
    for _ in 0..20 {
        tasks.push(post("a", "order-2"));
    }
    let mut ids = HashSet::new();
    let mut fresh = 0;
    for r in futures_join(tasks).await {
        let (st, _, v) = json_of(r.unwrap()).await;
        assert_eq!(st, 202, "{v}");
        if v.get("duplicate").is_none() {
            fresh += 1;
        }
        ids.insert(v["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(ids.len(), 1, "one id for one key: {ids:?}");
    assert_eq!(fresh, 1, "exactly one request stored the hook");

    d.stop_clean();
    let s = Store::open_read_only(&dir.path().join("store")).unwrap();
    assert_eq!(queries::node_counters(&s).unwrap().get(Field::Pending), 3);
    let now = ankusa_store::system_now_ms();
    let k = queries::dedupe(&s, "a", "order-1", now)
        .unwrap()
        .expect("dedupe entry");
    assert_eq!(
        ankusa_store::HookId(k.seq).public(s.node()),
        first["id"].as_str().unwrap()
    );
    drop(s);
    store_check(&dir.path().join("store"));
}

/// Awaits futures concurrently without a futures crate: spawn each.
async fn futures_join<F, T>(fs: Vec<F>) -> Vec<T>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = fs.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

/// Sends a raw HTTP/1.1 request (for what reqwest will not send: chunked
/// bodies without a length) and returns the status and body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_has_its_status_and_stable_code_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &config_with("", SHOP_AND_SHARED));
    let d = Daemon::start(dir.path());
    let c = client();
    let shop = || c.post(d.url("shop")).bearer_auth("shop-token-123");
    let shared = || c.post(d.url("shared")).header("x-tenant", "t1");
    let cases: Vec<(&str, reqwest::RequestBuilder, u16, &str)> = vec![
        (
            "unknown source",
            c.post(d.url("nope")).body("{}"),
            404,
            "source_unknown",
        ),
        (
            "no token",
            c.post(d.url("shop")).body("{}"),
            401,
            "token_missing",
        ),
        (
            "wrong token",
            c.post(d.url("shop"))
                .bearer_auth("shop-token-124")
                .body("{}"),
            401,
            "token_invalid",
        ),
        (
            "not bearer",
            c.post(d.url("shop"))
                .header("authorization", "Basic c2hvcC10b2tlbi0xMjM=")
                .body("{}"),
            401,
            "token_invalid",
        ),
        (
            "no tenant header",
            c.post(d.url("shared")).body("{}"),
            400,
            "tenant_missing",
        ),
        (
            "tenant too long",
            c.post(d.url("shared"))
                .header("x-tenant", "t".repeat(129))
                .body("{}"),
            400,
            "tenant_invalid",
        ),
        (
            "body over the source's limit",
            shared().body(vec![b'x'; 65]),
            413,
            "body_too_large",
        ),
        (
            "key too long",
            shop().header("idempotency-key", "k".repeat(256)).body("{}"),
            400,
            "idempotency_key_invalid",
        ),
        (
            "blank key",
            shop().header("idempotency-key", "   ").body("{}"),
            400,
            "idempotency_key_invalid",
        ),
        (
            "kept header too long",
            shop().header("content-type", "a".repeat(9000)).body("{}"),
            400,
            "header_invalid",
        ),
    ];
    for (what, req, status, code) in cases {
        let r = req.send().await.unwrap();
        let (st, h, v) = json_of(r).await;
        assert_eq!(st, status, "{what}: {v}");
        assert_eq!(v["error"], code, "{what}");
        assert!(
            v["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{what}"
        );
        assert!(h.get("x-request-id").is_some(), "{what}");
        if status == 401 && code.starts_with("token") {
            assert_eq!(h.get("www-authenticate").unwrap(), "Bearer", "{what}");
        }
    }
    // A chunked body has no Content-Length: the limit applies while reading.
    let mut req = b"POST /v1/sources/shared/hooks HTTP/1.1\r\nhost: x\r\nx-tenant: t1\r\n\
        transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        .to_vec();
    for _ in 0..4 {
        req.extend_from_slice(b"20\r\n");
        req.extend_from_slice(&[b'y'; 32]);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let (st, text) = raw_http(&d.base, &req);
    assert_eq!(st, 413, "{text}");
    assert!(text.contains("\"body_too_large\""), "{text}");

    let (st, _, v) = json_of(c.get(d.url("shop")).send().await.unwrap()).await;
    assert_eq!((st, v["error"].as_str()), (405, Some("method_not_allowed")));
    let (st, _, v) = json_of(c.get(format!("{}/elsewhere", d.base)).send().await.unwrap()).await;
    assert_eq!((st, v["error"].as_str()), (404, Some("not_found")));

    let metrics = common::metrics_without_node(&c, &d).await;
    for (code, n) in [
        ("token_invalid", 2),
        ("body_too_large", 2),
        ("idempotency_key_invalid", 2),
        ("accepted", 0),
    ] {
        let line = format!("ankusa_ingest_requests_total{{outcome=\"{code}\"}} {n}\n");
        assert!(metrics.contains(&line), "{line}in\n{metrics}");
    }

    d.stop_clean();
    let s = Store::open_read_only(&dir.path().join("store")).unwrap();
    assert!(
        queries::node_counters(&s).unwrap().is_zero(),
        "refusals store nothing"
    );
    assert_eq!(tenants::allocated(&s).unwrap(), 0, "not even a tenant");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signatures_are_verified_and_bad_ones_store_nothing() {
    let key = b"0123456789abcdef0123456789abcdef";
    let secret = format!("whsec_{}", {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(key)
    });
    let sources = format!(
        "[[sources]]\nid = \"signed\"\ntenant = \"acme\"\nsigning_secret = \"{secret}\"\nsignature_tolerance = \"2m\"\n\
         [[sources.sinks]]\nurl = \"http://127.0.0.1:9/\"\n"
    );
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &config_with("", &sources));
    let d = Daemon::start(dir.path());
    let c = client();
    let body = br#"{"event":"invoice.paid"}"#;
    let now = common::now_s();
    let send = |id: &str, ts: u64, sig: String, body: &[u8]| {
        c.post(d.url("signed"))
            .header("webhook-id", id)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", sig)
            .body(body.to_vec())
            .send()
    };

    let (st, _, ok) = json_of(
        send("msg_1", now, common::sign(key, "msg_1", now, body), body)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 202, "{ok}");
    // Key rotation: an unknown entry first, the right one second.
    let both = format!(
        "{} {}",
        common::sign(b"an older key, retired", "msg_2", now, body),
        common::sign(key, "msg_2", now, body)
    );
    let (st, _, _) = json_of(send("msg_2", now, both, body).await.unwrap()).await;
    assert_eq!(st, 202);

    let refused = [
        (
            "wrong secret",
            send(
                "msg_3",
                now,
                common::sign(b"not the secret at all", "msg_3", now, body),
                body,
            ),
            "signature_invalid",
        ),
        (
            "tampered body",
            send(
                "msg_4",
                now,
                common::sign(key, "msg_4", now, body),
                b"{\"event\":\"x\"}",
            ),
            "signature_invalid",
        ),
        (
            "other id",
            send("msg_5", now, common::sign(key, "msg_x", now, body), body),
            "signature_invalid",
        ),
        (
            "stale",
            send(
                "msg_6",
                now - 600,
                common::sign(key, "msg_6", now - 600, body),
                body,
            ),
            "signature_stale",
        ),
        (
            "from the future",
            send(
                "msg_7",
                now + 600,
                common::sign(key, "msg_7", now + 600, body),
                body,
            ),
            "signature_stale",
        ),
    ];
    for (what, fut, code) in refused {
        let (st, _, v) = json_of(fut.await.unwrap()).await;
        assert_eq!(st, 401, "{what}: {v}");
        assert_eq!(v["error"], code, "{what}");
    }
    let (st, _, v) = json_of(
        c.post(d.url("signed"))
            .body(body.to_vec())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((st, v["error"].as_str()), (401, Some("signature_missing")));

    d.stop_clean();
    let s = Store::open_read_only(&dir.path().join("store")).unwrap();
    assert_eq!(
        queries::node_counters(&s).unwrap().get(Field::Pending),
        2,
        "only the two valid hooks"
    );
    let env = queries::hook(&s, seq_of(ok["id"].as_str().unwrap()))
        .unwrap()
        .unwrap();
    assert_eq!(env.body, body);
    assert!(env
        .headers
        .iter()
        .any(|(n, v)| n == "webhook-id" && v == b"msg_1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_tenant_past_tenants_max_is_refused_and_existing_ones_never_are() {
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        &config_with(
            "[tenants]\nmax = 2\n\n[writer]\nlinger = \"20ms\"",
            SHOP_AND_SHARED,
        ),
    );
    let d = Daemon::start(dir.path());
    let c = client();
    let post = |t: &str| {
        c.post(d.url("shared"))
            .header("x-tenant", t)
            .body("{}")
            .send()
    };
    assert_eq!(post("a").await.unwrap().status(), 202);
    assert_eq!(post("b").await.unwrap().status(), 202);
    let (st, h, v) = json_of(post("c").await.unwrap()).await;
    assert_eq!(st, 503);
    assert_eq!(v["error"], "tenant_limit");
    assert_eq!(h.get("retry-after").unwrap(), "300");

    // A mixed burst (the linger puts them in shared batches): the refused
    // tenant's hooks are left out, the others commit.
    let mut tasks = Vec::new();
    for i in 0..30 {
        let t = ["a", "c", "b", "d"][i % 4];
        let req = c.post(d.url("shared")).header("x-tenant", t).body("{}");
        tasks.push(async move { (t, req.send().await) });
    }
    for (t, r) in futures_join(tasks).await {
        let (st, _, v) = json_of(r.unwrap()).await;
        match t {
            "a" | "b" => assert_eq!(st, 202, "{t}: {v}"),
            _ => assert_eq!(
                (st, v["error"].as_str()),
                (503, Some("tenant_limit")),
                "{t}"
            ),
        }
    }
    d.stop_clean();
    let s = Store::open_read_only(&dir.path().join("store")).unwrap();
    assert_eq!(tenants::allocated(&s).unwrap(), 2);
    assert!(tenants::ord_of(&s, "c").unwrap().is_none());
    // 2 + 8 a's and 7 b's from the burst.
    assert_eq!(
        queries::node_counters(&s).unwrap().get(Field::Pending),
        2 + 8 + 7
    );
    drop(s);
    store_check(&dir.path().join("store"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_writer_queue_answers_503_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // One hook per synced commit and a queue of one: the writer can take
    // a few hundred requests per second, the burst below is faster.
    let sections = "[writer]\nqueue = 1\nmax_batch = 1\nlinger = \"0ms\"";
    write_config(dir.path(), &config_with(sections, SHOP_AND_SHARED));
    let d = Daemon::start(dir.path());
    let c = client();
    let mut accepted = Vec::new();
    let mut full = 0;
    for round in 0..5 {
        let mut tasks = Vec::new();
        for i in 0..100 {
            let req = c
                .post(d.url("shared"))
                .header("x-tenant", format!("t{}", i % 7))
                .header("idempotency-key", format!("r{round}-{i}"))
                .body("{}");
            tasks.push(req.send());
        }
        for r in futures_join(tasks).await {
            let (st, h, v) = json_of(r.unwrap()).await;
            match st {
                202 => accepted.push(v["id"].as_str().unwrap().to_owned()),
                503 => {
                    assert_eq!(v["error"], "queue_full", "{v}");
                    assert_eq!(h.get("retry-after").unwrap(), "1");
                    full += 1;
                }
                _ => panic!("unexpected {st}: {v}"),
            }
        }
        if full > 0 {
            break;
        }
    }
    assert!(full > 0, "the burst never filled the queue");
    assert!(!accepted.is_empty());
    d.stop_clean();
    let s = Store::open_read_only(&dir.path().join("store")).unwrap();
    for id in &accepted {
        assert!(
            queries::hook(&s, seq_of(id)).unwrap().is_some(),
            "{id} was acknowledged"
        );
    }
    assert_eq!(
        queries::node_counters(&s).unwrap().get(Field::Pending),
        accepted.len() as i64,
        "exactly the acknowledged hooks are stored"
    );
    drop(s);
    store_check(&dir.path().join("store"));
}

/// Reads `ankusa_ingest_requests_in_progress` from `/metrics` (the
/// node's label taken off).
async fn in_progress(c: &reqwest::Client, base: &str) -> i64 {
    let text = c
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let (series, v) = l.rsplit_once(' ')?;
            (ankusa_daemon::without_node(series) == "ankusa_ingest_requests_in_progress")
                .then_some(v)
        })
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_answers_requests_in_flight_then_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &config_with("", SHOP_AND_SHARED));
    let d = Daemon::start(dir.path());
    let c = client();
    // Three requests stopped halfway through their bodies: in flight, for
    // certain, when the signal lands.
    let addr = d.base.trim_start_matches("http://").to_owned();
    let mut held = Vec::new();
    for i in 0..3 {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let head = format!(
            "POST /v1/sources/shared/hooks HTTP/1.1\r\nhost: x\r\nx-tenant: t{i}\r\ncontent-length: 10\r\n\r\n01234"
        );
        s.write_all(head.as_bytes()).unwrap();
        held.push(s);
    }
    while in_progress(&c, &d.base).await < 3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let pid = d.pid();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    // The listener closes at once: new connections are refused...
    let mut refused = false;
    for _ in 0..500 {
        if std::net::TcpStream::connect(&addr).is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(refused, "still accepting connections after SIGTERM");
    // ...while the requests in flight finish and get their real answer.
    let mut ids = Vec::new();
    for mut s in held {
        s.write_all(b"56789").unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        let text = String::from_utf8_lossy(&buf).into_owned();
        assert!(text.starts_with("HTTP/1.1 202"), "{text}");
        let body = text.split("\r\n\r\n").nth(1).unwrap();
        let v: Value = serde_json::from_str(body).unwrap();
        ids.push(v["id"].as_str().unwrap().to_owned());
    }
    let status = d.stop_wait();
    assert!(status.success(), "graceful stop exits 0: {status}");
    let s = Store::open_read_only(&dir.path().join("store")).unwrap();
    for id in &ids {
        let env = queries::hook(&s, seq_of(id))
            .unwrap()
            .expect("answered hook stored");
        assert_eq!(env.body, b"0123456789");
    }
    assert_eq!(queries::node_counters(&s).unwrap().get(Field::Pending), 3);
}

#[test]
fn a_second_daemon_on_the_same_store_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &config_with("", SHOP_AND_SHARED));
    let first = Daemon::start(dir.path());
    let out = std::process::Command::new(common::BIN)
        .args(["serve", "--config"])
        .arg(dir.path().join("ankusa.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in use by another process"), "{err}");
    assert!(err.contains(&format!("pid {}", first.pid())), "{err}");
    first.stop_clean();
}

#[test]
fn a_config_error_names_the_file_line_and_key_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_with("[writer]\nmax_batch = 0", SHOP_AND_SHARED);
    let line = cfg
        .lines()
        .position(|l| l.starts_with("max_batch"))
        .unwrap()
        + 1;
    write_config(dir.path(), &cfg);
    let out = std::process::Command::new(common::BIN)
        .args(["serve", "--config"])
        .arg(dir.path().join("ankusa.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("at line {line}")), "{err}");
    assert!(
        err.contains("writer.max_batch") && err.contains("between 1 and 65536"),
        "{err}"
    );
    assert!(
        !dir.path().join("store").exists(),
        "nothing is created on a bad config"
    );
}

#[test]
fn boot_returns_inflight_rows_to_due() {
    use ankusa_store::tenants::TenantAllocator;
    use ankusa_store::transitions::{self, IngestHook, SinkSet};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    {
        // A store as a daemon that died mid-delivery leaves it: rows claimed.
        let s = Store::create_or_open(&path).unwrap();
        let mut alloc = TenantAllocator::load(&s, 10).unwrap();
        let mut b = ankusa_store::Batch::new();
        let res = alloc.resolve(&s, ["acme"], &mut b).unwrap();
        let env = ankusa_store::Envelope {
            received_at: 1_000,
            source_id: "shop".into(),
            tenant: "acme".into(),
            idempotency_key: None,
            event_type: None,
            headers: vec![],
            body: b"{}".to_vec(),
        };
        let seq = s.next_seq().unwrap();
        let rows = transitions::ingest(
            &mut b,
            &IngestHook {
                seq,
                ord: res.ord("acme", 10).unwrap(),
                envelope: &env,
                sinks: SinkSet::first(2),
                archive: false,
                dedupe_expires_at: None,
            },
        );
        s.commit(b, true).unwrap();
        alloc.committed(res);
        let mut b = ankusa_store::Batch::new();
        for r in &rows {
            transitions::claim(&mut b, r);
        }
        s.commit(b, true).unwrap();
        assert_eq!(queries::node_counters(&s).unwrap().get(Field::Inflight), 2);
    }
    write_config(dir.path(), &config_with("", SHOP_AND_SHARED));
    let d = Daemon::start(dir.path());
    d.stop_clean();
    let s = Store::open_read_only(&path).unwrap();
    let node = queries::node_counters(&s).unwrap();
    assert_eq!(
        (node.get(Field::Inflight), node.get(Field::Pending)),
        (0, 2)
    );
    drop(s);
    store_check(&path);
}
