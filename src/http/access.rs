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
use axum::http::Method;
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
/// for no route), never the raw path, whose ids would make one series per artifact, and by
/// the method (`other` for a method outside RFC 9110's, so a client cannot mint series).
pub(crate) async fn layer(mut request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().cloned();
    let method = request.method().clone();
    let request_id = request.headers().get("x-request-id").cloned();
    let slot = CallerSlot::default();
    request.extensions_mut().insert(slot.clone());
    let started = std::time::Instant::now();
    let response = SLOT.scope(slot.clone(), next.run(request)).await;
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    let method = method_label(&method);
    tracing::info!(
        target: "weft::access",
        method = %method,
        route = %route,
        status,
        duration_ms = elapsed.as_secs_f64() * 1000.0,
        caller = %slot.0.get().map_or("-", String::as_str),
        request_id = %request_id.as_ref().and_then(|v| v.to_str().ok()).unwrap_or("-"),
        "request"
    );
    with_series(route, method, status, |series| {
        series.requests.increment(1);
        series.duration.record(elapsed.as_secs_f64());
    });
    response
}

/// The method as a metrics label: RFC 9110's methods and PATCH by name, anything else `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// The request metrics of one (route, method, status).
struct Series {
    route: Box<str>,
    method: &'static str,
    status: u16,
    requests: metrics::Counter,
    duration: metrics::Histogram,
}

/// Series a worker thread has registered, by a hash of their labels: registering builds a
/// labelled key and looks it up in the recorder, which cost more than the rest of a small
/// GET's bookkeeping. Bounded by the routes, methods and statuses there are.
const SERIES_PER_THREAD: usize = 4096;

thread_local! {
    static SERIES: std::cell::RefCell<std::collections::HashMap<u64, Series>> =
        std::cell::RefCell::default();
}

/// Runs `record` on the series of (route, method, status), registered on first use.
fn with_series(route: &str, method: &'static str, status: u16, record: impl FnOnce(&Series)) {
    use std::hash::BuildHasher as _;
    let hash = foldhash::fast::FixedState::with_seed(0).hash_one((route, method, status));
    let register = || {
        let labels = [
            ("route", route.to_owned()),
            ("method", method.to_owned()),
            ("status", status.to_string()),
        ];
        Series {
            route: route.into(),
            method,
            status,
            requests: metrics::counter!(crate::telemetry::HTTP_REQUESTS, &labels),
            duration: metrics::histogram!(crate::telemetry::HTTP_DURATION, &labels),
        }
    };
    SERIES.with_borrow_mut(|series| {
        let same = |found: &Series| {
            &*found.route == route && found.method == method && found.status == status
        };
        match series.get(&hash) {
            Some(found) if same(found) => record(found),
            // A hash collision, or a full table: registered for this request only.
            Some(_) => record(&register()),
            None if series.len() >= SERIES_PER_THREAD => record(&register()),
            None => record(series.entry(hash).or_insert_with(register)),
        }
    });
}
