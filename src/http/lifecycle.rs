//! The lifecycle's operator surface (issue #46, DESIGN §16), with the admin token: retention
//! policies, legal holds, collection, usage and quotas; and a Group's approvers' holds, with
//! their sessions (`/v1/groups/{g}/holds`). The rules are `weft_api::lifecycle`;
//! the store enforces them with their Events (`weft_storage` `lifespan/`, `artifacts/collection.rs`).

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use weft_api::ErrorCode;
use weft_api::lifecycle::views::{
    CollectionReport, HoldRequest, HoldView, PolicyView, Quota, RetentionRequest, Usage,
};

use super::answer::json;
use super::auth::Caller;
use super::body::{parse_body, read_json};
use super::error::{HttpError, HttpResult};
use super::idempotency::answer_with;
use super::params::{RawPath, RawPath2, RawQuery, known_params, path_id, path_ids, query_limit};
use super::state::AppState;
use weft_storage::HoldBy;

/// The query parameters of `POST /v1/admin/gc` (the OpenAPI check compares them).
pub(super) const GC_QUERY: &[&str] = &["dryRun", "limit"];
/// The query parameters of `GET /v1/admin/holds`.
pub(super) const HOLDS_QUERY: &[&str] = &["group", "after", "limit"];
/// The query parameters of `GET /v1/groups/{g}/holds`.
pub(super) const GROUP_HOLDS_QUERY: &[&str] = &["after", "limit"];
/// Holds a page lists unless `limit` says fewer; at most [`HOLDS_MAX`].
const HOLDS_PAGE: usize = 100;
const HOLDS_MAX: usize = 1_000;

/// A holds listing's `after` and `limit` (1…1,000, default 100).
fn holds_page(
    query: &std::collections::HashMap<String, String>,
) -> HttpResult<(Option<weft_api::Id>, usize)> {
    let after = query
        .get("after")
        .map(|after| weft_api::Id::parse("after", after))
        .transpose()?;
    let limit = query_limit(query)?
        .map_or(HOLDS_PAGE, |limit| {
            usize::try_from(limit).unwrap_or(HOLDS_MAX)
        })
        .clamp(1, HOLDS_MAX);
    Ok((after, limit))
}

/// A lifecycle body: a JSON object whose present fields are not `null` (absent means unset,
/// as the document says), then its shape.
fn lifecycle_body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, HttpError> {
    let value: serde_json::Value = parse_body(bytes, ErrorCode::BadRequest)?;
    let Some(object) = value.as_object() else {
        return Err(HttpError::new(
            ErrorCode::BadRequest,
            "the body is a JSON object",
        ));
    };
    if let Some((name, _)) = object.iter().find(|(_, value)| value.is_null()) {
        return Err(HttpError::new(
            ErrorCode::BadRequest,
            format!("{name} is null: leave it out instead"),
        ));
    }
    parse_body(bytes, ErrorCode::BadRequest)
}

/// The most blobs one collection call disposes of (a larger `limit` is clamped): the answer
/// lists each, and the CLI calls again while `blobs` reached the limit.
pub(super) const GC_LIMIT: usize = 10_000;

/// Sets the Group's retention policy, one Mission's (`missionId`) or one classification's of
/// its artifacts (`classification`): durations like `30d`,
/// `12h`, `1s`, counted from the Mission's end. Appends `retention.set`.
#[utoipa::path(put, path = "/v1/admin/groups/{group_id}/retention", params(("group_id" = String, Path)),
    request_body(content = String, description = "{missionId? | classification?, keepBytes?, keepRecords?}", content_type = "application/json"),
    responses((status = 200, description = "{groupId, missionId?, classification?, keepBytes?, keepRecords?, sequence}"),
              (status = 400, description = "bad_request: a duration, or neither named"),
              (status = 404, description = "unknown_group, not_found (the Mission)"),
              (status = 409, description = "held: holds keep what the policy would let go now; conflict: keepRecords shorter than keepBytes")))]
pub(crate) async fn set_retention(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    caller.require_admin()?;
    let group_id = path_id("groupId", group_id)?;
    let bytes = read_json(&headers, body).await?;
    let request: RetentionRequest = lifecycle_body(&bytes)?;
    let retention = request.retention()?;
    answer_with(|set: &PolicyView| (StatusCode::OK, set.clone()));
    let set = state
        .store
        .lifespan()
        .set_retention(
            group_id,
            request.mission_id,
            request.classification,
            retention,
        )
        .await?;
    Ok(json(StatusCode::OK, &set))
}

/// The Group's retention policies: its own, then its Missions'.
#[utoipa::path(get, path = "/v1/admin/groups/{group_id}/retention", params(("group_id" = String, Path)),
    responses((status = 200, description = "{groupId, policies: [{groupId, missionId?, keepBytes?, keepRecords?, sequence}]}"),
              (status = 404, description = "unknown_group")))]
pub(crate) async fn retention(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
) -> HttpResult<Response> {
    caller.require_admin()?;
    let group_id = path_id("groupId", group_id)?;
    let policies = state.store.lifespan().retention(group_id).await?;
    Ok(json(StatusCode::OK, &policies))
}

/// Places a legal hold on an artifact, a WorkItem or a Mission; what it holds and everything
/// its lineage needs is never collected. Appends `hold.placed` to each Group concerned.
#[utoipa::path(post, path = "/v1/admin/holds",
    request_body(content = String, description = "{artifact | workItemId | missionId, reason}", content_type = "application/json"),
    responses((status = 201, description = "{holdId, target, reason, placedAt, groups}"),
              (status = 400, description = "bad_request"),
              (status = 404, description = "not_found: no such WorkItem, Mission or published artifact")))]
pub(crate) async fn place_hold(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    caller.require_admin()?;
    place(&state, HoldBy::Operator, &headers, body).await
}

/// A hold placed by `by` from a `{artifact | workItemId | missionId, reason}` body: 201 and
/// the hold (its replay with the same Idempotency-Key too).
async fn place(
    state: &AppState,
    by: HoldBy<'_>,
    headers: &HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let bytes = read_json(headers, body).await?;
    let request: HoldRequest = lifecycle_body(&bytes)?;
    let (target, reason) = request.target()?;
    answer_with(|hold: &HoldView| (StatusCode::CREATED, hold.clone()));
    let hold = state
        .store
        .lifespan()
        .place_hold(target, reason, by)
        .await?;
    Ok(json(StatusCode::CREATED, &hold))
}

/// Lifts a hold (again: answered as lifted, nothing appended). Appends `hold.lifted`.
#[utoipa::path(delete, path = "/v1/admin/holds/{hold_id}", params(("hold_id" = String, Path)),
    responses((status = 200, description = "{holdId, target, reason, placedAt, liftedAt, groups}"),
              (status = 404, description = "not_found")))]
pub(crate) async fn lift_hold(
    State(state): State<AppState>,
    caller: Caller,
    hold_id: RawPath,
) -> HttpResult<Response> {
    caller.require_admin()?;
    let hold_id = path_id("holdId", hold_id)?;
    let hold = state
        .store
        .lifespan()
        .lift_hold(hold_id, HoldBy::Operator)
        .await?;
    Ok(json(StatusCode::OK, &hold))
}

/// The holds, in force and lifted; `group` keeps those of one Group.
#[utoipa::path(get, path = "/v1/admin/holds",
    params(("group" = Option<String>, Query), ("after" = Option<String>, Query), ("limit" = Option<u32>, Query)),
    responses((status = 200, description = "{holds: [{holdId, target, reason, placedAt, liftedAt?, groups, placedBy?}], next?}: by id, at most limit (default 100, at most 1,000); next is the after of the next page")))]
pub(crate) async fn holds(
    State(state): State<AppState>,
    caller: Caller,
    query: RawQuery,
) -> HttpResult<Response> {
    caller.require_admin()?;
    let query = known_params(query, HOLDS_QUERY)?;
    let group = query
        .get("group")
        .map(|group| weft_api::Id::parse("group", group))
        .transpose()?;
    let (after, limit) = holds_page(&query)?;
    let holds = state
        .store
        .lifespan()
        .holds(group, HoldBy::Operator, after, limit)
        .await?;
    Ok(json(StatusCode::OK, &holds))
}

/// A Group's approver, from the caller: the session of that Group (`forbidden` otherwise,
/// the admin token included: the operator's holds are under `/v1/admin/holds`).
fn approver<'a>(caller: &'a Caller, group: &'a weft_api::Id) -> HttpResult<HoldBy<'a>> {
    match caller {
        Caller::Agent(session) => Ok(HoldBy::Approver { group, session }),
        Caller::Admin => Err(HttpError::new(
            ErrorCode::Forbidden,
            "the operator's holds are under /v1/admin/holds",
        )),
    }
}

/// A Group's approver places a hold on what its session sees: a WorkItem or Mission of the
/// Group, or an artifact it may read. Appends `hold.placed` (naming the approver) to that
/// Group only; at most 1,000 of the Group's holds in force.
#[utoipa::path(post, path = "/v1/groups/{group_id}/holds", params(("group_id" = String, Path)),
    request_body(content = String, description = "{artifact | workItemId | missionId, reason}", content_type = "application/json"),
    responses((status = 201, description = "{holdId, target, reason, placedAt, groups, placedBy}"),
              (status = 400, description = "bad_request"),
              (status = 403, description = "forbidden: not an approver's session of this Group"),
              (status = 404, description = "not_found: nothing of that name this session sees"),
              (status = 409, description = "conflict: the Group has 1,000 holds in force")))]
pub(crate) async fn place_group_hold(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let group_id = path_id("groupId", group_id)?;
    let by = approver(&caller, &group_id)?;
    place(&state, by, &headers, body).await
}

/// A Group's approver lifts one of the Group's holds (the operator's: `forbidden`). Appends
/// `hold.lifted` naming the approver.
#[utoipa::path(delete, path = "/v1/groups/{group_id}/holds/{hold_id}",
    params(("group_id" = String, Path), ("hold_id" = String, Path)),
    responses((status = 200, description = "{holdId, target, reason, placedAt, liftedAt, groups, placedBy}"),
              (status = 403, description = "forbidden: not an approver's session of this Group, or the operator's hold"),
              (status = 404, description = "not_found")))]
pub(crate) async fn lift_group_hold(
    State(state): State<AppState>,
    caller: Caller,
    ids: RawPath2,
) -> HttpResult<Response> {
    let (group_id, hold_id) = path_ids(("groupId", "holdId"), ids)?;
    let by = approver(&caller, &group_id)?;
    let hold = state.store.lifespan().lift_hold(hold_id, by).await?;
    Ok(json(StatusCode::OK, &hold))
}

/// The Group's holds (its approvers' and the operator's), of what the session sees: for the
/// Group's approvers.
#[utoipa::path(get, path = "/v1/groups/{group_id}/holds",
    params(("group_id" = String, Path), ("after" = Option<String>, Query), ("limit" = Option<u32>, Query)),
    responses((status = 200, description = "{holds: [{holdId, target, reason, placedAt, liftedAt?, groups, placedBy?}], next?}: paged as /v1/admin/holds"),
              (status = 403, description = "forbidden: not an approver's session of this Group")))]
pub(crate) async fn group_holds(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
    query: RawQuery,
) -> HttpResult<Response> {
    let group_id = path_id("groupId", group_id)?;
    let by = approver(&caller, &group_id)?;
    let (after, limit) = holds_page(&known_params(query, GROUP_HOLDS_QUERY)?)?;
    let holds = state.store.lifespan().holds(None, by, after, limit).await?;
    Ok(json(StatusCode::OK, &holds))
}

/// Runs collection now: the bytes every retention policy lets go and nothing holds are
/// disposed of (tombstones and `artifact.disposed` Events stay), at most `limit` (≤ 10,000)
/// blobs and half the request timeout per call (call again while `blobs` is not 0), and trims Command and idempotent answers older than the answer horizon;
/// `dryRun=true` changes nothing and lists what would go.
#[utoipa::path(post, path = "/v1/admin/gc", params(("dryRun" = Option<bool>, Query), ("limit" = Option<u64>, Query)),
    responses((status = 200, description = "{dryRun, disposed: [{artifact, size, groups, policy, reason}], kept, blobs, bytes, answersTrimmed, rowsForgotten, records: [{groupId, missionId, manifests, evidence, policy, reason, sequence?}], recordsKept}"),
              (status = 400, description = "bad_request")))]
pub(crate) async fn gc(
    State(state): State<AppState>,
    caller: Caller,
    query: RawQuery,
) -> HttpResult<Response> {
    caller.require_admin()?;
    let query = known_params(query, GC_QUERY)?;
    let dry_run = match query.get("dryRun").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(HttpError::new(
                ErrorCode::BadRequest,
                format!("dryRun is true or false, not {other:?}"),
            ));
        }
    };
    let limit = query_limit(&query)?
        .map_or(GC_LIMIT, |limit| usize::try_from(limit).unwrap_or(GC_LIMIT))
        .clamp(1, GC_LIMIT);
    // Within the request's time: batches start only in its first half (each is short, then
    // paused); the caller calls again while a call disposes of something. Trimming answers
    // and forgetting spent rows start no batch past three quarters of it.
    let started = std::time::Instant::now();
    let deadline = started + state.limits.request_timeout / 2;
    let tidy_deadline = started + (state.limits.request_timeout - state.limits.request_timeout / 4);
    // In a task of its own: a request cut off by its timeout (or its client) must not stop a
    // collection between a disposal batch's rows and the end of its file deletions, which
    // would leave the batch open (every server's disposals `Busy`) until its lease ends.
    let store = state.store.clone();
    let collection = tokio::spawn(async move {
        store
            .artifacts()
            .collect_until(dry_run, limit, Some(deadline))
            .await
    });
    let mut report: CollectionReport = collection
        .await
        .map_err(|error| HttpError::new(ErrorCode::Internal, error.to_string()))??;
    if !dry_run {
        let lifespan = state.store.lifespan();
        report.answers_trimmed = lifespan.trim_answers_until(Some(tidy_deadline)).await?;
        report.rows_forgotten = lifespan.forget_spent_until(Some(tidy_deadline)).await?;
    }
    Ok(json(StatusCode::OK, &report))
}

/// The Group's usage (distinct blobs its manifests cite or its members uploaded; disposed ones
/// left out) and its quota.
#[utoipa::path(get, path = "/v1/admin/groups/{group_id}/usage", params(("group_id" = String, Path)),
    responses((status = 200, description = "{bytes, artifacts, quota: {bytes, artifacts}}"),
              (status = 404, description = "unknown_group")))]
pub(crate) async fn usage(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
) -> HttpResult<Response> {
    caller.require_admin()?;
    let group_id = path_id("groupId", group_id)?;
    let usage: Usage = state.store.lifespan().usage(group_id).await?;
    Ok(json(StatusCode::OK, &usage))
}

/// Sets the Group's quota (a part left out: no limit): an upload of new bytes past it answers 507
/// `quota_exceeded`.
#[utoipa::path(put, path = "/v1/admin/groups/{group_id}/quota", params(("group_id" = String, Path)),
    request_body(content = String, description = "{bytes?, artifacts?} (absent: no limit)", content_type = "application/json"),
    responses((status = 200, description = "{bytes, artifacts, quota}"),
              (status = 400, description = "bad_request"),
              (status = 404, description = "unknown_group")))]
pub(crate) async fn set_quota(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    caller.require_admin()?;
    let group_id = path_id("groupId", group_id)?;
    let bytes = read_json(&headers, body).await?;
    let quota: Quota = lifecycle_body(&bytes)?;
    // The index keeps signed 64-bit integers.
    if [quota.bytes, quota.artifacts]
        .into_iter()
        .flatten()
        .any(|limit| limit > i64::MAX as u64)
    {
        return Err(HttpError::new(
            ErrorCode::BadRequest,
            format!("a quota is at most {}", i64::MAX),
        ));
    }
    answer_with(|usage: &Usage| (StatusCode::OK, *usage));
    let usage = state.store.lifespan().set_quota(group_id, quota).await?;
    Ok(json(StatusCode::OK, &usage))
}
