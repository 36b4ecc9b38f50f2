//! Liveness, metrics, and the API description.

use axum::Router;
use axum::extract::{MatchedPath, Request};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;
use utoipa_swagger_ui::SwaggerUi;

use super::{AppState, Caller, json};

/// `GET /healthz`: the process answers. The only route without authentication.
#[utoipa::path(get, path = "/healthz", responses((status = 200, description = "alive")))]
pub(crate) async fn healthz() -> &'static str {
    "ok\n"
}

/// Counts every request and times it to the response head, labelled by the matched route
/// template (`/v1/artifacts/{digest}`; `unmatched` for no route), never the raw path, whose
/// ids would make one series per artifact.
pub(crate) async fn record_request(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = request.method().as_str().to_owned();
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    let labels = [
        ("route", route),
        ("method", method),
        ("status", response.status().as_u16().to_string()),
    ];
    metrics::counter!(crate::telemetry::HTTP_REQUESTS, &labels).increment(1);
    metrics::histogram!(crate::telemetry::HTTP_DURATION, &labels)
        .record(started.elapsed().as_secs_f64());
    response
}

/// `GET /metrics`: Prometheus text with `# HELP` and `# TYPE` for every metric: bytes in and
/// out, uploads, verification and integrity failures, and requests and their latency per
/// route template, method and status.
#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "Prometheus text format")))]
pub(crate) async fn metrics(_caller: Caller) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        crate::telemetry::metrics().render(),
    )
        .into_response()
}

#[derive(OpenApi)]
#[openapi(
    info(title = "weft", description = "Content-addressed artifact store and per-Group event log of an MWP Group Authority."),
    paths(
        healthz,
        metrics,
        openapi,
        super::sessions::open,
        super::sessions::current,
        super::admin::create_group,
        super::admin::register_agent,
        super::admin::set_membership,
        super::admin::remove_membership,
        super::admin::deactivate_agent,
        super::admin::rotate_key,
        super::blobs::upload_named,
        super::blobs::upload_unnamed,
        super::blobs::head,
        super::uploads::start,
        super::uploads::offset,
        super::uploads::append,
        super::uploads::finish,
        super::uploads::cancel,
        super::artifacts::publish,
        super::artifacts::list,
        super::artifacts::show,
        super::artifacts::reuse,
        super::artifacts::content,
        super::events::replay,
        super::lineage::provenance,
        super::lineage::path,
        super::lineage::impact,
        super::lineage::work_item,
        super::lineage::mission,
        super::events::stream,
        super::events::ack,
        super::events::cursors,
        super::events::checkpoint,
        super::events::snapshots,
        super::events::snapshot_blob,
        super::work::command,
        super::work::command_batch,
        super::work::work_item,
        super::work::mission,
        super::work::mission_graph,
        super::context::publish,
        super::context::latest,
        super::context::versions,
        super::context::version,
        super::context::events,
        super::context::provenance,
        super::context::forward,
        super::context::scheduling,
        super::tokens::issue,
        super::tokens::revoke,
        super::evidence::record,
        super::evidence::list,
        super::evidence::show,
        super::evidence::for_artifact,
        super::evidence::criteria,
        super::evidence::review,
        super::authority::authority_keys,
        super::authority::register_schema,
    ),
    modifiers(&BearerAuth)
)]
pub(crate) struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// `GET /v1/openapi.json`: this description.
#[utoipa::path(get, path = "/v1/openapi.json", responses((status = 200, description = "OpenAPI 3.1 document")))]
pub(crate) async fn openapi() -> Response {
    json(StatusCode::OK, &ApiDoc::openapi())
}

/// `GET /docs`: swagger-ui, served from the binary (vendored; no external assets).
pub(crate) fn docs() -> Router<AppState> {
    SwaggerUi::new("/docs")
        .url("/v1/openapi-docs.json", ApiDoc::openapi())
        .into()
}
