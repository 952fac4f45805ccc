//! Per-sink health, as this process has seen its deliveries: what the
//! sinks screen, `ankusa sinks list` and `/metrics` show beside a daemon.
//!
//! Owns one [`Stats`] per configured sink (source, position), made at boot
//! from the configuration, so the board is bounded by the configuration and
//! never grows with traffic. Each holds a minute of per-second outcome
//! counts, the last 512 latencies, the last answer, the consecutive
//! failures and the few tenants whose deliveries failed last.
//!
//! Invariants: the figures are this process's (they start empty at boot and
//! are never written to the store); a record is one short critical section
//! per attempt.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use ankusa_ops::model::SinkHealth;

/// Latencies kept per sink for the percentiles.
const LATENCIES: usize = 512;
/// Seconds of outcome counts (the "last minute").
const WINDOW_S: u64 = 60;
/// Tenants listed as failing per sink, most recent first.
const FAILING_TENANTS: usize = 8;

#[derive(Debug, Default)]
struct Stats {
    /// `(second, delivered, failed)`, oldest first, seconds within the window.
    seconds: VecDeque<(u64, u64, u64)>,
    latencies: VecDeque<u32>,
    inflight: u64,
    delivered_total: u64,
    failed_total: u64,
    last_status: Option<u16>,
    last_error: Option<String>,
    last_attempt_at: Option<u64>,
    last_success_at: Option<u64>,
    consecutive_failures: u64,
    failing_tenants: VecDeque<String>,
}

impl Stats {
    fn roll(&mut self, now_s: u64) {
        while self
            .seconds
            .front()
            .is_some_and(|&(s, _, _)| s + WINDOW_S <= now_s)
        {
            self.seconds.pop_front();
        }
    }

    fn bump(&mut self, now_s: u64, delivered: bool) {
        self.roll(now_s);
        match self.seconds.back_mut() {
            Some((s, d, f)) if *s == now_s => {
                if delivered {
                    *d += 1;
                } else {
                    *f += 1;
                }
            }
            _ => self
                .seconds
                .push_back((now_s, u64::from(delivered), u64::from(!delivered))),
        }
    }
}

/// How one attempt ended, for the board.
pub struct Attempt<'a> {
    pub tenant: &'a str,
    pub now_ms: u64,
    pub latency_ms: u64,
    /// The HTTP status (0: no answer).
    pub status: u16,
    pub delivered: bool,
    pub error: Option<&'a str>,
}

type StatsMap = crate::per_sink::PerSink<Arc<Mutex<Stats>>>;

/// Every configured sink's health. A reload replaces the set
/// ([`SinkBoard::reconfigure`]); a sink it keeps keeps its figures.
#[derive(Debug, Default)]
pub struct SinkBoard {
    sinks: RwLock<Arc<StatsMap>>,
}

fn stats_map<'a>(sinks: impl IntoIterator<Item = (&'a str, Vec<u16>)>, old: &StatsMap) -> StatsMap {
    let mut map = StatsMap::default();
    for (source, positions) in sinks {
        for i in positions {
            let stats = old.get(source, i).cloned().unwrap_or_default();
            map.insert(source, i, stats);
        }
    }
    map
}

impl SinkBoard {
    /// A board for exactly these sinks (source id, the positions of its
    /// configured sinks).
    pub fn new<'a>(sinks: impl IntoIterator<Item = (&'a str, Vec<u16>)>) -> SinkBoard {
        SinkBoard {
            sinks: RwLock::new(Arc::new(stats_map(sinks, &StatsMap::default()))),
        }
    }

    /// The board of a reloaded configuration (source id, sink count).
    pub fn reconfigure<'a>(&self, sinks: impl IntoIterator<Item = (&'a str, Vec<u16>)>) {
        let next = stats_map(sinks, &self.sinks());
        *self.sinks.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
    }

    fn sinks(&self) -> Arc<StatsMap> {
        self.sinks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn with<T>(&self, source: &str, sink: u16, f: impl FnOnce(&mut Stats) -> T) -> Option<T> {
        let map = self.sinks();
        let m = map.get(source, sink)?;
        let mut s = m.lock().unwrap_or_else(PoisonError::into_inner);
        Some(f(&mut s))
    }

    /// An attempt to the sink starts.
    pub fn started(&self, source: &str, sink: u16) {
        self.with(source, sink, |s| s.inflight += 1);
    }

    /// An attempt to the sink ended.
    pub fn ended(&self, source: &str, sink: u16, a: &Attempt<'_>) {
        self.with(source, sink, |s| {
            s.inflight = s.inflight.saturating_sub(1);
            s.bump(a.now_ms / 1000, a.delivered);
            if s.latencies.len() == LATENCIES {
                s.latencies.pop_front();
            }
            s.latencies
                .push_back(u32::try_from(a.latency_ms).unwrap_or(u32::MAX));
            s.last_status = Some(a.status);
            s.last_attempt_at = Some(a.now_ms);
            if a.delivered {
                s.delivered_total += 1;
                s.last_success_at = Some(a.now_ms);
                s.consecutive_failures = 0;
                s.last_error = None;
            } else {
                s.failed_total += 1;
                s.consecutive_failures += 1;
                s.last_error = a.error.map(str::to_owned);
                s.failing_tenants.retain(|t| t != a.tenant);
                s.failing_tenants.push_front(a.tenant.to_owned());
                s.failing_tenants.truncate(FAILING_TENANTS);
            }
        });
    }

    /// The sink's health now, `None` for a sink this daemon does not know.
    pub fn health(&self, source: &str, sink: u16, now_ms: u64) -> Option<SinkHealth> {
        self.with(source, sink, |s| {
            s.roll(now_ms / 1000);
            let (delivered_1m, failed_1m) = s
                .seconds
                .iter()
                .fold((0, 0), |(d, f), &(_, a, b)| (d + a, f + b));
            let mut lat: Vec<u32> = s.latencies.iter().copied().collect();
            lat.sort_unstable();
            let pct = |p: usize| -> Option<u64> {
                let i = (lat.len() * p).div_ceil(100).checked_sub(1)?;
                lat.get(i).map(|&v| u64::from(v))
            };
            SinkHealth {
                inflight: s.inflight,
                delivered_1m,
                failed_1m,
                last_status: s.last_status,
                last_error: s.last_error.clone(),
                last_attempt_at: s.last_attempt_at,
                last_success_at: s.last_success_at,
                consecutive_failures: s.consecutive_failures,
                latency_p50_ms: pct(50),
                latency_p99_ms: pct(99),
                failing_tenants: s.failing_tenants.iter().cloned().collect(),
                // The breaker's, filled in by `SinkControl::health`.
                breaker: None,
            }
        })
    }

    /// Prometheus series, labelled by source and sink position: bounded by
    /// the configuration.
    pub fn render(&self, out: &mut String) {
        let map = self.sinks();
        let snap: Vec<_> = map
            .sorted_keys()
            .into_iter()
            .filter_map(|(src, i)| {
                self.with(src, i, |s| {
                    (
                        (src, i),
                        s.delivered_total,
                        s.failed_total,
                        s.inflight,
                        s.consecutive_failures,
                    )
                })
            })
            .collect();
        let name = "ankusa_sink_attempts_total";
        let _ = writeln!(
            out,
            "# HELP {name} Delivery attempts per sink by outcome (this process).\n# TYPE {name} counter"
        );
        for ((src, i), d, f, _, _) in &snap {
            let _ = writeln!(
                out,
                "{name}{{source=\"{src}\",sink=\"{i}\",outcome=\"delivered\"}} {d}\n{name}{{source=\"{src}\",sink=\"{i}\",outcome=\"failed\"}} {f}"
            );
        }
        for (name, help, pick) in [
            (
                "ankusa_sink_inflight",
                "Delivery attempts to the sink in progress.",
                3usize,
            ),
            (
                "ankusa_sink_consecutive_failures",
                "Failed attempts to the sink since its last success.",
                4,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for ((src, i), _, _, inflight, cf) in &snap {
                let v = if pick == 3 { inflight } else { cf };
                let _ = writeln!(out, "{name}{{source=\"{src}\",sink=\"{i}\"}} {v}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(now_ms: u64, latency_ms: u64, delivered: bool, tenant: &str) -> Attempt<'_> {
        Attempt {
            tenant,
            now_ms,
            latency_ms,
            status: if delivered { 200 } else { 503 },
            delivered,
            error: (!delivered).then_some("HTTP 503"),
        }
    }

    #[test]
    fn the_board_counts_the_last_minute_and_the_failure_streak() {
        let b = SinkBoard::new([("shop", vec![0, 1])]);
        for i in 0..10 {
            b.started("shop", 0);
            b.ended("shop", 0, &attempt(1_000_000 + i * 1000, 10 + i, true, "a"));
        }
        b.started("shop", 0);
        b.ended("shop", 0, &attempt(1_010_000, 500, false, "b"));
        b.started("shop", 0);
        b.ended("shop", 0, &attempt(1_010_500, 500, false, "c"));
        b.started("shop", 0);
        let h = b.health("shop", 0, 1_011_000).unwrap();
        assert_eq!((h.delivered_1m, h.failed_1m, h.inflight), (10, 2, 1));
        assert_eq!(h.consecutive_failures, 2);
        assert_eq!(h.failing_tenants, vec!["c".to_owned(), "b".to_owned()]);
        assert_eq!(h.last_status, Some(503));
        assert_eq!(h.last_success_at, Some(1_009_000));
        assert_eq!(h.latency_p50_ms, Some(15));
        assert_eq!(h.latency_p99_ms, Some(500));
        // A minute later the window is empty; the streak stays until a success.
        let h = b.health("shop", 0, 1_075_000).unwrap();
        assert_eq!((h.delivered_1m, h.failed_1m), (0, 0));
        assert_eq!(h.consecutive_failures, 2);
        b.ended("shop", 0, &attempt(1_076_000, 5, true, "a"));
        let h = b.health("shop", 0, 1_076_000).unwrap();
        assert_eq!((h.consecutive_failures, h.inflight), (0, 0));
        assert!(h.last_error.is_none());
        assert!(
            b.health("shop", 2, 0).is_none(),
            "an unknown sink has no health"
        );
        let mut out = String::new();
        b.render(&mut out);
        assert!(
            out.contains(
                "ankusa_sink_attempts_total{source=\"shop\",sink=\"0\",outcome=\"delivered\"} 11"
            ),
            "{out}"
        );
        assert!(out.contains("ankusa_sink_consecutive_failures{source=\"shop\",sink=\"1\"} 0"));
    }
}
