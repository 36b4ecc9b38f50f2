//! `GET /v1/groups/{groupId}/events`: replay of a Group's hash-chained log.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use weft_api::ErrorCode;
use weft_api::views::EventPage;

use super::admin::path_id;
use super::error::{HttpError, HttpResult};
use super::{AppState, Caller, json};

/// Parses an unsigned query parameter strictly (no sign, no spaces).
pub(crate) fn query_u64(
    query: &HashMap<String, String>,
    name: &str,
) -> Result<Option<u64>, HttpError> {
    match query.get(name) {
        None => Ok(None),
        Some(text)
            if !text.is_empty() && text.len() <= 20 && text.bytes().all(|b| b.is_ascii_digit()) =>
        {
            text.parse().map(Some).map_err(|_| {
                HttpError::new(ErrorCode::BadRequest, format!("{name} is out of range"))
            })
        }
        Some(_) => Err(HttpError::new(
            ErrorCode::BadRequest,
            format!("{name} must be a non-negative integer"),
        )),
    }
}

/// Refuses query parameters a route does not know.
pub(crate) fn only_params(
    query: &HashMap<String, String>,
    known: &[&str],
) -> Result<(), HttpError> {
    match query.keys().find(|key| !known.contains(&key.as_str())) {
        Some(unknown) => Err(HttpError::new(
            ErrorCode::BadRequest,
            format!("unknown query parameter {unknown:?}"),
        )),
        None => Ok(()),
    }
}

/// Events after `after` (default 0), at most `limit` (default 1000), in order.
#[utoipa::path(get, path = "/v1/groups/{group_id}/events", params(("group_id" = String, Path), ("after" = Option<u64>, Query), ("limit" = Option<u32>, Query)),
    responses((status = 200, description = "{events: [...]}")))]
pub(crate) async fn replay(
    State(state): State<AppState>,
    caller: Caller,
    group_id: Result<Path<String>, axum::extract::rejection::PathRejection>,
    query: Result<Query<HashMap<String, String>>, axum::extract::rejection::QueryRejection>,
) -> HttpResult<Response> {
    let group_id = path_id("groupId", group_id)?;
    let Query(query) = query.map_err(|e| HttpError::new(ErrorCode::BadRequest, e.body_text()))?;
    only_params(&query, &["after", "limit"])?;
    let after = query_u64(&query, "after")?.unwrap_or(0);
    let limit = query_u64(&query, "limit")?.unwrap_or(1000).min(10_000) as u32;
    let events = state
        .store
        .events(group_id, after, limit, &caller.reader())
        .await?;
    Ok(json(StatusCode::OK, &EventPage { events }))
}
