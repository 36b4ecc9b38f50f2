//! The HTTP surface (DESIGN §8): routes, per-route limits and timeouts, request ids.
//!
//! **API boundary:** the routes below and their problem+json codes.
//! Blob routes stream and carry no global timeout or body limit (they enforce their own,
//! on the stream); every JSON route reads a bounded body under a request timeout.
//!
//! This file only assembles: it declares the handler files and builds the router from their
//! route tables; outside its tests, no file under `http` imports it. What the handlers share
//! is in modules they import, which import no handler: `state` (`AppState`), `answer` (a JSON
//! answer), `error`, `auth` (`Caller`), `params` and `body`.

mod access;
mod admin;
mod agents;
mod answer;
mod artifacts;
mod auth;
mod authority;
mod blobs;
mod body;
mod conditional;
mod context;
mod directory;
pub mod error;
mod events;
mod evidence;
mod exports;
mod idempotency;
mod lifecycle;
mod lineage;
mod meta;
mod openapi;
#[cfg(test)]
mod openapi_check;
#[cfg(test)]
mod openapi_standard;
mod params;
mod sealed;
mod sessions;
mod state;
mod streams;
mod timeout;
mod tlog;
mod tokens;
mod ui;
mod uploads;
mod with_content;
mod work;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::handler::Handler;
use axum::http::{HeaderName, Method};
use axum::routing::{MethodFilter, MethodRouter, on};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use weft_api::ErrorCode;

pub use auth::Caller;
use error::HttpError;
pub use state::{AppState, Limits};

async fn method_not_allowed() -> HttpError {
    HttpError::new(
        ErrorCode::MethodNotAllowed,
        "this method is not allowed on this route",
    )
}

async fn not_found() -> HttpError {
    HttpError::new(ErrorCode::NotFound, "no such route")
}

/// One route: the method and path template the OpenAPI document names, and the handler.
/// `app` builds the router from these tables and `openapi_check` compares them with the
/// document, so the two cannot list different routes.
pub(crate) struct Route {
    /// Read only by the OpenAPI check; the router has it inside `handler`.
    #[cfg_attr(not(test), expect(dead_code))]
    pub(crate) method: Method,
    pub(crate) path: &'static str,
    handler: MethodRouter<AppState>,
}

fn route<H, T>(method: Method, path: &'static str, handler: H) -> Route
where
    H: Handler<T, AppState>,
    T: 'static,
{
    // Only the standard methods below are ever passed, and MethodFilter knows all of them.
    let filter = MethodFilter::try_from(method.clone()).expect("a standard method");
    Route {
        method,
        path,
        handler: on(filter, handler),
    }
}

/// JSON routes: a bounded body, the request timeout, and idempotency keys.
fn json_routes() -> Vec<Route> {
    vec![
        route(Method::POST, "/v1/sessions", sessions::open),
        route(Method::GET, "/v1/session", sessions::current),
        route(Method::POST, "/v1/session/renew", sessions::renew),
        route(
            Method::PUT,
            "/v1/admin/groups/{group_id}",
            admin::create_group,
        ),
        route(
            Method::PUT,
            "/v1/admin/groups/{group_id}/policy",
            admin::set_policy,
        ),
        route(
            Method::PUT,
            "/v1/admin/groups/{group_id}/retention",
            lifecycle::set_retention,
        ),
        route(
            Method::GET,
            "/v1/admin/groups/{group_id}/retention",
            lifecycle::retention,
        ),
        route(
            Method::GET,
            "/v1/admin/groups/{group_id}/usage",
            lifecycle::usage,
        ),
        route(
            Method::PUT,
            "/v1/admin/groups/{group_id}/quota",
            lifecycle::set_quota,
        ),
        route(Method::POST, "/v1/admin/holds", lifecycle::place_hold),
        route(Method::GET, "/v1/admin/holds", lifecycle::holds),
        route(
            Method::DELETE,
            "/v1/admin/holds/{hold_id}",
            lifecycle::lift_hold,
        ),
        route(Method::POST, "/v1/admin/gc", lifecycle::gc),
        route(
            Method::POST,
            "/v1/groups/{group_id}/holds",
            lifecycle::place_group_hold,
        ),
        route(
            Method::GET,
            "/v1/groups/{group_id}/holds",
            lifecycle::group_holds,
        ),
        route(
            Method::DELETE,
            "/v1/groups/{group_id}/holds/{hold_id}",
            lifecycle::lift_group_hold,
        ),
        route(Method::POST, "/v1/admin/agents", admin::register_agent),
        route(Method::PUT, "/v1/agents/{agent_id}/card", agents::put_card),
        route(Method::GET, "/v1/agents/{agent_id}/card", agents::card),
        route(
            Method::PUT,
            "/v1/groups/{group_id}/presence",
            agents::report_presence,
        ),
        route(
            Method::GET,
            "/v1/groups/{group_id}/presence",
            agents::presence,
        ),
        route(
            Method::PUT,
            "/v1/admin/groups/{group_id}/members/{agent_id}",
            admin::set_membership,
        ),
        route(
            Method::DELETE,
            "/v1/admin/groups/{group_id}/members/{agent_id}",
            admin::remove_membership,
        ),
        route(
            Method::GET,
            "/v1/admin/groups/{group_id}/members",
            directory::members,
        ),
        route(Method::GET, "/v1/admin/agents/{agent_id}", directory::agent),
        route(Method::GET, "/v1/keys/{keyid}", directory::registered_key),
        route(
            Method::POST,
            "/v1/admin/agents/{agent_id}/deactivate",
            admin::deactivate_agent,
        ),
        route(
            Method::POST,
            "/v1/admin/agents/{agent_id}/keys",
            admin::rotate_key,
        ),
        route(
            Method::POST,
            "/v1/admin/schemas",
            authority::register_schema,
        ),
        route(Method::POST, "/v1/artifacts", artifacts::publish),
        route(Method::GET, "/v1/artifacts", artifacts::list),
        route(Method::GET, "/v1/artifacts/{digest}", artifacts::show),
        route(
            Method::POST,
            "/v1/artifacts/{digest}/reuse",
            artifacts::reuse,
        ),
        route(
            Method::GET,
            "/v1/artifacts/{digest}/provenance",
            lineage::provenance,
        ),
        route(Method::GET, "/v1/provenance/path", lineage::path),
        route(
            Method::GET,
            "/v1/workitems/{work_item_id}/provenance",
            lineage::work_item,
        ),
        route(
            Method::GET,
            "/v1/missions/{mission_id}/provenance",
            lineage::mission,
        ),
        route(Method::GET, "/v1/provenance/impact", lineage::impact),
        route(Method::GET, "/v1/groups/{group_id}/events", events::replay),
        route(
            Method::GET,
            "/v1/groups/{group_id}/agents/{agent_id}/events",
            events::actor_events,
        ),
        route(Method::POST, "/v1/groups/{group_id}/cursors", events::ack),
        route(
            Method::GET,
            "/v1/groups/{group_id}/cursors",
            events::cursors,
        ),
        route(
            Method::GET,
            "/v1/groups/{group_id}/checkpoint",
            events::checkpoint,
        ),
        route(
            Method::GET,
            "/v1/groups/{group_id}/snapshots",
            events::snapshots,
        ),
        route(
            Method::GET,
            "/v1/groups/{group_id}/tlog/checkpoint",
            tlog::checkpoint,
        ),
        route(
            Method::GET,
            "/v1/groups/{group_id}/tlog/tile/{*path}",
            tlog::tile,
        ),
        route(
            Method::GET,
            "/v1/groups/{group_id}/tlog/proof/inclusion",
            tlog::inclusion,
        ),
        route(
            Method::GET,
            "/v1/groups/{group_id}/tlog/proof/consistency",
            tlog::consistency,
        ),
        route(Method::POST, "/v1/evidence", evidence::record),
        route(Method::GET, "/v1/evidence", evidence::list),
        route(Method::GET, "/v1/evidence/{evidence_id}", evidence::show),
        route(
            Method::GET,
            "/v1/artifacts/{digest}/evidence",
            evidence::for_artifact,
        ),
        route(
            Method::GET,
            "/v1/workitems/{work_item_id}/criteria",
            evidence::criteria,
        ),
        route(
            Method::POST,
            "/v1/workitems/{work_item_id}/review",
            evidence::review,
        ),
        route(
            Method::POST,
            "/v1/groups/{group_id}/commands",
            work::command,
        ),
        route(
            Method::POST,
            "/v1/groups/{group_id}/commands/batch",
            work::command_batch,
        ),
        route(
            Method::GET,
            "/v1/groups/{group_id}/commands/{command_id}",
            work::read_command,
        ),
        route(Method::GET, "/v1/workitems/{work_item_id}", work::work_item),
        route(
            Method::GET,
            "/v1/workitems/{work_item_id}/scheduling",
            context::scheduling,
        ),
        route(
            Method::POST,
            "/v1/groups/{group_id}/context",
            context::publish,
        ),
        route(Method::GET, "/v1/context/{package_id}", context::latest),
        route(
            Method::GET,
            "/v1/context/{package_id}/versions",
            context::versions,
        ),
        route(
            Method::GET,
            "/v1/context/{package_id}/versions/{version}",
            context::version,
        ),
        route(
            Method::GET,
            "/v1/context/{package_id}/events",
            context::events,
        ),
        route(
            Method::GET,
            "/v1/context/{package_id}/provenance",
            context::provenance,
        ),
        route(
            Method::POST,
            "/v1/context/{package_id}/forward",
            context::forward,
        ),
        route(Method::GET, "/v1/missions/{mission_id}", work::mission),
        route(
            Method::GET,
            "/v1/missions/{mission_id}/workitems",
            work::mission_graph,
        ),
        route(Method::POST, "/v1/leases/{lease_id}/tokens", tokens::issue),
        route(
            Method::DELETE,
            "/v1/leases/{lease_id}/tokens/{token_id}",
            tokens::revoke,
        ),
    ]
}

/// Blob routes stream: no global timeout, no extractor body limit; they enforce their own.
fn blob_routes() -> Vec<Route> {
    vec![
        route(Method::POST, "/v1/blobs", blobs::upload_unnamed),
        route(Method::PUT, "/v1/blobs/{digest}", blobs::upload_named),
        route(Method::HEAD, "/v1/blobs/{digest}", blobs::head),
        route(
            Method::PUT,
            "/v1/artifacts/{digest}",
            with_content::publish_with_content,
        ),
        route(Method::POST, "/v1/uploads", uploads::start),
        route(Method::HEAD, "/v1/uploads/{upload_id}", uploads::offset),
        route(Method::PATCH, "/v1/uploads/{upload_id}", uploads::append),
        route(Method::PUT, "/v1/uploads/{upload_id}", uploads::finish),
        route(Method::DELETE, "/v1/uploads/{upload_id}", uploads::cancel),
        route(
            Method::GET,
            "/v1/artifacts/{digest}/content",
            artifacts::content,
        ),
        route(
            Method::GET,
            "/v1/groups/{group_id}/events/stream",
            events::stream,
        ),
        route(
            Method::GET,
            "/v1/groups/{group_id}/snapshots/blobs/{digest}",
            events::snapshot_blob,
        ),
    ]
}

/// Bodiless routes outside both stacks: liveness, metrics, the API description, public keys
/// and the server-rendered pages.
fn plain_routes() -> Vec<Route> {
    vec![
        route(Method::GET, "/healthz", meta::healthz),
        route(Method::GET, "/metrics", meta::metrics),
        route(Method::GET, "/v1/openapi.json", meta::openapi),
        route(Method::GET, "/v1/authority/keys", authority::authority_keys),
        route(Method::GET, "/ui", ui::home),
        route(Method::GET, "/ui/", ui::home),
        route(Method::GET, "/ui/style.css", ui::style),
        route(Method::GET, "/ui/login", ui::login),
        route(Method::POST, "/ui/login", ui::login_form),
        route(Method::POST, "/ui/logout", ui::logout),
        route(Method::GET, "/ui/search", ui::search),
        route(Method::GET, "/ui/artifacts/{digest}", ui::artifact),
        route(
            Method::GET,
            "/ui/artifacts/{digest}/content",
            ui::artifact_content,
        ),
        route(
            Method::POST,
            "/ui/artifacts/{digest}/verify",
            ui::verify_now,
        ),
        route(Method::GET, "/ui/workitems/{work_item_id}", ui::work_item),
        route(Method::GET, "/ui/evidence/{evidence_id}", ui::evidence),
        route(Method::GET, "/ui/missions/{mission_id}", ui::mission),
        route(Method::GET, "/ui/groups/{group_id}/events", ui::events),
        route(Method::GET, "/ui/{*rest}", ui::not_found),
    ]
}

/// Every route of the three tables (the swagger-ui pages of `meta::docs` aside).
#[cfg(test)]
pub(crate) fn routes() -> Vec<Route> {
    let mut all = json_routes();
    all.extend(blob_routes());
    all.extend(plain_routes());
    all
}

/// A router serving `routes`; two methods on one path merge into one method router.
fn router_of(routes: Vec<Route>) -> Router<AppState> {
    routes.into_iter().fold(Router::new(), |router, route| {
        router.route(route.path, route.handler)
    })
}

/// Everything `weft serve` answers.
pub fn app(state: AppState) -> Router {
    let request_id = HeaderName::from_static("x-request-id");
    let json_routes = router_of(json_routes())
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            idempotency::layer,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            timeout::layer,
        ));
    let blob_routes = router_of(blob_routes()).layer(DefaultBodyLimit::disable());
    Router::new()
        .merge(json_routes)
        .merge(blob_routes)
        .merge(router_of(plain_routes()))
        .merge(meta::docs())
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        .layer(axum::middleware::from_fn(access::layer))
        .with_state(state)
        .layer(PropagateRequestIdLayer::new(request_id.clone()))
        // Failures are logged once by `HttpError::log` (with their source chain, and a full
        // disk throttled); the trace layer's own line for a 5xx would double each at ERROR.
        .layer(
            TraceLayer::new_for_http()
                .on_failure(tower_http::trace::DefaultOnFailure::new().level(tracing::Level::DEBUG))
                .make_span_with(|request: &axum::http::Request<axum::body::Body>| {
                    let id = request
                        .headers()
                        .get("x-request-id")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("-");
                    // No raw path: its ids would make the log a record of what was read.
                    tracing::info_span!("request", request_id = %id)
                }),
        )
        .layer(SetRequestIdLayer::new(request_id, MakeRequestUuid))
}

#[cfg(test)]
mod tests;
