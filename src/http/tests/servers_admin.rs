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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rotation_retried_on_another_server_rotates_once() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let url = a.index.clone().expect("a PostgreSQL index");
    a.agent("w1", "g1", &["worker"]).await;
    let key = ed25519_dalek::SigningKey::from_bytes(&[42; 32]);
    let body = serde_json::json!({"publicKey": BASE64.encode(key.verifying_key().as_bytes())});
    let (locking, locked) = tokio::sync::oneshot::channel();
    // Both servers' look-ups wait behind this lock, then both find nothing.
    let holder = tokio::task::spawn_blocking(move || {
        hold_idempotency_key(&url, "admin", "rotate-once", 2, || {
            let _ = locking.send(());
        })
    });
    locked.await.expect("the key is held");
    let uri = "/v1/admin/agents/w1/keys";
    let header = [("Idempotency-Key", "rotate-once")];
    let (first, second) = tokio::join!(
        a.json_as(Method::POST, uri, ADMIN, body.clone(), &header),
        b.json_as(Method::POST, uri, ADMIN, body, &header),
    );
    let waited = holder.await.expect("the holder ran").expect("it ends");
    assert!(waited, "both servers looked the key up behind its lock");
    assert_eq!(first.status, StatusCode::OK, "{first:?}");
    assert_eq!(second.status, StatusCode::OK, "{second:?}");
    assert_eq!(
        first.json(),
        second.json(),
        "one rotation, its answer replayed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_package_retried_on_another_server_answers_as_the_first() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let url = a.index.clone().expect("a PostgreSQL index");
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
    let envelope = weft_api::Envelope::sign(
        &worker.key,
        weft_api::context::CONTEXT_TYPE,
        payload.to_string().as_bytes(),
    );
    let body = serde_json::to_value(&envelope).expect("json");
    let (locking, locked) = tokio::sync::oneshot::channel();
    let holder = tokio::task::spawn_blocking(move || {
        hold_idempotency_key(&url, "agent:ctx-worker", "context-once", 2, || {
            let _ = locking.send(());
        })
    });
    locked.await.expect("the key is held");
    let uri = "/v1/groups/g1/context";
    let header = [("Idempotency-Key", "context-once")];
    let (first, second) = tokio::join!(
        a.json_as(Method::POST, uri, &worker.token, body.clone(), &header),
        b.json_as(Method::POST, uri, &worker.token, body, &header),
    );
    let waited = holder.await.expect("the holder ran").expect("it ends");
    assert!(waited, "both servers looked the key up behind its lock");
    assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
    assert_eq!(second.status, StatusCode::CREATED, "{second:?}");
    assert_eq!(first.json(), second.json());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_renewal_retried_on_another_server_answers_as_the_first() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let url = a.index.clone().expect("a PostgreSQL index");
    let worker = a.agent("w1", "g1", &["worker"]).await;
    let issued = weft_storage::Clock::now(&a.clock).to_rfc3339();
    let (locking, locked) = tokio::sync::oneshot::channel();
    let holder = tokio::task::spawn_blocking(move || {
        hold_idempotency_key(&url, "agent:w1", "renew-once", 2, || {
            let _ = locking.send(());
        })
    });
    locked.await.expect("the key is held");
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
    let (first, second) = tokio::join!(a.send(request()), b.send(request()));
    let waited = holder.await.expect("the holder ran").expect("it ends");
    assert!(waited, "both servers looked the key up behind its lock");
    assert_eq!(first.status, StatusCode::OK, "{first:?}");
    assert_eq!(second.status, StatusCode::OK, "{second:?}");
    assert_eq!(first.json(), second.json());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_retried_on_another_server_records_once() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let url = a.index.clone().expect("a PostgreSQL index");
    let worker = a.agent("w1", "g1", &["worker"]).await;
    let reviewer = a.agent("r1", "g1", &["reviewer"]).await;
    let artifact = a.put(&worker, "g1", b"reviewed once", &[]).await;
    let body = serde_json::json!({"artifacts": [artifact], "criteria": {"integrity": "ac-1"}});
    let (locking, locked) = tokio::sync::oneshot::channel();
    let holder = tokio::task::spawn_blocking(move || {
        hold_idempotency_key(&url, "agent:r1", "review-once", 2, || {
            let _ = locking.send(());
        })
    });
    locked.await.expect("the key is held");
    let uri = "/v1/workitems/work-1/review";
    let header = [("Idempotency-Key", "review-once")];
    let (first, second) = tokio::join!(
        a.json_as(Method::POST, uri, &reviewer.token, body.clone(), &header),
        b.json_as(Method::POST, uri, &reviewer.token, body, &header),
    );
    let waited = holder.await.expect("the holder ran").expect("it ends");
    assert!(waited, "both servers looked the key up behind its lock");
    assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
    assert_eq!(second.status, StatusCode::CREATED, "{second:?}");
    assert_eq!(
        first.json(),
        second.json(),
        "one review, its answer replayed"
    );
    let criteria = a
        .get_json(&reviewer, "/v1/evidence?workItemId=work-1")
        .await;
    assert_eq!(
        criteria["items"].as_array().map(Vec::len),
        Some(1),
        "one record: {criteria}"
    );
}
