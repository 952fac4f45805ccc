//! The admin API over HTTP: on `admin.sock` in the store directory (mode
//! 0600) and, when `admin.listen` is set, on TCP.
//!
//! Routes (JSON; docs/admin-api.md has examples):
//! - `GET  /v1/admin/stats`, `GET /v1/admin/tenants`, `GET /v1/admin/tenants/{tenant}`
//! - `POST /v1/admin/tenants/{tenant}/purge` (`dry_run`, or a job: `202`)
//! - `GET  /v1/admin/dlq`, `GET /v1/admin/dlq/{hook_id}`
//! - `POST /v1/admin/replay` (`dry_run`, or a job: `202`)
//! - `GET  /v1/admin/jobs`, `GET /v1/admin/jobs/{id}`, `GET /v1/admin/audit`
//! - `GET  /metrics` (admin callers)
//!
//! Invariants:
//! - Every route authenticates first ([`ankusa_ops::access`]); nothing
//!   is read before the caller is known.
//! - Store work runs on blocking threads, never on the async workers.
//! - Jobs run on blocking threads, one chunk at a time; on shutdown they
//!   stop between chunks and are resumed by the next boot (their records
//!   say how far they got).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_store::Store;
use axum::body::Bytes;
use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, FromRequestParts, Path as UrlPath, Query, State};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use super::clock::SharedClock;
use super::config::AdminSettings;
use super::metrics::Metrics;
use ankusa_ops::access::{self, Peer, Principal};
use ankusa_ops::model::{DaemonInfo, Job, JobsPage, PurgeRequest, ReplayRequest};
use ankusa_ops::{jobs, reads, routes, OpsError};

/// Runs jobs on blocking threads and stops them on shutdown.
#[derive(Default)]
pub struct JobRunner {
    stop: Arc<AtomicBool>,
    running: Arc<AtomicU64>,
    threads: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl JobRunner {
    /// Runs `job` to its end (or to shutdown) in the background.
    pub fn spawn(&self, store: Arc<Store>, clock: SharedClock, job: Job) {
        let stop = self.stop.clone();
        let running = self.running.clone();
        running.fetch_add(1, Ordering::Relaxed);
        let id = job.id;
        let handle = tokio::task::spawn_blocking(move || {
            let now = || clock.now_ms();
            match jobs::run(&store, job, &now, &stop, |_| {}) {
                Ok(j) => {
                    tracing::info!(job = id, state = ?j.state, rows = j.progress.rows(), "job ended")
                }
                Err(e) => {
                    tracing::error!(job = id, error = %e, "job stopped on an error; it resumes at the next boot")
                }
            }
            running.fetch_sub(1, Ordering::Relaxed);
        });
        let mut threads = self
            .threads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        threads.retain(|h| !h.is_finished());
        threads.push(handle);
    }

    pub fn running(&self) -> u64 {
        self.running.load(Ordering::Relaxed)
    }

    /// Asks every job to stop after its current chunk and waits for them.
    pub async fn shutdown(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let threads = std::mem::take(
            &mut *self
                .threads
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for t in threads {
            let _ = t.await;
        }
    }
}

pub struct AdminState {
    pub store: Arc<Store>,
    pub settings: AdminSettings,
    pub clock: SharedClock,
    pub metrics: Arc<Metrics>,
    pub jobs: Arc<JobRunner>,
    pub started: Instant,
}

/// Resumes the jobs a previous process left running.
pub fn resume(state: &AdminState) -> Result<usize, OpsError> {
    let left = jobs::unfinished(&state.store)?;
    let n = left.len();
    for job in left {
        tracing::warn!(job = job.id, "resuming a job the last run did not finish");
        state
            .jobs
            .spawn(state.store.clone(), state.clock.clone(), job);
    }
    Ok(n)
}

/// The peer of a socket connection, from the kernel (SO_PEERCRED).
#[derive(Debug, Clone)]
pub struct SocketPeer(pub Option<u32>);

impl Connected<axum::serve::IncomingStream<'_, tokio::net::UnixListener>> for SocketPeer {
    fn connect_info(stream: axum::serve::IncomingStream<'_, tokio::net::UnixListener>) -> Self {
        SocketPeer(stream.io().peer_cred().ok().map(|c| c.uid()))
    }
}

/// An authenticated caller, extracted before any handler runs.
pub struct Caller(pub Principal);

impl FromRequestParts<Arc<AdminState>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AdminState>,
    ) -> Result<Self, Self::Rejection> {
        // A socket caller whose credentials the kernel would not give is
        // treated like a TCP caller: no local admin, tokens only.
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketPeer>>()
            .and_then(|ConnectInfo(p)| p.0)
            .map(Peer::from_uid);
        let authz = parts
            .headers
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes());
        let who = access::authenticate(
            authz,
            &state.settings.tokens,
            peer.as_ref(),
            state.settings.local_admin,
        )?;
        Ok(Caller(who))
    }
}

/// An error answer: `{"error": code, "message": text}`.
pub struct ApiError(OpsError);

impl From<OpsError> for ApiError {
    fn from(e: OpsError) -> Self {
        ApiError(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.0.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() {
            tracing::error!(error = %self.0, "admin API request failed");
        }
        let mut r = (
            status,
            Json(serde_json::json!({"error": self.0.code(), "message": self.0.to_string()})),
        )
            .into_response();
        if status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        r
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// Runs store work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, OpsError> + Send + 'static,
) -> ApiResult<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(ApiError),
        Err(e) => Err(ApiError(OpsError::Internal(format!("task failed: {e}")))),
    }
}

fn body<T: serde::de::DeserializeOwned>(bytes: &Bytes) -> ApiResult<T> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError(OpsError::BadRequest(format!("bad JSON body: {e}"))))
}

/// The admin router.
pub fn router(state: Arc<AdminState>) -> Router {
    Router::new()
        .route(routes::STATS, get(stats))
        .route(routes::TENANTS, get(tenants))
        .route(routes::TENANT, get(tenant))
        .route(routes::PURGE, post(purge))
        .route(routes::DLQ, get(dlq))
        .route(routes::DLQ_ENTRY, get(dlq_entry))
        .route(routes::REPLAY, post(replay))
        .route(routes::JOBS, get(jobs_list))
        .route(routes::JOB, get(job))
        .route(routes::AUDIT, get(audit))
        .route(routes::METRICS, get(metrics))
        .fallback(|| async {
            ApiError(OpsError::NotFound(
                "no such admin route (see docs/admin-api.md)".into(),
            ))
        })
        .method_not_allowed_fallback(|| async {
            (
                StatusCode::METHOD_NOT_ALLOWED,
                Json(serde_json::json!({
                    "error": "method_not_allowed",
                    "message": "this route takes another method (see docs/admin-api.md)"
                })),
            )
        })
        .with_state(state)
}

/// The query string of a page, with a malformed one answered as JSON
/// (`400 bad_request`) like every other refusal.
struct PageParams(PageQuery);

impl<S: Send + Sync> FromRequestParts<S> for PageParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Query::<PageQuery>::from_request_parts(parts, state).await {
            Ok(Query(q)) => Ok(PageParams(q)),
            Err(e) => Err(ApiError(OpsError::BadRequest(e.body_text()))),
        }
    }
}

#[derive(Debug, Deserialize)]
struct PageQuery {
    sort: Option<String>,
    /// DLQ order: `newest_first` (default) or `oldest_first`.
    order: Option<ankusa_store::queries::DlqOrder>,
    cursor: Option<String>,
    tenant: Option<String>,
    limit: Option<usize>,
}

async fn stats(State(s): State<Arc<AdminState>>, Caller(who): Caller) -> ApiResult<Response> {
    let now = s.clock.now_ms();
    let st = s.clone();
    let mut out = blocking(move || reads::stats(&st.store, &who, now)).await?;
    out.daemon = Some(DaemonInfo {
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        uptime_ms: u64::try_from(s.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        jobs_running: s.jobs.running(),
    });
    Ok(Json(out).into_response())
}

async fn tenants(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    PageParams(q): PageParams,
) -> ApiResult<Response> {
    let page = blocking(move || {
        reads::tenants_page(
            &s.store,
            &who,
            q.sort.as_deref(),
            q.cursor.as_deref(),
            q.limit.unwrap_or(50),
        )
    })
    .await?;
    Ok(Json(page).into_response())
}

async fn tenant(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    UrlPath(tenant): UrlPath<String>,
) -> ApiResult<Response> {
    let now = s.clock.now_ms();
    let t = blocking(move || reads::tenant_detail(&s.store, &who, &tenant, now)).await?;
    Ok(Json(t).into_response())
}

async fn purge(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    UrlPath(tenant): UrlPath<String>,
    raw: Bytes,
) -> ApiResult<Response> {
    let req: PurgeRequest = body(&raw)?;
    let kinds = jobs::parse_kinds(&req.kinds)?;
    let now = s.clock.now_ms();
    let st = s.clone();
    if req.dry_run {
        let d = blocking(move || jobs::dry_run_purge(&st.store, &who, &tenant, kinds, now)).await?;
        return Ok(Json(d).into_response());
    }
    let job = blocking(move || jobs::start_purge(&st.store, &who, &tenant, kinds, now)).await?;
    s.jobs.spawn(s.store.clone(), s.clock.clone(), job.clone());
    Ok((StatusCode::ACCEPTED, Json(job)).into_response())
}

async fn replay(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    raw: Bytes,
) -> ApiResult<Response> {
    let req: ReplayRequest = body(&raw)?;
    let now = s.clock.now_ms();
    let st = s.clone();
    if req.dry_run {
        let d = blocking(move || jobs::dry_run_replay(&st.store, &who, &req, now)).await?;
        return Ok(Json(d).into_response());
    }
    let job = blocking(move || jobs::start_replay(&st.store, &who, &req, now)).await?;
    s.jobs.spawn(s.store.clone(), s.clock.clone(), job.clone());
    Ok((StatusCode::ACCEPTED, Json(job)).into_response())
}

async fn dlq(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    PageParams(q): PageParams,
) -> ApiResult<Response> {
    let page = blocking(move || {
        reads::dlq_page(
            &s.store,
            &who,
            q.tenant.as_deref(),
            q.order.unwrap_or_default(),
            q.cursor.as_deref(),
            q.limit.unwrap_or(50),
        )
    })
    .await?;
    Ok(Json(page).into_response())
}

async fn dlq_entry(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    UrlPath(hook_id): UrlPath<String>,
) -> ApiResult<Response> {
    let d = blocking(move || reads::dlq_detail(&s.store, &who, &hook_id)).await?;
    Ok(Json(d).into_response())
}

async fn jobs_list(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    PageParams(q): PageParams,
) -> ApiResult<Response> {
    let limit = q.limit.unwrap_or(50).clamp(1, reads::MAX_PAGE);
    let list = blocking(move || jobs::list(&s.store, &who, limit)).await?;
    Ok(Json(JobsPage { jobs: list }).into_response())
}

async fn job(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    UrlPath(id): UrlPath<String>,
) -> ApiResult<Response> {
    let id: u64 = id
        .parse()
        .map_err(|_| ApiError(OpsError::BadRequest(format!("bad job id {id:?}"))))?;
    let j = blocking(move || jobs::get(&s.store, &who, id)).await?;
    Ok(Json(j).into_response())
}

async fn audit(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    PageParams(q): PageParams,
) -> ApiResult<Response> {
    let page = blocking(move || {
        jobs::audit_page(&s.store, &who, q.cursor.as_deref(), q.limit.unwrap_or(50))
    })
    .await?;
    Ok(Json(page).into_response())
}

async fn metrics(State(s): State<Arc<AdminState>>, Caller(who): Caller) -> ApiResult<Response> {
    who.require_admin("/metrics")?;
    Ok(super::metrics::respond(s.metrics.clone(), s.store.clone(), s.clock.now_ms()).await)
}

/// Binds the socket: a stale file from a crashed run is removed (the store
/// lock proves no other daemon runs here), and the mode is set to 0600.
pub fn bind_socket(store: &Path) -> std::io::Result<tokio::net::UnixListener> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let path = ankusa_ops::socket_path(store);
    // sockaddr_un holds 108 bytes with the terminating NUL.
    if path.as_os_str().as_bytes().len() >= 108 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "the path is {} bytes, longer than a unix socket address allows (107): use a shorter store path, or set admin.socket = false and admin.listen",
                path.as_os_str().as_bytes().len()
            ),
        ));
    }
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    // Connecting needs write permission on the socket file, which the usual
    // umasks (022, 027, 077) already deny to others; chmod then makes it
    // 0600 whatever the umask. (Changing the umask instead would race every
    // other thread creating files, RocksDB's included.)
    let listener = tokio::net::UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// How long shutdown waits for the admin servers' requests.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
