//! `ankusa store migrate`: the guided, resumable format 2 → 3 upgrade.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use ankusa_store::migrate::{self, Cursor, Migration, Phase, Status};
use ankusa_store::{check, tenants, Store};
use color_eyre::eyre::Result;

use crate::failure;
use crate::output;
use crate::output::print_json;

pub fn run(
    path: &Path,
    dry_run: bool,
    backup: Option<PathBuf>,
    yes: bool,
    no_check: bool,
    json: bool,
) -> Result<ExitCode> {
    let status = migrate::status(path)?;
    if status == Status::Done {
        if json {
            print_json(&serde_json::json!({"status": "done", "format": 3}))?;
        } else {
            println!("{} is already format 3: nothing to migrate", path.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let plan = {
        let ro = Store::open_read_only_any_format(path)?;
        migrate::plan(&ro)?
    };
    if dry_run {
        if json {
            print_json(&plan)?;
        } else {
            println!("{}", plan.description);
            for (p, n) in Phase::ROWS.iter().zip(plan.rows) {
                println!("  {:<9} {n} rows", p.name());
            }
            println!("  total     {} rows", plan.rows.iter().sum::<u64>());
            if let Some(c) = &plan.resume {
                println!(
                    "an interrupted migration is at phase {} with {} of {} rows moved; running it resumes there",
                    c.phase.name(),
                    c.rows_done(),
                    c.rows_total()
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(pid) = ankusa_store::lock::holder(path)? {
        return Err(failure::unavailable(format!(
            "a daemon (pid {pid}) holds {}; stop it before migrating",
            path.display()
        )));
    }
    let tty = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !yes {
        if !tty {
            return Err(failure::unavailable(
                "refusing to migrate without confirmation: run on a terminal, or pass --yes",
            ));
        }
        eprintln!("{}", plan.description);
        eprintln!(
            "{} rows in {}. Format 3 is a one-way door: an older release cannot open the store afterwards.",
            plan.rows.iter().sum::<u64>(),
            path.display()
        );
        if backup.is_none() && plan.resume.is_none() {
            eprintln!(
                "No --backup given: consider `ankusa store backup --store {} --out DIR` first.",
                path.display()
            );
        }
        eprint!("Migrate now? [y/N] ");
        std::io::stderr().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            eprintln!("not migrated");
            return Ok(ExitCode::from(1));
        }
    }
    if let Some(out) = &backup {
        let started = Instant::now();
        Store::backup(path, out)?;
        eprintln!(
            "backup written to {} in {:.1}s",
            out.display(),
            started.elapsed().as_secs_f64()
        );
    }

    let store = Store::open_any_format(path)?;
    let mut m = Migration::start(&store, ankusa_store::system_now_ms(), tenants::DEFAULT_MAX)?;
    let started = Instant::now();
    let first_done = m.cursor().rows_done();
    let mut last_print = Instant::now();
    let show = std::io::stderr().is_terminal() && !json;
    m.run(|c: &Cursor| {
        if show && last_print.elapsed().as_millis() >= 200 {
            last_print = Instant::now();
            eprint!("\r\x1b[K{}", progress_line(c, first_done, started));
            let _ = std::io::stderr().flush();
        }
    })?;
    if show {
        eprint!("\r\x1b[K");
    }
    let secs = started.elapsed().as_secs_f64();
    let moved = m.cursor().rows_done() - first_done;
    let rate = moved as f64 / secs.max(1e-3);
    let over = m.over_limit;
    drop(m);
    let report = if no_check {
        None
    } else {
        Some(check::run(&store, |_, _| {})?)
    };
    let ok = report.as_ref().is_none_or(|r| r.ok());
    if json {
        print_json(&serde_json::json!({
            "status": "done",
            "format": store.format()?,
            "rows_moved": moved,
            "seconds": secs,
            "rows_per_second": rate,
            "tenants_over_limit": over,
            "check": report,
        }))?;
    } else {
        println!(
            "migrated {} to format 3: {moved} rows in {secs:.1}s ({rate:.0} rows/s)",
            path.display()
        );
        if over > 0 {
            println!("note: {over} tenants beyond tenants.max; existing tenants keep working, new ones will be refused");
        }
        match &report {
            Some(r) if r.ok() => println!("store check: OK"),
            Some(r) => println!(
                "store check found {} mismatches: run `ankusa store check --store {}`",
                r.mismatches.len() as u64 + r.more_mismatches,
                path.display()
            ),
            None => println!(
                "run `ankusa store check --store {}` to verify",
                path.display()
            ),
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn progress_line(c: &Cursor, first_done: u64, started: Instant) -> String {
    let done = c.rows_done();
    let total = c.rows_total().max(1);
    let secs = started.elapsed().as_secs_f64().max(1e-3);
    let rate = (done - first_done) as f64 / secs;
    let eta_ms = if rate > 0.0 {
        (total.saturating_sub(done) as f64 / rate * 1000.0) as u64
    } else {
        0
    };
    format!(
        "migrating: phase {} | {done}/{total} rows ({:.0}%) | {rate:.0} rows/s | ETA {}",
        c.phase.name(),
        done as f64 * 100.0 / total as f64,
        output::age(eta_ms)
    )
}
