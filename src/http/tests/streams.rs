//! Event streams under load (issue #40): the per-session and per-Agent caps, slots given back
//! when a stream ends, and where a reconnecting stream resumes.

use axum::http::{Method, Request, StatusCode};
use serde_json::json;
use tower::ServiceExt as _;

use super::delivery::{open_stream, read_events};
use super::harness::*;

fn stream_request(token: &str, group: &str) -> Request<axum::body::Body> {
    request(
        Method::GET,
        &format!("/v1/groups/{group}/events/stream"),
        Some(token),
        axum::body::Body::empty(),
    )
}

/// Sends `request` and answers the response unread (a stream's body never ends).
async fn open_raw(h: &Harness, request: Request<axum::body::Body>) -> axum::response::Response {
    h.app.clone().oneshot(request).await.expect("infallible")
}

/// issue #40: SSE streams are capped per session and per Agent (429 `too_many_streams` with
/// Retry-After, nothing changed), and a closed stream gives its slot back.
#[tokio::test]
async fn streams_are_capped_per_session_and_per_agent() {
    let h = harness_with(Kind::Memory, |config| {
        config.max_streams_per_session = 2;
        config.max_streams_per_agent = 3;
    })
    .await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let mut open = Vec::new();
    for _ in 0..2 {
        let response = open_stream(&h, &worker.token, "", None).await;
        assert_eq!(response.status(), StatusCode::OK);
        open.push(response);
    }
    let answer = refused(&h, stream_request(&worker.token, "g1"), "too_many_streams").await;
    assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(answer.headers["retry-after"], "1");
    // The same Agent's session in another Group has a session cap of its own, but shares
    // the Agent's.
    let elsewhere = h.join(&worker, "g2", &["worker"]).await;
    let held = open_raw(&h, stream_request(&elsewhere.token, "g2")).await;
    assert_eq!(held.status(), StatusCode::OK);
    let answer = refused(
        &h,
        stream_request(&elsewhere.token, "g2"),
        "too_many_streams",
    )
    .await;
    assert!(
        answer.json()["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("Agent")),
        "{answer:?}"
    );
    drop(held);
    // A closed stream gives its slot back at once.
    drop(open.pop());
    let again = open_stream(&h, &worker.token, "", None).await;
    assert_eq!(again.status(), StatusCode::OK);
}

/// issue #40: a stream resumed with both `?after=N` and `Last-Event-ID` resumes after
/// `Last-Event-ID`, as a browser's EventSource reconnecting to its URL needs.
#[tokio::test]
async fn last_event_id_wins_over_after() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await; // events 1..3
    h.ensure_work_item("g1", "mission-1", "work-1").await; // events 4..7
    let response = open_stream(&h, &worker.token, "?after=2", Some("5")).await;
    assert_eq!(response.status(), StatusCode::OK);
    let events = read_events(response.into_body(), 1).await;
    assert_eq!(events[0]["sequence"], json!(6));
    // `?after` alone still counts.
    let response = open_stream(&h, &worker.token, "?after=2", None).await;
    let events = read_events(response.into_body(), 1).await;
    assert_eq!(events[0]["sequence"], json!(3));
}
