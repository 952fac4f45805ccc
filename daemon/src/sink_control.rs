//! The sinks' live control state: their circuit breakers
//! ([`crate::breaker`]) and their delivery health board
//! ([`crate::sink_health`]).
//!
//! The deliverer writes both, the dispatcher acts on the breakers, a reload
//! reconfigures them; `/metrics` and the admin API only read them. They live
//! here, apart from [`crate::metrics::Metrics`], because metrics render and
//! never steer: what decides whether a sink is probed or its rows parked
//! must not hang off the counters (an earlier layout kept both inside
//! `Metrics`, and the breaker task took "anything holding breakers").

use std::sync::Arc;

use crate::breaker::Breakers;
use crate::config::Source;
use crate::sink_health::SinkBoard;

/// Every configured sink's breaker and health.
#[derive(Debug, Default)]
pub struct SinkControl {
    /// Shared with the breaker task ([`crate::breaker::start`]).
    pub breakers: Arc<Breakers>,
    pub board: SinkBoard,
}

impl SinkControl {
    /// The breakers and health of `sources`' sinks.
    pub fn for_sources(sources: &[Source]) -> SinkControl {
        SinkControl {
            breakers: Arc::new(Breakers::new(sources)),
            board: SinkBoard::new(sources.iter().map(|s| (s.id.as_str(), s.configured()))),
        }
    }

    /// A reload's new set of sinks: each sink kept keeps its breaker and
    /// its figures. Before the new routes are swapped in, so a delivery to
    /// a new sink finds its breaker.
    pub fn reconfigure(&self, sources: &[Source]) {
        self.breakers.reconfigure(sources);
        self.board
            .reconfigure(sources.iter().map(|s| (s.id.as_str(), s.configured())));
    }

    /// A sink's health as the sinks screen shows it: its deliveries and its
    /// breaker. `None` for a sink this daemon does not know.
    pub fn health(
        &self,
        source: &str,
        sink: u16,
        now_ms: u64,
    ) -> Option<ankusa_ops::model::SinkHealth> {
        let mut h = self.board.health(source, sink, now_ms)?;
        h.breaker = self.breakers.view(source, sink);
        Some(h)
    }

    /// The health board's and the breakers' series, for `/metrics`.
    pub fn render(&self, out: &mut String) {
        self.board.render(out);
        self.breakers.render(out);
    }
}
