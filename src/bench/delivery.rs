//! `ankusa bench delivery`: delivery that keeps up with ingest, with the
//! daemon's default configuration.
//!
//! The real daemon (in process, on its own runtime; only its ports and
//! store path are set) delivers every hook to four loopback sinks: three
//! answer `200` at once, one after 200 ms (with the default `per_sink` of 64
//! it takes at most 320 deliveries a second). Hooks are posted open-loop at
//! a fixed rate for 60 s (10 s with `--quick`) by 1,000 tenants in turn;
//! beside them 50 light tenants post one hook each, spread over the run.
//!
//! Measured in one run: per sink, deliveries a second while hooks were
//! posted, against the hooks acknowledged a second; the rows waiting for
//! each sink when posting stops (the store's per-sink count, from
//! `/metrics`); and each light tenant's wait from its acknowledgement to
//! its first delivery.
//!
//! Rule: every healthy sink delivers at least 0.9 x the acknowledged rate,
//! ends with at most one second of ingest waiting for it, and every light
//! tenant is served. The slow sink is reported, never judged: above its 320
//! a second its backlog grows by design; what is judged is that it does not
//! hold the healthy sinks back.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use color_eyre::eyre::{bail, eyre, Result, WrapErr};
use serde::Serialize;

use crate::output::print_json;

/// Sinks of the one source; the last is the slow one.
const SINKS: usize = 4;
const SLOW: usize = SINKS - 1;
const SLOW_MS: u64 = 200;
const TENANTS: u64 = 1_000;
const LIGHT: usize = 50;
const CLIENTS: usize = 16;
/// A healthy sink's delivered rate against the acknowledged rate, at least.
const KEEP_UP: f64 = 0.9;

#[derive(Debug, Serialize)]
struct SinkCell {
    sink: usize,
    slow: bool,
    delivered: u64,
    delivered_per_s: f64,
    /// Rows waiting for it when posting stopped.
    waiting_at_end: i64,
    keeps_up: bool,
}

#[derive(Debug, Serialize)]
struct Report {
    quick: bool,
    seconds: f64,
    rate: f64,
    tenants: u64,
    acked: u64,
    refused: u64,
    acked_per_s: f64,
    /// Acknowledgement latency of the posted hooks while delivery runs
    /// (open-loop, from when each was due to its `202`).
    ack_p50_ms: f64,
    ack_p99_ms: f64,
    sinks: Vec<SinkCell>,
    light_tenants: usize,
    light_served: usize,
    light_p50_ms: f64,
    light_p99_ms: f64,
    light_max_ms: f64,
    /// The dispatcher's counters from start to the end of posting.
    dispatch: super::daemon_metrics::DispatchSeen,
    /// The lone tenant's drain, on a daemon of its own after the rest.
    drain: super::lone_drain::DrainCell,
    pass: bool,
    rule: String,
}

/// What the loopback sinks saw.
#[derive(Default)]
struct Seen {
    hits: [AtomicU64; SINKS],
    /// First delivery of each light tenant to a healthy sink.
    light: Mutex<HashMap<String, Instant>>,
}

pub fn run(quick: bool, json: bool) -> Result<ExitCode> {
    let (seconds, rate) = if quick {
        (10.0, 100.0)
    } else {
        (60.0, 1_000.0)
    };
    let tmp = tempfile::Builder::new()
        .prefix("ankusa-bench-delivery")
        .tempdir()?;
    let r = measure(tmp.path(), quick, seconds, rate)?;
    if json {
        print_json(&r)?;
    } else {
        print_report(&r);
    }
    Ok(if r.pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn measure(dir: &Path, quick: bool, seconds: f64, rate: f64) -> Result<Report> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("bench-sink")
        .build()
        .wrap_err("cannot start the sink runtime")?;
    let seen = Arc::new(Seen::default());
    let sink_addr = rt.block_on(sinks(seen.clone()))?;
    let sinks_toml: String = (0..SINKS)
        .map(|i| format!("[[sources.sinks]]\nname = \"s{i}\"\nurl = \"http://{sink_addr}/{i}\"\n"))
        .collect();
    // The defaults, but for where to listen and store.
    let config = format!(
        "[store]\npath = \"delivery-store\"\n[http]\nlisten = \"127.0.0.1:0\"\n\
         [[sources]]\nid = \"bench\"\ntenant_header = \"x-tenant\"\n{sinks_toml}"
    );
    let settings = ankusa_daemon::Settings::parse(&config, &dir.join("delivery.toml"), dir)?;
    let daemon = super::ingest::BenchDaemon::start(settings)?;
    let addr = daemon.addr;
    let total = (seconds * rate) as u64;
    let started = Instant::now();
    let (load, light) = rt.block_on(async move {
        let load = tokio::spawn(super::ingest::drive_open(addr, total, CLIENTS, rate, |i| {
            (
                "/v1/sources/bench/hooks",
                Some(format!("tenant-{}", i % TENANTS)),
                super::ingest::body_for(i),
            )
        }));
        let light = tokio::spawn(post_light(addr, seconds));
        (load.await, light.await)
    });
    let posted_s = started.elapsed().as_secs_f64();
    let hits_then: Vec<u64> = seen
        .hits
        .iter()
        .map(|h| h.load(Ordering::Relaxed))
        .collect();
    let scraped = rt.block_on(super::daemon_metrics::scrape(addr, SINKS));
    let (mut acks, refused) = load.wrap_err("the load task failed")??;
    let light = light.wrap_err("the light tenants' task failed")??;
    // Light tenants get a grace of one more run length to be served.
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < deadline && served(&seen, &light) < light.len() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (waiting, dispatch) = scraped?;
    daemon.stop()?;

    // The light tenants' hooks are delivered too: they count as acked.
    let acked = acks.len() as u64 + light.len() as u64;
    let ack_p50_ms = super::percentile(&mut acks, 50.0);
    let ack_p99_ms = super::percentile(&mut acks, 99.0);
    let acked_per_s = acked as f64 / posted_s;
    let sinks: Vec<SinkCell> = (0..SINKS)
        .map(|i| {
            let per_s = hits_then[i] as f64 / posted_s;
            let waiting_at_end = waiting.get(i).copied().unwrap_or(i64::MAX);
            SinkCell {
                sink: i,
                slow: i == SLOW,
                delivered: hits_then[i],
                delivered_per_s: per_s,
                waiting_at_end,
                keeps_up: per_s >= KEEP_UP * acked_per_s && waiting_at_end as f64 <= acked_per_s,
            }
        })
        .collect();
    let mut waits: Vec<f64> = {
        let firsts = seen
            .light
            .lock()
            .map_err(|_| eyre!("light tenants' record poisoned"))?;
        light
            .iter()
            .filter_map(|(t, acked_at)| {
                firsts
                    .get(t)
                    .map(|d| d.saturating_duration_since(*acked_at).as_secs_f64() * 1000.0)
            })
            .collect()
    };
    waits.sort_by(f64::total_cmp);
    let pct = |p: f64| -> f64 {
        if waits.is_empty() {
            return f64::NAN;
        }
        let i = ((waits.len() - 1) as f64 * p).round() as usize;
        waits[i.min(waits.len() - 1)]
    };
    let light_served = waits.len();
    let drain = super::lone_drain::measure(dir, quick)?;
    let pass = refused == 0
        && sinks.iter().filter(|s| !s.slow).all(|s| s.keeps_up)
        && light_served == light.len()
        && drain.pass;
    Ok(Report {
        quick,
        seconds: posted_s,
        rate,
        tenants: TENANTS,
        acked,
        refused,
        acked_per_s,
        ack_p50_ms,
        ack_p99_ms,
        sinks,
        light_tenants: light.len(),
        light_served,
        light_p50_ms: pct(0.5),
        light_p99_ms: pct(0.99),
        light_max_ms: waits.last().copied().unwrap_or(f64::NAN),
        dispatch,
        drain,
        pass,
        rule: format!(
            "each healthy sink delivers >= {KEEP_UP} x the acknowledged rate and ends with at most one second of ingest waiting; every light tenant served; no post refused; the lone tenant drains at >= 0.5 x per_tenant / sink latency"
        ),
    })
}

/// The four sinks on one loopback server: `/{i}`, the last one slow.
async fn sinks(seen: Arc<Seen>) -> Result<SocketAddr> {
    use axum::extract::{Path as UrlPath, State};
    use axum::http::HeaderMap;
    async fn hit(
        State(seen): State<Arc<Seen>>,
        UrlPath(i): UrlPath<usize>,
        headers: HeaderMap,
    ) -> &'static str {
        if i == SLOW {
            tokio::time::sleep(Duration::from_millis(SLOW_MS)).await;
        } else if let Some(t) = headers.get("ankusa-tenant").and_then(|v| v.to_str().ok()) {
            if t.starts_with("light-") {
                if let Ok(mut m) = seen.light.lock() {
                    m.entry(t.to_owned()).or_insert_with(Instant::now);
                }
            }
        }
        if let Some(h) = seen.hits.get(i) {
            h.fetch_add(1, Ordering::Relaxed);
        }
        ""
    }
    let app = axum::Router::new()
        .route("/{i}", axum::routing::post(hit))
        .with_state(seen);
    super::serve_loopback(app, "the bench sinks").await
}

/// Posts one hook for each light tenant, spread evenly over the run;
/// returns each tenant's acknowledgement time.
async fn post_light(addr: SocketAddr, seconds: f64) -> Result<Vec<(String, Instant)>> {
    let start = tokio::time::Instant::now();
    let mut out = Vec::with_capacity(LIGHT);
    let mut conn = None;
    for k in 0..LIGHT {
        let due = start + Duration::from_secs_f64((k as f64 + 0.5) * seconds / LIGHT as f64);
        tokio::time::sleep_until(due).await;
        let tenant = format!("light-{k:02}");
        let c = match conn.take() {
            Some(c) => c,
            None => super::ingest::Conn::open(addr).await?,
        };
        let (status, _, c) = c
            .send(
                "/v1/sources/bench/hooks",
                Some(&tenant),
                b"{\"light\":true}",
            )
            .await?;
        if status != 202 {
            bail!("light tenant {tenant}: answered {status}");
        }
        out.push((tenant, Instant::now()));
        conn = Some(c);
    }
    Ok(out)
}

fn served(seen: &Seen, light: &[(String, Instant)]) -> usize {
    seen.light.lock().map_or(0, |m| {
        light.iter().filter(|(t, _)| m.contains_key(t)).count()
    })
}

fn print_report(r: &Report) {
    println!(
        "delivery bench: {:.0} hooks/s asked for {:.1} s from {} tenants (+{} light), 4 sinks (one answers after {SLOW_MS} ms), default configuration",
        r.rate, r.seconds, r.tenants, r.light_tenants
    );
    println!(
        "acknowledged {} ({:.0}/s), refused {}; acknowledgement p50 {:.2} ms, p99 {:.2} ms while delivering",
        r.acked, r.acked_per_s, r.refused, r.ack_p50_ms, r.ack_p99_ms
    );
    println!("sink   delivered   per s   of acked   waiting at end   keeps up");
    for s in &r.sinks {
        println!(
            "s{}{:<5}{:>10} {:>7.0} {:>9.2}x {:>16}   {}",
            s.sink,
            if s.slow { " slow" } else { "" },
            s.delivered,
            s.delivered_per_s,
            s.delivered_per_s / r.acked_per_s.max(f64::MIN_POSITIVE),
            s.waiting_at_end,
            if s.slow {
                "(not judged)"
            } else if s.keeps_up {
                "yes"
            } else {
                "NO"
            }
        );
    }
    println!(
        "light tenants: {} of {} served; first delivery after the ack p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        r.light_served, r.light_tenants, r.light_p50_ms, r.light_p99_ms, r.light_max_ms
    );
    let d = &r.dispatch;
    let per_tick = |v: u64| v as f64 / d.ticks.max(1) as f64;
    println!(
        "dispatch: {} ticks ({} refills), mean {:.1} ms, {:.0} tenants visited and {:.1} rows claimed a tick; {} tenants quiet at the end",
        d.ticks,
        d.refills,
        d.tick_seconds * 1000.0 / d.ticks.max(1) as f64,
        per_tick(d.tenants_visited),
        per_tick(d.rows_claimed),
        d.tenants_quiet
    );
    super::lone_drain::print(&r.drain);
    println!(
        "rule: {}\nresult: {}",
        r.rule,
        if r.pass { "PASS" } else { "FAIL" }
    );
}
