//! systemd's service notifications (`Type=notify`, dist/systemd): the
//! daemon says `READY=1` once its listeners are bound, the store recovered
//! and the jobs resumed (what the `listening on` line means),
//! `RELOADING=1` then `READY=1` around a reload, `STOPPING=1` when a signal
//! starts the shutdown, and, when the unit sets `WatchdogSec=`,
//! `WATCHDOG=1` every half interval while the writer loop and the
//! dispatcher keep turning ([`watchdog`]). Without `NOTIFY_SOCKET` in the
//! environment (not started by systemd) each call does nothing.
//!
//! A notification that cannot be sent is logged and otherwise ignored:
//! systemd then times the start out or the stop, which says more than a
//! daemon that refused to run over it would.

use sd_notify::NotifyState;

fn send(what: &str, states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "cannot tell systemd {what}");
    }
}

/// The daemon accepts hooks.
pub fn ready() {
    send(
        "the daemon is ready",
        &[NotifyState::Ready, NotifyState::Status("accepting hooks")],
    );
}

/// The shutdown has begun.
pub fn stopping() {
    send(
        "the daemon is stopping",
        &[
            NotifyState::Stopping,
            NotifyState::Status("stopping: finishing requests in flight"),
        ],
    );
}

/// A configuration reload has begun (`READY=1` follows when it ends,
/// applied or refused).
pub fn reloading() {
    // systemd 253 and later fail a reload whose RELOADING=1 comes without
    // the monotonic time it started at.
    match NotifyState::monotonic_usec_now() {
        Ok(at) => send(
            "the daemon is reloading",
            &[
                NotifyState::Reloading,
                at,
                NotifyState::Status("reloading the configuration"),
            ],
        ),
        Err(e) => tracing::warn!(error = %e, "cannot read the monotonic clock for systemd"),
    }
}

/// Whether a loop that should turn keeps turning: its turn count, and since
/// when it has not changed.
#[derive(Debug)]
pub struct Progress {
    last: u64,
    since: std::time::Instant,
}

impl Progress {
    pub fn new(count: u64, now: std::time::Instant) -> Progress {
        Progress {
            last: count,
            since: now,
        }
    }

    /// How long the count has stood still, if longer than `allowed`.
    pub fn stalled(
        &mut self,
        count: u64,
        now: std::time::Instant,
        allowed: std::time::Duration,
    ) -> Option<std::time::Duration> {
        if count != self.last {
            self.last = count;
            self.since = now;
            return None;
        }
        let still = now.saturating_duration_since(self.since);
        (still > allowed).then_some(still)
    }
}

/// What the watchdog watches: the writer loop's turns and, when dispatch
/// runs, the dispatcher's ticks with their period.
pub struct Watched {
    pub writer: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub ticks: Option<(std::sync::Arc<super::metrics::Metrics>, std::time::Duration)>,
}

/// systemd's watchdog (`WatchdogSec=` in the unit): `None` unless systemd
/// asked for it (`WATCHDOG_USEC` for this process).
pub fn watchdog_interval() -> Option<std::time::Duration> {
    sd_notify::watchdog_enabled()
}

/// Sends `WATCHDOG=1` every half `interval` while the writer loop turns and
/// the dispatcher ticks; stops sending (so systemd restarts the daemon
/// after `interval`) while either stands still past its allowance, saying
/// which. Ends with `stop`.
pub async fn watchdog(
    interval: std::time::Duration,
    watched: Watched,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use std::sync::atomic::Ordering;
    let every = (interval / 2).max(std::time::Duration::from_millis(50));
    let now = std::time::Instant::now();
    let mut writer = Progress::new(watched.writer.load(Ordering::Relaxed), now);
    let ticks_of = |m: &super::metrics::Metrics| m.dispatch.ticks.load(Ordering::Relaxed);
    let mut ticks = watched
        .ticks
        .as_ref()
        .map(|(m, _)| Progress::new(ticks_of(m), now));
    let mut clock = tokio::time::interval(every);
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = clock.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let now = std::time::Instant::now();
        // The writer turns at least every BEAT; give it the interval.
        let allowed = interval.max(super::writer::BEAT * 3);
        let stuck_writer = writer.stalled(watched.writer.load(Ordering::Relaxed), now, allowed);
        let stuck_ticks = match (&mut ticks, &watched.ticks) {
            (Some(p), Some((m, tick))) => p.stalled(ticks_of(m), now, interval.max(*tick * 3)),
            _ => None,
        };
        match (stuck_writer, stuck_ticks) {
            (None, None) => send("the watchdog", &[NotifyState::Watchdog]),
            (w, t) => tracing::error!(
                writer_still_for = ?w,
                dispatcher_still_for = ?t,
                "watchdog: a loop stands still; not telling systemd it is alive, which restarts the daemon"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_count_that_stands_still_past_its_allowance_is_stalled() {
        let t0 = Instant::now();
        let mut p = Progress::new(5, t0);
        let allowed = Duration::from_secs(10);
        assert_eq!(p.stalled(5, t0 + Duration::from_secs(9), allowed), None);
        assert_eq!(
            p.stalled(5, t0 + Duration::from_secs(11), allowed),
            Some(Duration::from_secs(11))
        );
        // It moved: the clock starts again.
        assert_eq!(p.stalled(6, t0 + Duration::from_secs(12), allowed), None);
        assert_eq!(p.stalled(6, t0 + Duration::from_secs(21), allowed), None);
        assert!(p
            .stalled(6, t0 + Duration::from_secs(23), allowed)
            .is_some());
    }
}
