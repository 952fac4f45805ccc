//! Self-asserting benchmarks: each compares cells of one run against each
//! other (ratios), never against a wall-clock constant from another machine.

mod daemon_metrics;
pub mod delivery;
pub mod dispatch_tick;
pub mod gauges;
pub mod ingest;
mod lone_drain;
pub mod migrate;
pub mod routing;

use std::path::PathBuf;
use std::process::ExitCode;

use color_eyre::eyre::Result;

/// `ankusa bench fairness`: runs the simulator (in `ankusa-fairness`) and
/// applies its pass rule.
pub fn fairness(quick: bool, json: bool, scenarios: Option<PathBuf>) -> Result<ExitCode> {
    let opts = ankusa_fairness::SuiteOptions {
        scenarios_path: scenarios,
        quick,
    };
    let report = ankusa_fairness::run_suite(&opts)?;
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

/// The grid shared by `bench gauges` and `bench dispatch-tick`: queued rows
/// 10^3..10^6 with 10 tenants, then 10, 10^3, 10^5 tenants (8 active) with
/// at least 10^4 rows. `--quick` keeps the two smallest of each axis.
pub fn grid(quick: bool) -> Vec<(&'static str, u64, u32)> {
    let row_axis: &[u64] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 100_000, 1_000_000]
    };
    let tenant_axis: &[u32] = if quick {
        &[10, 1_000]
    } else {
        &[10, 1_000, 100_000]
    };
    let mut g: Vec<(&'static str, u64, u32)> = row_axis.iter().map(|&r| ("rows", r, 10)).collect();
    g.extend(
        tenant_axis
            .iter()
            .map(|&t| ("tenants", (2 * u64::from(t)).max(10_000), t)),
    );
    g
}

/// The "does not grow" rule of the tick benches: the slowest cell within 2x
/// of the fastest, the fastest counted as at least 1 ms (below that, a
/// bigger store costs a little more per seek without growing with the
/// queue), and the slowest under 50 ms.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct FlatRule {
    pub fastest_ms: f64,
    pub slowest_ms: f64,
    pub ratio: f64,
    pub pass: bool,
    pub rule: &'static str,
}

impl FlatRule {
    pub fn judge(cells_ms: &[f64]) -> Self {
        let fastest = cells_ms.iter().copied().fold(f64::INFINITY, f64::min);
        let slowest = cells_ms.iter().copied().fold(0.0, f64::max);
        let ratio = slowest / fastest.max(1.0);
        Self {
            fastest_ms: fastest,
            slowest_ms: slowest,
            ratio,
            pass: !cells_ms.is_empty() && ratio <= 2.0 && slowest < 50.0,
            rule: "slowest <= 2 x max(fastest, 1 ms) and slowest < 50 ms",
        }
    }

    pub fn summary(&self) -> String {
        format!(
            "fastest {:.3} ms, slowest {:.3} ms, slowest / max(fastest, 1 ms) = {:.2}: {}",
            self.fastest_ms,
            self.slowest_ms,
            self.ratio,
            if self.pass { "PASS" } else { "FAIL" }
        )
    }

    pub fn exit_code(&self) -> ExitCode {
        if self.pass {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    }
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

/// Serves `app` on a loopback port of the current Tokio runtime, in the
/// background for as long as the runtime runs; returns its address. The
/// benches' sinks: `what` names it in the error.
pub(crate) async fn serve_loopback(app: axum::Router, what: &str) -> Result<std::net::SocketAddr> {
    use color_eyre::eyre::WrapErr;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .wrap_err_with(|| format!("cannot bind {what}"))?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(addr)
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
    fn the_flat_rule_has_a_1ms_floor_and_a_50ms_ceiling() {
        assert!(
            FlatRule::judge(&[0.2, 0.4, 1.9]).pass,
            "under the floor, 1.9 ms is within 2 x 1 ms"
        );
        assert!(!FlatRule::judge(&[0.2, 2.1]).pass);
        assert!(FlatRule::judge(&[20.0, 39.0]).pass);
        assert!(
            !FlatRule::judge(&[30.0, 55.0]).pass,
            "over 50 ms fails even within 2x"
        );
        assert!(!FlatRule::judge(&[]).pass, "no cells is not a pass");
    }

    #[test]
    fn the_grid_has_both_axes() {
        assert_eq!(grid(true).len(), 4);
        assert_eq!(grid(false).len(), 7);
        assert!(grid(false).contains(&("tenants", 200_000, 100_000)));
    }

    #[test]
    fn percentile_by_nearest_rank() {
        let mut s: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&mut s, 0.0), 1.0);
        assert_eq!(percentile(&mut s, 100.0), 10.0);
        assert_eq!(percentile(&mut s, 10.0), 2.0);
    }
}
