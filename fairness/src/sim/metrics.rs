//! Metrics computed from a run, and how each one compares.

use serde::Serialize;

use super::engine::RunResult;
pub use super::scenario::Metric;
use super::scenario::MetricSpec;

/// The standard metrics of one run, as reported in the table and the JSON.
///
/// A value with nothing to measure (no served row, no returning episode) is NaN, which
/// serializes as null and fails every comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Wait percentiles and maximum over every served row, in steps.
    pub wait_p50: f64,
    /// 95th percentile wait.
    pub wait_p95: f64,
    /// 99th percentile wait.
    pub wait_p99: f64,
    /// Largest wait.
    pub wait_max: f64,
    /// Largest first-serve delay of a new tenant (null when none was served).
    pub first_serve_new: Option<f64>,
    /// Largest first-serve delay of a returning tenant.
    pub first_serve_returning: Option<f64>,
    /// Tenants that had work and were never served.
    pub never_served: u64,
    /// Jain's index of served/fair, zero-served tenants included.
    pub jain: f64,
    /// Jain's index of bytes served / fair bytes.
    pub byte_jain: f64,
    /// Jain's index of raw bytes served (over weight), beside `byte_jain`: it rewards
    /// a scheduler that idles bytes one tenant could have used.
    pub raw_byte_jain: f64,
    /// Bytes delivered in the run, every tenant together.
    pub bytes_served: u64,
    /// Smallest served/fair over tenants with at least one row of fair share.
    pub worst_share: f64,
    /// Step at which everything was done; null when the run hit `max_steps`.
    pub drain_step: Option<u64>,
    /// Steps with claimable work and unused capacity.
    pub wc_violations: u64,
    /// Illegal claims.
    pub invalid_claims: u64,
    /// Whether exactly-once held.
    pub exactly_once: bool,
    /// Scheduler state size at the end of the run.
    pub state_end: usize,
    /// Largest scheduler state size during the run.
    pub state_peak: usize,
    /// The scheduler's declared ceiling, if any.
    pub state_bound: Option<usize>,
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    // Nearest rank, so a value is always one that was observed.
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64
}

fn in_role(r: &RunResult, role: Option<&str>, t: u32) -> bool {
    role.is_none_or(|role| r.tenants[t as usize].role == role)
}

fn ratios(r: &RunResult, role: Option<&str>) -> Vec<f64> {
    r.tenants
        .iter()
        .filter(|t| role.is_none_or(|role| t.role == role))
        .filter(|t| t.had_work() && t.fair >= 1.0)
        .map(|t| t.served as f64 / t.fair)
        .collect()
}

/// Jain's index of `xs` (1 is perfectly even).
pub fn jain(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    if xs.is_empty() || s2 == 0.0 {
        return if xs.is_empty() { 1.0 } else { 0.0 };
    }
    s * s / (n * s2)
}

/// Whether the role (every tenant when `role` is `None`) was served at all: the guard
/// every primary metric is paired with, so a scheduler that starves the role cannot
/// read well on a metric that only looks at what was served.
pub fn role_served(r: &RunResult, role: Option<&str>) -> bool {
    r.claims.iter().any(|(_, t, _)| in_role(r, role, *t))
}

/// Largest of `xs`, NaN when there is none.
fn max_or_nan(xs: impl Iterator<Item = f64>) -> f64 {
    xs.fold(f64::NAN, |acc, x| if acc.is_nan() { x } else { acc.max(x) })
}

/// Compute one metric of a run. A metric with nothing to measure is NaN.
pub fn compute(r: &RunResult, spec: &MetricSpec) -> f64 {
    let Some(m) = Metric::parse(&spec.metric) else {
        return f64::NAN;
    };
    let role = spec.role.as_deref();
    // Waits are taken over served rows, so a tenant of the role that had work and was
    // never served would vanish from them and make them look better; then there is no
    // honest value, and the waits are NaN.
    let waits = || {
        let starved = r
            .tenants
            .iter()
            .filter(|t| role.is_none_or(|role| t.role == role))
            .any(|t| t.had_work() && t.served == 0 && t.first_due.is_some_and(|d| d < r.steps));
        if starved {
            return Vec::new();
        }
        let mut w: Vec<u64> = r
            .claims
            .iter()
            .filter(|(_, t, _)| in_role(r, role, *t))
            .map(|(_, _, w)| *w)
            .collect();
        w.sort_unstable();
        w
    };
    let never = (r.steps + 1) as f64;
    match m {
        Metric::WaitP50 => percentile(&waits(), 50.0),
        Metric::WaitP95 => percentile(&waits(), 95.0),
        Metric::WaitP99 => percentile(&waits(), 99.0),
        Metric::WaitMax => waits().last().map_or(f64::NAN, |w| *w as f64),
        // An episode that never got its first claim counts as the whole run and more;
        // no episode at all (a tenant that never returned) is nothing to measure.
        Metric::FirstServeMax | Metric::ReturnServeMax => {
            let returning = m == Metric::ReturnServeMax;
            max_or_nan(
                r.tenants
                    .iter()
                    .filter(|t| role.is_none_or(|role| t.role == role))
                    .flat_map(|t| t.episodes.iter())
                    .filter(|(ret, _)| *ret == returning)
                    .map(|(_, d)| d.map_or(never, |d| d as f64)),
            )
        }
        // No tenant with a row's worth of fair share: the metric says nothing (NaN fails
        // every comparison, so a vacuous target cannot pass).
        Metric::ShareRatio => {
            let v = ratios(r, role).into_iter().fold(f64::INFINITY, f64::min);
            if v.is_finite() {
                v
            } else {
                f64::NAN
            }
        }
        Metric::Served => r
            .claims
            .iter()
            .filter(|(s, t, _)| {
                in_role(r, role, *t)
                    && spec.from.is_none_or(|f| *s >= f)
                    && spec.until.is_none_or(|u| *s < u)
            })
            .count() as f64,
        Metric::WindowServes | Metric::WindowError => {
            let window = spec.window.unwrap_or(0) as usize;
            let start = r
                .tenants
                .iter()
                .filter(|t| role.is_none_or(|role| t.role == role))
                .filter_map(|t| t.first_due)
                .min();
            let n = match start {
                Some(start) => r
                    .claims
                    .iter()
                    .filter(|(s, _, _)| *s >= start)
                    .take(window)
                    .filter(|(_, t, _)| in_role(r, role, *t))
                    .count() as f64,
                None => 0.0,
            };
            if m == Metric::WindowError {
                (n - spec.expect.unwrap_or(0.0)).abs()
            } else {
                n
            }
        }
        Metric::Jain => {
            let xs: Vec<f64> = r
                .tenants
                .iter()
                .filter(|t| role.is_none_or(|role| t.role == role))
                .filter(|t| t.had_work() && t.fair > 0.0)
                .map(|t| t.served as f64 / t.fair)
                .collect();
            jain(&xs)
        }
        Metric::ByteJain => byte_jain(r, role),
        Metric::RawByteJain => raw_byte_jain(r, role),
        Metric::DrainStep => r.drain_step.map_or(never, |d| d as f64),
        Metric::ClassShare => r
            .role_fair
            .iter()
            .filter(|(name, fair)| role.is_none_or(|role| role == name) && *fair >= 1.0)
            .map(|(name, fair)| {
                let served = r
                    .claims
                    .iter()
                    .filter(|(_, t, _)| r.tenants[*t as usize].role == *name)
                    .count() as f64;
                served / fair
            })
            .fold(f64::NAN, f64::min),
    }
}

fn byte_jain(r: &RunResult, role: Option<&str>) -> f64 {
    let xs: Vec<f64> = r
        .tenants
        .iter()
        .filter(|t| role.is_none_or(|role| t.role == role))
        .filter(|t| t.had_work() && t.fair_bytes > 0.0)
        .map(|t| t.served_bytes as f64 / t.fair_bytes)
        .collect();
    if xs.is_empty() {
        f64::NAN
    } else {
        jain(&xs)
    }
}

fn raw_byte_jain(r: &RunResult, role: Option<&str>) -> f64 {
    let xs: Vec<f64> = r
        .tenants
        .iter()
        .filter(|t| role.is_none_or(|role| t.role == role))
        .filter(|t| t.had_work())
        .map(|t| t.served_bytes as f64 / f64::from(t.weight.max(1)))
        .collect();
    if xs.is_empty() {
        f64::NAN
    } else {
        jain(&xs)
    }
}

/// The standard metrics of a run.
pub fn summarize(r: &RunResult) -> Summary {
    let mut w: Vec<u64> = r.claims.iter().map(|c| c.2).collect();
    w.sort_unstable();
    let mut first_new: Option<f64> = None;
    let mut first_ret: Option<f64> = None;
    let mut never_served = 0;
    for t in &r.tenants {
        if t.had_work() && t.served == 0 {
            never_served += 1;
        }
        for (ret, d) in &t.episodes {
            let Some(d) = d else { continue };
            let slot = if *ret { &mut first_ret } else { &mut first_new };
            *slot = Some(slot.map_or(*d as f64, |x| x.max(*d as f64)));
        }
    }
    let xs: Vec<f64> = r
        .tenants
        .iter()
        .filter(|t| t.had_work() && t.fair > 0.0)
        .map(|t| t.served as f64 / t.fair)
        .collect();
    Summary {
        wait_p50: percentile(&w, 50.0),
        wait_p95: percentile(&w, 95.0),
        wait_p99: percentile(&w, 99.0),
        wait_max: w.last().map_or(f64::NAN, |x| *x as f64),
        first_serve_new: first_new,
        first_serve_returning: first_ret,
        never_served,
        jain: jain(&xs),
        byte_jain: byte_jain(r, None),
        raw_byte_jain: raw_byte_jain(r, None),
        bytes_served: r.tenants.iter().map(|t| t.served_bytes).sum(),
        worst_share: {
            let v = ratios(r, None).into_iter().fold(f64::INFINITY, f64::min);
            if v.is_finite() {
                v
            } else {
                1.0
            }
        },
        drain_step: r.drain_step,
        wc_violations: r.wc_violations,
        invalid_claims: r.invalid_count,
        exactly_once: r.exactly_once,
        state_end: r.state_end,
        state_peak: r.state_peak,
        state_bound: r.state_bound,
    }
}
