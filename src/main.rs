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

/// jemalloc instead of glibc's malloc for the whole process, RocksDB's C++
/// included: glibc kept the memory the block cache and compactions free in
/// its per-thread arenas, so the daemon's resident memory grew with the
/// backlog it walked although RocksDB's own stayed within its budget
/// (docs/benchmarks.md, "Daemon memory").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
