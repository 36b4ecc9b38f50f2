//! `/v1/groups/{g}/tlog/…`: each Group's log as a C2SP transparency log (DESIGN §15, issue
//! #45): the checkpoint as a signed note (`text/plain`), tiles at their C2SP paths
//! (`application/octet-stream`; full ones cacheable forever by whoever fetched them), and
//! inclusion and consistency proofs as JSON. Who may read what is storage's
//! (`storage/src/delivery/tlog.rs`).

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use weft_api::{ErrorCode, Id};

use super::answer::json;
use super::auth::Caller;
use super::error::{HttpError, HttpResult};
use super::params::{RawPath, RawQuery, known_params, path_id, query_u64};
use super::state::AppState;

/// The query parameters of the inclusion proof (the OpenAPI check compares them).
pub(super) const INCLUSION_QUERY: &[&str] = &["sequence", "size"];
/// The query parameters of the consistency proof.
pub(super) const CONSISTENCY_QUERY: &[&str] = &["from", "to"];

/// The Group's tree as it is now: a C2SP checkpoint in a signed note by the Authority key,
/// whose origin (`weft/<key>/<groupId>`) names the Group.
#[utoipa::path(get, path = "/v1/groups/{group_id}/tlog/checkpoint", operation_id = "tlog_checkpoint", params(("group_id" = String, Path)),
    responses((status = 200, description = "the checkpoint, a C2SP signed note (text/plain)", content_type = "text/plain")))]
pub(crate) async fn checkpoint(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
) -> HttpResult<Response> {
    let group_id = path_id("groupId", group_id)?;
    let checkpoint = state
        .store
        .delivery()
        .tlog_checkpoint(group_id, &caller.reader(), &state.witnesses)
        .await?;
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::CACHE_CONTROL, "private, no-cache"),
        ],
        checkpoint.note,
    )
        .into_response())
}

/// A tile at its C2SP path: `tile/<L>/<N>[.p/<W>]` (hashes) or `tile/entries/<N>[.p/<W>]`
/// (the Events' canonical bytes, each after its u16 length; only for a reader who may read
/// every Event in it).
#[utoipa::path(get, path = "/v1/groups/{group_id}/tlog/tile/{path}", operation_id = "tlog_tile",
    params(("group_id" = String, Path), ("path" = String, Path, pattern = r"^(entries|[0-9]+)/(x[0-9]{3}/)*[0-9]{3}(\.p/[0-9]+)?$", description = "the rest of the C2SP tile path, e.g. `0/x001/234` or `entries/000.p/7`")),
    responses((status = 200, description = "the tile's bytes", content_type = "application/octet-stream")))]
pub(crate) async fn tile(
    State(state): State<AppState>,
    caller: Caller,
    path: Result<Path<(String, String)>, PathRejection>,
) -> HttpResult<Response> {
    let Path((group_id, rest)) =
        path.map_err(|_| HttpError::new(ErrorCode::NotFound, "no such tile path"))?;
    let group_id = Id::parse("groupId", &group_id)?;
    let tile = state
        .store
        .delivery()
        .tlog_tile(group_id, format!("tile/{rest}"), &caller.reader())
        .await?;
    let cache = if tile.full {
        "private, max-age=31536000, immutable"
    } else {
        "private, no-cache"
    };
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/octet-stream"),
            (header::CACHE_CONTROL, cache),
        ],
        tile.bytes,
    )
        .into_response())
}

/// The inclusion proof of Event `sequence` (leaf `sequence − 1`) in the tree of `size` leaves
/// (the tree as it is now without `size`).
#[utoipa::path(get, path = "/v1/groups/{group_id}/tlog/proof/inclusion", operation_id = "tlog_inclusion_proof",
    params(("group_id" = String, Path), ("sequence" = u64, Query), ("size" = Option<u64>, Query)),
    responses((status = 200, description = "{treeSize, leafIndex, hashes: [base64…]}")))]
pub(crate) async fn inclusion(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
    query: RawQuery,
) -> HttpResult<Response> {
    let group_id = path_id("groupId", group_id)?;
    let query = known_params(query, INCLUSION_QUERY)?;
    let sequence = query_u64(&query, "sequence")?
        .ok_or_else(|| HttpError::new(ErrorCode::BadRequest, "sequence is required"))?;
    let size = query_u64(&query, "size")?;
    let proof = state
        .store
        .delivery()
        .tlog_inclusion(group_id, sequence, size, &caller.reader())
        .await?;
    Ok(json(StatusCode::OK, &proof))
}

/// The consistency proof of the tree of `from` leaves with the tree of `to` (the tree as it
/// is now without `to`).
#[utoipa::path(get, path = "/v1/groups/{group_id}/tlog/proof/consistency", operation_id = "tlog_consistency_proof",
    params(("group_id" = String, Path), ("from" = u64, Query), ("to" = Option<u64>, Query)),
    responses((status = 200, description = "{treeSize, hashes: [base64…]}")))]
pub(crate) async fn consistency(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
    query: RawQuery,
) -> HttpResult<Response> {
    let group_id = path_id("groupId", group_id)?;
    let query = known_params(query, CONSISTENCY_QUERY)?;
    let from = query_u64(&query, "from")?
        .ok_or_else(|| HttpError::new(ErrorCode::BadRequest, "from is required"))?;
    let to = query_u64(&query, "to")?;
    let proof = state
        .store
        .delivery()
        .tlog_consistency(group_id, from, to, &caller.reader())
        .await?;
    Ok(json(StatusCode::OK, &proof))
}
