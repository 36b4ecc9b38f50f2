//! Capability tokens (DESIGN §10, LSE-6/7): the lease's owner issues, rotates and revokes
//! narrowed bearer tokens bound to its Execution Lease. Which routes accept a token, and with
//! which scope, is decided in `auth` (`Bearer`) and the blob, artifact and Evidence handlers.

use super::body::parse_body;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use weft_api::work::views::{TokenIssued, TokenRequest};
use weft_api::{ErrorCode, Id};
use weft_storage::Session;

use super::answer::json;
use super::auth::Caller;
use super::body::read_json;
use super::error::{HttpError, HttpResult};
use super::params::{RawPath, path_id};
use super::state::AppState;

/// Only an Agent's session manages tokens: never the admin, never a token itself.
fn owner_session(caller: Caller) -> Result<Session, HttpError> {
    match caller {
        Caller::Agent(session) => Ok(session),
        Caller::Admin => Err(HttpError::new(
            ErrorCode::Forbidden,
            "capability tokens are issued to the lease's owner session",
        )),
    }
}

/// Issues a capability token bound to the lease, expiring no later than it (LSE-6/7);
/// `replaces` rotates out a previous token of the same lease in the same step. The token is an
/// opaque bearer secret, not a signed credential (PD-20): only its hash is stored, and every
/// use is checked against it and the live lease, so revocation and the lease's end stop it
/// at once.
#[utoipa::path(post, path = "/v1/leases/{lease_id}/tokens", params(("lease_id" = String, Path)),
    request_body(content = String, description = "{scope: [blob:write|artifact:publish|evidence:record], ttlSeconds, replaces?: tokenId}", content_type = "application/json"),
    responses((status = 201, description = "{tokenId, token, scope, expiresAt}; the token is an opaque bearer secret (only its hash is stored), shown once"),
              (status = 400, description = "bad_request: empty or unknown scope, ttlSeconds 0"),
              (status = 403, description = "forbidden: not the lease's owner session, or a retry with an Idempotency-Key whose answer another session's token sealed"),
              (status = 404, description = "not_found: no such lease in your Group, or no such token to replace"),
              (status = 409, description = "stale_lease: the lease was released or has expired")))]
pub(crate) async fn issue(
    State(state): State<AppState>,
    caller: Caller,
    lease_id: RawPath,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let lease_id = path_id("leaseId", lease_id)?;
    let session = owner_session(caller)?;
    let bytes = read_json(&headers, body).await?;
    let request: TokenRequest = parse_body(&bytes, ErrorCode::BadRequest)?;
    // With an Idempotency-Key, the answer commits with the token: a retry through another
    // server waits for that commit and replays it, never minting a second token. It holds
    // the secret, so it is stored sealed to this session's token (PD-20).
    super::idempotency::answer_sealed_with(|issued: &TokenIssued| {
        (StatusCode::CREATED, issued.clone())
    });
    let issued = state
        .store
        .work()
        .issue_token(lease_id, request, &session)
        .await?;
    Ok(json(StatusCode::CREATED, &issued))
}

/// Revokes one token of the lease; the lease and its other tokens stay. Again: 204.
#[utoipa::path(delete, path = "/v1/leases/{lease_id}/tokens/{token_id}", params(("lease_id" = String, Path), ("token_id" = String, Path)),
    responses((status = 204, description = "revoked"), (status = 403, description = "forbidden: not the lease's owner session"),
              (status = 404, description = "not_found: no such lease in your Group or no such token of it")))]
pub(crate) async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    ids: Result<Path<(String, String)>, axum::extract::rejection::PathRejection>,
) -> HttpResult<Response> {
    let Path((lease_id, token_id)) =
        ids.map_err(|_| HttpError::new(ErrorCode::InvalidId, "ids must be valid UTF-8"))?;
    let lease_id = Id::parse("leaseId", &lease_id)?;
    let token_id = Id::parse("tokenId", &token_id)?;
    let session = owner_session(caller)?;
    state
        .store
        .work()
        .revoke_token(lease_id, token_id, &session)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
