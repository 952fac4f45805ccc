//! `ankusa`: the webhook relay's single binary.
//!
//! Subcommands are thin: they parse, open the store the right way, call the
//! `ankusa-store` API and print. Exit codes: 0 success, 1 a check or bench
//! that ran and failed its assertion; a failure's code and what it prints
//! are [`failure`]'s (docs/cli.md).

mod bench;
mod cli;
mod demo;
mod failure;
mod output;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    failure::install();
    init_tracing();
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(report) => failure::report(&report),
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("ANKUSA_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
