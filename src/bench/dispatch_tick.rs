//! `ankusa bench dispatch-tick`: the read side of a dispatch tick (active
//! tenants with their markers, each one's head rows, the fair scheduler's
//! plan; no claim, no delivery) must not grow with the queue or with the
//! tenant count.
//!
//! Grid and pass rule are those of `bench gauges`: queued rows 10^3..10^6
//! (10 tenants, 8 active) and tenants 10, 10^3, 10^5 (8 active; the others
//! hold one row each, retrying a day ahead or dead, so they are not
//! active). A cell is the 10th percentile of 1,000 ticks (300 with
//! `--quick`), the lowest of three rounds. Pass: slowest cell within 2x of
//! the fastest (counted as at least 1 ms) and under 50 ms. Unlike `bench
//! gauges` no writer runs beside the ticks: the tick's own cost is what is
//! compared.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use ankusa_fairness::{Config, Scheduler};
use ankusa_store::fixture::Rng;
use ankusa_store::Store;
use color_eyre::eyre::Result;
use serde::Serialize;

use crate::cli::print_json;
use crate::daemon::dispatch::{plan_tick, DispatchSettings};

/// Active tenants per cell; the stores are built by `gauges::build`.
const ACTIVE: u32 = 8;

#[derive(Debug, Clone, Serialize)]
struct Cell {
    axis: &'static str,
    rows: u64,
    tenants: u32,
    active: u32,
    /// 10th percentile of one round's ticks, lowest round, in ms.
    tick_ms: f64,
    median_ms: f64,
    /// Rows the scheduler chose per tick (the work a tick hands on).
    planned_rows: usize,
    build_s: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    quick: bool,
    ticks: usize,
    rounds: usize,
    cells: Vec<Cell>,
    fastest_ms: f64,
    slowest_ms: f64,
    ratio: f64,
    pass: bool,
    rule: &'static str,
}

pub fn run(quick: bool, json: bool) -> Result<ExitCode> {
    let tmp = tempfile::Builder::new()
        .prefix("ankusa-bench-dispatch")
        .tempdir()?;
    let (ticks, rounds) = if quick { (300, 3) } else { (1000, 3) };
    let mut grid: Vec<(&'static str, u64, u32)> = Vec::new();
    let row_axis: &[u64] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 100_000, 1_000_000]
    };
    for &r in row_axis {
        grid.push(("rows", r, 10));
    }
    let tenant_axis: &[u32] = if quick {
        &[10, 1_000]
    } else {
        &[10, 1_000, 100_000]
    };
    for &t in tenant_axis {
        grid.push(("tenants", (2 * u64::from(t)).max(10_000), t));
    }
    let mut cells = Vec::new();
    for (i, (axis, rows, tenants)) in grid.into_iter().enumerate() {
        let path = tmp.path().join(format!("cell-{i}"));
        if !json {
            eprintln!("building {axis} cell: {rows} rows, {tenants} tenants ...");
        }
        let cell = measure_cell(&path, axis, rows, tenants, ticks, rounds)?;
        if !json {
            eprintln!(
                "  tick p10 {:.3} ms (median {:.3} ms), {} rows planned per tick",
                cell.tick_ms, cell.median_ms, cell.planned_rows
            );
        }
        std::fs::remove_dir_all(&path).ok();
        cells.push(cell);
    }
    let fastest = cells
        .iter()
        .map(|c| c.tick_ms)
        .fold(f64::INFINITY, f64::min);
    let slowest = cells.iter().map(|c| c.tick_ms).fold(0.0, f64::max);
    let ratio = slowest / fastest.max(1.0);
    let pass = ratio <= 2.0 && slowest < 50.0;
    let report = Report {
        quick,
        ticks,
        rounds,
        fastest_ms: fastest,
        slowest_ms: slowest,
        ratio,
        pass,
        rule: "slowest <= 2 x max(fastest, 1 ms) and slowest < 50 ms",
        cells,
    };
    if json {
        print_json(&report)?;
    } else {
        let rows: Vec<Vec<String>> = report
            .cells
            .iter()
            .map(|c| {
                vec![
                    c.axis.to_owned(),
                    c.rows.to_string(),
                    c.tenants.to_string(),
                    c.active.to_string(),
                    format!("{:.3}", c.tick_ms),
                    format!("{:.3}", c.median_ms),
                    c.planned_rows.to_string(),
                ]
            })
            .collect();
        print!(
            "{}",
            crate::output::table(
                &[
                    "axis",
                    "rows",
                    "tenants",
                    "active",
                    "tick p10 ms",
                    "median ms",
                    "planned rows"
                ],
                &rows
            )
        );
        println!(
            "fastest {:.3} ms, slowest {:.3} ms, slowest / max(fastest, 1 ms) = {:.2}: {}",
            report.fastest_ms,
            report.slowest_ms,
            report.ratio,
            if report.pass { "PASS" } else { "FAIL" }
        );
    }
    Ok(if pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn measure_cell(
    path: &Path,
    axis: &'static str,
    rows: u64,
    tenants: u32,
    ticks: usize,
    rounds: usize,
) -> Result<Cell> {
    let store = Store::create_or_open(path)?;
    let now = ankusa_store::system_now_ms();
    let mut rng = Rng::new(rows ^ u64::from(tenants));
    let started = Instant::now();
    super::gauges::build(&store, rows, tenants, now, &mut rng)?;
    let build_s = started.elapsed().as_secs_f64();
    let settings = DispatchSettings::default();
    let mut sched = Scheduler::new(Config::default());
    let inflight = Default::default();
    let mut best_p10 = f64::INFINITY;
    let mut best_median = f64::INFINITY;
    let mut planned = 0;
    for _ in 0..rounds {
        let mut samples = Vec::with_capacity(ticks);
        for _ in 0..ticks {
            let tick_now = ankusa_store::system_now_ms();
            let s = Instant::now();
            let plan = plan_tick(&store, &mut sched, tick_now, &settings, &inflight, 0)?;
            samples.push(s.elapsed().as_secs_f64() * 1000.0);
            planned = plan.rows();
            std::hint::black_box(plan);
        }
        let p10 = super::percentile(&mut samples, 10.0);
        if p10 < best_p10 {
            best_p10 = p10;
            best_median = super::percentile(&mut samples, 50.0);
        }
    }
    Ok(Cell {
        axis,
        rows,
        tenants,
        active: tenants.min(ACTIVE),
        tick_ms: best_p10,
        median_ms: best_median,
        planned_rows: planned,
        build_s,
    })
}
