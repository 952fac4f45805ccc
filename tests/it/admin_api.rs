//! The admin API end to end: the real daemon on a real store, over loopback
//! TCP (tokens) and its unix socket (through the `ankusa` command line).
//!
//! Security cases refuse and touch nothing; dry runs count exactly what the
//! real runs touch; a purge killed by SIGKILL resumes at the next boot and
//! leaves a store that checks; every destructive call is audited; /metrics
//! parses with a Prometheus parser and its queue gauges equal the counters.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{client, store_check, write_config, Daemon, BIN};
use serde_json::{json, Value};

pub(crate) const ADMIN: &str = "admin-token-0123456789";
pub(crate) const ACME: &str = "acme-token-0123456789";
/// The tenant the scoped token may see (a fixture tenant).
pub(crate) const OWN: &str = "tenant-000004";
const OTHER: &str = "tenant-000002";

pub(crate) fn fixture(dir: &Path, tenants: u32, rows: u64) {
    let out = Command::new(BIN)
        .args(["store", "fixture", "--format", "3", "--out"])
        .arg(dir.join("store"))
        .args([
            "--tenants",
            &tenants.to_string(),
            "--rows",
            &rows.to_string(),
            "--seed",
            "7",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub(crate) fn config(dir: &Path) {
    write_config(
        dir,
        &format!(
            "[store]\npath = \"store\"\n\n[http]\nlisten = \"127.0.0.1:0\"\n\n[dispatch]\nenabled = false\n\n\
             [admin]\nlisten = \"127.0.0.1:0\"\n\n\
             [[admin.tokens]]\nname = \"ops\"\ntoken = \"{ADMIN}\"\n\n\
             [[admin.tokens]]\nname = \"acme-bot\"\ntoken = \"{ACME}\"\ntenant = \"{OWN}\"\n\n\
             [[sources]]\nid = \"shop\"\ntenant_header = \"X-Tenant\"\n[[sources.sinks]]\nurl = \"http://127.0.0.1:9/\"\n"
        ),
    );
}

pub(crate) struct Api {
    c: reqwest::Client,
    base: String,
}

impl Api {
    pub(crate) fn new(d: &Daemon) -> Api {
        Api {
            c: client(),
            base: d.admin.clone().expect("admin.listen is set"),
        }
    }

    async fn get(&self, token: Option<&str>, path: &str) -> (u16, Value) {
        let mut r = self.c.get(format!("{}{path}", self.base));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    pub(crate) async fn post(&self, token: Option<&str>, path: &str, body: Value) -> (u16, Value) {
        let mut r = self.c.post(format!("{}{path}", self.base)).json(&body);
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// `PUT` or `DELETE` (`body` none) with a JSON body.
    async fn send(
        &self,
        method: reqwest::Method,
        token: Option<&str>,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut r = self.c.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            r = r.json(&b);
        }
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Polls a job until it leaves `running`.
    async fn wait_job(&self, id: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (s, j) = self.get(Some(ADMIN), &format!("/v1/admin/jobs/{id}")).await;
            assert_eq!(s, 200, "{j}");
            if j["state"] != "running" {
                return j;
            }
            assert!(Instant::now() < deadline, "job {id} still running: {j}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn counters(&self, tenant: &str) -> Value {
        let (s, t) = self
            .get(Some(ADMIN), &format!("/v1/admin/tenants/{tenant}"))
            .await;
        assert_eq!(s, 200, "{t}");
        t["counters"].clone()
    }
}

fn total(c: &Value, fields: &[&str]) -> u64 {
    fields.iter().map(|f| c[*f].as_u64().unwrap()).sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn out_of_scope_and_unauthenticated_calls_are_refused_and_touch_nothing() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), 5, 3000);
    config(dir.path());
    let d = Daemon::start(dir.path());
    let api = Api::new(&d);
    let (_, before) = api.get(Some(ADMIN), "/v1/admin/stats").await;

    // No token, a wrong token, a malformed header: 401 on every route.
    for path in [
        "/v1/admin/stats",
        "/v1/admin/tenants",
        "/v1/admin/dlq",
        "/v1/admin/audit",
        "/metrics",
    ] {
        assert_eq!(api.get(None, path).await.0, 401, "{path}");
        assert_eq!(
            api.get(Some("admin-token-012345678"), path).await.0,
            401,
            "{path}"
        );
    }
    let (s, _) = api
        .post(
            None,
            &format!("/v1/admin/tenants/{OTHER}/purge"),
            json!({"kinds": ["pending", "dead"]}),
        )
        .await;
    assert_eq!(s, 401);

    // A tenant token: node-wide reads are 403; other tenants are 404,
    // worded exactly like a tenant that does not exist.
    assert_eq!(api.get(Some(ACME), "/v1/admin/stats").await.0, 403);
    assert_eq!(api.get(Some(ACME), "/v1/admin/audit").await.0, 403);
    assert_eq!(api.get(Some(ACME), "/metrics").await.0, 403);
    let (s, other) = api
        .get(Some(ACME), &format!("/v1/admin/tenants/{OTHER}"))
        .await;
    let (s2, missing) = api.get(Some(ACME), "/v1/admin/tenants/nobody-at-all").await;
    assert_eq!((s, s2), (404, 404));
    assert_eq!(
        other["message"].as_str().unwrap().replace(OTHER, "X"),
        missing["message"]
            .as_str()
            .unwrap()
            .replace("nobody-at-all", "X")
    );
    let (s, _) = api
        .get(Some(ACME), &format!("/v1/admin/dlq?tenant={OTHER}"))
        .await;
    assert_eq!(s, 404);
    // Its tenant list and its DLQ hold its own tenant only.
    let (s, page) = api.get(Some(ACME), "/v1/admin/tenants?limit=100").await;
    assert_eq!(s, 200);
    let ids: Vec<&str> = page["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![OWN]);
    let (s, own_dlq) = api.get(Some(ACME), "/v1/admin/dlq?limit=1000").await;
    assert_eq!(s, 200);
    assert!(
        !own_dlq["entries"].as_array().unwrap().is_empty(),
        "{own_dlq}"
    );
    assert!(
        own_dlq["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["tenant"] == OWN),
        "{own_dlq}"
    );

    // Destructive calls on another tenant's rows: refused, dry or not.
    let (_, other_dlq) = api
        .get(
            Some(ADMIN),
            &format!("/v1/admin/dlq?tenant={OTHER}&limit=1"),
        )
        .await;
    let other_hook = other_dlq["entries"][0]["hook_id"]
        .as_str()
        .expect("the other tenant has dead rows")
        .to_owned();
    assert_eq!(
        api.get(Some(ACME), &format!("/v1/admin/dlq/{other_hook}"))
            .await
            .0,
        404
    );
    for dry in [true, false] {
        let purge = json!({"kinds": ["pending", "dead"], "dry_run": dry});
        assert_eq!(
            api.post(
                Some(ACME),
                &format!("/v1/admin/tenants/{OTHER}/purge"),
                purge
            )
            .await
            .0,
            404
        );
        let body = json!({"tenant": OTHER, "dry_run": dry});
        assert_eq!(
            api.post(Some(ACME), "/v1/admin/replay", body.clone())
                .await
                .0,
            404,
            "{body}"
        );
    }

    // Nothing moved, no job ran, nothing was audited.
    let (_, after) = api.get(Some(ADMIN), "/v1/admin/stats").await;
    assert_eq!(before["node"], after["node"]);
    let (_, jobs) = api.get(Some(ADMIN), "/v1/admin/jobs").await;
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 0, "{jobs}");
    let (_, audit) = api.get(Some(ADMIN), "/v1/admin/audit").await;
    assert_eq!(audit["records"].as_array().unwrap().len(), 0, "{audit}");

    // Replay by ids: another tenant's dead hook counts as nothing, the same
    // answer as a hook that does not exist (no oracle), and a real run
    // touches none of its rows.
    let missing = "hk_00000000ffffffff";
    let (s1, other_dry) = api
        .post(
            Some(ACME),
            "/v1/admin/replay",
            json!({"ids": [other_hook], "dry_run": true}),
        )
        .await;
    let (s2, missing_dry) = api
        .post(
            Some(ACME),
            "/v1/admin/replay",
            json!({"ids": [missing], "dry_run": true}),
        )
        .await;
    assert_eq!((s1, s2), (200, 200));
    assert_eq!(other_dry["rows"], 0);
    assert_eq!(other_dry["rows"], missing_dry["rows"]);
    let (s, job) = api
        .post(Some(ACME), "/v1/admin/replay", json!({"ids": [other_hook]}))
        .await;
    assert_eq!(s, 202, "{job}");
    let job = api.wait_job(job["id"].as_u64().unwrap()).await;
    assert_eq!(job["progress"]["replayed"], 0, "{job}");
    let (_, after) = api.get(Some(ADMIN), "/v1/admin/stats").await;
    assert_eq!(
        before["node"], after["node"],
        "another tenant's row was replayed"
    );
    // Its jobs are its own: the admin sees this one, the token sees it too,
    // and the count of its DLQ is its own.
    let (s, _) = api
        .get(Some(ACME), &format!("/v1/admin/jobs/{}", job["id"]))
        .await;
    assert_eq!(s, 200);

    // Bad input is a JSON refusal too.
    for bad in [
        "/v1/admin/tenants?limit=abc",
        "/v1/admin/tenants?limit=0",
        "/v1/admin/dlq?cursor=zz",
    ] {
        let (s, body) = api.get(Some(ADMIN), bad).await;
        assert_eq!(s, 400, "{bad}: {body}");
        assert_eq!(body["error"], "bad_request", "{bad}: {body}");
    }
    let (s, body) = api.post(Some(ADMIN), "/v1/admin/stats", json!({})).await;
    assert_eq!(s, 405);
    assert_eq!(body["error"], "method_not_allowed");

    // Its own tenant: a dry run counts exactly its dead rows.
    let own = api.counters(OWN).await;
    let (s, dry) = api
        .post(Some(ACME), "/v1/admin/replay", json!({"dry_run": true}))
        .await;
    assert_eq!(s, 200, "{dry}");
    assert_eq!(dry["rows"], own["dead"]);
    d.stop();
    store_check(&dir.path().join("store"));
}

#[tokio::test(flavor = "multi_thread")]
async fn dry_runs_count_what_real_runs_touch_and_every_call_is_audited() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), 5, 5000);
    config(dir.path());
    let d = Daemon::start(dir.path());
    let api = Api::new(&d);

    // Purge pending and dead of one tenant.
    let before = api.counters(OTHER).await;
    let expect = total(&before, &["pending", "scheduled", "dead"]);
    assert!(expect > 0);
    let path = format!("/v1/admin/tenants/{OTHER}/purge");
    let (s, dry) = api
        .post(
            Some(ADMIN),
            &path,
            json!({"kinds": ["pending", "dead"], "dry_run": true}),
        )
        .await;
    assert_eq!(s, 200, "{dry}");
    assert_eq!(dry["rows"].as_u64(), Some(expect));
    let (s, job) = api
        .post(Some(ADMIN), &path, json!({"kinds": ["pending", "dead"]}))
        .await;
    assert_eq!(s, 202, "{job}");
    let job = api.wait_job(job["id"].as_u64().unwrap()).await;
    assert_eq!(job["state"], "done", "{job}");
    let purged = &job["progress"]["purged"];
    assert_eq!(
        total(purged, &["pending", "scheduled", "dead"]),
        expect,
        "{job}"
    );
    let after = api.counters(OTHER).await;
    assert_eq!(
        total(&after, &["pending", "scheduled", "dead"]),
        0,
        "{after}"
    );

    // One hook named twice is replayed once (and counted once).
    let (_, page) = api
        .get(Some(ADMIN), &format!("/v1/admin/dlq?tenant={OWN}&limit=1"))
        .await;
    let hook = page["entries"][0]["hook_id"]
        .as_str()
        .expect("a dead hook")
        .to_owned();
    let dead_before = api.counters(OWN).await["dead"].as_u64().unwrap();
    let twice = json!({"ids": [hook, hook], "dry_run": true});
    let (_, dry) = api.post(Some(ADMIN), "/v1/admin/replay", twice).await;
    let (s, job) = api
        .post(
            Some(ADMIN),
            "/v1/admin/replay",
            json!({"ids": [hook, hook]}),
        )
        .await;
    assert_eq!(s, 202, "{job}");
    let job = api.wait_job(job["id"].as_u64().unwrap()).await;
    let replayed = job["progress"]["replayed"].as_u64().unwrap();
    assert!(replayed >= 1, "{job}");
    assert_eq!(dry["rows"].as_u64(), Some(replayed), "{dry} {job}");
    assert_eq!(
        api.counters(OWN).await["dead"].as_u64().unwrap(),
        dead_before - replayed
    );

    // Replay a tenant's DLQ.
    let third = "tenant-000003";
    let dead = api.counters(third).await["dead"].as_u64().unwrap();
    assert!(dead > 0);
    let (_, dry) = api
        .post(
            Some(ADMIN),
            "/v1/admin/replay",
            json!({"tenant": third, "dry_run": true}),
        )
        .await;
    assert_eq!(dry["rows"].as_u64(), Some(dead));
    let (s, job) = api
        .post(Some(ADMIN), "/v1/admin/replay", json!({"tenant": third}))
        .await;
    assert_eq!(s, 202, "{job}");
    let job = api.wait_job(job["id"].as_u64().unwrap()).await;
    assert_eq!(job["progress"]["replayed"].as_u64(), Some(dead), "{job}");
    assert_eq!(api.counters(third).await["dead"], 0);

    // The audit log: newest first, each call with who, what and how many.
    let (_, audit) = api.get(Some(ADMIN), "/v1/admin/audit?limit=100").await;
    let recs = audit["records"].as_array().unwrap();
    let seen: Vec<(String, String, u64)> = recs
        .iter()
        .map(|r| {
            assert_eq!(r["who"]["name"], "ops", "{r}");
            (
                r["action"].as_str().unwrap().to_owned(),
                r["outcome"].as_str().unwrap().to_owned(),
                r["rows"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = vec![
        ("replay".to_owned(), "done".to_owned(), dead),
        ("replay".to_owned(), "started".to_owned(), dead),
        ("replay".to_owned(), "dry_run".to_owned(), dead),
        ("replay".to_owned(), "done".to_owned(), replayed),
        ("replay".to_owned(), "started".to_owned(), replayed),
        ("replay".to_owned(), "dry_run".to_owned(), replayed),
        ("purge".to_owned(), "done".to_owned(), expect),
        ("purge".to_owned(), "started".to_owned(), expect),
        ("purge".to_owned(), "dry_run".to_owned(), expect),
    ];
    assert_eq!(seen, want);
    assert!(recs[0]["dry_run"] == false && recs[2]["dry_run"] == true);
    d.stop();
    store_check(&dir.path().join("store"));
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_parse_and_the_queue_gauges_equal_the_counters() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), 150, 6000);
    config(dir.path());
    let d = Daemon::start(dir.path());
    let api = Api::new(&d);
    let (_, stats) = api.get(Some(ADMIN), "/v1/admin/stats").await;
    let text = api
        .c
        .get(format!("{}/metrics", api.base))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // The ingest listener serves the same families.
    let ingest_text = common::metrics_text(&api.c, &d).await;
    for t in [&text, &ingest_text] {
        let scrape =
            prometheus_parse::Scrape::parse(t.lines().map(|l| Ok(l.to_owned()))).expect("parses");
        let value = |name: &str, label: Option<(&str, &str)>| -> f64 {
            let s = scrape
                .samples
                .iter()
                .find(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)))
                .unwrap_or_else(|| panic!("no {name} {label:?}"));
            match s.value {
                prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v)
                | prometheus_parse::Value::Counter(v) => v,
                _ => panic!("{name} is not a single value"),
            }
        };
        for state in ["pending", "scheduled", "inflight", "dead"] {
            assert_eq!(
                value("ankusa_queue_rows", Some(("state", state))),
                stats["node"][state].as_f64().unwrap(),
                "{state}"
            );
        }
        assert_eq!(
            value("ankusa_queue_bytes", None),
            stats["node"]["bytes"].as_f64().unwrap()
        );
        assert_eq!(
            value("ankusa_tenants", None),
            stats["tenants"].as_f64().unwrap()
        );
        assert_eq!(
            value("ankusa_dispatch_active_tenants", None),
            stats["active_tenants"].as_f64().unwrap()
        );
        assert!(value("ankusa_queue_oldest_due_age_seconds", None) > 0.0);
        let labelled: Vec<_> = scrape
            .samples
            .iter()
            .filter(|s| s.metric == "ankusa_tenant_pending")
            .collect();
        assert!(
            !labelled.is_empty() && labelled.len() <= 100,
            "{} tenant series",
            labelled.len()
        );
        // Each labelled value is that tenant's pending counter.
        for s in labelled.iter().take(5) {
            let tenant = s.labels.get("tenant").unwrap();
            let c = api.counters(tenant).await;
            let prometheus_parse::Value::Gauge(v) = s.value else {
                panic!("gauge")
            };
            assert_eq!(v, c["pending"].as_f64().unwrap(), "{tenant}");
        }
        assert!(scrape
            .samples
            .iter()
            .any(|s| s.metric == "ankusa_delivery_attempt_seconds_count"
                || s.metric == "ankusa_delivery_attempt_seconds"));
    }
    d.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_purge_killed_mid_way_resumes_at_the_next_boot() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), 3, 100_000);
    config(dir.path());
    let d = Daemon::start(dir.path());
    let api = Api::new(&d);
    let (_, top) = api
        .get(Some(ADMIN), "/v1/admin/tenants?sort=pending&limit=1")
        .await;
    let tenant = top["tenants"][0]["id"].as_str().unwrap().to_owned();
    let before = api.counters(&tenant).await;
    let expect = total(&before, &["pending", "scheduled", "dead"]);
    assert!(
        expect > 20_000,
        "a purge long enough to interrupt: {before}"
    );
    let (s, job) = api
        .post(
            Some(ADMIN),
            &format!("/v1/admin/tenants/{tenant}/purge"),
            json!({"kinds": ["pending", "dead"]}),
        )
        .await;
    assert_eq!(s, 202);
    let id = job["id"].as_u64().unwrap();
    // Kill it once some chunks are committed and before it ends.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, j) = api.get(Some(ADMIN), &format!("/v1/admin/jobs/{id}")).await;
        assert_eq!(
            j["state"], "running",
            "the purge ended before it could be interrupted: {j}"
        );
        if total(&j["progress"]["purged"], &["pending", "scheduled", "dead"]) > 0 {
            break;
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    d.kill9();

    let d = Daemon::start(dir.path());
    let api = Api::new(&d);
    let j = api.wait_job(id).await;
    assert_eq!(j["state"], "done", "{j}");
    assert!(d.log().contains("resuming a job"), "{}", d.log());
    // The record's progress was committed with each chunk: exact, even
    // across the kill.
    assert_eq!(
        total(&j["progress"]["purged"], &["pending", "scheduled", "dead"]),
        expect,
        "{j}"
    );
    let after = api.counters(&tenant).await;
    assert_eq!(total(&after, &["pending", "scheduled", "dead"]), 0);
    d.stop();
    store_check(&dir.path().join("store"));
}

fn ankusa(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(BIN)
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

pub(crate) fn json_of(args: &[&str]) -> Value {
    let (code, out, err) = ankusa(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    let mut v: Value = serde_json::from_str(&out).unwrap();
    // Ages depend on when the command ran.
    if let Some(o) = v.as_object_mut() {
        o.remove("oldest_due_age_ms");
    }
    v
}

#[test]
fn the_command_line_prints_the_same_through_the_daemon_and_on_the_store() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), 6, 4000);
    config(dir.path());
    let store = dir.path().join("store");
    let s = store.to_str().unwrap();
    let reads = |hook: &str| -> Vec<Value> {
        vec![
            json_of(&[
                "tenants", "list", "--store", s, "--json", "--sort", "dead", "--limit", "4",
            ]),
            json_of(&["tenants", "show", OTHER, "--store", s, "--json"]),
            json_of(&["dlq", "list", "--store", s, "--json", "--limit", "7"]),
            json_of(&[
                "dlq", "list", "--store", s, "--json", "--oldest", "--limit", "4",
            ]),
            json_of(&[
                "dlq", "list", "--store", s, "--json", "--tenant", OTHER, "--limit", "3",
            ]),
            json_of(&["dlq", "show", hook, "--store", s, "--json"]),
        ]
    };
    let first = json_of(&["dlq", "list", "--store", s, "--json", "--limit", "1"]);
    let hook = first["entries"][0]["hook_id"].as_str().unwrap().to_owned();

    // (The daemon's boot returns the fixture's inflight rows to due, so
    // the direct reads come after a daemon has run.)
    let d = Daemon::start(dir.path());
    assert!(store.join("admin.sock").exists());
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(store.join("admin.sock"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let via_daemon = reads(&hook);
    d.stop();
    let direct = reads(&hook);
    assert_eq!(direct, via_daemon);
    let d = Daemon::start(dir.path());

    // A destructive command: refused without a terminal or --yes, then the
    // dry run and the real run agree, through the daemon.
    let (code, _, err) = ankusa(&["tenants", "purge", OTHER, "--store", s, "--kinds", "dead"]);
    // 4: unavailable, no terminal to confirm on (docs/cli.md).
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("--yes"), "{err}");
    let dry = json_of(&[
        "tenants",
        "purge",
        OTHER,
        "--store",
        s,
        "--kinds",
        "dead",
        "--dry-run",
        "--json",
    ]);
    let done = json_of(&[
        "tenants", "purge", OTHER, "--store", s, "--kinds", "dead", "--yes", "--json",
    ]);
    assert_eq!(done["state"], "done");
    assert_eq!(done["progress"]["purged"]["dead"], dry["rows"]);
    assert!(dry["rows"].as_u64().unwrap() > 0);
    assert_eq!(
        done["by"]["name"].as_str().unwrap().split(':').next(),
        Some("local")
    );
    d.stop();

    // With no daemon, the same commands work on the store directly.
    assert!(
        !store.join("admin.sock").exists(),
        "the socket is removed on a clean stop"
    );
    let third = "tenant-000003";
    let dry = json_of(&[
        "dlq",
        "replay",
        "--store",
        s,
        "--tenant",
        third,
        "--dry-run",
        "--json",
    ]);
    let done = json_of(&[
        "dlq", "replay", "--store", s, "--tenant", third, "--yes", "--json",
    ]);
    assert_eq!(done["progress"]["replayed"], dry["rows"]);
    let shown = json_of(&["tenants", "show", third, "--store", s, "--json"]);
    assert_eq!(shown["counters"]["dead"], 0);
    store_check(&store);
}

/// The audit records of a stopped store, oldest first, without what
/// depends on when they were written (`at`, `id`).
pub(crate) fn audit_of(store: &Path) -> Vec<Value> {
    let s = ankusa_store::Store::open_read_only(store).unwrap();
    let mut out: Vec<Value> = ankusa_store::audit::page(&s, None, 100)
        .unwrap()
        .iter()
        .map(|r| {
            let mut v: Value = serde_json::from_slice(&r.record).unwrap();
            let o = v.as_object_mut().unwrap();
            o.remove("at");
            o.remove("id");
            v
        })
        .collect();
    out.reverse();
    out
}

/// One replay of one dead row, asked of a daemon and of the stopped store
/// (two stores from the same fixture): the same dry-run count, the same
/// rows changed (the hook's other dead sink stays dead on both) and the
/// same audit records.
#[test]
fn a_row_replay_through_the_daemon_and_on_the_store_changes_and_audits_the_same() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    for d in &dirs {
        fixture(d.path(), 6, 4000);
        config(d.path());
    }
    let store = |i: usize| dirs[i].path().join("store");
    let s0 = store(0).to_str().unwrap().to_owned();
    let list = json_of(&["dlq", "list", "--store", &s0, "--json", "--limit", "1000"]);
    let mut sinks: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    for e in list["entries"].as_array().unwrap() {
        sinks
            .entry(e["hook_id"].as_str().unwrap().to_owned())
            .or_default()
            .push(e["sink"].as_u64().unwrap());
    }
    let (hook, mut dead) = sinks
        .into_iter()
        .find(|(_, s)| s.len() == 2)
        .expect("the fixture has a hook dead at two sinks");
    dead.sort_unstable();
    let row = format!("{hook}:{}", dead[1]);

    let mut results = Vec::new();
    for (i, through_daemon) in [(0, true), (1, false)] {
        let s = store(i).to_str().unwrap().to_owned();
        // Both stores see a daemon boot (it returns inflight rows to due).
        let d = Daemon::start(dirs[i].path());
        let d = if through_daemon {
            Some(d)
        } else {
            d.stop();
            None
        };
        let dry = json_of(&[
            "dlq",
            "replay",
            "--store",
            &s,
            "--row",
            &row,
            "--dry-run",
            "--json",
        ]);
        let done = json_of(&[
            "dlq", "replay", "--store", &s, "--row", &row, "--yes", "--json",
        ]);
        if let Some(d) = d {
            d.stop();
        }
        assert_eq!(dry["rows"], 1, "one row: {dry}");
        assert_eq!(done["progress"]["replayed"], 1, "{done}");
        let left = json_of(&["dlq", "show", &hook, "--store", &s, "--json"]);
        let left: Vec<u64> = left["dead"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["sink"].as_u64().unwrap())
            .collect();
        assert_eq!(left, [dead[0]], "the other sink stays dead");
        let node = json_of(&[
            "tenants", "list", "--store", &s, "--json", "--limit", "1000",
        ]);
        results.push((dry, left, node, audit_of(&store(i))));
        store_check(&store(i));
    }
    let audit = &results[0].3;
    assert_eq!(
        audit
            .iter()
            .map(|a| (a["outcome"].as_str().unwrap(), a["rows"].as_u64().unwrap()))
            .collect::<Vec<_>>(),
        [("dry_run", 1), ("dry_run", 1), ("started", 1), ("done", 1)],
        "{audit:?}"
    );
    assert_eq!(results[0], results[1]);
}

/// A purge of a tenant the dispatcher is busy claiming from: both read the
/// same due rows, and without the row lock one row would be moved twice
/// (claimed and purged) and counted out of `pending` twice. `store check`
/// compares every counter with a fold of the rows.
#[tokio::test(flavor = "multi_thread")]
async fn a_purge_racing_the_dispatcher_loses_no_count() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), 3, 60_000);
    // Deliveries to a closed port fail at once and are retried: the
    // dispatcher keeps claiming from the head of every tenant's queue,
    // where the purge deletes.
    let sinks = "[[sources.sinks]]\nurl = \"http://127.0.0.1:9/\"\nbackoff_initial = \"10ms\"\nbackoff_max = \"1s\"\n\
                 [[sources.sinks]]\nurl = \"http://127.0.0.1:9/\"\nbackoff_initial = \"10ms\"\nbackoff_max = \"1s\"\n";
    write_config(
        dir.path(),
        &format!(
            "[store]\npath = \"store\"\n\n[http]\nlisten = \"127.0.0.1:0\"\n\n\
             [dispatch]\ntick = \"1ms\"\ntick_rows = 2000\nper_tenant = 2000\nmax_inflight = 4000\nper_sink = 4000\nscan_rows = 2000\n\n\
             [admin]\nlisten = \"127.0.0.1:0\"\n\n[[admin.tokens]]\nname = \"ops\"\ntoken = \"{ADMIN}\"\n\n\
             [[sources]]\nid = \"shop\"\ntenant_header = \"X-Tenant\"\n{sinks}\n\
             [[sources]]\nid = \"billing\"\ntenant_header = \"X-Tenant\"\n{sinks}"
        ),
    );
    let d = Daemon::start(dir.path());
    let api = Api::new(&d);
    let claimed_before = common::metric(&api.c, &d, "ankusa_dispatch_rows_claimed_total").await;
    let (_, top) = api
        .get(Some(ADMIN), "/v1/admin/tenants?sort=pending&limit=2")
        .await;
    for t in top["tenants"].as_array().unwrap() {
        let tenant = t["id"].as_str().unwrap();
        let (s, job) = api
            .post(
                Some(ADMIN),
                &format!("/v1/admin/tenants/{tenant}/purge"),
                json!({"kinds": ["pending"]}),
            )
            .await;
        assert_eq!(s, 202, "{job}");
        let j = api.wait_job(job["id"].as_u64().unwrap()).await;
        assert_eq!(j["state"], "done", "{j}");
    }
    let claimed =
        common::metric(&api.c, &d, "ankusa_dispatch_rows_claimed_total").await - claimed_before;
    assert!(
        claimed > 1000,
        "the dispatcher was busy during the purges: {claimed} claims"
    );
    d.stop();
    store_check(&dir.path().join("store"));
}

/// Issue 31's routes: an admin sets, merges and clears a tenant's policy
/// and a sink's limits; a tenant token reads its own tenant's policy and
/// nothing else, and sets none; bad bodies are refused by field.
#[tokio::test(flavor = "multi_thread")]
async fn policy_routes_set_merge_clear_and_keep_tenant_tokens_to_reading_their_own() {
    use reqwest::Method;
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), 5, 300);
    config(dir.path());
    let d = Daemon::start(dir.path());
    let api = Api::new(&d);
    let own = format!("/v1/admin/tenants/{OWN}/policy");
    let other = format!("/v1/admin/tenants/{OTHER}/policy");

    let (s, v) = api.get(Some(ADMIN), &own).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["stored"], Value::Null, "{v}");
    assert_eq!(v["defaults"]["weight"], 1, "{v}");

    let (s, v) = api
        .send(
            Method::PUT,
            Some(ADMIN),
            &own,
            Some(serde_json::json!({"weight": 4, "rate": "50/s"})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["changed"], true, "{v}");
    assert_eq!(v["after"], serde_json::json!({"weight": 4, "rate": "50/s"}));
    // A second PUT merges: the weight stays.
    let (s, v) = api
        .send(
            Method::PUT,
            Some(ADMIN),
            &own,
            Some(serde_json::json!({"cap": 20})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["after"],
        serde_json::json!({"weight": 4, "cap": 20, "rate": "50/s"})
    );
    let (s, v) = api
        .send(
            Method::PUT,
            Some(ADMIN),
            &own,
            Some(serde_json::json!({"cap": 20})),
        )
        .await;
    assert_eq!((s, &v["changed"]), (200, &Value::Bool(false)), "{v}");

    for (body, code) in [
        (serde_json::json!({"weight": 0}), "policy_invalid"),
        (serde_json::json!({"share": 40}), "policy_invalid"),
        (serde_json::json!({"rate": "fast"}), "bad_request"),
        (serde_json::json!({"colour": 1}), "unknown_field"),
    ] {
        let (s, v) = api
            .send(Method::PUT, Some(ADMIN), &own, Some(body.clone()))
            .await;
        assert_eq!(s, 400, "{body}: {v}");
        assert_eq!(v["error"], code, "{body}: {v}");
    }
    let (s, v) = api
        .send(Method::PUT, Some(ADMIN), &own, Some(serde_json::json!({})))
        .await;
    assert_eq!(s, 400, "{v}");

    // The tenant's own token reads its policy, sets none, sees no other.
    let (s, v) = api.get(Some(ACME), &own).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["stored"]["policy"]["weight"], 4, "{v}");
    let (s, v) = api
        .send(
            Method::PUT,
            Some(ACME),
            &own,
            Some(serde_json::json!({"weight": 9})),
        )
        .await;
    assert_eq!(s, 403, "{v}");
    let (s, _) = api.send(Method::DELETE, Some(ACME), &own, None).await;
    assert_eq!(s, 403);
    let (s, _) = api.get(Some(ACME), &other).await;
    assert_eq!(s, 404);

    // The detail and the page carry it.
    let (_, t) = api
        .get(Some(ADMIN), &format!("/v1/admin/tenants/{OWN}"))
        .await;
    assert_eq!(t["policy"]["policy"]["cap"], 20, "{t}");
    let (_, page) = api.get(Some(ADMIN), "/v1/admin/tenants?limit=100").await;
    assert_eq!(page["policies"], serde_json::json!([OWN]), "{page}");

    let (s, v) = api.send(Method::DELETE, Some(ADMIN), &own, None).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["after"], Value::Null, "{v}");

    // A sink's limits, the sink percent-encoded as SOURCE/SINK.
    let limits = "/v1/admin/sinks/shop%2F0/limits";
    let (s, v) = api
        .send(
            Method::PUT,
            Some(ADMIN),
            limits,
            Some(serde_json::json!({"max_in_flight": 4, "rate": "20/s"})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["sink"], "shop/0", "{v}");
    let (s, v) = api.get(Some(ADMIN), limits).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["stored"]["limits"]["max_in_flight"], 4, "{v}");
    assert_eq!(api.get(Some(ACME), limits).await.0, 403);
    let (s, _) = api.send(Method::DELETE, Some(ADMIN), limits, None).await;
    assert_eq!(s, 200);

    let (_, audit) = api.get(Some(ADMIN), "/v1/admin/audit?limit=100").await;
    let scopes: Vec<&str> = audit["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == "tenant_policy" || r["action"] == "sink_limits")
        .filter_map(|r| r["scope"].as_str())
        .collect();
    assert_eq!(scopes.len(), 5, "{scopes:?}");
    assert!(
        scopes.contains(&"sink shop/0: max_in_flight default -> 4, rate default -> 20/s"),
        "{scopes:?}"
    );
    d.stop();
}
