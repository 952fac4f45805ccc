//! `ankusa bench migrate`: rows per second of the format 2 → 3 migration,
//! and whether its time is linear in the rows (a step that re-walked moved
//! keys would make it quadratic).
//!
//! Two format 2 fixtures, 10^5 and 10^6 rows (quick: 10^4 and 10^5), same
//! tenants and seed. Pass: the larger store's time per row within 1.5x of the
//! smaller's; the rate at the larger size is reported against the 200,000
//! rows/s target.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use ankusa_store::fixture::{self, FixtureSpec};
use ankusa_store::migrate::Migration;
use ankusa_store::{check, Store};
use color_eyre::eyre::{bail, Result};
use serde::Serialize;

use crate::output::print_json;

/// The rate the issue targets on the reference two-core machine.
const TARGET_ROWS_PER_S: f64 = 200_000.0;

#[derive(Debug, Serialize)]
struct Cell {
    rows: u64,
    seconds: f64,
    rows_per_s: f64,
    us_per_row: f64,
    /// Seconds per phase (due, inflight, dead, archive, finish): where the
    /// time goes when the ratio moves. The finish includes the wait for the
    /// compaction the migration deferred.
    phase_seconds: [f64; 5],
}

#[derive(Debug, Serialize)]
struct Report {
    quick: bool,
    cells: Vec<Cell>,
    per_row_ratio: f64,
    meets_target: bool,
    pass: bool,
    rule: &'static str,
}

pub fn run(quick: bool, json: bool, dir: Option<PathBuf>) -> Result<ExitCode> {
    let (_tmp, base) = super::work_dir(dir, "ankusa-bench-migrate")?;
    let sizes: [u64; 2] = if quick {
        [10_000, 100_000]
    } else {
        [100_000, 1_000_000]
    };
    let mut cells = Vec::new();
    for rows in sizes {
        let path = base.join(format!("v2-{rows}"));
        if path.exists() {
            std::fs::remove_dir_all(&path)?;
        }
        if !json {
            eprintln!("writing a format 2 fixture of {rows} rows ...");
        }
        let now = ankusa_store::system_now_ms();
        {
            let s = Store::create_v2(&path)?;
            // write_v2 flushes, so the migration reads table files, as it
            // would on a store that has been running.
            fixture::write_v2(&s, &FixtureSpec::new(1000, rows, 3, now), |_, _| {})?;
        }
        let store = Store::open_any_format(&path)?;
        let started = Instant::now();
        let mut m = Migration::start(&store, now, u32::MAX - 1)?;
        let mut phase_seconds = [0.0f64; 5];
        let mut phase = m.cursor().phase;
        let mut phase_started = started;
        m.run(|c| {
            // The cursor names the phase the next step works on: a change
            // means the previous phase has ended (the last call is after
            // the finish).
            if c.phase != phase {
                phase_seconds[phase as usize - 1] += phase_started.elapsed().as_secs_f64();
                phase = c.phase;
                phase_started = Instant::now();
            }
        })?;
        phase_seconds[phase as usize - 1] += phase_started.elapsed().as_secs_f64();
        let seconds = started.elapsed().as_secs_f64();
        drop(m);
        let report = check::run(&store, |_, _| {})?;
        if !report.ok() {
            bail!(
                "the migrated {rows}-row store fails store check: {:?}",
                report.mismatches.first()
            );
        }
        let cell = Cell {
            rows,
            seconds,
            rows_per_s: rows as f64 / seconds.max(1e-9),
            us_per_row: seconds * 1e6 / rows as f64,
            phase_seconds,
        };
        if !json {
            eprintln!(
                "  {:.0} rows/s ({:.2} µs/row), store check OK; seconds per phase: due {:.2}, inflight {:.2}, dead {:.2}, archive {:.2}, finish {:.2}",
                cell.rows_per_s,
                cell.us_per_row,
                phase_seconds[0],
                phase_seconds[1],
                phase_seconds[2],
                phase_seconds[3],
                phase_seconds[4]
            );
        }
        drop(store);
        std::fs::remove_dir_all(&path).ok();
        cells.push(cell);
    }
    let ratio = cells[1].us_per_row / cells[0].us_per_row.max(1e-9);
    let meets_target = cells[1].rows_per_s >= TARGET_ROWS_PER_S;
    let pass = ratio <= 1.5;
    let report = Report {
        quick,
        per_row_ratio: ratio,
        meets_target,
        pass,
        rule: "time per row at the larger size within 1.5x of the smaller",
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
                    c.rows.to_string(),
                    format!("{:.2}", c.seconds),
                    format!("{:.0}", c.rows_per_s),
                    format!("{:.2}", c.us_per_row),
                ]
            })
            .collect();
        print!(
            "{}",
            crate::output::table(&["rows", "seconds", "rows/s", "µs/row"], &rows)
        );
        println!(
            "per-row time ratio {:.2} (pass at <= 1.5): {}; {} the {:.0} rows/s target",
            ratio,
            if pass { "PASS" } else { "FAIL" },
            if meets_target { "meets" } else { "below" },
            TARGET_ROWS_PER_S
        );
    }
    Ok(if pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
