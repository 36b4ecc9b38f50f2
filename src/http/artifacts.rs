//! Publishing manifests and reading artifacts: metadata, listings, and verified content.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use futures::StreamExt as _;
use weft_api::ErrorCode;
use weft_api::views::Published;
use weft_storage::ListFilter;

use super::answer::json;
use super::auth::Bearer;
use super::auth::Caller;
use super::body::{created_or_ok, read_envelope};
use super::conditional;
use super::error::{HttpError, HttpResult};
use super::params::{
    RawPath, RawQuery, known_params, path_digest, query_id, query_limit, query_u64,
};
use super::state::AppState;

/// Verifies and records a DSSE-signed artifact manifest; appends `artifact.published`.
#[utoipa::path(post, operation_id = "publish_artifact", path = "/v1/artifacts", request_body(content = String, description = "DSSE envelope of an artifact manifest", content_type = "application/json"),
    responses((status = 201, description = "{artifact, manifestId, sequence}"), (status = 200, description = "this manifest was already published"),
              (status = 400, description = "bad_signature, invalid_manifest, wrong_payload_type, unknown_key"), (status = 401, description = "unauthorized: a capability token past its lease, expiry or revocation"),
              (status = 403, description = "producer_mismatch, not_a_member, forbidden: a capability token without artifact:publish or for another WorkItem or lease"),
              (status = 409, description = "cycle; stale_lease: execution.leaseId is not the WorkItem's current Execution Lease held by the producer under execution.ownershipEpoch (LSE-4/5; a fenced owner's manifest is kept as an inert audit record, OFL-2)"), (status = 410, description = "disposed: this manifest was published, and its signed record went by a retention policy's keepRecords; `sequence` names the records.disposed Event"), (status = 422, description = "unknown_source, blob_not_found")))]
pub(crate) async fn publish(
    State(state): State<AppState>,
    caller: Bearer,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let envelope = read_envelope(&headers, body).await?;
    let render =
        |(published, created): &(Published, bool)| (created_or_ok(*created), published.clone());
    super::idempotency::answer_with(render);
    let outcome = match &caller {
        Bearer::Caller(caller) => {
            state
                .store
                .artifacts()
                .publish(envelope, &caller.reader())
                .await?
        }
        // LSE-6: `artifact:publish`, for the token's lease and WorkItem only.
        Bearer::Token(grant) => {
            state
                .store
                .artifacts()
                .publish_with_token(envelope, grant)
                .await?
        }
    };
    let (status, body) = render(&outcome);
    Ok(json(status, &body))
}

/// An artifact's digests, size and every manifest visible to the caller.
#[utoipa::path(get, operation_id = "show_artifact", path = "/v1/artifacts/{digest}", params(("digest" = String, Path, description = "blake3:<hex> or sha256:<hex>")),
    responses((status = 200, description = "{digests, size, quarantined, manifests, disposedManifests?: [{id, sequence, disposedSequence}]}"), (status = 404, description = "not_found"),
              (status = 410, description = "disposed: every manifest the reader may see went by a retention policy's keepRecords; `sequence` names the records.disposed Event")))]
pub(crate) async fn show(
    State(state): State<AppState>,
    caller: Caller,
    digest: RawPath,
) -> HttpResult<Response> {
    let digest = path_digest(digest)?;
    let view = state
        .store
        .artifacts()
        .artifact(digest, &caller.reader())
        .await?;
    Ok(json(StatusCode::OK, &view))
}

/// The query parameters `list` accepts (the OpenAPI check compares them with the document).
pub(super) const LIST_QUERY: &[&str] = &[
    "missionId",
    "workItemId",
    "producer",
    "mediaType",
    "name",
    "after",
    "limit",
];

/// Paged listing of visible manifests, filtered.
#[utoipa::path(get, operation_id = "list_artifacts", path = "/v1/artifacts", params(("missionId" = Option<String>, Query), ("workItemId" = Option<String>, Query), ("producer" = Option<String>, Query),
    ("mediaType" = Option<String>, Query), ("name" = Option<String>, Query, description = "only artifacts whose file name (the manifest's `name` annotation, its last path component) starts with this"), ("after" = Option<u64>, Query), ("limit" = Option<u32>, Query)),
    responses((status = 200, description = "{items, next}")))]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    query: RawQuery,
) -> HttpResult<Response> {
    let query = known_params(query, LIST_QUERY)?;
    let filter = ListFilter {
        mission_id: query_id(&query, "missionId")?,
        work_item_id: query_id(&query, "workItemId")?,
        producer: query_id(&query, "producer")?,
        media_type: query.get("mediaType").cloned(),
        // An empty prefix filters nothing; a longer one than any name matches none.
        name: query.get("name").filter(|name| !name.is_empty()).cloned(),
        after: query_u64(&query, "after")?,
        limit: query_limit(&query)?.unwrap_or(100).min(1000),
    };
    let page = state
        .store
        .artifacts()
        .list_artifacts(filter, &caller.reader())
        .await?;
    Ok(json(StatusCode::OK, &page))
}

/// The single range requested, `Ok(None)` for the whole body (no header, an unparseable one,
/// or several ranges, which RFC 9110 lets a server answer with the full representation).
fn requested_range(
    headers: &HeaderMap,
    size: u64,
) -> Result<Option<std::ops::Range<u64>>, HttpError> {
    let Some(value) = headers.get(header::RANGE).and_then(|v| v.to_str().ok()) else {
        return Ok(None);
    };
    let Ok(parsed) = http_range_header::parse_range_header(value) else {
        return Ok(None);
    };
    match parsed.validate(size) {
        Ok(ranges) if ranges.len() == 1 => {
            Ok(ranges.first().map(|range| *range.start()..*range.end() + 1))
        }
        Ok(_) => Ok(None),
        Err(_) => Err(HttpError::new(
            ErrorCode::InvalidRange,
            format!("the artifact is {size} bytes long"),
        )),
    }
}

/// The range of the content a proof covers, `bytes a-b/SIZE` (README, "Verified ranges").
pub(crate) const PROOF_RANGE: &str = weft_api::bao::PROOF_RANGE_HEADER;

/// A proof's ETag: the content's digest, the proof format and the range it covers, so each
/// range's proof is its own representation.
fn proof_etag(blake3: &weft_api::ArtifactId, range: std::ops::Range<u64>) -> String {
    let end = range.end.saturating_sub(1);
    format!("\"{blake3}.bao.{}-{end}\"", range.start)
}

/// The query parameters of `GET /v1/artifacts/{digest}/content`.
pub(crate) const CONTENT_QUERY: &[&str] = &["proof"];

/// Whether the caller asks for the proof of the range (`Accept: application/vnd.weft.bao` or
/// `?proof=bao`) rather than its bytes.
fn wants_proof(headers: &HeaderMap, query: RawQuery) -> Result<bool, HttpError> {
    let query = known_params(query, CONTENT_QUERY)?;
    let by_query = match query.get("proof").map(String::as_str) {
        None => false,
        Some("bao") => true,
        Some(other) => {
            return Err(HttpError::new(
                ErrorCode::BadRequest,
                format!("proof={other:?}: the one proof format is \"bao\""),
            ));
        }
    };
    let by_accept = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|media| media.split(';').next().map(str::trim) == Some(weft_api::bao::MEDIA_TYPE));
    Ok(by_query || by_accept)
}

/// The bytes, verified before they go out (ART-5): the whole blob is re-hashed as it
/// streams, a Range of a large blob verifies only the chunk groups it serves through the
/// blob's BLAKE3 outboard. On mismatch the connection is aborted. With `?proof=bao` or
/// `Accept: application/vnd.weft.bao` the answer is the range's proof instead (README,
/// "Verified ranges"), of any length, streamed.
#[utoipa::path(get, path = "/v1/artifacts/{digest}/content", params(("digest" = String, Path, description = "blake3:<hex> or sha256:<hex>"),
        ("proof" = Option<String>, Query, description = "bao: answer the bao-tree 0.17 range encoding (16 KiB chunk groups) of the range, which a client verifies against the digest (as Accept: application/vnd.weft.bao)")),
    responses((status = 200, description = "the bytes (ETag = digest; Repr-Digest: sha-256), or a range's proof (application/vnd.weft.bao, its own ETag, the range in Weft-Proof-Range)"), (status = 206, description = "one range (If-Range, when sent, matched)"),
              (status = 304, description = "If-None-Match matched"), (status = 412, description = "precondition_failed: If-Match matched no representation"), (status = 400, description = "bad_request: proof other than bao"), (status = 416, description = "invalid_range: a Range outside the artifact, or a proof of an empty artifact"),
              (status = 410, description = "disposed: a retention policy disposed of the bytes; `sequence` names the artifact.disposed Event"),
              (status = 429, description = "too_many_downloads: this agent, or its group, has as many downloads of stored files open as it may (Retry-After)"), (status = 500, description = "integrity_failure"),
              (status = 503, description = "overloaded: the server has --max-open-downloads open (Retry-After)")))]
pub(crate) async fn content(
    State(state): State<AppState>,
    method: Method,
    caller: Caller,
    digest: RawPath,
    query: RawQuery,
    headers: HeaderMap,
) -> HttpResult<Response> {
    let digest = path_digest(digest)?;
    let proof = wants_proof(&headers, query)?;
    let content = state
        .store
        .artifacts()
        .open_content(digest, &caller.reader())
        .await?;
    let digests = content.digests;
    // The content's strong validator; a `Range` (and `If-Range`) applies to it.
    let content_etag = format!("\"{}\"", digests.blake3);
    let header_value = |text: &str| {
        HeaderValue::from_str(text)
            .map_err(|_| HttpError::new(ErrorCode::Internal, "unencodable header"))
    };
    let mut response_headers = HeaderMap::with_capacity(12);
    response_headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response_headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox"),
    );
    response_headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    response_headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, immutable"),
    );
    // A proof's body depends on `Range` (and `If-Range`) as well as on `Accept` (it is a 200, not a 206, so a
    // cache would not otherwise know): both are named, so no cache answers one range's proof
    // for another's. The content itself answers `Range` with 206s, which caches handle.
    response_headers.insert(
        header::VARY,
        HeaderValue::from_static("accept, range, if-range"),
    );
    // `If-Range` first decides whether `Range` is read at all (RFC 9110 §13.1.5); the
    // representation's own ETag (a proof's depends on the range) then meets `If-Match` and
    // `If-None-Match`.
    let honour_range = conditional::evaluate(&headers, &content_etag, &content_etag)
        != (conditional::Precondition::Proceed {
            honour_range: false,
        });
    let range = if honour_range {
        requested_range(&headers, digests.size)
    } else {
        Ok(None)
    };
    let etag = match (&range, proof) {
        (Ok(range), true) => proof_etag(&digests.blake3, range.clone().unwrap_or(0..digests.size)),
        _ => content_etag.clone(),
    };
    match conditional::evaluate(&headers, &etag, &content_etag) {
        conditional::Precondition::Failed => {
            return Err(HttpError::new(
                ErrorCode::PreconditionFailed,
                "If-Match names no current representation of this artifact",
            ));
        }
        conditional::Precondition::NotModified => {
            response_headers.insert(header::ETAG, header_value(&etag)?);
            return Ok((StatusCode::NOT_MODIFIED, response_headers).into_response());
        }
        conditional::Precondition::Proceed { .. } => {}
    }
    response_headers.insert(header::ETAG, header_value(&etag)?);
    let range = match range {
        Ok(range) => range,
        Err(error) => {
            // A 416 still says how long the representation is.
            tracing::debug!(?error, "unsatisfiable range");
            let mut response = error.into_response();
            if let Ok(value) = HeaderValue::from_str(&format!("bytes */{}", digests.size)) {
                response.headers_mut().insert(header::CONTENT_RANGE, value);
            }
            return Ok(response);
        }
    };
    if proof {
        // The proof is a representation of its own (issue #40): its own ETag and type, and
        // none of the content's headers (`Repr-Digest`, `Content-Range`), which would describe
        // other bytes. The range of the content it proves, and the size that fixes the tree's
        // shape, are in `Weft-Proof-Range`.
        let shown = range.clone().unwrap_or(0..digests.size);
        if !shown.is_empty() {
            response_headers.insert(
                PROOF_RANGE,
                header_value(&format!(
                    "bytes {}-{}/{}",
                    shown.start,
                    shown.end - 1,
                    digests.size
                ))?,
            );
        }
        response_headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(weft_api::bao::MEDIA_TYPE),
        );
        if method == Method::HEAD && !shown.is_empty() {
            // The headers alone: no proof is built and no download slot taken.
            return Ok((StatusCode::OK, response_headers).into_response());
        }
        // Window by window, without a Content-Length: the encoding's length is known only as
        // it is written. A failure part-way cuts the connection, as for a GET.
        let encoded = content.admitted(&caller.reader())?.proof(range).await?;
        return Ok((StatusCode::OK, response_headers, served(encoded)).into_response());
    }
    response_headers.insert(
        "repr-digest",
        header_value(&format!(
            "sha-256=:{}:",
            base64::engine::general_purpose::STANDARD.encode(digests.sha256.0)
        ))?,
    );
    response_headers.insert(header::CONTENT_TYPE, header_value(&content.media_type)?);
    let (status, length) = match &range {
        Some(range) => {
            response_headers.insert(
                header::CONTENT_RANGE,
                header_value(&format!(
                    "bytes {}-{}/{}",
                    range.start,
                    range.end - 1,
                    digests.size
                ))?,
            );
            (StatusCode::PARTIAL_CONTENT, range.end - range.start)
        }
        None => (StatusCode::OK, digests.size),
    };
    response_headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    // A small artifact in memory is verified before the answer and goes out whole, with its
    // headers (a mismatch is then a problem answer, not a cut body).
    if let Some(verified) = content.verified_in_memory(range.clone()) {
        let bytes = verified.await?;
        metrics::counter!("weft_download_bytes_total").increment(bytes.len() as u64);
        return Ok((status, response_headers, bytes).into_response());
    }
    // A HEAD answers the headers alone: its body is never read, so it takes no slot.
    let content = if method == Method::HEAD {
        content
    } else {
        content.admitted(&caller.reader())?
    };
    Ok((status, response_headers, served(content.into_body(range))).into_response())
}

/// A verified stream as a response body, counted: its bytes, and a failure, which aborts
/// the response (the connection is cut, never a clean but short body).
pub(crate) fn served(
    body: futures::stream::BoxStream<'static, Result<bytes::Bytes, weft_storage::Error>>,
) -> Body {
    Body::from_stream(body.map(|chunk| match chunk {
        Ok(bytes) => {
            metrics::counter!("weft_download_bytes_total").increment(bytes.len() as u64);
            Ok(bytes)
        }
        Err(error) => {
            match error.code() {
                ErrorCode::IntegrityFailure => {
                    metrics::counter!("weft_verification_failures_total").increment(1);
                    tracing::error!(%error, "aborting a response: stored bytes failed verification");
                }
                // A client that took no bytes for the idle timeout (`downloads.rs`).
                ErrorCode::Timeout => tracing::debug!(%error, "aborting a stalled response"),
                _ => tracing::error!(%error, "aborting a response: reading stored bytes failed"),
            }
            Err(std::io::Error::other(error))
        }
    }))
}

/// Publishes an Artifact as reusable knowledge in the caller's Group (CTX-6): the caller is an
/// approver, the body names the classification and the approver's signed approval Evidence
/// (criterion `reuse`, subject the Artifact, outcome `pass`). Appends `artifact.reuse_published`;
/// from then on every Mission of the Group may read and cite the Artifact.
#[utoipa::path(post, path = "/v1/artifacts/{digest}/reuse", params(("digest" = String, Path, description = "blake3:<hex> or sha256:<hex>")),
    request_body(content = String, description = "{classification: public|internal|confidential|restricted, approval: <evidence id>}", content_type = "application/json"),
    responses((status = 201, description = "{artifact, groupId, classification, approval, approvedBy, missionId, publishedBy, publishedAt, sequence}"),
              (status = 200, description = "published with this approval already"), (status = 400, description = "bad_request"),
              (status = 403, description = "forbidden: not an approver of the Group"), (status = 404, description = "not_found"),
              (status = 409, description = "conflict: reusable already under another approval"),
              (status = 422, description = "unknown_evidence, evidence_missing: the approval is not an approver's passing reuse Evidence about this Artifact")))]
pub(crate) async fn reuse(
    State(state): State<AppState>,
    caller: Caller,
    digest: RawPath,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let Caller::Agent(session) = &caller else {
        return Err(HttpError::new(
            ErrorCode::Forbidden,
            "reusable knowledge is approved by an approver's session, not the operator",
        ));
    };
    let digest = path_digest(digest)?;
    let bytes = super::body::read_json(&headers, body).await?;
    let request: weft_api::views::ReuseRequest =
        super::body::parse_body(&bytes, ErrorCode::BadRequest)?;
    let artifact = match digest {
        weft_api::Digest::Blake3(id) => id,
        weft_api::Digest::Sha256(_) => {
            state
                .store
                .artifacts()
                .artifact(digest, &caller.reader())
                .await?
                .digests
                .blake3
        }
    };
    let render = |(record, created): &(weft_api::views::ReuseRecord, bool)| {
        (created_or_ok(*created), record.clone())
    };
    super::idempotency::answer_with(render);
    let outcome = state
        .store
        .artifacts()
        .publish_reusable(artifact, request, session)
        .await?;
    let (status, body) = render(&outcome);
    Ok(json(status, &body))
}
