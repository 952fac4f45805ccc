//! Drives the real `ankusa console` binary in a pseudo-terminal and reads
//! its screen with a terminal emulator (vt100): it opens a fixture store,
//! navigates to a tenant and its DLQ, shows the right numbers, quits, and
//! leaves the terminal restored; and in FOLLOW mode it sees rows that a
//! concurrently running writer (this test process, holding the primary)
//! adds; and on a format 2 store it runs the guided migration (backup, dry
//! run, typed confirmation, steps, check) and opens the migrated store.

use crate::common;

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_store::tenants::TenantAllocator;
use ankusa_store::values::Envelope;
use ankusa_store::{queries, tenants, Store};
use portable_pty::{native_pty_system, Child, CommandBuilder, MasterPty, PtySize};

use common::BIN;

pub(crate) struct Console {
    parser: Arc<Mutex<vt100::Parser>>,
    /// Every byte the console wrote, for what the screen does not show (an
    /// OSC 52 copy).
    raw: Arc<Mutex<Vec<u8>>>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn Child + Send + Sync>,
    _master: Box<dyn MasterPty + Send>,
    /// The console's state directory (its `:` history), unless the test
    /// gave one: never the machine's own.
    _state: tempfile::TempDir,
}

impl Console {
    pub(crate) fn spawn(args: &[&str], env: &[(&str, &str)], cols: u16, rows: u16) -> Console {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut cmd = CommandBuilder::new(BIN);
        cmd.args(args);
        cmd.env("TERM", "xterm-256color");
        cmd.env("NO_COLOR", "1");
        cmd.env("RUST_BACKTRACE", "0");
        let state = tempfile::tempdir().expect("state dir");
        cmd.env("XDG_STATE_HOME", state.path());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = pair.slave.spawn_command(cmd).expect("spawn console");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("reader");
        let writer = pair.master.take_writer().expect("writer");
        let parser = Arc::new(Mutex::new(vt100::Parser::new(rows, cols, 0)));
        let p = parser.clone();
        let raw = Arc::new(Mutex::new(Vec::new()));
        let r = raw.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                p.lock().expect("parser").process(&buf[..n]);
                r.lock().expect("raw").extend_from_slice(&buf[..n]);
            }
        });
        Console {
            parser,
            raw,
            writer,
            child,
            _master: pair.master,
            _state: state,
        }
    }

    pub(crate) fn screen(&self) -> String {
        self.parser.lock().expect("parser").screen().contents()
    }

    /// Waits until every needle is on screen; panics with the screen if not.
    pub(crate) fn wait_for(&self, needles: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.screen();
            if needles.iter().all(|n| s.contains(n)) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {needles:?}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn send(&mut self, keys: &str) {
        self.writer.write_all(keys.as_bytes()).expect("write keys");
        self.writer.flush().expect("flush");
        std::thread::sleep(Duration::from_millis(150));
    }

    pub(crate) fn wait_exit(&mut self) -> portable_pty::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                // Let the reader thread drain the last bytes.
                std::thread::sleep(Duration::from_millis(300));
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "console did not exit; screen:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn assert_restored(&self) {
        let p = self.parser.lock().expect("parser");
        let s = p.screen();
        assert!(
            !s.alternate_screen(),
            "the alternate screen was not left:\n{}",
            s.contents()
        );
        assert!(!s.hide_cursor(), "the cursor was left hidden");
        assert_eq!(
            s.mouse_protocol_mode(),
            vt100::MouseProtocolMode::None,
            "the mouse was left captured"
        );
    }

    /// A left click at the frame's 0-based (`x`, `y`), as an xterm sends it
    /// (SGR encoding, 1-based): press, then release.
    fn click(&mut self, x: u16, y: u16) {
        self.send(&format!(
            "\x1b[<0;{};{}M\x1b[<0;{};{}m",
            x + 1,
            y + 1,
            x + 1,
            y + 1
        ));
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
    }
}

/// `1234567` → `1,234,567`, as the console prints counters.
fn num(n: i64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        // `%` rather than `is_multiple_of`: the workspace's MSRV is 1.80.
        #[allow(clippy::manual_is_multiple_of)]
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn fixture(dir: &Path) {
    let st = Command::new(BIN)
        .args([
            "store",
            "fixture",
            "--format",
            "3",
            "--tenants",
            "20",
            "--rows",
            "600",
            "--seed",
            "3",
            "--out",
        ])
        .arg(dir)
        .output()
        .expect("run fixture");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
}

#[test]
fn opens_navigates_to_a_tenant_and_its_dlq_shows_the_right_numbers_and_restores_the_terminal() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    fixture(&dir);
    let (node, dead, newest) = {
        let s = Store::open_read_only(&dir).expect("open");
        let ord = tenants::ord_of(&s, "dead-only")
            .expect("read")
            .expect("dead-only");
        let c = queries::counters(&s, ord).expect("counters");
        let page = queries::dlq_page_for_tenant(&s, ord, None, 1).expect("dlq");
        (
            queries::node_counters(&s).expect("node"),
            c.dead,
            page.entries[0].hook_id.clone(),
        )
    };
    assert!(dead > 0);
    let path = dir.to_str().expect("utf-8 path");
    let mut c = Console::spawn(&["console", "--store", path], &[], 80, 24);
    c.wait_for(&["READ-ONLY", "format 3", "Overview (node counters)"]);
    let s = c.screen();
    let pending_line = s
        .lines()
        .find(|l| l.contains("pending"))
        .expect("pending line");
    assert!(
        pending_line.contains(&num(node.pending)),
        "node pending {}: {pending_line}",
        node.pending
    );
    let dead_line = s
        .lines()
        .find(|l| l.contains("dead (DLQ)"))
        .expect("dead line");
    assert!(dead_line.contains(&num(node.dead)), "{dead_line}");

    // The console captures the mouse: a click on the tab bar's "4 DLQ"
    // opens the DLQ (column 38: " ", then "[1 Overview] ", " 2 Tenants  ",
    // " 3 Heatmap  ").
    assert_ne!(
        c.parser
            .lock()
            .expect("parser")
            .screen()
            .mouse_protocol_mode(),
        vt100::MouseProtocolMode::None
    );
    c.click(38, 1);
    c.wait_for(&["DLQ: all tenants"]);
    c.send("1");
    c.wait_for(&["Overview (node counters)"]);

    c.send(":tenant dead-only\r");
    c.wait_for(&["Tenant dead-only", &format!("dead {}", num(dead))]);
    c.send("d");
    c.wait_for(&[
        "DLQ: tenant dead-only",
        &format!("{} dead", num(dead)),
        &newest,
    ]);
    c.send("?");
    c.wait_for(&["Keys (j/k scroll; ? or Esc closes)", "Everywhere"]);
    // Scrolled to the end, help says why the write actions are hidden.
    c.send("\x1b[6~\x1b[6~\x1b[6~");
    c.wait_for(&["admin API"]);
    c.send("\x1b");
    c.send("q");
    c.wait_for(&["Tenant dead-only"]);
    c.send("q");
    c.wait_for(&["Overview (node counters)"]);
    c.send("q");
    let st = c.wait_exit();
    assert!(st.success(), "exit status {st:?}");
    c.assert_restored();
}

#[test]
fn a_panic_still_restores_the_terminal() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    fixture(&dir);
    let path = dir.to_str().expect("utf-8 path");
    let mut c = Console::spawn(
        &["console", "--store", path],
        &[("ANKUSA_CONSOLE_TEST_PANIC", "1")],
        80,
        24,
    );
    let st = c.wait_exit();
    assert!(!st.success());
    c.assert_restored();
    assert!(c.screen().contains("deliberate panic"), "{}", c.screen());
}

#[test]
fn follow_mode_sees_rows_a_running_writer_adds() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    // This process is the writer: it holds the primary (and its lock) for
    // the whole test, as a daemon would.
    let store = Store::create_or_open(&dir).expect("create");
    let add = |store: &Store, tenant: &str, n: u64| {
        let mut alloc = TenantAllocator::load(store, 1_000_000).expect("alloc");
        let now = ankusa_store::system_now_ms();
        let hooks: Vec<_> = (0..n)
            .map(|_| ankusa_store::fixture::Hook {
                envelope: Envelope {
                    received_at: now,
                    source_id: "src".into(),
                    tenant: tenant.into(),
                    idempotency_key: None,
                    event_type: None,
                    headers: vec![],
                    body: b"{}".to_vec(),
                },
                sinks: ankusa_store::transitions::SinkSet::first(1),
                archive: false,
            })
            .collect();
        ankusa_store::fixture::ingest(store, &mut alloc, &hooks).expect("ingest");
    };
    add(&store, "early", 5);
    let path = dir.to_str().expect("utf-8 path");
    let mut c = Console::spawn(
        &["console", "--store", path, "--refresh", "300ms"],
        &[],
        100,
        30,
    );
    c.wait_for(&["FOLLOW", &format!("daemon pid {}", std::process::id())]);
    c.wait_for(&["Overview (node counters)"]);
    let s = c.screen();
    let pending_line = s
        .lines()
        .find(|l| l.contains("pending"))
        .expect("pending line")
        .to_owned();
    assert!(
        pending_line.split_whitespace().any(|t| t == "5"),
        "{pending_line}"
    );
    // The writer adds rows while the console runs.
    add(&store, "late-arrival", 1234);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = c.screen();
        if s.lines()
            .any(|l| l.contains("pending") && l.contains("1,239"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the follower never saw the new rows:\n{s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    c.send(":tenant late-arrival\r");
    c.wait_for(&["Tenant late-arrival", "pending 1,234"]);
    c.send("Q");
    assert!(c.wait_exit().success());
    c.assert_restored();
    // The follower's directory lived outside the store and is gone.
    assert!(!dir.join("secondary").exists());
    drop(store);
}

#[test]
fn a_missing_store_is_a_clear_error_and_nothing_is_created() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing = tmp.path().join("no-such-store");
    let out = Command::new(BIN)
        .args(["console", "--store"])
        .arg(&missing)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no such directory"), "{err}");
    assert!(!missing.exists(), "the console created the directory");
}

#[test]
fn not_a_terminal_points_at_the_json_commands() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    fixture(&dir);
    let out = Command::new(BIN)
        .args(["console", "--store"])
        .arg(&dir)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ankusa tenants list --json"), "{err}");
}

#[test]
fn the_guided_migration_runs_in_the_real_console_and_opens_the_migrated_store() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    {
        let s = Store::create_v2(&dir).expect("v2 store");
        let spec = ankusa_store::fixture::FixtureSpec::new(30, 20_000, 3, 1_700_000_000_000);
        ankusa_store::fixture::write_v2(&s, &spec, |_, _| {}).expect("v2 fixture");
    }
    let path = dir.to_str().expect("utf-8 path");
    let mut c = Console::spawn(&["console", "--store", path], &[], 100, 30);
    c.wait_for(&["MIGRATION NEEDED", "format 2", "Guided upgrade"]);
    c.send("b");
    c.wait_for(&["written to", ".backup-"]);
    c.send("n");
    c.wait_for(&["rows to move"]);
    c.send("M");
    c.wait_for(&["Type \"migrate\""]);
    c.send("migrate\r");
    // Steps, then the check by itself.
    c.wait_for(&["OK:", "Enter opens the migrated store"]);
    assert!(c.screen().contains("100%"), "{}", c.screen());
    c.send("\r");
    c.wait_for(&["READ-ONLY", "format 3", "Overview (node counters)"]);
    c.send("q");
    let st = c.wait_exit();
    assert!(st.success(), "exit status {st:?}");
    c.assert_restored();
    let s = Store::open_read_only(&dir).expect("a format 3 store");
    assert!(ankusa_store::check::run(&s, |_, _| {}).expect("check").ok());
}

/// Beside a running daemon the console acts through its admin API: the
/// guarded replay (dry-run count, typed confirmation, progress, result)
/// runs as the daemon's audited job, and the counters on screen change.
#[test]
fn follow_mode_replays_through_the_daemons_admin_api_and_audits_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    fixture(&dir);
    common::write_config(
        tmp.path(),
        &common::config_with(
            "",
            "[[sources]]\nid = \"shop\"\n[[sources.sinks]]\nurl = \"http://127.0.0.1:9/\"\n",
        ),
    );
    let daemon = common::Daemon::start(tmp.path());
    replay_the_deadest_tenant_and_find_it_audited(&dir, &[], "FOLLOW", || {
        daemon.stop();
    });
}

/// With `--write` and no daemon, the same guarded replay runs as the same
/// audited job on the store the console holds.
#[test]
fn write_mode_replays_as_an_audited_job() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    fixture(&dir);
    replay_the_deadest_tenant_and_find_it_audited(&dir, &["--write"], "WRITE", || {});
}

/// Replays the tenant with the most dead rows through the console's guard
/// (`A`, its name, Enter), checks the counters on screen, quits, calls
/// `stopped` (after which nothing holds the store), and finds three audit
/// records (dry run, start, end) naming this OS user.
fn replay_the_deadest_tenant_and_find_it_audited(
    dir: &Path,
    extra: &[&str],
    mode: &str,
    stopped: impl FnOnce(),
) {
    let path = dir.to_str().expect("utf-8 path");
    let top = Command::new(BIN)
        .args([
            "tenants", "list", "--store", path, "--sort", "dead", "--limit", "1", "--json",
        ])
        .output()
        .expect("tenants list");
    let top: serde_json::Value = serde_json::from_slice(&top.stdout).expect("json");
    let tenant = top["tenants"][0]["id"]
        .as_str()
        .expect("a tenant")
        .to_owned();
    let dead = top["tenants"][0]["counters"]["dead"]
        .as_i64()
        .expect("dead");
    assert!(dead > 0);

    let mut args = vec!["console", "--store", path, "--refresh", "300ms"];
    args.extend_from_slice(extra);
    let mut c = Console::spawn(&args, &[], 100, 30);
    c.wait_for(&[mode, "Overview (node counters)"]);
    c.send(&format!(":tenant {tenant}\r"));
    c.wait_for(&[&format!("Tenant {tenant}"), &format!("dead {}", num(dead))]);
    c.send("A");
    c.wait_for(&[&format!("Dry run: {} row(s) would change", num(dead))]);
    c.send(&format!("{tenant}\r"));
    c.wait_for(&[&format!("Done: {} row(s) changed", num(dead))]);
    c.send("\x1b");
    c.wait_for(&[&format!("Tenant {tenant}"), "dead 0 "]);
    c.send("Q");
    assert!(c.wait_exit().success());
    c.assert_restored();
    stopped();

    let store = Store::open_read_only(dir).expect("open");
    let records = ankusa_store::audit::page(&store, None, 10).expect("audit");
    let text: Vec<String> = records
        .iter()
        .map(|r| String::from_utf8_lossy(&r.record).into_owned())
        .collect();
    assert_eq!(text.len(), 3, "{text:#?}");
    for (r, outcome) in text.iter().zip(["done", "started", "dry_run"]) {
        assert!(r.contains(&format!("\"outcome\":\"{outcome}\"")), "{r}");
        assert!(r.contains("\"name\":\"local:"), "{r}");
        assert!(r.contains(&format!("\"rows\":{dead}")), "{r}");
    }
}

/// Issue 33: the `:` prompt's history. ↑ brings back the last command,
/// in this session and in the next one (kept in `$XDG_STATE_HOME/ankusa/
/// history`, private to the user). Guard: without the file the second
/// console's ↑ shows nothing.
#[test]
fn the_command_prompt_remembers_commands_across_sessions() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    fixture(&dir);
    let state = tmp.path().join("state");
    let state_s = state.to_str().expect("utf-8");
    let path = dir.to_str().expect("utf-8 path");
    let env = [("XDG_STATE_HOME", state_s)];
    let mut c = Console::spawn(&["console", "--store", path], &env, 80, 24);
    c.wait_for(&["READ-ONLY", "Overview (node counters)"]);
    c.send(":sinks\r");
    c.wait_for(&["Sinks"]);
    c.send(":dlq\r");
    c.send(":\x1b[A");
    c.wait_for(&[":dlq"]);
    c.send("\x1b[A");
    c.wait_for(&[":sinks"]);
    c.send("\x1b");
    c.send("Q");
    assert!(c.wait_exit().success());
    let kept = std::fs::read_to_string(state.join("ankusa/history")).expect("history file");
    assert_eq!(kept, "sinks\ndlq\n");
    let mut c = Console::spawn(&["console", "--store", path], &env, 80, 24);
    c.wait_for(&["READ-ONLY", "Overview (node counters)"]);
    c.send(":\x1b[A");
    c.wait_for(&[":dlq"]);
    c.send("\x1b");
    c.send("Q");
    assert!(c.wait_exit().success());
}

/// Issue 33: `--no-mouse` (or `ANKUSA_NO_MOUSE=1`) leaves the mouse to the
/// terminal; by default the console captures it, and gives it back at exit.
#[test]
fn no_mouse_leaves_the_terminal_its_selection() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    fixture(&dir);
    let path = dir.to_str().expect("utf-8 path");
    let mode = |c: &Console| {
        c.parser
            .lock()
            .expect("parser")
            .screen()
            .mouse_protocol_mode()
    };
    for (args, env, captured) in [
        (vec!["console", "--store", path], vec![], true),
        (
            vec!["console", "--store", path, "--no-mouse"],
            vec![],
            false,
        ),
        (
            vec!["console", "--store", path],
            vec![("ANKUSA_NO_MOUSE", "1")],
            false,
        ),
    ] {
        let mut c = Console::spawn(&args, &env, 80, 24);
        c.wait_for(&["READ-ONLY", "Overview (node counters)"]);
        assert_eq!(
            mode(&c) != vt100::MouseProtocolMode::None,
            captured,
            "{args:?} {env:?}"
        );
        c.send("Q");
        assert!(c.wait_exit().success());
        assert_eq!(
            mode(&c),
            vt100::MouseProtocolMode::None,
            "given back at exit"
        );
    }
}

/// Issue 33: `y` on a DLQ row sends its hook id to the terminal's
/// clipboard as OSC 52 (`ESC ] 52 ; c ; base64 BEL`), and the footer says
/// what was copied.
#[test]
fn y_sends_the_selected_hook_id_as_osc_52() {
    use base64::Engine as _;
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    fixture(&dir);
    let newest = {
        let s = Store::open_read_only(&dir).expect("open");
        queries::dlq_page(&s, None, 1).expect("dlq").entries[0]
            .hook_id
            .clone()
    };
    let path = dir.to_str().expect("utf-8 path");
    let mut c = Console::spawn(&["console", "--store", path], &[], 100, 30);
    c.wait_for(&["READ-ONLY", "Overview (node counters)"]);
    c.send("4");
    c.wait_for(&[&newest]);
    c.send("y");
    c.wait_for(&["copied hook id"]);
    let want = format!(
        "\x1b]52;c;{}\x07",
        base64::engine::general_purpose::STANDARD.encode(newest.as_bytes())
    );
    let raw = c.raw.lock().expect("raw").clone();
    assert!(
        raw.windows(want.len()).any(|w| w == want.as_bytes()),
        "no OSC 52 with {newest} in what the console wrote"
    );
    c.send("Q");
    assert!(c.wait_exit().success());
}
