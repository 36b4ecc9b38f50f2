//! Operator reads with the admin token: a Group's Memberships and an Agent's record with its
//! key history (the read side of `admin.rs`). A session is refused `forbidden`: who else is in
//! a Group, and with which keys, is the operator's to know.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::answer::json;
use super::auth::Caller;
use super::error::HttpResult;
use super::params::{RawPath, path_id};
use super::state::AppState;

/// Every live Membership of a Group: Agent, roles, Missions (absent: the whole Group), epoch.
#[utoipa::path(get, path = "/v1/admin/groups/{group_id}/members", params(("group_id" = String, Path)),
    responses((status = 200, description = "{groupId, members: [{groupId, agentId, roles, epoch, missions?}]}"), (status = 403, description = "forbidden: not the admin token"), (status = 404, description = "not_found: no such Group")))]
pub(crate) async fn members(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
) -> HttpResult<Response> {
    caller.require_admin()?;
    let group_id = path_id("groupId", group_id)?;
    Ok(json(
        StatusCode::OK,
        &state.store.directory().list_members(group_id).await?,
    ))
}

/// An Agent: card version, registration, deactivation, every key it has had (current first)
/// and its live Memberships.
#[utoipa::path(get, path = "/v1/admin/agents/{agent_id}", params(("agent_id" = String, Path)),
    responses((status = 200, description = "{agentId, agentCardVersion, registeredAt, deactivatedAt?, keys: [{keyid, publicKey, addedAt, retiredAt?}], memberships}"), (status = 403, description = "forbidden: not the admin token"), (status = 404, description = "not_found: no such Agent")))]
pub(crate) async fn agent(
    State(state): State<AppState>,
    caller: Caller,
    agent_id: RawPath,
) -> HttpResult<Response> {
    caller.require_admin()?;
    let agent_id = path_id("agentId", agent_id)?;
    Ok(json(
        StatusCode::OK,
        &state.store.directory().agent_record(agent_id).await?,
    ))
}
