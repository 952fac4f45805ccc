//! Runs the fairness benchmark the way `ankusa bench fairness` does, for use before
//! the binary is wired: `cargo run --release -p ankusa-fairness --example fairness_bench
//! -- [--quick] [--json] [--scenarios PATH]`.

use std::path::PathBuf;
use std::process::ExitCode;

use ankusa_fairness::{run_bench, BenchOptions};

fn main() -> ExitCode {
    let mut opts = BenchOptions::default();
    let mut json = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => opts.quick = true,
            "--json" => json = true,
            "--scenarios" => opts.scenarios_path = args.next().map(PathBuf::from),
            other => {
                eprintln!("unknown argument {other}");
                return ExitCode::from(2);
            }
        }
    }
    match run_bench(&opts) {
        Ok(report) => {
            if json {
                println!("{:#}", report.to_json());
            } else {
                print!("{}", report.render_table());
            }
            if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
