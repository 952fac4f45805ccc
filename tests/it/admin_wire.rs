//! The admin API's wire format, frozen: every route is called once on a
//! fixture store (seeded, so its rows are the same on every run) and the
//! answers are compared, byte for byte, with `snapshots/admin_wire.snap`.
//!
//! Why: the JSON is written from types that also serve the store and the
//! operator core, so a change there can rename, reorder or drop a field that
//! scripts and the fleet console read. This test fails on any such change;
//! a deliberate one is an update of the snapshot, reviewed with the code.
//!
//! Only what differs between two runs is masked: times, ages, the node id
//! (in ids and names), the temporary directory and sizes on disk. Masking
//! works on the raw text, so the order of fields and the spelling of every
//! value that does not vary stay checked. `/metrics` is text: its `# TYPE`
//! lines (the series and their kinds) are what is frozen there.

use crate::admin_api::{config, fixture, ADMIN, OWN};
use crate::common::{client, Daemon};

use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// The other fixture tenant the calls touch.
const OTHER: &str = "tenant-000002";

struct Wire {
    c: reqwest::Client,
    base: String,
    dir: String,
    doc: String,
}

impl Wire {
    /// One call, recorded in the document: method, path, body, status and
    /// the masked answer. Returns the raw answer for the calls that follow.
    async fn call(
        &mut self,
        method: reqwest::Method,
        token: Option<&str>,
        path: &str,
        body: Option<&str>,
    ) -> (u16, String) {
        let mut r = self
            .c
            .request(method.clone(), format!("{}{path}", self.base));
        if let Some(b) = body {
            r = r
                .header("content-type", "application/json")
                .body(b.to_owned());
        }
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        let resp = r.send().await.expect("admin call");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("admin answer");
        let shown = if path == "/metrics" {
            text.lines()
                .filter(|l| l.starts_with("# TYPE "))
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            mask(&text.replace(&self.dir, "<dir>"))
        };
        let _ = writeln!(
            self.doc,
            "{method} {path}{}{} -> {status}\n{shown}\n",
            body.map_or(String::new(), |b| format!(
                " {}",
                mask(&b.replace(&self.dir, "<dir>"))
            )),
            if token.is_none() { " (no token)" } else { "" },
        );
        (status, text)
    }

    async fn get(&mut self, path: &str) -> (u16, String) {
        self.call(reqwest::Method::GET, Some(ADMIN), path, None)
            .await
    }

    async fn post(&mut self, path: &str, body: &str) -> (u16, String) {
        self.call(reqwest::Method::POST, Some(ADMIN), path, Some(body))
            .await
    }

    /// Waits, unrecorded, until job `id` has left `running`.
    async fn settle(&self, id: u64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let j: serde_json::Value = self
                .c
                .get(format!("{}/v1/admin/jobs/{id}", self.base))
                .bearer_auth(ADMIN)
                .send()
                .await
                .expect("job")
                .json()
                .await
                .expect("job json");
            if j["state"] != "running" {
                return;
            }
            assert!(Instant::now() < deadline, "job {id} still running: {j}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Keys whose numbers differ between runs (clock readings, durations,
/// sizes on disk), by name exactly: a pattern as loose as "contains age"
/// would also have masked a `message` or a `page`.
fn volatile_number(key: &str) -> bool {
    key == "at"
        || key.ends_with("_at")
        || key.ends_with("_ms")
        || key == "since"
        || key == "bytes"
        || key == "files"
        || key == "from"
        || key == "to"
        || key == "pid"
}

/// A string value as it is frozen: the node's part of a hook id, a node id,
/// a time or a backup's stamp masked, anything else as it is.
fn masked_string(key: &str, s: &str) -> String {
    if key == "node" || key == "node_id" {
        return "<node>".into();
    }
    // An audit record's id is its time and a sequence of the process.
    if key == "id" && s.contains('.') {
        return "<audit id>".into();
    }
    let mut out = s.to_owned();
    // Hook ids carry the node: hk_n<8 hex>_<16 hex>.
    while let Some(i) = out.find("hk_n") {
        let end = i + 4 + 8;
        if out.len() < end || !out[i + 4..end].bytes().all(|b| b.is_ascii_hexdigit()) {
            break;
        }
        out.replace_range(i..end, "hk_N<node>");
    }
    if let Some(i) = out.find("ankusa-backup-") {
        out.replace_range(i.., "ankusa-backup-<stamp>-<node>");
    }
    // An RFC 3339 time anywhere in the string (scopes name them).
    let bytes = out.as_bytes();
    let mut i = 0;
    let mut cleaned = String::new();
    while i < bytes.len() {
        let rest = &out[i..];
        let looks = rest.len() >= 20
            && rest.as_bytes()[..4].iter().all(u8::is_ascii_digit)
            && rest.as_bytes()[4] == b'-'
            && rest.as_bytes()[10] == b'T';
        if looks {
            let end = rest.find('Z').map_or(rest.len(), |z| z + 1);
            cleaned.push_str("<time>");
            i += end;
        } else {
            let ch = rest.chars().next().expect("non-empty");
            cleaned.push(ch);
            i += ch.len_utf8();
        }
    }
    // A clock reading inside a page cursor.
    if key != "next" && key != "cursor" {
        return cleaned;
    }
    let mut out = String::new();
    let mut run = String::new();
    for ch in cleaned.chars().chain(std::iter::once('\0')) {
        if ch.is_ascii_digit() {
            run.push(ch);
            continue;
        }
        out.push_str(if run.len() >= 12 { "<ms>" } else { &run });
        run.clear();
        if ch != '\0' {
            out.push(ch);
        }
    }
    out
}

/// Masks what varies in a JSON text, keeping everything else byte for
/// byte: a small scanner that knows which key a value belongs to.
fn mask(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut key = String::new();
    let mut chars = raw.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '"' {
            let mut s = String::new();
            let mut escaped = false;
            for (_, c) in chars.by_ref() {
                if escaped {
                    s.push(c);
                    escaped = false;
                } else if c == '\\' {
                    s.push(c);
                    escaped = true;
                } else if c == '"' {
                    break;
                } else {
                    s.push(c);
                }
            }
            let is_key = raw[i + 1 + s.len()..]
                .trim_start_matches('"')
                .trim_start()
                .starts_with(':');
            if is_key {
                key = s.clone();
                let _ = write!(out, "\"{s}\"");
            } else {
                let _ = write!(out, "\"{}\"", masked_string(&key, &s));
            }
        } else if c == '-' || c.is_ascii_digit() {
            let mut n = c.to_string();
            while let Some(&(_, d)) = chars.peek() {
                if d.is_ascii_digit() || matches!(d, '.' | 'e' | 'E' | '+' | '-') {
                    n.push(d);
                    chars.next();
                } else {
                    break;
                }
            }
            // Twelve digits and more are a clock reading whatever the key
            // (a job's cursor holds one).
            let clock = n.len() >= 12;
            out.push_str(if volatile_number(&key) || clock {
                "0"
            } else {
                &n
            });
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn the_mask_keeps_order_and_masks_only_what_varies() {
    let raw = r#"{"tenant":"t1","rows":3,"created_at":1796152233123,"id":"hk_n0a1b2c3d_0000000000000001","scope":"dead-lettered before 2026-11-29T16:46:46.115Z","node":"n0a1b2c3d"}"#;
    assert_eq!(
        mask(raw),
        r#"{"tenant":"t1","rows":3,"created_at":0,"id":"hk_N<node>_0000000000000001","scope":"dead-lettered before <time>","node":"<node>"}"#
    );
    // A string with an escaped quote is one value, not a key.
    assert_eq!(mask(r#"{"a":"x\":1","b":2}"#), r#"{"a":"x\":1","b":2}"#);
    // Clock readings in cursors and arrays.
    assert_eq!(
        mask(r#"{"next":"1796644208422.248.0","dead_after":[1796644138459,135,0]}"#),
        r#"{"next":"<ms>.248.0","dead_after":[0,135,0]}"#
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_admin_route_answers_as_the_snapshot_says() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), 8, 400);
    config(dir.path());
    let d = Daemon::start(dir.path());
    let mut w = Wire {
        c: client(),
        base: d.admin.clone().expect("admin.listen is set"),
        dir: dir.path().display().to_string(),
        doc: String::new(),
    };
    use reqwest::Method;

    // Reads.
    w.get("/v1/admin/stats").await;
    w.get("/v1/admin/tenants?limit=3").await;
    w.get("/v1/admin/tenants?sort=dead&limit=2").await;
    w.get(&format!("/v1/admin/tenants/{OWN}")).await;
    let (_, page) = w.get("/v1/admin/dlq?limit=2").await;
    let page: serde_json::Value = serde_json::from_str(&page).expect("dlq json");
    let hook = page["entries"][0]["hook_id"]
        .as_str()
        .expect("the fixture has dead rows")
        .to_owned();
    w.get(&format!(
        "/v1/admin/dlq?tenant={OWN}&order=oldest_first&limit=1"
    ))
    .await;
    w.get(&format!("/v1/admin/dlq/{hook}")).await;
    w.get("/v1/admin/node").await;
    w.get("/v1/admin/sinks").await;
    w.get("/v1/admin/pauses").await;
    w.get(&format!("/v1/admin/tenants/{OWN}/policy")).await;
    w.get("/v1/admin/sinks/shop%2F0/limits").await;

    // Dry runs, then the changes (each undone).
    w.post(
        &format!("/v1/admin/tenants/{OTHER}/purge"),
        r#"{"kinds":["pending","dead"],"dry_run":true}"#,
    )
    .await;
    w.post(
        "/v1/admin/replay",
        &format!(r#"{{"tenant":"{OWN}","dry_run":true}}"#),
    )
    .await;
    w.post(
        "/v1/admin/replay",
        &format!(r#"{{"ids":["{hook}"],"dry_run":true}}"#),
    )
    .await;
    w.post("/v1/admin/pauses", &format!(r#"{{"tenant":"{OWN}"}}"#))
        .await;
    w.post("/v1/admin/pauses", r#"{"sink":"shop/0"}"#).await;
    w.get("/v1/admin/pauses").await;
    w.post(
        "/v1/admin/pauses/resume",
        &format!(r#"{{"tenant":"{OWN}"}}"#),
    )
    .await;
    let (_, resumed) = w
        .post("/v1/admin/pauses/resume", r#"{"sink":"shop/0"}"#)
        .await;
    let resumed: serde_json::Value = serde_json::from_str(&resumed).expect("resume json");
    if let Some(id) = resumed["job"]["id"].as_u64() {
        w.settle(id).await;
    }
    w.call(
        Method::PUT,
        Some(ADMIN),
        &format!("/v1/admin/tenants/{OWN}/policy"),
        Some(r#"{"weight":4,"cap":20,"rate":"50/s"}"#),
    )
    .await;
    w.call(
        Method::DELETE,
        Some(ADMIN),
        &format!("/v1/admin/tenants/{OWN}/policy"),
        None,
    )
    .await;
    w.call(
        Method::PUT,
        Some(ADMIN),
        "/v1/admin/sinks/shop%2F0/limits",
        Some(r#"{"max_in_flight":3,"rate":"20/s"}"#),
    )
    .await;
    w.call(
        Method::DELETE,
        Some(ADMIN),
        "/v1/admin/sinks/shop%2F0/limits",
        None,
    )
    .await;
    w.post("/v1/admin/node/drain", "{}").await;
    w.get("/v1/admin/node").await;
    w.post("/v1/admin/node/undrain", "{}").await;

    // A real purge: its job, then the jobs list.
    let (_, job) = w
        .post(
            &format!("/v1/admin/tenants/{OTHER}/purge"),
            r#"{"kinds":["dead"]}"#,
        )
        .await;
    let job: serde_json::Value = serde_json::from_str(&job).expect("job json");
    let id = job["id"].as_u64().expect("a purge answers its job");
    w.settle(id).await;
    w.get(&format!("/v1/admin/jobs/{id}")).await;
    w.get("/v1/admin/jobs").await;

    // The configuration, a backup, the history and the audit log.
    let text = std::fs::read_to_string(dir.path().join("ankusa.toml")).expect("config");
    w.post(
        "/v1/admin/config:check",
        &serde_json::json!({ "text": text }).to_string(),
    )
    .await;
    w.post(
        "/v1/admin/config:check",
        &serde_json::json!({ "text": text.replace("[[sources]]", "[[sources]]\nbogus = 1") })
            .to_string(),
    )
    .await;
    w.post("/v1/admin/config:reload", "{}").await;
    let backups = dir.path().join("backups");
    w.post(
        "/v1/admin/node/backup",
        &serde_json::json!({ "to": backups, "keep": 2 }).to_string(),
    )
    .await;
    w.get("/v1/admin/history").await;
    w.get("/v1/admin/audit?limit=50").await;

    // Refusals: their shape is part of the format too.
    w.get("/v1/admin/tenants/nobody-at-all").await;
    w.post("/v1/admin/node/drain", r#"{"x":1}"#).await;
    w.post("/v1/admin/pauses", "{}").await;
    w.call(Method::GET, None, "/v1/admin/stats", None).await;
    w.call(
        Method::GET,
        Some("not-a-token-at-all"),
        "/v1/admin/stats",
        None,
    )
    .await;

    // The metrics' series.
    w.get("/metrics").await;

    d.stop_clean();
    insta::with_settings!({
        snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"),
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!("admin_wire", w.doc);
    });
}
