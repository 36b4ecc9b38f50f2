//! `POST /v1/sessions`: a signed session request becomes a bearer token (DESIGN §8.1).

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use weft_api::json::parse_strict;
use weft_api::{Envelope, ErrorCode};

use super::body::read_json;
use super::error::HttpResult;
use super::{AppState, json};

/// Opens a session for the signing Agent in the requested Group.
#[utoipa::path(post, path = "/v1/sessions", request_body(content = String, description = "DSSE envelope of a session request", content_type = "application/json"),
    responses((status = 201, description = "{token, sessionEpoch, membershipEpoch, expiresAt}"), (status = 400, description = "bad_signature, clock_skew, …")))]
pub(crate) async fn open(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let bytes = read_json(&headers, body).await?;
    let envelope: Envelope = parse_strict(&bytes, ErrorCode::InvalidJson)?;
    let grant = state.store.open_session(envelope).await?;
    Ok(json(StatusCode::CREATED, &grant))
}
