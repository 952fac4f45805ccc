//! The scenario suite and its verdict: run every scenario under every scheduler and
//! apply the pass rule (what `ankusa bench fairness` prints).

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::json;

use super::engine;
use super::metrics::{self, Metric, Summary};
use super::policies::{self, OLDEST_FIRST, OURS};
use super::scenario::{self, MetricSpec, Scenario};
use super::Error;

/// What to run.
#[derive(Debug, Clone, Default)]
pub struct SuiteOptions {
    /// A scenario file, or a directory of `*.toml` files; the built-in set when `None`.
    pub scenarios_path: Option<PathBuf>,
    /// Skip scenarios marked `slow`.
    pub quick: bool,
}

/// One scheduler's run of one scenario.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyRun {
    /// Scheduler name.
    pub policy: String,
    /// Value of the scenario's primary metric.
    pub primary: f64,
    /// The primary metric's guard: the role it is computed over was served at all.
    /// A run that fails it cannot be the best alternative, and ours fails on it.
    pub role_served: bool,
    /// The standard metrics.
    pub summary: Summary,
    /// First few illegal claims, if any.
    pub invalid: Vec<String>,
}

/// An absolute target checked on ours.
#[derive(Debug, Clone, Serialize)]
pub struct TargetResult {
    /// What was checked, e.g. `first_serve_max[light] <= 4`.
    pub check: String,
    /// Our value.
    pub value: f64,
    /// Whether it held.
    pub ok: bool,
}

/// The verdict on one scenario.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioReport {
    /// Scenario name.
    pub name: String,
    /// What it shows.
    pub about: String,
    /// Primary metric name.
    pub metric: String,
    /// Role it is computed over, if any.
    pub role: Option<String>,
    /// Whether larger is better.
    pub higher_is_better: bool,
    /// Relative tolerance.
    pub tolerance: f64,
    /// Absolute slack.
    pub slack: f64,
    /// Every scheduler's run, ours last.
    pub runs: Vec<PolicyRun>,
    /// Best alternative on the primary metric.
    pub best_alternative: String,
    /// Its value.
    pub best_value: f64,
    /// Ours on the primary metric.
    pub ours: f64,
    /// Ours is at least as good as the best alternative, within tolerance.
    pub primary_ok: bool,
    /// Absolute targets.
    pub targets: Vec<TargetResult>,
    /// Ours made no illegal claim, held exactly-once, conserved work, and stayed under
    /// its state ceiling.
    pub guards_ok: bool,
    /// Everything above held.
    pub passed: bool,
}

/// The whole suite: every scenario's verdict, and the overall one.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteReport {
    /// Whether `--quick` was used.
    pub quick: bool,
    /// Scenarios skipped by `--quick`.
    pub skipped: Vec<String>,
    /// Per-scenario results.
    pub scenarios: Vec<ScenarioReport>,
}

fn spec_label(spec: &MetricSpec) -> String {
    match &spec.role {
        Some(r) => format!("{}[{r}]", spec.metric),
        None => spec.metric.clone(),
    }
}

fn better_or_equal(higher: bool, ours: f64, best: f64, tol: f64, slack: f64) -> bool {
    if higher {
        ours >= best * (1.0 - tol) - slack - 1e-9
    } else {
        ours <= best * (1.0 + tol) + slack + 1e-9
    }
}

/// Run one scenario under every scheduler.
pub fn run_scenario(sc: &Scenario) -> ScenarioReport {
    let metric = Metric::parse(&sc.primary.metric).unwrap_or(Metric::WaitP95);
    let higher = metric.higher_is_better();
    let mut runs = Vec::new();
    let mut results = Vec::new();
    for mut p in policies::all(sc) {
        let r = engine::run(sc, p.as_mut());
        runs.push(PolicyRun {
            policy: r.policy.clone(),
            primary: metrics::compute(&r, &sc.primary),
            role_served: metrics::role_served(&r, sc.primary.role.as_deref()),
            summary: metrics::summarize(&r),
            invalid: r.invalid.clone(),
        });
        results.push(r);
    }
    // Only a run that served the role and has a value can be the yardstick: a
    // scheduler that serves nobody must not set the bar.
    let (best_alternative, best_value) = runs
        .iter()
        .filter(|r| r.policy != OURS && r.role_served && !r.primary.is_nan())
        .map(|r| (r.policy.clone(), r.primary))
        .fold((String::new(), f64::NAN), |acc, (n, v)| {
            let take = acc.1.is_nan() || if higher { v > acc.1 } else { v < acc.1 };
            if take {
                (n, v)
            } else {
                acc
            }
        });
    let ours_run = runs.iter().find(|r| r.policy == OURS);
    let ours_res = results.iter().find(|r| r.policy == OURS);
    let ours = ours_run.map_or(f64::NAN, |r| r.primary);
    let ours_served = ours_run.is_some_and(|r| r.role_served);
    // NaN fails every comparison, so ours must have a value; with no alternative that
    // served the role, serving it with a value is enough.
    let primary_ok = ours_served
        && !ours.is_nan()
        && (best_value.is_nan()
            || better_or_equal(
                higher,
                ours,
                best_value,
                sc.primary.tolerance,
                sc.primary.slack,
            ));

    let mut targets = Vec::new();
    if let Some(res) = ours_res {
        for t in &sc.targets {
            let what = t.what();
            let value = metrics::compute(res, &what);
            let label = spec_label(&what);
            if let Some(max) = t.max {
                targets.push(TargetResult {
                    check: format!("{label} <= {max}"),
                    value,
                    ok: value <= max,
                });
            }
            if let Some(min) = t.min {
                targets.push(TargetResult {
                    check: format!("{label} >= {min}"),
                    value,
                    ok: value >= min,
                });
            }
            if let Some(within) = t.within_oldest_first {
                let base = results
                    .iter()
                    .find(|r| r.policy == OLDEST_FIRST)
                    .map_or(f64::NAN, |r| metrics::compute(r, &what));
                targets.push(TargetResult {
                    check: format!("{label} <= oldest-first ({base}) + {within}"),
                    value,
                    ok: value <= base + within,
                });
            }
        }
    }
    let guards_ok = ours_run.is_some_and(|r| {
        let s = &r.summary;
        s.wc_violations == 0
            && s.invalid_claims == 0
            && s.exactly_once
            && s.state_bound.is_none_or(|b| s.state_peak <= b)
    });
    let passed = primary_ok && guards_ok && targets.iter().all(|t| t.ok);
    ScenarioReport {
        name: sc.name.clone(),
        about: sc.about.clone(),
        metric: sc.primary.metric.clone(),
        role: sc.primary.role.clone(),
        higher_is_better: higher,
        tolerance: sc.primary.tolerance,
        slack: sc.primary.slack,
        runs,
        best_alternative,
        best_value,
        ours,
        primary_ok,
        targets,
        guards_ok,
        passed,
    }
}

/// Run the suite: every scenario (built in, or from `scenarios_path`) under every
/// scheduler. Fails only on scenario files that cannot be read or are invalid; a
/// failing pass rule is reported by [`SuiteReport::passed`].
pub fn run_suite(opts: &SuiteOptions) -> Result<SuiteReport, Error> {
    let all = scenario::load_all(opts.scenarios_path.as_deref())?;
    let mut skipped = Vec::new();
    let mut scenarios = Vec::new();
    for sc in &all {
        if opts.quick && sc.slow {
            skipped.push(sc.name.clone());
            continue;
        }
        scenarios.push(run_scenario(sc));
    }
    Ok(SuiteReport {
        quick: opts.quick,
        skipped,
        scenarios,
    })
}

fn fmt_num(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else if v.fract() == 0.0 && v.abs() < 1e12 {
        format!("{}", v as i64)
    } else {
        format!("{v:.3}")
    }
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or("-".into(), fmt_num)
}

impl SuiteReport {
    /// The pass rule: on every scenario ours is at least as good as the best
    /// alternative on the primary metric (within tolerance), meets the scenario's
    /// absolute targets, makes no illegal claim, holds exactly-once, has zero
    /// work-conservation violations, and stays under its state ceiling.
    pub fn passed(&self) -> bool {
        !self.scenarios.is_empty() && self.scenarios.iter().all(|s| s.passed)
    }

    /// A plain-text report: the primary-metric matrix (scenario x scheduler), then
    /// each scenario's standard metrics and verdict.
    pub fn render_table(&self) -> String {
        let mut out = String::new();
        let names: Vec<String> = self
            .scenarios
            .first()
            .map(|s| s.runs.iter().map(|r| r.policy.clone()).collect())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "Primary metric by scheduler (* = best alternative, ! = role never served, - = nothing to measure)"
        );
        let _ = write!(out, "{:<22} {:<30}", "scenario", "metric");
        for n in &names {
            let _ = write!(out, " {n:>17}");
        }
        let _ = writeln!(out, "  verdict");
        for s in &self.scenarios {
            let label = match &s.role {
                Some(r) => format!(
                    "{}[{r}] {}",
                    s.metric,
                    if s.higher_is_better { "^" } else { "v" }
                ),
                None => format!(
                    "{} {}",
                    s.metric,
                    if s.higher_is_better { "^" } else { "v" }
                ),
            };
            let _ = write!(out, "{:<22} {:<30}", s.name, label);
            for r in &s.runs {
                let star = if r.policy == s.best_alternative {
                    "*"
                } else if !r.role_served {
                    "!"
                } else {
                    " "
                };
                let _ = write!(out, " {:>16}{star}", fmt_num(r.primary));
            }
            let _ = writeln!(out, "  {}", if s.passed { "PASS" } else { "FAIL" });
        }
        let _ = writeln!(out);
        for s in &self.scenarios {
            let _ = writeln!(out, "== {}: {}", s.name, s.about);
            let _ = writeln!(
                out,
                "{:<18} {:>10} {:>7} {:>7} {:>7} {:>7} {:>9} {:>9} {:>6} {:>6} {:>6} {:>8} {:>6} {:>7} {:>4} {:>4} {:>9}",
                "scheduler", "primary", "p50", "p95", "p99", "max", "first-new", "first-ret", "jain", "b-jain", "raw-bj", "MB", "worst", "drain", "wcv", "x1", "state"
            );
            for r in &s.runs {
                let m = &r.summary;
                let _ = writeln!(
                    out,
                    "{:<18} {:>10} {:>7} {:>7} {:>7} {:>7} {:>9} {:>9} {:>6.3} {:>6.3} {:>6.3} {:>8.1} {:>6.3} {:>7} {:>4} {:>4} {:>9}",
                    r.policy,
                    fmt_num(r.primary),
                    fmt_num(m.wait_p50),
                    fmt_num(m.wait_p95),
                    fmt_num(m.wait_p99),
                    fmt_num(m.wait_max),
                    fmt_opt(m.first_serve_new),
                    fmt_opt(m.first_serve_returning),
                    m.jain,
                    m.byte_jain,
                    m.raw_byte_jain,
                    m.bytes_served as f64 / 1e6,
                    m.worst_share,
                    m.drain_step.map_or("-".into(), |d| d.to_string()),
                    m.wc_violations,
                    if m.exactly_once && m.invalid_claims == 0 { "ok" } else { "BAD" },
                    format!("{}/{}", m.state_end, m.state_peak),
                );
            }
            let _ = writeln!(
                out,
                "primary {}: ours {} vs best alternative {} {} (tolerance {}, slack {}) -> {}",
                spec_label(&MetricSpec {
                    metric: s.metric.clone(),
                    role: s.role.clone(),
                    window: None,
                    expect: None,
                    from: None,
                    until: None,
                    tolerance: 0.0,
                    slack: 0.0,
                }),
                fmt_num(s.ours),
                s.best_alternative,
                fmt_num(s.best_value),
                s.tolerance,
                s.slack,
                if s.primary_ok { "ok" } else { "WORSE" }
            );
            for t in &s.targets {
                let _ = writeln!(
                    out,
                    "target {}: ours {} -> {}",
                    t.check,
                    fmt_num(t.value),
                    if t.ok { "ok" } else { "MISSED" }
                );
            }
            let _ = writeln!(
                out,
                "guards (no wcv, legal claims, exactly-once, state bounded): {}",
                if s.guards_ok { "ok" } else { "FAILED" }
            );
            let _ = writeln!(out);
        }
        if !self.skipped.is_empty() {
            let _ = writeln!(out, "skipped by --quick: {}", self.skipped.join(", "));
        }
        let _ = writeln!(
            out,
            "fairness bench: {}",
            if self.passed() { "PASS" } else { "FAIL" }
        );
        out
    }

    /// The report as JSON. Shape (stable, documented in `docs/fairness.md`):
    /// `{"passed": bool, "quick": bool, "skipped": [name], "scenarios": [ScenarioReport]}`.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "passed": self.passed(),
            "quick": self.quick,
            "skipped": self.skipped,
            "scenarios": serde_json::to_value(&self.scenarios).unwrap_or(serde_json::Value::Null),
        })
    }
}
