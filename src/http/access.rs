//! One access line and the request metrics per request.
//!
//! The line (target `weft::access`, level `info`) names the method, the matched route
//! template, the status, the time to the response head, the caller and the request id. It
//! never carries a token, a query string or a raw path (ids in paths would make the line a
//! record of what was read, and a path can hold a digest the caller may not see): the caller
//! is `admin`, `agent:<id>`, `agent:<id> (token <id>)` for a capability token, or `-` when
//! the request was not authenticated (public routes, refused credentials). The authentication
//! extractors note who called in a [`CallerSlot`] the middleware put into the request; the
//! console's cookie sign-in notes it through the task-local slot of the request.

use std::sync::{Arc, OnceLock};

use axum::extract::{MatchedPath, Request};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::Response;

/// Where an authentication extractor writes who the caller turned out to be.
#[derive(Clone, Default)]
pub(crate) struct CallerSlot(Arc<OnceLock<String>>);

tokio::task_local! {
    /// The slot of the request this task serves (handlers run in the middleware's task).
    static SLOT: CallerSlot;
}

/// Records the caller of this request for its access line (the first note wins).
pub(crate) fn note_caller(parts: &Parts, who: impl FnOnce() -> String) {
    if let Some(slot) = parts.extensions.get::<CallerSlot>() {
        let _ = slot.0.get_or_init(who);
    }
}

/// [`note_caller`] from code that authenticates without the request parts (the console's
/// cookie): the slot of the request being served by this task.
pub(crate) fn note_caller_here(who: impl FnOnce() -> String) {
    let _ = SLOT.try_with(|slot| {
        let _ = slot.0.get_or_init(who);
    });
}

/// Counts every request, times it to the response head, and logs its access line; the
/// metrics are labelled by the matched route template (`/v1/artifacts/{digest}`; `unmatched`
/// for no route), never the raw path, whose ids would make one series per artifact.
pub(crate) async fn layer(mut request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = request.method().as_str().to_owned();
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("-")
        .to_owned();
    let slot = CallerSlot::default();
    request.extensions_mut().insert(slot.clone());
    let started = std::time::Instant::now();
    let response = SLOT.scope(slot.clone(), next.run(request)).await;
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    tracing::info!(
        target: "weft::access",
        method = %method,
        route = %route,
        status,
        duration_ms = elapsed.as_secs_f64() * 1000.0,
        caller = %slot.0.get().map_or("-", String::as_str),
        request_id = %request_id,
        "request"
    );
    let labels = [
        ("route", route),
        ("method", method),
        ("status", status.to_string()),
    ];
    metrics::counter!(crate::telemetry::HTTP_REQUESTS, &labels).increment(1);
    metrics::histogram!(crate::telemetry::HTTP_DURATION, &labels).record(elapsed.as_secs_f64());
    response
}
