//! Routing by event type, end to end (issue 32, item 4): a source that
//! reads the type from the JSON body, sinks that subscribe to patterns, a
//! sink without `events`, a sink that refuses what it gets (so its rows
//! die and the DLQ has typed rows to filter), hooks that match no sink
//! (accepted and counted as unrouted), types refused as unreadable, a
//! batch routed entry by entry, and a reload that changes a subscription
//! live, with its diff audited.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;

use crate::common::{self, ankusa_async, ankusa_json, write_config, Daemon};

/// The `type` of each body each sink path received.
#[derive(Clone, Default)]
struct Sinks(Arc<Mutex<HashMap<String, Vec<String>>>>);

impl Sinks {
    fn got(&self, path: &str) -> Vec<String> {
        let mut v = self
            .0
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .unwrap_or_default();
        v.sort();
        v
    }
}

async fn take(
    State(s): State<Sinks>,
    UrlPath(path): UrlPath<String>,
    body: axum::body::Bytes,
) -> StatusCode {
    let t = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
        .unwrap_or_else(|| "(untyped)".into());
    s.0.lock().unwrap().entry(path.clone()).or_default().push(t);
    if path == "reject" {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    }
}

/// The loopback sink the tests post to: every path records its bodies'
/// types, `/reject` answers 400. Returns its base URL.
async fn start_sinks(sinks: &Sinks) -> String {
    let app = axum::Router::new()
        .route("/{path}", axum::routing::post(take))
        .with_state(sinks.clone());
    common::serve_loopback(app).await
}

fn config(sink: &str, crm_events: &str) -> String {
    format!(
        "[store]\npath = \"store\"\n\n[http]\nlisten = \"127.0.0.1:0\"\n\n[dispatch]\ntick = \"10ms\"\n\n\
         [[sources]]\nid = \"billing\"\ntenant = \"acme\"\nevent_type = {{ json = \"/type\" }}\n\n\
         [[sources.sinks]]\nname = \"ledger\"\nurl = \"{sink}/ledger\"\nevents = [\"invoice.*\"]\n\n\
         [[sources.sinks]]\nname = \"crm\"\nurl = \"{sink}/crm\"\nevents = {crm_events}\n\n\
         [[sources.sinks]]\nname = \"audit\"\nurl = \"{sink}/audit\"\n\n\
         [[sources.sinks]]\nname = \"strict\"\nurl = \"{sink}/reject\"\nevents = [\"invoice.paid\"]\n\n\
         [[sources]]\nid = \"shop\"\ntenant = \"acme\"\nevent_type = {{ header = \"x-event\" }}\n\n\
         [[sources.sinks]]\nname = \"orders\"\nurl = \"{sink}/orders\"\nevents = [\"order.*\"]\n"
    )
}

async fn wait_for(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hooks_go_only_to_the_sinks_that_subscribe_to_their_type() {
    let dir = tempfile::tempdir().unwrap();
    let sinks = Sinks::default();
    let sink = start_sinks(&sinks).await;
    write_config(dir.path(), &config(&sink, "[\"customer.created\"]"));
    let d = Daemon::start(dir.path());
    let c = common::client();
    let post = |body: &'static str| {
        let c = c.clone();
        let url = d.url("billing");
        async move {
            let r = c.post(url).body(body).send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.text().await.unwrap())
        }
    };
    for body in [
        r#"{"type":"invoice.paid"}"#,
        r#"{"type":"invoice.void"}"#,
        r#"{"type":"customer.created"}"#,
        r#"{"type":"order.shipped"}"#,
        r#"{"other":1}"#,
    ] {
        let (status, text) = post(body).await;
        assert_eq!(status, 202, "{body}: {text}");
    }
    for body in [r#"{"type":5}"#, "not json", r#"{"type":"two words"}"#] {
        let (status, text) = post(body).await;
        assert_eq!(status, 400, "{body}: {text}");
        assert!(text.contains("event_type_invalid"), "{text}");
    }
    // A batch: each entry routed on its own.
    let batch = concat!(
        r#"{"body":"{\"type\":\"customer.created\",\"n\":2}"}"#,
        "\n",
        r#"{"body":"{\"type\":\"nobody.wants\"}"}"#,
        "\n",
        r#"{"body":"{\"type\":7}"}"#,
        "\n"
    );
    let r = c
        .post(format!("{}:batch", d.url("billing")))
        .body(batch)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        (v["accepted"].as_u64(), v["refused"].as_u64()),
        (Some(2), Some(1)),
        "{v}"
    );
    assert_eq!(v["results"][2]["error"], "event_type_invalid", "{v}");
    // A header type, on the other source.
    for (t, want) in [("order.paid", 202), ("invoice.paid", 202)] {
        let r = c
            .post(d.url("shop"))
            .header("x-event", t)
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), want);
    }
    let r = c
        .post(d.url("shop"))
        .header("x-event", "a")
        .header("x-event", "b")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "a type header given twice is ambiguous");

    wait_for("the routed deliveries", || {
        sinks.got("audit").len() == 7 && sinks.got("reject").len() == 1
    })
    .await;
    assert_eq!(sinks.got("ledger"), ["invoice.paid", "invoice.void"]);
    assert_eq!(sinks.got("crm"), ["customer.created", "customer.created"]);
    assert_eq!(sinks.got("reject"), ["invoice.paid"]);
    assert_eq!(
        sinks.got("audit"),
        [
            "(untyped)",
            "customer.created",
            "customer.created",
            "invoice.paid",
            "invoice.void",
            "nobody.wants",
            "order.shipped"
        ]
    );
    // shop: order.paid reached orders; invoice.paid (no subscriber) did not.
    wait_for("the header-typed delivery", || {
        sinks.got("orders").len() == 1
    })
    .await;
    let unrouted = common::metric(&c, &d, "ankusa_store_rows_total{transition=\"unrouted\"}").await;
    assert_eq!(unrouted, 1, "only shop's invoice.paid went nowhere");

    // The DLQ holds the strict sink's row, typed, and filters on it.
    let store = dir.path().join("store");
    let store_s = store.to_str().unwrap().to_owned();
    let list = |pattern: &str| {
        ankusa_json(&[
            "dlq",
            "list",
            "--store",
            &store_s,
            "--event-type",
            pattern,
            "--json",
        ])
    };
    let typed = list("invoice.*");
    let entries = typed["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{typed}");
    assert_eq!(entries[0]["event_type"], "invoice.paid");
    assert_eq!(entries[0]["sink_name"], "billing/strict");
    assert!(list("customer.*")["entries"].as_array().unwrap().is_empty());
    let id = entries[0]["hook_id"].as_str().unwrap().to_owned();
    let (code, out, err) = ankusa_async(&["dlq", "show", &id, "--store", &store_s]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("event type   invoice.paid"), "{out}");
    let (code, _, err) = ankusa_async(&[
        "dlq",
        "list",
        "--store",
        &store_s,
        "--event-type",
        "in*voice",
    ])
    .await;
    assert_eq!(code, 2, "a bad pattern is a usage error: {err}");
    assert!(err.contains("may only end a pattern"), "{err}");

    // A reload widens crm's subscription: a new order type reaches it, the
    // diff names the change, and the audit record holds it.
    write_config(
        dir.path(),
        &config(&sink, "[\"customer.created\", \"order.*\"]"),
    );
    let cfg = dir.path().join("ankusa.toml").to_str().unwrap().to_owned();
    let (code, out, err) = ankusa_async(&["config", "reload", "--config", &cfg]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("events [customer.created] -> [customer.created, order.*]"),
        "{out}"
    );
    let (status, _) = post(r#"{"type":"order.refunded"}"#).await;
    assert_eq!(status, 202);
    wait_for("the newly subscribed type", || {
        sinks.got("crm").contains(&"order.refunded".to_owned())
    })
    .await;
    d.stop_clean();
    let s = ankusa_store::Store::open_read_only(&store).unwrap();
    let who = ankusa_ops::access::Principal::local(&ankusa_ops::access::Peer::me());
    let audit = ankusa_ops::jobs::audit_page(&s, &who, None, 100)
        .unwrap()
        .records;
    assert!(
        audit.iter().any(|r| r.action == "config_reload"
            && r.outcome == "done"
            && r.scope.contains("order.*")
            || r.action == "config_reload" && format!("{r:?}").contains("order.*")),
        "{audit:#?}"
    );
    drop(s);
    common::store_check(&store);
}

/// Sinks listed in another order across a restart keep their positions:
/// rows accepted before the restart (dispatch off, so they wait) still
/// reach the sink they were accepted for, found by name in the store's
/// sink catalog. Guard: booting on the file's order sends `x` rows to
/// `ys` and `y` rows to `xs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restart_on_a_reordered_file_keeps_each_sinks_rows() {
    let dir = tempfile::tempdir().unwrap();
    let sinks = Sinks::default();
    let sink = start_sinks(&sinks).await;
    let file = |dispatch: bool, order: [&str; 2]| {
        let mut s = format!(
            "[store]\npath = \"store\"\n\n[http]\nlisten = \"127.0.0.1:0\"\n\n[dispatch]\nenabled = {dispatch}\ntick = \"10ms\"\n\n\
             [[sources]]\nid = \"s\"\nevent_type = {{ json = \"/type\" }}\n\n"
        );
        for name in order {
            let prefix = &name[..1];
            s.push_str(&format!(
                "[[sources.sinks]]\nname = \"{name}\"\nurl = \"{sink}/{name}\"\nevents = [\"{prefix}.*\"]\n\n"
            ));
        }
        s
    };
    write_config(dir.path(), &file(false, ["xs", "ys"]));
    let d = Daemon::start(dir.path());
    let c = common::client();
    for body in [
        r#"{"type":"x.1"}"#,
        r#"{"type":"x.2"}"#,
        r#"{"type":"y.1"}"#,
    ] {
        let r = c.post(d.url("s")).body(body).send().await.unwrap();
        assert_eq!(r.status(), 202);
    }
    d.stop_clean();
    write_config(dir.path(), &file(true, ["ys", "xs"]));
    let d = Daemon::start(dir.path());
    wait_for("the rows accepted before the restart", || {
        sinks.got("xs").len() + sinks.got("ys").len() == 3
    })
    .await;
    assert_eq!(sinks.got("xs"), ["x.1", "x.2"]);
    assert_eq!(sinks.got("ys"), ["y.1"]);
    assert!(
        d.log()
            .contains("lists this source's sinks in another order"),
        "{}",
        d.log_tail(20)
    );
    d.stop_clean();
    common::store_check(&dir.path().join("store"));
}
