//! Issue #40 with EVD-1: the Authority's deterministic checks (`integrity_check`,
//! `schema_validation`) are superseded only by a re-run of the same check, never by a
//! coordinator's or reviewer's `human` verdict, so the criteria view keeps the check's fail;
//! and a record of the Authority's is corrected only by the Authority.

use axum::http::{Method, StatusCode};
use serde_json::json;

use super::harness::{Kind, backends, harness_files, manifest, refused, request, sign};
use super::work_setup::{evidence_payload, signed_evidence};

backends!(
    /// Issue #40 (EVD-1, `fixtures/evidence_rules.json` `superseded_by`): a coordinator's
    /// `human` pass naming the Authority's `schema_validation` fail in `supersedes` is
    /// `supersedes_mismatch` and changes nothing: the criterion still shows the fail.
    async fn a_human_pass_does_not_supersede_a_failed_check(kind: Kind) {
        let h = harness_files(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
        let schema = h
            .put(
                &worker,
                "g1",
                br#"{"type":"object","required":["passed"]}"#,
                &[],
            )
            .await;
        let digests = h.upload(&worker, br#"{"failed": 3}"#).await;
        let mut described = manifest(&worker, "g1", digests, &[]);
        described.content.schema = Some(schema.to_string());
        let answer = h.publish(&worker, &sign(&worker.key, &described)).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        let body =
            json!({"criterion": "ac-1", "artifacts": [digests.blake3], "checks": ["schema"]});
        let answer = h
            .json_as(
                Method::POST,
                "/v1/workitems/work-1/review",
                &reviewer.token,
                body,
                &[],
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        let check = answer.json()["evidence"][0].clone();
        assert_eq!(check["evidence"]["result"]["outcome"], "fail", "{check}");
        let check_id = check["evidenceId"].as_str().expect("id").to_owned();
        let criteria = h
            .get_json(&coordinator, "/v1/workitems/work-1/criteria")
            .await;

        let artifact = digests.blake3.to_string();
        let mut human = evidence_payload(
            &coordinator,
            "g1",
            "mission-1",
            "work-1",
            "human",
            &[&artifact],
        );
        human["supersedes"] = json!(check_id);
        refused(
            &h,
            request(
                Method::POST,
                "/v1/evidence",
                Some(&coordinator.token),
                signed_evidence(&coordinator, &human),
            ),
            "supersedes_mismatch",
        )
        .await;
        // Issue #40 review: a reviewer's own `schema_validation` pass, claiming to re-run the
        // check, is still not the server's check: the Authority's record is corrected only by
        // the Authority (a new run of the built-in reviewer), so this is `forbidden`.
        let mut rerun = evidence_payload(
            &reviewer,
            "g1",
            "mission-1",
            "work-1",
            "schema_validation",
            &[&artifact],
        );
        rerun["supersedes"] = json!(check_id);
        refused(
            &h,
            request(
                Method::POST,
                "/v1/evidence",
                Some(&reviewer.token),
                signed_evidence(&reviewer, &rerun),
            ),
            "forbidden",
        )
        .await;
        assert_eq!(
            h.get_json(&coordinator, "/v1/workitems/work-1/criteria")
                .await,
            criteria
        );
    }
);
