//! The lone tenant's drain, a cell of `ankusa bench delivery` (issue 19:
//! "one tenant's drain against a 1 ms sink >= 0.5 x per_tenant / sink
//! latency").
//!
//! A fresh daemon with its default configuration and one sink that answers
//! `200` after a fixed delay; one tenant posts its whole backlog through the
//! batch endpoint, then the cell waits until the sink has seen every hook.
//! The drain rate runs from the first post to the last delivery, so the
//! posting counts against it.
//!
//! Why it is a cell of its own: this is the case the tick used to bound (a
//! slot freed by a finished delivery waited for the next tick, so a lone
//! tenant drained at `per_tenant / tick`, 320 a second with the defaults)
//! and the one `per_tenant` used to cap while the node's other slots sat
//! idle. The rule's right side is `per_tenant / latency` with the latency
//! the sink actually held each request (its delay plus the timer's
//! lateness), not the round trip, so a slow client does not lower the bar.
//!
//! The full run uses a 1 ms sink, the case. `--quick` (run by
//! `make test` on a debug build) uses a 20 ms sink: the same rule, at a rate
//! a debug build on a busy machine can deliver, and still far above what a
//! tick-bound dispatcher reaches (`per_tenant` / 100 ms).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use color_eyre::eyre::{bail, Result, WrapErr};
use serde::Serialize;

/// The rule: drained per second >= this x per_tenant / held latency.
const SHARE: f64 = 0.5;
/// Entries per batch request.
const ENTRIES: u64 = 100;
/// Connections posting the backlog.
const CLIENTS: usize = 4;

#[derive(Debug, Serialize)]
pub(super) struct DrainCell {
    pub hooks: u64,
    /// The sink's configured delay.
    pub sink_delay_ms: u64,
    /// Mean time the sink held a request (delay plus timer lateness).
    pub sink_held_ms: f64,
    pub per_tenant: u32,
    /// Most deliveries the sink had in flight at once.
    pub peak_in_flight: i64,
    /// Time to post the backlog (acknowledged).
    pub post_seconds: f64,
    /// From the first post to the last delivery.
    pub seconds: f64,
    pub delivered: u64,
    pub delivered_per_s: f64,
    /// `SHARE` x per_tenant / held latency.
    pub target_per_s: f64,
    /// The drain daemon's dispatcher, start to end.
    pub dispatch: super::daemon_metrics::DispatchSeen,
    pub pass: bool,
}

/// What the sink saw.
#[derive(Default)]
struct Sink {
    hits: AtomicU64,
    in_flight: AtomicI64,
    peak: AtomicI64,
    held_us: AtomicU64,
    last: std::sync::Mutex<Option<Instant>>,
}

pub(super) fn measure(dir: &Path, quick: bool) -> Result<DrainCell> {
    let (hooks, delay_ms) = if quick { (2_000, 20) } else { (20_000, 1) };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("bench-sink")
        .build()
        .wrap_err("cannot start the sink runtime")?;
    let sink = Arc::new(Sink::default());
    let sink_addr = rt.block_on(serve_sink(sink.clone(), delay_ms))?;
    // The defaults, but for where to listen and store.
    let config = format!(
        "[store]\npath = \"drain-store\"\n[http]\nlisten = \"127.0.0.1:0\"\n\
         [[sources]]\nid = \"lone\"\ntenant_header = \"x-tenant\"\n\
         [[sources.sinks]]\nname = \"fast\"\nurl = \"http://{sink_addr}/\"\n"
    );
    let settings = ankusa_daemon::Settings::parse(&config, &dir.join("drain.toml"), dir)?;
    let per_tenant = settings.dispatch.per_tenant;
    let daemon = super::ingest::BenchDaemon::start(settings)?;
    let addr = daemon.addr;
    let started = Instant::now();
    let posted = rt.block_on(post(addr, hooks));
    let post_seconds = started.elapsed().as_secs_f64();
    let result = posted.and_then(|()| {
        // Generous: a tick-bound dispatcher takes hooks / (per_tenant / 100 ms).
        let deadline = Instant::now() + Duration::from_secs(120);
        while sink.hits.load(Ordering::Relaxed) < hooks {
            if Instant::now() > deadline {
                bail!(
                    "the lone tenant's backlog did not drain within 120 s ({} of {hooks} delivered)",
                    sink.hits.load(Ordering::Relaxed)
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    });
    let scraped = rt.block_on(super::daemon_metrics::scrape(addr, 1));
    daemon.stop()?;
    result?;
    let (_, dispatch) = scraped?;
    let last = sink
        .last
        .lock()
        .ok()
        .and_then(|l| *l)
        .unwrap_or_else(Instant::now);
    let seconds = last.saturating_duration_since(started).as_secs_f64();
    let delivered = sink.hits.load(Ordering::Relaxed);
    let sink_held_ms =
        sink.held_us.load(Ordering::Relaxed) as f64 / 1000.0 / delivered.max(1) as f64;
    let delivered_per_s = delivered as f64 / seconds.max(f64::MIN_POSITIVE);
    let target_per_s =
        SHARE * f64::from(per_tenant) / (sink_held_ms / 1000.0).max(f64::MIN_POSITIVE);
    Ok(DrainCell {
        hooks,
        sink_delay_ms: delay_ms,
        sink_held_ms,
        per_tenant,
        peak_in_flight: sink.peak.load(Ordering::Relaxed),
        post_seconds,
        seconds,
        delivered,
        delivered_per_s,
        target_per_s,
        dispatch,
        pass: delivered >= hooks && delivered_per_s >= target_per_s,
    })
}

pub(super) fn print(c: &DrainCell) {
    println!(
        "lone tenant: {} hooks posted in {:.2} s, drained in {:.2} s: {:.0}/s against a sink held {:.2} ms (delay {} ms), peak {} in flight (per_tenant {}); target >= {SHARE} x per_tenant / held = {:.0}/s: {}",
        c.hooks,
        c.post_seconds,
        c.seconds,
        c.delivered_per_s,
        c.sink_held_ms,
        c.sink_delay_ms,
        c.peak_in_flight,
        c.per_tenant,
        c.target_per_s,
        if c.pass { "met" } else { "NOT met" }
    );
    let d = &c.dispatch;
    println!(
        "lone tenant's dispatch: {} ticks ({} refills), mean {:.2} ms, {:.1} rows claimed a tick",
        d.ticks,
        d.refills,
        d.tick_seconds * 1000.0 / d.ticks.max(1) as f64,
        d.rows_claimed as f64 / d.ticks.max(1) as f64
    );
}

/// The one sink: answers `200` after `delay_ms`, counting what it holds.
async fn serve_sink(sink: Arc<Sink>, delay_ms: u64) -> Result<SocketAddr> {
    use axum::extract::State;
    async fn hit(State((sink, delay)): State<(Arc<Sink>, Duration)>) -> &'static str {
        let now = sink.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        sink.peak.fetch_max(now, Ordering::Relaxed);
        let t = Instant::now();
        tokio::time::sleep(delay).await;
        let held = u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX);
        sink.held_us.fetch_add(held, Ordering::Relaxed);
        sink.in_flight.fetch_sub(1, Ordering::Relaxed);
        sink.hits.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut l) = sink.last.lock() {
            *l = Some(Instant::now());
        }
        ""
    }
    let app = axum::Router::new()
        .route("/", axum::routing::post(hit))
        .with_state((sink, Duration::from_millis(delay_ms)));
    super::serve_loopback(app, "the drain sink").await
}

/// Posts `hooks` hooks of one tenant, [`ENTRIES`] a batch request, from
/// [`CLIENTS`] connections; fails unless every entry was accepted.
async fn post(addr: SocketAddr, hooks: u64) -> Result<()> {
    let requests = hooks.div_ceil(ENTRIES);
    let (answers, refused) = super::ingest::drive_requests(
        addr,
        requests,
        CLIENTS,
        lone_batch,
        super::ingest::batch_wholly_accepted,
    )
    .await?;
    if refused > 0 || answers.len() as u64 != requests {
        bail!("posting the lone tenant's backlog: {refused} of {requests} batch requests not wholly accepted");
    }
    Ok(())
}

/// Batch request `i` of the lone tenant.
fn lone_batch(i: u64) -> super::ingest::Req {
    super::ingest::batch_of(
        i,
        ENTRIES,
        |_| "lone".to_owned(),
        "/v1/sources/lone/hooks:batch",
    )
}
