//! One operator core: the console, the command line and the admin API ask
//! ankusa-ops for the same action, so the audit record it writes is the
//! same whoever asked, but for `who` (issue 13).

use serde_json::{json, Value};

use ankusa_ops::model::Kinds;
use ankusa_ui::data::{ActionScope, Feed, OpenRequest, Reply, Request};

use crate::admin_api::{audit_of, config, fixture, json_of, Api, ADMIN};
use crate::common::Daemon;

const TENANT: &str = "tenant-000002";

/// The console's guard in WRITE mode on a stopped store: resolve the
/// tenant as `:tenant NAME` does, then the dry run `P` sends.
fn console_dry_run_purge(store: &std::path::Path) -> u64 {
    let now = ankusa_store::system_now_ms();
    let req = OpenRequest {
        path: store.to_path_buf(),
        write: true,
        ..OpenRequest::default()
    };
    let mut feed = Feed::open(&req, now).expect("open the console's feed");
    let ask = Request::TenantByName {
        name: TENANT.into(),
        dlq: false,
    };
    let ord = match feed.execute(&ask, now, &mut |_| {}) {
        Ok(Reply::TenantByName(_, Some(ord))) => ord,
        other => panic!("{TENANT} not found: {other:?}"),
    };
    let scope = ActionScope::Purge {
        ord,
        tenant: TENANT.into(),
        kinds: Kinds::BOTH,
    };
    match feed.execute(&Request::DryRun(scope), now, &mut |_| {}) {
        Ok(Reply::DryRun(_, count)) => count,
        other => panic!("the console's dry run: {other:?}"),
    }
}

/// Splits a store's audit records into their `who` and the rest.
fn audit_without_who(store: &std::path::Path) -> (Vec<Value>, Vec<Value>) {
    audit_of(store)
        .into_iter()
        .map(|mut r| {
            let who = r
                .as_object_mut()
                .and_then(|o| o.remove("who"))
                .unwrap_or(Value::Null);
            (who, r)
        })
        .unzip()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dry_run_purge_audits_the_same_from_the_console_the_command_line_and_the_api() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    for d in &dirs {
        fixture(d.path(), 6, 4000);
        config(d.path());
    }
    let store = |i: usize| dirs[i].path().join("store");

    // The admin API, with the `ops` token.
    let d = Daemon::start(dirs[0].path());
    let (status, dry) = Api::new(&d)
        .post(
            Some(ADMIN),
            &format!("/v1/admin/tenants/{TENANT}/purge"),
            json!({"kinds": ["pending", "dead"], "dry_run": true}),
        )
        .await;
    d.stop();
    assert_eq!(status, 200, "{dry}");
    let api_rows = dry["rows"].as_u64().expect("rows");

    // The other two stores see a daemon boot too (it returns inflight rows
    // to due), so all three count the same rows.
    for i in [1, 2] {
        Daemon::start(dirs[i].path()).stop();
    }
    let s1 = store(1).to_str().unwrap().to_owned();
    let cli = json_of(&[
        "tenants",
        "purge",
        TENANT,
        "--kinds",
        "pending,dead",
        "--dry-run",
        "--store",
        &s1,
        "--json",
    ]);
    let console_rows = tokio::task::block_in_place(|| console_dry_run_purge(&store(2)));

    assert!(api_rows > 0, "the fixture tenant has rows to purge");
    assert_eq!(cli, dry, "the command line prints what the API answers");
    assert_eq!(console_rows, api_rows);

    let [(api_who, api), (cli_who, cli), (console_who, console)] =
        [0, 1, 2].map(|i| audit_without_who(&store(i)));
    assert_eq!(api.len(), 1, "one record per dry run: {api:?}");
    assert_eq!(api[0]["outcome"], "dry_run", "{api:?}");
    assert_eq!(api[0]["rows"].as_u64(), Some(api_rows), "{api:?}");
    assert_eq!(cli, api, "the command line's record");
    assert_eq!(console, api, "the console's record");
    // Only `who` tells them apart: the token's name, or the local user.
    assert_eq!(api_who[0]["name"], "ops", "{api_who:?}");
    for who in [&cli_who[0], &console_who[0]] {
        let name = who["name"].as_str().unwrap_or_default();
        assert!(name.starts_with("local:"), "{who}");
    }
    assert_eq!(cli_who, console_who);
}
