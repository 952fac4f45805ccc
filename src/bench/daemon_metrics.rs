//! What the delivery bench's cells read of a running daemon's `/metrics`:
//! the dispatcher's counters and the rows waiting per sink. One scrape for
//! both cells, so the figures they print mean the same.

use std::net::SocketAddr;

use color_eyre::eyre::Result;
use serde::Serialize;

/// What the dispatcher did while posting, from its counters: why a sink
/// falls behind shows here first (ticks that visit many tenants, or long).
#[derive(Debug, Default, Serialize)]
pub(super) struct DispatchSeen {
    pub ticks: u64,
    /// Ticks started by a finished delivery.
    pub refills: u64,
    pub tenants_visited: u64,
    pub rows_claimed: u64,
    pub tick_seconds: f64,
    /// Tenants the last tick left out (every due row waits for a full sink).
    pub tenants_quiet: u64,
}

/// `ankusa_sink_waiting_rows` for sink positions `0..sinks` and the
/// dispatcher's counters, from the daemon's `/metrics`.
pub(super) async fn scrape(addr: SocketAddr, sinks: usize) -> Result<(Vec<i64>, DispatchSeen)> {
    let c = super::ingest::Conn::open(addr).await?;
    let text = c.get("/metrics").await?;
    let mut out = vec![i64::MAX; sinks];
    let mut d = DispatchSeen::default();
    for line in text.lines() {
        if let Some((series, value)) = line.split_once(' ') {
            let name = series.split('{').next().unwrap_or(series);
            let v = value.trim().parse::<f64>().unwrap_or(0.0);
            match name {
                "ankusa_dispatch_ticks_total" => d.ticks = v as u64,
                "ankusa_dispatch_refills_total" => d.refills = v as u64,
                "ankusa_dispatch_tenants_visited_total" => d.tenants_visited = v as u64,
                "ankusa_dispatch_rows_claimed_total" => d.rows_claimed = v as u64,
                "ankusa_dispatch_tick_seconds_sum" => d.tick_seconds = v,
                "ankusa_dispatch_tenants_quiet" => d.tenants_quiet = v as u64,
                _ => {}
            }
        }
        let Some(rest) = line.strip_prefix("ankusa_sink_waiting_rows{") else {
            continue;
        };
        let Some((labels, value)) = rest.split_once("} ") else {
            continue;
        };
        let sink = labels
            .split(',')
            .find_map(|l| l.strip_prefix("sink=\""))
            .and_then(|s| s.trim_end_matches('"').parse::<usize>().ok());
        if let (Some(i), Ok(v)) = (sink, value.trim().parse::<i64>()) {
            if let Some(slot) = out.get_mut(i) {
                *slot = v;
            }
        }
    }
    Ok((out, d))
}
