//! The HTTP surface (DESIGN §8): routes, per-route limits and timeouts, request ids.
//!
//! **API boundary:** the routes below and their problem+json codes.
//! Blob routes stream and carry no global timeout or body limit (they enforce their own,
//! on the stream); every JSON route reads a bounded body under a request timeout.

mod admin;
mod artifacts;
mod auth;
mod authority;
mod blobs;
mod body;
pub mod error;
mod events;
mod evidence;
mod exports;
mod idempotency;
mod lineage;
mod meta;
mod params;
mod sessions;
mod ui;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post, put};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;
use weft_api::ErrorCode;
use weft_storage::Store;

pub use auth::Caller;
use error::HttpError;

/// Shared state of every handler. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState {
    pub store: Store,
    /// blake3 of the admin token; the token itself is only on disk (mode 0600).
    pub admin_token_hash: blake3::Hash,
    pub limits: Arc<Limits>,
    /// Idempotent requests in flight, by (caller, key).
    pub in_flight: Arc<idempotency::InFlight>,
}

/// Transport limits the handlers apply themselves.
#[derive(Clone, Debug)]
pub struct Limits {
    pub body_idle_timeout: Duration,
    pub request_timeout: Duration,
    pub max_upload_bytes: u64,
}

impl AppState {
    pub fn new(store: Store, admin_token: &str, config: &crate::config::Config) -> Self {
        // Install the recorder before the first request counts anything.
        crate::telemetry::metrics();
        Self {
            store,
            admin_token_hash: blake3::hash(admin_token.as_bytes()),
            limits: Arc::new(Limits {
                body_idle_timeout: config.body_idle_timeout(),
                request_timeout: config.request_timeout(),
                max_upload_bytes: config.max_upload_bytes,
            }),
            in_flight: Arc::default(),
        }
    }
}

async fn method_not_allowed() -> HttpError {
    HttpError::new(
        ErrorCode::MethodNotAllowed,
        "this method is not allowed on this route",
    )
}

async fn not_found() -> HttpError {
    HttpError::new(ErrorCode::NotFound, "no such route")
}

/// Everything `weft serve` answers.
pub fn app(state: AppState) -> Router {
    let request_id = HeaderName::from_static("x-request-id");
    let json_routes = Router::new()
        .route("/v1/sessions", post(sessions::open))
        .route("/v1/admin/groups/{group_id}", put(admin::create_group))
        .route("/v1/admin/agents", post(admin::register_agent))
        .route(
            "/v1/admin/groups/{group_id}/members/{agent_id}",
            put(admin::set_membership),
        )
        .route(
            "/v1/artifacts",
            post(artifacts::publish).get(artifacts::list),
        )
        .route("/v1/artifacts/{digest}", get(artifacts::show))
        .route(
            "/v1/artifacts/{digest}/provenance",
            get(lineage::provenance),
        )
        .route("/v1/provenance/path", get(lineage::path))
        .route(
            "/v1/workitems/{work_item_id}/provenance",
            get(lineage::work_item),
        )
        .route(
            "/v1/missions/{mission_id}/provenance",
            get(lineage::mission),
        )
        .route("/v1/provenance/impact", get(lineage::impact))
        .route("/v1/groups/{group_id}/events", get(events::replay))
        .route(
            "/v1/groups/{group_id}/cursors",
            post(events::ack).get(events::cursors),
        )
        .route("/v1/groups/{group_id}/checkpoint", get(events::checkpoint))
        .route("/v1/groups/{group_id}/snapshots", get(events::snapshots))
        .route("/v1/evidence", post(evidence::record).get(evidence::list))
        .route("/v1/evidence/{evidence_id}", get(evidence::show))
        .route(
            "/v1/artifacts/{digest}/evidence",
            get(evidence::for_artifact),
        )
        .route(
            "/v1/workitems/{work_item_id}/criteria",
            get(evidence::criteria),
        )
        .route(
            "/v1/workitems/{work_item_id}/review",
            post(evidence::review),
        )
        .route("/v1/admin/schemas", post(authority::register_schema))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            idempotency::layer,
        ))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            state.limits.request_timeout,
        ));
    // Blob routes stream: no global timeout, no extractor body limit; they enforce their own.
    let blob_routes = Router::new()
        .route("/v1/blobs", post(blobs::upload_unnamed))
        .route(
            "/v1/blobs/{digest}",
            put(blobs::upload_named).head(blobs::head),
        )
        .route("/v1/artifacts/{digest}/content", get(artifacts::content))
        .route("/v1/groups/{group_id}/events/stream", get(events::stream))
        .route(
            "/v1/groups/{group_id}/snapshots/blobs/{digest}",
            get(events::snapshot_blob),
        )
        .layer(DefaultBodyLimit::disable());
    Router::new()
        .merge(json_routes)
        .merge(blob_routes)
        .route("/healthz", get(meta::healthz))
        .route("/metrics", get(meta::metrics))
        .route("/v1/openapi.json", get(meta::openapi))
        .route("/v1/authority/keys", get(authority::authority_keys))
        .route("/ui/login", get(ui::login))
        .route("/ui/artifacts/{digest}", get(ui::artifact))
        .merge(meta::docs())
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        .with_state(state)
        .layer(PropagateRequestIdLayer::new(request_id.clone()))
        .layer(TraceLayer::new_for_http().make_span_with(
            |request: &axum::http::Request<axum::body::Body>| {
                let id = request
                    .headers()
                    .get("x-request-id")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-");
                tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id = %id)
            },
        ))
        .layer(SetRequestIdLayer::new(request_id, MakeRequestUuid))
}

/// A 2xx JSON answer.
pub(crate) fn json<T: serde::Serialize>(status: StatusCode, value: &T) -> axum::response::Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => (
            status,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            bytes,
        )
            .into_response(),
        Err(error) => HttpError::new(
            ErrorCode::Internal,
            format!("could not encode the answer: {error}"),
        )
        .into_response(),
    }
}

#[cfg(test)]
mod tests;
