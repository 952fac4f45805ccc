//! `ankusa config check|reload`: a configuration file checked on its own
//! (no store, no port), then compared with, or applied to, the daemon that
//! serves its store (over that store's admin socket).
//!
//! The comparison is the daemon's: it holds the configuration in force and
//! the rows still waiting for each sink, so `check` shows exactly what a
//! reload of the same text would do, or why it would be refused.

use std::path::PathBuf;
use std::process::ExitCode;

use ankusa_daemon::Settings;
use ankusa_ops::client::{Client, Probe};
use ankusa_ops::model::{ConfigChange, ConfigCheckRequest, ReloadReport};
use ankusa_ops::{routes, OpsError};
use color_eyre::eyre::{Result, WrapErr};

use super::ConfigCommand;
use crate::failure;
use crate::output::print_json;

pub fn run(cmd: ConfigCommand) -> Result<ExitCode> {
    match cmd {
        ConfigCommand::Check {
            config,
            admin,
            json,
        } => check(config, admin.token, json),
        ConfigCommand::Reload {
            config,
            admin,
            json,
        } => reload(config, admin.token, json),
    }
}

fn check(config: Option<PathBuf>, token: Option<String>, json: bool) -> Result<ExitCode> {
    let path = ankusa_daemon::config_path(config)?;
    let settings = Settings::load(&path)?;
    let text = std::fs::read_to_string(&path)
        .wrap_err_with(|| format!("cannot read {}", path.display()))?;
    let sinks: usize = settings.sources.iter().map(|s| s.sinks.len()).sum();
    if !json {
        println!(
            "{}: valid ({} sources, {sinks} sinks, {} admin tokens)",
            path.display(),
            settings.sources.len(),
            settings.admin.tokens.len()
        );
    }
    let daemon = match daemon_of(&settings, token)? {
        Some(c) => c,
        None => {
            if json {
                print_json(&serde_json::json!({"valid": true, "daemon": null}))?;
            } else {
                println!(
                    "no daemon serves {}: nothing to compare with",
                    settings.store_path.display()
                );
            }
            return Ok(ExitCode::SUCCESS);
        }
    };
    let answer: Result<ReloadReport, OpsError> =
        daemon.post(routes::CONFIG_CHECK, &ConfigCheckRequest { text });
    match answer {
        Ok(r) => {
            if json {
                print_json(&serde_json::json!({"valid": true, "daemon": r}))?;
            } else {
                println!(
                    "compared with the daemon at {} (configuration generation {}): a reload would make {}",
                    daemon.transport(),
                    r.generation,
                    count(&r.changes)
                );
                print_changes(&r.changes);
            }
            Ok(ExitCode::SUCCESS)
        }
        // Valid on its own, refused by the daemon: a failed check.
        Err(OpsError::BadRequest(why)) => {
            if json {
                print_json(&serde_json::json!({"valid": true, "refused": why}))?;
            } else {
                println!("the daemon at {} would refuse it:", daemon.transport());
                for line in why.lines() {
                    println!("  {line}");
                }
            }
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(e.into()),
    }
}

fn reload(config: Option<PathBuf>, token: Option<String>, json: bool) -> Result<ExitCode> {
    let path = ankusa_daemon::config_path(config)?;
    // Checked here first, so a broken file is reported with its line before
    // any daemon is asked (the daemon checks it again, whole).
    let settings = Settings::load(&path)?;
    let Some(daemon) = daemon_of(&settings, token)? else {
        return Err(failure::unavailable(format!(
            "no daemon serves {}: nothing to reload (start one with `ankusa serve --config {}`)",
            settings.store_path.display(),
            path.display()
        )));
    };
    let r: ReloadReport = daemon
        .post(routes::CONFIG_RELOAD, &serde_json::json!({}))
        .map_err(|e| match e {
            OpsError::BadRequest(why) => failure::usage(format!(
                "reload refused; the daemon keeps its configuration: {}",
                why.replace('\n', "; ")
            )),
            e => e.into(),
        })?;
    if json {
        print_json(&r)?;
    } else {
        println!(
            "reloaded {} via the daemon at {} (configuration generation {}): {}",
            r.file,
            daemon.transport(),
            r.generation,
            count(&r.changes)
        );
        print_changes(&r.changes);
    }
    Ok(ExitCode::SUCCESS)
}

/// The daemon on the file's store, if one answers.
fn daemon_of(settings: &Settings, token: Option<String>) -> Result<Option<Client>> {
    if !settings.store_path.is_dir() {
        return Ok(None);
    }
    Ok(match Client::probe(&settings.store_path, token)? {
        Probe::Daemon(c) => Some(c),
        Probe::NoDaemon => None,
    })
}

fn count(changes: &[ConfigChange]) -> String {
    match changes.len() {
        0 => "no changes".into(),
        1 => "1 change".into(),
        n => format!("{n} changes"),
    }
}

fn print_changes(changes: &[ConfigChange]) {
    for c in changes {
        let mark = match c.kind.as_str() {
            "added" => '+',
            "removed" => '-',
            _ => '~',
        };
        if c.details.is_empty() {
            println!("  {mark} {} {}", c.what, c.name);
        } else {
            println!("  {mark} {} {}: {}", c.what, c.name, c.details.join(", "));
        }
    }
}
