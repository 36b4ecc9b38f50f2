//! `Idempotency-Key` on mutating JSON routes (DLV-11, PRG-9): the same key from the same
//! caller with the same request returns the stored answer without doing the work twice; the
//! same key with a different request is `422 idempotency_key_reused`; concurrent requests with
//! one key execute once: they queue on a per-key lock in this process, and across processes
//! a route that arms its claim (below) looks the key up again under the key's transaction
//! lock in the transaction of its work, so a retry through another server waits for the
//! first one's commit and replays it. A route that arms nothing is left to the stored
//! answer's primary key (only one answer commits), so it must be idempotent by nature.
//!
//! The answer of a request that does work is committed in the same transaction as the work
//! (issue #10 finding 8): the request runs inside `weft_storage::with_idempotency`, and its
//! handler names, with [`answer_with`], the result of the write that does the work and how it
//! renders its answer (see `storage/src/idempotency.rs`). The first answer is then the stored
//! bytes, so every replay is byte for byte the same. A success of a route that arms nothing
//! (idempotent by nature) has its answer stored afterwards.
//!
//! An answer that holds a bearer secret (a capability token's, a new session's) is stored
//! sealed to the caller's own bearer token (`sealed.rs`, PD-20): the route says so with
//! [`seal_answer`] or [`answer_sealed_with`], and a retry with any other token is refused.
//!
//! Blob uploads are content-addressed and so idempotent by nature; they are not buffered here.
//! Refusals (4xx) and server errors (5xx) are not stored: they did no work, so a retry runs
//! again (a rate limit, a quota or a lease may have changed since), and a flood of refused
//! requests under fresh keys writes nothing (a refusal's detail may echo up to a whole body).

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use weft_api::ErrorCode;
use weft_storage::{Claimed, IdempotentRequest, StoredAnswer};

use super::body::{MAX_JSON_BYTES, read_json};
use super::error::HttpError;
use super::sealed::{Sealer, is_sealed};
use super::state::AppState;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The current request's sealer, and whether its route asked for its answer to be sealed.
#[derive(Clone, Debug)]
struct Sealing {
    sealer: Sealer,
    wanted: Arc<AtomicBool>,
}

tokio::task_local! {
    static SEALING: Sealing;
}

fn check_key(value: &HeaderValue) -> Result<String, HttpError> {
    let key = value.to_str().unwrap_or_default();
    if key.is_empty() || key.len() > 255 || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(HttpError::new(
            ErrorCode::BadRequest,
            "Idempotency-Key must be 1..=255 visible ASCII characters",
        ));
    }
    Ok(key.to_owned())
}

/// Who the key belongs to, or `None` when the request is not authenticated (the handler
/// then answers 401 itself).
async fn scope_of(state: &AppState, token: Option<String>) -> Option<String> {
    let token = token?;
    if blake3::hash(token.as_bytes()) == state.admin_token_hash {
        return Some("admin".to_owned());
    }
    state
        .store
        .sessions()
        .authenticate(&token)
        .await
        .ok()
        .map(|session| format!("agent:{}", session.agent_id))
}

pub(crate) async fn layer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match run(state, request, next).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn run(state: AppState, request: Request, next: Next) -> Result<Response, HttpError> {
    let Some(value) = request.headers().get("idempotency-key").cloned() else {
        return Ok(next.run(request).await);
    };
    if !matches!(*request.method(), Method::POST | Method::PUT) {
        return Ok(next.run(request).await);
    }
    let key = check_key(&value)?;
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let Some(bearer) = token else {
        return Ok(next.run(request).await);
    };
    let Some(scope) = scope_of(&state, Some(bearer.clone())).await else {
        return Ok(next.run(request).await);
    };
    let (parts, body) = request.into_parts();
    let bytes = read_json(&parts.headers, body).await?;
    let mut hasher = blake3::Hasher::new();
    hasher.update(parts.method.as_str().as_bytes());
    hasher.update(b" ");
    hasher.update(parts.uri.to_string().as_bytes());
    hasher.update(b"\n");
    hasher.update(&bytes);
    let request_hash = *hasher.finalize().as_bytes();
    let sealer = Sealer::new(&bearer, &scope, &key, &request_hash);

    let lock = state.in_flight.lock_for(&scope, &key);
    let _guard = lock.lock().await;
    if let Some(stored) = state
        .store
        .idempotent_answer(scope.clone(), key.clone())
        .await?
    {
        if stored.request_hash != request_hash {
            return Err(HttpError::new(
                ErrorCode::IdempotencyKeyReused,
                "this Idempotency-Key was used for a different request",
            ));
        }
        // Trimmed after the answer horizon (issue #46): said, never done again.
        if stored.status == 0 {
            return Err(HttpError::new(
                ErrorCode::CommandExpired,
                "this Idempotency-Key was answered longer ago than answers are kept; the request is not done again",
            ));
        }
        return opened(stored, &sealer).map(replay);
    }
    let claim = IdempotentRequest {
        scope: scope.clone(),
        key: key.clone(),
        request_hash,
        received_at: state.store.now(),
    };
    let sealing = Sealing {
        sealer: sealer.clone(),
        wanted: Arc::new(AtomicBool::new(false)),
    };
    let wanted = Arc::clone(&sealing.wanted);
    let (response, claimed) = SEALING
        .scope(
            sealing,
            weft_storage::with_idempotency(
                claim,
                next.run(Request::from_parts(parts, Body::from(bytes))),
            ),
        )
        .await;
    let status = response.status();
    if status.is_server_error() {
        return Ok(response);
    }
    match claimed {
        // Another process answered this key between our look-up and the write.
        Some(Claimed::Replay(stored)) => return opened(stored, &sealer).map(replay),
        // The answer was committed with the work: answer with exactly those bytes.
        Some(Claimed::Stored(stored)) => {
            let mut first = answer(&opened(stored, &sealer)?);
            first.headers_mut().remove("idempotent-replayed");
            return Ok(first);
        }
        None => {}
    }
    // A refusal did no work (its transaction, if any, rolled back): nothing to keep.
    if status.is_client_error() {
        return Ok(response);
    }
    let (response_parts, body) = response.into_parts();
    let mut stream = body.into_data_stream();
    let mut answer = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|_| HttpError::new(ErrorCode::Internal, "could not read the answer"))?;
        if answer.len() + chunk.len() > MAX_JSON_BYTES {
            return Err(HttpError::new(
                ErrorCode::Internal,
                "answer too large to store for idempotency",
            ));
        }
        answer.extend_from_slice(&chunk);
    }
    let body = if wanted.load(Ordering::Relaxed) {
        sealer
            .seal(&answer)
            .ok_or_else(|| HttpError::new(ErrorCode::Internal, "could not seal the answer"))?
    } else {
        answer.clone()
    };
    let stored = StoredAnswer {
        request_hash,
        status: status.as_u16(),
        body,
    };
    state
        .store
        .store_idempotent_answer(scope, key, stored)
        .await?;
    Ok(Response::from_parts(response_parts, Body::from(answer)))
}

/// Arms the current request's idempotency claim (a no-op without `Idempotency-Key`): the
/// store's write whose result has type `T` commits, with the work, the answer `render`
/// makes of that result. A handler calls it before the store operation and answers with the
/// same `render`, so the first answer and every replay agree.
pub(crate) fn answer_with<T: 'static, V: serde::Serialize>(
    render: impl Fn(&T) -> (StatusCode, V) + Send + Sync + 'static,
) {
    // Whether to seal is asked when the answer is rendered, so a route may say so before or
    // after arming its claim.
    let sealing = SEALING.try_with(Sealing::clone).ok();
    weft_storage::answer_with::<T>(move |value| {
        let (status, body) = render(value);
        // An unencodable answer is not stored with the work; the handler then fails as usual.
        let bytes = serde_json::to_vec(&body).ok()?;
        let bytes = match &sealing {
            Some(sealing) if sealing.wanted.load(Ordering::Relaxed) => {
                sealing.sealer.seal(&bytes)?
            }
            _ => bytes,
        };
        Some((status.as_u16(), bytes))
    });
}

/// The current request's answer holds a bearer secret: with an `Idempotency-Key` it is stored
/// sealed to the caller's bearer token (`sealed.rs`), whichever way it is stored.
pub(crate) fn seal_answer() {
    let _ = SEALING.try_with(|sealing| sealing.wanted.store(true, Ordering::Relaxed));
}

/// [`answer_with`] for an answer that holds a bearer secret: the answer committed with the
/// work is sealed to the caller (see [`seal_answer`]).
pub(crate) fn answer_sealed_with<T: 'static, V: serde::Serialize>(
    render: impl Fn(&T) -> (StatusCode, V) + Send + Sync + 'static,
) {
    seal_answer();
    answer_with(render);
}

/// `stored` as this caller may see it: a sealed answer opened with the caller's bearer, or
/// refused when another token sealed it (a retry by another session of the same Agent).
fn opened(stored: StoredAnswer, sealer: &Sealer) -> Result<StoredAnswer, HttpError> {
    if !is_sealed(&stored.body) {
        return Ok(stored);
    }
    let body = sealer.open(&stored.body).ok_or_else(|| {
        HttpError::new(
            ErrorCode::Forbidden,
            "this Idempotency-Key was answered to another session, with a secret only that session's token opens",
        )
    })?;
    Ok(StoredAnswer { body, ..stored })
}

fn replay(stored: StoredAnswer) -> Response {
    answer(&stored)
}

/// A stored answer as a response, marked as replayed.
fn answer(stored: &StoredAnswer) -> Response {
    let stored = stored.clone();
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    let content_type = if status.is_success() {
        "application/json"
    } else {
        "application/problem+json"
    };
    let mut response = (status, stored.body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
    response
}
