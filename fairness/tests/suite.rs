//! The suite's pass rule on the built-in set (quick: the 10,000-tenant scenario is
//! left to `ankusa bench fairness`), and the JSON shape the CLI documents.

// A test crate: its helpers panic on what a test did not expect, which is
// the failure report (the workspace refuses unwrap/expect elsewhere).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ankusa_fairness::{run_suite, SuiteOptions};

#[test]
fn built_in_scenarios_pass_and_report() {
    let report = match run_suite(&SuiteOptions {
        scenarios_path: None,
        quick: true,
    }) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    let table = report.render_table();
    assert!(report.passed(), "{table}");
    assert!(table.contains("fairness bench: PASS"));
    let json = report.to_json();
    assert_eq!(json["passed"], true);
    assert_eq!(json["quick"], true);
    assert_eq!(json["skipped"][0], "ten_thousand");
    let first = &json["scenarios"][0];
    for key in [
        "name",
        "metric",
        "runs",
        "best_alternative",
        "best_value",
        "ours",
        "primary_ok",
        "targets",
        "guards_ok",
        "passed",
    ] {
        assert!(!first[key].is_null(), "missing {key}");
    }
    let run = &first["runs"][0]["summary"];
    for key in [
        "wait_p95",
        "jain",
        "worst_share",
        "raw_byte_jain",
        "bytes_served",
        "wc_violations",
        "state_peak",
    ] {
        assert!(!run[key].is_null(), "missing {key}");
    }
}

#[test]
fn a_scenario_directory_is_read_and_bad_files_are_named() {
    let dir = std::env::temp_dir().join(format!("ankusa-fair-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let bad = dir.join("broken.toml");
    let _ = std::fs::write(&bad, "name = \"b\"\nmax_steps = 10\n");
    let err = run_suite(&SuiteOptions {
        scenarios_path: Some(dir.clone()),
        quick: false,
    });
    let _ = std::fs::remove_dir_all(&dir);
    match err {
        Err(e) => assert!(e.to_string().contains("broken.toml"), "{e}"),
        Ok(_) => panic!("a broken scenario must be an error"),
    }
}
