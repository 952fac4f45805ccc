//! The batch ingest API: `POST /v1/sources/{source}/hooks:batch`.
//!
//! A producer that can batch sends many hooks in one request, as
//! newline-delimited JSON (one entry per line, blank lines ignored). Each
//! entry is checked as a single hook would be (tenant, idempotency key, kept
//! headers, body size, signature) and answered on its own, in order:
//! accepted with its id, a duplicate with the original id, or refused with
//! the same code a single request would get. Partial acceptance is explicit
//! in the answer, never silent.
//!
//! Invariants:
//! - What needs only the request's headers (source, token, ambiguity) and
//!   the request's framing (size, entry count) refuses the whole request
//!   before any entry is looked at.
//! - Every entry that passes its checks goes to the writer in **one** job,
//!   so they are committed by the same synced batch: the `200` carries no
//!   `accepted` entry that is not durable.
//! - An entry's refusal never changes another entry's answer (a duplicate
//!   key within the batch is answered as a duplicate of the first).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use ankusa_store::Envelope;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};

use super::config::{Source, TenantRule};
use super::ingest::{self, AppState, InProgress};
use super::outcome::Outcome;
use super::routing::EventTypeFrom;
use super::signature::{self, SignatureError, Signed};
use super::writer::{SubmitError, WriteOutcome};

/// Entries one batch request may hold.
pub const MAX_BATCH_ENTRIES: usize = 1000;
/// Bytes one batch request may hold.
pub const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;

/// One line of a batch request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    /// The tenant, for a source that takes it from a header (the request's
    /// tenant header is the default); a fixed-tenant source refuses another.
    tenant: Option<String>,
    idempotency_key: Option<String>,
    /// Headers to keep with the hook (only those the source keeps).
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// The body as UTF-8 text...
    body: Option<String>,
    /// ... or as standard base64 (exactly one of the two).
    body_base64: Option<String>,
    /// Standard Webhooks fields, for a source with a signing secret.
    webhook_id: Option<String>,
    webhook_timestamp: Option<String>,
    webhook_signature: Option<String>,
}

/// An entry checked and ready for the writer, or its refusal.
type Checked = Result<Envelope, Outcome>;

pub async fn ingest_batch(
    State(app): State<Arc<AppState>>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
    req: Request,
) -> Response {
    let started = Instant::now();
    let _in_progress = InProgress::enter(&app.metrics);
    let source_id = path.map(|Path(s)| s).unwrap_or_default();
    match handle(&app, &source_id, req).await {
        Err(o) => {
            app.metrics.count(o);
            tracing::warn!(outcome = o.code(), source = %source_id, "batch refused");
            ingest::answer(o, None)
        }
        Ok(results) => {
            let mut out = Vec::with_capacity(results.len());
            let (mut accepted, mut duplicates, mut refused) = (0u64, 0u64, 0u64);
            for r in &results {
                let o = match r {
                    Ok(WriteOutcome::Accepted(id)) => {
                        accepted += 1;
                        out.push(json!({"status": "accepted", "id": id.public(app.store.node())}));
                        Outcome::Accepted
                    }
                    Ok(WriteOutcome::Duplicate(id)) => {
                        duplicates += 1;
                        out.push(json!({"status": "duplicate", "id": id.public(app.store.node())}));
                        Outcome::Duplicate
                    }
                    Ok(WriteOutcome::Refused(o)) | Err(o) => {
                        refused += 1;
                        out.push(json!({
                            "status": "refused",
                            "error": o.code(),
                            "http_status": o.status().as_u16(),
                            "message": o.message(),
                        }));
                        *o
                    }
                };
                app.metrics.count(o);
            }
            if accepted + duplicates > 0 {
                app.metrics.ack_latency.observe(started.elapsed());
            }
            tracing::info!(
                source = %source_id, entries = results.len(), accepted, duplicates, refused,
                ms = started.elapsed().as_secs_f64() * 1000.0, "batch ingest"
            );
            (
                StatusCode::OK,
                Json(json!({
                    "accepted": accepted,
                    "duplicates": duplicates,
                    "refused": refused,
                    "results": out,
                })),
            )
                .into_response()
        }
    }
}

async fn handle(
    app: &AppState,
    source_id: &str,
    req: Request,
) -> Result<Vec<Result<WriteOutcome, Outcome>>, Outcome> {
    let framings = req.extensions().get::<super::listener::HeadWatch>();
    if framings.is_some_and(|w| w.both_framings()) {
        return Err(Outcome::HeaderAmbiguous);
    }
    let source = ingest::admit_source(app, source_id, req.headers())?;
    // The request's tenant header is the default of its entries.
    let default_tenant = match &source.tenant {
        TenantRule::Fixed(t) => Some(t.clone()),
        TenantRule::Header(name) => match req.headers().get(name) {
            None => None,
            Some(v) => Some(
                std::str::from_utf8(v.as_bytes())
                    .map_err(|_| Outcome::TenantInvalid)?
                    .to_owned(),
            ),
        },
    };
    let request_type = request_event_type(&source, req.headers());
    let Ok(_permit) = app.permits.clone().try_acquire_owned() else {
        return Err(Outcome::Overloaded);
    };
    let body = ingest::read_body(req, MAX_BATCH_BYTES, app.body_timeout)
        .await
        .map_err(|o| match o {
            Outcome::BodyTooLarge => Outcome::BatchTooLarge,
            o => o,
        })?;
    let lines: Vec<&[u8]> = body
        .split(|&b| b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .collect();
    if lines.len() > MAX_BATCH_ENTRIES {
        return Err(Outcome::BatchTooLarge);
    }
    let now = app.clock.now_ms();
    // Each entry's refusal, or `None` for one that goes to the writer; the
    // accepted envelopes move to the writer (bodies are not copied).
    let mut refusals = Vec::with_capacity(lines.len());
    let mut good = Vec::with_capacity(lines.len());
    for l in &lines {
        match check(&source, default_tenant.as_deref(), &request_type, l, now) {
            Ok(env) => {
                let sinks = source.route(env.event_type.as_deref());
                good.push((env, sinks));
                refusals.push(None);
            }
            Err(o) => refusals.push(Some(o)),
        }
    }
    let mut written = if good.is_empty() {
        Vec::new().into_iter()
    } else {
        let admitted = Some(source.generation.clone());
        let rx = app.writer.submit_all(good, admitted).map_err(|e| match e {
            SubmitError::Full => Outcome::QueueFull,
            SubmitError::Closed => Outcome::ShuttingDown,
        })?;
        // Dropped unanswered: nothing of it was committed.
        rx.await.map_err(|_| Outcome::StoreUnavailable)?.into_iter()
    };
    Ok(refusals
        .into_iter()
        .map(|r| match r {
            None => Ok(written
                .next()
                .unwrap_or(WriteOutcome::Refused(Outcome::StoreUnavailable))),
            Some(o) => Err(o),
        })
        .collect())
}

/// One entry's checks, as a single hook's: the same codes.
/// The batch request's own event type header, the default of its entries
/// (as its tenant header is): `Ok(None)` when the source reads types from
/// the body, or the request has none.
fn request_event_type(
    source: &Source,
    head: &axum::http::HeaderMap,
) -> Result<Option<String>, Outcome> {
    match &source.event_type {
        Some(EventTypeFrom::Header(_)) => source
            .event_type(head, &[])
            .map_err(|_| Outcome::EventTypeInvalid),
        _ => Ok(None),
    }
}

/// An entry's event type: from its own headers (or the request's) or from
/// its body, as its source says.
fn entry_event_type(
    source: &Source,
    request_type: &Result<Option<String>, Outcome>,
    headers: &BTreeMap<String, String>,
    body: &[u8],
) -> Result<Option<String>, Outcome> {
    match &source.event_type {
        None => Ok(None),
        Some(EventTypeFrom::Json(_)) => source
            .event_type(&axum::http::HeaderMap::new(), body)
            .map_err(|_| Outcome::EventTypeInvalid),
        Some(EventTypeFrom::Header(name)) => {
            let mut own = axum::http::HeaderMap::new();
            for (n, v) in headers {
                if n.eq_ignore_ascii_case(name.as_str()) {
                    let v = axum::http::HeaderValue::from_str(v)
                        .map_err(|_| Outcome::EventTypeInvalid)?;
                    own.append(name.clone(), v);
                }
            }
            if own.is_empty() {
                return request_type.clone();
            }
            source
                .event_type(&own, body)
                .map_err(|_| Outcome::EventTypeInvalid)
        }
    }
}

fn check(
    source: &Source,
    default_tenant: Option<&str>,
    request_type: &Result<Option<String>, Outcome>,
    line: &[u8],
    now: u64,
) -> Checked {
    let e: Entry = serde_json::from_slice::<Value>(line)
        .ok()
        .filter(Value::is_object)
        .and_then(|v| serde_json::from_value(v).ok())
        .ok_or(Outcome::EntryInvalid)?;
    let tenant = match (&source.tenant, e.tenant) {
        (TenantRule::Fixed(t), Some(named)) if &named != t => return Err(Outcome::TenantInvalid),
        (TenantRule::Fixed(t), _) => t.clone(),
        (TenantRule::Header(_), Some(t)) => t,
        (TenantRule::Header(_), None) => default_tenant
            .map(str::to_owned)
            .ok_or(Outcome::TenantMissing)?,
    };
    ankusa_store::tenants::validate_id(&tenant).map_err(|_| Outcome::TenantInvalid)?;
    let idempotency_key = match &e.idempotency_key {
        Some(k) => Some(ingest::idempotency_key(k.as_bytes())?),
        None => None,
    };
    let body = match (e.body, e.body_base64) {
        (Some(t), None) => t.into_bytes(),
        (None, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b.as_bytes())
            .map_err(|_| Outcome::EntryInvalid)?,
        _ => return Err(Outcome::EntryInvalid),
    };
    if body.len() > source.max_body {
        return Err(Outcome::BodyTooLarge);
    }
    let event_type = entry_event_type(source, request_type, &e.headers, &body)?;
    let mut headers = Vec::new();
    for kept in &source.keep_headers {
        let found = e
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(kept.as_str()))
            .map(|(_, v)| v)
            .collect::<Vec<_>>();
        match found.as_slice() {
            [] => {}
            [v] if v.len() <= ingest::MAX_KEPT_HEADER => {
                headers.push((kept.as_str().to_owned(), v.as_bytes().to_vec()))
            }
            [_] => return Err(Outcome::HeaderInvalid),
            _ => return Err(Outcome::HeaderAmbiguous),
        }
    }
    // The Standard Webhooks id travels as a field here; it is kept as the
    // `webhook-id` header a single request would have carried.
    if let Some(id) = &e.webhook_id {
        let kept = source
            .keep_headers
            .iter()
            .any(|h| h.as_str() == "webhook-id");
        if kept && !headers.iter().any(|(n, _)| n == "webhook-id") {
            headers.push(("webhook-id".to_owned(), id.as_bytes().to_vec()));
        }
    }
    if !source.signing_keys.is_empty() {
        let (Some(id), Some(ts), Some(sig)) =
            (&e.webhook_id, &e.webhook_timestamp, &e.webhook_signature)
        else {
            return Err(Outcome::SignatureMissing);
        };
        let signed = Signed {
            id,
            timestamp: ts,
            signature: sig,
        };
        let tolerance = source.signature_tolerance.as_secs();
        let keys = super::config::live(&source.signing_keys, now).map(Vec::as_slice);
        signature::verify_any(keys, signed, &body, now, tolerance).map_err(|e| match e {
            SignatureError::Stale => Outcome::SignatureStale,
            SignatureError::Invalid => Outcome::SignatureInvalid,
        })?;
    }
    Ok(Envelope {
        received_at: now,
        source_id: source.id.clone(),
        tenant,
        idempotency_key,
        event_type,
        headers,
        body,
    })
}
