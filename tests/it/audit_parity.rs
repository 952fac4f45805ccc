//! One operator core: the console, the command line and the admin API ask
//! ankusa-ops for the same action, so the audit record it writes is the
//! same whoever asked, but for `who` (issue 13).

use std::path::Path;

use serde_json::{json, Value};

use ankusa_ops::model::{row_name, Kinds};
use ankusa_store::queries::DlqOrder;
use ankusa_ui::data::{ActionScope, Feed, OpenRequest, Reply, Request};

use crate::admin_api::{audit_of, config, fixture, json_of, Api, ADMIN};
use crate::common::Daemon;

const TENANT: &str = "tenant-000002";

/// What the console's guards count in WRITE mode on a stopped store.
struct ConsoleDryRuns {
    purge: u64,
    /// The newest dead row (`hk_...:SINK`) and its replay's count.
    row: String,
    replay: u64,
}

/// The console's feed in WRITE mode on a stopped store.
fn write_feed(store: &Path, now: u64) -> Feed {
    let req = OpenRequest {
        path: store.to_path_buf(),
        write: true,
        ..OpenRequest::default()
    };
    Feed::open(&req, now).expect("open the console's feed")
}

/// [`TENANT`]'s ordinal, as `:tenant NAME` finds it.
fn tenant_ord(ask: &mut impl FnMut(Request) -> Reply) -> u32 {
    match ask(Request::TenantByName {
        name: TENANT.into(),
        dlq: false,
    }) {
        Reply::TenantByName(_, Some(ord)) => ord,
        other => panic!("{TENANT} not found: {other:?}"),
    }
}

/// The console's guards in WRITE mode on a stopped store: `:tenant NAME`
/// then `P` (a purge of pending and dead), and `R` on the DLQ's newest row.
fn console_dry_runs(store: &Path) -> ConsoleDryRuns {
    let now = ankusa_store::system_now_ms();
    let mut feed = write_feed(store, now);
    let mut ask = |r: Request| feed.execute(&r, now, &mut |_| {}).expect("a reply");
    let ord = tenant_ord(&mut ask);
    let count = |reply| match reply {
        Reply::DryRun(_, n) => n,
        other => panic!("not a dry run: {other:?}"),
    };
    let purge = count(ask(Request::DryRun(ActionScope::Purge {
        ord,
        tenant: TENANT.into(),
        kinds: Kinds::BOTH,
    })));
    let dead = match ask(Request::Dlq {
        ord: None,
        cursor: None,
        limit: 1,
        order: DlqOrder::NewestFirst,
        event_type: None,
    }) {
        Reply::Dlq(d) => d.page.entries.into_iter().next().expect("a dead row"),
        other => panic!("not a DLQ page: {other:?}"),
    };
    let row = row_name(&dead.hook_id, dead.sink);
    let replay = count(ask(Request::DryRun(ActionScope::ReplayRows {
        sinks: vec![format!("{}/{}", dead.source_id, dead.sink)],
        rows: vec![dead],
    })));
    ConsoleDryRuns { purge, row, replay }
}

/// Splits a store's audit records (oldest first) into their `who` and the
/// rest.
fn audit_without_who(store: &Path) -> (Vec<Value>, Vec<Value>) {
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
async fn dry_runs_audit_the_same_from_the_console_the_command_line_and_the_api() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    for d in &dirs {
        fixture(d.path(), 6, 4000);
        config(d.path());
    }
    let store = |i: usize| dirs[i].path().join("store");
    // Every store sees one daemon boot (it returns inflight rows to due),
    // so all three count the same rows.
    for i in [1, 2] {
        Daemon::start(dirs[i].path()).stop();
    }

    // The console, on store 2; it picks the row all three replay.
    let console = tokio::task::block_in_place(|| console_dry_runs(&store(2)));

    // The admin API with the `ops` token, on store 0.
    let d = Daemon::start(dirs[0].path());
    let api = Api::new(&d);
    let (s1, api_purge) = api
        .post(
            Some(ADMIN),
            &format!("/v1/admin/tenants/{TENANT}/purge"),
            json!({"kinds": ["pending", "dead"], "dry_run": true}),
        )
        .await;
    let (s2, api_replay) = api
        .post(
            Some(ADMIN),
            "/v1/admin/replay",
            json!({"rows": [console.row], "dry_run": true}),
        )
        .await;
    d.stop();
    assert_eq!((s1, s2), (200, 200), "{api_purge} {api_replay}");

    // The command line on the stopped store 1.
    let s = store(1).to_str().unwrap().to_owned();
    let cli_purge = json_of(&[
        "tenants",
        "purge",
        TENANT,
        "--kinds",
        "pending,dead",
        "--dry-run",
        "--store",
        &s,
        "--json",
    ]);
    let cli_replay = json_of(&[
        "dlq",
        "replay",
        "--row",
        &console.row,
        "--dry-run",
        "--store",
        &s,
        "--json",
    ]);

    assert!(console.purge > 0, "the fixture tenant has rows to purge");
    assert_eq!(api_purge["rows"].as_u64(), Some(console.purge));
    assert_eq!(api_replay["rows"].as_u64(), Some(console.replay));
    assert_eq!(console.replay, 1, "one row");
    assert_eq!(
        cli_purge, api_purge,
        "the command line prints what the API answers"
    );
    assert_eq!(cli_replay, api_replay);

    let [(api_who, api), (cli_who, cli), (console_who, console)] =
        [0, 1, 2].map(|i| audit_without_who(&store(i)));
    let outcomes: Vec<_> = api
        .iter()
        .map(|r| {
            (
                r["action"].as_str(),
                r["outcome"].as_str(),
                r["rows"].as_u64(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            (Some("purge"), Some("dry_run"), api_purge["rows"].as_u64()),
            (Some("replay"), Some("dry_run"), Some(1)),
        ],
        "{api:?}"
    );
    assert_eq!(cli, api, "the command line's records");
    assert_eq!(console, api, "the console's records");
    // Only `who` tells them apart: the token's name, or the local user.
    assert!(api_who.iter().all(|w| w["name"] == "ops"), "{api_who:?}");
    for who in cli_who.iter().chain(&console_who) {
        let name = who["name"].as_str().unwrap_or_default();
        assert!(name.starts_with("local:"), "{who}");
    }
    assert_eq!(cli_who, console_who);
}

/// Issue 33: the actions screen's command lines do what the console did.
/// Two stores from the same fixture: on one the console (WRITE mode) runs
/// a pause, a policy, a replay of one dead row and a purge; on the other
/// the `ankusa ...` line the actions screen prints for each is run in a
/// shell. The two stores end alike (pauses, policy, the tenant's counters).
#[test]
fn the_actions_screens_command_lines_do_what_the_console_did() {
    use ankusa_ui::data::equivalent;
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    fixture(a.path(), 20, 600);
    fixture(b.path(), 20, 600);
    let (sa, sb) = (a.path().join("store"), b.path().join("store"));
    let now = ankusa_store::system_now_ms();
    let mut feed = write_feed(&sa, now);
    let mut ask = |r: Request| feed.execute(&r, now, &mut |_| {}).expect("a reply");
    let ord = tenant_ord(&mut ask);
    let dead = match ask(Request::Dlq {
        ord: Some(ord),
        cursor: None,
        limit: 1,
        order: DlqOrder::NewestFirst,
        event_type: None,
    }) {
        Reply::Dlq(d) => d.page.entries.into_iter().next().expect("a dead row"),
        other => panic!("not a DLQ page: {other:?}"),
    };
    let policy = ankusa_store::policy::Policy {
        weight: Some(3),
        cap: Some(7),
        rate: Some("20/s".parse().unwrap()),
        ..Default::default()
    };
    let scopes = [
        ActionScope::Pause(ankusa_ui::data::PauseTarget {
            tenant: Some("tenant-000003".into()),
            sink: None,
        }),
        ActionScope::Pause(ankusa_ui::data::PauseTarget {
            tenant: Some(TENANT.into()),
            sink: Some((
                ankusa_ui::data::SinkRef {
                    source: "shop".into(),
                    sink: 0,
                },
                "0".into(),
            )),
        }),
        ActionScope::Policy {
            ord,
            tenant: TENANT.into(),
            before: None,
            after: Some(policy),
        },
        ActionScope::ReplayRows {
            rows: vec![dead.clone()],
            sinks: vec![format!("{}/{}", dead.source_id, dead.sink)],
        },
        ActionScope::Purge {
            ord,
            tenant: TENANT.into(),
            kinds: Kinds::BOTH,
        },
    ];
    for scope in &scopes {
        match ask(Request::Execute(scope.clone())) {
            Reply::Done(_) => {}
            other => panic!("{scope:?}: {other:?}"),
        }
        let eq = equivalent::of(scope, &sb).expect("a command line");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(
                eq.cli
                    .replacen("ankusa ", &format!("{} ", crate::common::BIN), 1),
            )
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            eq.cli,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(eq.curl.is_some(), "{scope:?} has an API call too");
    }
    drop(feed);
    let state = |dir: &Path| {
        let s = ankusa_store::Store::open_read_only(dir).unwrap();
        let o = ankusa_store::tenants::ord_of(&s, TENANT).unwrap().unwrap();
        (
            ankusa_store::pauses::Paused::load(&s).unwrap().counts(),
            ankusa_store::policy::Policies::load(&s)
                .unwrap()
                .tenant(o)
                .copied(),
            ankusa_store::queries::counters(&s, o).unwrap(),
        )
    };
    let (in_a, in_b) = (state(&sa), state(&sb));
    assert_eq!(in_a, in_b);
    assert_eq!(in_a.1, Some(policy));
    assert_eq!(
        in_a.0,
        (1, 0, 1),
        "a tenant, and a sink for a tenant, paused"
    );
}
