//! `ankusa demo`: the whole system, working, on this machine, with nothing
//! to configure.
//!
//! This module owns the demo's lifecycle: a store (a temporary directory
//! unless `--store` is given), a daemon on it listening on a loopback port
//! it picks, four loopback sinks ([`sinks`]), a load generator posting real
//! HTTP hooks ([`load`]), then either the operator console beside the
//! daemon or a headless run that ends with a summary ([`summary`]). See
//! docs/demo.md.
//!
//! Why the console runs as a child process (`ankusa console --store DIR`)
//! and not on a thread: the console recognises a running daemon by the
//! POSIX record lock on the store's `LOCK` file, and such locks are
//! invisible to the process that holds them. On a thread of this process
//! the console would open a frozen read-only snapshot instead of following
//! the daemon.
//!
//! Invariants:
//! - Shutdown order is loader, then daemon (which drains its deliveries),
//!   then sinks: every request the daemon makes finds its sink still up,
//!   and the store is closed before anyone reads it again.
//! - Delivery numbers come from the daemon (`/metrics`, then the store's
//!   node counters once it has stopped), never from the demo's own counts.
//! - While the console owns the terminal, nothing in this process writes
//!   to it: stderr is redirected to a log file until the console exits.

mod load;
mod sinks;
mod summary;

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::os::fd::{AsFd as _, AsRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ankusa_store::{queries, tenants, Store};
use base64::Engine as _;
use color_eyre::eyre::{bail, eyre, Result, WrapErr};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{oneshot, watch};

use ankusa_daemon::{Daemon, Settings, SystemClock};
use load::{LoadStats, Target, FLOOD_TENANT};
use sinks::{Behaviour, Observed, Sink};
use summary::{DaemonCounters, Summary};

/// How long a headless run waits, after the load stops, for tenants still
/// owed their first delivery.
const DRAIN: Duration = Duration::from_secs(5);
/// How often a headless run prints progress (when stderr is a terminal).
const PROGRESS_EVERY: Duration = Duration::from_secs(2);
/// The `payments` source's signing key (a demo value, not a secret).
const SIGNING_KEY: &[u8] = b"ankusa-demo-payments-signing-key";

/// What `ankusa demo` was asked for.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub store: Option<PathBuf>,
    pub no_console: bool,
    pub duration: Duration,
    pub seed: u64,
    pub json: bool,
    pub keep: bool,
}

/// `ankusa demo`.
pub fn run(opts: DemoOptions) -> Result<ExitCode> {
    if !opts.no_console && !std::io::stdout().is_terminal() {
        return Err(crate::failure::unavailable(
            "stdout is not a terminal: `ankusa demo` opens the interactive console; \
             run `ankusa demo --no-console` for a headless run that prints a summary \
             (add --json for machine-readable output)",
        ));
    }
    let place = Place::prepare(opts.store.as_deref(), opts.keep)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("ankusa-demo")
        .build()
        .wrap_err("cannot start the async runtime")?;
    let result = rt.block_on(run_demo(&opts, &place.store));
    // Tasks still parked (idle keep-alive connections) must not hold the
    // store directory's removal up.
    rt.shutdown_timeout(Duration::from_secs(5));
    let mut summary = result?;
    let (store, kept) = place.finish()?;
    summary.store = store.display().to_string();
    summary.store_kept = kept;
    if opts.json {
        crate::output::print_json(&summary)?;
    } else {
        print!("{}", summary.render());
        if kept {
            println!(
                "\nThe store is kept at {}: try `ankusa store check --store {0}` or \
                 `ankusa console --store {0}`.",
                store.display()
            );
        } else {
            println!("\nThe temporary store was removed (pass --keep or --store DIR to keep it).");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Where the store lives and whether it outlives the demo.
struct Place {
    /// The temporary directory holding the store, when `--store` was not
    /// given.
    temp: Option<tempfile::TempDir>,
    store: PathBuf,
    keep: bool,
}

impl Place {
    /// `--store DIR` is used as given when it is absent or empty, and
    /// reopened when it already holds a store (the daemon's boot then
    /// refuses one in use or of another format with its usual message).
    /// Anything else is refused: the demo never writes into a directory
    /// that is not a store.
    fn prepare(store: Option<&Path>, keep: bool) -> Result<Place> {
        let Some(dir) = store else {
            let temp = tempfile::Builder::new()
                .prefix("ankusa-demo-")
                .tempdir()
                .wrap_err("cannot create a temporary directory for the demo store")?;
            let store = temp.path().join("store");
            return Ok(Place {
                temp: Some(temp),
                store,
                keep,
            });
        };
        let dir = std::path::absolute(dir)
            .wrap_err_with(|| format!("cannot resolve {}", dir.display()))?;
        match std::fs::read_dir(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(eyre!(e).wrap_err(format!("cannot read {}", dir.display()))),
            Ok(mut entries) => {
                if entries.next().is_some() && !dir.join("CURRENT").exists() {
                    return Err(crate::failure::usage(format!(
                        "{} is not empty and is not an ankusa store: give `--store` a new or empty \
                         directory (or a store an earlier demo left)",
                        dir.display()
                    )));
                }
            }
        }
        Ok(Place {
            temp: None,
            store: dir,
            keep: true,
        })
    }

    /// Removes the temporary store unless it is kept. Returns the store's
    /// path and whether it still exists.
    fn finish(self) -> Result<(PathBuf, bool)> {
        match self.temp {
            None => Ok((self.store, true)),
            Some(temp) if self.keep => {
                let _root = temp.keep();
                Ok((self.store, true))
            }
            Some(temp) => {
                temp.close()
                    .wrap_err("cannot remove the demo's temporary store")?;
                Ok((self.store, false))
            }
        }
    }
}

/// The daemon's configuration: three sources, each delivering to the
/// healthy sink and one troubled one, and a dispatcher small enough that
/// the flood alone could fill it (`per_tenant` = `max_inflight`): only the
/// fair scheduler keeps room for everyone else.
fn config_text(store: &Path, sinks: &[Sink]) -> Result<String> {
    let url = |b: Behaviour| -> Result<String> {
        sinks
            .iter()
            .find(|s| s.behaviour == b)
            .map(|s| toml_string(&s.url))
            .ok_or_else(|| eyre!("the {} sink is missing", b.name()))
    };
    let secret = format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(SIGNING_KEY)
    );
    Ok(format!(
        r#"[store]
path = {store}

[http]
listen = "127.0.0.1:0"
shutdown_timeout = "10s"

[dispatch]
tick = "50ms"
max_inflight = 64
per_tenant = 64
per_sink = 64
drain_timeout = "2s"
reclaim_interval = "500ms"

[[sources]]
id = "{orders}"
tenant_header = "x-tenant"

[[sources.sinks]]
name = "healthy"
url = {healthy}
timeout = "5s"

[[sources.sinks]]
name = "slow"
url = {slow}
timeout = "5s"
max_attempts = 5
backoff_initial = "500ms"
backoff_max = "5s"

[[sources]]
id = "{payments}"
tenant_header = "x-tenant"
signing_secret = "{secret}"

[[sources.sinks]]
name = "healthy"
url = {healthy}
timeout = "5s"

[[sources.sinks]]
name = "flaky"
url = {flaky}
timeout = "5s"
max_attempts = 8
backoff_initial = "200ms"
backoff_max = "2s"
retry_after_max = "2s"

[[sources]]
id = "{signups}"
tenant_header = "x-tenant"

[[sources.sinks]]
name = "healthy"
url = {healthy}
timeout = "5s"

[[sources.sinks]]
name = "failing"
url = {failing}
timeout = "5s"
max_attempts = 3
backoff_initial = "100ms"
backoff_max = "1s"
"#,
        store = toml_string(&store.display().to_string()),
        orders = load::SOURCE_ORDERS,
        payments = load::SOURCE_PAYMENTS,
        signups = load::SOURCE_SIGNUPS,
        healthy = url(Behaviour::Healthy)?,
        slow = url(Behaviour::Slow)?,
        flaky = url(Behaviour::Flaky)?,
        failing = url(Behaviour::Failing)?,
    ))
}

/// A TOML basic string (quoted and escaped).
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// Boots everything, runs the console or the headless load, stops
/// everything, and gathers the summary.
async fn run_demo(opts: &DemoOptions, store: &Path) -> Result<Summary> {
    let origin = Instant::now();
    let observed = Arc::new(Observed::new(origin, FLOOD_TENANT));
    let (sinks_stop, sinks_stop_rx) = watch::channel(false);
    let mut sinks = Vec::new();
    for b in Behaviour::ALL {
        sinks.push(Sink::start(b, opts.seed, observed.clone(), sinks_stop_rx.clone()).await?);
    }

    let config = config_text(store, &sinks)?;
    let base_dir = store.parent().unwrap_or(store);
    let settings = Settings::parse(&config, Path::new("(the demo's configuration)"), base_dir)?;
    let mut daemon = Daemon::boot(settings, Arc::new(SystemClock))?;
    daemon.quiet();
    let listener = daemon.bind().await?;
    let addr = listener
        .local_addr()
        .wrap_err("cannot read the daemon's address")?;
    let base = format!("http://{addr}");
    let (daemon_stop, daemon_stop_rx) = oneshot::channel::<()>();
    let serving = tokio::spawn(daemon.serve(listener, async move {
        let _ = daemon_stop_rx.await;
    }));
    tracing::info!(%addr, store = %store.display(), "demo daemon serving");

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(load::CONCURRENCY)
        .build()
        .wrap_err("cannot build the load generator's HTTP client")?;
    let target = Arc::new(Target {
        client: client.clone(),
        base: base.clone(),
        signing_key: SIGNING_KEY.to_vec(),
        origin,
    });
    let stats = Arc::new(LoadStats::default());
    let (load_stop, load_stop_rx) = watch::channel(false);
    let loader = tokio::spawn(load::run(target, opts.seed, stats.clone(), load_stop_rx));

    let ran = if opts.no_console {
        headless(opts.duration, &client, &base, &stats, &observed).await
    } else {
        let announce = format!(
            "ankusa demo: daemon on {base}, store {}; sinks {}; opening the console (q quits, ? helps)",
            store.display(),
            sinks
                .iter()
                .map(|s| format!("{} {}", s.behaviour.name(), s.url))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!("{announce}");
        with_console(store, opts.duration, &load_stop).await
    };

    let _ = load_stop.send(true);
    let _ = loader.await;
    let load_seconds = origin
        .elapsed()
        .as_secs_f64()
        .min(opts.duration.as_secs_f64());
    if opts.no_console && ran.is_ok() {
        drain(&stats, &observed).await;
    }
    let end_ms = u64::try_from(origin.elapsed().as_millis()).unwrap_or(u64::MAX);
    let counters = match scrape(&client, &base).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the daemon's /metrics; its counters show as 0");
            DaemonCounters::default()
        }
    };
    // Close our connections so the daemon's graceful shutdown does not
    // wait on idle keep-alives.
    drop(client);

    let _ = daemon_stop.send(());
    let served = serving
        .await
        .map_err(|e| eyre!(e).wrap_err("the daemon task failed"))?;
    let code = served.wrap_err("the demo daemon failed")?;
    if code != ExitCode::SUCCESS {
        tracing::warn!("the demo daemon did not stop within http.shutdown_timeout");
    }
    let _ = sinks_stop.send(true);
    let mut sink_counts = BTreeMap::new();
    for s in sinks {
        let c = &s.counts;
        sink_counts.insert(
            s.behaviour.name().to_owned(),
            summary::SinkSummary {
                requests: c.requests.load(Ordering::Relaxed),
                ok: c.ok.load(Ordering::Relaxed),
                failed: c.failed.load(Ordering::Relaxed),
            },
        );
        s.join().await;
    }
    ran?;
    let queue = queue_at_exit(store)?;
    Ok(build_summary(Gathered {
        opts,
        load_seconds,
        end_ms,
        stats: &stats,
        observed: &observed,
        counters,
        queue,
        sinks: sink_counts,
    }))
}

/// Everything the summary is made of, gathered once the demo has stopped.
struct Gathered<'a> {
    opts: &'a DemoOptions,
    load_seconds: f64,
    /// When the demo stopped looking (ms since the origin).
    end_ms: u64,
    stats: &'a LoadStats,
    observed: &'a Observed,
    counters: DaemonCounters,
    queue: summary::QueueSummary,
    sinks: BTreeMap<String, summary::SinkSummary>,
}

fn build_summary(g: Gathered<'_>) -> Summary {
    let Gathered {
        opts,
        load_seconds,
        end_ms,
        stats,
        observed,
        counters,
        queue,
        sinks,
    } = g;
    let accepted = stats.first_accepted();
    let delivered = observed.first_deliveries();
    let light = accepted.keys().filter(|t| t.as_str() != FLOOD_TENANT);
    let minted = accepted.keys().filter(|t| t.starts_with("new-"));
    let refused = counters.refused();
    Summary {
        seed: opts.seed,
        load_seconds,
        store: String::new(),
        store_kept: false,
        ingest: summary::IngestSummary {
            sent: stats.sent.load(Ordering::Relaxed),
            errors: stats.errors.load(Ordering::Relaxed),
            accepted: counters.accepted(),
            duplicates: counters.duplicates(),
            refused: refused.values().sum(),
            refused_by_code: refused,
        },
        delivery: summary::DeliverySummary {
            attempts: counters.attempts,
            delivered: counters.delivered,
            retried: counters.retried,
            dead: counters.dead,
        },
        queue_at_exit: queue,
        sinks,
        tenants: summary::TenantsSummary {
            accepted: accepted.len() as u64,
            minted: accepted.keys().filter(|t| t.starts_with("new-")).count() as u64,
        },
        first_delivery: summary::FirstDelivery {
            light: summary::latency(light, &accepted, &delivered, end_ms),
            minted: summary::latency(minted, &accepted, &delivered, end_ms),
            flood: summary::FloodFirst {
                tenant: FLOOD_TENANT.to_owned(),
                ms: accepted
                    .get(FLOOD_TENANT)
                    .zip(delivered.get(FLOOD_TENANT))
                    .map(|(a, d)| d.saturating_sub(*a)),
            },
        },
        delivery_delay: summary::DelayBreakdown {
            light: observed.light_delay().stats(),
            flood: observed.flood_delay().stats(),
        },
    }
}

/// Runs the load for `duration` (or until SIGINT/SIGTERM), printing
/// progress to stderr when it is a terminal.
async fn headless(
    duration: Duration,
    client: &reqwest::Client,
    base: &str,
    stats: &LoadStats,
    observed: &Observed,
) -> Result<()> {
    let mut term = signal(SignalKind::terminate()).wrap_err("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).wrap_err("cannot handle SIGINT")?;
    let progress = std::io::stderr().is_terminal();
    let started = Instant::now();
    let end = tokio::time::sleep(duration);
    tokio::pin!(end);
    let mut every = tokio::time::interval(PROGRESS_EVERY);
    every.tick().await;
    loop {
        tokio::select! {
            _ = &mut end => return Ok(()),
            _ = term.recv() => {
                eprintln!("ankusa demo: SIGTERM: stopping early");
                return Ok(());
            }
            _ = int.recv() => {
                eprintln!("ankusa demo: SIGINT: stopping early");
                return Ok(());
            }
            _ = every.tick(), if progress => {
                let c = scrape(client, base).await.unwrap_or_default();
                eprintln!(
                    "demo {:>4.0}s/{:.0}s  sent {}  accepted {}  dup {}  refused {}  | delivered {}  retried {}  dead {}  | tenants {} ({} delivered)",
                    started.elapsed().as_secs_f64(),
                    duration.as_secs_f64(),
                    stats.sent.load(Ordering::Relaxed),
                    c.accepted(),
                    c.duplicates(),
                    c.refused().values().sum::<u64>(),
                    c.delivered,
                    c.retried,
                    c.dead,
                    stats.accepted_tenants(),
                    observed.delivered_tenants(),
                );
            }
        }
    }
}

/// Waits (at most [`DRAIN`]) until every tenant with an accepted hook has
/// had a delivery, so late arrivals are measured rather than cut off.
async fn drain(stats: &LoadStats, observed: &Observed) {
    let until = Instant::now() + DRAIN;
    while Instant::now() < until {
        let accepted = stats.first_accepted();
        let delivered = observed.first_deliveries();
        if accepted.keys().all(|t| delivered.contains_key(t)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs `ankusa console --store DIR` on this terminal until the operator
/// quits it; the load stops after `duration` while the daemon keeps
/// delivering. This process's stderr goes to a log file meanwhile.
async fn with_console(
    store: &Path,
    duration: Duration,
    load_stop: &watch::Sender<bool>,
) -> Result<()> {
    let exe =
        std::env::current_exe().wrap_err("cannot find the ankusa binary to run the console")?;
    let log = tempfile::Builder::new()
        .prefix("ankusa-demo-")
        .suffix(".log")
        .tempfile()
        .wrap_err("cannot create the demo's log file")?;
    let terminal: OwnedFd = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .wrap_err("cannot duplicate stderr")?;
    let for_console = terminal.try_clone().wrap_err("cannot duplicate stderr")?;
    nix::unistd::dup2(log.as_file().as_raw_fd(), 2).wrap_err("cannot redirect stderr")?;

    // From here on stderr is the log: every path goes through the restore
    // below.
    let waited = async {
        let mut child = tokio::process::Command::new(exe)
            .arg("console")
            .arg("--store")
            .arg(store)
            .arg("--refresh")
            .arg("1s")
            .stdin(Stdio::inherit())
            .stdout(Stdio::inherit())
            .stderr(Stdio::from(for_console))
            .spawn()
            .wrap_err("cannot start the console")?;
        watch_console(&mut child, duration, load_stop).await
    }
    .await;

    if let Err(e) = nix::unistd::dup2(terminal.as_raw_fd(), 2) {
        println!("ankusa demo: cannot restore stderr: {e}");
    }
    let logged = log.as_file().metadata().map(|m| m.len()).unwrap_or(0);
    if logged > 0 {
        match log.keep() {
            Ok((_, path)) => eprintln!(
                "ankusa demo: {logged} bytes were logged while the console ran: {}",
                path.display()
            ),
            Err(e) => eprintln!("ankusa demo: cannot keep the log: {e}"),
        }
    }
    let status = waited?;
    if !status.success() {
        bail!("the console exited with {status}");
    }
    Ok(())
}

async fn watch_console(
    child: &mut tokio::process::Child,
    duration: Duration,
    load_stop: &watch::Sender<bool>,
) -> Result<std::process::ExitStatus> {
    let mut term = signal(SignalKind::terminate()).wrap_err("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).wrap_err("cannot handle SIGINT")?;
    let end = tokio::time::sleep(duration);
    tokio::pin!(end);
    let mut loading = true;
    loop {
        tokio::select! {
            status = child.wait() => return status.wrap_err("cannot wait for the console"),
            _ = &mut end, if loading => {
                loading = false;
                let _ = load_stop.send(true);
                tracing::info!("the demo's load stopped; the daemon keeps delivering");
            }
            _ = term.recv() => forward_stop(child),
            _ = int.recv() => forward_stop(child),
        }
    }
}

/// Asks the console to stop (the operator's `q` is the usual way).
fn forward_stop(child: &tokio::process::Child) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
}

/// The daemon's `/metrics`, parsed.
async fn scrape(client: &reqwest::Client, base: &str) -> Result<DaemonCounters> {
    let text = client
        .get(format!("{base}/metrics"))
        .timeout(Duration::from_secs(5))
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?;
    Ok(DaemonCounters::parse(&text))
}

/// The store's node counters, read once the daemon has closed it.
fn queue_at_exit(store: &Path) -> Result<summary::QueueSummary> {
    let s = Store::open_read_only(store)
        .wrap_err_with(|| format!("cannot reopen {} to read its counters", store.display()))?;
    let node = queries::node_counters(&s)?;
    let flood_pending = match tenants::ord_of(&s, FLOOD_TENANT)? {
        Some(ord) => queries::counters(&s, ord)?.pending,
        None => 0,
    };
    Ok(summary::QueueSummary {
        pending: node.pending,
        scheduled: node.scheduled,
        inflight: node.inflight,
        dead: node.dead,
        flood_pending,
    })
}
