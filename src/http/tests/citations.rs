//! Issue #40 with EVD-4: which Artifacts Evidence may cite ("referenced Artifacts"): any the
//! producer can read that was published for the Evidence's own Mission, another WorkItem's
//! included, or reusable knowledge of its Group; never another Mission's.

use axum::http::StatusCode;
use serde_json::json;

use super::evidence::{evidence, record_request, sign_evidence};
use super::harness::{Kind, backends, digest_of, harness, refused};
use super::scope::publish_in;

backends!(
    /// Issue #40 (EVD-4, "referenced Artifacts"; issue #10 finding 5): Evidence cites any
    /// artifact of its own Mission the producer can read, another WorkItem's included, but
    /// never another Mission's (`mission_mismatch`, nothing recorded).
    async fn evidence_cites_artifacts_of_its_own_mission(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        let report = h.put(&worker, "g1", b"report of work-1", &[]).await;
        let dataset = h
            .put_in(&worker, "g1", b"reference data of work-3", &[], "work-3")
            .await;
        let answer = publish_in(&h, &worker, "mission-2", "work-2", b"elsewhere", &[]).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        let elsewhere = digest_of(b"elsewhere").blake3;
        let mut payload = evidence(&reviewer, "g1", "work-1", "ac-1", "pass", &[report]);
        payload["missionId"] = json!("mission-2");
        refused(
            &h,
            record_request(&reviewer, &sign_evidence(&reviewer.key, &payload)),
            "mission_mismatch",
        )
        .await;
        let payload = evidence(&reviewer, "g1", "work-1", "ac-1", "pass", &[elsewhere]);
        refused(
            &h,
            record_request(&reviewer, &sign_evidence(&reviewer.key, &payload)),
            "mission_mismatch",
        )
        .await;
        h.recorded(
            &reviewer,
            &evidence(
                &reviewer,
                "g1",
                "work-1",
                "ac-1",
                "pass",
                &[report, dataset],
            ),
        )
        .await;
    }
);
