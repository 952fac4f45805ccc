//! `ankusa serve`: the daemon, as a library the `ankusa` binary calls.
//!
//! The crate stands on the floor above `ankusa-ops` (docs/architecture.md):
//! it uses the store, the fair scheduler and the operator operations, never
//! the console or the binary. Its face is [`run`] and [`Daemon`] (boot, bind,
//! serve), [`Settings`], [`DaemonError`], and what the binary's benches and
//! demo drive directly: [`plan_tick`] over an [`ActiveSet`], the connection
//! handling in [`listener`], [`Metrics`] and [`signature::verify`].
//!
//! This crate owns the daemon's lifecycle; the pieces live in:
//! - [`config`]: the TOML file, its defaults and ranges, and [`Settings`].
//! - [`reload`]: the live part of the configuration and its reloads.
//! - [`ingest`]: the HTTP ingest API and its refusals.
//! - [`writer`]: the one task that writes hooks, in synced group commits.
//! - [`signature`]: Standard Webhooks verification and token digests.
//! - [`outcome`]: the stable `error` codes and metrics labels.
//! - [`metrics`]: in-memory counters rendered as Prometheus text.
//! - [`clock`]: time as a parameter.
//!
//! Lifecycle invariants:
//! - Boot order is: open the store (a lock held by another process, a newer
//!   format or one needing migration are clear errors), claim the node id
//!   (recorded at the first boot; a `node.id` that differs is refused, as
//!   every hook id carries it), return every
//!   inflight row to due (the previous process died mid-delivery; its
//!   outcome was never recorded), load the allocator and sequence, start
//!   the writer, bind, and only then print the `listening on` line.
//! - Shutdown (SIGTERM or SIGINT): stop accepting connections, let every
//!   request in flight finish (the writer keeps committing, so each gets
//!   its real answer), then the writer drains its queue and stops, then
//!   the store closes. Exit 0. If requests are still running after
//!   `http.shutdown_timeout`, exit 1 without waiting further: nothing
//!   unacknowledged was promised, and everything acknowledged is synced.
//! - Dispatch ([`dispatch`], [`delivery`]) starts beside the ingest server
//!   when `dispatch.enabled` and shares the store handle, clock and
//!   metrics. On shutdown it stops claiming at once (with the signal), and
//!   after the writer has stopped it gives deliveries in flight
//!   `dispatch.drain_timeout` to finish; rows still inflight then are
//!   returned to due by the next boot.
//! - The circuit breaker task ([`breaker`]) runs when a sink configures a
//!   breaker, from the start to the signal; its pauses are store pauses,
//!   so a restart keeps them and the next run probes after their backoff.
//! - The archiver ([`archive`]) starts beside dispatch when
//!   `archive.enabled` and stops with the signal; an unsettled obligation
//!   is simply picked up by the next boot.
//! - A store that stops taking writes (out of descriptors, a full disk)
//!   is recovered in place by [`health::recover_loop`], which runs from the
//!   start to the signal; `/healthz` is not ready meanwhile.
//! - Reloads ([`reload`]): SIGHUP is handled from before the `listening on`
//!   line (its default action would end the process) to the signal; it and
//!   the admin API's `config:reload` apply the re-read file whole, swapping
//!   what ingest, dispatch, delivery and the admin API read at their next
//!   request, tick or attempt, or change nothing.
//! - The admin API ([`admin`]) is bound (socket, and TCP when configured)
//!   before the `listening on` line, resumes the jobs the last run left,
//!   and stops with the signal; its jobs stop between chunks and resume at
//!   the next boot.

mod admin;
mod archive;
mod batch;
mod breaker;
mod clock;
mod cluster;
mod config;
mod delivery;
mod dispatch;
mod error;
mod health;
mod history;
mod http;
mod ingest;
mod job_runner;
pub mod listener;
mod metrics;
mod notify;
mod open_files;
mod outcome;
mod per_sink;
mod recorder;
mod reload;
mod routing;
pub mod signature;
mod sink_control;
mod sink_health;
mod sink_room;
mod slots;
mod writer;

use std::future::Future;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use ankusa_store::{Store, StoreError};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

pub use clock::{Clock, SharedClock, SystemClock};
pub use config::{ConfigError, DispatchSettings, Settings};
pub use dispatch::{
    plan_tick, ActiveSet, InflightNow, SinkMap, SinkRoom, Steering, TickInput, TickPlan,
    TickPolicy, Turn, Visit,
};
pub use error::DaemonError;
pub use metrics::{without_node, Metrics};
use writer::{Writer, WriterHandle};

type Result<T> = std::result::Result<T, DaemonError>;

/// The configuration file a command means: `--config` (or
/// `ANKUSA_CONFIG`), else `./ankusa.toml`; an error that says what to do
/// when there is none.
pub fn config_path(config: Option<PathBuf>) -> Result<PathBuf> {
    let path = match config {
        Some(p) => p,
        None => {
            let p = PathBuf::from("ankusa.toml");
            if !p.exists() {
                return Err(DaemonError::NoConfig(
                    "no config file: pass --config FILE, set ANKUSA_CONFIG, or create ./ankusa.toml \
                     (ankusa.example.toml is a documented starting point)"
                        .into(),
                ));
            }
            p
        }
    };
    if !path.exists() {
        return Err(DaemonError::NoConfig(format!(
            "no config file at {}: pass --config FILE or set ANKUSA_CONFIG \
             (ankusa.example.toml is a documented starting point)",
            path.display()
        )));
    }
    Ok(path)
}

/// `ankusa serve --config FILE`.
pub fn run(config: Option<PathBuf>) -> Result<ExitCode> {
    let path = config_path(config)?;
    let settings = Settings::load(&path)?;
    let budget = open_files::raise(&settings).map_err(DaemonError::OpenFiles)?;
    tracing::info!(
        soft_before = budget.soft_before,
        soft = budget.soft,
        hard = budget.hard,
        needed = budget.needed,
        "open-file limit"
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("ankusa")
        .build()
        .map_err(DaemonError::io("cannot start the async runtime"))?;
    if let Some(c) = settings.cluster.clone() {
        return rt.block_on(cluster::run(settings, c, Arc::new(SystemClock)));
    }
    rt.block_on(async move {
        let daemon = Daemon::boot(settings, Arc::new(SystemClock))?;
        let listener = daemon.bind().await?;
        let stop = shutdown_signal()?;
        daemon.serve(listener, stop).await
    })
}

/// The node's identity: the one the store recorded, which `node.id` must
/// match when set; at a store's first boot, `node.id` or a generated one
/// (`n` and 8 random hex digits), recorded for good (docs/fleet.md).
fn claim_node(store: &Store, settings: &Settings) -> Result<ankusa_store::NodeIdentity> {
    use ankusa_store::node;
    let stored = node::identity(store).map_err(DaemonError::store("cannot read the node id"))?;
    match (stored, &settings.node_id) {
        (Some(n), Some(want)) if n.id != *want => Err(DaemonError::NodeIdChanged {
            store: settings.store_path.clone(),
            config: settings.config_path.clone(),
            configured: want.to_string(),
            stored: n.id.to_string(),
        }),
        (Some(n), _) => Ok(n),
        (None, want) => {
            let id = match want {
                Some(id) => id.clone(),
                None => {
                    let generated = format!("n{:08x}", rand::random::<u32>());
                    ankusa_store::NodeId::parse(&generated).map_err(|e| {
                        DaemonError::store("cannot generate a node id")(
                            ankusa_store::StoreError::Invalid(e.to_string()),
                        )
                    })?
                }
            };
            node::record_identity(store, id)
                .map_err(DaemonError::store("cannot record the node id in the store"))
        }
    }
}

/// A future that resolves on SIGTERM or SIGINT. Installed before the daemon
/// says it is listening, so a signal sent right after is never missed.
pub(crate) fn shutdown_signal() -> Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term =
        signal(SignalKind::terminate()).map_err(DaemonError::io("cannot handle SIGTERM"))?;
    let mut int =
        signal(SignalKind::interrupt()).map_err(DaemonError::io("cannot handle SIGINT"))?;
    Ok(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        eprintln!("ankusa: {name}: stopping (no new connections; finishing requests in flight)");
    })
}

/// Who a boot's own changes (the sinks it drops) are audited as.
fn boot_principal() -> ankusa_ops::access::Principal {
    ankusa_ops::access::Principal {
        name: "boot".into(),
        os_user: None,
        tenant: None,
    }
}

/// A booted daemon: store open and recovered, writer ready, not yet serving.
pub struct Daemon {
    settings: Settings,
    store: Arc<Store>,
    writer: Writer,
    handle: WriterHandle,
    metrics: Arc<Metrics>,
    /// The sinks' breakers and health, which delivery, dispatch and
    /// reloads share.
    control: Arc<sink_control::SinkControl>,
    clock: SharedClock,
    /// Print the `listening on` line (off for in-process benches, whose
    /// stdout is their report).
    announce: bool,
}

impl Daemon {
    /// Opens the store, recovers inflight rows and readies the writer.
    pub fn boot(settings: Settings, clock: SharedClock) -> Result<Daemon> {
        let store = Arc::new(open_store(&settings.store_path, settings.store_cache)?);
        Self::boot_on(settings, clock, store)
    }

    /// [`Daemon::boot`] on a store already open: a cluster member's, whose
    /// commits go through the replicated log (`cluster`).
    fn boot_on(mut settings: Settings, clock: SharedClock, store: Arc<Store>) -> Result<Daemon> {
        let node = claim_node(&store, &settings)?;
        tracing::info!(node = %node.id, since_seq = node.since_seq, "node identity");
        let now = clock.now_ms();
        let recovered = ankusa_store::transitions::recover_all_inflight(&store, now)
            .map_err(DaemonError::store("cannot recover inflight rows at boot"))?;
        if recovered > 0 {
            tracing::warn!(
                rows = recovered,
                "returned inflight rows to due (the last run stopped mid-delivery)"
            );
        }
        // Before anything dispatches: a tenant whose every marker was lost
        // (a crash inside a marker cleanup) would never be visited again.
        let healed = ankusa_store::transitions::repair_markers(&store)
            .map_err(DaemonError::store("cannot check the active index at boot"))?;
        if !healed.is_empty() {
            tracing::warn!(
                tenants = healed.len(),
                "put back the active marker of tenants whose first due row had none"
            );
        }
        // A store an earlier release wrote has no rows-waiting count per
        // sink yet: count it once, before the writer and the dispatcher
        // can move a row, which the recount's fold-then-put needs.
        if !ankusa_store::waiting::counted(&store)
            .map_err(DaemonError::store("cannot read the store at boot"))?
        {
            let started = std::time::Instant::now();
            let r = ankusa_store::waiting::recount_waiting(&store)
                .map_err(DaemonError::store("cannot count the rows waiting per sink"))?;
            tracing::info!(
                sinks = r.sinks,
                rows = r.rows,
                took_ms = started.elapsed().as_millis() as u64,
                "counted the rows waiting per sink (once, for a store an earlier release wrote)"
            );
        }
        // Sinks at the positions the last run's rows name, whatever their
        // order in the file now (`slots`), before anything reads them; a
        // sink the file takes out leaves only if nothing is owed to it,
        // checked as a reload checks it. After the recovery, so a row that
        // was in flight counts as due, and after the recount, so the count
        // is there to read.
        let known = ankusa_store::sinks::catalog(&store)
            .map_err(DaemonError::store("cannot read the sink catalog at boot"))?;
        let config = settings.config_path.clone();
        let refused = |reasons| DaemonError::SinksRefused {
            config: config.clone(),
            reasons,
        };
        let alignment =
            slots::align_all(&mut settings, &slots::of_catalog(&known), 0).map_err(refused)?;
        slots::check_leaving(
            &alignment.leaving,
            &mut |s: &ankusa_store::sinks::SinkRef| ankusa_store::waiting::owed(&store, s),
            None,
        )
        .map_err(DaemonError::store(
            "cannot count the rows owed to a sink at boot",
        ))?
        .map_err(refused)?;
        for id in &alignment.reordered {
            tracing::info!(
                source = %id,
                "the file lists this source's sinks in another order: each keeps the position its rows name"
            );
        }
        // What the console and the command line name sinks by when no
        // daemon answers: this configuration's sinks, and the tombstones.
        let mut catalog: Vec<_> = settings.sources.iter().flat_map(|s| s.catalog()).collect();
        catalog.extend(alignment.ghosts);
        ankusa_store::sinks::replace(&store, &catalog).map_err(DaemonError::store(
            "cannot record the sink catalog in the store",
        ))?;
        if let Err(e) = slots::forget(
            &store,
            &alignment.leaving,
            &boot_principal(),
            clock.now_ms(),
        ) {
            tracing::error!(error = %e, "cannot delete the limits and pauses of the dropped sinks");
        }
        let control = Arc::new(sink_control::SinkControl::for_sources(&settings.sources));
        let metrics = Arc::new(Metrics::rendering(control.clone()));
        metrics
            .recovered_inflight
            .fetch_add(recovered, std::sync::atomic::Ordering::Relaxed);
        for scope in breaker::orphans(&store, &control.breakers)
            .map_err(DaemonError::store("cannot read the pauses at boot"))?
        {
            tracing::warn!(
                %scope,
                "a circuit breaker paused this sink, which has no breaker configured now: \
                 nothing will probe or resume it; resume it with `ankusa sinks resume`"
            );
        }
        let (writer, handle) = Writer::new(
            store.clone(),
            clock.clone(),
            settings.writer.clone(),
            metrics.clone(),
        )
        .map_err(DaemonError::store("cannot load the tenant allocator"))?;
        tracing::info!(store = %settings.store_path.display(), recovered, "store open");
        Ok(Daemon {
            settings,
            store,
            writer,
            handle,
            metrics,
            control,
            clock,
            announce: true,
        })
    }

    /// Do not print the `listening on` line.
    pub fn quiet(&mut self) {
        self.announce = false;
    }

    /// Records the size of every committed batch (for `bench ingest`).
    pub fn log_batches(&mut self) -> Arc<Mutex<Vec<usize>>> {
        let log = Arc::new(Mutex::new(Vec::new()));
        self.writer.batch_log = Some(log.clone());
        log
    }

    /// Binds the configured listen address.
    pub async fn bind(&self) -> Result<TcpListener> {
        let addr = self.settings.listen;
        TcpListener::bind(addr)
            .await
            .map_err(DaemonError::io(format!(
                "cannot listen on {addr} (http.listen in {})",
                self.settings.config_path.display()
            )))
    }

    /// Serves until `stop` resolves, then shuts down gracefully. Returns
    /// the process exit code.
    pub async fn serve(
        self,
        listener: TcpListener,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<ExitCode> {
        let Daemon {
            settings,
            store,
            writer,
            handle,
            metrics,
            control,
            clock,
            announce,
        } = self;
        let writer_beats = writer.beats();
        let writer_thread = writer
            .spawn()
            .map_err(DaemonError::io("cannot start the writer thread"))?;
        let live = Arc::new(reload::Live::new(&settings));
        let dispatcher = if settings.dispatch.enabled {
            Some(dispatch::Dispatcher::with_live(
                store.clone(),
                clock.clone(),
                &settings,
                metrics.clone(),
                control.clone(),
                live.clone(),
            )?)
        } else {
            None
        };
        let reloader = Arc::new(reload::Reloader::new(
            live.clone(),
            store.clone(),
            control.clone(),
            clock.clone(),
            settings.clone(),
            announce,
        ));
        let clock_for_archive = clock.clone();
        let state = Arc::new(ingest::AppState {
            live: live.clone(),
            writer: handle,
            metrics: metrics.clone(),
            clock,
            permits: Arc::new(Semaphore::new(settings.max_requests)),
            body_timeout: settings.body_timeout,
            store: store.clone(),
        });
        let app = http::router(state, settings.max_body, settings.metrics);
        let addr: SocketAddr = listener
            .local_addr()
            .map_err(DaemonError::io("cannot read the bound address"))?;
        let jobs = Arc::new(job_runner::JobRunner::default());
        let node_history = Arc::new(history::History::default());
        let admin_state = Arc::new(admin::AdminState {
            store: store.clone(),
            reloader: reloader.clone(),
            clock: clock_for_archive.clone(),
            metrics: metrics.clone(),
            control: control.clone(),
            jobs: jobs.clone(),
            history: node_history.clone(),
            started: std::time::Instant::now(),
        });
        let admin_socket = if settings.admin.socket {
            let path = ankusa_ops::socket_path(&settings.store_path);
            Some(
                admin::bind_socket(&settings.store_path).map_err(DaemonError::io(format!(
                    "cannot create the admin socket {}",
                    path.display()
                )))?,
            )
        } else {
            None
        };
        let admin_tcp = match settings.admin.listen {
            Some(a) => Some(TcpListener::bind(a).await.map_err(DaemonError::io(format!(
                "cannot listen on {a} (admin.listen in {})",
                settings.config_path.display()
            )))?),
            None => None,
        };
        let admin_tcp_addr = admin_tcp.as_ref().and_then(|l| l.local_addr().ok());
        admin::resume(&admin_state).map_err(DaemonError::Resume)?;
        // Before the `listening on` line: SIGHUP's default action ends the
        // process, and a reload may follow the start at once.
        let hup = reload::hangups().map_err(DaemonError::io("cannot handle SIGHUP"))?;
        if announce {
            // Before the `listening on` line, which scripts wait for.
            if let Some(a) = admin_tcp_addr {
                println!("ankusa: admin API on http://{a}");
            }
            announce_listening(addr, &settings.store_path);
            notify::ready();
        }

        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            stop.await;
            if announce {
                notify::stopping();
            }
            let _ = stop_tx.send(true);
        });
        let hangups = tokio::spawn(reload::on_sighup(reloader.clone(), hup, stop_rx.clone()));
        let watchdog = notify::watchdog_interval()
            .filter(|_| announce)
            .map(|every| {
                let watched = notify::Watched {
                    writer: writer_beats,
                    ticks: settings
                        .dispatch
                        .enabled
                        .then(|| (metrics.clone(), settings.dispatch.tick)),
                };
                tokio::spawn(notify::watchdog(every, watched, stop_rx.clone()))
            });
        let recovery = tokio::spawn(health::recover_loop(
            store.clone(),
            metrics.clone(),
            stop_rx.clone(),
        ));
        let dispatch = dispatcher.map(|d| d.start(stop_rx.clone()));
        let sampler = history::start(
            store.clone(),
            clock_for_archive.clone(),
            node_history,
            stop_rx.clone(),
        );
        let breakers = breaker::start(
            store.clone(),
            clock_for_archive.clone(),
            control.breakers.clone(),
            jobs.clone(),
            stop_rx.clone(),
        );
        let archiver = settings.archive.enabled.then(|| {
            let a = archive::Archiver::new(
                store.clone(),
                clock_for_archive.clone(),
                settings.archive.clone(),
                metrics.clone(),
            );
            archive::start(a, stop_rx.clone())
        });
        let limits = listener::Limits {
            max_connections: settings.max_connections,
            header_timeout: settings.header_timeout,
        };
        let admin_limits = listener::Limits {
            max_connections: open_files::ADMIN_CONNECTIONS,
            ..limits
        };
        let mut admin_servers = Vec::new();
        if let Some(sock) = admin_socket {
            let app = admin::router(admin_state.clone());
            admin_servers.push(tokio::spawn(listener::serve(
                sock,
                app,
                admin_limits,
                metrics.clone(),
                "admin socket",
                stop_rx.clone(),
            )));
        }
        if let Some(tcp) = admin_tcp {
            let app = admin::router(admin_state.clone());
            admin_servers.push(tokio::spawn(listener::serve(
                tcp,
                app,
                admin_limits,
                metrics.clone(),
                "admin",
                stop_rx.clone(),
            )));
        }
        let mut server = tokio::spawn(listener::serve(
            listener,
            app,
            limits,
            metrics.clone(),
            "ingest",
            stop_rx.clone(),
        ));
        let mut stopping = stop_rx;
        let finished = tokio::select! {
            r = &mut server => Some(r),
            _ = stopping.wait_for(|s| *s) => None,
        };
        let finished = match finished {
            Some(r) => Some(r),
            None => tokio::time::timeout(settings.shutdown_timeout, &mut server)
                .await
                .ok(),
        };
        match finished {
            Some(Ok(())) => {}
            Some(Err(e)) => return Err(DaemonError::Server(e)),
            None => {
                eprintln!(
                    "ankusa: requests still running after http.shutdown_timeout ({}); exiting without them",
                    humantime::format_duration(settings.shutdown_timeout)
                );
                server.abort();
                return Ok(ExitCode::from(1));
            }
        }
        // The server and its connections are gone, and with them every
        // writer handle: the writer answers what is queued, then stops.
        let joined = tokio::task::spawn_blocking(move || writer_thread.join()).await;
        if !matches!(joined, Ok(Ok(()))) {
            return Err(DaemonError::Writer);
        }
        if let Some(d) = dispatch {
            d.shutdown().await;
        }
        if let Some(a) = archiver {
            a.shutdown().await;
        }
        let _ = breakers.await;
        let _ = sampler.await;
        for srv in admin_servers {
            if tokio::time::timeout(admin::SHUTDOWN_GRACE, srv)
                .await
                .is_err()
            {
                tracing::warn!("admin API requests still running at shutdown; leaving them");
            }
        }
        admin_state.jobs.shutdown().await;
        let _ = recovery.await;
        let _ = hangups.await;
        if let Some(w) = watchdog {
            let _ = w.await;
        }
        if settings.admin.socket {
            let _ = std::fs::remove_file(ankusa_ops::socket_path(&settings.store_path));
        }
        drop(admin_state);
        drop(store);
        let m = &metrics;
        if announce {
            eprintln!(
                "ankusa: stopped cleanly ({} hooks accepted, {} duplicates, {} batches)",
                m.outcome(outcome::Outcome::Accepted),
                m.outcome(outcome::Outcome::Duplicate),
                m.batches.load(std::sync::atomic::Ordering::Relaxed)
            );
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// The one line scripts and tests wait for, on stdout.
pub(crate) fn announce_listening(addr: SocketAddr, store: &Path) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "ankusa: listening on http://{addr} (store {})",
        store.display()
    );
    let _ = out.flush();
    tracing::info!(%addr, "listening");
}

/// Opens (or creates) the store as its one writer, RocksDB's memory within
/// `cache` bytes, with errors that say what to do.
pub(crate) fn open_store(path: &Path, cache: usize) -> Result<Store> {
    match Store::create_or_open_within(path, ankusa_store::MemoryBudget::new(cache)) {
        Ok(s) => Ok(s),
        Err(StoreError::Locked { .. }) => {
            let pid = ankusa_store::lock::holder(path).ok().flatten();
            Err(DaemonError::StoreInUse {
                path: path.to_owned(),
                pid,
            })
        }
        Err(e) => Err(DaemonError::store(format!(
            "cannot open the store at {}",
            path.display()
        ))(e)),
    }
}
