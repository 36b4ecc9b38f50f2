//! Several servers and the operator's writes that are not idempotent by nature (issue #43):
//! a key rotation sent with one Idempotency-Key to two servers at once (a client retrying on
//! another server while the first still works) rotates once, and both answer alike. Before,
//! its answer was stored after the rotation committed, in a transaction of its own, so the
//! retry found no answer, rotated again and was refused `conflict` (the key was registered).

use axum::http::{Method, StatusCode};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use weft_storage::bench_support::postgres::hold_idempotency_key;

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
