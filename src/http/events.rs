//! `GET /v1/groups/{groupId}/events`: replay of a Group's hash-chained log.

use std::collections::HashMap;

use std::convert::Infallible;
use std::time::Duration;

use super::body::parse_body;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::header;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt as _;
use weft_api::ErrorCode;
use weft_api::event::Delivered;
use weft_api::views::{Ack, Cursors, EventPage};

use super::body::read_json;

use super::answer::json;
use super::auth::Caller;
use super::error::{HttpError, HttpResult};
use super::params::{RawPath, RawQuery, known_params, path_id, query_limit, query_u64};
use super::state::AppState;

/// The query parameters `replay` accepts (the OpenAPI check compares them with the document).
pub(super) const REPLAY_QUERY: &[&str] = &["after", "limit"];

/// Events after `after` (default 0), at most `limit` (default 1000), in order.
#[utoipa::path(get, path = "/v1/groups/{group_id}/events", params(("group_id" = String, Path), ("after" = Option<u64>, Query), ("limit" = Option<u32>, Query)),
    responses((status = 200, description = "{events: [...]}")))]
pub(crate) async fn replay(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
    query: RawQuery,
) -> HttpResult<Response> {
    let group_id = path_id("groupId", group_id)?;
    let query = known_params(query, REPLAY_QUERY)?;
    let after = query_u64(&query, "after")?.unwrap_or(0);
    let limit = query_limit(&query)?.unwrap_or(1000).min(10_000);
    let events = state
        .store
        .delivery()
        .events(group_id, after, limit, &caller.reader())
        .await?;
    Ok(json(StatusCode::OK, &EventPage { events }))
}

/// The query parameters `actor_events` accepts (the OpenAPI check compares them).
pub(super) const ACTOR_QUERY: &[&str] = &["before", "limit"];

/// What one Agent did in a Group (issue #50: who offered, accepted, failed, reviewed): the
/// Events whose actor it is, newest first, `before` a sequence (default: the newest), at most
/// `limit` (default 100, at most 1000) read from the online log. An Event the caller may not
/// see is left out (a Mission-scoped member sees its Missions' only).
#[utoipa::path(get, operation_id = "actor_events", path = "/v1/groups/{group_id}/agents/{agent_id}/events", params(("group_id" = String, Path), ("agent_id" = String, Path), ("before" = Option<u64>, Query), ("limit" = Option<u32>, Query)),
    responses((status = 200, description = "{groupId, agentId, events: [...], before}"), (status = 404, description = "not_found: no such Group visible")))]
pub(crate) async fn actor_events(
    State(state): State<AppState>,
    caller: Caller,
    ids: Result<Path<(String, String)>, axum::extract::rejection::PathRejection>,
    query: RawQuery,
) -> HttpResult<Response> {
    let Path((group_id, agent_id)) =
        ids.map_err(|_| HttpError::new(ErrorCode::InvalidId, "not valid UTF-8"))?;
    let group_id = weft_api::Id::parse("groupId", &group_id)?;
    let agent_id = weft_api::Id::parse("agentId", &agent_id)?;
    let query = known_params(query, ACTOR_QUERY)?;
    let before = query_u64(&query, "before")?;
    let limit = query_limit(&query)?.unwrap_or(100).min(1_000);
    let (events, before) = state
        .store
        .delivery()
        .actor_events(
            group_id.clone(),
            agent_id.clone(),
            before,
            limit,
            &caller.reader(),
        )
        .await?;
    Ok(json(
        StatusCode::OK,
        &weft_api::views::ActorEvents {
            group_id: group_id.to_string(),
            agent_id: agent_id.to_string(),
            events,
            before,
        },
    ))
}

/// The query parameters `stream` accepts (the OpenAPI check compares them with the document).
pub(super) const STREAM_QUERY: &[&str] = &["after"];

/// Server-Sent Events: the replay after `Last-Event-ID` (else `after`), then live Events as they
/// are appended, with keep-alives. Each SSE `id` is the Event's sequence.
#[utoipa::path(get, path = "/v1/groups/{group_id}/events/stream", params(("group_id" = String, Path), ("after" = Option<u64>, Query), ("Last-Event-ID" = Option<u64>, Header)),
    responses((status = 200, description = "text/event-stream of Events"), (status = 409, description = "cursor_ahead"), (status = 429, description = "too_many_streams")))]
pub(crate) async fn stream(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
    query: RawQuery,
    headers: HeaderMap,
) -> HttpResult<Response> {
    let group_id = path_id("groupId", group_id)?;
    let query = known_params(query, STREAM_QUERY)?;
    let mut after = query_u64(&query, "after")?;
    // `Last-Event-ID` wins over `?after`: a browser's EventSource reconnects to the URL it
    // was opened with, `?after` included, and sends the last id it saw (issue #40).
    if let Some(last) = headers.get("last-event-id") {
        let last: HashMap<String, String> = [(
            "Last-Event-ID".to_owned(),
            last.to_str().unwrap_or("x").to_owned(),
        )]
        .into();
        after = query_u64(&last, "Last-Event-ID")?.or(after);
    }
    // The slot is taken before anything is read, and travels in the body (issue #40).
    let slot = match &caller {
        Caller::Agent(session) => Some(state.streams.open(session)?),
        Caller::Admin => None,
    };
    let events = state
        .store
        .delivery()
        .follow(group_id, after.unwrap_or(0), &caller.reader())
        .await?;
    // A stream lives only as long as the session it was opened with (issue #10 finding 4).
    let guard = match &caller {
        Caller::Agent(session) => Some(Guard {
            store: state.store.clone(),
            session: session.clone(),
            changes: state.store.sessions().auth_changes(),
            recheck: tokio::time::interval(RECHECK),
            _slot: slot,
        }),
        Caller::Admin => None,
    };
    let body = sse_body(events, guard);
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response())
}

/// What ends a stream whose session ends: a re-check of the session whenever something that
/// can end one was committed, and at least every [`RECHECK`] (for expiry).
struct Guard {
    store: weft_storage::Store,
    session: weft_storage::Session,
    changes: tokio::sync::watch::Receiver<u64>,
    recheck: tokio::time::Interval,
    /// The stream's place under the per-session and per-Agent caps, given back with the body.
    _slot: Option<super::streams::Slot>,
}

impl Guard {
    /// Waits for the next reason to re-check, then re-checks: `Some(error)` ends the stream.
    async fn ended(&mut self) -> Option<weft_storage::Error> {
        tokio::select! {
            changed = self.changes.changed() => {
                if changed.is_err() {
                    // The store is gone: nothing more can change; expiry still counts.
                    self.changes.mark_unchanged();
                    std::future::pending::<()>().await;
                }
            }
            _ = self.recheck.tick() => {}
        }
        self.store.sessions().recheck(&self.session).await.err()
    }
}

/// The SSE body: frames written in batches of whatever is ready (up to [`SSE_BATCH`] Events),
/// so a replay costs one body chunk per batch rather than per Event; an idle stream gets a
/// keep-alive comment every [`KEEP_ALIVE`]; a stream whose session ended (expired, replaced,
/// Membership changed or removed, Agent deactivated, key rotated) gets a comment and an
/// `error` frame naming the code, and ends.
fn sse_body(
    events: impl futures::Stream<Item = Result<Delivered, weft_storage::Error>> + Send + 'static,
    guard: Option<Guard>,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Send {
    struct State<S> {
        batches: std::pin::Pin<Box<S>>,
        guard: Option<Guard>,
        keep_alive: tokio::time::Instant,
        done: bool,
    }
    let state = State {
        batches: Box::pin(events.ready_chunks(SSE_BATCH)),
        guard,
        keep_alive: tokio::time::Instant::now() + KEEP_ALIVE,
        done: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        if state.done {
            return None;
        }
        let chunk = loop {
            let ended = async {
                match state.guard.as_mut() {
                    Some(guard) => guard.ended().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ended = ended => {
                    if let Some(error) = ended {
                        state.done = true;
                        break Bytes::from(format!(
                            ": the session ended: {}\nevent: error\ndata: {}\n\n",
                            error.to_string().replace(['\r', '\n'], " "),
                            error.code()
                        ));
                    }
                }
                _ = tokio::time::sleep_until(state.keep_alive) => {
                    state.keep_alive = tokio::time::Instant::now() + KEEP_ALIVE;
                    break Bytes::from_static(b":keep-alive\n\n");
                }
                next = state.batches.next() => {
                    let batch = next?;
                    state.keep_alive = tokio::time::Instant::now() + KEEP_ALIVE;
                    let mut frames = Vec::with_capacity(batch.len() * 512);
                    for event in batch {
                        match event {
                            Ok(event) => write_frame(&mut frames, &event),
                            Err(error) => {
                                tracing::error!(%error, "event stream failed");
                                frames.extend_from_slice(
                                    format!("event: error\ndata: {}\n\n", error.code()).as_bytes(),
                                );
                            }
                        }
                    }
                    break Bytes::from(frames);
                }
            }
        };
        Some((Ok(chunk), state))
    })
}

/// Longest a stream outlives its session's expiry.
const RECHECK: Duration = Duration::from_secs(1);
/// Most Events written in one body chunk.
const SSE_BATCH: usize = 4096;
/// Interval of keep-alive comments on an idle stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// One SSE frame: `id` is the sequence, `event` the type (`withheld` for a placeholder, CTX-5),
/// `data` the Event as JSON (one line: serde_json never emits a raw newline).
fn write_frame(out: &mut Vec<u8>, event: &Delivered) {
    use std::io::Write as _;
    let kind = match event {
        Delivered::Event(event) => event.kind.as_str(),
        Delivered::Withheld(withheld) => withheld.kind.as_str(),
    };
    let _ = write!(out, "id: {}\nevent: {kind}\ndata: ", event.sequence());
    if serde_json::to_writer(&mut *out, event).is_err() {
        out.extend_from_slice(b"null");
    }
    out.extend_from_slice(b"\n\n");
}

/// The ACK frame: records the caller's cursor for this Group (DLV-6). A cursor never moves
/// back, never passes the head, and never deletes history (DLV-7).
#[utoipa::path(post, path = "/v1/groups/{group_id}/cursors", params(("group_id" = String, Path)),
    request_body(content = String, description = "{cursors: [{groupId, sequence}]}", content_type = "application/json"),
    responses((status = 200, description = "{cursors: [{groupId, agentId, sequence, moved}]}"), (status = 409, description = "cursor_ahead")))]
pub(crate) async fn ack(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let group_id = path_id("groupId", group_id)?;
    let Caller::Agent(session) = caller else {
        return Err(HttpError::new(
            ErrorCode::Forbidden,
            "cursors belong to Agents; ACK with a session",
        ));
    };
    let bytes = read_json(&headers, body).await?;
    let ack: Ack = parse_body(&bytes, ErrorCode::BadRequest)?;
    if ack.cursors.is_empty() || ack.cursors.len() > 64 {
        return Err(HttpError::new(
            ErrorCode::BadRequest,
            "an ACK carries 1..=64 cursors",
        ));
    }
    if let Some(other) = ack
        .cursors
        .iter()
        .find(|entry| entry.group_id != group_id.as_str())
    {
        return Err(HttpError::new(
            ErrorCode::BadRequest,
            format!("cursor for {} sent to {group_id}", other.group_id),
        ));
    }
    let highest = ack
        .cursors
        .iter()
        .map(|entry| entry.sequence)
        .max()
        .unwrap_or(0);
    let cursor = state
        .store
        .delivery()
        .ack(group_id, &session, highest)
        .await?;
    Ok(json(
        StatusCode::OK,
        &Cursors {
            cursors: vec![cursor],
        },
    ))
}

/// The query parameters `cursors` accepts (the OpenAPI check compares them with the document).
pub(super) const CURSORS_QUERY: &[&str] = &["all"];

/// The caller's cursor; `all=true` lists every cursor (coordinators, auditors, admin).
#[utoipa::path(get, path = "/v1/groups/{group_id}/cursors", params(("group_id" = String, Path), ("all" = Option<bool>, Query)),
    responses((status = 200, description = "{cursors: [...]}")))]
pub(crate) async fn cursors(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
    query: RawQuery,
) -> HttpResult<Response> {
    let group_id = path_id("groupId", group_id)?;
    let query = known_params(query, CURSORS_QUERY)?;
    let all = match query.get("all").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            return Err(HttpError::new(
                ErrorCode::BadRequest,
                "all must be true or false",
            ));
        }
    };
    let cursors = state
        .store
        .delivery()
        .cursors(group_id, &caller.reader(), all)
        .await?;
    Ok(json(StatusCode::OK, &Cursors { cursors }))
}

/// The head `{groupId, sequence, hash}` signed by the server key, so a client can prove the
/// chain it holds is the server's.
#[utoipa::path(get, path = "/v1/groups/{group_id}/checkpoint", params(("group_id" = String, Path)),
    responses((status = 200, description = "{envelope, checkpoint}")))]
pub(crate) async fn checkpoint(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
) -> HttpResult<Response> {
    let group_id = path_id("groupId", group_id)?;
    let checkpoint = state
        .store
        .delivery()
        .checkpoint(group_id, &caller.reader())
        .await?;
    Ok(json(StatusCode::OK, &checkpoint))
}

/// The Group's signed snapshot references, oldest first (DLV-9).
#[utoipa::path(get, path = "/v1/groups/{group_id}/snapshots", params(("group_id" = String, Path)),
    responses((status = 200, description = "{snapshots: [{envelope, reference, archive, fromSequence}]}")))]
pub(crate) async fn snapshots(
    State(state): State<AppState>,
    caller: Caller,
    group_id: RawPath,
) -> HttpResult<Response> {
    let group_id = path_id("groupId", group_id)?;
    let snapshots = state
        .store
        .compaction()
        .snapshots(group_id, &caller.reader())
        .await?;
    Ok(json(
        StatusCode::OK,
        &weft_api::views::Snapshots { snapshots },
    ))
}

/// A snapshot's state document or Event archive (JSON lines), verified while it streams.
#[utoipa::path(get, path = "/v1/groups/{group_id}/snapshots/blobs/{digest}", params(("group_id" = String, Path), ("digest" = String, Path)),
    responses((status = 200, description = "the bytes"), (status = 404, description = "not_found"),
              (status = 429, description = "too_many_downloads (Retry-After)"), (status = 503, description = "overloaded (Retry-After)")))]
pub(crate) async fn snapshot_blob(
    State(state): State<AppState>,
    method: Method,
    caller: Caller,
    ids: Result<Path<(String, String)>, axum::extract::rejection::PathRejection>,
) -> HttpResult<Response> {
    let Path((group_id, digest)) =
        ids.map_err(|_| HttpError::new(ErrorCode::InvalidId, "not valid UTF-8"))?;
    let group_id = weft_api::Id::parse("groupId", &group_id)?;
    let blob = weft_api::ArtifactId::parse(&digest)?;
    let headers = |length: u64| {
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (header::CONTENT_LENGTH, length.to_string()),
            (header::ETAG, format!("\"{blob}\"")),
        ]
    };
    if method == Method::HEAD {
        // The headers alone: the blob is not opened and no download slot is taken.
        let digests = state
            .store
            .compaction()
            .snapshot_blob_digests(group_id, blob, &caller.reader())
            .await?;
        return Ok(headers(digests.size).into_response());
    }
    let content = state
        .store
        .compaction()
        .open_snapshot_blob(group_id, blob, &caller.reader())
        .await?;
    let length = content.digests.size;
    let body = content
        .into_body(None)
        .map(|chunk| chunk.map_err(std::io::Error::other));
    Ok((headers(length), Body::from_stream(body)).into_response())
}
