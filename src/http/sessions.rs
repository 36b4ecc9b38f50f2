//! `POST /v1/sessions`: a signed session request becomes a bearer token (DESIGN §8.1);
//! `GET /v1/session`: the caller's own session, as its token resolves now;
//! `POST /v1/session/renew`: a fresh signed session request by the session's own Agent moves
//! its expiry, keeping its token, epochs and leases (issue #48).

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
              (status = 403, description = "forbidden: a retry, sent with a bearer token and an Idempotency-Key, of a request another token made (its answer is sealed to that token)"),
              (status = 429, description = "rate_limited: too many session requests by this agent (Retry-After)")))]
pub(crate) async fn open(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    // The grant holds the new session's token: stored only sealed (PD-20) when a caller
    // that sent its own bearer token asks with an Idempotency-Key, and with the session's
    // commit (several servers: a retry through another one replays it, where it ran again
    // and was refused `nonce_reused`).
    super::idempotency::answer_sealed_with(|grant: &weft_api::session::SessionGrant| {
        (StatusCode::CREATED, grant.clone())
    });
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
    Ok(json(StatusCode::OK, &view_of(&session)))
}

/// A session as its holder sees it.
fn view_of(session: &weft_storage::Session) -> SessionView {
    let missions = match &session.scope {
        MissionScope::Group => None,
        MissionScope::Missions(missions) => Some(missions.iter().cloned().collect()),
    };
    SessionView {
        agent_id: session.agent_id.to_string(),
        group_id: session.group_id.to_string(),
        roles: session.roles.clone(),
        missions,
        session_epoch: session.session_epoch,
        membership_epoch: session.membership_epoch,
        expires_at: session.expires_at.clone(),
    }
}

/// Renews the caller's session: the body is a fresh signed session request by the session's
/// own Agent for its own Group; the answer is the session with its new expiry. The token and
/// the epochs stay, so its leases go on.
#[utoipa::path(post, path = "/v1/session/renew", request_body(content = String, description = "DSSE envelope of a session request by the session's own Agent for its own Group", content_type = "application/json"),
    responses((status = 200, description = "{agentId, groupId, roles, missions?, sessionEpoch, membershipEpoch, expiresAt}"), (status = 400, description = "bad_signature, clock_skew, …"),
              (status = 401, description = "unauthorized, stale_session, stale_membership"), (status = 403, description = "forbidden: the admin token has no session; producer_mismatch: another Agent's or Group's request"),
              (status = 409, description = "nonce_reused"), (status = 429, description = "rate_limited (Retry-After)")))]
pub(crate) async fn renew(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let Caller::Agent(session) = caller else {
        return Err(HttpError::new(
            ErrorCode::Forbidden,
            "the admin token is not a session",
        ));
    };
    let envelope = read_envelope(&headers, body).await?;
    // The answer commits with the renewal (its write answers the new expiry): a retry through
    // another server replays it, where it ran again and was refused `nonce_reused`.
    let held = view_of(&session);
    let render = move |expires_at: &chrono::DateTime<chrono::Utc>| {
        let mut view = held.clone();
        view.expires_at = expires_at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
        (StatusCode::OK, view)
    };
    super::idempotency::answer_with(render.clone());
    let expires_at = state
        .store
        .sessions()
        .renew_session(&session, envelope)
        .await?;
    let (status, view) = render(&expires_at);
    Ok(json(status, &view))
}
