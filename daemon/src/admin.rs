//! The admin API over HTTP: on `admin.sock` in the store directory (mode
//! 0600) and, when `admin.listen` is set, on TCP.
//!
//! Routes (JSON; docs/admin-api.md has examples):
//! - `GET  /v1/admin/stats`, `GET /v1/admin/tenants`, `GET /v1/admin/tenants/{tenant}`
//! - `POST /v1/admin/tenants/{tenant}/purge` (`dry_run`, or a job: `202`)
//! - `GET  /v1/admin/dlq`, `GET /v1/admin/dlq/{hook_id}`
//! - `POST /v1/admin/replay` (`dry_run`, or a job: `202`)
//! - `GET  /v1/admin/jobs`, `GET /v1/admin/jobs/{id}`, `GET /v1/admin/audit`
//! - `GET  /v1/admin/node`, `POST /v1/admin/node/drain|undrain|backup`
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
use std::sync::Arc;
use std::time::{Duration, Instant};

use ankusa_store::Store;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, FailedToBufferBody};
use axum::extract::{
    ConnectInfo, DefaultBodyLimit, FromRequest, FromRequestParts, Path as UrlPath, Query, Request,
    State,
};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::clock::SharedClock;
use super::metrics::Metrics;
use ankusa_ops::access::{self, Peer, Principal};
use ankusa_ops::model::{
    BackupRequest, ConfigCheckRequest, DaemonInfo, JobsPage, PauseRequest, PolicyView,
    PurgeRequest, ReplayRequest, SinkLimitsView,
};
use ankusa_ops::wire::{DlqOrderJson, Opt, Own, PolicyJson, SinkLimitsJson};
use ankusa_ops::{jobs, node, pauses, reads, routes, OpsError};
use ankusa_store::policy::{Policy, SinkLimits};

use super::job_runner::JobRunner;

pub struct AdminState {
    pub store: Arc<Store>,
    /// The configuration reloads, and through them the admin tokens in
    /// force.
    pub reloader: Arc<super::reload::Reloader>,
    pub clock: SharedClock,
    pub metrics: Arc<Metrics>,
    /// The sinks' breakers and health, for the sinks list.
    pub control: Arc<super::sink_control::SinkControl>,
    pub jobs: Arc<JobRunner>,
    /// The node's last hour ([`super::history`]).
    pub history: Arc<super::history::History>,
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
        // Two credentials are a request we do not understand: which one
        // is the caller? Refused rather than picking the first.
        let mut presented = parts.headers.get_all(header::AUTHORIZATION).iter();
        let authz = presented.next().map(|v| v.as_bytes());
        if presented.next().is_some() {
            return Err(ApiError(OpsError::Invalid {
                code: "header_ambiguous",
                message: "more than one Authorization header".into(),
            }));
        }
        let routes = state.reloader.live().current();
        let who = access::authenticate(
            authz,
            &routes.admin.tokens,
            peer.as_ref(),
            routes.admin.local_admin,
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

/// The largest admin request body. The largest real one is a replay by
/// hook ids, about 25 bytes an id.
pub const MAX_BODY: usize = 1 << 20;

/// A JSON request body. Unknown fields are refused (`unknown_field`): a
/// misspelt `dry_run` must never run the destructive job for real.
/// Oversize bodies and unreadable ones are answered as JSON like every
/// other refusal.
struct ApiBody<T>(T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = match Bytes::from_request(req, state).await {
            Ok(b) => b,
            Err(BytesRejection::FailedToBufferBody(FailedToBufferBody::LengthLimitError(_))) => {
                return Err(ApiError(OpsError::TooLarge(format!(
                    "the body is larger than the admin API's limit of {MAX_BODY} bytes"
                ))))
            }
            Err(e) => {
                return Err(ApiError(OpsError::BadRequest(format!(
                    "cannot read the body: {}",
                    e.body_text()
                ))))
            }
        };
        serde_json::from_slice(&bytes)
            .map(ApiBody)
            .map_err(|e| ApiError(refusal_of("body", &e.to_string())))
    }
}

/// Sorts a serde refusal: an unknown field has its own code.
fn refusal_of(part: &str, message: &str) -> OpsError {
    // serde's derive words every unknown field of a struct that denies
    // them this way; the message names the field and the expected ones.
    if message.contains("unknown field") {
        OpsError::Invalid {
            code: "unknown_field",
            message: format!("bad {part}: {message}"),
        }
    } else {
        OpsError::BadRequest(format!("bad {part}: {message}"))
    }
}

/// A query string of the route's own parameters ([`Deserialize`] with
/// `deny_unknown_fields`); anything else is refused as JSON.
struct ApiQuery<T>(T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        match Query::<T>::try_from_uri(&parts.uri) {
            Ok(Query(q)) => Ok(ApiQuery(q)),
            Err(e) => Err(ApiError(refusal_of("query string", &e.body_text()))),
        }
    }
}

/// Routes that take no parameters refuse a query string rather than
/// ignore it.
struct NoQuery;

impl<S: Send + Sync> FromRequestParts<S> for NoQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        match parts.uri.query() {
            None | Some("") => Ok(NoQuery),
            Some(q) => Err(ApiError(OpsError::Invalid {
                code: "unknown_field",
                message: format!(
                    "this route takes no query parameters, got {:?}",
                    q.chars().take(80).collect::<String>()
                ),
            })),
        }
    }
}

/// The one path parameter of a route (a tenant, hook or job id), with a
/// segment that is not UTF-8 once decoded answered as JSON.
struct Segment(String);

impl<S: Send + Sync> FromRequestParts<S> for Segment {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match UrlPath::<String>::from_request_parts(parts, state).await {
            Ok(UrlPath(s)) => Ok(Segment(s)),
            Err(e) => Err(ApiError(OpsError::Invalid {
                code: "path_invalid",
                message: e.body_text(),
            })),
        }
    }
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
        .route(routes::NODE, get(node_state))
        .route(routes::HISTORY, get(history))
        .route(routes::DRAIN, post(drain))
        .route(routes::UNDRAIN, post(undrain))
        .route(routes::BACKUP, post(backup))
        .route(routes::SINKS, get(sinks_list))
        .route(routes::PAUSES, get(pauses_list).post(pause))
        .route(
            routes::TENANT_POLICY,
            get(policy_show).put(policy_set).delete(policy_clear),
        )
        .route(
            routes::SINK_LIMITS,
            get(limits_show).put(limits_set).delete(limits_clear),
        )
        .route(routes::RESUME, post(resume_pause))
        .route(routes::METRICS, get(metrics))
        .route(routes::CONFIG_RELOAD, post(config_reload))
        .route(routes::CONFIG_CHECK, post(config_check))
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
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

/// `GET /v1/admin/tenants`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TenantsQuery {
    sort: Option<String>,
    cursor: Option<String>,
    limit: Option<usize>,
}

/// `GET /v1/admin/dlq`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DlqQuery {
    tenant: Option<String>,
    /// `newest_first` (default) or `oldest_first`.
    #[serde(default, with = "Opt::<DlqOrderJson>")]
    order: Option<ankusa_store::queries::DlqOrder>,
    cursor: Option<String>,
    limit: Option<usize>,
    /// `SOURCE/SINK`: only that sink's rows (a bounded walk).
    sink: Option<String>,
    /// An event type pattern (`invoice.*`): only rows of hooks whose type
    /// matches (a bounded walk).
    event_type: Option<String>,
}

/// `GET /v1/admin/jobs`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobsQuery {
    limit: Option<usize>,
}

/// `GET /v1/admin/audit`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditQuery {
    cursor: Option<String>,
    limit: Option<usize>,
}

async fn stats(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    _: NoQuery,
) -> ApiResult<Response> {
    let now = s.clock.now_ms();
    let st = s.clone();
    let mut out = blocking(move || reads::stats(&st.store, &who, now)).await?;
    out.daemon = Some(DaemonInfo {
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        uptime_ms: u64::try_from(s.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        jobs_running: s.jobs.running(),
        store_fault: s.store.write_fault().map(Into::into),
    });
    Ok(Json(out).into_response())
}

async fn tenants(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    ApiQuery(q): ApiQuery<TenantsQuery>,
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
    Segment(tenant): Segment,
    _: NoQuery,
) -> ApiResult<Response> {
    let now = s.clock.now_ms();
    let t = blocking(move || reads::tenant_detail(&s.store, &who, &tenant, now)).await?;
    Ok(Json(t).into_response())
}

async fn purge(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    Segment(tenant): Segment,
    _: NoQuery,
    ApiBody(req): ApiBody<PurgeRequest>,
) -> ApiResult<Response> {
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
    _: NoQuery,
    ApiBody(req): ApiBody<ReplayRequest>,
) -> ApiResult<Response> {
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

/// The body of a call that takes no parameters: `{}` (or nothing at all
/// past the braces); any field is refused.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NoFields {}

async fn history(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    _: NoQuery,
) -> ApiResult<Response> {
    who.require_admin("the node's history")?;
    Ok(Json(s.history.snapshot()).into_response())
}

async fn node_state(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    _: NoQuery,
) -> ApiResult<Response> {
    let n = blocking(move || node::state(&s.store, &who)).await?;
    Ok(Json(n).into_response())
}

async fn drain(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    _: NoQuery,
    ApiBody(_): ApiBody<NoFields>,
) -> ApiResult<Response> {
    let now = s.clock.now_ms();
    let n = blocking(move || node::drain(&s.store, &who, now)).await?;
    tracing::warn!(
        owed = n.owed,
        "the node drains: /healthz answers 503 draining"
    );
    Ok(Json(n).into_response())
}

async fn undrain(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    _: NoQuery,
    ApiBody(_): ApiBody<NoFields>,
) -> ApiResult<Response> {
    let now = s.clock.now_ms();
    let n = blocking(move || node::undrain(&s.store, &who, now)).await?;
    tracing::warn!("the node no longer drains");
    Ok(Json(n).into_response())
}

/// Re-reads the daemon's configuration file and applies it: the whole
/// file or nothing (admin; audited).
async fn config_reload(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    _: NoQuery,
    ApiBody(_): ApiBody<NoFields>,
) -> ApiResult<Response> {
    who.require_admin("a configuration reload")?;
    let r = s.reloader.clone();
    let report = blocking(move || r.reload(&who).map_err(reload_error)).await?;
    Ok(Json(report).into_response())
}

/// What a candidate file would change, applying nothing (admin).
async fn config_check(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    _: NoQuery,
    ApiBody(req): ApiBody<ConfigCheckRequest>,
) -> ApiResult<Response> {
    who.require_admin("a configuration check")?;
    let r = s.reloader.clone();
    let report = blocking(move || r.check(&req.text).map_err(reload_error)).await?;
    Ok(Json(report).into_response())
}

fn reload_error(e: super::reload::ReloadError) -> OpsError {
    use super::reload::ReloadError;
    match e {
        ReloadError::Invalid(e) => OpsError::Invalid {
            code: "config_invalid",
            message: e.to_string(),
        },
        e @ ReloadError::Refused(_) => OpsError::Invalid {
            code: "reload_refused",
            message: e.to_string(),
        },
        ReloadError::Store(e) => OpsError::Store(e),
    }
}

/// A checkpoint taken with the daemon's own handle, beside its writes
/// (ingest, dispatch and jobs go on).
async fn backup(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    _: NoQuery,
    ApiBody(req): ApiBody<BackupRequest>,
) -> ApiResult<Response> {
    let now = s.clock.now_ms();
    let done = blocking(move || ankusa_ops::backup::take(&s.store, &who, &req, now)).await?;
    tracing::info!(
        backup = %done.path,
        bytes = done.bytes,
        removed = done.removed.len(),
        "backup written"
    );
    Ok(Json(done).into_response())
}

async fn sinks_list(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    _: NoQuery,
) -> ApiResult<Response> {
    let now = s.clock.now_ms();
    let st = s.clone();
    let mut page = blocking(move || reads::sinks(&st.store, &who)).await?;
    for v in &mut page.sinks {
        v.health = s.control.health(&v.source, v.index, now);
    }
    Ok(Json(page).into_response())
}

async fn policy_show(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    Segment(tenant): Segment,
    _: NoQuery,
) -> ApiResult<Response> {
    let defaults = s.reloader.live().current().tenant_defaults;
    let t = tenant.clone();
    let stored = blocking(move || ankusa_ops::policy::tenant(&s.store, &who, &t)).await?;
    Ok(Json(PolicyView {
        tenant,
        stored,
        defaults: Some(defaults),
    })
    .into_response())
}

async fn policy_set(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    Segment(tenant): Segment,
    _: NoQuery,
    ApiBody(set): ApiBody<Own<PolicyJson, Policy>>,
) -> ApiResult<Response> {
    let set = set.into_inner();
    let now = s.clock.now_ms();
    let c = blocking(move || ankusa_ops::policy::set_tenant(&s.store, &who, &tenant, &set, now))
        .await?;
    Ok(Json(c).into_response())
}

async fn policy_clear(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    Segment(tenant): Segment,
    _: NoQuery,
) -> ApiResult<Response> {
    let now = s.clock.now_ms();
    let c =
        blocking(move || ankusa_ops::policy::clear_tenant(&s.store, &who, &tenant, now)).await?;
    Ok(Json(c).into_response())
}

async fn limits_show(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    Segment(sink): Segment,
    _: NoQuery,
) -> ApiResult<Response> {
    let v = blocking(move || {
        who.require_admin("reading a sink's limits")?;
        let stored = ankusa_ops::policy::sink(&s.store, &sink)?;
        let r = ankusa_ops::reads::resolve_sink(&s.store, &sink)?;
        let catalog = ankusa_store::sinks::catalog(&s.store)?;
        Ok(SinkLimitsView {
            sink: ankusa_store::sinks::display(&catalog, &r.source, r.sink),
            stored,
        })
    })
    .await?;
    Ok(Json(v).into_response())
}

async fn limits_set(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    Segment(sink): Segment,
    _: NoQuery,
    ApiBody(set): ApiBody<Own<SinkLimitsJson, SinkLimits>>,
) -> ApiResult<Response> {
    let set = set.into_inner();
    let now = s.clock.now_ms();
    let c =
        blocking(move || ankusa_ops::policy::set_sink(&s.store, &who, &sink, &set, now)).await?;
    Ok(Json(c).into_response())
}

async fn limits_clear(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    Segment(sink): Segment,
    _: NoQuery,
) -> ApiResult<Response> {
    let now = s.clock.now_ms();
    let c = blocking(move || ankusa_ops::policy::clear_sink(&s.store, &who, &sink, now)).await?;
    Ok(Json(c).into_response())
}

async fn pauses_list(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    _: NoQuery,
) -> ApiResult<Response> {
    let page = blocking(move || reads::pauses_page(&s.store, &who)).await?;
    Ok(Json(page).into_response())
}

async fn pause(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    _: NoQuery,
    ApiBody(req): ApiBody<PauseRequest>,
) -> ApiResult<Response> {
    let now = s.clock.now_ms();
    let p = blocking(move || pauses::pause(&s.store, &who, &req, now)).await?;
    let status = if p.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(p)).into_response())
}

async fn resume_pause(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    _: NoQuery,
    ApiBody(req): ApiBody<PauseRequest>,
) -> ApiResult<Response> {
    let now = s.clock.now_ms();
    let st = s.clone();
    let r = blocking(move || pauses::resume(&st.store, &who, &req, now)).await?;
    if let Some(job) = &r.job {
        s.jobs.spawn(s.store.clone(), s.clock.clone(), job.clone());
    }
    Ok(Json(r).into_response())
}

async fn dlq(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    ApiQuery(q): ApiQuery<DlqQuery>,
) -> ApiResult<Response> {
    let page = blocking(move || {
        reads::dlq_page(
            &s.store,
            &who,
            q.tenant.as_deref(),
            q.order.unwrap_or_default(),
            q.cursor.as_deref(),
            q.limit.unwrap_or(50),
            &reads::DlqFilter {
                sink: q.sink,
                event_type: q.event_type,
            },
        )
    })
    .await?;
    Ok(Json(page).into_response())
}

async fn dlq_entry(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    Segment(hook_id): Segment,
    _: NoQuery,
) -> ApiResult<Response> {
    let d = blocking(move || reads::dlq_detail(&s.store, &who, &hook_id)).await?;
    Ok(Json(d).into_response())
}

async fn jobs_list(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    ApiQuery(q): ApiQuery<JobsQuery>,
) -> ApiResult<Response> {
    let limit = q.limit.unwrap_or(50);
    let list = blocking(move || jobs::list(&s.store, &who, limit)).await?;
    Ok(Json(JobsPage { jobs: list }).into_response())
}

async fn job(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    Segment(id): Segment,
    _: NoQuery,
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
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> ApiResult<Response> {
    let page = blocking(move || {
        jobs::audit_page(&s.store, &who, q.cursor.as_deref(), q.limit.unwrap_or(50))
    })
    .await?;
    Ok(Json(page).into_response())
}

async fn metrics(
    State(s): State<Arc<AdminState>>,
    Caller(who): Caller,
    _: NoQuery,
) -> ApiResult<Response> {
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
