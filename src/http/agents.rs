//! Agent Cards and Presence (issue #47, SCH-11): the routes; the rules are the store's
//! (`weft_storage` `directory/cards.rs`).

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse as _, Response};
use weft_api::ErrorCode;
use weft_api::worker::card::PresenceReport;

use super::answer::json;
use super::auth::Caller;
use super::body::{created_or_ok, parse_body, read_envelope, read_json};
use super::error::{HttpError, HttpResult};
use super::params::{RawPath, path_id};
use super::state::AppState;

fn roles(caller: &Caller) -> Vec<weft_api::session::Role> {
    match caller {
        Caller::Admin => Vec::new(),
        Caller::Agent(session) => session.roles.clone(),
    }
}

/// Registers or updates the Agent's signed card (DSSE, `application/vnd.mwp.agent-card.v1+json`):
/// by the Agent's own session or the operator. Its `version` is what manifests, Evidence and
/// Context Packages must claim from then on.
#[utoipa::path(put, path = "/v1/agents/{agent_id}/card", params(("agent_id" = String, Path)),
    request_body(content = String, description = "DSSE envelope of {agentId, version, capabilities: [{id, version}], maxConcurrency, publicKey, issuedAt}", content_type = "application/json"),
    responses((status = 201, description = "{agentId, version, registeredAt, envelope}: registered"),
              (status = 200, description = "the same card again"),
              (status = 400, description = "bad_request: the card's shape or issuedAt ahead of the clock"),
              (status = 401, description = "bad_signature"), (status = 403, description = "forbidden, producer_mismatch"),
              (status = 409, description = "conflict: a card issued no earlier is registered"),
              (status = 429, description = "rate_limited: a new card within 2 s of the last")))]
pub(crate) async fn put_card(
    State(state): State<AppState>,
    caller: Caller,
    agent_id: RawPath,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let agent_id = path_id("agentId", agent_id)?;
    if let Caller::Agent(session) = &caller
        && session.agent_id != agent_id
    {
        return Err(HttpError::new(
            ErrorCode::Forbidden,
            "an Agent registers its own card",
        ));
    }
    let envelope = read_envelope(&headers, body).await?;
    let (view, created) = state
        .store
        .directory()
        .register_card(agent_id, envelope)
        .await?;
    Ok(json(created_or_ok(created), &view))
}

/// The Agent's card: for the Agent itself, the operator, or a coordinator of a Group the Agent
/// is a member of (anyone else: `not_found`).
#[utoipa::path(get, path = "/v1/agents/{agent_id}/card", params(("agent_id" = String, Path)),
    responses((status = 200, description = "{agentId, version, registeredAt, envelope}"),
              (status = 404, description = "not_found")))]
pub(crate) async fn card(
    State(state): State<AppState>,
    caller: Caller,
    agent_id: RawPath,
) -> HttpResult<Response> {
    let agent_id = path_id("agentId", agent_id)?;
    let view = state
        .store
        .directory()
        .card(agent_id, caller.reader(), roles(&caller))
        .await?;
    Ok(json(StatusCode::OK, &view))
}

/// Reports the caller's Presence in its session's Group: a non-authoritative hint, at most
/// once per 2 s (`rate_limited`).
#[utoipa::path(put, path = "/v1/groups/{group_id}/presence", params(("group_id" = String, Path)),
    request_body(content = String, description = "{freeSlots, capacityState: available|busy|saturated|offline, schedules?: [{workItemId, startFrom, startTo, completionAt, confidence, computeSeconds}]}", content_type = "application/json"),
    responses((status = 204, description = "recorded"),
              (status = 400, description = "bad_request: freeSlots past the card's maxConcurrency"),
              (status = 403, description = "forbidden: not a session of this Group, or a schedule of a WorkItem the caller does not own here"),
              (status = 429, description = "rate_limited")))]
pub(crate) async fn report_presence(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let group_id = path_id("groupId", group_id)?;
    let Caller::Agent(session) = caller else {
        return Err(HttpError::new(
            ErrorCode::Forbidden,
            "Presence is an Agent's: report it with a session",
        ));
    };
    let bytes = read_json(&headers, body).await?;
    let report: PresenceReport = parse_body(&bytes, ErrorCode::BadRequest)?;
    state
        .store
        .directory()
        .report_presence(group_id, &session, report)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The Group's Presence reports with each reporter's card summary: coordinators and the operator.
#[utoipa::path(get, path = "/v1/groups/{group_id}/presence", params(("group_id" = String, Path)),
    responses((status = 200, description = "{agents: [{agentId, freeSlots, capacityState, reportedAt, card?: {version, capabilities, maxConcurrency}}]}"),
              (status = 403, description = "forbidden: not a coordinator of this Group")))]
pub(crate) async fn presence(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
) -> HttpResult<Response> {
    let group_id = path_id("groupId", group_id)?;
    let presence = state
        .store
        .directory()
        .presence(group_id, caller.reader(), roles(&caller))
        .await?;
    Ok(json(StatusCode::OK, &presence))
}
