//! Blob uploads and existence checks. Bodies stream straight into the store; the server hashes
//! every byte and never trusts a client's digest.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use weft_api::views::UploadReceipt;
use weft_api::work::views::TokenScope;
use weft_api::{Digest, ErrorCode};
use weft_storage::Uploader;

use super::answer::json;
use super::auth::Bearer;
use super::auth::Caller;
use super::body::{check_declared_length, upload_stream};
use super::error::{HttpError, HttpResult};
use super::params::{RawPath, path_digest};
use super::state::AppState;

async fn upload(
    state: AppState,
    caller: Bearer,
    expected: Option<Digest>,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let limits = state.limits.clone();
    check_declared_length(&headers, limits.max_upload_bytes)?;
    let counted = upload_stream(body, limits.body_idle_timeout).inspect(|chunk| {
        if let Ok(chunk) = chunk {
            metrics::counter!("weft_upload_bytes_total").increment(chunk.len() as u64);
        }
    });
    let uploader = match &caller {
        Bearer::Caller(Caller::Admin) => Uploader::Admin,
        Bearer::Caller(Caller::Agent(session)) => Uploader::Agent(session),
        // LSE-6: a capability token uploads only with `blob:write`, as its lease's owner.
        Bearer::Token(grant) => {
            grant.require(TokenScope::BlobWrite)?;
            Uploader::Token(grant)
        }
    };
    let outcome = state
        .store
        .artifacts()
        .upload(counted, expected, uploader)
        .await;
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(error) => {
            metrics::counter!("weft_uploads_total", "outcome" => error.code().as_str())
                .increment(1);
            return Err(error.into());
        }
    };
    metrics::counter!("weft_uploads_total", "outcome" => "ok").increment(1);
    Ok(stored(outcome))
}

/// The answer to a completed upload, one-shot or resumable: 201 with the digests, or 200 when
/// the caller could already see these bytes.
pub(crate) fn stored(outcome: weft_storage::UploadOutcome) -> Response {
    let digests = outcome.digests;
    // "Already present" only to a caller who could already see these bytes; anyone else gets
    // the same answer as for new bytes, so uploads are no existence oracle across Groups.
    let status = if outcome.already_visible {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    let receipt = UploadReceipt {
        blake3: digests.blake3,
        sha256: digests.sha256,
        size: digests.size,
    };
    let mut response = json(status, &receipt);
    if let Ok(location) = HeaderValue::from_str(&format!("/v1/blobs/{}", digests.blake3)) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// Streams bytes that must hash to `{digest}`; nothing is kept on mismatch.
#[utoipa::path(put, path = "/v1/blobs/{digest}", params(("digest" = String, Path, description = "blake3:<hex> or sha256:<hex>")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses((status = 201, description = "stored: {blake3, sha256, size}"), (status = 200, description = "already present and visible to you"),
              (status = 400, description = "digest_mismatch, invalid_digest, incomplete_body"), (status = 401, description = "unauthorized: a capability token past its lease, expiry or revocation"), (status = 403, description = "forbidden: an auditor may not upload, or a capability token without blob:write"),
              (status = 413, description = "body_too_large"), (status = 429, description = "too_many_uploads, upload_quota_exceeded (Retry-After)"), (status = 507, description = "quota_exceeded: the Group's quota"),
              (status = 503, description = "overloaded (Retry-After)")))]
pub(crate) async fn upload_named(
    State(state): State<AppState>,
    caller: Bearer,
    digest: RawPath,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let expected = path_digest(digest)?;
    upload(state, caller, Some(expected), headers, body).await
}

/// Streams bytes without a claimed digest; the answer carries the computed digests.
#[utoipa::path(post, path = "/v1/blobs", request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses((status = 201, description = "{blake3, sha256, size}"), (status = 200, description = "already present and visible to you"), (status = 401, description = "unauthorized: a capability token past its lease, expiry or revocation"), (status = 403, description = "forbidden: an auditor may not upload, or a capability token without blob:write"),
              (status = 413, description = "body_too_large"), (status = 429, description = "too_many_uploads, upload_quota_exceeded (Retry-After)"), (status = 507, description = "quota_exceeded: the Group's quota"),
              (status = 503, description = "overloaded (Retry-After)")))]
pub(crate) async fn upload_unnamed(
    State(state): State<AppState>,
    caller: Bearer,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    upload(state, caller, None, headers, body).await
}

/// Whether a blob exists, scoped to what the caller may know.
#[utoipa::path(head, path = "/v1/blobs/{digest}", params(("digest" = String, Path)),
    responses((status = 200, description = "exists and is visible to you"), (status = 404, description = "absent or not visible")))]
pub(crate) async fn head(
    State(state): State<AppState>,
    caller: Caller,
    digest: RawPath,
) -> HttpResult<Response> {
    let digest = path_digest(digest)?;
    match state
        .store
        .artifacts()
        .blob(digest, &caller.reader())
        .await?
    {
        Some(digests) => {
            let mut response = StatusCode::OK.into_response();
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(digests.size));
            if let Ok(etag) = HeaderValue::from_str(&format!("\"{}\"", digests.blake3)) {
                headers.insert(header::ETAG, etag);
            }
            Ok(response)
        }
        None => Err(HttpError::new(
            ErrorCode::NotFound,
            "no such blob is visible to you",
        )),
    }
}
