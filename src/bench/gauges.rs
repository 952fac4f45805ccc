//! `ankusa bench gauges`: the metrics gauge tick (node counters, oldest-due
//! age, top tenants by pending) must not grow with the queue or the tenant
//! count.
//!
//! Grid: queued rows 10^3..10^6 (10 tenants, 8 active) and tenants
//! 10, 10^3, 10^5 (8 active; the others' rows are scheduled a day ahead or
//! dead, so they are not active). While a cell is measured, a writer thread
//! commits merging batches (counter operands) at 3,000 per second on the
//! same store. A cell is the 10th percentile of 1,000 ticks, the lowest of
//! three rounds. Pass: slowest cell within 2x of the fastest (counted as at
//! least 1 ms) and under 50 ms. The tick reads the node's cumulative totals
//! too, and the writer's batches carry total operands (every transition
//! that counts: ingest, delivered, retry, dead-letter), as the daemon's do.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ankusa_store::fixture::Rng;
use ankusa_store::tenants::TenantAllocator;
use ankusa_store::transitions::{self, IngestHook, SinkSet};
use ankusa_store::values::DeliveryRow;
use ankusa_store::{queries, Batch, Envelope, Store};
use color_eyre::eyre::Result;
use serde::Serialize;

use crate::output::print_json;

const ACTIVE: u32 = 8;
const WRITER_RATE: u64 = 3000;
/// Active tenants' rows were received within this window before "now": a
/// burst the dispatcher has not caught up with.
const BACKLOG_WINDOW_MS: u64 = 60_000;

#[derive(Debug, Clone, Serialize)]
struct Cell {
    axis: &'static str,
    rows: u64,
    tenants: u32,
    active: u32,
    /// 10th percentile of one round's ticks, lowest round, in ms.
    tick_ms: f64,
    /// Median of the best round, for context.
    median_ms: f64,
    /// Merging batches per second the writer achieved while measuring.
    writer_batches_per_s: f64,
    build_s: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    quick: bool,
    ticks: usize,
    rounds: usize,
    cells: Vec<Cell>,
    #[serde(flatten)]
    verdict: super::FlatRule,
}

pub fn run(quick: bool, json: bool, dir: Option<PathBuf>) -> Result<ExitCode> {
    let (_tmp, base) = super::work_dir(dir, "ankusa-bench-gauges")?;
    let (ticks, rounds) = if quick { (300, 3) } else { (1000, 3) };
    let grid = super::grid(quick);
    let mut cells = Vec::new();
    for (i, (axis, rows, tenants)) in grid.into_iter().enumerate() {
        let path = base.join(format!("cell-{i}-{axis}-{rows}-{tenants}"));
        if path.exists() {
            std::fs::remove_dir_all(&path)?;
        }
        if !json {
            eprintln!("building {axis} cell: {rows} rows, {tenants} tenants ...");
        }
        let cell = measure_cell(&path, axis, rows, tenants, ticks, rounds)?;
        if !json {
            eprintln!(
                "  tick p10 {:.3} ms (median {:.3} ms), writer {:.0} batches/s",
                cell.tick_ms, cell.median_ms, cell.writer_batches_per_s
            );
        }
        std::fs::remove_dir_all(&path).ok();
        cells.push(cell);
    }
    let verdict = super::FlatRule::judge(&cells.iter().map(|c| c.tick_ms).collect::<Vec<_>>());
    let exit = verdict.exit_code();
    let report = Report {
        quick,
        ticks,
        rounds,
        verdict,
        cells,
    };
    if json {
        print_json(&report)?;
    } else {
        print_table(&report);
    }
    Ok(exit)
}

fn print_table(r: &Report) {
    let rows: Vec<Vec<String>> = r
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
                format!("{:.0}", c.writer_batches_per_s),
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
                "writer batch/s"
            ],
            &rows
        )
    );
    println!("{}", r.verdict.summary());
}

pub(crate) fn tenant_name(i: u32) -> String {
    format!("t{i:06}")
}

/// Builds a cell's store: `rows` delivery rows over `tenants` tenants, the
/// first 8 active (due now, received within the backlog window), the others
/// holding one row each, alternately retrying a day ahead or dead.
pub(crate) fn build(store: &Store, rows: u64, tenants: u32, now: u64, rng: &mut Rng) -> Result<()> {
    let mut alloc = TenantAllocator::load(store, u32::MAX - 1)?;
    let mut seq = store.next_seq()?;
    let inactive = tenants.saturating_sub(ACTIVE);
    let active_rows = rows
        .saturating_sub(u64::from(inactive))
        .max(u64::from(ACTIVE));
    let mut plan: Vec<(u32, bool)> = (0..inactive).map(|i| (ACTIVE + i, false)).collect();
    plan.extend((0..active_rows).map(|i| ((i % u64::from(ACTIVE.min(tenants))) as u32, true)));
    for chunk in plan.chunks(5000) {
        let mut b = Batch::new();
        let envs: Vec<Envelope> = chunk
            .iter()
            .map(|&(t, active)| Envelope {
                received_at: if active {
                    now - rng.below(BACKLOG_WINDOW_MS)
                } else {
                    now - 1000
                },
                source_id: "bench".into(),
                tenant: tenant_name(t),
                idempotency_key: None,
                event_type: None,
                headers: Vec::new(),
                body: vec![b'x'; 64],
            })
            .collect();
        let res = alloc.resolve(store, envs.iter().map(|e| e.tenant.as_str()), &mut b)?;
        for (env, &(t, active)) in envs.iter().zip(chunk) {
            let ord = res.ord(&env.tenant, alloc.max())?;
            let due = transitions::ingest(
                &mut b,
                &IngestHook {
                    seq,
                    ord,
                    envelope: env,
                    sinks: SinkSet::first(1),
                    archive: false,
                    dedupe_expires_at: None,
                },
            );
            seq += 1;
            if !active {
                for row in due {
                    let f = transitions::claim(&mut b, &row);
                    let mut d = DeliveryRow::new(ord, row.size);
                    d.record(now, 503, "unavailable");
                    if t.is_multiple_of(2) {
                        transitions::retry(&mut b, &f, &d, now + 86_400_000);
                    } else {
                        transitions::dead_letter(&mut b, &f, &d, now, "bench", None);
                    }
                }
            }
        }
        store.commit(b, false)?;
        alloc.committed(res);
    }
    // Inactive tenants' first-attempt markers are stale now; the
    // dispatcher's cleanup would have removed them.
    let (_, markers) = queries::active_markers(store, now, usize::MAX)?;
    let mut by: std::collections::BTreeMap<u32, Vec<u64>> = Default::default();
    for (o, b) in markers {
        by.entry(o).or_default().push(b);
    }
    for (o, bs) in by {
        transitions::cleanup_markers(store, o, &bs, 0, now)?;
    }
    // The cleanup just left one tombstone per inactive tenant in the active
    // index; a store that has been running has compacted such tombstones
    // away (the index family compacts files dense with deletions), and a
    // bench of a fresh build should measure that store, not the moment
    // after a mass delete.
    store.flush()?;
    store.compact(ankusa_store::Family::Index)?;
    Ok(())
}

fn measure_cell(
    path: &Path,
    axis: &'static str,
    rows: u64,
    tenants: u32,
    ticks: usize,
    rounds: usize,
) -> Result<Cell> {
    let store = Arc::new(Store::create_or_open(path)?);
    let now = ankusa_store::system_now_ms();
    let mut rng = Rng::new(rows ^ u64::from(tenants));
    let started = Instant::now();
    build(&store, rows, tenants, now, &mut rng)?;
    let build_s = started.elapsed().as_secs_f64();

    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let writer = {
        let store = Arc::clone(&store);
        let stop = Arc::clone(&stop);
        let written = Arc::clone(&written);
        std::thread::spawn(move || merging_writer(&store, &stop, &written, tenants.min(ACTIVE)))
    };
    // Let the writer reach its rate before measuring.
    std::thread::sleep(Duration::from_millis(200));
    let w0 = written.load(Ordering::Relaxed);
    let t0 = Instant::now();
    let mut best_p10 = f64::INFINITY;
    let mut best_median = f64::INFINITY;
    for _ in 0..rounds {
        let mut samples = Vec::with_capacity(ticks);
        for _ in 0..ticks {
            let tick_now = ankusa_store::system_now_ms();
            let s = Instant::now();
            let g = queries::gauges(&store, tick_now, 100)?;
            samples.push(s.elapsed().as_secs_f64() * 1000.0);
            std::hint::black_box(g);
        }
        let p10 = super::percentile(&mut samples, 10.0);
        if p10 < best_p10 {
            best_p10 = p10;
            best_median = super::percentile(&mut samples, 50.0);
        }
    }
    let rate = (written.load(Ordering::Relaxed) - w0) as f64 / t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    match writer.join() {
        Ok(r) => r?,
        Err(_) => color_eyre::eyre::bail!("the bench writer thread panicked"),
    }
    Ok(Cell {
        axis,
        rows,
        tenants,
        active: tenants.min(ACTIVE),
        tick_ms: best_p10,
        median_ms: best_median,
        writer_batches_per_s: rate,
        build_s,
    })
}

/// Commits merging batches at [`WRITER_RATE`] per second: alternately an
/// ingest (pending +1, bytes +size, accepted +1) and a claim-and-settle of
/// an earlier ingested row: delivered (bytes -size) three times in four,
/// else in turn a retry a day ahead (scheduled +1) or a dead letter (dead
/// +1), each with its total's operand.
fn merging_writer(
    store: &Store,
    stop: &AtomicBool,
    written: &AtomicU64,
    active: u32,
) -> Result<()> {
    let mut alloc = TenantAllocator::load(store, u32::MAX - 1)?;
    let mut seq = store.next_seq()?;
    let mut queue = std::collections::VecDeque::new();
    let start = Instant::now();
    let mut n: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let due_at = start + Duration::from_micros(n * 1_000_000 / WRITER_RATE);
        let now_i = Instant::now();
        if due_at > now_i {
            std::thread::sleep(due_at - now_i);
        }
        let mut b = Batch::new();
        if n.is_multiple_of(2) || queue.is_empty() {
            let env = Envelope {
                received_at: ankusa_store::system_now_ms(),
                source_id: "bench".into(),
                tenant: tenant_name((n % u64::from(active.max(1))) as u32),
                idempotency_key: None,
                event_type: None,
                headers: Vec::new(),
                body: vec![b'y'; 64],
            };
            let res = alloc.resolve(store, [env.tenant.as_str()], &mut b)?;
            let ord = res.ord(&env.tenant, alloc.max())?;
            let rows = transitions::ingest(
                &mut b,
                &IngestHook {
                    seq,
                    ord,
                    envelope: &env,
                    sinks: SinkSet::first(1),
                    archive: false,
                    dedupe_expires_at: None,
                },
            );
            seq += 1;
            queue.extend(rows);
            store.commit(b, false)?;
            alloc.committed(res);
        } else if let Some(row) = queue.pop_front() {
            let f = transitions::claim(&mut b, &row);
            match (n / 2) % 8 {
                3 => {
                    let d = DeliveryRow::new(f.ord, f.size);
                    transitions::retry(&mut b, &f, &d, ankusa_store::system_now_ms() + 86_400_000);
                }
                7 => {
                    let d = DeliveryRow::new(f.ord, f.size);
                    transitions::dead_letter(
                        &mut b,
                        &f,
                        &d,
                        ankusa_store::system_now_ms(),
                        "bench",
                        None,
                    );
                }
                _ => transitions::delivered(&mut b, &f),
            }
            store.commit(b, false)?;
        }
        n += 1;
        written.store(n, Ordering::Relaxed);
    }
    Ok(())
}
