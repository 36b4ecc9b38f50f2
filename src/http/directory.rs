//! Operator reads with the admin token: a Group's Memberships and an Agent's record with its
//! key history (the read side of `admin.rs`). A session is refused `forbidden`: who else is in
//! a Group, and with which keys, is the operator's to know.
//!
//! One read is any caller's: the registered key behind a key id (`GET /v1/keys/{keyid}`), so
//! an auditor checks a signature it holds with the key the Authority registered for its
//! signer (issue #50: `weft show`). It lists nothing: a key id is the BLAKE3 hash of a public
//! key, learned only from an envelope the caller could already read, and what it
//! answers (the signer's Agent id, the public key) is in that envelope's manifest already or
//! is public by nature.

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

/// The registered key behind `keyid` (current or retired): `{keyid, agentId, publicKey}`.
#[utoipa::path(get, operation_id = "registered_key", path = "/v1/keys/{keyid}", params(("keyid" = String, Path)),
    responses((status = 200, description = "{keyid, agentId, publicKey}"), (status = 400, description = "bad_request: not an ed25519 key id"), (status = 401, description = "unauthorized"), (status = 404, description = "not_found")))]
pub(crate) async fn registered_key(
    State(state): State<AppState>,
    _caller: Caller,
    keyid: RawPath,
) -> HttpResult<Response> {
    use base64::Engine as _;
    let axum::extract::Path(keyid) = keyid.map_err(|_| {
        super::error::HttpError::new(weft_api::ErrorCode::BadRequest, "not valid UTF-8")
    })?;
    let keyid: weft_api::KeyId = keyid.parse()?;
    let Some((agent_id, key)) = state.store.directory().recorded_key(keyid.clone()).await? else {
        return Err(super::error::HttpError::new(
            weft_api::ErrorCode::NotFound,
            format!("no key {keyid} is registered"),
        ));
    };
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({
            "keyid": keyid.to_string(),
            "agentId": agent_id,
            "publicKey": weft_api::dsse::BASE64.encode(key.as_bytes()),
        }),
    ))
}
