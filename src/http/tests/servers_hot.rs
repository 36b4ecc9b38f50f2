//! Several servers and the memory of small artifacts (`engine/hot.rs`, issue #43): bytes
//! disposed of through one server are no longer answered from another's memory. Before, only
//! the server that disposed (or quarantined) dropped them from its own memory, and every
//! other server went on serving them until they aged out.

use axum::http::{Method, StatusCode};
use serde_json::json;

use super::harness::*;
use super::lifecycle::{disposed, gc, past_keep_bytes};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_disposed_through_one_server_are_not_served_from_anothers_memory() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let worker = a.agent("w1", "g1", &["worker"]).await;
    let artifact = a
        .put(&worker, "g1", b"small enough to be kept in memory", &[])
        .await;
    let uri = format!("/v1/artifacts/{artifact}/content");
    let token = b.session(&worker.key, "w1", "g1").await;
    // b hears of the publication through the log; then it reads the bytes once from the
    // index and keeps them.
    let mut read = false;
    for _ in 0..500 {
        let answer = b.call(Method::GET, &uri, Some(&token), Vec::new()).await;
        if answer.status == StatusCode::OK {
            read = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(read, "b reads what a published");
    let again = b.call(Method::GET, &uri, Some(&token), Vec::new()).await;
    assert_eq!(again.status, StatusCode::OK, "{again:?}");

    past_keep_bytes(&a, 3).await;
    let report = gc(&a, false).await;
    assert_eq!(disposed(&report), [artifact.to_string()], "{report}");
    // The clock moved past the session: a fresh one.
    let token = b.session(&worker.key, "w1", "g1").await;
    // b hears of the disposal through the log: a bounded wait, not a sleep.
    let mut last = None;
    for _ in 0..500 {
        let answer = b.call(Method::GET, &uri, Some(&token), Vec::new()).await;
        if answer.status == StatusCode::GONE {
            assert_eq!(answer.json()["code"], json!("disposed"), "{answer:?}");
            return;
        }
        last = Some(answer.status);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("b still answers the disposed bytes: {last:?}");
}
