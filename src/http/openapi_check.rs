//! The OpenAPI document checked against the router (tests only).
//!
//! Both sides come from one place: `super::routes()` is the table `app` builds its router
//! from, and the document is what `GET /v1/openapi.json` serves. The checks: the same
//! (method, path template) pairs under `/v1/` on both sides, every documented operation
//! reachable on the real router, and every documented status one the server can answer.

use std::collections::BTreeSet;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt as _;
use weft_api::ErrorCode;
use weft_storage::Store;

use super::error::status_of;
use super::{AppState, app, meta, routes};
use crate::config::Config;

/// Every error code. The match below stops compiling when a code is added, as a reminder to
/// list it here too.
const EVERY_CODE: [ErrorCode; 75] = {
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
        C::UploadQuotaExceeded,
        C::RateLimited,
        C::Overloaded,
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
        | C::UploadQuotaExceeded
        | C::RateLimited
        | C::Overloaded
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
        .map(|route| (route.method.to_string(), route.path.to_owned()))
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
