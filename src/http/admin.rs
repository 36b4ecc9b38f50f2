//! Operator calls with the admin token: Groups, Agents, Memberships (DESIGN §8.1).

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::json;
use weft_api::json::parse_strict;

use super::body::parse_body;
use weft_api::session::{AgentRegistration, MembershipRequest};
use weft_api::{ErrorCode, Id};

use super::answer::json;
use super::auth::Caller;
use super::body::{created_or_ok, read_json};
use super::error::{HttpError, HttpResult};
use super::idempotency::answer_with;
use super::params::{RawPath, path_id};
use super::state::AppState;

/// Creates a Group (idempotent: 201 when new, 200 when it existed).
#[utoipa::path(put, path = "/v1/admin/groups/{group_id}", params(("group_id" = String, Path)),
    responses((status = 201, description = "created"), (status = 200, description = "already existed"), (status = 400, description = "invalid_id")))]
pub(crate) async fn create_group(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
) -> HttpResult<Response> {
    caller.require_admin()?;
    let group_id = path_id("groupId", group_id)?;
    let answer_id = group_id.clone();
    let render = move |created: &bool| (created_or_ok(*created), json!({"groupId": answer_id}));
    answer_with(render.clone());
    let created = state.store.directory().create_group(group_id).await?;
    let (status, body) = render(&created);
    Ok(json(status, &body))
}

/// `PUT /v1/admin/groups/{groupId}/policy` body.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct GroupPolicy {
    mission_priority_ceiling: weft_api::work::contract::Level,
}

/// Sets the Group's policy (SCH-6, SCH-7): the highest `priorityClass` a Coordinator's
/// `mission.create` may ask for (above it: `forbidden`); `normal` until set. Appends
/// `group.policy_set`.
#[utoipa::path(put, path = "/v1/admin/groups/{group_id}/policy", params(("group_id" = String, Path)),
    request_body(content = String, description = "{missionPriorityCeiling: low|normal|high|critical}", content_type = "application/json"),
    responses((status = 200, description = "{groupId, missionPriorityCeiling}"), (status = 400, description = "bad_request"), (status = 404, description = "unknown_group")))]
pub(crate) async fn set_policy(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    caller.require_admin()?;
    let group_id = path_id("groupId", group_id)?;
    let bytes = read_json(&headers, body).await?;
    let policy: GroupPolicy = parse_body(&bytes, ErrorCode::BadRequest)?;
    answer_with(|set: &weft_api::kinds::GroupPolicySet| (StatusCode::OK, set.clone()));
    let set = state
        .store
        .directory()
        .set_group_policy(group_id, policy.mission_priority_ceiling)
        .await?;
    Ok(json(StatusCode::OK, &set))
}

/// Registers an Agent's Ed25519 key and agent card version.
#[utoipa::path(post, path = "/v1/admin/agents", request_body(content = String, description = "{agentId, publicKey (base64), agentCardVersion}", content_type = "application/json"),
    responses((status = 201, description = "{agentId, keyid}"), (status = 200, description = "same key again"), (status = 409, description = "conflict: another key")))]
pub(crate) async fn register_agent(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    caller.require_admin()?;
    let bytes = read_json(&headers, body).await?;
    // Ids are checked as ids (invalid_id), everything else as JSON.
    let raw: serde_json::Value = parse_strict(&bytes, ErrorCode::InvalidJson)?;
    if let Some(agent_id) = raw.get("agentId").and_then(|v| v.as_str()) {
        Id::parse("agentId", agent_id)?;
    }
    let registration: AgentRegistration = parse_body(&bytes, ErrorCode::BadRequest)?;
    let key = weft_api::dsse::parse_public_key(&registration.public_key)?;
    let agent_id = registration.agent_id.clone();
    let render = move |(keyid, created): &(weft_api::KeyId, bool)| {
        let body = json!({"agentId": agent_id, "keyid": keyid});
        (created_or_ok(*created), body)
    };
    answer_with(render.clone());
    let registered = state
        .store
        .directory()
        .register_agent(registration.agent_id, key, registration.agent_card_version)
        .await?;
    let (status, body) = render(&registered);
    Ok(json(status, &body))
}

/// Sets a Membership's roles and increments its epoch.
#[utoipa::path(put, path = "/v1/admin/groups/{group_id}/members/{agent_id}", params(("group_id" = String, Path), ("agent_id" = String, Path)),
    request_body(content = String, description = "{roles: [worker|coordinator|reviewer|auditor|approver], missions?: [missionId] (CTX-5: only those Missions; not for coordinators or auditors)}", content_type = "application/json"),
    responses((status = 200, description = "{groupId, agentId, roles, epoch, missions?}"), (status = 400, description = "bad_request")))]
pub(crate) async fn set_membership(
    State(state): State<AppState>,
    caller: Caller,
    ids: Result<Path<(String, String)>, axum::extract::rejection::PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    caller.require_admin()?;
    let Path((group_id, agent_id)) =
        ids.map_err(|_| HttpError::new(ErrorCode::InvalidId, "ids must be valid UTF-8"))?;
    let group_id = Id::parse("groupId", &group_id)?;
    let agent_id = Id::parse("agentId", &agent_id)?;
    let bytes = read_json(&headers, body).await?;
    let request: MembershipRequest = parse_body(&bytes, ErrorCode::BadRequest)?;
    answer_with(|membership: &weft_api::session::Membership| (StatusCode::OK, membership.clone()));
    let membership = state
        .store
        .directory()
        .set_scoped_membership(group_id, agent_id, request.roles, request.missions)
        .await?;
    Ok(json(StatusCode::OK, &membership))
}

/// Ends a Membership: `membership.removed`; the Agent's sessions in the Group answer
/// `stale_membership` from now on and their streams close.
#[utoipa::path(delete, path = "/v1/admin/groups/{group_id}/members/{agent_id}", params(("group_id" = String, Path), ("agent_id" = String, Path)),
    responses((status = 200, description = "{groupId, agentId, epoch, removed: true}"), (status = 403, description = "not_a_member")))]
pub(crate) async fn remove_membership(
    State(state): State<AppState>,
    caller: Caller,
    ids: Result<Path<(String, String)>, axum::extract::rejection::PathRejection>,
) -> HttpResult<Response> {
    caller.require_admin()?;
    let Path((group_id, agent_id)) =
        ids.map_err(|_| HttpError::new(ErrorCode::InvalidId, "ids must be valid UTF-8"))?;
    let group_id = Id::parse("groupId", &group_id)?;
    let agent_id = Id::parse("agentId", &agent_id)?;
    let epoch = state
        .store
        .directory()
        .remove_membership(group_id.clone(), agent_id.clone())
        .await?;
    Ok(json(
        StatusCode::OK,
        &json!({"groupId": group_id, "agentId": agent_id, "epoch": epoch, "removed": true}),
    ))
}

/// Deactivates an Agent: `agent.deactivated` in each of its Groups; it opens no session and
/// signs nothing new; its sessions and streams end. Again: 200 with no Group told.
#[utoipa::path(post, path = "/v1/admin/agents/{agent_id}/deactivate", params(("agent_id" = String, Path)),
    responses((status = 200, description = "{agentId, deactivated: true, groups}"), (status = 404, description = "unknown_agent")))]
pub(crate) async fn deactivate_agent(
    State(state): State<AppState>,
    caller: Caller,
    agent_id: RawPath,
) -> HttpResult<Response> {
    caller.require_admin()?;
    let agent_id = path_id("agentId", agent_id)?;
    // The answer commits with the deactivation (its write answers the Groups told): a retry
    // through another server replays it, Groups and all.
    let answer_id = agent_id.clone();
    let render = move |groups: &Vec<weft_api::Id>| {
        (
            StatusCode::OK,
            json!({"agentId": answer_id, "deactivated": true, "groups": groups}),
        )
    };
    answer_with(render.clone());
    let groups = state
        .store
        .directory()
        .deactivate_agent(agent_id.clone())
        .await?;
    let (status, body) = render(&groups);
    Ok(json(status, &body))
}

/// `POST /v1/admin/agents/{agentId}/keys` body.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct KeyRotation {
    public_key: String,
}

/// Rotates an Agent's key: `agent.key_rotated` in each of its Groups; the old key verifies
/// what was recorded before and nothing newer (`key_retired`); its sessions end.
#[utoipa::path(post, path = "/v1/admin/agents/{agent_id}/keys", params(("agent_id" = String, Path)),
    request_body(content = String, description = "{publicKey (base64)}", content_type = "application/json"),
    responses((status = 200, description = "{agentId, keyid}"), (status = 409, description = "conflict: the key is or was registered")))]
pub(crate) async fn rotate_key(
    State(state): State<AppState>,
    caller: Caller,
    agent_id: RawPath,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    caller.require_admin()?;
    let agent_id = path_id("agentId", agent_id)?;
    let bytes = read_json(&headers, body).await?;
    let rotation: KeyRotation = parse_body(&bytes, ErrorCode::BadRequest)?;
    let key = weft_api::dsse::parse_public_key(&rotation.public_key)?;
    // The answer commits with the rotation (its one write answers `()`): a retry with the
    // same Idempotency-Key through another server replays it, where it ran again and was
    // refused `conflict` (the key was registered by the first).
    let answer = json!({"agentId": agent_id, "keyid": weft_api::KeyId::of(&key)});
    let render = move |_: &()| (StatusCode::OK, answer.clone());
    answer_with(render.clone());
    state
        .store
        .directory()
        .rotate_key(agent_id.clone(), key)
        .await?;
    let (status, body) = render(&());
    Ok(json(status, &body))
}
