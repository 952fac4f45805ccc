//! The caller's side of the admin API: one HTTP/1.1 request per
//! connection, JSON in and out, over a [`Transport`]: the daemon's unix
//! socket (`admin.sock`, possibly forwarded with `ssh -L`), or its TCP
//! listener (`admin.listen`, where a token is always required).
//!
//! Errors keep the daemon's answer: a refusal (`404`, `403`, `400`...)
//! comes back as the same [`OpsError`] the daemon raised, so the command
//! line reports it the same way whether it asked a daemon or read the
//! store itself.

use std::path::{Path, PathBuf};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::OpsError;

/// Longest a single request may take (a purge or replay answers at once
/// with a job; long work is polled).
const TIMEOUT: Duration = Duration::from_secs(60);

/// How a request reaches a daemon's admin API. An enum so that a TLS
/// variant can join it without changing the callers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// The admin socket (a path on this machine; `ssh -L` forwards a remote
    /// one to a local path).
    Unix(PathBuf),
    /// Plain HTTP on TCP: `host:port` of the daemon's `admin.listen`.
    Tcp(String),
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Unix(p) => write!(f, "{}", p.display()),
            Transport::Tcp(a) => write!(f, "http://{a}"),
        }
    }
}

/// A connection target: the daemon's socket or TCP listener, an optional
/// token, and how long one request may take.
pub struct Client {
    transport: Transport,
    token: Option<String>,
    timeout: Duration,
    rt: tokio::runtime::Runtime,
}

/// Whether a daemon answers on the store's socket.
pub enum Probe {
    /// It does.
    Daemon(Client),
    /// No socket, or nobody listening on it (a stale file).
    NoDaemon,
}

fn runtime() -> Result<tokio::runtime::Runtime, OpsError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| OpsError::Internal(format!("cannot start a runtime: {e}")))
}

impl Client {
    /// A client of the daemon at `transport`, each request bounded by
    /// `timeout` (connecting included). Nothing is sent yet.
    pub fn new(
        transport: Transport,
        token: Option<String>,
        timeout: Duration,
    ) -> Result<Client, OpsError> {
        Ok(Client {
            transport,
            token,
            timeout,
            rt: runtime()?,
        })
    }

    /// Connects to the daemon of `store`, if one listens.
    pub fn probe(store: &Path, token: Option<String>) -> Result<Probe, OpsError> {
        let socket = crate::socket_path(store);
        let rt = runtime()?;
        let tried = rt.block_on(async { tokio::net::UnixStream::connect(&socket).await });
        match tried {
            Ok(_) => Ok(Probe::Daemon(Client {
                transport: Transport::Unix(socket),
                token,
                timeout: TIMEOUT,
                rt,
            })),
            // No socket, or a stale one nobody listens on: no daemon.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                Ok(Probe::NoDaemon)
            }
            // Anything else (permission denied: the socket is 0600 and
            // belongs to the daemon's user) means a daemon may well run:
            // say so rather than read the store behind its back.
            Err(e) => Err(OpsError::Forbidden(format!(
                "cannot connect to the daemon's admin socket {}: {e} (run as the daemon's user)",
                socket.display()
            ))),
        }
    }

    /// Where requests go.
    pub fn transport(&self) -> &Transport {
        &self.transport
    }

    pub fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, OpsError> {
        self.call(Method::GET, path, None, self.timeout)
    }

    pub fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, OpsError> {
        self.post_within(path, body, self.timeout)
    }

    pub fn put<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, OpsError> {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| OpsError::Internal(format!("cannot encode the request: {e}")))?;
        self.call(Method::PUT, path, Some(bytes), self.timeout)
    }

    pub fn delete<T: DeserializeOwned>(&self, path: &str) -> Result<T, OpsError> {
        self.call(Method::DELETE, path, None, self.timeout)
    }

    /// [`Client::post`] for a call that works before it answers (a backup
    /// copying a large store to another disk), waiting up to `timeout`.
    pub fn post_within<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<T, OpsError> {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| OpsError::Internal(format!("cannot encode the request: {e}")))?;
        self.call(Method::POST, path, Some(bytes), timeout)
    }

    fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<T, OpsError> {
        let fut = request(&self.transport, self.token.as_deref(), method, path, body);
        let (status, bytes) = self
            .rt
            .block_on(async { tokio::time::timeout(timeout, fut).await })
            .map_err(|_| {
                OpsError::Unavailable(format!(
                    "the daemon at {} did not answer within {}",
                    self.transport,
                    humantime::format_duration(timeout)
                ))
            })??;
        if (200..300).contains(&status) {
            return serde_json::from_slice(&bytes).map_err(|e| {
                OpsError::Internal(format!(
                    "the daemon's answer is not what this version expects: {e}"
                ))
            });
        }
        let message = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
            .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
        Err(match status {
            401 => OpsError::Unauthorized(message),
            403 => OpsError::Forbidden(message),
            404 => OpsError::NotFound(message),
            400 | 413 => OpsError::BadRequest(message),
            409 => OpsError::Conflict(message),
            s => OpsError::Internal(format!("the daemon answered {s}: {message}")),
        })
    }
}

async fn request(
    transport: &Transport,
    token: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
) -> Result<(u16, Bytes), OpsError> {
    let io_err = |what: &str, e: &dyn std::fmt::Display| {
        OpsError::Unavailable(format!("{what} the daemon's admin API at {transport}: {e}"))
    };
    match transport {
        Transport::Unix(socket) => {
            let stream = tokio::net::UnixStream::connect(socket)
                .await
                .map_err(|e| io_err("cannot connect to", &e))?;
            exchange(TokioIo::new(stream), token, method, path, body, &io_err).await
        }
        Transport::Tcp(addr) => {
            let stream = tokio::net::TcpStream::connect(addr.as_str())
                .await
                .map_err(|e| io_err("cannot connect to", &e))?;
            exchange(TokioIo::new(stream), token, method, path, body, &io_err).await
        }
    }
}

/// One request and its answer on a connected stream.
async fn exchange<I>(
    io: I,
    token: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
    io_err: &dyn Fn(&str, &dyn std::fmt::Display) -> OpsError,
) -> Result<(u16, Bytes), OpsError>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| io_err("cannot talk to", &e))?;
    let driver = tokio::spawn(conn);
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, "ankusa")
        .header(hyper::header::CONTENT_TYPE, "application/json");
    if let Some(t) = token {
        req = req.header(hyper::header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let req = req
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| OpsError::Internal(format!("cannot build the request: {e}")))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| io_err("no answer on", &e))?;
    let status = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| io_err("cannot read the answer on", &e))?
        .to_bytes();
    driver.abort();
    Ok((status, bytes))
}
