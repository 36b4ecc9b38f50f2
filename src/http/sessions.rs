//! `POST /v1/sessions`: a signed session request becomes a bearer token (DESIGN §8.1);
//! `GET /v1/session`: the caller's own session, as its token resolves now.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::body::read_envelope;
use weft_api::ErrorCode;
use weft_api::session::SessionView;
use weft_storage::MissionScope;

use super::answer::json;
use super::auth::Caller;
use super::error::{HttpError, HttpResult};
use super::state::AppState;

/// Opens a session for the signing Agent in the requested Group.
#[utoipa::path(post, path = "/v1/sessions", request_body(content = String, description = "DSSE envelope of a session request", content_type = "application/json"),
    responses((status = 201, description = "{token, sessionEpoch, membershipEpoch, expiresAt}"), (status = 400, description = "bad_signature, clock_skew, …"),
              (status = 429, description = "rate_limited: too many session requests by this agent (Retry-After)")))]
pub(crate) async fn open(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let envelope = read_envelope(&headers, body).await?;
    let grant = state.store.sessions().open_session(envelope).await?;
    Ok(json(StatusCode::CREATED, &grant))
}

/// The caller's session: Agent, Group, roles, Mission scope, epochs and expiry. The admin
/// token is no session.
#[utoipa::path(get, path = "/v1/session", responses((status = 200, description = "{agentId, groupId, roles, missions?, sessionEpoch, membershipEpoch, expiresAt}"),
    (status = 401, description = "unauthorized, stale_session, stale_membership"), (status = 403, description = "forbidden: the admin token has no session")))]
pub(crate) async fn current(caller: Caller) -> HttpResult<Response> {
    let Caller::Agent(session) = caller else {
        return Err(HttpError::new(
            ErrorCode::Forbidden,
            "the admin token is not a session",
        ));
    };
    let missions = match &session.scope {
        MissionScope::Group => None,
        MissionScope::Missions(missions) => Some(missions.iter().cloned().collect()),
    };
    let view = SessionView {
        agent_id: session.agent_id.to_string(),
        group_id: session.group_id.to_string(),
        roles: session.roles.clone(),
        missions,
        session_epoch: session.session_epoch,
        membership_epoch: session.membership_epoch,
        expires_at: session.expires_at.clone(),
    };
    Ok(json(StatusCode::OK, &view))
}
