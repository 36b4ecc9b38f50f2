//! Several servers and writes whose answers were stored after their work, in a transaction of
//! their own (issue #43): sent with one Idempotency-Key to two servers at once (a client
//! retrying on another server while the first still works), each runs once and both answer
//! alike. Before, the retry found no answer and ran again: a key rotation was refused
//! `conflict` (the key was registered), a Context Package answered 200 "already published",
//! a session renewal `nonce_reused`, a review recorded a second set of Evidence.

use axum::http::{Method, StatusCode};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use weft_storage::bench_support::postgres::hold_idempotency_key;

use super::context::setting;
use super::harness::*;

/// `request` (an Idempotency-Key of `key` in `scope`) sent through servers `a` and `b` at
/// once, while another transaction holds the key's lock until both wait behind it, so both
/// look it up and find nothing: asserts both answer `status` alike, and answers `a`'s.
async fn through_both_behind_a_held_key(
    (a, b): (&Harness, &Harness),
    (scope, key): (&'static str, &'static str),
    request: impl Fn() -> axum::http::Request<axum::body::Body>,
    status: StatusCode,
) -> Answer {
    let url = a.index.clone().expect("a PostgreSQL index");
    let (locking, locked) = tokio::sync::oneshot::channel();
    let holder = tokio::task::spawn_blocking(move || {
        hold_idempotency_key(&url, scope, key, 2, || {
            let _ = locking.send(());
        })
    });
    locked.await.expect("the key is held");
    let (first, second) = tokio::join!(a.send(request()), b.send(request()));
    let waited = holder.await.expect("the holder ran").expect("it ends");
    assert!(waited, "both servers looked the key up behind its lock");
    assert_eq!(first.status, status, "{first:?}");
    assert_eq!(second.status, status, "{second:?}");
    assert_eq!(first.json(), second.json(), "one run, its answer replayed");
    first
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rotation_retried_on_another_server_rotates_once() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    a.agent("w1", "g1", &["worker"]).await;
    let key = ed25519_dalek::SigningKey::from_bytes(&[42; 32]);
    let body = serde_json::json!({"publicKey": BASE64.encode(key.verifying_key().as_bytes())});
    let header = [("Idempotency-Key", "rotate-once")];
    let request = || {
        json_request(
            Method::POST,
            "/v1/admin/agents/w1/keys",
            ADMIN,
            body.clone(),
            &header,
        )
    };
    through_both_behind_a_held_key((&a, &b), ("admin", "rotate-once"), request, StatusCode::OK)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_package_retried_on_another_server_answers_as_the_first() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let (worker, artifact) = setting(&a).await;
    let payload = super::context::package(
        &worker,
        ("g1", "mission-1"),
        "pkg-1",
        1,
        None,
        (1, 2),
        &[artifact],
    );
    let header = [("Idempotency-Key", "context-once")];
    let request = || {
        let mut request = super::context::publish_context(&worker, "g1", &payload);
        request
            .headers_mut()
            .insert(header[0].0, header[0].1.parse().expect("header"));
        request
    };
    let key = ("agent:ctx-worker", "context-once");
    through_both_behind_a_held_key((&a, &b), key, request, StatusCode::CREATED).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_renewal_retried_on_another_server_answers_as_the_first() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let worker = a.agent("w1", "g1", &["worker"]).await;
    let issued = weft_storage::Clock::now(&a.clock).to_rfc3339();
    let request = || {
        let mut request = super::sessions::renewal(
            &worker.token,
            &worker.key,
            "w1",
            "g1",
            issued.clone(),
            "0123456789abcdef0123",
        );
        request
            .headers_mut()
            .insert("Idempotency-Key", "renew-once".parse().expect("header"));
        request
    };
    through_both_behind_a_held_key(
        (&a, &b),
        ("agent:w1", "renew-once"),
        request,
        StatusCode::OK,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_retried_on_another_server_records_once() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let worker = a.agent("w1", "g1", &["worker"]).await;
    let reviewer = a.agent("r1", "g1", &["reviewer"]).await;
    let artifact = a.put(&worker, "g1", b"reviewed once", &[]).await;
    let body = serde_json::json!({"artifacts": [artifact], "criteria": {"integrity": "ac-1"}});
    let header = [("Idempotency-Key", "review-once")];
    let request = || {
        let uri = "/v1/workitems/work-1/review";
        json_request(Method::POST, uri, &reviewer.token, body.clone(), &header)
    };
    let key = ("agent:r1", "review-once");
    through_both_behind_a_held_key((&a, &b), key, request, StatusCode::CREATED).await;
    let criteria = a
        .get_json(&reviewer, "/v1/evidence?workItemId=work-1")
        .await;
    assert_eq!(
        criteria["items"].as_array().map(Vec::len),
        Some(1),
        "one record: {criteria}"
    );
}
