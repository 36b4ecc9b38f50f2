//! The OpenAPI document checked against the router (tests only). Long because it holds the
//! table of every route's query parameters beside the checks that read it.
//!
//! Both sides come from one place: `super::routes()` is the table `app` builds its router
//! from, and the document is what `GET /v1/openapi.json` serves. The checks: the same
//! (method, path template) pairs under `/v1/` on both sides, every documented operation
//! reachable on the real router, every documented status one the server can answer (errors
//! as problem+json), the bearer requirement on exactly the non-public operations (and the
//! server answering `401` there), every query parameter a handler accepts documented, and
//! JSON bodies and path parameters with real schemas. Schemathesis (`tests/e2e`) then checks
//! the document against the running server.

use std::collections::BTreeSet;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt as _;
use weft_api::ErrorCode;
use weft_storage::Store;

use super::error::status_of;
use super::state::AppState;
use super::{app, meta, openapi, routes};
use crate::config::Config;

/// Every error code. The match below stops compiling when a code is added, as a reminder to
/// list it here too.
const EVERY_CODE: [ErrorCode; 85] = {
    use ErrorCode as C;
    [
        C::BadRequest,
        C::InvalidDigest,
        C::InvalidId,
        C::InvalidJson,
        C::InvalidManifest,
        C::InvalidEvidence,
        C::InvalidRange,
        C::DigestMismatch,
        C::BodyTooLarge,
        C::IncompleteBody,
        C::Timeout,
        C::Unauthorized,
        C::Forbidden,
        C::StaleSession,
        C::StaleMembership,
        C::AgentDeactivated,
        C::KeyRetired,
        C::NotFound,
        C::BlobNotFound,
        C::MethodNotAllowed,
        C::UnsupportedMediaType,
        C::UnknownAgent,
        C::UnknownKey,
        C::UnknownGroup,
        C::NotAMember,
        C::BadSignature,
        C::WrongPayloadType,
        C::ProducerMismatch,
        C::UnknownSource,
        C::UnknownArtifact,
        C::UnknownEvidence,
        C::UnknownWorkItem,
        C::SupersedesMismatch,
        C::MissionMismatch,
        C::CursorAhead,
        C::CursorTooOld,
        C::NoPath,
        C::IdempotencyKeyReused,
        C::Cycle,
        C::Conflict,
        C::ClockSkew,
        C::NonceReused,
        C::IntegrityFailure,
        C::ShuttingDown,
        C::TooManyUploads,
        C::TooManyDownloads,
        C::TooManyStreams,
        C::PreconditionFailed,
        C::UploadQuotaExceeded,
        C::RateLimited,
        C::QuotaExceeded,
        C::Overloaded,
        C::InsufficientStorage,
        C::StorageUnavailable,
        C::BlobStoreUnavailable,
        C::InvalidCommand,
        C::GroupMismatch,
        C::UnknownExtension,
        C::IllegalTransition,
        C::StaleRevision,
        C::StaleLease,
        C::OfferExpired,
        C::OfferWithdrawn,
        C::NotEligible,
        C::ApprovalRequired,
        C::EvidenceMissing,
        C::BudgetExceeded,
        C::OfflineBindingMismatch,
        C::OfflineOutsideGrace,
        C::OfflineLeaseClosed,
        C::OfflineOwnerChanged,
        C::OfflineWrongWorkItem,
        C::NotReusable,
        C::InvalidContext,
        C::ContextPreviousMismatch,
        C::ContextVersionSkipped,
        C::ContextOtherPackage,
        C::ContextOtherMission,
        C::EventsOutOfRange,
        C::ClassificationForbids,
        C::UploadOffsetMismatch,
        C::Disposed,
        C::Held,
        C::CommandExpired,
        C::Internal,
    ]
};

#[allow(dead_code)]
fn every_code_is_listed(code: ErrorCode) {
    use ErrorCode as C;
    match code {
        C::BadRequest
        | C::InvalidDigest
        | C::InvalidId
        | C::InvalidJson
        | C::InvalidManifest
        | C::InvalidEvidence
        | C::InvalidRange
        | C::DigestMismatch
        | C::BodyTooLarge
        | C::IncompleteBody
        | C::Timeout
        | C::Unauthorized
        | C::Forbidden
        | C::StaleSession
        | C::StaleMembership
        | C::AgentDeactivated
        | C::KeyRetired
        | C::NotFound
        | C::BlobNotFound
        | C::MethodNotAllowed
        | C::UnsupportedMediaType
        | C::UnknownAgent
        | C::UnknownKey
        | C::UnknownGroup
        | C::NotAMember
        | C::BadSignature
        | C::WrongPayloadType
        | C::ProducerMismatch
        | C::UnknownSource
        | C::UnknownArtifact
        | C::UnknownEvidence
        | C::UnknownWorkItem
        | C::SupersedesMismatch
        | C::MissionMismatch
        | C::CursorAhead
        | C::CursorTooOld
        | C::NoPath
        | C::IdempotencyKeyReused
        | C::Cycle
        | C::Conflict
        | C::ClockSkew
        | C::NonceReused
        | C::IntegrityFailure
        | C::ShuttingDown
        | C::TooManyUploads
        | C::TooManyDownloads
        | C::TooManyStreams
        | C::PreconditionFailed
        | C::UploadQuotaExceeded
        | C::RateLimited
        | C::QuotaExceeded
        | C::Overloaded
        | C::InsufficientStorage
        | C::StorageUnavailable
        | C::BlobStoreUnavailable
        | C::InvalidCommand
        | C::GroupMismatch
        | C::UnknownExtension
        | C::IllegalTransition
        | C::StaleRevision
        | C::StaleLease
        | C::OfferExpired
        | C::OfferWithdrawn
        | C::NotEligible
        | C::ApprovalRequired
        | C::EvidenceMissing
        | C::BudgetExceeded
        | C::OfflineBindingMismatch
        | C::OfflineOutsideGrace
        | C::OfflineLeaseClosed
        | C::OfflineOwnerChanged
        | C::OfflineWrongWorkItem
        | C::NotReusable
        | C::InvalidContext
        | C::ContextPreviousMismatch
        | C::ContextVersionSkipped
        | C::ContextOtherPackage
        | C::ContextOtherMission
        | C::EventsOutOfRange
        | C::ClassificationForbids
        | C::UploadOffsetMismatch
        | C::Disposed
        | C::Held
        | C::CommandExpired
        | C::Internal => {}
    }
}

/// What `GET /v1/openapi.json` serves, parsed.
async fn document() -> Value {
    let response = meta::openapi().await;
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(response.into_body(), 4 * 1024 * 1024)
        .await
        .expect("the document fits");
    serde_json::from_slice(&bytes).expect("the document is JSON")
}

/// Every documented operation: (method, path template, statuses).
fn operations(document: &Value) -> Vec<(Method, String, Vec<String>)> {
    let paths = document["paths"].as_object().expect("paths");
    let mut found = Vec::new();
    for (path, item) in paths {
        for (method, operation) in item.as_object().expect("path item") {
            let Ok(method) = Method::from_bytes(method.to_ascii_uppercase().as_bytes()) else {
                continue;
            };
            if !matches!(
                method,
                Method::GET
                    | Method::HEAD
                    | Method::POST
                    | Method::PUT
                    | Method::PATCH
                    | Method::DELETE
            ) {
                // `parameters`, `summary` and friends are path-item fields, not operations.
                continue;
            }
            let statuses = operation["responses"]
                .as_object()
                .map(|responses| responses.keys().cloned().collect())
                .unwrap_or_default();
            found.push((method, path.clone(), statuses));
        }
    }
    found
}

#[tokio::test]
async fn the_document_and_the_router_list_the_same_v1_routes() {
    let document = document().await;
    let documented: BTreeSet<(String, String)> = operations(&document)
        .into_iter()
        .map(|(method, path, _)| (method.to_string(), path))
        .collect();
    let served: BTreeSet<(String, String)> = routes()
        .into_iter()
        .filter(|route| route.path.starts_with("/v1/"))
        // A trailing wildcard (`{*path}`) is one parameter in the document.
        .map(|route| (route.method.to_string(), route.path.replace("{*", "{")))
        .collect();
    let undocumented: Vec<_> = served.difference(&documented).collect();
    let unserved: Vec<_> = documented
        .iter()
        .filter(|(_, path)| path.starts_with("/v1/"))
        .filter(|operation| !served.contains(*operation))
        .collect();
    assert!(
        undocumented.is_empty(),
        "served but not in /v1/openapi.json: {undocumented:?}"
    );
    assert!(
        unserved.is_empty(),
        "in /v1/openapi.json but not in the route table: {unserved:?}"
    );
}

/// The route table is what the router serves: every documented operation reaches a handler,
/// not the not-found or method-not-allowed fallback.
#[tokio::test]
async fn every_documented_operation_reaches_a_handler() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = Config::with_data_dir(dir.path().to_path_buf());
    config.in_memory = true;
    let store = Store::open(config.storage_options())
        .await
        .expect("store opens");
    let app = app(AppState::new(
        store,
        "admin-token-for-openapi-checks",
        &config,
    ));
    for (method, template, _) in operations(&document().await) {
        // Any segment will do: no credentials are sent, so handlers refuse before parsing it.
        let uri: String = template
            .split('/')
            .map(|segment| {
                if segment.starts_with('{') {
                    "x"
                } else {
                    segment
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        let request = Request::builder()
            .method(method.clone())
            .uri(&uri)
            .body(Body::empty())
            .expect("request builds");
        let response = app.clone().oneshot(request).await.expect("infallible");
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1024 * 1024)
            .await
            .unwrap_or_default();
        let detail = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|problem| problem["detail"].as_str().map(str::to_owned));
        let fallback = status == StatusCode::METHOD_NOT_ALLOWED
            || (status == StatusCode::NOT_FOUND && detail.as_deref() == Some("no such route"))
            // HEAD answers carry no body, so a 404 there cannot be told apart: refuse it.
            || (status == StatusCode::NOT_FOUND && method == Method::HEAD);
        assert!(
            !fallback,
            "{method} {uri} ({template}) is documented but answers {status} {detail:?}"
        );
    }
}

#[tokio::test]
async fn every_documented_status_is_one_the_server_answers() {
    // Successes are answered by the handlers themselves: 2xx, and 304 for a conditional GET.
    let mut possible: BTreeSet<u16> = (200..300).collect();
    possible.insert(StatusCode::NOT_MODIFIED.as_u16());
    possible.extend(EVERY_CODE.iter().map(|code| status_of(*code).as_u16()));
    let mut impossible = Vec::new();
    for (method, path, statuses) in operations(&document().await) {
        for status in statuses {
            let known = status.parse::<u16>().is_ok_and(|s| possible.contains(&s));
            if !known {
                impossible.push(format!("{method} {path}: {status}"));
            }
        }
    }
    assert!(
        impossible.is_empty(),
        "statuses no code maps to (see http/error.rs): {impossible:?}"
    );
}

/// Every operation either needs the bearer token or is on the public list, and the public
/// list names only documented operations.
#[tokio::test]
async fn every_operation_declares_its_security() {
    let document = document().await;
    assert!(
        document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer",
        "the bearer scheme is declared"
    );
    let mut public_seen = BTreeSet::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let security = &operation["security"];
            if openapi::is_public(method, path) {
                public_seen.insert((method.clone(), path.clone()));
                assert!(security.is_null(), "{method} {path} is public: {security}");
            } else {
                assert_eq!(
                    security,
                    &serde_json::json!([{"bearer": []}]),
                    "{method} {path} needs the bearer token"
                );
            }
        }
    }
    assert_eq!(public_seen.len(), openapi::PUBLIC.len(), "{public_seen:?}");
}

/// The public operations answer without a token; every other one answers `401` with a
/// `WWW-Authenticate` challenge, so the document's security is what the server does.
#[tokio::test]
async fn the_declared_security_is_what_the_server_enforces() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = Config::with_data_dir(dir.path().to_path_buf());
    config.in_memory = true;
    let store = Store::open(config.storage_options())
        .await
        .expect("store opens");
    let app = app(AppState::new(
        store,
        "admin-token-for-openapi-checks",
        &config,
    ));
    for (method, template, _) in operations(&document().await) {
        let uri = template.replace("{digest}", &format!("blake3:{}", "a".repeat(64)));
        let uri: String = uri
            .split('/')
            .map(|segment| {
                if segment.starts_with('{') {
                    "x"
                } else {
                    segment
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        let request = Request::builder()
            .method(method.clone())
            .uri(&uri)
            .body(Body::empty())
            .expect("request builds");
        let response = app.clone().oneshot(request).await.expect("infallible");
        let public = openapi::is_public(&method.as_str().to_ascii_lowercase(), &template);
        if public {
            assert_ne!(
                response.status(),
                StatusCode::UNAUTHORIZED,
                "{method} {template}"
            );
        } else {
            assert_eq!(
                response.status(),
                StatusCode::UNAUTHORIZED,
                "{method} {template}"
            );
            assert!(
                response.headers().contains_key("www-authenticate"),
                "{method} {template}"
            );
        }
    }
}

/// Every error answer is declared as problem+json with the Problem schema, and every
/// operation declares the errors every route can answer.
#[tokio::test]
async fn every_error_is_declared_as_problem_json() {
    let document = document().await;
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let responses = operation["responses"].as_object().expect("responses");
            assert!(responses.contains_key("500"), "{method} {path}: 500");
            for (status, response) in responses {
                let code: u16 = status.parse().expect("numeric status");
                if code >= 400 {
                    assert_eq!(
                        response["content"]["application/problem+json"]["schema"]["$ref"],
                        "#/components/schemas/Problem",
                        "{method} {path} {status}"
                    );
                }
            }
        }
    }
}

/// The query parameters each route's handler accepts (`known_params` refuses any other).
fn accepted_query() -> Vec<(&'static str, &'static str, &'static [&'static str])> {
    use super::{artifacts, context, events, evidence, lineage};
    vec![
        ("get", "/v1/artifacts", artifacts::LIST_QUERY),
        ("post", "/v1/admin/gc", super::lifecycle::GC_QUERY),
        ("get", "/v1/admin/holds", super::lifecycle::HOLDS_QUERY),
        (
            "get",
            "/v1/groups/{group_id}/holds",
            super::lifecycle::GROUP_HOLDS_QUERY,
        ),
        (
            "get",
            "/v1/artifacts/{digest}/content",
            artifacts::CONTENT_QUERY,
        ),
        (
            "get",
            "/v1/context/{package_id}/events",
            context::EVENTS_QUERY,
        ),
        (
            "get",
            "/v1/context/{package_id}/provenance",
            context::PROVENANCE_QUERY,
        ),
        ("get", "/v1/groups/{group_id}/events", events::REPLAY_QUERY),
        (
            "get",
            "/v1/groups/{group_id}/tlog/proof/inclusion",
            super::tlog::INCLUSION_QUERY,
        ),
        (
            "get",
            "/v1/groups/{group_id}/tlog/proof/consistency",
            super::tlog::CONSISTENCY_QUERY,
        ),
        (
            "get",
            "/v1/groups/{group_id}/events/stream",
            events::STREAM_QUERY,
        ),
        (
            "get",
            "/v1/groups/{group_id}/cursors",
            events::CURSORS_QUERY,
        ),
        ("get", "/v1/evidence", evidence::LIST_QUERY),
        (
            "get",
            "/v1/artifacts/{digest}/evidence",
            evidence::FOR_ARTIFACT_QUERY,
        ),
        (
            "get",
            "/v1/workitems/{work_item_id}/criteria",
            evidence::CRITERIA_QUERY,
        ),
        (
            "get",
            "/v1/artifacts/{digest}/provenance",
            lineage::PROVENANCE_QUERY,
        ),
        (
            "get",
            "/v1/workitems/{work_item_id}/provenance",
            lineage::SCOPED_QUERY,
        ),
        (
            "get",
            "/v1/missions/{mission_id}/provenance",
            lineage::SCOPED_QUERY,
        ),
        ("get", "/v1/provenance/path", lineage::PATH_QUERY),
        (
            "get",
            "/v1/groups/{group_id}/commands/{command_id}",
            super::work::READ_COMMAND_QUERY,
        ),
        ("get", "/v1/provenance/impact", lineage::IMPACT_QUERY),
        (
            "get",
            "/v1/groups/{group_id}/agents/{agent_id}/events",
            super::events::ACTOR_QUERY,
        ),
        (
            "put",
            "/v1/uploads/{upload_id}",
            super::uploads::FINISH_QUERY,
        ),
    ]
}

/// Every query parameter a handler accepts is documented, with a schema, and nothing else is
/// (a route absent from `accepted_query` takes no query parameters).
#[tokio::test]
async fn every_accepted_query_parameter_is_documented() {
    let document = document().await;
    let accepted = accepted_query();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let documented: BTreeSet<&str> = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|parameter| parameter["in"] == "query")
                .map(|parameter| {
                    assert!(
                        parameter["schema"]["type"].is_string(),
                        "{method} {path}: {parameter} has a typed schema"
                    );
                    parameter["name"].as_str().expect("name")
                })
                .collect();
            let server: BTreeSet<&str> = accepted
                .iter()
                .find(|(m, p, _)| m == method && p == path)
                .map(|(_, _, names)| names.iter().copied().collect())
                .unwrap_or_default();
            assert_eq!(documented, server, "{method} {path}");
        }
    }
}

/// JSON bodies are objects with their schema (never utoipa's placeholder string), uploads
/// are binary strings under `application/octet-stream`, and every path parameter is an id, a
/// digest or an integer as its parser accepts it.
#[tokio::test]
async fn bodies_and_path_parameters_have_their_schemas() {
    let document = document().await;
    let resolve = |schema: &Value| -> Value {
        match schema["$ref"].as_str() {
            Some(reference) => {
                let name = reference.rsplit('/').next().expect("a name");
                document["components"]["schemas"][name].clone()
            }
            None => schema.clone(),
        }
    };
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let content = &operation["requestBody"]["content"];
            if let Some(json) = content.get("application/json") {
                let schema = resolve(&json["schema"]);
                assert_eq!(schema["type"], "object", "{method} {path}: {schema}");
                assert!(schema["required"].is_array(), "{method} {path}: {schema}");
            }
            if let Some(bytes) = content.get("application/octet-stream") {
                assert_eq!(
                    bytes["schema"],
                    serde_json::json!({"type": "string", "format": "binary"}),
                    "{method} {path}"
                );
            }
            for parameter in operation["parameters"].as_array().into_iter().flatten() {
                if parameter["in"] != "path" {
                    continue;
                }
                let schema = &parameter["schema"];
                let typed = schema["pattern"].is_string() || schema["type"] == "integer";
                assert!(typed, "{method} {path}: {parameter}");
            }
        }
    }
}
