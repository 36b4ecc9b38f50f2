//! Resumable uploads, as OCI distribution does them: `POST /v1/uploads` starts a session in
//! the caller's Group, `PATCH /v1/uploads/{id}` appends a chunk at the durable offset,
//! `HEAD /v1/uploads/{id}` answers that offset, `PUT /v1/uploads/{id}?digest=…` (optionally
//! with a last chunk) verifies and stores the blob, `DELETE` cancels.
//!
//! Offsets travel as `Upload-Offset: <bytes held>` (authoritative) and, for OCI clients, as
//! `Range: 0-<last byte held>` (`0-0` when empty, as registries answer). A chunk names where it
//! starts with `Content-Range: <start>-<end>` (inclusive; `bytes <start>-<end>/<total>` too)
//! or `Upload-Offset: <start>`. Only the Agent and Group that started a session see it, and
//! of capability tokens only those of the lease whose token started it; for anyone else it
//! does not exist (`not_found`).

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use weft_api::views::UploadSession;
use weft_api::work::views::TokenScope;
use weft_api::{Digest, ErrorCode};
use weft_storage::Uploader;

use super::answer::json;
use super::auth::{Bearer, Caller};
use super::body::{check_declared_length, upload_stream};
use super::error::{HttpError, HttpResult};
use super::params::{RawPath, RawQuery, known_params, path_id};
use super::state::AppState;

/// The query parameters of the finish.
pub(super) const FINISH_QUERY: &[&str] = &["digest"];

/// The header carrying a session's durable offset, and a chunk's start.
const UPLOAD_OFFSET: HeaderName = HeaderName::from_static("upload-offset");

/// Whoever may touch upload sessions: an Agent session, or a capability token with
/// `blob:write`, which reaches only the upload sessions of its own lease. The operator
/// uploads in one request.
fn uploader(caller: &Bearer) -> Result<Uploader<'_>, HttpError> {
    match caller {
        Bearer::Caller(Caller::Agent(session)) => Ok(Uploader::Agent(session)),
        Bearer::Caller(Caller::Admin) => Err(HttpError::new(
            ErrorCode::Forbidden,
            "resumable uploads belong to an Agent session; the operator uploads with POST /v1/blobs",
        )),
        Bearer::Token(grant) => {
            grant.require(TokenScope::BlobWrite)?;
            Ok(Uploader::Token(grant))
        }
    }
}

fn upload_id(raw: RawPath) -> Result<String, HttpError> {
    Ok(path_id("uploadId", raw)?.as_str().to_owned())
}

/// `Location`, `Upload-Offset` and `Range` of a session, on any answer.
fn offset_headers(headers: &mut HeaderMap, session: &UploadSession) {
    if let Ok(location) = HeaderValue::from_str(&format!("/v1/uploads/{}", session.upload_id)) {
        headers.insert(header::LOCATION, location);
    }
    headers.insert(UPLOAD_OFFSET, HeaderValue::from(session.offset));
    let last = session.offset.saturating_sub(1);
    if let Ok(range) = HeaderValue::from_str(&format!("0-{last}")) {
        headers.insert(header::RANGE, range);
    }
}

fn session_answer(status: StatusCode, session: &UploadSession) -> Response {
    let mut response = json(status, session);
    offset_headers(response.headers_mut(), session);
    response
}

/// Where a chunk starts and, with `Content-Range`, how long it is.
fn chunk_start(headers: &HeaderMap) -> Result<Option<(u64, Option<u64>)>, HttpError> {
    let bad = |why: &str| HttpError::new(ErrorCode::BadRequest, why.to_owned());
    if let Some(value) = headers.get(header::CONTENT_RANGE) {
        let text = value
            .to_str()
            .map_err(|_| bad("Content-Range is not ASCII"))?;
        let span = text.strip_prefix("bytes ").unwrap_or(text);
        let span = span.split_once('/').map_or(span, |(span, _total)| span);
        let (start, end) = span
            .split_once('-')
            .and_then(|(start, end)| Some((strict_u64(start)?, strict_u64(end)?)))
            .filter(|(start, end)| end >= start)
            .ok_or_else(|| {
                bad("Content-Range must be <start>-<end>, end inclusive and not before start")
            })?;
        return Ok(Some((start, Some(end - start + 1))));
    }
    match headers.get(&UPLOAD_OFFSET) {
        None => Ok(None),
        Some(value) => value
            .to_str()
            .ok()
            .and_then(strict_u64)
            .map(|start| Some((start, None)))
            .ok_or_else(|| bad("Upload-Offset must be a non-negative integer")),
    }
}

fn strict_u64(text: &str) -> Option<u64> {
    (!text.is_empty() && text.len() <= 20 && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// The request body as a chunk stream, bounded by the idle timeout, that fails (so nothing of
/// it is kept) unless it holds exactly `length` bytes when a length was declared.
fn chunk_stream(
    state: &AppState,
    headers: &HeaderMap,
    start: u64,
    length: Option<u64>,
    body: Body,
) -> Result<impl Stream<Item = Result<Bytes, std::io::Error>> + Send + use<>, HttpError> {
    let limit = state.limits.max_upload_bytes;
    check_declared_length(headers, limit)?;
    if let Some(length) = length
        && start.saturating_add(length) > limit
    {
        return Err(HttpError::new(
            ErrorCode::BodyTooLarge,
            format!("uploads are limited to {limit} bytes"),
        ));
    }
    let mut seen = 0u64;
    let short = |seen: u64, length: u64| {
        std::io::Error::other(format!(
            "Content-Range declares {length} bytes, the body held {seen}"
        ))
    };
    let body = upload_stream(body, state.limits.body_idle_timeout)
        .map(Some)
        .chain(futures::stream::once(async { None }))
        .filter_map(move |item| {
            let checked = match (item, length) {
                (Some(Ok(chunk)), Some(length)) => {
                    seen += chunk.len() as u64;
                    if seen > length {
                        Some(Err(short(seen, length)))
                    } else {
                        Some(Ok(chunk))
                    }
                }
                (Some(other), _) => Some(other),
                (None, Some(length)) if seen != length => Some(Err(short(seen, length))),
                (None, _) => None,
            };
            if let Some(Ok(chunk)) = &checked {
                metrics::counter!("weft_upload_bytes_total").increment(chunk.len() as u64);
            }
            async move { checked }
        });
    Ok(body)
}

/// Renders a refusal; an offset mismatch carries the current offset in its headers.
async fn refusal(
    state: &AppState,
    error: weft_storage::Error,
    upload_id: &str,
    uploader: Uploader<'_>,
) -> Response {
    let code = error.code();
    let mut response = HttpError::from(error).into_response();
    if code == ErrorCode::UploadOffsetMismatch
        && let Ok(current) = state
            .store
            .artifacts()
            .upload_offset(upload_id, uploader)
            .await
    {
        offset_headers(response.headers_mut(), &current);
    }
    response
}

/// Starts a resumable upload in the caller's Group.
#[utoipa::path(post, path = "/v1/uploads",
    responses((status = 202, description = "{uploadId, offset: 0}; Location: /v1/uploads/{uploadId}, Upload-Offset: 0, Range: 0-0"),
              (status = 401, description = "unauthorized, stale_session"), (status = 403, description = "forbidden: the operator, an auditor, or a capability token without blob:write"),
              (status = 429, description = "too_many_uploads: 64 sessions of this agent, or 16 of this capability token's lease, are open")))]
pub(crate) async fn start(State(state): State<AppState>, caller: Bearer) -> HttpResult<Response> {
    let started = state
        .store
        .artifacts()
        .start_upload(uploader(&caller)?)
        .await?;
    Ok(session_answer(StatusCode::ACCEPTED, &started))
}

/// The durable offset of one of your upload sessions.
#[utoipa::path(head, path = "/v1/uploads/{upload_id}", params(("upload_id" = String, Path)),
    responses((status = 204, description = "Upload-Offset: <bytes held>, Range: 0-<last byte held>"),
              (status = 404, description = "not_found: no such session of yours")))]
pub(crate) async fn offset(
    State(state): State<AppState>,
    caller: Bearer,
    raw: RawPath,
) -> HttpResult<Response> {
    let uploader = uploader(&caller)?;
    let id = upload_id(raw)?;
    let current = state.store.artifacts().upload_offset(&id, uploader).await?;
    let mut response = StatusCode::NO_CONTENT.into_response();
    offset_headers(response.headers_mut(), &current);
    Ok(response)
}

/// Appends a chunk at the durable offset; durable before the answer.
#[utoipa::path(patch, path = "/v1/uploads/{upload_id}", params(("upload_id" = String, Path),
        ("Content-Range" = String, Header, description = "<start>-<end>, end inclusive (or send Upload-Offset: <start>)")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses((status = 202, description = "{uploadId, offset}; Upload-Offset, Range, Location"),
              (status = 400, description = "bad_request (no or malformed Content-Range), incomplete_body (fewer or more bytes than declared)"),
              (status = 404, description = "not_found"), (status = 409, description = "conflict: another request is writing to this session"),
              (status = 413, description = "body_too_large: the upload would exceed --max-upload-bytes"),
              (status = 416, description = "upload_offset_mismatch: the chunk does not start at the durable offset (sent back in Upload-Offset)"),
              (status = 429, description = "too_many_uploads, upload_quota_exceeded"), (status = 507, description = "quota_exceeded: the Group's quota")))]
pub(crate) async fn append(
    State(state): State<AppState>,
    caller: Bearer,
    raw: RawPath,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let uploader = uploader(&caller)?;
    let id = upload_id(raw)?;
    // Someone else's session, or none, is `not_found` whatever the headers say.
    state.store.artifacts().upload_offset(&id, uploader).await?;
    let (start, length) = chunk_start(&headers)?.ok_or_else(|| {
        HttpError::new(
            ErrorCode::BadRequest,
            "say where the chunk starts: Content-Range: <start>-<end> or Upload-Offset: <start>",
        )
    })?;
    let chunk = chunk_stream(&state, &headers, start, length, body)?;
    match state
        .store
        .artifacts()
        .append_upload(&id, start, chunk, uploader)
        .await
    {
        Ok(current) => Ok(session_answer(StatusCode::ACCEPTED, &current)),
        Err(error) => Ok(refusal(&state, error, &id, uploader).await),
    }
}

/// Verifies the whole upload against `digest` and stores it as a blob (a last chunk may come
/// with it); on a mismatch the session is discarded.
#[utoipa::path(put, path = "/v1/uploads/{upload_id}", params(("upload_id" = String, Path),
        ("digest" = String, Query, description = "blake3:<hex> or sha256:<hex> of the whole upload")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "an optional last chunk"),
    responses((status = 201, description = "stored: {blake3, sha256, size}; Location: /v1/blobs/{digest}"), (status = 200, description = "already present and visible to you"),
              (status = 400, description = "digest_mismatch (the session is discarded), invalid_digest, bad_request"),
              (status = 404, description = "not_found"), (status = 409, description = "conflict"), (status = 413, description = "body_too_large"),
              (status = 416, description = "upload_offset_mismatch"), (status = 429, description = "too_many_uploads, upload_quota_exceeded"), (status = 507, description = "quota_exceeded: the Group's quota")))]
pub(crate) async fn finish(
    State(state): State<AppState>,
    caller: Bearer,
    raw: RawPath,
    query: RawQuery,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let uploader = uploader(&caller)?;
    let id = upload_id(raw)?;
    let query = known_params(query, FINISH_QUERY)?;
    let digest = query.get("digest").ok_or_else(|| {
        HttpError::new(
            ErrorCode::BadRequest,
            "name the upload's digest: ?digest=blake3:<hex>",
        )
    })?;
    let expected = Digest::parse(digest)?;
    let declared_empty = headers
        .get(header::CONTENT_LENGTH)
        .is_some_and(|value| value.as_bytes() == b"0");
    let last_chunk = match chunk_start(&headers)? {
        Some((start, length)) => Some((start, length)),
        None if declared_empty => None,
        // A last chunk without a range goes where the upload stands now.
        None => Some((
            state
                .store
                .artifacts()
                .upload_offset(&id, uploader)
                .await?
                .offset,
            None,
        )),
    };
    let last_chunk = match last_chunk {
        Some((start, length)) => {
            Some((start, chunk_stream(&state, &headers, start, length, body)?))
        }
        None => None,
    };
    match state
        .store
        .artifacts()
        .finish_upload(&id, expected, last_chunk, uploader)
        .await
    {
        Ok(outcome) => {
            metrics::counter!("weft_uploads_total", "outcome" => "ok").increment(1);
            Ok(super::blobs::stored(outcome))
        }
        Err(error) => {
            metrics::counter!("weft_uploads_total", "outcome" => error.code().as_str())
                .increment(1);
            Ok(refusal(&state, error, &id, uploader).await)
        }
    }
}

/// Cancels one of your upload sessions and removes its bytes.
#[utoipa::path(delete, path = "/v1/uploads/{upload_id}", params(("upload_id" = String, Path)),
    responses((status = 204, description = "cancelled"), (status = 404, description = "not_found"), (status = 409, description = "conflict")))]
pub(crate) async fn cancel(
    State(state): State<AppState>,
    caller: Bearer,
    raw: RawPath,
) -> HttpResult<Response> {
    let uploader = uploader(&caller)?;
    let id = upload_id(raw)?;
    state.store.artifacts().cancel_upload(&id, uploader).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
