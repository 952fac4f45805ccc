//! `ankusa bench ingest --routing`: what routing by event type costs on
//! the HTTP ingest path.
//!
//! Two daemons on the same machine and disk, alternated round by round so
//! a disk or CPU whose speed drifts weighs on both alike, driven by the
//! same clients with the same bodies (`{"event":"order.paid",...}`, 256
//! bytes, 100 tenants):
//! - **plain**: a source with 20 sinks and no routing: every hook owes
//!   every sink a row.
//! - **routed**: the same 20 sinks, each with 5 patterns, the source
//!   reading the type from the body (`event_type = { json = "/event" }`).
//!   Each sink's first four patterns miss and its fifth (`order.*`)
//!   matches, so both cells write the same 20 rows a hook and the ratio is
//!   the cost of routing alone: the JSON parse, 100 pattern tests, the
//!   type stored with the hook. A run where patterns dropped rows would be
//!   faster for writing less and measure nothing.
//!
//! Pass: routed hooks/s >= 0.9 x plain (issue 32), no request refused,
//! and every routed hook owed all 20 sinks (the stores' accepted totals
//! agree). Ratios compare cells of one run; absolute figures describe
//! this machine only.

use std::process::ExitCode;
use std::time::Instant;

use ankusa_daemon::Settings;
use color_eyre::eyre::{bail, Result, WrapErr};
use serde::Serialize;

use super::ingest::{drive, BenchDaemon};
use crate::output::print_json;

const SINKS: usize = 20;
const PATTERNS: usize = 5;
/// routed >= this x plain.
const RATIO: f64 = 0.9;

#[derive(Debug, Serialize)]
struct Cell {
    hooks: u64,
    seconds: f64,
    hooks_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    refused: u64,
    /// Delivery rows the store counted as accepted.
    rows: u64,
}

#[derive(Debug, Serialize)]
struct Report {
    quick: bool,
    clients: usize,
    rounds: usize,
    sinks: usize,
    patterns_per_sink: usize,
    plain: Cell,
    routed: Cell,
    ratio: f64,
    pass: bool,
    rule: &'static str,
}

/// The config of one cell: `bench` with 20 sinks, routed or not.
fn config(store: &str, routed: bool, clients: usize) -> String {
    let mut s = format!(
        "[store]\npath = \"{store}\"\n[http]\nlisten = \"127.0.0.1:0\"\nmax_requests = {}\n\
         # Ingest alone is measured: no delivery churn on the same store.\n\
         [dispatch]\nenabled = false\n[[sources]]\nid = \"bench\"\ntenant_header = \"x-tenant\"\n",
        clients * 2
    );
    if routed {
        s.push_str("event_type = { json = \"/event\" }\n");
    }
    for i in 0..SINKS {
        s.push_str(&format!(
            "[[sources.sinks]]\nname = \"s{i}\"\nurl = \"http://127.0.0.1:9/s{i}\"\n"
        ));
        if routed {
            // Four that miss (exact names and prefixes alike), then the
            // one that matches the bodies' `order.paid`.
            let mut p: Vec<String> = (0..PATTERNS - 1)
                .map(|k| {
                    if k % 2 == 0 {
                        format!("\"invoice.s{i}.k{k}\"")
                    } else {
                        format!("\"customer{i}.{k}.*\"")
                    }
                })
                .collect();
            p.push("\"order.*\"".into());
            s.push_str(&format!("events = [{}]\n", p.join(", ")));
        }
    }
    s
}

#[derive(Default)]
struct Tally {
    seconds: f64,
    latencies: Vec<f64>,
    refused: u64,
}

impl Tally {
    fn cell(mut self, rows: u64) -> Cell {
        let hooks = self.latencies.len() as u64;
        Cell {
            hooks,
            seconds: self.seconds,
            hooks_per_s: hooks as f64 / self.seconds.max(1e-9),
            p50_ms: super::percentile(&mut self.latencies, 50.0),
            p99_ms: super::percentile(&mut self.latencies, 99.0),
            refused: self.refused,
            rows,
        }
    }
}

fn accepted_rows(store: &std::path::Path) -> Result<u64> {
    let s = ankusa_store::Store::open_read_only(store)?;
    let (_, t) = ankusa_store::queries::tallies(&s, 0)?;
    Ok(t.accepted)
}

pub fn run(quick: bool, json: bool) -> Result<ExitCode> {
    let (per_round, rounds, clients) = if quick {
        (1_000u64, 3usize, 32usize)
    } else {
        (4_000, 5, 64)
    };
    let tmp = tempfile::Builder::new()
        .prefix("ankusa-bench-routing")
        .tempdir()?;
    let cfg = |name: &str, routed: bool| -> Result<Settings> {
        let text = config(name, routed, clients);
        Settings::parse(&text, &tmp.path().join(format!("{name}.toml")), tmp.path())
            .wrap_err("the bench configuration does not load")
    };
    let plain = BenchDaemon::start(cfg("plain-store", false)?)?;
    let routed = BenchDaemon::start(cfg("routed-store", true)?)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("bench-client")
        .build()
        .wrap_err("cannot start the client runtime")?;
    // Warm both: connections, the stores' first files.
    for d in [&plain, &routed] {
        rt.block_on(drive(d.addr, (clients as u64) * 4, clients))?;
    }
    let mut tallies = [Tally::default(), Tally::default()];
    for round in 0..rounds {
        // Alternate which goes first, so neither always runs on the disk
        // the other just filled.
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let d = if i == 0 { &plain } else { &routed };
            let started = Instant::now();
            let (lat, refused) = rt.block_on(drive(d.addr, per_round, clients))?;
            let t = &mut tallies[i];
            t.seconds += started.elapsed().as_secs_f64();
            t.latencies.extend(lat);
            t.refused += refused;
        }
    }
    plain.stop()?;
    routed.stop()?;
    let [p, r] = tallies;
    let plain = p.cell(accepted_rows(&tmp.path().join("plain-store"))?);
    let routed = r.cell(accepted_rows(&tmp.path().join("routed-store"))?);
    let warm = (clients as u64) * 4;
    for c in [&plain, &routed] {
        // Every acknowledged hook, the warm-up's too, owed all 20 sinks.
        if c.rows != (c.hooks + warm) * SINKS as u64 {
            bail!(
                "the routed and plain cells should write {SINKS} rows a hook: {} rows for {} hooks",
                c.rows,
                c.hooks + warm
            );
        }
    }
    let ratio = routed.hooks_per_s / plain.hooks_per_s.max(f64::MIN_POSITIVE);
    let pass = ratio >= RATIO && plain.refused == 0 && routed.refused == 0;
    let report = Report {
        quick,
        clients,
        rounds,
        sinks: SINKS,
        patterns_per_sink: PATTERNS,
        plain,
        routed,
        ratio,
        pass,
        rule: "routed hooks/s >= 0.9 x plain (20 sinks, 5 patterns each, the same rows), no request refused",
    };
    if json {
        print_json(&report)?;
    } else {
        println!(
            "bench ingest --routing: {SINKS} sinks x {PATTERNS} patterns, {clients} clients, {rounds} rounds"
        );
        for (name, c) in [("plain", &report.plain), ("routed", &report.routed)] {
            println!(
                "  {name:<7} {:>7} hooks in {:.2}s: {:>8.0} hooks/s  p50 {:.2} ms  p99 {:.2} ms  refused {}",
                c.hooks, c.seconds, c.hooks_per_s, c.p50_ms, c.p99_ms, c.refused
            );
        }
        println!(
            "  ratio {:.3} (routed / plain)   {}   ({})",
            report.ratio,
            if report.pass { "PASS" } else { "FAIL" },
            report.rule
        );
    }
    Ok(if report.pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both configurations load, and the routed one routes the bench's
    /// bodies to every sink (the ratio is then routing's cost alone).
    #[test]
    fn both_cells_owe_every_sink_a_row() {
        let dir = tempfile::tempdir().unwrap();
        for routed in [false, true] {
            let s = Settings::parse(
                &config("s", routed, 4),
                &dir.path().join("b.toml"),
                dir.path(),
            )
            .unwrap();
            assert_eq!(s.sources[0].sinks.len(), SINKS);
            let body = super::super::ingest::body_for(7);
            let t = s.sources[0]
                .event_type(&axum::http::HeaderMap::new(), &body)
                .unwrap();
            assert_eq!(t.is_some(), routed);
            assert_eq!(
                s.sources[0].route(t.as_deref()).len(),
                SINKS as u16,
                "routed {routed}"
            );
        }
    }
}
