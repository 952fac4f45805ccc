//! The ingest HTTP API: `POST /v1/sources/{source}/hooks`.
//!
//! Owns the request path from the first header to the answer: source
//! lookup, token, tenant, idempotency key, body limits, signature, and the
//! hand-off to the writer. Also `GET /healthz` (readiness), `GET /livez`
//! (liveness) and `GET /metrics`.
//!
//! Invariants:
//! - Checks run cheapest first and everything that can be decided from the
//!   headers is decided before the body is read, so a refused request costs
//!   no body buffering. The signature needs the body and comes right after.
//! - Nothing is queued for the writer until every check passed: a refused
//!   request stores nothing.
//! - Every request holds one permit of `http.max_requests` while it buffers
//!   and waits, so buffered bodies are bounded by `max_requests x max_body`
//!   and queued ones by `writer.queue_bytes`; past either the answer is an
//!   immediate 503, never an unbounded wait.
//! - `202` is sent only for [`WriteOutcome::Accepted`] and `Duplicate`,
//!   both of which name a hook that is in a synced commit.
//! - Every answer carries `x-request-id`; the same id is on every log line
//!   of the request.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ankusa_store::{Envelope, HookId};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, FailedToBufferBody};
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use tokio::sync::Semaphore;
use tracing::Instrument;

use super::clock::SharedClock;
use super::config::{Source, TenantRule};
use super::metrics::Metrics;
use super::outcome::Outcome;
use super::signature::{self, SignatureError, Signed};
use super::writer::{SubmitError, WriteOutcome, WriterHandle};

/// Longest `Idempotency-Key`.
pub const MAX_IDEMPOTENCY_KEY: usize = 255;
/// Longest value of a header kept with a hook.
pub const MAX_KEPT_HEADER: usize = 8192;

/// What every handler shares.
pub struct AppState {
    pub sources: HashMap<String, Arc<Source>>,
    pub writer: WriterHandle,
    pub metrics: Arc<Metrics>,
    pub clock: SharedClock,
    pub permits: Arc<Semaphore>,
    pub body_timeout: Duration,
    /// For the queue gauges of `/metrics` (read-only use).
    pub store: Arc<ankusa_store::Store>,
}

/// Gives each request an id, a tracing span carrying it, and the
/// `x-request-id` response header.
pub(super) async fn request_id(req: Request, next: Next) -> Response {
    let id = format!("rq_{:016x}", rand::random::<u64>());
    let span =
        tracing::info_span!("request", id = %id, method = %req.method(), path = %req.uri().path());
    let mut resp = next.run(req).instrument(span).await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    resp
}

pub(super) async fn healthz(State(app): State<Arc<AppState>>) -> Response {
    super::health::readiness(&app.store)
}

pub(super) async fn livez() -> Response {
    super::health::liveness()
}

pub(super) async fn render_metrics(State(app): State<Arc<AppState>>) -> Response {
    super::metrics::respond(app.metrics.clone(), app.store.clone(), app.clock.now_ms()).await
}

pub(super) async fn not_found() -> Response {
    plain_error(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such endpoint; hooks go to POST /v1/sources/{source}/hooks",
    )
}

pub(super) async fn method_not_allowed() -> Response {
    plain_error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this endpoint takes another method",
    )
}

fn plain_error(status: StatusCode, code: &str, message: &str) -> Response {
    (status, Json(json!({"error": code, "message": message}))).into_response()
}

/// The answer for an outcome (with the hook's public id when there is one).
pub(super) fn answer(outcome: Outcome, id: Option<&str>) -> Response {
    let status = outcome.status();
    let body = match (outcome, id) {
        (Outcome::Accepted, Some(id)) => json!({"id": id}),
        (Outcome::Duplicate, Some(id)) => json!({"id": id, "duplicate": true}),
        _ => json!({"error": outcome.code(), "message": outcome.message()}),
    };
    let mut resp = (status, Json(body)).into_response();
    let h = resp.headers_mut();
    if let Some(s) = outcome.retry_after() {
        h.insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    if matches!(outcome, Outcome::TokenMissing | Outcome::TokenInvalid) {
        h.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    if outcome == Outcome::Duplicate {
        h.insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    resp
}

/// What a request resolved to before its body was read.
struct Admitted {
    source: Arc<Source>,
    tenant: String,
    idempotency_key: Option<String>,
    headers: Vec<(String, Vec<u8>)>,
}

pub(super) async fn ingest(
    State(app): State<Arc<AppState>>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
    req: Request,
) -> Response {
    let started = Instant::now();
    let _in_progress = InProgress::enter(&app.metrics);
    let source_id = path.map(|Path(s)| s).unwrap_or_default();
    let result = handle(&app, &source_id, req).await;
    let (outcome, id, tenant) = match result {
        Ok((o, id, tenant)) => (o, Some(id), Some(tenant)),
        Err((o, tenant)) => (o, None, tenant),
    };
    app.metrics.count(outcome);
    if id.is_some() {
        app.metrics.ack_latency.observe(started.elapsed());
    }
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let hook = id.map(|i| i.public(app.store.node()));
    let status = outcome.status().as_u16();
    if outcome.status().is_server_error() {
        tracing::warn!(outcome = outcome.code(), status, source = %source_id, tenant = tenant.as_deref(), ms, "ingest refused");
    } else {
        tracing::info!(outcome = outcome.code(), status, source = %source_id, tenant = tenant.as_deref(), hook = hook.as_deref(), ms, "ingest");
    }
    answer(outcome, hook.as_deref())
}

/// Counts a request in `in_progress` for as long as it lives, including
/// when the client goes away and the handler is dropped mid-await.
pub(super) struct InProgress(Arc<Metrics>);

impl InProgress {
    pub(super) fn enter(m: &Arc<Metrics>) -> Self {
        m.in_progress
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self(m.clone())
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0
            .in_progress
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

type Handled = Result<(Outcome, HookId, String), (Outcome, Option<String>)>;

async fn handle(app: &AppState, source_id: &str, req: Request) -> Handled {
    let framings = req.extensions().get::<super::listener::HeadWatch>();
    if framings.is_some_and(|w| w.both_framings()) {
        return Err((Outcome::HeaderAmbiguous, None));
    }
    let admitted = admit(app, source_id, req.headers()).map_err(|o| (o, None))?;
    let tenant = Some(admitted.tenant.clone());
    let refuse = |o: Outcome| (o, tenant.clone());

    // The request's share of the buffering budget, held until it is answered.
    let Ok(_permit) = app.permits.clone().try_acquire_owned() else {
        return Err(refuse(Outcome::Overloaded));
    };
    let signed = signed_headers(req.headers());
    let body = read_body(req, admitted.source.max_body, app.body_timeout)
        .await
        .map_err(refuse)?;

    if let Some(key) = &admitted.source.signing_key {
        let s = signed.as_ref().map(|(id, ts, sig)| Signed {
            id,
            timestamp: ts,
            signature: sig,
        });
        let Some(s) = s else {
            return Err(refuse(Outcome::SignatureMissing));
        };
        let tolerance = admitted.source.signature_tolerance.as_secs();
        signature::verify(key, s, &body, app.clock.now_ms(), tolerance).map_err(|e| {
            refuse(match e {
                SignatureError::Stale => Outcome::SignatureStale,
                SignatureError::Invalid => Outcome::SignatureInvalid,
            })
        })?;
    }

    let envelope = Envelope {
        received_at: app.clock.now_ms(),
        source_id: admitted.source.id.clone(),
        tenant: admitted.tenant.clone(),
        idempotency_key: admitted.idempotency_key,
        headers: admitted.headers,
        body: body.to_vec(),
    };
    // Config allows at most 64 sinks, so this never saturates.
    let sinks = u16::try_from(admitted.source.sinks.len()).unwrap_or(u16::MAX);
    let rx = app.writer.submit(envelope, sinks).map_err(|e| {
        refuse(match e {
            SubmitError::Full => Outcome::QueueFull,
            SubmitError::Closed => Outcome::ShuttingDown,
        })
    })?;
    match rx.await {
        Ok(WriteOutcome::Accepted(id)) => Ok((Outcome::Accepted, id, admitted.tenant)),
        Ok(WriteOutcome::Duplicate(id)) => Ok((Outcome::Duplicate, id, admitted.tenant)),
        Ok(WriteOutcome::Refused(o)) => Err(refuse(o)),
        // The writer dropped the job unanswered: it is gone, so nothing of
        // this request was committed.
        Err(_) => Err(refuse(Outcome::StoreUnavailable)),
    }
}

/// Headers whose second copy would make the request mean two things: which
/// token, which key, which signature. (Framing headers never get here
/// twice: the HTTP layer refuses two different `Content-Length`s, and drops
/// `Content-Length` beside `Transfer-Encoding`, which [`handle`] learns from
/// the connection's [`super::listener::HeadWatch`] instead.)
const SINGLE: [&str; 5] = [
    "authorization",
    "idempotency-key",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
];

/// Refuses a request that can be read two ways: a header that must appear
/// once (those above, and the source's tenant header) appearing twice.
fn unambiguous(source: &Source, h: &HeaderMap) -> Result<(), Outcome> {
    let twice = |name: &str| h.get_all(name).iter().nth(1).is_some();
    let tenant_twice = match &source.tenant {
        TenantRule::Header(name) => twice(name.as_str()),
        TenantRule::Fixed(_) => false,
    };
    if tenant_twice || SINGLE.iter().any(|n| twice(n)) {
        return Err(Outcome::HeaderAmbiguous);
    }
    Ok(())
}

/// The source, if it exists, the request is unambiguous and its token
/// matches: what a single hook and a batch both need first.
pub(super) fn admit_source(
    app: &AppState,
    source_id: &str,
    h: &HeaderMap,
) -> Result<Arc<Source>, Outcome> {
    let source = app
        .sources
        .get(source_id)
        .cloned()
        .ok_or(Outcome::SourceUnknown)?;
    unambiguous(&source, h)?;
    if let Some(expected) = &source.token_digest {
        let presented = h
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes())
            .ok_or(Outcome::TokenMissing)?;
        let token = strip_bearer(presented).ok_or(Outcome::TokenInvalid)?;
        if !signature::token_matches(token, expected) {
            return Err(Outcome::TokenInvalid);
        }
    }
    Ok(source)
}

/// An idempotency key: 1 to 255 printable ASCII characters, not all spaces.
pub(super) fn idempotency_key(b: &[u8]) -> Result<String, Outcome> {
    let ok = !b.is_empty()
        && b.len() <= MAX_IDEMPOTENCY_KEY
        && b.iter().all(|&c| c.is_ascii_graphic() || c == b' ')
        && b.iter().any(|&c| c != b' ');
    if !ok {
        return Err(Outcome::IdempotencyKeyInvalid);
    }
    // Checked ASCII above, so this cannot fail.
    Ok(String::from_utf8_lossy(b).into_owned())
}

/// Every check that needs only the headers.
fn admit(app: &AppState, source_id: &str, h: &HeaderMap) -> Result<Admitted, Outcome> {
    let source = admit_source(app, source_id, h)?;
    let tenant = match &source.tenant {
        TenantRule::Fixed(t) => t.clone(),
        TenantRule::Header(name) => {
            let v = h.get(name).ok_or(Outcome::TenantMissing)?;
            let t = std::str::from_utf8(v.as_bytes()).map_err(|_| Outcome::TenantInvalid)?;
            ankusa_store::tenants::validate_id(t).map_err(|_| Outcome::TenantInvalid)?;
            t.to_owned()
        }
    };
    let idempotency_key = match h.get("idempotency-key") {
        None => None,
        Some(v) => Some(idempotency_key(v.as_bytes())?),
    };
    if let Some(len) = h.get(header::CONTENT_LENGTH) {
        let len = std::str::from_utf8(len.as_bytes())
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or(Outcome::BodyUnreadable)?;
        if len > source.max_body as u64 {
            return Err(Outcome::BodyTooLarge);
        }
    }
    let mut headers = Vec::with_capacity(source.keep_headers.len());
    for name in &source.keep_headers {
        if let Some(v) = h.get(name) {
            if v.len() > MAX_KEPT_HEADER {
                return Err(Outcome::HeaderInvalid);
            }
            headers.push((name.as_str().to_owned(), v.as_bytes().to_vec()));
        }
    }
    Ok(Admitted {
        source,
        tenant,
        idempotency_key,
        headers,
    })
}

/// The token of an `Authorization: Bearer <token>` value.
fn strip_bearer(v: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = v.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

fn signed_headers(h: &HeaderMap) -> Option<(String, String, String)> {
    let get = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).map(str::to_owned);
    Some((
        get("webhook-id")?,
        get("webhook-timestamp")?,
        get("webhook-signature")?,
    ))
}

/// Buffers the body within the source's limit and the body timeout.
pub(super) async fn read_body(
    req: Request,
    max: usize,
    timeout: Duration,
) -> Result<Bytes, Outcome> {
    let read = Bytes::from_request(req, &());
    let body = match tokio::time::timeout(timeout, read).await {
        Err(_) => return Err(Outcome::BodyTimeout),
        Ok(Err(BytesRejection::FailedToBufferBody(FailedToBufferBody::LengthLimitError(_)))) => {
            return Err(Outcome::BodyTooLarge)
        }
        Ok(Err(_)) => return Err(Outcome::BodyUnreadable),
        Ok(Ok(b)) => b,
    };
    // The router's limit is the largest of all sources; this one's may be lower.
    if body.len() > max {
        return Err(Outcome::BodyTooLarge);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_parsed_case_insensitively() {
        assert_eq!(strip_bearer(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(strip_bearer(b"bearer  abc "), Some(&b"abc"[..]));
        assert_eq!(strip_bearer(b"Basic abc"), None);
        assert_eq!(strip_bearer(b"Bearer "), None);
        assert_eq!(strip_bearer(b"Bear"), None);
    }
}
