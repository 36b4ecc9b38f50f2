//! Lifecycle races. Retention policies and holds through two servers at once over one
//! PostgreSQL index (issue #43): a policy reads the holds in force under its Group's lock, so
//! a hold placed through another server meanwhile is seen (two `Store`s in one test process,
//! as in `servers.rs`; on the other backends that test says it skipped). The finishing of an
//! interrupted collection against an upload that brings its bytes back (every backend).

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::json;

use super::harness::*;
use super::lifecycle::{end_mission, lift_hold, renewed_in, set_retention};

/// `request` sent to `h`'s server in a task of its own (it may wait at a held fault).
fn sent(
    h: &Harness,
    request: axum::http::Request<Body>,
) -> tokio::task::JoinHandle<Result<axum::response::Response, std::convert::Infallible>> {
    let app = h.app.clone();
    tokio::spawn(async move { tower::ServiceExt::oneshot(app, request).await })
}

backends!(
    /// A collection disposed of a blob but failed to delete its file (it stays marked). The
    /// same bytes are uploaded again, which brings the blob back, while the next collection
    /// waits to finish the interrupted one: the next collection reads the marks once the
    /// upload is recorded, so the live blob keeps its file and reads back verified. (It read
    /// them before the upload and then deleted the file of a live blob.)
    async fn finishing_a_collection_spares_bytes_uploaded_again_meanwhile(kind: Kind) {
        let h = harness_files(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes = vec![7u8; 30_000];
        let artifact = h.put(&worker, "g1", &bytes, &[]).await;
        set_retention(&h, "g1", json!({"keepBytes": "0s"})).await;
        end_mission(&h, "g1", "mission-1").await;
        h.clock.advance(chrono::Duration::days(1));
        h.faults.fail_writes(
            weft_storage::FaultSite::BlobWrite,
            weft_storage::FaultKind::Io,
        );
        let failed = h
            .call(Method::POST, "/v1/admin/gc", Some(ADMIN), Body::empty())
            .await;
        assert!(failed.status.is_server_error(), "{kind:?}: {failed:?}");
        h.faults.clear();
        let worker = renewed_in(&h, worker, "g1").await;
        h.faults.promoted().set(true);
        let upload = sent(
            &h,
            request(
                Method::PUT,
                &format!("/v1/blobs/{artifact}"),
                Some(&worker.token),
                bytes.clone(),
            ),
        );
        h.faults.promoted().waiting(1).await;
        let collection = sent(
            &h,
            request(Method::POST, "/v1/admin/gc", Some(ADMIN), Vec::new()),
        );
        // Time for the collection to reach the sweep lock the held upload keeps.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        h.faults.promoted().set(false);
        let answer = upload.await.expect("task").expect("answer");
        assert!(
            answer.status().is_success(),
            "{kind:?}: {}",
            answer.status()
        );
        let answer = collection.await.expect("task").expect("answer");
        assert_eq!(answer.status(), StatusCode::OK, "{kind:?}");
        let content = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{artifact}/content"),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(content.status, StatusCode::OK, "{kind:?}: {content:?}");
        assert_eq!(content.body, bytes, "{kind:?}");
        let report = h.store.fsck().await.expect("fsck");
        assert!(report.problems.is_empty(), "{kind:?}: {report:?}");
    }
);

/// A hold placed through one server while another sets a policy that would let the held
/// artifact go now: the policy is refused `held`, or it committed first and the hold after
/// it. The policy read the holds before it took the Group's lock, so both could land with the
/// hold first in the log: a policy in force that a hold placed before it forbids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_and_a_policy_its_artifact_forbids_through_two_servers_never_land_hold_first() {
    if !postgres_available() {
        return;
    }
    let a = harness_files(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let worker = a.agent("w1", "g1", &["worker"]).await;
    let auditor = a.agent("aud", "g1", &["auditor"]).await;
    let artifact = a.put(&worker, "g1", b"held, or not yet", &[]).await;
    end_mission(&a, "g1", "mission-1").await;
    a.clock.advance(chrono::Duration::days(2));
    let auditor = renewed_in(&a, auditor, "g1").await;
    let (mut refused, mut first) = (0, 0);
    for round in 0..16 {
        let keep = set_retention(&a, "g1", json!({"keepBytes": "3650d"})).await;
        assert_eq!(keep.status, StatusCode::OK, "{keep:?}");
        let hold = json!({"artifact": artifact.to_string(), "reason": format!("round {round}")});
        let (placed, policy) = tokio::join!(
            a.admin_json(Method::POST, "/v1/admin/holds", hold),
            set_retention(&b, "g1", json!({"keepBytes": "1d"}))
        );
        assert_eq!(placed.status, StatusCode::CREATED, "{placed:?}");
        let hold_id = placed.json()["holdId"].as_str().expect("id").to_owned();
        if policy.status == StatusCode::CONFLICT {
            assert_eq!(policy.code(), "held");
            refused += 1;
        } else {
            assert_eq!(policy.status, StatusCode::OK, "{policy:?}");
            let page = a
                .get_json(&auditor, "/v1/groups/g1/events?limit=1000")
                .await;
            let events = page["events"].as_array().expect("events");
            let at = |kind: &str, field: &str, value: serde_json::Value| {
                events
                    .iter()
                    .rposition(|e| e["type"] == kind && e["payload"][field] == value)
            };
            let hold_at = at("hold.placed", "holdId", json!(hold_id));
            let policy_at = at("retention.set", "keepBytesSeconds", json!(86_400));
            assert!(
                policy_at < hold_at,
                "round {round}: the policy landed after a hold that forbids it"
            );
            first += 1;
        }
        let keep = set_retention(&a, "g1", json!({"keepBytes": "3650d"})).await;
        assert_eq!(keep.status, StatusCode::OK, "{keep:?}");
        let lifted = lift_hold(&a, &hold_id).await;
        assert_eq!(lifted.status, StatusCode::OK, "{lifted:?}");
    }
    eprintln!("policies refused: {refused}, committed before the hold: {first}");
}

/// An upload of bytes its sender could read is only hashed; held before its row, another
/// server's collection disposes of the blob. The upload is refused as retryable (503) and
/// records nothing (it answered success, storing no byte, and the next publication of them
/// found them gone); sent again, the bytes are stored and read back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_only_hashed_while_another_server_disposes_of_its_blob_is_refused() {
    if !postgres_available() {
        return;
    }
    let a = harness_files(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let worker = a.agent("w1", "g1", &["worker"]).await;
    let bytes = vec![6u8; 30_000];
    let artifact = a.put(&worker, "g1", &bytes, &[]).await;
    set_retention(&a, "g1", json!({"keepBytes": "0s"})).await;
    end_mission(&a, "g1", "mission-1").await;
    a.clock.advance(chrono::Duration::days(2));
    let worker = renewed_in(&a, worker, "g1").await;
    let put = |h: &Harness| {
        sent(
            h,
            request(
                Method::PUT,
                &format!("/v1/blobs/{artifact}"),
                Some(&worker.token),
                bytes.clone(),
            ),
        )
    };
    a.faults.promoted().set(true);
    let upload = put(&a);
    a.faults.promoted().waiting(1).await;
    let report = super::lifecycle::gc(&b, false).await;
    assert_eq!(
        super::lifecycle::disposed(&report),
        vec![artifact.to_string()],
        "{report}"
    );
    let before = a.fingerprint().await;
    a.faults.promoted().set(false);
    let answer = upload.await.expect("task").expect("answer");
    assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_unchanged(&before, &a.fingerprint().await, "a refused upload");
    let again = put(&a).await.expect("task").expect("answer");
    assert!(again.status().is_success(), "{}", again.status());
    let content = a
        .call(
            Method::GET,
            &format!("/v1/artifacts/{artifact}/content"),
            Some(&worker.token),
            Body::empty(),
        )
        .await;
    assert_eq!(content.status, StatusCode::OK, "{content:?}");
    assert_eq!(content.body, bytes);
}
