//! Context Packages (DESIGN §11): publish a signed version in a Group, read the latest, every
//! version or one, the Event range a version cites (CTX-3), its provenance in every lineage
//! format, forward it to another Group (CTX-7); and the scheduling metadata of a WorkItem
//! (CTX-8), which carries no content.
//!
//! Every read is scoped to the caller's Group: another Group's package answers `not_found`.

use super::body::parse_body;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};
use weft_api::context::{ContextEvents, ContextRecord, ForwardRequest};
use weft_api::manifest::Classification;
use weft_api::work::views::SchedulingView;
use weft_api::{Digest, ErrorCode, Id};

use super::answer::json;
use super::auth::Caller;
use super::body::{created_or_ok, read_envelope, read_json};
use super::error::{HttpError, HttpResult};
use super::lineage::{Format, format_of, lineage_query, render};
use super::params::{RawPath, RawQuery, known_params, parse_u64, path_id, query_u64};
use super::state::AppState;

/// Publishes a DSSE-signed Context Package version; appends `context.published`.
#[utoipa::path(post, operation_id = "publish_context", path = "/v1/groups/{group_id}/context", params(("group_id" = String, Path)),
    request_body(content = String, description = "DSSE envelope of a Context Package (application/vnd.mwp.context-package.v1+json)", content_type = "application/json"),
    responses((status = 201, description = "{contextId, packageId, version, sequence}"), (status = 200, description = "already published"),
              (status = 400, description = "invalid_context, group_mismatch, bad_signature, wrong_payload_type"),
              (status = 403, description = "producer_mismatch, not_a_member, forbidden"),
              (status = 404, description = "not_found (the Mission), unknown_work_item"),
              (status = 409, description = "context_previous_mismatch, context_version_skipped, context_other_package, context_other_mission"),
              (status = 422, description = "events_out_of_range, unknown_artifact")))]
pub(crate) async fn publish(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let group_id = path_id("groupId", group_id)?;
    let envelope = read_envelope(&headers, body).await?;
    // The answer commits with the publication (several servers: a retry through another one
    // replays 201, not a 200 "already published").
    super::idempotency::answer_with(
        |(answer, created): &(weft_api::context::ContextPublishedAnswer, bool)| {
            (created_or_ok(*created), answer.clone())
        },
    );
    let (answer, created) = state
        .store
        .context()
        .publish_context(group_id, envelope, &caller.reader())
        .await?;
    Ok(json(created_or_ok(created), &answer))
}

/// The latest version of a package.
#[utoipa::path(get, path = "/v1/context/{package_id}", params(("package_id" = String, Path)),
    responses((status = 200, description = "{contextId, groupId, sequence, forwardedFrom?, envelope, package}"), (status = 404, description = "not_found")))]
pub(crate) async fn latest(
    State(state): State<AppState>,
    caller: Caller,
    package_id: RawPath,
) -> HttpResult<Response> {
    let package_id = path_id("packageId", package_id)?;
    let record = state
        .store
        .context()
        .context_version(package_id, None, &caller.reader())
        .await?;
    Ok(json(StatusCode::OK, &record))
}

/// Every version of a package, oldest first.
#[utoipa::path(get, path = "/v1/context/{package_id}/versions", params(("package_id" = String, Path)),
    responses((status = 200, description = "{packageId, versions: [...]}"), (status = 404, description = "not_found")))]
pub(crate) async fn versions(
    State(state): State<AppState>,
    caller: Caller,
    package_id: RawPath,
) -> HttpResult<Response> {
    let package_id = path_id("packageId", package_id)?;
    let versions = state
        .store
        .context()
        .context_versions(package_id, &caller.reader())
        .await?;
    Ok(json(StatusCode::OK, &versions))
}

/// One version of a package.
#[utoipa::path(get, path = "/v1/context/{package_id}/versions/{version}", params(("package_id" = String, Path), ("version" = u64, Path)),
    responses((status = 200, description = "the version"), (status = 400, description = "bad_request"), (status = 404, description = "not_found")))]
pub(crate) async fn version(
    State(state): State<AppState>,
    caller: Caller,
    ids: Result<Path<(String, String)>, PathRejection>,
) -> HttpResult<Response> {
    let Path((package_id, version)) =
        ids.map_err(|_| HttpError::new(ErrorCode::InvalidId, "not valid UTF-8"))?;
    let package_id = Id::parse("packageId", &package_id)?;
    // Strict, and within i64: a larger version once reached SQLite and answered 500.
    let version = parse_u64("version", &version)?;
    let record = state
        .store
        .context()
        .context_version(package_id, Some(version), &caller.reader())
        .await?;
    Ok(json(StatusCode::OK, &record))
}

/// The query parameters `events` accepts (the OpenAPI check compares them with the document).
pub(super) const EVENTS_QUERY: &[&str] = &["version"];

/// CTX-3: the Events a version cites (the latest unless `version=`), when the caller's
/// Membership covers that Group's log.
#[utoipa::path(get, path = "/v1/context/{package_id}/events", params(("package_id" = String, Path), ("version" = Option<u64>, Query)),
    responses((status = 200, description = "{contextId, groupId, sourceEvents, events: [...]}"), (status = 403, description = "forbidden: the log of another Group"),
              (status = 404, description = "not_found"), (status = 410, description = "cursor_too_old: compacted; restore from the snapshot")))]
pub(crate) async fn events(
    State(state): State<AppState>,
    caller: Caller,
    package_id: RawPath,
    query: RawQuery,
) -> HttpResult<Response> {
    let package_id = path_id("packageId", package_id)?;
    let query = known_params(query, EVENTS_QUERY)?;
    let version = query_u64(&query, "version")?;
    let (record, events) = state
        .store
        .context()
        .context_events(package_id, version, &caller.reader())
        .await?;
    Ok(json(
        StatusCode::OK,
        &ContextEvents {
            context_id: record.context_id,
            group_id: record.package.group_id,
            source_events: record.package.source_events,
            events,
        },
    ))
}

/// The query parameters `provenance` accepts (the OpenAPI check compares them with the
/// document): an artifact's provenance's, as DESIGN §11 promises (issue #40).
pub(super) const PROVENANCE_QUERY: &[&str] = super::lineage::PROVENANCE_QUERY;

/// A package's provenance: its versions linked by `revisionOf`, the Artifacts each `cites`
/// and their lineage (ancestors, descendants or both, as `direction` says), in the formats
/// of an artifact's provenance.
#[utoipa::path(get, operation_id = "context_provenance", path = "/v1/context/{package_id}/provenance", params(("package_id" = String, Path), ("direction" = Option<String>, Query, description = "of the cited Artifacts' lineage: ancestors (default), descendants or both; every version of the package is shown"),
    ("depth" = Option<u32>, Query), ("limit" = Option<u32>, Query),
    ("cursor" = Option<u64>, Query), ("format" = Option<String>, Query, description = "json, dot, mermaid, prov-json or intoto"),
    ("edges" = Option<String>, Query, description = "comma-separated: derivedFrom, generatedBy, partOf, attributedTo"), ("asOf" = Option<u64>, Query), ("group" = Option<String>, Query, description = "the Group whose log asOf counts (the package's for the admin token)"),
    ("missionId" = Option<String>, Query, description = "follow only this Mission's manifests")),
    responses((status = 200, description = "{root, contexts, artifacts, workItems, missions, agents, edges, withheld, truncated}"), (status = 400, description = "bad_request"), (status = 404, description = "not_found")))]
pub(crate) async fn provenance(
    State(state): State<AppState>,
    caller: Caller,
    package_id: RawPath,
    query: RawQuery,
) -> HttpResult<Response> {
    let package_id = path_id("packageId", package_id)?;
    let mut query = known_params(query, PROVENANCE_QUERY)?;
    if matches!(caller, Caller::Admin) && query.contains_key("asOf") && !query.contains_key("group")
    {
        // The operator has no session Group for `asOf` to count in: the package's own.
        let record = state
            .store
            .context()
            .context_version(package_id.clone(), None, &caller.reader())
            .await?;
        query.insert("group".to_owned(), record.group_id.to_string());
    }
    let lineage_query = lineage_query(&query, super::lineage::direction_of(&query)?, &caller)?;
    let format = format_of(&query)?;
    if format == Format::InToto {
        let record = state
            .store
            .context()
            .context_version(package_id, None, &caller.reader())
            .await?;
        let payload = serde_json::to_vec(&intoto_statement(&record))
            .map_err(|e| HttpError::new(ErrorCode::Internal, e.to_string()))?;
        let envelope = state
            .store
            .sign_as_authority(super::exports::INTOTO_PAYLOAD_TYPE, &payload);
        return Ok(json(StatusCode::OK, &envelope));
    }
    let lineage = state
        .store
        .context()
        .context_provenance(package_id, lineage_query, &caller.reader())
        .await?;
    Ok(render(&lineage, format))
}

/// An in-toto Statement v1 about a package version: its id as the subject; the Artifacts it
/// cites and the version it revises as resolved dependencies.
fn intoto_statement(record: &ContextRecord) -> Value {
    let package = &record.package;
    let mut dependencies: Vec<Value> = package
        .artifacts
        .iter()
        .map(|artifact| json!({"name": artifact.to_string(), "digest": {"blake3": artifact.hex()}, "annotations": {"relation": "cites"}}))
        .collect();
    if let Some(previous) = package.previous {
        dependencies.push(json!({"name": format!("context:{previous}"), "digest": {"blake3": previous.hex()}, "annotations": {"relation": "revisionOf"}}));
    }
    json!({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": format!("context:{}", record.context_id), "digest": {"blake3": record.context_id.hex()}}],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {
            "buildDefinition": {
                "buildType": "https://weft.dev/mwp/context-package/v1",
                "externalParameters": {
                    "groupId": package.group_id,
                    "missionId": package.mission_id,
                    "workItemId": package.work_item_id,
                    "packageId": package.package_id,
                    "version": package.version,
                    "sourceEvents": package.source_events,
                },
                "resolvedDependencies": dependencies,
            },
            "runDetails": {
                "builder": {
                    "id": format!("https://weft.dev/agents/{}", package.generator.agent_id),
                    "version": {"agentCardVersion": package.generator.agent_card_version},
                },
                "metadata": {"finishedOn": super::exports::utc_timestamp(&package.created_at)},
            },
        },
    })
}

/// CTX-7: forwards a version (the latest unless `version`) and the Artifacts it cites to
/// another Group; appends `context.forwarded` to both.
#[utoipa::path(post, path = "/v1/context/{package_id}/forward", params(("package_id" = String, Path)),
    request_body(content = String, description = "{toGroupId, version?}", content_type = "application/json"),
    responses((status = 201, description = "{contextId, fromGroupId, fromSequence, toGroupId, toSequence}"), (status = 200, description = "already forwarded"),
              (status = 400, description = "bad_request"), (status = 403, description = "not_a_member, forbidden: the forwarder is not a coordinator of both Groups"),
              (status = 404, description = "not_found"), (status = 409, description = "classification_forbids, conflict")))]
pub(crate) async fn forward(
    State(state): State<AppState>,
    caller: Caller,
    package_id: RawPath,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let package_id = path_id("packageId", package_id)?;
    let bytes = read_json(&headers, body).await?;
    let request: ForwardRequest = parse_body(&bytes, ErrorCode::BadRequest)?;
    // The answer commits with the forward (several servers, as for a publication).
    super::idempotency::answer_with(
        |(answer, created): &(weft_api::context::ContextForwardedAnswer, bool)| {
            (created_or_ok(*created), answer.clone())
        },
    );
    let (answer, created) = state
        .store
        .context()
        .forward_context(
            package_id,
            request,
            match &caller {
                Caller::Agent(session) => Some(session),
                Caller::Admin => None,
            },
        )
        .await?;
    Ok(json(created_or_ok(created), &answer))
}

/// CTX-8: what a Worker's global Scheduler may inspect of a WorkItem, and no content.
#[utoipa::path(get, path = "/v1/workitems/{work_item_id}/scheduling", params(("work_item_id" = String, Path)),
    responses((status = 200, description = "{workItemId, groupId, missionId, state, eligible, urgency, priorityClass, deadline, businessImpact, risk, approvalRequired, budget, dependsOn, classification}"),
              (status = 404, description = "unknown_work_item")))]
pub(crate) async fn scheduling(
    State(state): State<AppState>,
    caller: Caller,
    id: RawPath,
) -> HttpResult<Response> {
    let id = path_id("workItemId", id)?;
    let reader = caller.reader();
    let item = state.store.work().work_item(id, &reader).await?;
    let mission = state
        .store
        .work()
        .mission(Id::parse("missionId", &item.mission_id)?, &reader)
        .await?;
    let mut classification = Classification::Internal;
    for input in &item.contract.inputs {
        // An input the caller cannot see adds nothing: it learns no more than it may. One
        // whose every visible record a policy disposed of (issue #46) counts as restricted:
        // never a lower classification than its signed manifests said.
        let view = match state
            .store
            .artifacts()
            .artifact(Digest::Blake3(*input), &reader)
            .await
        {
            Ok(view) => view,
            Err(error) if error.code() == ErrorCode::Disposed => {
                classification = Classification::Restricted;
                continue;
            }
            Err(_) => continue,
        };
        let tombstones = view
            .disposed_manifests
            .iter()
            .filter_map(|d| d.classification);
        for class in view
            .manifests
            .iter()
            .map(|record| record.manifest.classification)
            .chain(tombstones)
        {
            if class.rank() > classification.rank() {
                classification = class;
            }
        }
    }
    let contract = &item.contract;
    let view = SchedulingView {
        work_item_id: item.work_item_id,
        group_id: item.group_id,
        mission_id: item.mission_id,
        state: item.state,
        eligible: item.eligible,
        urgency: contract.urgency,
        priority_class: mission.priority_class,
        deadline: contract.deadline,
        business_impact: contract.business_impact,
        risk: contract.risk,
        approval_required: contract.approval_required,
        budget: item.budget,
        depends_on: item.depends_on,
        classification,
    };
    Ok(json(StatusCode::OK, &view))
}
