//! What ships beside the binary, generated from its own command
//! definitions: the shell completions (`ankusa completions SHELL`) and the
//! man pages (`ankusa man`). The command tree is read from the binary's
//! `--help`, so a command added later is held to both without a list here.

use std::collections::BTreeSet;
use std::process::Command;

use crate::common::BIN;

fn stdout(args: &[&str]) -> String {
    let o = Command::new(BIN).args(args).output().expect("run ankusa");
    assert!(
        o.status.success(),
        "ankusa {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("utf-8")
}

/// The subcommands `--help` lists under `path` (clap's own `help` aside).
fn children(path: &[String]) -> Vec<String> {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let help = stdout(&args);
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Every command path of the binary, parents before their children.
fn tree() -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut todo = vec![Vec::new()];
    while let Some(path) = todo.pop() {
        for c in children(&path) {
            let mut p = path.clone();
            p.push(c);
            out.push(p.clone());
            todo.push(p);
        }
    }
    out
}

/// What bash completes after `ankusa PATH `: the completion script is
/// sourced into a real bash, and its function asked as bash would ask it.
fn bash_completes(script: &str, path: &[String]) -> BTreeSet<String> {
    let words = path.join(" ");
    let prog = format!(
        "{script}\nCOMP_WORDS=(ankusa {words} \"\"); COMP_CWORD={}; COMP_LINE=\"ankusa {words} \"; COMP_POINT=${{#COMP_LINE}}; _ankusa ankusa \"\" ankusa; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        path.len() + 1
    );
    let o = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &prog])
        .output()
        .expect("run bash");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completes_every_subcommand_and_each_command_has_a_man_page() {
    let tree = tree();
    assert!(
        tree.len() > 30,
        "the command tree read from --help: {tree:?}"
    );

    let script = stdout(&["completions", "bash"]);
    let mut parents: Vec<Vec<String>> = vec![Vec::new()];
    parents.extend(tree.iter().cloned());
    for parent in &parents {
        let kids = children(parent);
        if kids.is_empty() {
            continue;
        }
        let offered = bash_completes(&script, parent);
        for k in &kids {
            assert!(
                offered.contains(k),
                "bash does not complete `ankusa {} {k}`: {offered:?}",
                parent.join(" ")
            );
        }
    }
    for shell in ["zsh", "fish"] {
        let s = stdout(&["completions", shell]);
        for path in &tree {
            let last = path.last().expect("a name");
            assert!(s.contains(last.as_str()), "{shell} completion lacks {last}");
        }
    }

    let dir = tempfile::tempdir().unwrap();
    stdout(&["man", "--out", dir.path().to_str().unwrap()]);
    let top = std::fs::read_to_string(dir.path().join("ankusa.1")).expect("ankusa.1");
    assert!(
        top.starts_with(".ie") || top.contains(".TH ankusa 1"),
        "{top}"
    );
    for path in &tree {
        let name = format!("ankusa-{}.1", path.join("-"));
        let page = std::fs::read_to_string(dir.path().join(&name))
            .unwrap_or_else(|e| panic!("no man page {name}: {e}"));
        assert!(page.contains(".TH ankusa-"), "{name} is not a man page");
    }
    for path in tree.iter().filter(|p| p.len() == 1) {
        assert!(top.contains(&path[0]), "ankusa.1 does not name {}", path[0]);
    }
    // On stdout, the same top page.
    assert_eq!(stdout(&["man"]), top);
}

/// A source whose one sink nobody answers.
const ONE_SOURCE: &str =
    "[[sources]]\nid = \"shop\"\n\n[[sources.sinks]]\nurl = \"http://127.0.0.1:9/\"\n";

/// A fake `NOTIFY_SOCKET` in `dir`: the datagram socket systemd would read,
/// each read bounded by a minute.
fn notify_socket(dir: &std::path::Path) -> (std::os::unix::net::UnixDatagram, std::path::PathBuf) {
    let path = dir.join("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    (sock, path)
}

/// The `Type=notify` unit (dist/systemd/ankusa.service): with a fake
/// `NOTIFY_SOCKET` (a unix datagram socket this test reads), the daemon
/// sends `READY=1` once it accepts hooks (a hook posted as soon as the
/// datagram is read is answered 202), `RELOADING=1` then `READY=1` around
/// a SIGHUP reload, and `STOPPING=1` on SIGTERM, then
/// exits 0. Without the variable the daemon sends nothing (every other
/// test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_tells_systemd_when_it_is_ready_and_when_it_stops() {
    let dir = tempfile::tempdir().unwrap();
    let (sock, sock_path) = notify_socket(dir.path());
    crate::common::write_config(dir.path(), &crate::common::config_with("", ONE_SOURCE));
    let d = crate::common::Daemon::start_env(
        dir.path(),
        &[("NOTIFY_SOCKET", sock_path.to_str().unwrap())],
    );
    let mut buf = [0u8; 512];
    let n = sock.recv(&mut buf).expect("a notification within 60 s");
    let first = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(first.lines().any(|l| l == "READY=1"), "{first:?}");
    let c = crate::common::client();
    let r = c
        .post(d.url("shop"))
        .body("{\"ready\":true}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202, "a hook right after READY=1");
    // `systemctl reload` (ExecReload= sends SIGHUP): RELOADING=1 with the
    // monotonic time systemd 253 wants, then READY=1 again.
    nix::sys::signal::kill(d.pid(), nix::sys::signal::Signal::SIGHUP).unwrap();
    let n = sock.recv(&mut buf).expect("RELOADING=1 within 60 s");
    let reloading = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(
        reloading.lines().any(|l| l == "RELOADING=1"),
        "{reloading:?}"
    );
    assert!(
        reloading.lines().any(|l| l.starts_with("MONOTONIC_USEC=")),
        "{reloading:?}"
    );
    let n = sock
        .recv(&mut buf)
        .expect("READY=1 after the reload within 60 s");
    let again = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(again.lines().any(|l| l == "READY=1"), "{again:?}");
    nix::sys::signal::kill(d.pid(), nix::sys::signal::Signal::SIGTERM).unwrap();
    let n = sock.recv(&mut buf).expect("STOPPING=1 within 60 s");
    let second = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(second.lines().any(|l| l == "STOPPING=1"), "{second:?}");
    let status = d.stop_wait();
    assert!(status.success(), "{status}");
}

/// Every metric the alert rules and the Grafana dashboard (dist/prometheus)
/// name exists on a real daemon's /metrics (a rule on a misspelt or removed
/// metric never fires: it would pass promtool and alert nobody), and every
/// recording rule the dashboard uses is defined.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alert_rules_and_the_dashboard_name_only_metrics_the_daemon_serves() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/prometheus");
    let rules = std::fs::read_to_string(root.join("ankusa.rules.yml")).unwrap();
    let dashboard = std::fs::read_to_string(root.join("ankusa-dashboard.json")).unwrap();
    let names = |text: &str, prefix: &str| -> std::collections::BTreeSet<String> {
        let mut out = std::collections::BTreeSet::new();
        let mut rest = text;
        while let Some(i) = rest.find(prefix) {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            out.insert(tail[..end].to_owned());
            rest = &tail[end..];
        }
        out
    };
    let dir = tempfile::tempdir().unwrap();
    // Dispatching, with every tenant capped at one row in flight, a sink
    // that never answers (so the one row stays in flight and the rest stay
    // due: the tenant is held on every visit) and a backlog of a few: the
    // tenant-over-policy series has a sample. (A sink that refused at once
    // let the breaker park the rows before a scrape saw the tenant held.)
    let hang = axum::Router::new().route(
        "/",
        axum::routing::post(|| async { std::future::pending::<&'static str>().await }),
    );
    let hung = crate::common::serve_loopback(hang).await;
    crate::common::write_config(
        dir.path(),
        &crate::common::config_dispatching(
            "tick = \"10ms\"",
            "[tenants]\ncap = 1\n",
            &format!(
                "[[sources]]\nid = \"shop\"\n\n[[sources.sinks]]\nurl = \"{hung}/\"\ntimeout = \"30s\"\n[sources.sinks.breaker]\nfailures = 3\n"
            ),
        ),
    );
    let d = crate::common::Daemon::start(dir.path());
    let c = crate::common::client();
    for _ in 0..5 {
        let r = c.post(d.url("shop")).body("{}").send().await.unwrap();
        assert_eq!(r.status(), 202);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let served = loop {
        let page = crate::common::metrics_text(&c, &d).await;
        if page.contains("\nankusa_tenant_policy_held_seconds{") {
            break page;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no tenant held by its cap: {page}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let served: std::collections::BTreeSet<&str> = served
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let mut missing = Vec::new();
    for (file, text) in [("rules", &rules), ("dashboard", &dashboard)] {
        for name in names(text, "ankusa_") {
            if !served.contains(name.as_str()) {
                missing.push(format!("{file}: {name}"));
            }
        }
    }
    assert!(missing.is_empty(), "named but not served: {missing:?}");
    let recorded = names(&rules, "ankusa:");
    for used in names(&dashboard, "ankusa:") {
        assert!(
            recorded.contains(&used),
            "the dashboard uses {used}, which no rule records"
        );
    }
    assert!(recorded.len() >= 5, "{recorded:?}");
    d.stop_clean();
}

/// The Debian package (scripts/build-deb.sh): built from the binary under
/// test, it holds the binary, the unit (pointing at /usr/bin), the example
/// configuration as a conffile (valid as shipped: `ankusa config check`
/// passes on it), the man pages, the completions and the alerting kit, and
/// its postinst creates the system user. Skipped with a message where
/// dpkg-deb is missing.
#[test]
fn the_debian_package_holds_the_binary_the_unit_the_config_and_the_docs() {
    if std::process::Command::new("dpkg-deb")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("dpkg-deb not found: the package test is skipped");
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().unwrap();
    let built = std::process::Command::new(root.join("scripts/build-deb.sh"))
        .arg(crate::common::BIN)
        .arg(out.path())
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let deb = String::from_utf8(built.stdout).unwrap().trim().to_owned();
    let run = |args: &[&str]| {
        let o = std::process::Command::new("dpkg-deb")
            .args(args)
            .arg(&deb)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let listing = run(&["-c"]);
    for path in [
        "./usr/bin/ankusa",
        "./lib/systemd/system/ankusa.service",
        "./etc/ankusa/ankusa.toml",
        "./usr/share/man/man1/ankusa.1.gz",
        "./usr/share/man/man1/ankusa-serve.1.gz",
        "./usr/share/man/man1/ankusa-config-reload.1.gz",
        "./usr/share/bash-completion/completions/ankusa",
        "./usr/share/zsh/vendor-completions/_ankusa",
        "./usr/share/fish/vendor_completions.d/ankusa.fish",
        "./usr/share/ankusa/prometheus/ankusa.rules.yml",
        "./usr/share/ankusa/prometheus/ankusa-dashboard.json",
        "./usr/share/doc/ankusa/docs/alerts.md",
    ] {
        assert!(
            listing.lines().any(|l| l.ends_with(path)),
            "{path} missing from the package:\n{listing}"
        );
    }
    assert!(
        listing.lines().all(|l| l.contains("root/root")),
        "every file owned by root:\n{listing}"
    );
    let field = |name: &str| {
        let o = std::process::Command::new("dpkg-deb")
            .args(["-f", &deb, name])
            .output()
            .unwrap();
        String::from_utf8(o.stdout).unwrap().trim().to_owned()
    };
    assert_eq!(field("Package"), "ankusa");
    assert_eq!(field("Version"), env!("CARGO_PKG_VERSION"));
    let control = out.path().join("control");
    let e = std::process::Command::new("dpkg-deb")
        .args(["-e", &deb, control.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(e.success());
    let postinst = std::fs::read_to_string(control.join("postinst")).unwrap();
    assert!(postinst.contains("adduser --system --group"), "{postinst}");
    assert_eq!(
        std::fs::read_to_string(control.join("conffiles")).unwrap(),
        "/etc/ankusa/ankusa.toml\n"
    );
    let files = out.path().join("files");
    let x = std::process::Command::new("dpkg-deb")
        .args(["-x", &deb, files.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(x.success());
    let unit = std::fs::read_to_string(files.join("lib/systemd/system/ankusa.service")).unwrap();
    assert!(
        unit.contains("ExecStart=/usr/bin/ankusa serve --config /etc/ankusa/ankusa.toml"),
        "{unit}"
    );
    let cfg = files.join("etc/ankusa/ankusa.toml");
    let checked = crate::common::ankusa(&["config", "check", "--config", cfg.to_str().unwrap()]);
    assert!(
        checked.status.success(),
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(String::from_utf8_lossy(&checked.stdout).contains("valid ("));
}

/// `WatchdogSec=`: with `WATCHDOG_USEC` set (300 ms here), the daemon sends
/// `WATCHDOG=1` every half interval while its writer and dispatcher turn.
#[test]
fn the_daemon_feeds_the_systemd_watchdog_while_it_works() {
    let dir = tempfile::tempdir().unwrap();
    let (sock, sock_path) = notify_socket(dir.path());
    crate::common::write_config(
        dir.path(),
        &crate::common::config_dispatching("tick = \"50ms\"", "", ONE_SOURCE),
    );
    let d = crate::common::Daemon::start_env(
        dir.path(),
        &[
            ("NOTIFY_SOCKET", sock_path.to_str().unwrap()),
            ("WATCHDOG_USEC", "300000"),
        ],
    );
    let started = std::time::Instant::now();
    let mut buf = [0u8; 512];
    let mut fed = 0;
    while fed < 5 {
        let n = sock.recv(&mut buf).expect("a notification within 60 s");
        let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
        if msg.lines().any(|l| l == "WATCHDOG=1") {
            fed += 1;
        }
    }
    // Five pings at one per 150 ms: well under the minute a stuck daemon
    // would take to fail the read above.
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    assert!(d.stop().success());
}
