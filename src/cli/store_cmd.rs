//! `ankusa store info|check|digest|fixture|repair|quarantine|backup|restore`.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Instant;

use ankusa_store::{check, digest, fixture, info, Store};
use color_eyre::eyre::{Result, WrapErr};

use super::{QuarantineCommand, StoreCommand};
use crate::failure;
use crate::output::{self, print_json};

pub fn run(cmd: StoreCommand) -> Result<ExitCode> {
    match cmd {
        StoreCommand::Info { store, json } => {
            let started = Instant::now();
            let s = Store::open_read_only(&store.store)?;
            let i = info::gather(&s, ankusa_store::system_now_ms())?;
            let took = started.elapsed();
            let daemon = daemon_info(&store.store);
            if json {
                print_json(&InfoOut { info: &i, daemon })?;
            } else {
                print_info(&i, took);
                print_daemon(daemon.as_ref());
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
        StoreCommand::Digest { store, json } => {
            let s = Store::open_read_only(&store.store)?;
            let tty = std::io::stderr().is_terminal() && !json;
            let d = digest::run(&s, |family, n| {
                if tty {
                    eprint!("\r\x1b[Kdigesting {family}: {n} keys");
                    let _ = std::io::stderr().flush();
                }
            })?;
            if tty {
                eprint!("\r\x1b[K");
            }
            if json {
                print_json(&d)?;
            } else {
                println!("{}  {} keys", d.sha256, d.keys);
                for f in &d.families {
                    println!("  {:<10} {:>12} keys  {}", f.family, f.keys, f.sha256);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        StoreCommand::Migrate {
            store,
            dry_run,
            backup,
            yes,
            no_check,
            json,
        } => super::migrate_cmd::run(&store.store, dry_run, backup, yes, no_check, json),
        StoreCommand::Repair {
            store,
            dry_run,
            json,
        } => repair(&store.store, dry_run, json),
        StoreCommand::Quarantine(q) => quarantine(q),
        StoreCommand::Backup {
            store,
            admin,
            to,
            keep,
            out,
            json,
        } => backup(&store.store, admin.token, to, keep, out, json),
        StoreCommand::Restore { from, store, json } => restore(&from, &store.store, json),
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
                return Err(failure::usage(format!(
                    "{} exists and is not empty; a fixture is written into a new directory",
                    out.display()
                )));
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

/// `store info --json`: the store's figures, and the daemon's view when one
/// answers on the store's socket (its store fault above all).
#[derive(serde::Serialize)]
struct InfoOut<'a> {
    #[serde(flatten, with = "ankusa_ops::wire::StoreInfoJson")]
    info: &'a info::StoreInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    daemon: Option<ankusa_ops::model::DaemonInfo>,
}

/// What the store's daemon says of itself, if one answers. A daemon that
/// cannot be asked is not an error here: the store's own figures stand.
fn daemon_info(store: &std::path::Path) -> Option<ankusa_ops::model::DaemonInfo> {
    use ankusa_ops::client::{Client, Probe};
    match Client::probe(store, None) {
        Ok(Probe::Daemon(c)) => c
            .get::<ankusa_ops::model::Stats>(ankusa_ops::routes::STATS)
            .ok()
            .and_then(|s| s.daemon),
        _ => None,
    }
}

fn print_daemon(d: Option<&ankusa_ops::model::DaemonInfo>) {
    let Some(d) = d else { return };
    println!(
        "daemon       pid {}, up {}, {} jobs running",
        d.pid,
        output::age(d.uptime_ms),
        d.jobs_running
    );
    if let Some(f) = &d.store_fault {
        let age = ankusa_store::system_now_ms().saturating_sub(f.since_ms);
        println!(
            "STORE FAULT  writes refused for {} ({} failed): {}; ingest answers 503 and /healthz is not ready until the daemon recovers it",
            output::age(age),
            f.failed_writes,
            f.error
        );
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
    let t = &i.totals;
    println!(
        "totals       rows accepted {}  delivered {}  retried {}  dead-lettered {};  hooks unrouted {}",
        t.accepted, t.delivered, t.retried, t.dead_lettered, t.unrouted
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
    if i.quarantined != 0 {
        println!(
            "quarantined  {} rows that do not decode (ankusa store quarantine list)",
            i.quarantined
        );
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
    if r.quarantined > 0 {
        println!(
            "{} rows in the quarantine (ankusa store quarantine list)",
            r.quarantined
        );
    }
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

/// Opens a stopped store as its writer, or says why not.
fn open_stopped(path: &std::path::Path) -> Result<Store> {
    if let Some(pid) = ankusa_store::lock::holder(path)? {
        return Err(failure::unavailable(format!(
            "a daemon (pid {pid}) holds {}; stop it first (this works on a stopped store)",
            path.display()
        )));
    }
    Ok(Store::open(path)?)
}

/// Writes one audit record for a command run directly on the store.
fn audit(s: &Store, action: &str, scope: &str, outcome: &str, rows: u64) -> Result<()> {
    use ankusa_ops::access::{Peer, Principal};
    ankusa_ops::jobs::audit_store_action(
        s,
        &Principal::local(&Peer::me()),
        action,
        scope,
        outcome,
        rows,
        ankusa_store::system_now_ms(),
    )?;
    Ok(())
}

fn repair(path: &std::path::Path, dry_run: bool, json: bool) -> Result<ExitCode> {
    use ankusa_store::repair;
    let s = open_stopped(path)?;
    let tty = std::io::stderr().is_terminal() && !json;
    let rep = repair::run(&s, dry_run, ankusa_store::system_now_ms(), |phase, n| {
        if tty {
            eprint!("\r\x1b[Krepairing: {phase} ({n} rows)");
            let _ = std::io::stderr().flush();
        }
    })?;
    if tty {
        eprint!("\r\x1b[K");
    }
    audit(
        &s,
        "repair",
        "store",
        if dry_run { "dry_run" } else { "done" },
        rep.changes(),
    )?;
    if json {
        print_json(&rep)?;
        return Ok(ExitCode::SUCCESS);
    }
    let verb = if dry_run { "would" } else { "did" };
    println!(
        "{}: {} rows quarantined, {} markers put back, {} counters set to the fold, {} hooks made reclaimable",
        if dry_run {
            "dry run, nothing changed; a repair would make"
        } else {
            "repaired"
        },
        rep.quarantined,
        rep.markers,
        rep.counters,
        rep.reclaimable
    );
    for q in &rep.quarantined_rows {
        println!("  {verb} quarantine {}: {}", q.key, q.reason);
    }
    for (ord, second) in &rep.marker_list {
        println!("  {verb} put the marker of tenant ordinal {ord} at second {second}");
    }
    for c in &rep.counter_list {
        println!(
            "  {verb} set ordinal {} {} from {} to {}",
            c.ord, c.field, c.stored, c.folded
        );
    }
    let listed = |n: u64, shown: usize| {
        if n > shown as u64 {
            println!("  ... and {} more", n - shown as u64);
        }
    };
    listed(rep.quarantined, rep.quarantined_rows.len());
    listed(rep.markers, rep.marker_list.len());
    listed(rep.counters, rep.counter_list.len());
    for u in &rep.unrepaired {
        println!("  cannot repair {}: {}", u.key, u.reason);
    }
    Ok(ExitCode::SUCCESS)
}

fn quarantine(cmd: QuarantineCommand) -> Result<ExitCode> {
    use ankusa_store::quarantine as q;
    match cmd {
        QuarantineCommand::List { store, limit, json } => {
            let s = Store::open_read_only(&store.store)?;
            let total = q::count(&s)?;
            let (rows, next) = q::page(&s, None, limit)?;
            if json {
                #[derive(serde::Serialize)]
                struct Listing<'a> {
                    total: i64,
                    rows: &'a [q::QuarantinedRow],
                    more: bool,
                }
                print_json(&Listing {
                    total,
                    rows: &rows,
                    more: next.is_some(),
                })?;
                return Ok(ExitCode::SUCCESS);
            }
            println!("{total} quarantined rows");
            let table: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    vec![
                        q::to_hex(&r.key),
                        r.ord.to_string(),
                        r.at.to_string(),
                        r.reason.clone(),
                    ]
                })
                .collect();
            if !table.is_empty() {
                print!(
                    "{}",
                    output::table(&["KEY", "ORD", "AT_MS", "REASON"], &table)
                );
            }
            if next.is_some() {
                println!("(more: raise --limit)");
            }
            Ok(ExitCode::SUCCESS)
        }
        QuarantineCommand::Drop {
            store,
            keys,
            all,
            dry_run,
            yes,
        } => {
            let s = open_stopped(&store.store)?;
            let mut rows = Vec::new();
            if all {
                let mut after: Option<Vec<u8>> = None;
                loop {
                    let (page, next) = q::page(&s, after.as_deref(), 1000)?;
                    rows.extend(page);
                    match next {
                        Some(n) => after = Some(n),
                        None => break,
                    }
                }
            } else {
                for k in &keys {
                    let key = q::from_hex(k).ok_or_else(|| {
                        failure::usage(format!(
                            "{k:?} is not a hex key (`ankusa store quarantine list` prints them)"
                        ))
                    })?;
                    match q::get(&s, &key)? {
                        Some(r) => rows.push(r),
                        None => {
                            return Err(failure::not_found(format!(
                                "no quarantined row with key {k}; `ankusa store quarantine list` shows them"
                            )))
                        }
                    }
                }
            }
            let scope = if all {
                "every quarantined row".to_owned()
            } else {
                format!("{} quarantined row(s)", rows.len())
            };
            if dry_run {
                audit(&s, "quarantine_drop", &scope, "dry_run", rows.len() as u64)?;
                println!("dry run: would drop {} quarantined row(s)", rows.len());
                return Ok(ExitCode::SUCCESS);
            }
            if !yes {
                super::backend::confirm(
                    &format!("Drop {scope} for good? Type \"drop\" to confirm: "),
                    "drop",
                )?;
            }
            for chunk in rows.chunks(500) {
                let mut b = ankusa_store::Batch::new();
                for r in chunk {
                    ankusa_store::transitions::drop_quarantined(&mut b, r);
                }
                s.commit(b, true)?;
            }
            audit(&s, "quarantine_drop", &scope, "done", rows.len() as u64)?;
            println!("dropped {} quarantined row(s)", rows.len());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `store backup`: `--to` through [`ankusa_ops::operator::Operator`] (the
/// daemon when one runs, else the stopped store); `--out` on a stopped
/// store only, any format.
fn backup(
    path: &std::path::Path,
    token: Option<String>,
    to: Option<std::path::PathBuf>,
    keep: Option<u64>,
    out: Option<std::path::PathBuf>,
    json: bool,
) -> Result<ExitCode> {
    let started = Instant::now();
    if let Some(out) = out {
        if let Some(pid) = ankusa_store::lock::holder(path)? {
            return Err(failure::unavailable(format!(
                "a daemon (pid {pid}) holds {}; stop it before taking a backup with --out, or take one beside it with --to BACKUPS",
                path.display()
            )));
        }
        Store::backup(path, &out)?;
        println!(
            "backed up {} to {} in {:.1}s",
            path.display(),
            out.display(),
            started.elapsed().as_secs_f64()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let Some(to) = to else {
        return Err(failure::usage(
            "store backup needs --to BACKUPS (or --out DIR)",
        ));
    };
    // The daemon resolves paths from its own working directory.
    let to =
        std::path::absolute(&to).wrap_err_with(|| format!("cannot resolve {}", to.display()))?;
    let keep = keep
        .map(usize::try_from)
        .transpose()
        .map_err(|_| failure::usage("--keep is too large"))?;
    let op = super::backend::open(path, token, true)?;
    let done = op.backup(&ankusa_ops::model::BackupRequest { to, keep })?;
    if json {
        print_json(&done)?;
        return Ok(ExitCode::SUCCESS);
    }
    for c in &done.cleaned {
        println!("removed {c} (a backup a crash interrupted)");
    }
    println!(
        "backed up {} via {} to {} ({} files, {}) in {:.1}s",
        path.display(),
        op.describe(),
        done.path,
        done.files,
        size(done.bytes),
        started.elapsed().as_secs_f64()
    );
    for r in &done.removed {
        println!("removed {r} (older than the newest {})", keep.unwrap_or(0));
    }
    Ok(ExitCode::SUCCESS)
}

/// `store restore`: a backup copied into a new or empty directory, with
/// progress on a terminal.
fn restore(from: &std::path::Path, path: &std::path::Path, json: bool) -> Result<ExitCode> {
    let started = Instant::now();
    let tty = std::io::stderr().is_terminal() && !json;
    let mut last = Instant::now();
    let who = ankusa_ops::access::Principal::local(&ankusa_ops::access::Peer::me());
    let now = ankusa_store::system_now_ms();
    let r = ankusa_ops::backup::restore(from, path, &who, now, |done, total| {
        if tty && (last.elapsed().as_millis() >= 200 || done == total) {
            last = Instant::now();
            eprint!(
                "\r\x1b[Kcopying: {} of {} ({:.0}%)",
                size(done),
                size(total),
                done as f64 * 100.0 / total.max(1) as f64
            );
            let _ = std::io::stderr().flush();
        }
    })?;
    if tty {
        eprint!("\r\x1b[K");
    }
    if json {
        print_json(&r)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "restored {} into {} ({} files, {}) in {:.1}s; node {}",
        r.from,
        r.store,
        r.files,
        size(r.bytes),
        started.elapsed().as_secs_f64(),
        r.node.as_deref().unwrap_or("(none recorded)")
    );
    println!(
        "next hook id from seq {} on (ids the lost store minted after the backup are never reused)",
        r.next_seq
    );
    println!(
        "check it with `ankusa store check --store {}`, then start the daemon with this node's configuration",
        r.store
    );
    Ok(ExitCode::SUCCESS)
}

fn size(n: u64) -> String {
    output::bytes(i64::try_from(n).unwrap_or(i64::MAX))
}
