//! A user's mistake on the command line ends in one plain line on stderr,
//! `ankusa: WHAT ...`, with no colour codes, no source location and no
//! backtrace, and the exit code docs/cli.md gives its kind (2 usage, 3 not
//! found, 4 unavailable), with or without `RUST_BACKTRACE`: the report is
//! for bugs.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::BIN;

/// Runs the binary with stdin, stdout and stderr not terminals and no
/// environment that would change what it prints.
fn run(args: &[&str], dir: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .env_remove("ANKUSA_STORE")
        .env_remove("ANKUSA_CONFIG")
        .env_remove("NO_COLOR")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run ankusa")
}

/// Asserts one plain line on stderr that contains every `needle`, nothing
/// on stdout, and `code`.
fn one_plain_line(o: &Output, code: i32, needles: &[&str]) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(code), "{err}");
    assert!(o.stdout.is_empty(), "stdout: {:?}", o.stdout);
    assert!(!err.contains('\x1b'), "colour codes: {err:?}");
    assert_eq!(err.lines().count(), 1, "not one line: {err}");
    assert!(err.starts_with("ankusa: "), "{err}");
    assert!(!err.contains("Location") && !err.contains(".rs:"), "{err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} missing from {err}");
    }
    err
}

fn fixture(dir: &Path) -> String {
    let store = dir.join("store");
    let o = Command::new(BIN)
        .args(["store", "fixture", "--format", "3", "--tenants", "4"])
        .args(["--rows", "40", "--out"])
        .arg(&store)
        .output()
        .expect("fixture");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    store.to_str().expect("utf-8 path").to_owned()
}

#[test]
fn a_tenant_that_does_not_exist_is_not_found_and_names_the_list_command() {
    let dir = tempfile::tempdir().unwrap();
    let store = fixture(dir.path());
    for args in [
        vec!["tenants", "show", "nosuch", "--store", &store],
        vec!["dlq", "list", "--tenant", "nosuch", "--store", &store],
        vec!["tenants", "purge", "nosuch", "--kinds", "pending", "--yes"],
    ] {
        let mut args = args;
        if args[1] == "purge" {
            args.extend(["--store", &store]);
        }
        one_plain_line(
            &run(&args, dir.path()),
            3,
            &["no tenant \"nosuch\"", "ankusa tenants list"],
        );
    }
    one_plain_line(
        &run(
            &["dlq", "show", "hk_00000000000000ff", "--store", &store],
            dir.path(),
        ),
        3,
        &["hk_00000000000000ff", "ankusa dlq list"],
    );
}

#[test]
fn a_store_path_that_does_not_exist_is_not_found_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let m = missing.to_str().unwrap();
    for args in [
        vec!["store", "info", "--store", m],
        vec!["tenants", "list", "--store", m],
        vec!["console", "--store", m],
    ] {
        one_plain_line(&run(&args, dir.path()), 3, &[m]);
    }
    assert!(!missing.exists());
}

#[test]
fn no_terminal_is_unavailable_and_says_what_to_run_instead() {
    let dir = tempfile::tempdir().unwrap();
    one_plain_line(
        &run(&["demo", "--duration", "1s"], dir.path()),
        4,
        &["not a terminal", "--no-console"],
    );
    let store = fixture(dir.path());
    one_plain_line(
        &run(&["console", "--store", &store], dir.path()),
        4,
        &["not a terminal", "--json"],
    );
    // A destructive command without --yes and without a terminal to ask on:
    // the dry run's count is printed first (stderr), then the refusal.
    let o = run(
        &[
            "tenants", "purge", "default", "--kinds", "dead", "--store", &store,
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(4));
    let err = String::from_utf8_lossy(&o.stderr);
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.starts_with("ankusa: refusing") && last.contains("--yes"),
        "{err}"
    );
    assert!(!err.contains('\x1b'), "{err:?}");
}

#[test]
fn a_missing_or_bad_file_is_not_found_or_usage() {
    let dir = tempfile::tempdir().unwrap();
    one_plain_line(
        &run(&["serve", "--config", "nope.toml"], dir.path()),
        3,
        &["nope.toml", "--config"],
    );
    one_plain_line(
        &run(&["serve"], dir.path()),
        3,
        &["no config file", "ankusa.example.toml"],
    );
    one_plain_line(
        &run(
            &["bench", "fairness", "--quick", "--scenarios", "nope.toml"],
            dir.path(),
        ),
        3,
        &["nope.toml"],
    );
    std::fs::write(dir.path().join("bad.toml"), "[writer]\nmax_batch = 0\n").unwrap();
    one_plain_line(
        &run(&["serve", "--config", "bad.toml"], dir.path()),
        2,
        &["bad.toml", "line 2", "writer.max_batch"],
    );
    assert!(!dir.path().join("store").exists());
}

#[test]
fn a_bad_argument_value_is_usage() {
    let dir = tempfile::tempdir().unwrap();
    let store = fixture(dir.path());
    one_plain_line(
        &run(&["dlq", "show", "hk_zz", "--store", &store], dir.path()),
        2,
        &["not a hook id"],
    );
    one_plain_line(
        &run(
            &["tenants", "purge", "t", "--kinds", "foo", "--store", &store],
            dir.path(),
        ),
        2,
        &["unknown kind \"foo\""],
    );
    let out = dir.path().join("store");
    one_plain_line(
        &run(
            &[
                "store",
                "fixture",
                "--format",
                "3",
                "--out",
                out.to_str().unwrap(),
            ],
            dir.path(),
        ),
        2,
        &["not empty"],
    );
}

/// Issue 33: many developers keep `RUST_BACKTRACE` set (this machine's
/// environment sets it). It must not turn a mistake into color-eyre's
/// report: each of these stays one plain line with its own code, whatever
/// the variable says.
#[test]
fn rust_backtrace_leaves_a_mistake_one_plain_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = fixture(dir.path());
    let missing = dir.path().join("nope");
    let m = missing.to_str().unwrap();
    let cases: [(Vec<&str>, i32, &str); 4] = [
        (
            vec!["tenants", "show", "nosuch", "--store", &store],
            3,
            "no tenant \"nosuch\"",
        ),
        (vec!["dlq", "show", "hk_x", "--store", &store], 2, "hk_x"),
        (vec!["store", "info", "--store", m], 3, m),
        (vec!["console", "--store", &store], 4, "not a terminal"),
    ];
    for value in ["1", "full"] {
        for (args, code, needle) in &cases {
            let o = Command::new(BIN)
                .args(args)
                .current_dir(dir.path())
                .env("RUST_BACKTRACE", value)
                .env("RUST_LIB_BACKTRACE", value)
                .env_remove("NO_COLOR")
                .stdin(std::process::Stdio::null())
                .output()
                .expect("run");
            one_plain_line(&o, *code, &[needle]);
        }
    }
}

#[test]
fn a_node_id_that_is_bad_or_not_the_stores_refuses_to_boot() {
    use crate::common::{config_with, write_config, Daemon};
    let dir = tempfile::tempdir().unwrap();
    let sources = "[[sources]]\nid = \"s\"\ntenant = \"t\"\n[[sources.sinks]]\nurl = \"http://127.0.0.1:9/\"\n";
    write_config(dir.path(), &config_with("[node]\nid = \"EU_1\"\n", sources));
    one_plain_line(
        &run(&["serve", "--config", "ankusa.toml"], dir.path()),
        2,
        &["ankusa.toml", "node.id", "\"EU_1\" is not a node id"],
    );
    assert!(!dir.path().join("store").exists());
    write_config(dir.path(), &config_with("[node]\nid = \"eu-1\"\n", sources));
    Daemon::start(dir.path()).stop_clean();
    write_config(dir.path(), &config_with("[node]\nid = \"eu-2\"\n", sources));
    one_plain_line(
        &run(&["serve", "--config", "ankusa.toml"], dir.path()),
        2,
        &[
            "belongs to node \"eu-1\"",
            "node.id in ankusa.toml is \"eu-2\"",
            "set node.id = \"eu-1\" again",
        ],
    );
    // Without [node] the store's id stands.
    write_config(dir.path(), &config_with("", sources));
    Daemon::start(dir.path()).stop_clean();
}
