//! Missions and WorkItems (DESIGN §10): `POST /v1/groups/{g}/commands` takes one signed
//! Command; the reads answer the Mission, its WorkItem graph and a WorkItem, each only to a
//! session of the Group it belongs to (another Group's answers as unknown).

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use weft_api::ErrorCode;

use super::answer::json;
use super::auth::Caller;
use super::body::read_envelope;
use super::error::{HttpError, HttpResult};
use super::params::{RawPath, path_id};
use super::state::AppState;

/// Runs one DSSE-signed Command; answers its Events and the aggregate's view after it.
#[utoipa::path(post, path = "/v1/groups/{group_id}/commands", params(("group_id" = String, Path)),
    request_body(content = String, description = "DSSE envelope of a Command (application/vnd.mwp.command.v1+json)", content_type = "application/json"),
    responses((status = 201, description = "{commandId, events: [{sequence, type}], state}"),
              (status = 400, description = "invalid_command, group_mismatch, unknown_extension, bad_signature"),
              (status = 401, description = "stale_session, stale_membership"),
              (status = 403, description = "forbidden, producer_mismatch, not_a_member"),
              (status = 404, description = "unknown_work_item, not_found"),
              (status = 409, description = "illegal_transition, stale_revision, stale_lease, offer_expired, offer_withdrawn, not_eligible, approval_required, budget_exceeded, cycle, mission_mismatch, offline_binding_mismatch, offline_outside_grace, offline_lease_closed, offline_owner_changed, offline_wrong_work_item"), (status = 507, description = "quota_exceeded (the Group's open proposals)"),
              (status = 422, description = "evidence_missing, idempotency_key_reused, unknown_evidence, unknown_artifact"),
              (status = 429, description = "rate_limited: more Commands by this agent than --commands-per-minute (Retry-After)")))]
pub(crate) async fn command(
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
            "Commands are signed by Agents and sent with their session",
        ));
    };
    let envelope = read_envelope(&headers, body).await?;
    let accepted = state
        .store
        .work()
        .execute_command(group_id, envelope, &session)
        .await?;
    // EVD-3's review of a submission is a reaction after this commit (storage's
    // `reactions.rs`): the answer does not wait for the re-hash.
    Ok(json(StatusCode::CREATED, &accepted))
}

/// Runs up to 256 signed Commands of the caller's session in order, in one transaction, each in
/// a savepoint of its own: every accepted one is durable when this answers, the first refusal
/// stops the batch (nothing of it or after it is applied) and is answered inside the 200 with
/// its index. The offline journal reconciles through this route (OFL-8), one fsync for many.
#[utoipa::path(post, path = "/v1/groups/{group_id}/commands/batch", params(("group_id" = String, Path)),
    request_body(content = String, description = "{commands: [DSSE envelope of a Command, …]} (at most 256)", content_type = "application/json"),
    responses((status = 200, description = "{accepted: [{commandId, events, state}], refused: null | {index, problem}}"),
              (status = 400, description = "bad_request, invalid_json"),
              (status = 403, description = "forbidden: not a session")))]
pub(crate) async fn command_batch(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    use weft_api::work::views::{BatchAccepted, BatchRefusal, CommandBatch, MAX_BATCH_COMMANDS};
    let group_id = path_id("groupId", group_id)?;
    let Caller::Agent(session) = caller else {
        return Err(HttpError::new(
            ErrorCode::Forbidden,
            "Commands are signed by Agents and sent with their session",
        ));
    };
    let bytes = super::body::read_json(&headers, body).await?;
    let batch: CommandBatch = weft_api::json::parse_strict(&bytes, ErrorCode::InvalidJson)?;
    if batch.commands.is_empty() || batch.commands.len() > MAX_BATCH_COMMANDS {
        return Err(HttpError::new(
            ErrorCode::BadRequest,
            format!("a batch carries 1 to {MAX_BATCH_COMMANDS} Commands"),
        ));
    }
    let (accepted, refused) = state
        .store
        .work()
        .execute_commands(group_id, batch.commands, &session)
        .await?;
    let accepted = accepted
        .into_iter()
        .map(weft_storage::Accepted::into_api)
        .collect();
    let refused = refused.map(|(index, error)| BatchRefusal {
        index,
        problem: HttpError::from(error).body(),
    });
    Ok(json(StatusCode::OK, &BatchAccepted { accepted, refused }))
}

/// The query parameters `read_command` accepts (the OpenAPI check compares them with the
/// document).
pub(super) const READ_COMMAND_QUERY: &[&str] = &["agentId"];

/// An accepted Command as its Agent signed it (issue #50): who did what, checkable with the
/// Agent's registered key. The operator and the Group's Group-wide members may read it.
#[utoipa::path(get, operation_id = "read_command", path = "/v1/groups/{group_id}/commands/{command_id}", params(("group_id" = String, Path), ("command_id" = String, Path),
    ("agentId" = Option<String>, Query, description = "the Agent, when several sent a Command with this id")),
    responses((status = 200, description = "{groupId, commandId, agentId, envelope}"), (status = 400, description = "bad_request: several Agents used this id; name agentId"), (status = 404, description = "not_found")))]
pub(crate) async fn read_command(
    State(state): State<AppState>,
    caller: Caller,
    ids: Result<axum::extract::Path<(String, String)>, axum::extract::rejection::PathRejection>,
    query: super::params::RawQuery,
) -> HttpResult<Response> {
    let axum::extract::Path((group_id, command_id)) =
        ids.map_err(|_| HttpError::new(ErrorCode::InvalidId, "not valid UTF-8"))?;
    let group_id = weft_api::Id::parse("groupId", &group_id)?;
    let command_id = weft_api::Id::parse("commandId", &command_id)?;
    let query = super::params::known_params(query, READ_COMMAND_QUERY)?;
    let agent_id = query
        .get("agentId")
        .map(|agent| weft_api::Id::parse("agentId", agent))
        .transpose()?;
    let signed = state
        .store
        .work()
        .command(group_id, command_id, agent_id, &caller.reader())
        .await?;
    Ok(json(StatusCode::OK, &signed))
}

/// A WorkItem: state, revisions, contract, owner, lease, offers, dependencies, eligibility,
/// budget, attempts, history.
#[utoipa::path(get, operation_id = "show_work_item", path = "/v1/workitems/{work_item_id}", params(("work_item_id" = String, Path)),
    responses((status = 200, description = "the WorkItem"), (status = 404, description = "unknown_work_item")))]
pub(crate) async fn work_item(
    State(state): State<AppState>,
    caller: Caller,
    id: RawPath,
) -> HttpResult<Response> {
    let id = path_id("workItemId", id)?;
    let view = state.store.work().work_item(id, &caller.reader()).await?;
    Ok(json(StatusCode::OK, &view))
}

/// A Mission: state, budget, WorkItems.
#[utoipa::path(get, operation_id = "show_mission", path = "/v1/missions/{mission_id}", params(("mission_id" = String, Path)),
    responses((status = 200, description = "the Mission"), (status = 404, description = "not_found")))]
pub(crate) async fn mission(
    State(state): State<AppState>,
    caller: Caller,
    id: RawPath,
) -> HttpResult<Response> {
    let id = path_id("missionId", id)?;
    let view = state.store.work().mission(id, &caller.reader()).await?;
    Ok(json(StatusCode::OK, &view))
}

/// A Mission's WorkItem DAG: nodes with state and eligibility, `dependsOn` edges.
#[utoipa::path(get, path = "/v1/missions/{mission_id}/workitems", params(("mission_id" = String, Path)),
    responses((status = 200, description = "{nodes, edges}"), (status = 404, description = "not_found")))]
pub(crate) async fn mission_graph(
    State(state): State<AppState>,
    caller: Caller,
    id: RawPath,
) -> HttpResult<Response> {
    let id = path_id("missionId", id)?;
    let view = state
        .store
        .work()
        .mission_graph(id, &caller.reader())
        .await?;
    Ok(json(StatusCode::OK, &view))
}
