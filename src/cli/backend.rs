//! Where an operator command gets its answers: the running daemon (over
//! its admin socket) or, when none runs, the store opened directly, as one
//! [`Operator`] (ankusa-ops) either way, so every command prints the same
//! thing. Opening directly for a destructive command takes the store's
//! writer lock, so a daemon started meanwhile waits for us rather than
//! racing us, and it first finishes any job an interrupted command left
//! behind.

use std::io::IsTerminal as _;
use std::path::Path;

use ankusa_ops::access::{Peer, Principal};
use ankusa_ops::client::{Client, Probe};
use ankusa_ops::model::{Job, JobState};
use ankusa_ops::operator::Operator;
use ankusa_store::{Store, StoreError};
use color_eyre::eyre::{eyre, Result, WrapErr};

use crate::failure;

/// What to do about a tenant name that matches none.
pub const LIST_HINT: &str = "`ankusa tenants list` shows the tenants";

/// The daemon if one answers on the store's socket; else the store,
/// read-only (`write` false) or as its writer.
pub fn open(dir: &Path, token: Option<String>, write: bool) -> Result<Operator> {
    if !dir.is_dir() {
        return Err(failure::not_found(format!(
            "no store at {}: the directory does not exist; pass the directory of an existing store (--store or ANKUSA_STORE)",
            dir.display()
        )));
    }
    if let Probe::Daemon(c) = Client::probe(dir, token)? {
        return Ok(Operator::Daemon(c));
    }
    let who = Principal::local(&Peer::me());
    let store = if write {
        match Store::open(dir) {
            Ok(s) => s,
            Err(StoreError::Locked { .. }) => {
                let pid = ankusa_store::lock::holder(dir).ok().flatten();
                return Err(failure::unavailable(format!(
                    "the store at {} is held by another process{} that does not answer on {}: \
                     is a daemon running with admin.socket = false? Use its admin API, or stop it",
                    dir.display(),
                    pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
                    ankusa_ops::socket_path(dir).display()
                )));
            }
            Err(e) => {
                return Err(eyre!(e).wrap_err(format!("cannot open the store at {}", dir.display())))
            }
        }
    } else {
        Store::open_read_only(dir)
            .wrap_err_with(|| format!("cannot open the store at {}", dir.display()))?
    };
    Ok(Operator::Store {
        store: Box::new(store),
        who,
    })
}

/// Jobs an interrupted command left running: finished before a new
/// purge or replay starts (they are idempotent), never by a dry run.
/// Through a daemon there is nothing to do: its boot resumed them.
pub fn finish_leftovers(op: &Operator) -> Result<()> {
    for job in op.leftovers()? {
        eprintln!(
            "ankusa: finishing job {} (started by {}, interrupted): {}",
            job.id,
            job.by.name,
            ankusa_ops::jobs::describe(&job)
        );
        let done = op.finish(job, |_| {})?;
        eprintln!(
            "ankusa: job {} {}: {} rows",
            done.id,
            state(&done),
            done.progress.rows()
        );
    }
    Ok(())
}

/// Runs (direct) or follows (daemon) a job to its end, showing progress
/// on a terminal.
pub fn finish(op: &Operator, job: Job) -> Result<Job> {
    let tty = std::io::stderr().is_terminal();
    let done = op.finish(job, |j| {
        if tty {
            eprint!(
                "\r{} rows of about {} ({})   ",
                j.progress.rows(),
                j.estimate,
                state(j)
            );
        }
    })?;
    if tty {
        eprintln!();
    }
    Ok(done)
}

/// 0 for a job that finished its work, 5 (unexpected, reported) otherwise.
pub fn exit_code(done: &Job) -> std::process::ExitCode {
    if done.state == JobState::Done {
        return std::process::ExitCode::SUCCESS;
    }
    if let Some(e) = &done.error {
        eprintln!("ankusa: job {} failed: {e}", done.id);
    }
    failure::Exit::Unexpected.code()
}

pub fn state(j: &Job) -> &'static str {
    match j.state {
        JobState::Running => "running",
        JobState::Done => "done",
        JobState::Failed => "failed",
    }
}

/// Asks for a typed confirmation on a terminal; refuses without one.
pub fn confirm(prompt: &str, expected: &str) -> Result<()> {
    if !std::io::stdin().is_terminal() {
        return Err(failure::unavailable(
            "refusing to run without confirmation: stdin is not a terminal; pass --yes (after a --dry-run) to run it from a script",
        ));
    }
    eprint!("{prompt}");
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .wrap_err("cannot read the confirmation")?;
    if line.trim() == expected {
        Ok(())
    } else {
        Err(failure::usage(format!(
            "not confirmed (expected {expected:?}); nothing was changed"
        )))
    }
}
