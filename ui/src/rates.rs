//! Rates and trends, computed from the console's own successive samples of
//! the store's cumulative totals ([`ankusa_store::Totals`]) and levels.
//!
//! Every refresh already re-reads the counters of what is on screen (the
//! node, the tenants of a page, one tenant): each reading becomes a
//! [`Sample`] of that series, so a rate costs no read of its own and no
//! fold. What this module owns, and its invariants:
//! - A series keeps two bounded rings: the recent samples (the rate
//!   window, [`RATE_WINDOW_MS`], at most [`RECENT_MAX`]) and a thinned
//!   history (one sample per [`HISTORY_STEP_MS`], at most [`HISTORY_MAX`]:
//!   an hour) for the backlog and oldest-due trends.
//! - The book holds the node and at most [`MAX_TENANT_SERIES`] tenants;
//!   adding one more evicts the tenant least recently sampled (sampled is
//!   shown: only what a screen shows is read). Memory is bounded whatever
//!   the number of tenants.
//! - A sample is stamped with the time the data last matched the store (the
//!   last catch-up with the daemon), so a re-read without a catch-up adds
//!   nothing; a sample no newer than the last is ignored.
//! - A total that went down (a store swapped under the console) is a
//!   reset: the rate starts again from that sample instead of showing a
//!   negative or a wrapped rate.
//! - No rate is made up: one sample gives none ([`Series::rate`] is
//!   `None`), and the screens say why when no daemon moves the totals.

use std::collections::{HashMap, VecDeque};

use ankusa_store::{Total, Totals};

/// Rates are averaged over this much time.
pub const RATE_WINDOW_MS: u64 = 60_000;
/// Recent samples kept per series at most (a refresh faster than a second
/// shortens the window rather than growing the ring).
pub const RECENT_MAX: usize = 128;
/// One history sample per this much time.
pub const HISTORY_STEP_MS: u64 = 10_000;
/// History samples kept per series: an hour at one per 10 s.
pub const HISTORY_MAX: usize = 360;
/// Trends compare now with this long ago (or the oldest sample, if newer).
pub const TREND_SPAN_MS: u64 = 600_000;
/// Tenant series kept at most (the node's is always kept).
pub const MAX_TENANT_SERIES: usize = 128;

/// One reading of a series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// When the data last matched the store (ms since the epoch).
    pub at: u64,
    pub totals: Totals,
    /// Rows waiting (pending + scheduled).
    pub backlog: i64,
    /// How overdue the oldest due row is (0: nothing overdue); `None` when
    /// the reading did not include it (a list row).
    pub oldest_age_ms: Option<u64>,
}

/// Which way a number is going.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Up,
    Down,
    Flat,
}

impl Dir {
    pub fn arrow(self) -> &'static str {
        match self {
            Dir::Up => "↑",
            Dir::Down => "↓",
            Dir::Flat => "→",
        }
    }

    /// `now` against `then`: flat within `tolerance`.
    fn of(now: f64, then: f64, tolerance: f64) -> Dir {
        if now > then + tolerance {
            Dir::Up
        } else if now < then - tolerance {
            Dir::Down
        } else {
            Dir::Flat
        }
    }
}

/// A rate over the recent window, and where it is heading.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Per second, over `over_ms`.
    pub per_s: f64,
    pub over_ms: u64,
    /// The last interval's rate against the window's: up when load grew
    /// since the previous sample. Flat within a fifth of the window's rate
    /// or one event in the last interval, whichever is more.
    pub dir: Dir,
}

/// A level now against `over_ms` ago.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trend {
    pub now: i64,
    pub then: i64,
    pub over_ms: u64,
    /// Flat within a twentieth of the older level (at least 1 row, or one
    /// second of age).
    pub dir: Dir,
}

/// The samples of one series (the node, or one tenant).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    recent: VecDeque<Sample>,
    history: VecDeque<Sample>,
}

fn went_down(now: &Totals, then: &Totals) -> bool {
    Total::ALL.iter().any(|&t| now.get(t) < then.get(t))
}

impl Series {
    /// Adds a reading; whether it was taken (a reading no newer than the
    /// last one is not).
    pub fn push(&mut self, s: Sample) -> bool {
        if let Some(last) = self.recent.back() {
            if s.at <= last.at {
                return false;
            }
            if went_down(&s.totals, &last.totals) {
                self.recent.clear();
            }
        }
        self.recent.push_back(s);
        // Keep one sample at or past the window's start as the baseline.
        while self.recent.len() > 2 && self.recent[1].at.saturating_add(RATE_WINDOW_MS) <= s.at {
            self.recent.pop_front();
        }
        while self.recent.len() > RECENT_MAX {
            self.recent.pop_front();
        }
        let step = self
            .history
            .back()
            .is_none_or(|h| s.at.saturating_sub(h.at) >= HISTORY_STEP_MS);
        if step {
            self.history.push_back(s);
            while self.history.len() > HISTORY_MAX {
                self.history.pop_front();
            }
        }
        true
    }

    pub fn last(&self) -> Option<&Sample> {
        self.recent.back()
    }

    /// The rate of `t` over the recent window; `None` before two samples
    /// (the first one, or the first after a reset).
    pub fn rate(&self, t: Total) -> Option<Rate> {
        let (first, last) = (self.recent.front()?, self.recent.back()?);
        let over_ms = last.at.checked_sub(first.at).filter(|d| *d > 0)?;
        let per_s = per_s_between(first, last, t, over_ms);
        let prev = &self.recent[self.recent.len() - 2];
        let step_ms = last.at.saturating_sub(prev.at).max(1);
        let latest = per_s_between(prev, last, t, step_ms);
        let tolerance = (per_s * 0.2).max(1000.0 / step_ms as f64);
        Some(Rate {
            per_s,
            over_ms,
            dir: Dir::of(latest, per_s, tolerance),
        })
    }

    /// The rate of `t` in each interval between recent samples, oldest
    /// first, rounded up (a trickle shows as 1, not as nothing).
    pub fn rate_bars(&self, t: Total) -> Vec<u64> {
        self.recent
            .iter()
            .zip(self.recent.iter().skip(1))
            .map(|(a, b)| {
                let r = per_s_between(a, b, t, b.at.saturating_sub(a.at).max(1));
                r.ceil() as u64
            })
            .collect()
    }

    /// Samples in time order, history first then the recent ones newer
    /// than the last history sample.
    fn timeline(&self) -> impl Iterator<Item = &Sample> {
        let cut = self.history.back().map_or(0, |h| h.at);
        self.history
            .iter()
            .chain(self.recent.iter().filter(move |s| s.at > cut))
    }

    fn trend(&self, value: impl Fn(&Sample) -> Option<i64>, min_tolerance: i64) -> Option<Trend> {
        let last = self.recent.back()?;
        let now = value(last)?;
        let since = last.at.saturating_sub(TREND_SPAN_MS);
        let base = self
            .timeline()
            .filter(|s| s.at >= since && s.at < last.at)
            .find_map(|s| value(s).map(|v| (s.at, v)))?;
        let (at, then) = base;
        let tolerance = (then.abs() / 20).max(min_tolerance);
        Some(Trend {
            now,
            then,
            over_ms: last.at - at,
            dir: Dir::of(now as f64, then as f64, tolerance as f64),
        })
    }

    /// The backlog now against [`TREND_SPAN_MS`] ago (or the oldest sample).
    pub fn backlog_trend(&self) -> Option<Trend> {
        self.trend(|s| Some(s.backlog), 1)
    }

    /// The oldest-due age (ms) now against [`TREND_SPAN_MS`] ago.
    pub fn oldest_trend(&self) -> Option<Trend> {
        self.trend(
            |s| {
                s.oldest_age_ms
                    .map(|a| i64::try_from(a).unwrap_or(i64::MAX))
            },
            1000,
        )
    }

    /// The backlog over the history (up to an hour), oldest first.
    pub fn backlog_bars(&self) -> Vec<u64> {
        self.timeline()
            .map(|s| u64::try_from(s.backlog).unwrap_or(0))
            .collect()
    }

    /// The time the history covers (ms).
    pub fn history_span_ms(&self) -> u64 {
        let mut t = self.timeline();
        match (t.next(), self.recent.back()) {
            (Some(a), Some(b)) => b.at.saturating_sub(a.at),
            _ => 0,
        }
    }
}

fn per_s_between(a: &Sample, b: &Sample, t: Total, ms: u64) -> f64 {
    b.totals.get(t).saturating_sub(a.totals.get(t)) as f64 * 1000.0 / ms as f64
}

/// The node's series and the tenants' (bounded, least recently sampled
/// evicted first).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RateBook {
    node: Series,
    tenants: HashMap<u32, (Series, u64)>,
    /// Bumped on every tenant sample: the recency order for eviction.
    clock: u64,
}

impl RateBook {
    pub fn sample_node(&mut self, s: Sample) -> bool {
        self.node.push(s)
    }

    /// Puts the daemon's samples of the last hour (oldest first) before the
    /// node's own readings, so the trends cover the hour before the console
    /// opened. Readings already taken that are newer than the last seed stay.
    pub fn seed_node(&mut self, seed: &[Sample]) {
        let mut series = Series::default();
        for s in seed {
            series.push(*s);
        }
        let last = series.last().map_or(0, |s| s.at);
        let mine: Vec<Sample> = self
            .node
            .history
            .iter()
            .chain(self.node.recent.iter())
            .filter(|s| s.at > last)
            .copied()
            .collect();
        let mut mine = mine;
        mine.sort_by_key(|s| s.at);
        mine.dedup_by_key(|s| s.at);
        for s in mine {
            series.push(s);
        }
        self.node = series;
    }

    pub fn sample_tenant(&mut self, ord: u32, s: Sample) -> bool {
        self.clock += 1;
        if !self.tenants.contains_key(&ord) && self.tenants.len() >= MAX_TENANT_SERIES {
            let oldest = self
                .tenants
                .iter()
                .min_by_key(|(_, (_, seen))| *seen)
                .map(|(o, _)| *o);
            if let Some(o) = oldest {
                self.tenants.remove(&o);
            }
        }
        let clock = self.clock;
        let (series, seen) = self.tenants.entry(ord).or_default();
        *seen = clock;
        series.push(s)
    }

    pub fn node(&self) -> &Series {
        &self.node
    }

    pub fn tenant(&self, ord: u32) -> Option<&Series> {
        self.tenants.get(&ord).map(|(s, _)| s)
    }

    /// Tenant series held (at most [`MAX_TENANT_SERIES`]).
    pub fn tenant_series(&self) -> usize {
        self.tenants.len()
    }
}
