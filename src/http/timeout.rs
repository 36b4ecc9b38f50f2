//! The request timeout of JSON routes (`--request-timeout-secs`), answered as problem+json
//! `timeout` like every other refusal.
//!
//! tower's timeout layer answers a bare, empty 408; clients branch on our `code`, so the
//! deadline lives here instead. Blob routes never pass through this layer: they stream, and
//! time out per idle chunk in `body::upload_stream`.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use weft_api::ErrorCode;

use super::error::HttpError;
use super::state::AppState;

/// Runs the rest of the JSON stack under the request deadline. When it passes, the handler's
/// future is dropped (as tower's layer did), so a half-read body changes nothing.
pub(crate) async fn layer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let deadline = state.limits.request_timeout;
    match tokio::time::timeout(deadline, next.run(request)).await {
        Ok(response) => response,
        Err(_) => HttpError::new(
            ErrorCode::Timeout,
            format!(
                "the request did not complete within {} s",
                deadline.as_secs()
            ),
        )
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Method, Request, StatusCode, header};
    use bytes::Bytes;
    use futures::StreamExt as _;
    use tower::ServiceExt as _;
    use weft_storage::Store;

    use super::super::{AppState, app};
    use crate::config::Config;

    const ADMIN: &str = "admin-token-for-timeout-tests";

    #[tokio::test]
    async fn a_stalled_json_body_is_answered_408_problem_json_timeout() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config::with_data_dir(dir.path().to_path_buf());
        config.in_memory = true;
        // The request deadline must pass first: the body's idle timeout stays far away.
        config.request_timeout_secs = 1;
        config.body_idle_timeout_secs = 600;
        let store = Store::open(config.storage_options())
            .await
            .expect("store opens");
        let app = app(AppState::new(store, ADMIN, &config));
        let first =
            futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"{\"uri\""))]);
        let stalled = first.chain(futures::stream::pending());
        let request = Request::builder()
            .method(Method::POST)
            .uri("/v1/admin/schemas")
            .header(header::AUTHORIZATION, format!("Bearer {ADMIN}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from_stream(stalled))
            .expect("request builds");
        let response = app.oneshot(request).await.expect("infallible");
        assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
        assert_eq!(
            response
                .headers()
                .get(header::CONTENT_TYPE)
                .map(|v| v.as_bytes()),
            Some(&b"application/problem+json"[..])
        );
        let body = axum::body::to_bytes(response.into_body(), 64 * 1024)
            .await
            .expect("problem body");
        let problem: weft_api::ErrorBody = serde_json::from_slice(&body).expect("problem+json");
        assert_eq!(
            (problem.status, problem.code),
            (408, weft_api::ErrorCode::Timeout)
        );
    }
}
