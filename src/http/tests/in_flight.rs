//! Issue #43: fsck on an index several servers share does not report another server's upload
//! in flight (its bytes placed, its row not yet committed) as a leftover; on one node, where a
//! start removes what a crash left, a blob file without a row is still reported.

use axum::http::{Method, StatusCode};

use super::harness::*;

backends!(
    async fn fsck_tells_an_upload_in_flight_from_a_leftover(kind: Kind) {
        let h = harness_files(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes = vec![5u8; 20_000];
        let blake3 = digest_of(&bytes).blake3;
        h.faults.promoted().set(true);
        let upload = {
            let request = request(
                Method::PUT,
                &format!("/v1/blobs/{blake3}"),
                Some(&worker.token),
                bytes.clone(),
            );
            let app = h.app.clone();
            tokio::spawn(async move { tower::ServiceExt::oneshot(app, request).await })
        };
        h.faults.promoted().waiting(1).await;
        let report = h.store.fsck().await.expect("fsck");
        let named = report
            .leftovers
            .iter()
            .any(|leftover| leftover.contains(&blake3.to_string()));
        if kind == Kind::Postgres {
            assert!(!named, "{kind:?}: {report:?}");
            assert_eq!(report.in_flight, 1, "{kind:?}: {report:?}");
        } else {
            assert!(named, "{kind:?}: one node reports it: {report:?}");
            assert_eq!(report.in_flight, 0, "{kind:?}");
        }
        assert!(report.problems.is_empty(), "{kind:?}: {report:?}");
        h.faults.promoted().set(false);
        let answer = upload.await.expect("task").expect("answer");
        assert_eq!(answer.status(), StatusCode::CREATED, "{kind:?}");
        let report = h.store.fsck().await.expect("fsck");
        assert!(
            report.leftovers.is_empty() && report.in_flight == 0,
            "{kind:?}: {report:?}"
        );
    }
);
