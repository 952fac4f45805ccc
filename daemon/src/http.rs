//! The ingest listener's routes: single hooks ([`super::ingest`]), batches
//! ([`super::batch`]), health and metrics. Written here, above both request
//! paths, so neither has to know the other.

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;

use super::batch;
use super::ingest::{self, AppState};

/// The ingest router. `largest_body` (`http.max_body`) is the hard cap on
/// any body; each source's own limit is checked by the handler.
pub fn router(state: Arc<AppState>, largest_body: usize, metrics: bool) -> Router {
    let mut r = Router::new()
        .route("/v1/sources/{source}/hooks", post(ingest::ingest))
        .route(
            "/v1/sources/{source}/hooks:batch",
            post(batch::ingest_batch).layer(DefaultBodyLimit::max(batch::MAX_BATCH_BYTES)),
        )
        .route("/healthz", get(ingest::healthz))
        // The daemon serves this router only where it writes: a single
        // node, or a cluster's leader (a follower answers 503: `cluster`).
        .route("/healthz/leader", get(|| async { "leader\n" }))
        .route("/livez", get(ingest::livez));
    if metrics {
        r = r.route("/metrics", get(ingest::render_metrics));
    }
    r.fallback(ingest::not_found)
        .method_not_allowed_fallback(ingest::method_not_allowed)
        .layer(DefaultBodyLimit::max(largest_body))
        .layer(ingest::RequestIdLayer)
        .with_state(state)
}
