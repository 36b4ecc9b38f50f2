//! The Group Authority's own surface: the public keys it signs checkpoints, snapshots and
//! reviewer Evidence with, and the admin call that names a published artifact as a schema
//! (which the built-in reviewer's `schema` check then resolves).

use super::body::parse_body;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use base64::Engine as _;
use serde::Deserialize;
use weft_api::dsse::BASE64;
use weft_api::views::{AuthorityKey, AuthorityKeys};
use weft_api::{ArtifactId, ErrorCode};

use super::answer::json;
use super::auth::Caller;
use super::body::read_json;
use super::error::HttpResult;
use super::state::AppState;

/// The server's own signing keys, for everything it signs.
#[utoipa::path(get, path = "/v1/authority/keys", responses((status = 200, description = "{keys: [{keyid, publicKey}]}")))]
pub(crate) async fn authority_keys(State(state): State<AppState>) -> Response {
    let keys = state
        .store
        .authority_keys()
        .into_iter()
        .map(|(keyid, key)| AuthorityKey {
            keyid: keyid.to_string(),
            public_key: BASE64.encode(key.as_bytes()),
        })
        .collect();
    json(StatusCode::OK, &AuthorityKeys { keys })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SchemaRegistration {
    uri: String,
    artifact: ArtifactId,
}

/// Registers a schema URI as naming a published schema artifact (admin).
#[utoipa::path(post, path = "/v1/admin/schemas", request_body(content = String, description = "{uri, artifact: blake3:…}", content_type = "application/json"),
    responses((status = 204, description = "registered"), (status = 422, description = "unknown_artifact")))]
pub(crate) async fn register_schema(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<StatusCode> {
    caller.require_admin()?;
    let bytes = read_json(&headers, body).await?;
    let registration: SchemaRegistration = parse_body(&bytes, ErrorCode::BadRequest)?;
    state
        .store
        .evidence()
        .register_schema(registration.uri, registration.artifact)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
