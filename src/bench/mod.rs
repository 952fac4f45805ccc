//! Self-asserting benchmarks: each compares cells of one run against each
//! other (ratios), never against a wall-clock constant from another machine.

pub mod dispatch_tick;
pub mod gauges;
pub mod ingest;
pub mod migrate;

use std::path::PathBuf;
use std::process::ExitCode;

use color_eyre::eyre::Result;

/// `ankusa bench fairness`: runs the simulator (in `ankusa-fairness`) and
/// applies its pass rule.
pub fn fairness(quick: bool, json: bool, scenarios: Option<PathBuf>) -> Result<ExitCode> {
    let opts = ankusa_fairness::BenchOptions {
        scenarios_path: scenarios,
        quick,
    };
    let report = ankusa_fairness::run_bench(&opts)?;
    if json {
        println!("{:#}", report.to_json());
    } else {
        print!("{}", report.render_table());
    }
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Where a bench builds its stores: `dir` when given (kept afterwards, so
/// fixtures can be inspected), else a temporary directory removed when the
/// returned guard drops.
pub fn work_dir(
    dir: Option<PathBuf>,
    prefix: &str,
) -> Result<(Option<tempfile::TempDir>, PathBuf)> {
    use color_eyre::eyre::WrapErr;
    match dir {
        Some(d) => {
            std::fs::create_dir_all(&d)
                .wrap_err_with(|| format!("cannot create {}", d.display()))?;
            Ok((None, d))
        }
        None => {
            let tmp = tempfile::Builder::new().prefix(prefix).tempdir()?;
            let path = tmp.path().to_path_buf();
            Ok((Some(tmp), path))
        }
    }
}

/// The `p`-th percentile (0..=100) of a sample, by nearest rank.
pub fn percentile(samples: &mut [f64], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * (samples.len() as f64 - 1.0)).round() as usize;
    samples[rank.min(samples.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_by_nearest_rank() {
        let mut s: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&mut s, 0.0), 1.0);
        assert_eq!(percentile(&mut s, 100.0), 10.0);
        assert_eq!(percentile(&mut s, 10.0), 2.0);
    }
}
