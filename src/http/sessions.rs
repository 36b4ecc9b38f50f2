//! `POST /v1/sessions`: a signed session request becomes a bearer token (DESIGN §8.1).

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::body::read_envelope;
use super::error::HttpResult;
use super::{AppState, json};

/// Opens a session for the signing Agent in the requested Group.
#[utoipa::path(post, path = "/v1/sessions", request_body(content = String, description = "DSSE envelope of a session request", content_type = "application/json"),
    responses((status = 201, description = "{token, sessionEpoch, membershipEpoch, expiresAt}"), (status = 400, description = "bad_signature, clock_skew, …"),
              (status = 429, description = "rate_limited: too many session requests by this agent (Retry-After)")))]
pub(crate) async fn open(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let envelope = read_envelope(&headers, body).await?;
    let grant = state.store.open_session(envelope).await?;
    Ok(json(StatusCode::CREATED, &grant))
}
