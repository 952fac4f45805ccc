//! The demo's summary: what the daemon counted, what the sinks saw, and
//! how long tenants waited for their first delivery.
//!
//! Owns the summary's stable JSON shape (documented field by field in
//! docs/demo.md; scripts and `tests/demo.rs` read it), its text rendering,
//! the quantile helpers, and the reading of the daemon's `/metrics`.
//!
//! Invariants: delivery numbers come from the daemon (its `/metrics`
//! counters and the store's node counters), never from the demo's own
//! guesses; latency quantiles are nearest-rank over every tenant that had
//! an accepted hook, those still waiting included at the time they had
//! waited so far (so a starved tenant raises the quantiles instead of
//! dropping out of them).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde::Serialize;

/// Buckets of [`LogHistogram`]; the last one is open-ended.
const LOG_BUCKETS: usize = 400;
/// Each bucket is 5% wider than the previous one.
const LOG_GROWTH: f64 = 1.05;

/// A fixed-size histogram of milliseconds with 5% resolution: bounded
/// memory however long the demo runs.
#[derive(Debug, Clone)]
pub struct LogHistogram {
    counts: Vec<u64>,
    count: u64,
    max: u64,
}

impl Default for LogHistogram {
    fn default() -> Self {
        Self {
            counts: vec![0; LOG_BUCKETS],
            count: 0,
            max: 0,
        }
    }
}

impl LogHistogram {
    fn bucket(ms: u64) -> usize {
        if ms == 0 {
            return 0;
        }
        let b = ((ms as f64).ln() / LOG_GROWTH.ln()).floor() as usize + 1;
        b.min(LOG_BUCKETS - 1)
    }

    fn upper(b: usize) -> u64 {
        if b == 0 {
            0
        } else {
            LOG_GROWTH.powi(i32::try_from(b).unwrap_or(i32::MAX)).ceil() as u64
        }
    }

    pub fn observe(&mut self, ms: u64) {
        self.counts[Self::bucket(ms)] += 1;
        self.count += 1;
        self.max = self.max.max(ms);
    }

    /// The upper bound of the bucket holding the `q` quantile, never above
    /// the largest value seen.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (b, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                if b == LOG_BUCKETS - 1 {
                    return self.max;
                }
                return Self::upper(b).min(self.max);
            }
        }
        self.max
    }

    pub fn stats(&self) -> DelayStats {
        DelayStats {
            count: self.count,
            p50_ms: self.quantile(0.5),
            p95_ms: self.quantile(0.95),
            max_ms: self.max,
        }
    }
}

/// Nearest-rank quantile of sorted values.
pub fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Counters read from the daemon's `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct DaemonCounters {
    /// `ankusa_ingest_requests_total` by outcome.
    pub ingest: BTreeMap<String, u64>,
    pub attempts: u64,
    pub delivered: u64,
    pub retried: u64,
    pub dead: u64,
    pub inflight: u64,
}

impl DaemonCounters {
    /// Reads the series the demo needs from Prometheus text; anything else
    /// is ignored.
    pub fn parse(text: &str) -> Self {
        let mut c = DaemonCounters::default();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(v) = value.trim().parse::<f64>() else {
                continue;
            };
            let v = if v.is_finite() && v > 0.0 {
                v as u64
            } else {
                0
            };
            // Every series carries the node's id (docs/fleet.md): match
            // on the rest.
            let series = ankusa_daemon::without_node(series);
            let series = series.as_ref();
            if let Some(rest) = series.strip_prefix("ankusa_ingest_requests_total{outcome=\"") {
                if let Some(code) = rest.strip_suffix("\"}") {
                    c.ingest.insert(code.to_owned(), v);
                }
                continue;
            }
            match series {
                "ankusa_delivery_attempts_total" => c.attempts = v,
                "ankusa_delivery_delivered_total" => c.delivered = v,
                "ankusa_delivery_retried_total" => c.retried = v,
                "ankusa_delivery_dead_total" => c.dead = v,
                "ankusa_delivery_inflight" => c.inflight = v,
                _ => {}
            }
        }
        c
    }

    pub fn accepted(&self) -> u64 {
        self.ingest.get("accepted").copied().unwrap_or(0)
    }

    pub fn duplicates(&self) -> u64 {
        self.ingest.get("duplicate").copied().unwrap_or(0)
    }

    /// Every outcome but `accepted` and `duplicate`, those that happened.
    pub fn refused(&self) -> BTreeMap<String, u64> {
        self.ingest
            .iter()
            .filter(|(k, v)| **v > 0 && k.as_str() != "accepted" && k.as_str() != "duplicate")
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }
}

/// The whole summary (`--json` prints exactly this).
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub seed: u64,
    /// How long the load generator ran, in seconds.
    pub load_seconds: f64,
    pub store: String,
    pub store_kept: bool,
    pub ingest: IngestSummary,
    pub delivery: DeliverySummary,
    pub queue_at_exit: QueueSummary,
    pub sinks: BTreeMap<String, SinkSummary>,
    pub tenants: TenantsSummary,
    pub first_delivery: FirstDelivery,
    pub delivery_delay: DelayBreakdown,
}

#[derive(Debug, Clone, Serialize)]
pub struct IngestSummary {
    /// Requests the load generator sent.
    pub sent: u64,
    /// Requests that got no HTTP answer (connection errors, timeouts).
    pub errors: u64,
    pub accepted: u64,
    pub duplicates: u64,
    /// Sum of `refused_by_code`.
    pub refused: u64,
    pub refused_by_code: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeliverySummary {
    pub attempts: u64,
    pub delivered: u64,
    pub retried: u64,
    pub dead: u64,
}

/// The store's node counters once the daemon had stopped.
#[derive(Debug, Clone, Serialize)]
pub struct QueueSummary {
    pub pending: i64,
    pub scheduled: i64,
    pub inflight: i64,
    pub dead: i64,
    /// The flooding tenant's pending rows.
    pub flood_pending: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SinkSummary {
    pub requests: u64,
    pub ok: u64,
    pub failed: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct TenantsSummary {
    /// Tenants with at least one accepted hook.
    pub accepted: u64,
    /// Of those, minted by the sign-up source during the run.
    pub minted: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FirstDelivery {
    /// Every tenant but the flood.
    pub light: LatencyStats,
    /// The tenants minted during the run (a subset of `light`): they
    /// arrive while the flood's backlog is deepest.
    pub minted: LatencyStats,
    pub flood: FloodFirst,
}

#[derive(Debug, Clone, Serialize)]
pub struct LatencyStats {
    pub tenants: u64,
    /// Tenants with an accepted hook and no delivery when the demo
    /// stopped (counted in the quantiles with the time waited so far).
    pub waiting: u64,
    pub p50_ms: u64,
    pub p95_ms: u64,
    pub max_ms: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FloodFirst {
    pub tenant: String,
    /// `null` when the flood never got a delivery.
    pub ms: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DelayBreakdown {
    pub light: DelayStats,
    pub flood: DelayStats,
}

#[derive(Debug, Clone, Serialize)]
pub struct DelayStats {
    /// First attempts a sink accepted.
    pub count: u64,
    pub p50_ms: u64,
    pub p95_ms: u64,
    pub max_ms: u64,
}

/// First-delivery latency of a set of tenants: `accepted` maps a tenant
/// to its first accepted hook's send time, `delivered` to its first
/// delivery, `end` is when the demo stopped looking.
pub fn latency<'a>(
    tenants: impl Iterator<Item = &'a String>,
    accepted: &HashMap<String, u64>,
    delivered: &HashMap<String, u64>,
    end: u64,
) -> LatencyStats {
    let mut waits = Vec::new();
    let mut waiting = 0;
    for t in tenants {
        let Some(&start) = accepted.get(t) else {
            continue;
        };
        match delivered.get(t) {
            Some(&d) => waits.push(d.saturating_sub(start)),
            None => {
                waiting += 1;
                waits.push(end.saturating_sub(start));
            }
        }
    }
    waits.sort_unstable();
    LatencyStats {
        tenants: waits.len() as u64,
        waiting,
        p50_ms: quantile(&waits, 0.5),
        p95_ms: quantile(&waits, 0.95),
        max_ms: waits.last().copied().unwrap_or(0),
    }
}

fn ms(v: u64) -> String {
    if v >= 10_000 {
        format!("{:.1} s", v as f64 / 1000.0)
    } else {
        format!("{v} ms")
    }
}

impl Summary {
    /// The human-readable form.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let kept = if self.store_kept { "kept" } else { "removed" };
        let _ = writeln!(
            o,
            "ankusa demo: {:.0} s of load, seed {}, store {} ({kept})",
            self.load_seconds, self.seed, self.store
        );
        let i = &self.ingest;
        let codes = i
            .refused_by_code
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            o,
            "\ningest      sent {}, accepted {}, duplicates {}, refused {}{}{}",
            i.sent,
            i.accepted,
            i.duplicates,
            i.refused,
            if codes.is_empty() {
                String::new()
            } else {
                format!(" ({codes})")
            },
            if i.errors > 0 {
                format!(", no answer {}", i.errors)
            } else {
                String::new()
            }
        );
        let d = &self.delivery;
        let _ = writeln!(
            o,
            "delivery    attempts {}, delivered {}, retried {}, dead-lettered {}",
            d.attempts, d.delivered, d.retried, d.dead
        );
        let q = &self.queue_at_exit;
        let _ = writeln!(
            o,
            "left        pending {} (flood {}), scheduled {}, inflight {}, dead {}",
            q.pending, q.flood_pending, q.scheduled, q.inflight, q.dead
        );
        let sinks = self
            .sinks
            .iter()
            .map(|(name, s)| format!("{name} {}/{} ok", s.ok, s.requests))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(o, "sinks       {sinks}");
        let _ = writeln!(
            o,
            "tenants     {} with accepted hooks ({} minted during the run)",
            self.tenants.accepted, self.tenants.minted
        );
        let f = &self.first_delivery;
        let _ = writeln!(
            o,
            "\nfirst delivery (a tenant's first accepted hook -> its first delivery):"
        );
        let line = |o: &mut String, label: &str, s: &LatencyStats| {
            let waiting = if s.waiting > 0 {
                format!(", {} still waiting", s.waiting)
            } else {
                String::new()
            };
            let _ = writeln!(
                o,
                "  {label:<22} p50 {:>8}  p95 {:>8}  max {:>8}  ({} tenants{waiting})",
                ms(s.p50_ms),
                ms(s.p95_ms),
                ms(s.max_ms),
                s.tenants
            );
        };
        line(&mut o, "light tenants", &f.light);
        line(&mut o, "  of which minted", &f.minted);
        let _ = writeln!(
            o,
            "  {:<22} {}",
            format!("flood ({})", f.flood.tenant),
            f.flood.ms.map_or("never delivered".to_owned(), ms)
        );
        let _ = writeln!(
            o,
            "\nqueueing delay (a hook's send -> its first accepted attempt at a sink):"
        );
        let delay = |o: &mut String, label: &str, s: &DelayStats| {
            let _ = writeln!(
                o,
                "  {label:<22} p50 {:>8}  p95 {:>8}  max {:>8}  ({} deliveries)",
                ms(s.p50_ms),
                ms(s.p95_ms),
                ms(s.max_ms),
                s.count
            );
        };
        delay(&mut o, "light tenants", &self.delivery_delay.light);
        delay(&mut o, "flood", &self.delivery_delay.flood);
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), 50);
        assert_eq!(quantile(&v, 0.95), 95);
        assert_eq!(quantile(&v, 1.0), 100);
        assert_eq!(quantile(&[], 0.5), 0);
        assert_eq!(quantile(&[7], 0.95), 7);
    }

    #[test]
    fn the_log_histogram_is_within_five_percent() {
        let mut h = LogHistogram::default();
        for v in 1..=1000 {
            h.observe(v);
        }
        let p50 = h.quantile(0.5);
        assert!((500..=525).contains(&p50), "{p50}");
        assert_eq!(h.quantile(1.0), 1000);
        assert_eq!(h.stats().max_ms, 1000);
        h.observe(u64::MAX / 2);
        assert_eq!(h.quantile(1.0), u64::MAX / 2);
    }

    #[test]
    fn waiting_tenants_count_with_the_time_waited_so_far() {
        let accepted: HashMap<String, u64> =
            [("a".into(), 0), ("b".into(), 100), ("c".into(), 0)].into();
        let delivered: HashMap<String, u64> = [("a".into(), 50), ("b".into(), 130)].into();
        let names: Vec<String> = vec!["a".into(), "b".into(), "c".into(), "unknown".into()];
        let s = latency(names.iter(), &accepted, &delivered, 10_000);
        assert_eq!(s.tenants, 3);
        assert_eq!(s.waiting, 1);
        assert_eq!(s.max_ms, 10_000);
        assert_eq!(s.p50_ms, 50);
    }

    #[test]
    fn metrics_are_read_from_prometheus_text() {
        // A daemon's page has the node label on every sample; an older
        // one had none: both read the same.
        let text = "# HELP x\n\
            ankusa_ingest_requests_total{node=\"eu-1\",outcome=\"accepted\"} 12\n\
            ankusa_ingest_requests_total{node=\"eu-1\",outcome=\"duplicate\"} 2\n\
            ankusa_ingest_requests_total{outcome=\"signature_invalid\"} 3\n\
            ankusa_ingest_requests_total{node=\"eu-1\",outcome=\"queue_full\"} 0\n\
            ankusa_delivery_delivered_total{node=\"eu-1\"} 9\n\
            ankusa_delivery_retried_total 4\n\
            ankusa_delivery_dead_total 1\n\
            ankusa_delivery_attempts_total 14\n";
        let c = DaemonCounters::parse(text);
        assert_eq!(c.accepted(), 12);
        assert_eq!(c.duplicates(), 2);
        assert_eq!(
            c.refused().into_iter().collect::<Vec<_>>(),
            vec![("signature_invalid".to_owned(), 3)]
        );
        assert_eq!((c.delivered, c.retried, c.dead, c.attempts), (9, 4, 1, 14));
    }
}
