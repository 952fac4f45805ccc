//! Helpers for end-to-end tests of `ankusa serve`: run the real binary on a
//! loopback port with a real store, talk to it over HTTP, stop it with a
//! signal, and inspect the store afterwards.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

pub const BIN: &str = env!("CARGO_BIN_EXE_ankusa");

/// A running `ankusa serve`.
pub struct Daemon {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub store: PathBuf,
    pub stderr_path: PathBuf,
    /// `http://127.0.0.1:PORT` of the admin API when `admin.listen` is set.
    pub admin: Option<String>,
}

/// Writes `config` (which should use `path = "store"` and `listen =
/// "127.0.0.1:0"`) into `dir/ankusa.toml`.
pub fn write_config(dir: &Path, config: &str) -> PathBuf {
    let path = dir.join("ankusa.toml");
    std::fs::write(&path, config).expect("write config");
    path
}

/// A config with the given `[[sources]]` tables appended to a base that
/// listens on a free loopback port and keeps the store in `dir/store`.
/// Dispatch is off: these are ingest tests, and their rows must stay where
/// ingest put them (the sinks are unreachable). Dispatch tests use
/// [`config_dispatching`].
pub fn config_with(sections: &str, sources: &str) -> String {
    format!(
        "[store]\npath = \"store\"\n\n[http]\nlisten = \"127.0.0.1:0\"\n\n[dispatch]\nenabled = false\n\n{sections}\n\n{sources}\n"
    )
}

/// Like [`config_with`] with dispatch on, configured by `dispatch` (the
/// body of the `[dispatch]` table).
pub fn config_dispatching(dispatch: &str, sections: &str, sources: &str) -> String {
    format!(
        "[store]\npath = \"store\"\n\n[http]\nlisten = \"127.0.0.1:0\"\n\n[dispatch]\n{dispatch}\n\n{sections}\n\n{sources}\n"
    )
}

impl Daemon {
    /// Starts the daemon on `dir/ankusa.toml` and waits for its
    /// `listening on` line.
    pub fn start(dir: &Path) -> Daemon {
        Self::try_start(dir).unwrap_or_else(|e| panic!("daemon did not start: {e}"))
    }

    pub fn try_start(dir: &Path) -> Result<Daemon, String> {
        Self::try_start_env(dir, &[])
    }

    /// [`Daemon::start`] with these variables set in its environment.
    pub fn start_env(dir: &Path, env: &[(&str, &str)]) -> Daemon {
        Self::try_start_env(dir, env).unwrap_or_else(|e| panic!("daemon did not start: {e}"))
    }

    pub fn try_start_env(dir: &Path, env: &[(&str, &str)]) -> Result<Daemon, String> {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("daemon.log"))
            .map_err(|e| e.to_string())?;
        let mut child = Command::new(BIN)
            .arg("serve")
            .arg("--config")
            .arg(dir.join("ankusa.toml"))
            .env("ANKUSA_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| e.to_string())?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                for (marker, admin) in [("admin API on ", true), ("listening on ", false)] {
                    if let Some(rest) = line.split(marker).nth(1) {
                        let url = rest.split_whitespace().next().unwrap_or("").to_owned();
                        let _ = tx.send((admin, url));
                    }
                }
            }
        });
        let mut admin = None;
        let listening = loop {
            match rx.recv_timeout(Duration::from_secs(60)) {
                Ok((true, url)) => admin = Some(url),
                Ok((false, url)) => break Some(url),
                Err(_) => break None,
            }
        };
        match listening {
            Some(base) => Ok(Daemon {
                child: Some(child),
                base,
                store: dir.join("store"),
                stderr_path: dir.join("daemon.log"),
                admin,
            }),
            None => {
                let _ = child.kill();
                let status = child.wait().map_err(|e| e.to_string())?;
                let log = std::fs::read_to_string(dir.join("daemon.log")).unwrap_or_default();
                Err(format!(
                    "exited with {status} before listening; log:\n{log}"
                ))
            }
        }
    }

    pub fn url(&self, source: &str) -> String {
        format!("{}/v1/sources/{source}/hooks", self.base)
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.as_ref().map_or(0, |c| c.id() as i32))
    }

    /// SIGTERM, then waits for the exit.
    pub fn stop(mut self) -> ExitStatus {
        self.signal_and_wait(Signal::SIGTERM)
    }

    /// SIGTERM, then waits for the exit, which must be 0 (the documented
    /// status of a clean stop, whatever the load): otherwise panics with
    /// the status and the end of the daemon's log, so a failure says why.
    pub fn stop_clean(mut self) {
        let status = self.signal_and_wait(Signal::SIGTERM);
        assert!(
            status.success(),
            "the daemon did not stop cleanly on SIGTERM: {status}; its log ends:\n{}",
            self.log_tail(60)
        );
    }

    /// The last `lines` lines of the daemon's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// SIGKILL, then waits for the exit.
    pub fn kill9(mut self) -> ExitStatus {
        self.signal_and_wait(Signal::SIGKILL)
    }

    /// Waits for an exit caused elsewhere (a signal the test sent itself).
    pub fn stop_wait(mut self) -> ExitStatus {
        self.wait_exit()
    }

    fn signal_and_wait(&mut self, sig: Signal) -> ExitStatus {
        if let Some(child) = &self.child {
            kill(Pid::from_raw(child.id() as i32), sig).expect("signal daemon");
        }
        self.wait_exit()
    }

    fn wait_exit(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("daemon already stopped");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = child.try_wait().expect("wait daemon") {
                return st;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                let log = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(60).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                panic!(
                    "the daemon did not exit within 60 s; its log ends:\n{}",
                    tail.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `ankusa store check` on a stopped store; panics with its output
/// unless it passes.
pub fn store_check(store: &Path) {
    store_check_when(store, "at the end");
}

/// [`store_check`], saying `when` it ran in the failure.
pub fn store_check_when(store: &Path, when: &str) {
    let out = Command::new(BIN)
        .args(["store", "check", "--store"])
        .arg(store)
        .output()
        .expect("run store check");
    assert!(
        out.status.success(),
        "store check failed {when} ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A `reqwest` client with short timeouts (a test must never hang).
/// Serves `app` on a free loopback port (a test's sink); returns
/// `http://127.0.0.1:PORT`.
pub async fn serve_loopback(app: axum::Router) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    format!("http://{addr}")
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// Parses a hook id (`hk_<node>_<16 hex>` or `hk_<16 hex>`) into its seq.
pub fn seq_of(id: &str) -> u64 {
    ankusa_store::HookId::parse(id).expect("hook id").hook.0
}

/// A Standard Webhooks `v1,` signature.
pub fn sign(key: &[u8], id: &str, ts: u64, body: &[u8]) -> String {
    use base64::Engine as _;
    use hmac::Mac as _;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("hmac key");
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(body);
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    )
}

pub fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// The daemon's `/metrics` text, from its ingest listener.
pub async fn metrics_text(c: &reqwest::Client, d: &Daemon) -> String {
    c.get(format!("{}/metrics", d.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The daemon's `/metrics` text with the `node` label taken off every
/// sample, for tests that look for whole lines of one node's page.
pub async fn metrics_without_node(c: &reqwest::Client, d: &Daemon) -> String {
    let mut out = String::new();
    for l in metrics_text(c, d).await.lines() {
        match l.rsplit_once(' ') {
            Some((series, v)) if !l.starts_with('#') => {
                out.push_str(&format!("{} {v}\n", ankusa_daemon::without_node(series)));
            }
            _ => {
                out.push_str(l);
                out.push('\n');
            }
        }
    }
    out
}

/// Reads one sample from the daemon's `/metrics`: `name` is the series
/// as the page writes it without the `node` label every sample carries
/// (`ankusa_queue_rows{state="dead"}`).
pub async fn metric(c: &reqwest::Client, d: &Daemon, name: &str) -> u64 {
    metrics_text(c, d)
        .await
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            if ankusa_daemon::without_node(series) != name {
                return None;
            }
            value.trim().parse::<f64>().ok()
        })
        .map_or(0, |v| v as u64)
}

/// The store's RocksDB opened directly (every family with its options), to
/// damage or count what the store's own API will not: a stopped store only.
pub fn raw_open(path: impl AsRef<Path>) -> rocksdb::DB {
    let path = path.as_ref();
    let names = rocksdb::DB::list_cf(&rocksdb::Options::default(), path).expect("list families");
    let cfs: Vec<_> = names
        .iter()
        .map(|n| {
            let f = ankusa_store::Family::from_name(n).expect("a known family");
            rocksdb::ColumnFamilyDescriptor::new(n, ankusa_store::schema::family_options(f))
        })
        .collect();
    rocksdb::DB::open_cf_descriptors(&rocksdb::Options::default(), path, cfs).expect("raw open")
}

/// Sends `request` as raw bytes on a new connection to `base`
/// (`http://host:port`) and reads until the server closes: the status (0
/// when there was no answer) and everything it sent.
pub fn raw_http(base: &str, request: &[u8]) -> (u16, String) {
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    // The server may answer and close before the whole body is written.
    let _ = s.write_all(request);
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// One raw answer, split.
#[derive(Debug)]
pub struct RawAnswer {
    pub status: u16,
    /// The head, header names lowercased.
    pub head: String,
    pub body: String,
}

impl RawAnswer {
    /// The `error` code of a JSON body, if the body is JSON.
    pub fn code(&self) -> Option<String> {
        let v: serde_json::Value = serde_json::from_str(&self.body).ok()?;
        v.get("error")?.as_str().map(str::to_owned)
    }

    pub fn is_json(&self) -> bool {
        self.head.contains("content-type: application/json")
    }
}

/// [`raw_http`], split into head and body.
pub fn raw(base: &str, request: &[u8]) -> RawAnswer {
    let (status, text) = raw_http(base, request);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    RawAnswer {
        status,
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

/// Runs the command line, with the store and backtrace variables of the
/// test's own environment removed.
pub fn ankusa(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .env_remove("ANKUSA_STORE")
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap()
}

/// [`ankusa`] off the runtime's workers, for async tests: its exit code
/// (-1 for a signal), standard output and standard error.
pub async fn ankusa_async(args: &[&str]) -> (i32, String, String) {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = ankusa(&a);
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    })
    .await
    .unwrap()
}

/// [`ankusa`] that must succeed; its standard output.
pub fn ankusa_ok(args: &[&str]) -> String {
    let o = ankusa(args);
    assert!(
        o.status.success(),
        "ankusa {args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// [`ankusa_ok`] of a `--json` command; its answer.
pub fn ankusa_json(args: &[&str]) -> serde_json::Value {
    let out = ankusa_ok(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

/// A JSON object's keys, sorted: what a test compares with the keys a doc
/// names.
pub fn keys_of(v: &serde_json::Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect();
    k.sort();
    k
}
