//! `PUT /v1/artifacts/{digest}`: a publication with its bytes in one request (issue #15),
//! `multipart/form-data` (RFC 7578) with the part `manifest` (the DSSE envelope, JSON, at
//! most 1 MiB) first and the part `content` (the bytes) second, and nothing after them.
//!
//! Who may is decided from the bearer before a byte of the body is read (the operator never;
//! a capability token only with `blob:write` and `artifact:publish`; a session only as a
//! worker), and until the `content` part begins the body may hold at most
//! [`BEFORE_CONTENT`] bytes, so nobody makes the server buffer an unbounded preamble. The
//! content then streams through the upload path (`Store::publish_with_content`); a part
//! after it, or a body that does not end as multipart bodies end, fails the stream before
//! the transaction, so a malformed request never commits.
//!
//! Content-addressed and so idempotent by nature, like blob uploads: the same manifest again
//! answers 200 with its sequence (410 `disposed`, before any byte is staged, once its signed
//! record went by policy). `Idempotency-Key` is not read on this route.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::Response;
use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use weft_api::ErrorCode;
use weft_api::session::Role;
use weft_api::work::views::TokenScope;

use super::answer::json;
use super::auth::Bearer;
use super::auth::Caller;
use super::body::{MAX_JSON_BYTES, check_declared_length, created_or_ok, upload_stream};
use super::error::{HttpError, HttpResult};
use super::params::{RawPath, path_digest};
use super::state::AppState;

/// The parts, in this order.
const MANIFEST_PART: &str = "manifest";
const CONTENT_PART: &str = "content";

/// Most bytes the body may hold before the `content` part begins: the manifest, the parts'
/// headers, and what the parser reads ahead.
pub(crate) const BEFORE_CONTENT: u64 = 2 * MAX_JSON_BYTES as u64;

/// Publishes a signed manifest with its bytes in one request and one transaction: the bytes
/// stream through the ordinary upload path, are hashed on the way in, and must hash to
/// `{digest}` and to the manifest's content digests and size; the blob and the publication
/// commit together or not at all.
#[utoipa::path(put, path = "/v1/artifacts/{digest}", params(("digest" = String, Path, description = "blake3:<hex> or sha256:<hex> of the content")),
    request_body(content = String, description = "multipart/form-data: part `manifest` (DSSE envelope of an artifact manifest, application/json) first, part `content` (the bytes) second, nothing after", content_type = "multipart/form-data"),
    responses((status = 201, description = "{artifact, manifestId, sequence}"), (status = 200, description = "this manifest was already published"),
              (status = 400, description = "bad_request (parts missing, out of order, unknown, or after content), digest_mismatch, bad_signature, invalid_manifest, invalid_json, incomplete_body"), (status = 401, description = "unauthorized"),
              (status = 403, description = "producer_mismatch, not_a_member, forbidden: not a worker, the operator, or a capability token without blob:write and artifact:publish or for another WorkItem or lease"),
              (status = 408, description = "timeout: the body stalled"),
              (status = 409, description = "cycle; stale_lease (LSE-4/5; a fenced owner's manifest is kept as an inert audit record, OFL-2)"), (status = 413, description = "body_too_large: the content over the upload limit, or over 2 MiB before the content part"), (status = 507, description = "quota_exceeded: the Group's quota"),
              (status = 410, description = "disposed: this manifest was published, and its signed record went by a retention policy's keepRecords"), (status = 415, description = "unsupported_media_type: not multipart/form-data"), (status = 422, description = "unknown_source"), (status = 429, description = "too_many_uploads"), (status = 503, description = "overloaded")))]
pub(crate) async fn publish_with_content(
    State(state): State<AppState>,
    caller: Bearer,
    digest: RawPath,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let expected = path_digest(digest)?;
    // Who may, from the bearer alone, before a byte of the body is read (storage checks
    // again, against the Membership as it is in the transaction).
    let publisher = match &caller {
        Bearer::Caller(Caller::Admin) => {
            return Err(HttpError::new(
                ErrorCode::Forbidden,
                "the operator does not publish: a worker's session does",
            ));
        }
        Bearer::Caller(Caller::Agent(session)) => {
            require_worker(&session.roles)?;
            Publisher::Session(session)
        }
        Bearer::Token(grant) => {
            grant.require(TokenScope::BlobWrite)?;
            grant.require(TokenScope::ArtifactPublish)?;
            require_worker(&grant.session().roles)?;
            Publisher::Token(grant)
        }
    };
    let limits = state.limits.clone();
    check_declared_length(
        &headers,
        limits.max_upload_bytes.saturating_add(BEFORE_CONTENT),
    )?;
    let boundary = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| multer::parse_boundary(value).ok())
        .ok_or_else(|| {
            HttpError::new(
                ErrorCode::UnsupportedMediaType,
                "send multipart/form-data with the parts manifest and content",
            )
        })?;
    let constraints = multer::Constraints::new()
        .allowed_fields(vec![MANIFEST_PART, CONTENT_PART])
        // The content's limit is the upload path's own (`body_too_large` as on PUT /v1/blobs).
        .size_limit(multer::SizeLimit::new().for_field(MANIFEST_PART, MAX_JSON_BYTES as u64));
    let content_began = Arc::new(AtomicBool::new(false));
    let body = preamble_bounded(
        upload_stream(body, limits.body_idle_timeout),
        Arc::clone(&content_began),
    );
    let mut parts = multer::Multipart::with_constraints(body, boundary, constraints);
    let manifest = next_part(&mut parts, MANIFEST_PART).await?;
    let envelope_bytes = manifest.bytes().await.map_err(part_error)?;
    let envelope: weft_api::Envelope =
        weft_api::json::parse_strict(&envelope_bytes, ErrorCode::InvalidJson)?;
    let content = next_part(&mut parts, CONTENT_PART).await?;
    content_began.store(true, Ordering::Relaxed);
    let content = then_nothing(content, parts);
    let (published, created) = match publisher {
        Publisher::Session(session) => {
            state
                .store
                .artifacts()
                .publish_with_content(envelope, expected, content, session)
                .await?
        }
        // LSE-6: for the token's lease and WorkItem only.
        Publisher::Token(grant) => {
            state
                .store
                .artifacts()
                .publish_with_content_and_token(envelope, expected, content, grant)
                .await?
        }
    };
    Ok(json(created_or_ok(created), &published))
}

/// Who publishes: an Agent's session, or a capability token acting as its lease owner's.
enum Publisher<'a> {
    Session(&'a weft_storage::Session),
    Token(&'a weft_storage::Grant),
}

fn require_worker(roles: &[Role]) -> Result<(), HttpError> {
    if roles.contains(&Role::Worker) {
        Ok(())
    } else {
        Err(HttpError::new(
            ErrorCode::Forbidden,
            "only a worker of the session's Group publishes",
        ))
    }
}

/// `body`, failing once it has yielded more than [`BEFORE_CONTENT`] bytes while
/// `content_began` is still false.
fn preamble_bounded<S>(
    body: S,
    content_began: Arc<AtomicBool>,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static
where
    S: Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
{
    let read = AtomicU64::new(0);
    body.map(move |chunk| {
        let chunk = chunk?;
        let total = read.fetch_add(chunk.len() as u64, Ordering::Relaxed) + chunk.len() as u64;
        if total > BEFORE_CONTENT && !content_began.load(Ordering::Relaxed) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::FileTooLarge,
                "the body before the content part is over its limit",
            ));
        }
        Ok(chunk)
    })
}

/// The next part, which must be named `name`.
async fn next_part(
    parts: &mut multer::Multipart<'static>,
    name: &str,
) -> Result<multer::Field<'static>, HttpError> {
    match parts.next_field().await.map_err(part_error)? {
        Some(field) if field.name() == Some(name) => Ok(field),
        _ => Err(HttpError::new(
            ErrorCode::BadRequest,
            format!("the parts are {MANIFEST_PART} then {CONTENT_PART}; expected {name} here"),
        )),
    }
}

/// The content part's bytes, then the end of the body: a part after it, or a body that does
/// not end as a multipart body ends, is an error of the stream, so the upload fails before
/// its transaction.
fn then_nothing(
    content: multer::Field<'static>,
    parts: multer::Multipart<'static>,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    futures::stream::unfold(Some((Some(content), parts)), |state| async move {
        let (field, mut parts) = state?;
        if let Some(mut field) = field {
            match field.chunk().await {
                Ok(Some(chunk)) => return Some((Ok(chunk), Some((Some(field), parts)))),
                Ok(None) => drop(field),
                Err(error) => return Some((Err(part_io_error(error)), None)),
            }
        }
        match parts.next_field().await {
            Ok(None) => None,
            Ok(Some(_)) => Some((
                Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "a part after the content part",
                )),
                None,
            )),
            Err(error) => Some((Err(part_io_error(error)), None)),
        }
    })
}

/// A body that fails while its parts are read: its stall, its size, its end or its shape.
fn part_error(error: multer::Error) -> HttpError {
    match error {
        multer::Error::FieldSizeExceeded { .. } | multer::Error::StreamSizeExceeded { .. } => {
            HttpError::new(ErrorCode::BodyTooLarge, "a part is over its limit")
        }
        multer::Error::UnknownField { .. } => HttpError::new(
            ErrorCode::BadRequest,
            format!("the parts are {MANIFEST_PART} then {CONTENT_PART}"),
        ),
        multer::Error::StreamReadFailed(inner) => match inner.downcast_ref::<std::io::Error>() {
            Some(io) if io.kind() == std::io::ErrorKind::TimedOut => {
                HttpError::new(ErrorCode::Timeout, "the request body stalled")
            }
            Some(io) if io.kind() == std::io::ErrorKind::FileTooLarge => HttpError::new(
                ErrorCode::BodyTooLarge,
                format!("the body before the content part is limited to {BEFORE_CONTENT} bytes"),
            ),
            _ => HttpError::new(
                ErrorCode::IncompleteBody,
                "the request body ended before it was complete",
            ),
        },
        multer::Error::IncompleteFieldData { .. }
        | multer::Error::IncompleteHeaders
        | multer::Error::IncompleteStream => HttpError::new(
            ErrorCode::IncompleteBody,
            "the request body ended before it was complete",
        ),
        other => HttpError::new(ErrorCode::BadRequest, format!("the body: {other}")),
    }
}

/// The content part's failure as the upload path's stream error: a stall stays `TimedOut`
/// (answered `timeout`), a cut body is `incomplete_body`, a body framed wrong `bad_request`.
fn part_io_error(error: multer::Error) -> std::io::Error {
    match error {
        multer::Error::StreamReadFailed(inner) => match inner.downcast::<std::io::Error>() {
            Ok(io) => *io,
            Err(other) => std::io::Error::other(other),
        },
        // Cut short: answered `incomplete_body`, as a cut upload is.
        multer::Error::IncompleteFieldData { .. }
        | multer::Error::IncompleteHeaders
        | multer::Error::IncompleteStream => {
            std::io::Error::new(std::io::ErrorKind::UnexpectedEof, error.to_string())
        }
        // Framed wrong: answered `bad_request`.
        other => std::io::Error::new(std::io::ErrorKind::InvalidData, other.to_string()),
    }
}
