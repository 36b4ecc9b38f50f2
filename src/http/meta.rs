//! Liveness, metrics, and the API description: utoipa's paths of every handler (`ApiDoc`),
//! refined by `openapi` into the document `GET /v1/openapi.json` serves.

use std::sync::OnceLock;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use utoipa::OpenApi;
use utoipa_swagger_ui::SwaggerUi;
use weft_api::ErrorCode;

use super::answer::json;
use super::auth::Caller;
use super::error::{HttpError, HttpResult};
use super::state::AppState;

/// `GET /healthz`: the process answers (no authentication; see `openapi::PUBLIC`), and so
/// does its index: a server over PostgreSQL that has not heard from the database for a few
/// seconds answers 503 `storage_unavailable` (it acknowledges no write and serves nothing from
/// memory as current then; issue #43), so a load balancer takes it out.
#[utoipa::path(get, path = "/healthz", responses((status = 200, description = "alive"), (status = 503, description = "the index database does not answer")))]
pub(crate) async fn healthz(State(state): State<AppState>) -> Response {
    match state.store.index_cut_off_for() {
        None => "ok\n".into_response(),
        Some(silent) => HttpError::new(
            ErrorCode::StorageUnavailable,
            format!(
                "the index database (or this server's follower of its commits) has not answered for {} s",
                silent.as_secs()
            ),
        )
        .into_response(),
    }
}

/// `GET /metrics`: Prometheus text with `# HELP` and `# TYPE` for every metric: bytes in and
/// out, uploads, verification and integrity failures, and requests and their latency per
/// route template, method and status. The operator's only: the figures are process-wide,
/// across every Group (issue #40).
#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "Prometheus text format"), (status = 403, description = "forbidden: a session, not the admin token")))]
pub(crate) async fn metrics(caller: Caller) -> HttpResult<Response> {
    caller.require_admin()?;
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        crate::telemetry::metrics().render(),
    )
        .into_response())
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
        super::sessions::renew,
        super::admin::create_group,
        super::admin::set_policy,
        super::lifecycle::set_retention,
        super::lifecycle::retention,
        super::lifecycle::place_hold,
        super::lifecycle::lift_hold,
        super::lifecycle::place_group_hold,
        super::lifecycle::lift_group_hold,
        super::lifecycle::group_holds,
        super::lifecycle::holds,
        super::lifecycle::gc,
        super::lifecycle::usage,
        super::lifecycle::set_quota,
        super::admin::register_agent,
        super::agents::put_card,
        super::agents::card,
        super::agents::report_presence,
        super::agents::presence,
        super::admin::set_membership,
        super::admin::remove_membership,
        super::admin::deactivate_agent,
        super::admin::rotate_key,
        super::directory::members,
        super::directory::agent,
        super::blobs::upload_named,
        super::blobs::upload_unnamed,
        super::blobs::head,
        super::uploads::start,
        super::uploads::offset,
        super::uploads::append,
        super::uploads::finish,
        super::uploads::cancel,
        super::artifacts::publish,
        super::with_content::publish_with_content,
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
        super::events::actor_events,
        super::events::ack,
        super::events::cursors,
        super::events::checkpoint,
        super::events::snapshots,
        super::tlog::checkpoint,
        super::tlog::tile,
        super::tlog::inclusion,
        super::tlog::consistency,
        super::events::snapshot_blob,
        super::work::command,
        super::work::command_batch,
        super::work::work_item,
        super::work::read_command,
        super::directory::registered_key,
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
    json(StatusCode::OK, document())
}

/// The OpenAPI document, built once (it depends on nothing but the code).
pub(crate) fn document() -> &'static Value {
    static DOCUMENT: OnceLock<Value> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        let raw = serde_json::to_value(ApiDoc::openapi())
            .unwrap_or_else(|_| serde_json::json!({"paths": {}}));
        super::openapi::refined(raw)
    })
}

/// `GET /docs`: swagger-ui, served from the binary (vendored; no external assets), reading
/// the document `GET /v1/openapi.json` serves, so the two can never differ.
pub(crate) fn docs() -> Router<AppState> {
    SwaggerUi::new("/docs")
        .config(utoipa_swagger_ui::Config::from("/v1/openapi.json"))
        .into()
}
