//! `ankusa serve` with `[cluster]` (docs/cluster.md): this node as one
//! member of a replicated cluster.
//!
//! The member's Raft node runs from the start to the signal, over the
//! store it opened, and serves its peers on `cluster.listen`. The daemon
//! itself (ingest, dispatch, delivery, jobs, breakers: everything
//! [`Daemon::serve`] runs) runs only while this member leads:
//!
//! - **Following**, the HTTP port answers every request `503
//!   {"error":"not_leader","leader":ID}` with `Retry-After: 1`, and
//!   `/healthz/leader` `503`, so a balancer sends writes elsewhere.
//! - **Taking the lead** waits until this member has applied everything
//!   committed before its term (`ensure_linearizable`), then boots the
//!   daemon on the replicated store, as a restart boots it: in-flight rows
//!   go back to due, through the log.
//! - **Losing the lead** stops the daemon at once; nothing it proposes
//!   after that can commit, so nothing more is acknowledged.
//!
//! Invariant: the store is written only through the log (its replicator
//! is installed before anything reads it), so this member's writes and a
//! follower's refusals are the store's own behaviour, not this loop's.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use ankusa_cluster::{Member, MemberConfig, Timing};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::clock::SharedClock;
use crate::config::{ClusterSettings, Settings};
use crate::error::DaemonError;
use crate::Daemon;
use crate::Result;

/// The largest peer request: an append of whole group commits.
const PEER_BODY: usize = 512 << 20;

/// Runs this member until SIGTERM or SIGINT.
pub(crate) async fn run(
    settings: Settings,
    c: ClusterSettings,
    clock: SharedClock,
) -> Result<ExitCode> {
    let store = Arc::new(crate::open_store(
        &settings.store_path,
        settings.store_cache,
    )?);
    let member = Member::start(member_config(&c), store.clone()).await?;
    let peers = TcpListener::bind(c.listen)
        .await
        .map_err(DaemonError::io(format!(
            "cannot listen on {} (cluster.listen in {})",
            c.listen,
            settings.config_path.display()
        )))?;
    // SIGHUP's default action ends a process: a follower, which has no
    // reloader to give it to, must not die of one. The leader's daemon
    // takes SIGHUP over while it serves.
    let _hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(DaemonError::io("cannot handle SIGHUP"))?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let signal = crate::shutdown_signal()?;
    tokio::spawn(async move {
        signal.await;
        let _ = stop_tx.send(true);
    });
    let peer_server = {
        let app = member.routes(&c.secret.0, PEER_BODY);
        let stop = stopped(stop_rx.clone());
        tokio::spawn(async move {
            if let Err(e) = axum::serve(peers, app).with_graceful_shutdown(stop).await {
                tracing::error!(error = %e, "the cluster's peer listener failed");
            }
        })
    };
    tracing::info!(
        member = c.id,
        peers = c.listen.to_string(),
        "cluster member started"
    );
    let mut code = ExitCode::SUCCESS;
    // The port the first bind got (`http.listen` may name port 0): the
    // follower's and the leader's listeners take turns on it.
    let mut listen = settings.listen;
    let mut announced = false;
    loop {
        let listener = bind(&settings, listen).await?;
        if !announced {
            if let Ok(a) = listener.local_addr() {
                listen = a;
                crate::announce_listening(a, &settings.store_path);
            }
            announced = true;
        }
        if !follow(listener, &member, stop_rx.clone()).await {
            break;
        }
        let term = member.metrics().current_term;
        tracing::warn!(
            member = c.id,
            term,
            "this member leads: starting ingest and dispatch"
        );
        let boot = {
            let (s, k, st) = (settings.clone(), clock.clone(), store.clone());
            tokio::task::spawn_blocking(move || Daemon::boot_on(s, k, st)).await
        };
        let mut daemon = match boot {
            Ok(Ok(d)) => d,
            Ok(Err(e)) if !member.is_leader() => {
                tracing::warn!(error = %e, "lost the lead while starting; following again");
                continue;
            }
            Ok(Err(e)) => return Err(e),
            Err(e) => return Err(DaemonError::Server(e)),
        };
        daemon.quiet();
        let listener = bind(&settings, listen).await?;
        code = daemon
            .serve(listener, lead_lost(member.clone(), stop_rx.clone()))
            .await?;
        if *stop_rx.borrow() {
            break;
        }
        tracing::warn!(
            member = c.id,
            "this member no longer leads: ingest and dispatch stopped"
        );
    }
    member.shutdown().await?;
    let _ = peer_server.await;
    Ok(code)
}

fn member_config(c: &ClusterSettings) -> MemberConfig {
    MemberConfig {
        id: c.id,
        peers: c.peers.iter().map(|(id, a)| (*id, a.to_string())).collect(),
        secret: c.secret.0.clone(),
        log: c.log.clone(),
        snapshots: c.snapshots.clone(),
        timing: Timing {
            heartbeat: c.heartbeat,
            election: (c.election_timeout, c.election_timeout * 2),
            snapshot_every: c.snapshot_every,
            keep: Timing::default().keep,
        },
    }
}

async fn bind(settings: &Settings, addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(DaemonError::io(format!(
            "cannot listen on {addr} (http.listen in {})",
            settings.config_path.display()
        )))
}

async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Resolves when this member stops leading, or at the signal.
async fn lead_lost(member: Member, stop: watch::Receiver<bool>) {
    let lost = async move { member.lead_lost().await };
    tokio::select! {
        _ = lost => {}
        _ = stopped(stop) => {}
    }
}

/// Serves the HTTP port as a follower until this member leads and has
/// applied everything committed before its term (`true`), or until the
/// signal (`false`).
async fn follow(listener: TcpListener, member: &Member, stop: watch::Receiver<bool>) -> bool {
    let (led_tx, led_rx) = watch::channel(false);
    let app = {
        let m = member.clone();
        axum::Router::new().fallback(move || {
            let m = m.clone();
            async move { not_leader(&m) }
        })
    };
    let until = {
        let (stop, mut led) = (stop.clone(), led_rx.clone());
        async move {
            tokio::select! {
                _ = stopped(stop) => {}
                _ = led.wait_for(|l| *l) => {}
            }
        }
    };
    let server = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(until)
            .await
        {
            tracing::error!(error = %e, "the follower's HTTP listener failed");
        }
    });
    let led = member.leading();
    let leads = tokio::select! {
        l = led => l,
        _ = stopped(stop) => false,
    };
    let _ = led_tx.send(true);
    let _ = server.await;
    leads
}

fn not_leader(member: &Member) -> Response {
    let leader = member.metrics().current_leader;
    let body = serde_json::json!({
        "error": "not_leader",
        "leader": leader.map(|l| l.to_string()),
    });
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "1")],
        axum::Json(body),
    )
        .into_response()
}
