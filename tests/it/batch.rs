//! The batch ingest endpoint end to end: one answer per entry, in order,
//! with the single endpoint's codes; every accepted entry in one synced
//! commit; whole-request refusals before any entry is written.

use crate::common;

use ankusa_store::{queries, Store};
use common::{client, config_with, metric, seq_of, write_config, Daemon};
use serde_json::{json, Value};

async fn batch(
    c: &reqwest::Client,
    d: &Daemon,
    source: &str,
    tenant: Option<&str>,
    body: String,
) -> (u16, Value) {
    let mut r = c
        .post(format!("{}/v1/sources/{source}/hooks:batch", d.base))
        .body(body);
    if let Some(t) = tenant {
        r = r.header("x-tenant", t);
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

fn lines(entries: &[Value]) -> String {
    entries.iter().map(|e| format!("{e}\n")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_answers_each_entry_in_order_and_commits_the_accepted_ones_together() {
    let key = b"0123456789abcdef0123456789abcdef";
    let secret = format!("whsec_{}", {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(key)
    });
    let sources = format!(
        "[[sources]]\nid = \"shop\"\ntenant_header = \"X-Tenant\"\nmax_body = 64\nforward_headers = [\"x-event\"]\n\
         [[sources.sinks]]\nurl = \"http://127.0.0.1:9/\"\n[[sources.sinks]]\nurl = \"http://127.0.0.1:9/b\"\n\
         [[sources]]\nid = \"fixed\"\ntenant = \"acme\"\n[[sources.sinks]]\nurl = \"http://127.0.0.1:9/\"\n\
         [[sources]]\nid = \"signed\"\ntenant = \"acme\"\nsigning_secret = \"{secret}\"\n\
         [[sources.sinks]]\nurl = \"http://127.0.0.1:9/\"\n"
    );
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &config_with("", &sources));
    let d = Daemon::start(dir.path());
    let c = client();
    let batches0 = metric(&c, &d, "ankusa_ingest_batches_total").await;
    let body = lines(&[
        json!({"body": "{\"n\":1}", "headers": {"x-event": "order.paid", "x-other": "dropped"}}),
        json!({"tenant": "beta", "body_base64": "AAEC/w==", "idempotency_key": "k-1"}),
        json!({"tenant": "beta", "body": "again", "idempotency_key": "k-1"}),
        json!({"body": "x".repeat(65)}),
        json!({"tenant": "bad\u{0007}tenant", "body": "x"}),
        json!({"body": "a", "body_base64": "YQ=="}),
        json!({"body": "a", "dry_run": true}),
        json!(["not", "an", "object"]),
        json!({"body": "{\"n\":2}", "idempotency_key": ""}),
        json!({"body": "last"}),
    ]) + "{not json\n\n";
    let (status, v) = batch(&c, &d, "shop", Some("acme"), body).await;
    assert_eq!(status, 200, "{v}");
    let r = v["results"].as_array().unwrap();
    let codes: Vec<String> = r
        .iter()
        .map(|e| {
            e["error"]
                .as_str()
                .unwrap_or(e["status"].as_str().unwrap())
                .to_owned()
        })
        .collect();
    assert_eq!(
        codes,
        [
            "accepted",
            "accepted",
            "duplicate",
            "body_too_large",
            "tenant_invalid",
            "entry_invalid",
            "entry_invalid",
            "entry_invalid",
            "idempotency_key_invalid",
            "accepted",
            "entry_invalid"
        ],
        "{v}"
    );
    assert_eq!(
        (
            v["accepted"].as_u64(),
            v["duplicates"].as_u64(),
            v["refused"].as_u64()
        ),
        (Some(3), Some(1), Some(7))
    );
    assert_eq!(
        r[2]["id"], r[1]["id"],
        "a key repeated in the batch names the first hook"
    );
    assert_eq!(r[3]["http_status"], 413);
    // One synced commit for the whole batch.
    assert_eq!(
        metric(&c, &d, "ankusa_ingest_batches_total").await - batches0,
        1
    );
    // The same key in a later batch is a duplicate of the stored hook.
    let (_, v2) = batch(
        &c,
        &d,
        "shop",
        None,
        lines(&[json!({"tenant": "beta", "body": "b", "idempotency_key": "k-1"})]),
    )
    .await;
    assert_eq!(v2["results"][0]["status"], "duplicate");
    assert_eq!(v2["results"][0]["id"], r[1]["id"]);
    // Without a tenant header or field: tenant_missing for that entry only.
    let (_, v3) = batch(
        &c,
        &d,
        "shop",
        None,
        lines(&[json!({"body": "b"}), json!({"tenant": "t3", "body": "c"})]),
    )
    .await;
    assert_eq!(v3["results"][0]["error"], "tenant_missing");
    assert_eq!(v3["results"][1]["status"], "accepted");
    // A fixed-tenant source refuses an entry naming another tenant.
    let (_, v4) = batch(
        &c,
        &d,
        "fixed",
        None,
        lines(&[
            json!({"tenant": "other", "body": "b"}),
            json!({"body": "c"}),
        ]),
    )
    .await;
    assert_eq!(v4["results"][0]["error"], "tenant_invalid");
    assert_eq!(v4["results"][1]["status"], "accepted");
    // Signed entries are verified one by one.
    let ts = common::now_s();
    let good = common::sign(key, "msg_1", ts, b"{\"s\":1}");
    let (_, v5) = batch(&c, &d, "signed", None, lines(&[
        json!({"body": "{\"s\":1}", "webhook_id": "msg_1", "webhook_timestamp": ts.to_string(), "webhook_signature": good}),
        json!({"body": "{\"s\":2}", "webhook_id": "msg_1", "webhook_timestamp": ts.to_string(), "webhook_signature": good}),
        json!({"body": "{\"s\":3}"}),
    ])).await;
    let codes: Vec<&str> = v5["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["error"].as_str().unwrap_or("ok"))
        .collect();
    assert_eq!(
        codes,
        ["ok", "signature_invalid", "signature_missing"],
        "{v5}"
    );
    // Whole-request refusals.
    let many = lines(&vec![json!({"body": "x"}); 1001]);
    let (status, v6) = batch(&c, &d, "shop", Some("acme"), many).await;
    assert_eq!(
        (status, v6["error"].as_str()),
        (413, Some("batch_too_large"))
    );
    let (status, v7) = batch(&c, &d, "nosuch", None, lines(&[json!({"body": "x"})])).await;
    assert_eq!(
        (status, v7["error"].as_str()),
        (404, Some("source_unknown"))
    );
    d.stop();

    // What was written: the accepted entries, with their kept headers and bodies.
    let s = Store::open_read_only(&dir.path().join("store")).unwrap();
    let first = queries::hook(&s, seq_of(r[0]["id"].as_str().unwrap()))
        .unwrap()
        .unwrap();
    assert_eq!(first.tenant, "acme");
    assert_eq!(first.body, b"{\"n\":1}");
    assert!(first
        .headers
        .iter()
        .any(|(n, v)| n == "x-event" && v == b"order.paid"));
    assert!(!first.headers.iter().any(|(n, _)| n == "x-other"));
    let second = queries::hook(&s, seq_of(r[1]["id"].as_str().unwrap()))
        .unwrap()
        .unwrap();
    assert_eq!(
        (second.tenant.as_str(), second.body.as_slice()),
        ("beta", &[0u8, 1, 2, 255][..])
    );
    // 3 + 1 + 1 + 1 hooks, two sinks on shop, one elsewhere.
    let n = queries::node_counters(&s).unwrap();
    assert_eq!(n.pending, 3 * 2 + 2 + 1 + 1);
    drop(s);
    common::store_check(&dir.path().join("store"));
}
