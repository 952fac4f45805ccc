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

use std::sync::Arc;
use std::time::{Duration, Instant};

use ankusa_store::{Envelope, HookId};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, FailedToBufferBody};
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use tokio::sync::Semaphore;
use tracing::Instrument;

use super::clock::SharedClock;
use super::config::{live, Source, TenantRule};
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
    /// The sources in force; each request keeps the one it looked up
    /// (a reload swaps the set, never a request's source under it).
    pub live: Arc<super::reload::Live>,
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
///
/// A hand-written layer rather than `axum::middleware::from_fn`: the latter
/// clones and boxes the inner service and boxes two futures per request,
/// which the ingest profile showed as a sixth of the handler's time (see
/// docs/benchmarks.md).
#[derive(Debug, Clone, Copy)]
pub(super) struct RequestIdLayer;

impl<S> tower::Layer<S> for RequestIdLayer {
    type Service = RequestId<S>;
    fn layer(&self, inner: S) -> RequestId<S> {
        RequestId(inner)
    }
}

#[derive(Debug, Clone)]
pub(super) struct RequestId<S>(S);

impl<S> tower::Service<Request> for RequestId<S>
where
    S: tower::Service<Request, Response = Response, Error = std::convert::Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Response, std::convert::Infallible>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let id = new_request_id();
        let span = tracing::info_span!(
            "request",
            id = request_id_str(&id),
            method = %req.method(),
            path = %req.uri().path()
        );
        let fut = self.0.call(req);
        Box::pin(
            async move {
                let mut resp = fut.await?;
                if let Ok(v) = HeaderValue::from_bytes(&id) {
                    resp.headers_mut().insert(X_REQUEST_ID, v);
                }
                Ok(resp)
            }
            .instrument(span),
        )
    }
}

const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// `rq_` and 16 random hex digits, written without the formatting machinery
/// (it showed in the profile).
fn new_request_id() -> [u8; 19] {
    let mut id = *b"rq_0000000000000000";
    hex16(rand::random::<u64>(), &mut id[3..]);
    id
}

fn request_id_str(id: &[u8; 19]) -> &str {
    // Only ASCII is ever written into an id.
    std::str::from_utf8(id).unwrap_or("rq_?")
}

/// Writes `n` as 16 lowercase hex digits into `out[..16]`.
fn hex16(n: u64, out: &mut [u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, o) in out.iter_mut().take(16).enumerate() {
        *o = HEX[((n >> (60 - 4 * i)) & 0xf) as usize];
    }
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
    let mut resp = match (outcome, id) {
        (Outcome::Accepted, Some(id)) => (status, id_answer(id, false)).into_response(),
        (Outcome::Duplicate, Some(id)) => (status, id_answer(id, true)).into_response(),
        _ => (
            status,
            Json(json!({"error": outcome.code(), "message": outcome.message()})),
        )
            .into_response(),
    };
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

/// `{"id":"hk_…"}` (with `"duplicate":true` for a duplicate) as a JSON
/// response body, written into one buffer: the answer every accepted hook
/// gets, where a `serde_json::Value` map cost a tenth of the handler's time
/// (docs/benchmarks.md). The same text `Json(json!(..))` produces.
fn id_answer(id: &str, duplicate: bool) -> ([(HeaderName, HeaderValue); 1], Vec<u8>) {
    let mut body = Vec::with_capacity(48 + id.len());
    body.extend_from_slice(b"{\"id\":\"");
    // A public hook id is `hk_`, a node id and hex digits: nothing JSON
    // would escape.
    body.extend_from_slice(id.as_bytes());
    body.extend_from_slice(if duplicate {
        b"\",\"duplicate\":true}"
    } else {
        b"\"}"
    });
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
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
    let ms = || started.elapsed().as_secs_f64() * 1000.0;
    let hook = id.map(|i| i.public(app.store.node()));
    let status = outcome.status().as_u16();
    // Field values are only evaluated when the line is enabled: the hook id
    // is formatted for a log line that is written, not for every request.
    if outcome.status().is_server_error() {
        tracing::warn!(outcome = outcome.code(), status, source = %source_id, tenant = tenant.as_deref(), ms = ms(), "ingest refused");
    } else {
        tracing::info!(outcome = outcome.code(), status, source = %source_id, tenant = tenant.as_deref(), hook = hook.as_deref(), ms = ms(), "ingest");
    }
    answer(outcome, hook.as_deref())
}

/// Bodies up to this size have their event type read on the request's
/// task; larger ones on the blocking pool.
const BODY_WALK_INLINE: usize = 256 * 1024;

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
    // A header type is read before the body consumes the request; a body
    // type (a JSON pointer) after it.
    let head_type = match &admitted.source.event_type {
        Some(crate::routing::EventTypeFrom::Header(_)) => Some(
            admitted
                .source
                .event_type(req.headers(), &[])
                .map_err(|_| refuse(Outcome::EventTypeInvalid))?,
        ),
        _ => None,
    };
    let body = read_body(req, admitted.source.max_body, app.body_timeout)
        .await
        .map_err(refuse)?;

    if !admitted.source.signing_keys.is_empty() {
        let s = signed.as_ref().map(|(id, ts, sig)| Signed {
            id,
            timestamp: ts,
            signature: sig,
        });
        let Some(s) = s else {
            return Err(refuse(Outcome::SignatureMissing));
        };
        let tolerance = admitted.source.signature_tolerance.as_secs();
        let now = app.clock.now_ms();
        let keys = live(&admitted.source.signing_keys, now).map(Vec::as_slice);
        signature::verify_any(keys, s, &body, now, tolerance).map_err(|e| {
            refuse(match e {
                SignatureError::Stale => Outcome::SignatureStale,
                SignatureError::Invalid => Outcome::SignatureInvalid,
            })
        })?;
    }

    let event_type = match head_type {
        Some(t) => t,
        // A large body's walk (`routing::pointer`) takes milliseconds of
        // CPU: off the runtime's workers, so small hooks beside it are not
        // held up. It allocates nothing in proportion to the body, which
        // the request's permit already counts.
        None if body.len() > BODY_WALK_INLINE => {
            let (source, b) = (admitted.source.clone(), body.clone());
            tokio::task::spawn_blocking(move || {
                source.event_type(&axum::http::HeaderMap::new(), &b)
            })
            .await
            .map_err(|_| refuse(Outcome::StoreUnavailable))?
            .map_err(|_| refuse(Outcome::EventTypeInvalid))?
        }
        None => admitted
            .source
            .event_type(&axum::http::HeaderMap::new(), &body)
            .map_err(|_| refuse(Outcome::EventTypeInvalid))?,
    };
    let sinks = admitted.source.route(event_type.as_deref());
    let envelope = Envelope {
        received_at: app.clock.now_ms(),
        source_id: admitted.source.id.clone(),
        tenant: admitted.tenant.clone(),
        idempotency_key: admitted.idempotency_key,
        event_type,
        headers: admitted.headers,
        body: body.to_vec(),
    };
    let admitted_under = Some(admitted.source.generation.clone());
    let rx = app
        .writer
        .submit(envelope, sinks, admitted_under)
        .map_err(|e| {
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
const SINGLE: [HeaderName; 5] = [
    header::AUTHORIZATION,
    IDEMPOTENCY_KEY,
    WEBHOOK_ID,
    WEBHOOK_TIMESTAMP,
    WEBHOOK_SIGNATURE,
];

// Looked up as `HeaderName`s: a `&str` name is parsed and hashed anew on
// every lookup, which showed in the profile.
const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
const WEBHOOK_ID: HeaderName = HeaderName::from_static("webhook-id");
const WEBHOOK_TIMESTAMP: HeaderName = HeaderName::from_static("webhook-timestamp");
const WEBHOOK_SIGNATURE: HeaderName = HeaderName::from_static("webhook-signature");

/// Refuses a request that can be read two ways: a header that must appear
/// once (those above, and the source's tenant header) appearing twice.
fn unambiguous(source: &Source, h: &HeaderMap) -> Result<(), Outcome> {
    let twice = |name: &HeaderName| h.get_all(name).iter().nth(1).is_some();
    let tenant_twice = match &source.tenant {
        TenantRule::Header(name) => twice(name),
        TenantRule::Fixed(_) => false,
    };
    if tenant_twice || SINGLE.iter().any(twice) {
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
        .live
        .current()
        .source(source_id)
        .cloned()
        .ok_or(Outcome::SourceUnknown)?;
    unambiguous(&source, h)?;
    if !source.tokens.is_empty() {
        let presented = h
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes())
            .ok_or(Outcome::TokenMissing)?;
        let token = strip_bearer(presented).ok_or(Outcome::TokenInvalid)?;
        // Every unexpired token is compared (no early exit), so the time
        // taken says nothing about which one, if any, matched.
        let now = app.clock.now_ms();
        let matched = live(&source.tokens, now).fold(false, |m, expected| {
            signature::token_matches(token, expected) | m
        });
        if !matched {
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
    let idempotency_key = match h.get(IDEMPOTENCY_KEY) {
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
    let get = |n: HeaderName| h.get(n).and_then(|v| v.to_str().ok()).map(str::to_owned);
    Some((
        get(WEBHOOK_ID)?,
        get(WEBHOOK_TIMESTAMP)?,
        get(WEBHOOK_SIGNATURE)?,
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
    // The router's limit is `http.max_body`, which bounds every source's
    // (so a reload can raise a source's up to it); this one's may be lower.
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
