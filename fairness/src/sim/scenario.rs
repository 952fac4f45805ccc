//! Scenario files: the TOML schema, its validation, and the built-in set.
//!
//! The schema is documented in `docs/fairness.md`; every struct here rejects unknown
//! keys so a typo is an error naming the key rather than a silently ignored setting.

use std::path::Path;

use serde::Deserialize;

use super::Error;

/// The built-in scenarios, shipped inside the binary.
pub const BUILT_IN: &[(&str, &str)] = &[
    ("skew.toml", include_str!("../../scenarios/skew.toml")),
    (
        "skew_overlap.toml",
        include_str!("../../scenarios/skew_overlap.toml"),
    ),
    ("trickle.toml", include_str!("../../scenarios/trickle.toml")),
    ("sybil.toml", include_str!("../../scenarios/sybil.toml")),
    (
        "many_keys.toml",
        include_str!("../../scenarios/many_keys.toml"),
    ),
    (
        "balanced.toml",
        include_str!("../../scenarios/balanced.toml"),
    ),
    (
        "heavy_idle.toml",
        include_str!("../../scenarios/heavy_idle.toml"),
    ),
    (
        "stalled_newcomer.toml",
        include_str!("../../scenarios/stalled_newcomer.toml"),
    ),
    (
        "starve_5.toml",
        include_str!("../../scenarios/starve_5.toml"),
    ),
    (
        "starve_6.toml",
        include_str!("../../scenarios/starve_6.toml"),
    ),
    (
        "starve_8.toml",
        include_str!("../../scenarios/starve_8.toml"),
    ),
    (
        "starve_pinned.toml",
        include_str!("../../scenarios/starve_pinned.toml"),
    ),
    ("fresh_8.toml", include_str!("../../scenarios/fresh_8.toml")),
    (
        "fresh_40.toml",
        include_str!("../../scenarios/fresh_40.toml"),
    ),
    (
        "byte_skew.toml",
        include_str!("../../scenarios/byte_skew.toml"),
    ),
    (
        "oversize.toml",
        include_str!("../../scenarios/oversize.toml"),
    ),
    (
        "retry_storm.toml",
        include_str!("../../scenarios/retry_storm.toml"),
    ),
    (
        "ten_thousand.toml",
        include_str!("../../scenarios/ten_thousand.toml"),
    ),
    (
        "weighted.toml",
        include_str!("../../scenarios/weighted.toml"),
    ),
    ("sources.toml", include_str!("../../scenarios/sources.toml")),
    (
        "weighted_in_sybil.toml",
        include_str!("../../scenarios/weighted_in_sybil.toml"),
    ),
    (
        "rated_backlog.toml",
        include_str!("../../scenarios/rated_backlog.toml"),
    ),
    (
        "policy_change.toml",
        include_str!("../../scenarios/policy_change.toml"),
    ),
    (
        "large_rows.toml",
        include_str!("../../scenarios/large_rows.toml"),
    ),
    (
        "large_rows_bytes.toml",
        include_str!("../../scenarios/large_rows_bytes.toml"),
    ),
    (
        "large_rows_over_half.toml",
        include_str!("../../scenarios/large_rows_over_half.toml"),
    ),
    (
        "large_rows_unbound.toml",
        include_str!("../../scenarios/large_rows_unbound.toml"),
    ),
    (
        "large_rows_inflight.toml",
        include_str!("../../scenarios/large_rows_inflight.toml"),
    ),
    (
        "capped_swarm.toml",
        include_str!("../../scenarios/capped_swarm.toml"),
    ),
    (
        "returning.toml",
        include_str!("../../scenarios/returning.toml"),
    ),
    (
        "paused_tenant.toml",
        include_str!("../../scenarios/paused_tenant.toml"),
    ),
    (
        "lone_tenant_idle_slots.toml",
        include_str!("../../scenarios/lone_tenant_idle_slots.toml"),
    ),
];

/// A parsed, validated scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name used in the table.
    pub name: String,
    /// One line on what the scenario shows.
    #[serde(default)]
    pub about: String,
    /// Seed of every random draw (row sizes, failures).
    #[serde(default)]
    pub seed: u64,
    /// The run stops here even if work remains.
    pub max_steps: u64,
    /// Skipped under `--quick`.
    #[serde(default)]
    pub slow: bool,
    /// Per-step capacity.
    pub capacity: Capacity,
    /// Defaults applied to every tenant group.
    #[serde(default)]
    pub defaults: TenantDefaults,
    /// Tenants, one by one or as generated groups.
    #[serde(default)]
    pub tenants: Vec<TenantSpec>,
    /// Never-seen tenants minted per step.
    #[serde(default)]
    pub fresh: Vec<FreshSpec>,
    /// The metric the pass rule compares.
    pub primary: MetricSpec,
    /// Absolute bounds ours must meet.
    #[serde(default)]
    pub targets: Vec<Target>,
}

/// Per-step capacity.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capacity {
    /// Rows claimed per step at most.
    pub rows: u32,
    /// Byte budget per step; unlimited when absent.
    pub bytes: Option<u64>,
    /// Rows in flight at once across all tenants; unlimited when absent.
    pub concurrency: Option<u32>,
    /// Bytes in flight at once across all tenants, as the daemon's
    /// `max_inflight_bytes`: a step's byte budget is what is left under it (at most
    /// `bytes`). Unlimited when absent.
    pub inflight_bytes: Option<u64>,
    /// Work-conserving caps: ours runs with [`crate::scheduler::Config::spare`] set
    /// to this, and every run is held to it (borrowing is legal, idle borrowable slots
    /// are a work-conservation violation). Hard caps when absent.
    pub spare: Option<SpareSpec>,
}

/// Spare capacity, as [`crate::scheduler::Spare`].
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpareSpec {
    /// Hard limit on one tenant's rows in flight.
    pub ceiling: u32,
    /// Rows of each step's limit that borrowing leaves unclaimed.
    #[serde(default)]
    pub reserve: u32,
}

impl SpareSpec {
    /// The scheduler's setting.
    pub fn spare(self) -> crate::scheduler::Spare {
        crate::scheduler::Spare {
            ceiling: self.ceiling,
            reserve: self.reserve,
        }
    }
}

/// A window in which a tenant is paused: its rows are withheld from the scheduler
/// from step `from` up to (not including) step `until`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pause {
    /// First paused step.
    pub from: u64,
    /// First step after the pause (the resume step).
    pub until: u64,
}

/// Row sizes: a fixed size, a uniform range, or weighted choices.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SizeSpec {
    /// Every row this many bytes.
    Fixed(u32),
    /// Uniform in `[min, max]`.
    Uniform {
        /// Smallest size.
        min: u32,
        /// Largest size.
        max: u32,
    },
    /// One of `values`, drawn with `weights` (equal when absent).
    Choice {
        /// Sizes to draw from.
        values: Vec<u32>,
        /// Relative weights, one per value.
        #[serde(default)]
        weights: Vec<u32>,
    },
}

/// Failures and retries.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrySpec {
    /// Probability an attempt fails, in `[0, 1]`.
    pub fail_rate: f64,
    /// Attempts before the row is dead.
    pub max_attempts: u32,
    /// Backoff in steps after the first failure; doubles per attempt.
    pub backoff: u64,
    /// Backoff ceiling in steps.
    #[serde(default = "default_backoff_max")]
    pub backoff_max: u64,
}

fn default_backoff_max() -> u64 {
    1 << 20
}

/// Settings shared by tenant groups; each may be overridden per group.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantDefaults {
    /// Steps a claimed row is held before its ack (at least 1).
    pub hold: Option<u64>,
    /// Row sizes.
    pub size: Option<SizeSpec>,
    /// Per-tenant concurrency cap.
    pub cap: Option<u32>,
    /// Weight (at least 1).
    pub weight: Option<u32>,
    /// Rows claimed per step at most, on average: a token bucket refilled by
    /// this much each step, holding at most `max(1, rate)` (the daemon's
    /// tenant `rate`, one step for one second). A tenant without a token has
    /// nothing claimable that step.
    pub rate: Option<f64>,
    /// Source the tenant's hooks arrive on.
    pub source: Option<String>,
    /// Failures and retries.
    pub retry: Option<RetrySpec>,
}

/// A policy change of a tenant at a step (the daemon's `ankusa tenants
/// policy set` mid-run): the fields given replace the tenant's from then on.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change {
    pub at: u64,
    pub weight: Option<u32>,
    pub rate: Option<f64>,
}

/// One arrival rule of a tenant.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arrival {
    /// A burst at this step.
    pub at: Option<u64>,
    /// A steady arrival every this many steps (from `from`, before `until`).
    pub every: Option<u64>,
    /// Start of a steady arrival.
    #[serde(default)]
    pub from: u64,
    /// End (exclusive) of a steady arrival; the run's end when absent.
    pub until: Option<u64>,
    /// Rows per arrival.
    pub rows: u32,
    /// Rows become due this many steps after arriving (a huge value: never ready).
    #[serde(default)]
    pub delay: u64,
}

/// Re-feed a tenant whenever it has nothing queued or in flight.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refeed {
    /// Rows added on each re-feed.
    pub rows: u32,
    /// No re-feed from this step on; the run's end when absent.
    pub until: Option<u64>,
}

/// A tenant, or a generated group of `count` tenants.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantSpec {
    /// Name; members of a group are `name-0`, `name-1`, ...
    pub name: String,
    /// How many tenants this entry generates.
    #[serde(default = "one")]
    pub count: u32,
    /// Role used by metrics; the name when absent.
    pub role: Option<String>,
    /// Arrival rules.
    #[serde(default)]
    pub arrivals: Vec<Arrival>,
    /// Member `i` has every arrival shifted by `i * stagger` steps.
    #[serde(default)]
    pub stagger: u64,
    /// Re-feed on drain.
    pub refeed: Option<Refeed>,
    /// Pause windows; the same steps for every member of a group (not staggered).
    #[serde(default)]
    pub pause: Vec<Pause>,
    /// Steps a claimed row is held before its ack (overrides the default).
    pub hold: Option<u64>,
    /// Row sizes (overrides the default).
    pub size: Option<SizeSpec>,
    /// Per-tenant concurrency cap (overrides the default).
    pub cap: Option<u32>,
    /// Weight (overrides the default).
    pub weight: Option<u32>,
    /// Rows per step at most (overrides the default; see [`TenantDefaults::rate`]).
    pub rate: Option<f64>,
    /// Policy changes mid-run, each at its step.
    #[serde(default)]
    pub changes: Vec<Change>,
    /// Source (overrides the default).
    pub source: Option<String>,
    /// Failures and retries (overrides the default).
    pub retry: Option<RetrySpec>,
}

fn one() -> u32 {
    1
}

/// Never-seen tenants minted every step.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FreshSpec {
    /// Name prefix of the minted tenants.
    pub name: String,
    /// Role used by metrics; the name when absent.
    pub role: Option<String>,
    /// Tenants minted per step.
    pub per_step: u32,
    /// First step that mints.
    #[serde(default)]
    pub from: u64,
    /// Step (exclusive) that stops minting.
    pub until: u64,
    /// Rows of each minted tenant.
    pub rows: u32,
    /// Steps a claimed row is held before its ack (overrides the default).
    pub hold: Option<u64>,
    /// Row sizes (overrides the default).
    pub size: Option<SizeSpec>,
    /// Per-tenant concurrency cap (overrides the default).
    pub cap: Option<u32>,
    /// Weight (overrides the default).
    pub weight: Option<u32>,
    /// Rows per step at most (see [`TenantDefaults::rate`]).
    pub rate: Option<f64>,
    /// Source (overrides the default).
    pub source: Option<String>,
    /// Failures and retries (overrides the default).
    pub retry: Option<RetrySpec>,
}

/// A metric, optionally restricted to a role.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricSpec {
    /// Metric name (see [`Metric`]).
    pub metric: String,
    /// Role the metric is computed over; all tenants when absent.
    pub role: Option<String>,
    /// Claims counted by window metrics.
    pub window: Option<u32>,
    /// Expected count for `window_error`.
    pub expect: Option<f64>,
    /// First step counted by `served`.
    pub from: Option<u64>,
    /// Step (exclusive) that ends `served`.
    pub until: Option<u64>,
    /// Relative tolerance of the comparison with the best alternative.
    #[serde(default)]
    pub tolerance: f64,
    /// Absolute slack of the comparison with the best alternative.
    #[serde(default)]
    pub slack: f64,
}

/// An absolute bound on one of our metrics.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// Metric name.
    pub metric: String,
    /// Role the metric is computed over; all tenants when absent.
    pub role: Option<String>,
    /// Claims counted by window metrics.
    pub window: Option<u32>,
    /// Expected count for `window_error`.
    pub expect: Option<f64>,
    /// First step counted by `served`.
    pub from: Option<u64>,
    /// Step (exclusive) that ends `served`.
    pub until: Option<u64>,
    /// Upper bound, inclusive.
    pub max: Option<f64>,
    /// Lower bound, inclusive.
    pub min: Option<f64>,
    /// Bound relative to oldest-first's value of the same metric (added to it).
    pub within_oldest_first: Option<f64>,
}

impl Target {
    /// The measured metric, as a spec.
    pub fn what(&self) -> MetricSpec {
        MetricSpec {
            metric: self.metric.clone(),
            role: self.role.clone(),
            window: self.window,
            expect: self.expect,
            from: self.from,
            until: self.until,
            tolerance: 0.0,
            slack: 0.0,
        }
    }
}

macro_rules! overrides {
    ($t:ty) => {
        impl $t {
            /// This entry's settings over `d`.
            pub fn settings(&self, d: &TenantDefaults) -> TenantDefaults {
                TenantDefaults {
                    hold: self.hold.or(d.hold),
                    size: self.size.clone().or_else(|| d.size.clone()),
                    cap: self.cap.or(d.cap),
                    weight: self.weight.or(d.weight),
                    rate: self.rate.or(d.rate),
                    source: self.source.clone().or_else(|| d.source.clone()),
                    retry: self.retry.or(d.retry),
                }
            }
        }
    };
}
overrides!(TenantSpec);
overrides!(FreshSpec);

fn invalid(file: &str, field: &str, message: impl Into<String>) -> Error {
    Error::Invalid {
        file: file.to_string(),
        field: field.to_string(),
        message: message.into(),
    }
}

impl Scenario {
    /// Parse and validate one scenario; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Scenario, Error> {
        let sc: Scenario = toml::from_str(text).map_err(|e| Error::Parse {
            file: file.to_string(),
            message: e.to_string(),
        })?;
        sc.validate(file)?;
        Ok(sc)
    }

    /// Read and parse a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Scenario::parse(&path.display().to_string(), &text)
    }

    fn validate(&self, file: &str) -> Result<(), Error> {
        if self.name.is_empty() {
            return Err(invalid(file, "name", "must not be empty"));
        }
        if self.max_steps == 0 || self.max_steps > 10_000_000 {
            return Err(invalid(file, "max_steps", "must be in 1..=10000000"));
        }
        if self.capacity.rows == 0 {
            return Err(invalid(file, "capacity.rows", "must be at least 1"));
        }
        if self.capacity.concurrency == Some(0) {
            return Err(invalid(file, "capacity.concurrency", "must be at least 1"));
        }
        if self.capacity.spare.is_some_and(|sp| sp.ceiling == 0) {
            return Err(invalid(
                file,
                "capacity.spare.ceiling",
                "must be at least 1",
            ));
        }
        if self.tenants.is_empty() && self.fresh.is_empty() {
            return Err(invalid(
                file,
                "tenants",
                "a scenario needs tenants or fresh",
            ));
        }
        check_defaults(file, "defaults", &self.defaults)?;
        let mut total: u64 = 0;
        for (i, t) in self.tenants.iter().enumerate() {
            let at = format!("tenants[{i}]");
            if t.name.is_empty() {
                return Err(invalid(file, &format!("{at}.name"), "must not be empty"));
            }
            if t.count == 0 {
                return Err(invalid(file, &format!("{at}.count"), "must be at least 1"));
            }
            total += u64::from(t.count);
            check_defaults(file, &at, &t.settings(&TenantDefaults::default()))?;
            for (j, a) in t.arrivals.iter().enumerate() {
                let aat = format!("{at}.arrivals[{j}]");
                match (a.at, a.every) {
                    (Some(_), Some(_)) => {
                        return Err(invalid(file, &aat, "set `at` or `every`, not both"))
                    }
                    (None, None) => return Err(invalid(file, &aat, "set `at` or `every`")),
                    (None, Some(0)) => {
                        return Err(invalid(file, &format!("{aat}.every"), "must be at least 1"))
                    }
                    _ => {}
                }
            }
            for (j, p) in t.pause.iter().enumerate() {
                if p.from >= p.until {
                    return Err(invalid(
                        file,
                        &format!("{at}.pause[{j}]"),
                        "`from` must be before `until`",
                    ));
                }
            }
            if t.arrivals.is_empty() && t.refeed.is_none() {
                return Err(invalid(file, &at, "a tenant needs arrivals or refeed"));
            }
        }
        for (i, f) in self.fresh.iter().enumerate() {
            let at = format!("fresh[{i}]");
            check_defaults(file, &at, &f.settings(&TenantDefaults::default()))?;
            total += u64::from(f.per_step) * f.until.saturating_sub(f.from);
        }
        if total > 5_000_000 {
            return Err(invalid(file, "tenants", "more than 5,000,000 tenants"));
        }
        check_metric(file, "primary", &self.primary)?;
        for (i, t) in self.targets.iter().enumerate() {
            let at = format!("targets[{i}]");
            check_metric(file, &at, &t.what())?;
            if t.max.is_none() && t.min.is_none() && t.within_oldest_first.is_none() {
                return Err(invalid(
                    file,
                    &at,
                    "set `max`, `min` or `within_oldest_first`",
                ));
            }
        }
        Ok(())
    }
}

fn check_defaults(file: &str, at: &str, d: &TenantDefaults) -> Result<(), Error> {
    if d.hold == Some(0) {
        return Err(invalid(file, &format!("{at}.hold"), "must be at least 1"));
    }
    if d.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        return Err(invalid(
            file,
            &format!("{at}.rate"),
            "must be a positive number",
        ));
    }
    if d.weight == Some(0) {
        return Err(invalid(file, &format!("{at}.weight"), "must be at least 1"));
    }
    if let Some(r) = d.retry {
        if !(0.0..=1.0).contains(&r.fail_rate) {
            return Err(invalid(
                file,
                &format!("{at}.retry.fail_rate"),
                "must be in [0, 1]",
            ));
        }
        if r.max_attempts == 0 {
            return Err(invalid(
                file,
                &format!("{at}.retry.max_attempts"),
                "must be at least 1",
            ));
        }
    }
    match &d.size {
        Some(SizeSpec::Uniform { min, max }) if min > max => Err(invalid(
            file,
            &format!("{at}.size"),
            "min must not exceed max",
        )),
        Some(SizeSpec::Choice { values, weights }) => {
            if values.is_empty() {
                return Err(invalid(
                    file,
                    &format!("{at}.size.values"),
                    "must not be empty",
                ));
            }
            if !weights.is_empty()
                && (weights.len() != values.len() || weights.iter().all(|w| *w == 0))
            {
                return Err(invalid(
                    file,
                    &format!("{at}.size.weights"),
                    "one weight per value, not all zero",
                ));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn check_metric(file: &str, at: &str, m: &MetricSpec) -> Result<(), Error> {
    let metric = Metric::parse(&m.metric).ok_or_else(|| {
        invalid(
            file,
            &format!("{at}.metric"),
            format!(
                "unknown metric `{}` (known: {})",
                m.metric,
                Metric::NAMES.join(", ")
            ),
        )
    })?;
    if metric.needs_window() && m.window.is_none() {
        return Err(invalid(
            file,
            &format!("{at}.window"),
            "this metric needs a window",
        ));
    }
    if metric == Metric::WindowError && m.expect.is_none() {
        return Err(invalid(
            file,
            &format!("{at}.expect"),
            "window_error needs `expect`",
        ));
    }
    if !(m.tolerance >= 0.0 && m.slack >= 0.0) {
        return Err(invalid(
            file,
            &format!("{at}.tolerance"),
            "tolerance and slack must be non-negative",
        ));
    }
    Ok(())
}

/// Load the built-in set, or every `*.toml` in `dir` (sorted by file name).
pub fn load_all(dir: Option<&Path>) -> Result<Vec<Scenario>, Error> {
    match dir {
        None => BUILT_IN
            .iter()
            .map(|(file, text)| Scenario::parse(file, text))
            .collect(),
        Some(dir) if dir.is_file() => Ok(vec![Scenario::load(dir)?]),
        Some(dir) => {
            let rd = std::fs::read_dir(dir).map_err(|source| Error::Io {
                path: dir.to_path_buf(),
                source,
            })?;
            let mut paths = Vec::new();
            for ent in rd {
                let ent = ent.map_err(|source| Error::Io {
                    path: dir.to_path_buf(),
                    source,
                })?;
                let p = ent.path();
                if p.extension().is_some_and(|e| e == "toml") {
                    paths.push(p);
                }
            }
            paths.sort();
            if paths.is_empty() {
                return Err(Error::Invalid {
                    file: dir.display().to_string(),
                    field: "-".into(),
                    message: "no *.toml scenario in this directory".into(),
                });
            }
            paths.iter().map(|p| Scenario::load(p)).collect()
        }
    }
}

/// The metrics a scenario can name as primary or as a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Median wait (steps from due to claim) of served rows.
    WaitP50,
    /// 95th percentile wait.
    WaitP95,
    /// 99th percentile wait.
    WaitP99,
    /// Largest wait.
    WaitMax,
    /// Largest first-serve delay of a tenant's first episode.
    FirstServeMax,
    /// Largest first-serve delay of a returning episode (after a drain).
    ReturnServeMax,
    /// Smallest served / fair share over tenants with at least one row of fair share.
    ShareRatio,
    /// Rows served, optionally within `[from, until)`.
    Served,
    /// Rows served to the role among the first `window` claims from its first due step.
    WindowServes,
    /// Distance of `window_serves` from `expect`.
    WindowError,
    /// Jain's index of served / fair over every tenant that had work.
    Jain,
    /// Step at which everything was done (the run's length plus one if never).
    DrainStep,
    /// Served / fair share of a role taken as one class (max-min between roles); the
    /// smallest over roles when no role is named.
    ClassShare,
    /// Jain's index of bytes served / fair bytes (the dominant-resource fluid split of
    /// each step's rows and byte budget) over every tenant that had work.
    ByteJain,
    /// Jain's index of raw bytes served (over weight) by every tenant that had work:
    /// the yardstick that rewards idling capacity when one tenant cannot use its
    /// bytes, so only meaningful where no tenant is slot-bound (then it equals
    /// `byte_jain` over a run where every tenant stays backlogged).
    RawByteJain,
}

impl Metric {
    /// Every metric name accepted in a scenario file.
    pub const NAMES: &'static [&'static str] = &[
        "wait_p50",
        "wait_p95",
        "wait_p99",
        "wait_max",
        "first_serve_max",
        "return_serve_max",
        "share_ratio",
        "served",
        "window_serves",
        "window_error",
        "jain",
        "drain_step",
        "class_share",
        "byte_jain",
        "raw_byte_jain",
    ];

    /// Parse a metric name.
    pub fn parse(s: &str) -> Option<Metric> {
        Some(match s {
            "wait_p50" => Metric::WaitP50,
            "wait_p95" => Metric::WaitP95,
            "wait_p99" => Metric::WaitP99,
            "wait_max" => Metric::WaitMax,
            "first_serve_max" => Metric::FirstServeMax,
            "return_serve_max" => Metric::ReturnServeMax,
            "share_ratio" => Metric::ShareRatio,
            "served" => Metric::Served,
            "window_serves" => Metric::WindowServes,
            "window_error" => Metric::WindowError,
            "jain" => Metric::Jain,
            "drain_step" => Metric::DrainStep,
            "class_share" => Metric::ClassShare,
            "byte_jain" => Metric::ByteJain,
            "raw_byte_jain" => Metric::RawByteJain,
            _ => return None,
        })
    }

    /// Whether a larger value is better.
    pub fn higher_is_better(self) -> bool {
        matches!(
            self,
            Metric::ShareRatio
                | Metric::Served
                | Metric::Jain
                | Metric::WindowServes
                | Metric::ClassShare
                | Metric::ByteJain
                | Metric::RawByteJain
        )
    }

    /// Whether the metric needs `window`.
    pub fn needs_window(self) -> bool {
        matches!(self, Metric::WindowServes | Metric::WindowError)
    }
}
