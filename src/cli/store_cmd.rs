//! `ankusa store info|check|fixture`.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Instant;

use ankusa_store::{check, fixture, info, Store};
use color_eyre::eyre::{bail, Result, WrapErr};

use super::StoreCommand;
use crate::output::{self, print_json};

pub fn run(cmd: StoreCommand) -> Result<ExitCode> {
    match cmd {
        StoreCommand::Info { store, json } => {
            let started = Instant::now();
            let s = Store::open_read_only(&store.store)?;
            let i = info::gather(&s, ankusa_store::system_now_ms())?;
            let took = started.elapsed();
            if json {
                print_json(&i)?;
            } else {
                print_info(&i, took);
            }
            Ok(ExitCode::SUCCESS)
        }
        StoreCommand::Check { store, json } => {
            let s = Store::open_read_only(&store.store)?;
            let tty = std::io::stderr().is_terminal() && !json;
            let rep = check::run(&s, |phase, n| {
                if tty {
                    eprint!("\r\x1b[Kchecking {phase}: {n} rows");
                    let _ = std::io::stderr().flush();
                }
            })?;
            if tty {
                eprint!("\r\x1b[K");
            }
            if json {
                print_json(&rep)?;
            } else {
                print_check(&rep);
            }
            Ok(if rep.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        StoreCommand::Migrate {
            store,
            dry_run,
            backup,
            yes,
            no_check,
            json,
        } => super::migrate_cmd::run(&store.store, dry_run, backup, yes, no_check, json),
        StoreCommand::Backup { store, out } => {
            if let Some(pid) = ankusa_store::lock::holder(&store.store)? {
                bail!(
                    "a daemon (pid {pid}) holds {}; stop it before taking a backup",
                    store.store.display()
                );
            }
            let started = Instant::now();
            Store::backup(&store.store, &out)?;
            println!(
                "backed up {} to {} in {:.1}s",
                store.store.display(),
                out.display(),
                started.elapsed().as_secs_f64()
            );
            Ok(ExitCode::SUCCESS)
        }
        StoreCommand::Fixture {
            format,
            out,
            tenants,
            rows,
            seed,
            json,
        } => {
            if out.exists()
                && std::fs::read_dir(&out)
                    .wrap_err_with(|| format!("cannot read {}", out.display()))?
                    .next()
                    .is_some()
            {
                bail!(
                    "{} exists and is not empty; a fixture is written into a new directory",
                    out.display()
                );
            }
            let s = if format == 2 {
                Store::create_v2(&out)?
            } else {
                Store::create_or_open(&out)?
            };
            let spec =
                fixture::FixtureSpec::new(tenants, rows, seed, ankusa_store::system_now_ms());
            let started = Instant::now();
            let tty = std::io::stderr().is_terminal();
            let mut last = Instant::now();
            let progress = |done: u64, total: u64| {
                if tty && last.elapsed().as_millis() >= 200 {
                    last = Instant::now();
                    let secs = started.elapsed().as_secs_f64().max(1e-3);
                    let rate = done as f64 / secs;
                    let eta = (total.saturating_sub(done)) as f64 / rate.max(1.0);
                    eprint!(
                        "\r\x1b[Kwriting rows: {done}/{total} ({:.0}%), {:.0} rows/s, ETA {}",
                        done as f64 * 100.0 / total.max(1) as f64,
                        rate,
                        output::age((eta * 1000.0) as u64)
                    );
                    let _ = std::io::stderr().flush();
                }
            };
            let rep = if format == 2 {
                fixture::write_v2(&s, &spec, progress)?
            } else {
                fixture::write(&s, &spec, progress)?
            };
            if tty {
                eprint!("\r\x1b[K");
            }
            let secs = started.elapsed().as_secs_f64();
            let rate = rep.rows as f64 / secs.max(1e-3);
            if json {
                print_json(&serde_json::json!({
                    "store": out.display().to_string(),
                    "format": format,
                    "report": rep,
                    "seconds": secs,
                    "rows_per_second": rate,
                }))?;
            } else {
                println!(
                    "wrote {} format {format} rows ({} hooks, {} tenants) to {} in {:.1}s: {:.0} rows/s",
                    rep.rows,
                    rep.hooks,
                    rep.tenants,
                    out.display(),
                    secs,
                    rate
                );
                println!(
                    "  pending {}  retrying {}  inflight {}  dead {}  delivered {}  archived hooks {}",
                    rep.pending, rep.retrying, rep.inflight, rep.dead, rep.delivered, rep.archived_hooks
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn print_info(i: &info::StoreInfo, took: std::time::Duration) {
    println!("store        {} ({})", i.path, i.mode);
    println!(
        "format       {}",
        i.format
            .map_or_else(|| "unstamped".to_owned(), |f| f.to_string())
    );
    let n = &i.node;
    println!(
        "queue        pending {}  scheduled {}  inflight {}  dead {}  bytes {}  archive pending {}",
        n.pending,
        n.scheduled,
        n.inflight,
        n.dead,
        output::bytes(n.bytes),
        n.archive_pending
    );
    println!("tenants      {}", i.tenants);
    if i.active.complete {
        println!(
            "active       {} tenants with work due now",
            i.active.tenants
        );
    } else {
        println!(
            "active       at least {} tenants with work due now (in the oldest {} markers)",
            i.active.tenants, i.active.markers_walked
        );
    }
    match (i.oldest_due, i.oldest_due_age_ms) {
        (Some(o), Some(age)) => println!(
            "oldest due   {} (tenant ordinal {}{})",
            output::age(age),
            o.ord,
            if o.exact { "" } else { ", to the second" }
        ),
        _ => println!("oldest due   none"),
    }
    println!("keys (approx)");
    for (f, k) in &i.approx_keys {
        println!("  {f:<12} {k}");
    }
    println!("read in {:.1} ms", took.as_secs_f64() * 1000.0);
}

fn print_check(r: &check::CheckReport) {
    println!(
        "checked {} due, {} inflight, {} dead, {} delivery rows, {} markers, {} tenants",
        r.due_rows, r.inflight_rows, r.dead_rows, r.delivery_rows, r.markers, r.tenants
    );
    if r.ok() {
        println!(
            "OK: counters equal the fold, every due row has its marker, ordinals are consistent"
        );
        return;
    }
    println!(
        "{} mismatches:",
        r.mismatches.len() as u64 + r.more_mismatches
    );
    for m in &r.mismatches {
        println!(
            "  {}",
            serde_json::to_string(m).unwrap_or_else(|_| format!("{m:?}"))
        );
    }
    if r.more_mismatches > 0 {
        println!("  ... and {} more", r.more_mismatches);
    }
}
