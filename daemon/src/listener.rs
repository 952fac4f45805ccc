//! Accepting and serving HTTP connections, with every resource a client can
//! hold bounded: the ingest listener and the admin listeners run through
//! [`serve`].
//!
//! Owns the connection cap, the request-head timeout, the refusal of a
//! connection past the cap, and the accept loop's behaviour when the
//! process is out of descriptors.
//!
//! Invariants:
//! - At most `max_connections` connections are served per listener. One
//!   past the cap is answered at once with a canned `503
//!   connections_full` (JSON, `Retry-After: 1`, `Connection: close`) and
//!   closed; at most [`REFUSING`] such answers are being written at a time,
//!   past that a connection is closed unanswered. Either way it holds its
//!   descriptor for at most [`REFUSAL_GRACE`].
//! - A request head must arrive within `header_timeout`, counted from when
//!   the server starts waiting for it: from the accept for the first
//!   request, from the end of the previous answer for the next. So it is
//!   also how long an idle keep-alive connection is kept. The body has its
//!   own limit (`http.body_timeout`, in the handlers).
//! - An accept error never stops the loop. Out of descriptors (`EMFILE`,
//!   `ENFILE`) or buffers, the loop waits [`ACCEPT_BACKOFF`] rather than
//!   spin; the connections in the kernel's backlog wait for it.
//! - Each request can learn from its connection ([`HeadWatch`]) whether its
//!   head carried both `Content-Length` and `Transfer-Encoding`: the HTTP
//!   layer drops the first before a handler runs, and such a request is
//!   refused rather than read one way when a proxy in front may have read it
//!   the other.
//! - On stop: no new connection is accepted, every open one finishes the
//!   request it is in and is closed, and [`serve`] returns when the last
//!   one has.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tower::ServiceExt as _;

use super::metrics::Metrics;
use super::outcome::Outcome;

/// Refusals past the cap being written at once.
pub(crate) const REFUSING: usize = 64;
/// How long a refused connection may take to read its answer.
pub(crate) const REFUSAL_GRACE: Duration = Duration::from_secs(1);
/// The accept loop's pause after an error that is not the peer's.
pub(crate) const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// What one listener allows.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
}

/// A listener [`serve`] can accept from: TCP or the admin unix socket.
pub trait Accept: Send + 'static {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// What a handler learns about its peer (`ConnectInfo<Self::Peer>`).
    type Peer: Clone + Send + Sync + 'static;
    fn accept(
        &mut self,
    ) -> impl std::future::Future<Output = std::io::Result<(Self::Io, Self::Peer)>> + Send;
}

impl Accept for tokio::net::TcpListener {
    type Io = tokio::net::TcpStream;
    type Peer = std::net::SocketAddr;
    async fn accept(&mut self) -> std::io::Result<(Self::Io, Self::Peer)> {
        let (s, addr) = tokio::net::TcpListener::accept(self).await?;
        // Answers are small and written whole: do not hold them for Nagle.
        let _ = s.set_nodelay(true);
        Ok((s, addr))
    }
}

impl Accept for tokio::net::UnixListener {
    type Io = tokio::net::UnixStream;
    type Peer = super::admin::SocketPeer;
    async fn accept(&mut self) -> std::io::Result<(Self::Io, Self::Peer)> {
        let (s, _) = tokio::net::UnixListener::accept(self).await?;
        let peer = super::admin::SocketPeer(s.peer_cred().ok().map(|c| c.uid()));
        Ok((s, peer))
    }
}

/// The bytes of the answer to a connection past the cap.
fn refusal() -> Vec<u8> {
    let o = Outcome::ConnectionsFull;
    let body = serde_json::json!({"error": o.code(), "message": o.message()}).to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: {}\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        o.retry_after().unwrap_or(1),
        body.len()
    )
    .into_bytes()
}

/// Whether an accept error is about one connection (the loop goes on at
/// once) rather than the process (the loop waits).
fn peer_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset | Interrupted | WouldBlock
    )
}

/// Serves `app` on `listener` until `stop` turns true and every connection
/// has finished. `name` labels the log lines (`ingest`, `admin socket`).
pub async fn serve<L: Accept>(
    mut listener: L,
    app: Router,
    limits: Limits,
    metrics: Arc<Metrics>,
    name: &'static str,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let refusing = Arc::new(Semaphore::new(REFUSING));
    let refusal: Arc<[u8]> = refusal().into();
    let mut conns = JoinSet::new();
    let mut last_logged: Option<std::time::Instant> = None;
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stopped(&mut stop) => break,
            // Reap finished connections so the set stays as large as the
            // connections open, not as all ever served.
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let (io, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                metrics.accept_errors.fetch_add(1, Ordering::Relaxed);
                if peer_error(&e) {
                    continue;
                }
                // Once a second at most: out of descriptors, every accept fails.
                if last_logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                    tracing::error!(listener = name, error = %e, "cannot accept connections; retrying");
                    last_logged = Some(std::time::Instant::now());
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            metrics.connections_refused.fetch_add(1, Ordering::Relaxed);
            if let Ok(permit) = refusing.clone().try_acquire_owned() {
                let bytes = refusal.clone();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(REFUSAL_GRACE, refuse(io, &bytes)).await;
                    drop(permit);
                });
            }
            continue;
        };
        metrics.connections.fetch_add(1, Ordering::Relaxed);
        let app = app.clone();
        let metrics = metrics.clone();
        let mut stopping = stop.clone();
        conns.spawn(async move {
            let watch = HeadWatch::default();
            let io = Watched {
                io,
                watch: watch.clone(),
            };
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let mut req = req.map(Body::new);
                req.extensions_mut().insert(ConnectInfo(peer.clone()));
                req.extensions_mut().insert(watch.clone());
                let app = app.clone();
                async move { Ok::<_, Infallible>(app.oneshot(req).await.unwrap_never()) }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let conn = builder.serve_connection(TokioIo::new(io), service);
            tokio::pin!(conn);
            let result = tokio::select! {
                r = conn.as_mut() => r,
                _ = stopped(&mut stopping) => {
                    conn.as_mut().graceful_shutdown();
                    conn.as_mut().await
                }
            };
            if let Err(e) = result {
                if e.is_timeout() {
                    metrics.header_timeouts.fetch_add(1, Ordering::Relaxed);
                }
                tracing::debug!(listener = name, error = %e, "connection ended with an error");
            }
            metrics.connections.fetch_sub(1, Ordering::Relaxed);
            drop(slot);
        });
    }
    drop(listener);
    while conns.join_next().await.is_some() {}
}

/// Resolves once `stop` is true (or its sender is gone).
pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Writes the refusal, then reads (and drops) what the client sent until it
/// closes, so the close is not a reset that loses the answer.
async fn refuse<S: AsyncRead + AsyncWrite + Unpin>(mut io: S, bytes: &[u8]) {
    if io.write_all(bytes).await.is_err() {
        return;
    }
    let _ = io.shutdown().await;
    let mut sink = [0u8; 4096];
    while matches!(io.read(&mut sink).await, Ok(n) if n > 0) {}
}

/// Longest request head [`HeadWatch`] looks at; past it, the HTTP layer
/// refuses the head anyway (431).
const HEAD_WATCH_MAX: usize = 64 * 1024;

/// What a connection's reader saw of the request head it is answering.
/// Bytes read since the last answer was written begin the next head (HTTP/1.1
/// without pipelining); a pipelined head is not looked at.
#[derive(Clone, Default)]
pub(crate) struct HeadWatch(Arc<std::sync::Mutex<HeadState>>);

#[derive(Default)]
struct HeadState {
    buf: Vec<u8>,
    done: bool,
    both_framings: bool,
}

impl HeadWatch {
    /// Whether the head of the request being answered had both
    /// `Content-Length` and `Transfer-Encoding`.
    pub fn both_framings(&self) -> bool {
        self.0.lock().map(|s| s.both_framings).unwrap_or(false)
    }

    fn read(&self, bytes: &[u8]) {
        let Ok(mut s) = self.0.lock() else { return };
        if s.done || bytes.is_empty() {
            return;
        }
        let room = HEAD_WATCH_MAX.saturating_sub(s.buf.len());
        s.buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
        let Some(end) = s.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            if s.buf.len() >= HEAD_WATCH_MAX {
                s.done = true;
            }
            return;
        };
        let (mut cl, mut te) = (false, false);
        for line in s.buf[..end].split(|&b| b == b'\n').skip(1) {
            let name = line.split(|&b| b == b':').next().unwrap_or_default();
            let name = name.trim_ascii();
            cl |= name.eq_ignore_ascii_case(b"content-length");
            te |= name.eq_ignore_ascii_case(b"transfer-encoding");
        }
        s.both_framings = cl && te;
        s.done = true;
        s.buf = Vec::new();
    }

    fn answered(&self) {
        if let Ok(mut s) = self.0.lock() {
            *s = HeadState::default();
        }
    }
}

/// A connection whose reads feed its [`HeadWatch`] and whose writes (the
/// answer) start the next head.
struct Watched<S> {
    io: S,
    watch: HeadWatch,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let me = &mut *self;
        let polled = std::pin::Pin::new(&mut me.io).poll_read(cx, buf);
        if let std::task::Poll::Ready(Ok(())) = polled {
            me.watch.read(&buf.filled()[before..]);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let me = &mut *self;
        me.watch.answered();
        std::pin::Pin::new(&mut me.io).poll_write(cx, data)
    }
    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let me = &mut *self;
        me.watch.answered();
        std::pin::Pin::new(&mut me.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// `Result<T, Infallible>` is always `Ok`.
trait UnwrapNever<T> {
    fn unwrap_never(self) -> T;
}

impl<T> UnwrapNever<T> for Result<T, Infallible> {
    fn unwrap_never(self) -> T {
        match self {
            Ok(t) => t,
            Err(never) => match never {},
        }
    }
}
