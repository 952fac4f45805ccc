//! `ankusa bench ingest`: what the HTTP ingest path costs over the store.
//!
//! One run, two measurements on the same machine and disk:
//! - **http**: the real daemon (config, router, writer, synced group
//!   commits) on a loopback port, driven by many concurrent clients posting
//!   small bodies across 100 tenants. Acknowledged hooks per second, and
//!   the p50/p99 time from sending a request to reading its `202`.
//! - **raw**: the ceiling: the very batch sizes the daemon committed,
//!   replayed straight into a fresh store (tenant resolution, ingest
//!   transitions, one synced commit per batch), with no HTTP, no queue and
//!   no linger.
//!
//! Pass: http / raw >= 0.5. A ratio compares two cells of one run, so the
//! rule holds on any disk; the absolute figures only describe this machine.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use ankusa_store::tenants::TenantAllocator;
use ankusa_store::transitions::{self, IngestHook};
use ankusa_store::{Batch, Envelope, Store};
use color_eyre::eyre::{bail, eyre, Result, WrapErr};
use serde::Serialize;

use crate::cli::print_json;
use crate::daemon::{Daemon, Settings, SystemClock};

const TENANTS: u64 = 100;
const BODY_BYTES: usize = 256;
const PASS_RATIO: f64 = 0.5;

#[derive(Debug, Serialize)]
struct HttpCell {
    hooks: u64,
    seconds: f64,
    hooks_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    batches: usize,
    mean_batch: f64,
    refused: u64,
}

#[derive(Debug, Serialize)]
struct RawCell {
    hooks: u64,
    seconds: f64,
    hooks_per_s: f64,
    batches: usize,
}

#[derive(Debug, Serialize)]
struct Report {
    quick: bool,
    clients: usize,
    body_bytes: usize,
    tenants: u64,
    http: HttpCell,
    raw: RawCell,
    ratio: f64,
    pass: bool,
    rule: &'static str,
}

pub fn run(quick: bool, json: bool) -> Result<ExitCode> {
    let (hooks, clients) = if quick {
        (3_000u64, 64usize)
    } else {
        (30_000, 128)
    };
    let tmp = tempfile::Builder::new()
        .prefix("ankusa-bench-ingest")
        .tempdir()?;
    let config = format!(
        r#"
[store]
path = "http-store"
[http]
listen = "127.0.0.1:0"
max_requests = {max_requests}
[[sources]]
id = "bench"
tenant_header = "x-tenant"
[[sources.sinks]]
url = "http://127.0.0.1:9/sink"
"#,
        max_requests = clients * 2
    );
    let settings = Settings::parse(&config, &tmp.path().join("bench.toml"), tmp.path())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .wrap_err("cannot start the async runtime")?;
    let (http, batches) = rt.block_on(measure_http(settings, hooks, clients))?;
    let raw = replay_raw(&tmp.path().join("raw-store"), &batches)?;
    let ratio = http.hooks_per_s / raw.hooks_per_s.max(f64::MIN_POSITIVE);
    let pass = ratio >= PASS_RATIO && http.refused == 0;
    let report = Report {
        quick,
        clients,
        body_bytes: BODY_BYTES,
        tenants: TENANTS,
        http,
        raw,
        ratio,
        pass,
        rule:
            "http hooks/s >= 0.5 x raw hooks/s of the same synced batches, and no request refused",
    };
    if json {
        print_json(&report)?;
    } else {
        print_report(&report);
    }
    Ok(if pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_report(r: &Report) {
    println!(
        "ingest over loopback HTTP: {} clients, {}-byte bodies, {} tenants, {} hooks",
        r.clients, r.body_bytes, r.tenants, r.http.hooks
    );
    println!(
        "  http  {:>9.0} hooks/s   p50 {:.2} ms   p99 {:.2} ms   {} batches (mean {:.1} hooks)",
        r.http.hooks_per_s, r.http.p50_ms, r.http.p99_ms, r.http.batches, r.http.mean_batch
    );
    println!(
        "  raw   {:>9.0} hooks/s   (the same {} synced batches straight to the store)",
        r.raw.hooks_per_s, r.raw.batches
    );
    println!(
        "  ratio {:.2}   {}   ({})",
        r.ratio,
        if r.pass { "PASS" } else { "FAIL" },
        r.rule
    );
}

/// Runs the daemon in-process and drives it; returns the cell and the sizes
/// of the batches committed while measuring.
async fn measure_http(
    settings: Settings,
    hooks: u64,
    clients: usize,
) -> Result<(HttpCell, Vec<usize>)> {
    let mut daemon = Daemon::boot(settings, Arc::new(SystemClock))?;
    let log = daemon.log_batches();
    let listener = daemon.bind().await?;
    let addr = listener.local_addr()?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(daemon.serve(listener, async move {
        let _ = stop_rx.await;
    }));
    let url = format!("http://{addr}/v1/sources/bench/hooks");
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .build()
        .wrap_err("cannot build the HTTP client")?;

    // Warm up connections and the store, then measure from a clean log.
    drive(&client, &url, (clients as u64) * 4, clients).await?;
    let skip = log.lock().map(|l| l.len()).unwrap_or(0);
    let started = Instant::now();
    let (mut latencies, refused) = drive(&client, &url, hooks, clients).await?;
    let seconds = started.elapsed().as_secs_f64();
    let batches: Vec<usize> = log
        .lock()
        .map_err(|_| eyre!("batch log poisoned"))?
        .get(skip..)
        .map(<[usize]>::to_vec)
        .unwrap_or_default();

    let _ = stop_tx.send(());
    let code = server.await.wrap_err("daemon task failed")??;
    if code != ExitCode::SUCCESS {
        bail!("the daemon did not stop cleanly");
    }
    let acked = latencies.len() as u64;
    let p50 = super::percentile(&mut latencies, 50.0);
    let p99 = super::percentile(&mut latencies, 99.0);
    let mean_batch = batches.iter().sum::<usize>() as f64 / batches.len().max(1) as f64;
    Ok((
        HttpCell {
            hooks: acked,
            seconds,
            hooks_per_s: acked as f64 / seconds.max(1e-9),
            p50_ms: p50,
            p99_ms: p99,
            batches: batches.len(),
            mean_batch,
            refused,
        },
        batches,
    ))
}

/// Posts `total` hooks from `clients` concurrent tasks. Returns the ack
/// latencies (ms) of the 202s and the count of anything else.
async fn drive(
    client: &reqwest::Client,
    url: &str,
    total: u64,
    clients: usize,
) -> Result<(Vec<f64>, u64)> {
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(clients);
    for _ in 0..clients {
        let (client, url, next) = (client.clone(), url.to_owned(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut refused = 0u64;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let body = body_for(i);
                let t = Instant::now();
                let resp = client
                    .post(&url)
                    .header("x-tenant", format!("tenant-{}", i % TENANTS))
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await;
                match resp {
                    Ok(r) if r.status() == reqwest::StatusCode::ACCEPTED => {
                        // Read the body: the ack is the whole answer.
                        let _ = r.bytes().await;
                        lat.push(t.elapsed().as_secs_f64() * 1000.0);
                    }
                    _ => refused += 1,
                }
            }
            (lat, refused)
        }));
    }
    let mut all = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    let mut refused = 0;
    for t in tasks {
        let (lat, r) = t.await.wrap_err("client task failed")?;
        all.extend(lat);
        refused += r;
    }
    Ok((all, refused))
}

fn body_for(i: u64) -> Vec<u8> {
    let mut b = format!("{{\"event\":\"order.paid\",\"n\":{i},\"pad\":\"").into_bytes();
    b.resize(BODY_BYTES - 2, b'x');
    b.extend_from_slice(b"\"}");
    b
}

/// Writes the same batches straight to a fresh store, each one synced
/// commit, exactly as the writer builds them.
fn replay_raw(path: &std::path::Path, batches: &[usize]) -> Result<RawCell> {
    let store = Store::create_or_open(path)?;
    let mut alloc = TenantAllocator::load(&store, ankusa_store::tenants::DEFAULT_MAX)?;
    let mut seq = store.next_seq()?;
    // Envelopes are built before the clock starts: the daemon's writer
    // also receives them ready-made.
    let now = ankusa_store::system_now_ms();
    let mut i = 0u64;
    let mut prepared: Vec<Vec<Envelope>> = Vec::with_capacity(batches.len());
    for &n in batches {
        prepared.push(
            (0..n as u64)
                .map(|k| Envelope {
                    received_at: now,
                    source_id: "bench".into(),
                    tenant: format!("tenant-{}", (i + k) % TENANTS),
                    idempotency_key: None,
                    headers: vec![("content-type".into(), b"application/json".to_vec())],
                    body: body_for(i + k),
                })
                .collect(),
        );
        i += n as u64;
    }
    let started = Instant::now();
    for envs in &prepared {
        let mut b = Batch::new();
        let res = alloc.resolve(&store, envs.iter().map(|e| e.tenant.as_str()), &mut b)?;
        for e in envs {
            let ord = res.ord(&e.tenant, alloc.max())?;
            transitions::ingest(
                &mut b,
                &IngestHook {
                    seq,
                    ord,
                    envelope: e,
                    sinks: 1,
                    archive: false,
                    dedupe_expires_at: None,
                },
            );
            seq += 1;
        }
        store.commit(b, true)?;
        alloc.committed(res);
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(RawCell {
        hooks: i,
        seconds,
        hooks_per_s: i as f64 / seconds.max(1e-9),
        batches: batches.len(),
    })
}
