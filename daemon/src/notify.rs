//! systemd's service notifications (`Type=notify`, dist/systemd): the
//! daemon says `READY=1` once its listeners are bound, the store recovered
//! and the jobs resumed (what the `listening on` line means), and
//! `STOPPING=1` when a signal starts the shutdown. Without
//! `NOTIFY_SOCKET` in the environment (not started by systemd) each call
//! does nothing.
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
