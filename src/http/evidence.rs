//! Evidence for reviewers: record it signed, fetch it by criterion, and the built-in
//! deterministic reviewer. The keys the reviewer signs with are published by `authority`.

use std::collections::HashMap;

use super::body::parse_body;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use weft_api::evidence::{MethodKind, Outcome};
use weft_api::views::{EvidenceRecorded, ReviewOutcome, ReviewRequest};
use weft_api::{ArtifactId, ErrorCode};
use weft_storage::EvidenceFilter;

use super::answer::json;
use super::auth::Bearer;
use super::auth::Caller;
use super::body::{created_or_ok, read_envelope, read_json};
use super::error::{HttpError, HttpResult};
use super::params::{
    RawPath, RawQuery, known_params, path_digest, path_id, query_id, query_limit, query_u64,
};
use super::state::AppState;

/// Records DSSE-signed Evidence; appends `evidence.recorded`.
#[utoipa::path(post, path = "/v1/evidence", request_body(content = String, description = "DSSE envelope of an Evidence payload", content_type = "application/json"),
    responses((status = 201, description = "{evidenceId, sequence}"), (status = 200, description = "already recorded"),
              (status = 400, description = "invalid_evidence, bad_signature, wrong_payload_type"), (status = 401, description = "unauthorized: a capability token past its lease, expiry or revocation"),
              (status = 403, description = "producer_mismatch, not_a_member, forbidden (also: a capability token without evidence:record or for another WorkItem)"),
              (status = 409, description = "supersedes_mismatch, mission_mismatch"),
              (status = 410, description = "disposed: this record, sent again, went by a retention policy's keepRecords (`sequence` names the records.disposed Event), or a cited artifact's bytes were disposed of"),
              (status = 422, description = "unknown_artifact, unknown_evidence")))]
pub(crate) async fn record(
    State(state): State<AppState>,
    caller: Bearer,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let envelope = read_envelope(&headers, body).await?;
    let render = |(recorded, created): &(EvidenceRecorded, bool)| {
        (created_or_ok(*created), recorded.clone())
    };
    super::idempotency::answer_with(render);
    let outcome = match &caller {
        Bearer::Caller(caller) => {
            state
                .store
                .evidence()
                .record_evidence(envelope, &caller.reader())
                .await?
        }
        // LSE-6: `evidence:record`, for the token's WorkItem only.
        Bearer::Token(grant) => {
            state
                .store
                .evidence()
                .record_evidence_with_token(envelope, grant)
                .await?
        }
    };
    let (status, body) = render(&outcome);
    Ok(json(status, &body))
}

fn parse_enum<T: for<'de> Deserialize<'de>>(
    query: &HashMap<String, String>,
    name: &str,
) -> Result<Option<T>, HttpError> {
    query
        .get(name)
        .map(|text| {
            serde_json::from_value(serde_json::Value::String(text.clone())).map_err(|_| {
                HttpError::new(
                    ErrorCode::BadRequest,
                    format!("{name} has an unknown value"),
                )
            })
        })
        .transpose()
}

/// The outcome filter: `result=` is DESIGN §8's name for it, `outcome=` the field's; either
/// may be given, both only if they agree.
fn outcome_of(query: &HashMap<String, String>) -> Result<Option<Outcome>, HttpError> {
    match (
        parse_enum::<Outcome>(query, "outcome")?,
        parse_enum::<Outcome>(query, "result")?,
    ) {
        (Some(outcome), Some(result)) if outcome != result => Err(HttpError::new(
            ErrorCode::BadRequest,
            "result and outcome name the same filter and disagree",
        )),
        (outcome, result) => Ok(outcome.or(result)),
    }
}

fn filter_from(query: &HashMap<String, String>) -> Result<EvidenceFilter, HttpError> {
    Ok(EvidenceFilter {
        work_item_id: query_id(query, "workItemId")?,
        criterion: query_id(query, "criterion")?.map(|id| id.to_string()),
        outcome: outcome_of(query)?,
        method: parse_enum::<MethodKind>(query, "method")?,
        producer: query_id(query, "producer")?,
        mission_id: query_id(query, "missionId")?,
        artifact: None,
        supersedes: query
            .get("supersedes")
            .map(|id| weft_api::ArtifactId::parse(id))
            .transpose()?,
        after: query_u64(query, "after")?,
        limit: query_limit(query)?.unwrap_or(100).min(1000),
    })
}

/// The query parameters `list` accepts (the OpenAPI check compares them with the document).
pub(super) const LIST_QUERY: &[&str] = &[
    "workItemId",
    "criterion",
    "outcome",
    "result",
    "method",
    "producer",
    "missionId",
    "supersedes",
    "after",
    "limit",
];

/// Evidence by WorkItem, criterion, outcome, method, producer, Mission; newest first, paged.
#[utoipa::path(get, operation_id = "list_evidence", path = "/v1/evidence", params(("workItemId" = Option<String>, Query), ("criterion" = Option<String>, Query), ("outcome" = Option<String>, Query),
    ("result" = Option<String>, Query, description = "the same filter as `outcome` (DESIGN §8's name)"),
    ("method" = Option<String>, Query), ("producer" = Option<String>, Query), ("missionId" = Option<String>, Query), ("supersedes" = Option<String>, Query, description = "only the records that supersede this Evidence id (its corrections)"), ("after" = Option<u64>, Query, description = "cursor: `next` of the previous page"), ("limit" = Option<u32>, Query)),
    responses((status = 200, description = "{items: [{evidenceId, groupId, sequence, envelope, evidence}], next}")))]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    query: RawQuery,
) -> HttpResult<Response> {
    let query = known_params(query, LIST_QUERY)?;
    let page = state
        .store
        .evidence()
        .list_evidence(filter_from(&query)?, &caller.reader())
        .await?;
    Ok(json(StatusCode::OK, &page))
}

/// One Evidence record.
#[utoipa::path(get, operation_id = "show_evidence", path = "/v1/evidence/{evidence_id}", params(("evidence_id" = String, Path, description = "blake3 of the payload")),
    responses((status = 200, description = "{evidenceId, groupId, sequence, envelope, evidence}"), (status = 404, description = "not_found"),
              (status = 410, description = "disposed: the record went by a retention policy's keepRecords; `sequence` names the records.disposed Event")))]
pub(crate) async fn show(
    State(state): State<AppState>,
    caller: Caller,
    evidence_id: RawPath,
) -> HttpResult<Response> {
    let Path(text) =
        evidence_id.map_err(|_| HttpError::new(ErrorCode::InvalidDigest, "not valid UTF-8"))?;
    let evidence_id = ArtifactId::parse(&text)?;
    let record = state
        .store
        .evidence()
        .evidence(evidence_id, &caller.reader())
        .await?;
    Ok(json(StatusCode::OK, &record))
}

/// The query parameters `for_artifact` accepts (the OpenAPI check compares them with the document).
pub(super) const FOR_ARTIFACT_QUERY: &[&str] = &["after", "limit"];

/// Every Evidence record citing an artifact, newest first.
#[utoipa::path(get, path = "/v1/artifacts/{digest}/evidence", params(("digest" = String, Path), ("after" = Option<u64>, Query), ("limit" = Option<u32>, Query)),
    responses((status = 200, description = "{items, next}")))]
pub(crate) async fn for_artifact(
    State(state): State<AppState>,
    caller: Caller,
    digest: RawPath,
    query: RawQuery,
) -> HttpResult<Response> {
    let digest = path_digest(digest)?;
    let query = known_params(query, FOR_ARTIFACT_QUERY)?;
    let view = state
        .store
        .artifacts()
        .artifact(digest, &caller.reader())
        .await?;
    let mut filter = filter_from(&query)?;
    filter.artifact = Some(view.digests.blake3);
    let page = state
        .store
        .evidence()
        .list_evidence(filter, &caller.reader())
        .await?;
    Ok(json(StatusCode::OK, &page))
}

/// The query parameters `criteria` accepts (the OpenAPI check compares them with the document).
pub(super) const CRITERIA_QUERY: &[&str] = &["missionId"];

/// For every criterion of a WorkItem with Evidence: the verdict in force, counts, producers.
/// `missionId` picks the Mission when the WorkItem id is used in more than one.
#[utoipa::path(get, path = "/v1/workitems/{work_item_id}/criteria", params(("work_item_id" = String, Path), ("missionId" = Option<String>, Query)),
    responses((status = 200, description = "{workItemId, missionId, criteria: [{criterion, latest, counts, producers, contested}]}"),
              (status = 400, description = "bad_request: the WorkItem has Evidence under several Missions; name missionId")))]
pub(crate) async fn criteria(
    State(state): State<AppState>,
    caller: Caller,
    work_item_id: RawPath,
    query: RawQuery,
) -> HttpResult<Response> {
    let work_item_id = path_id("workItemId", work_item_id)?;
    let query = known_params(query, CRITERIA_QUERY)?;
    let view = state
        .store
        .evidence()
        .criteria(
            work_item_id,
            query_id(&query, "missionId")?,
            &caller.reader(),
        )
        .await?;
    Ok(json(StatusCode::OK, &view))
}

/// The built-in deterministic reviewer: integrity and schema checks recorded as Evidence
/// signed by the server's key. A failed check is Evidence with outcome `fail`.
#[utoipa::path(post, path = "/v1/workitems/{work_item_id}/review", params(("work_item_id" = String, Path)),
    request_body(content = String, description = "{criterion, artifacts: [blake3:…], checks: [integrity|schema], missionId?}", content_type = "application/json"),
    responses((status = 201, description = "{evidence: [...]}, one record per check"), (status = 400, description = "bad_request: the WorkItem is in several Missions; name missionId"), (status = 403, description = "forbidden"), (status = 404, description = "unknown_work_item"), (status = 409, description = "mission_mismatch"),
              (status = 429, description = "too_many_downloads: each check's read of a stored file holds one of the reviewer's download slots (Retry-After)"), (status = 503, description = "overloaded (Retry-After)")))]
pub(crate) async fn review(
    State(state): State<AppState>,
    caller: Caller,
    work_item_id: RawPath,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let work_item_id = path_id("workItemId", work_item_id)?;
    let Caller::Agent(session) = caller else {
        return Err(HttpError::new(
            ErrorCode::Forbidden,
            "the reviewer runs for a Group member's session",
        ));
    };
    let bytes = read_json(&headers, body).await?;
    let request: ReviewRequest = parse_body(&bytes, ErrorCode::BadRequest)?;
    // The answer commits with the Evidence (several servers: a retry through another one
    // replays it, where it ran every check again and recorded a second set).
    super::idempotency::answer_with(|evidence: &Vec<weft_api::views::EvidenceRecord>| {
        (
            StatusCode::CREATED,
            ReviewOutcome {
                evidence: evidence.clone(),
            },
        )
    });
    let evidence = state
        .store
        .evidence()
        .review(work_item_id, request, &session)
        .await?;
    Ok(json(StatusCode::CREATED, &ReviewOutcome { evidence }))
}
