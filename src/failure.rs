//! How a failed command ends: the exit code, and what stderr shows.
//!
//! A user's mistake (a tenant that does not exist, a store path with no
//! store, `ankusa demo` without a terminal, a bad config key) is one plain
//! line, `ankusa: WHAT: WHAT TO DO`, with an exit code that says which kind
//! of mistake it is ([`Exit`], docs/cli.md). Anything else is unexpected (a
//! bug, a disk that fails): color-eyre's report with its cause chain and
//! location, exit [`Exit::Unexpected`]. `RUST_BACKTRACE` adds a backtrace
//! to that report and changes nothing for a mistake: many developers keep
//! it set, and a mistake is not a bug to trace.
//!
//! Invariant: the kind is decided from the typed errors in the chain
//! ([`Mistake`] raised by the binary, the libraries' `StoreError`,
//! `OpsError`, `DaemonError`, the console's errors, I/O `NotFound`), never from a message's
//! text, so rewording a message cannot turn a mistake into a report.

use std::error::Error as StdError;
use std::io::IsTerminal as _;
use std::process::ExitCode;

use ankusa_daemon::{ConfigError, DaemonError};
use ankusa_ops::fleet::FleetError;
use ankusa_ops::OpsError;
use ankusa_store::StoreError;
use ankusa_ui::data::OpenError;
use ankusa_ui::ConsoleError;
use color_eyre::eyre::Report;

/// The exit codes of a failed command (0 success and 1 a failed check or
/// bench are the commands' own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The command line or a file it names is wrong (clap's own errors
    /// exit 2 as well).
    Usage = 2,
    /// The named thing does not exist: a store directory, a tenant, a hook,
    /// a file.
    NotFound = 3,
    /// It exists but cannot be used now: another process holds the store,
    /// the store needs migrating, no terminal, not allowed.
    Unavailable = 4,
    /// Not a user's mistake: the report follows.
    Unexpected = 5,
}

impl Exit {
    pub fn code(self) -> ExitCode {
        ExitCode::from(self as u8)
    }
}

/// A mistake the binary itself detects, with the line to print.
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct Mistake {
    pub exit: Exit,
    pub what: String,
}

pub fn usage(what: impl Into<String>) -> Report {
    Report::new(Mistake {
        exit: Exit::Usage,
        what: what.into(),
    })
}

pub fn not_found(what: impl Into<String>) -> Report {
    Report::new(Mistake {
        exit: Exit::NotFound,
        what: what.into(),
    })
}

pub fn unavailable(what: impl Into<String>) -> Report {
    Report::new(Mistake {
        exit: Exit::Unavailable,
        what: what.into(),
    })
}

/// Adds what to do when the named thing does not exist (`WHAT; HINT`);
/// any other error is returned as it is (a bug's report intact).
pub fn if_not_found(report: impl Into<Report>, hint: &str) -> Report {
    let report = report.into();
    match classify(&report) {
        Exit::NotFound => not_found(format!("{}; {hint}", one_line(&report))),
        _ => report,
    }
}

/// The kind of a failure: the first typed error in the chain that has one.
pub fn classify(report: &Report) -> Exit {
    report.chain().find_map(kind_of).unwrap_or(Exit::Unexpected)
}

fn kind_of(e: &(dyn StdError + 'static)) -> Option<Exit> {
    if let Some(m) = e.downcast_ref::<Mistake>() {
        return Some(m.exit);
    }
    if let Some(e) = e.downcast_ref::<StoreError>() {
        return store_kind(e);
    }
    if let Some(e) = e.downcast_ref::<OpsError>() {
        return match e {
            OpsError::NotFound(_) => Some(Exit::NotFound),
            OpsError::BadRequest(_) | OpsError::Invalid { .. } | OpsError::TooLarge(_) => {
                Some(Exit::Usage)
            }
            OpsError::Unauthorized(_) | OpsError::Forbidden(_) | OpsError::Conflict(_) => {
                Some(Exit::Unavailable)
            }
            OpsError::Store(e) => store_kind(e),
            OpsError::Unavailable(_) => Some(Exit::Unavailable),
            OpsError::Internal(_) => None,
        };
    }
    if let Some(e) = e.downcast_ref::<FleetError>() {
        return match e {
            FleetError::Read { source, .. } => kind_of(source),
            FleetError::Parse { .. } | FleetError::Node { .. } => Some(Exit::Usage),
        };
    }
    if let Some(e) = e.downcast_ref::<OpenError>() {
        return match e {
            OpenError::NoDir(_) => Some(Exit::NotFound),
            OpenError::NotDir(_) | OpenError::NotStore(_) | OpenError::Conflict => {
                Some(Exit::Usage)
            }
            OpenError::Store(e) => store_kind(e),
            OpenError::Secondary { .. } => None,
        };
    }
    if let Some(e) = e.downcast_ref::<ConsoleError>() {
        return match e {
            ConsoleError::NotATerminal | ConsoleError::NotOpen(_) => Some(Exit::Unavailable),
            ConsoleError::Marker(_) => Some(Exit::Usage),
            ConsoleError::Store(e) => store_kind(e),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<DaemonError>() {
        return match e {
            DaemonError::NoConfig(_) => Some(Exit::NotFound),
            DaemonError::Config(_) => Some(Exit::Usage),
            DaemonError::StoreInUse { .. } => Some(Exit::Unavailable),
            DaemonError::NodeIdChanged { .. } | DaemonError::SinksRefused { .. } => {
                Some(Exit::Usage)
            }
            // The cause below decides: a port in use, a missing store.
            DaemonError::Store { .. }
            | DaemonError::Io { .. }
            | DaemonError::Resume(_)
            | DaemonError::OpenFiles(_)
            | DaemonError::Client(_)
            | DaemonError::Server(_)
            | DaemonError::Writer
            | DaemonError::Cluster(_) => None,
        };
    }
    if e.is::<ConfigError>() {
        return Some(Exit::Usage);
    }
    if let Some(e) = e.downcast_ref::<ankusa_fairness::Error>() {
        return match e {
            ankusa_fairness::Error::Io { .. } => None,
            ankusa_fairness::Error::Parse { .. } | ankusa_fairness::Error::Invalid { .. } => {
                Some(Exit::Usage)
            }
        };
    }
    if let Some(e) = e.downcast_ref::<std::io::Error>() {
        return match e.kind() {
            std::io::ErrorKind::NotFound => Some(Exit::NotFound),
            std::io::ErrorKind::PermissionDenied
            | std::io::ErrorKind::AddrInUse
            | std::io::ErrorKind::AddrNotAvailable => Some(Exit::Unavailable),
            _ => None,
        };
    }
    None
}

fn store_kind(e: &StoreError) -> Option<Exit> {
    match e {
        StoreError::Missing(_) => Some(Exit::NotFound),
        StoreError::Unstamped { .. }
        | StoreError::NothingToMigrate { .. }
        | StoreError::InvalidTenant(_) => Some(Exit::Usage),
        StoreError::Locked { .. }
        | StoreError::FormatNewer { .. }
        | StoreError::FormatNeedsMigration { .. }
        | StoreError::MigrationInProgress { .. }
        | StoreError::ReadOnly(_)
        | StoreError::Busy(_)
        | StoreError::Reopening
        | StoreError::TenantLimit { .. }
        // Not a bug of ours: the file must be restored (the message says how).
        | StoreError::Damaged { .. } => Some(Exit::Unavailable),
        StoreError::Io { source, .. } => kind_of(source),
        _ => None,
    }
}

/// The chain on one line, outermost first, each cause once (a context that
/// already quotes its cause does not repeat it) and each message's first
/// line only (the rest is detail, such as a config file's excerpt under a
/// first line that names the file, line and key).
pub fn one_line(report: &Report) -> String {
    let mut out = String::new();
    for e in report.chain() {
        let msg = e.to_string();
        let first = msg.lines().next().unwrap_or("").trim();
        if first.is_empty() || out.contains(first) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(first);
    }
    out
}

/// Installs color-eyre: its colours only on a terminal and without
/// `NO_COLOR`, so a piped report has no escape codes.
pub fn install() {
    let plain = !std::io::stderr().is_terminal()
        || std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let mut hook = color_eyre::config::HookBuilder::default().display_env_section(false);
    if plain {
        hook = hook.theme(color_eyre::config::Theme::new());
    }
    if let Err(e) = hook.install() {
        eprintln!("ankusa: cannot install error reporting: {e}");
    }
}

/// Prints a failed command's error and returns its exit code.
pub fn report(report: &Report) -> ExitCode {
    let exit = classify(report);
    if exit == Exit::Unexpected {
        eprintln!("Error: {report:?}");
    } else {
        eprintln!("ankusa: {}", one_line(report));
    }
    exit.code()
}

#[cfg(test)]
mod tests {
    use super::*;
    use color_eyre::eyre::{eyre, WrapErr};

    #[test]
    fn a_typed_cause_under_a_context_decides_the_kind() {
        let r = Err::<(), _>(StoreError::Missing("/x".into()))
            .wrap_err("cannot open the store at /x")
            .unwrap_err();
        assert_eq!(classify(&r), Exit::NotFound);
        let r = Err::<(), _>(StoreError::Scan {
            family: "index",
            message: "boom".into(),
        })
        .wrap_err("cannot list")
        .unwrap_err();
        assert_eq!(classify(&r), Exit::Unexpected);
        assert_eq!(classify(&eyre!("a plain message")), Exit::Unexpected);
        assert_eq!(classify(&not_found("no tenant")), Exit::NotFound);
    }

    #[test]
    fn one_line_joins_the_chain_without_repeats_or_excerpts() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let r = Err::<(), _>(io)
            .wrap_err("cannot read a.toml: No such file")
            .unwrap_err();
        assert_eq!(one_line(&r), "cannot read a.toml: No such file");
        assert_eq!(classify(&r), Exit::NotFound);
        let r = usage("config error in a.toml at line 2: key `x`: bad\n  2 | x = 0");
        assert_eq!(
            one_line(&r),
            "config error in a.toml at line 2: key `x`: bad"
        );
    }

    #[test]
    fn a_hint_is_added_to_not_found_only() {
        let r = if_not_found(
            OpsError::NotFound("no tenant \"x\"".into()),
            "`ankusa tenants list` lists them",
        );
        assert_eq!(classify(&r), Exit::NotFound);
        assert_eq!(
            one_line(&r),
            "no tenant \"x\"; `ankusa tenants list` lists them"
        );
        let r = if_not_found(OpsError::Internal("bug".into()), "never shown");
        assert_eq!(one_line(&r), "bug");
        assert_eq!(classify(&r), Exit::Unexpected);
        let r = if_not_found(OpsError::BadRequest("bad cursor".into()), "never shown");
        assert_eq!(one_line(&r), "bad cursor");
        assert_eq!(classify(&r), Exit::Usage);
    }
}
