//! A new run of the built-in reviewer supersedes its own last record of the same check on a
//! criterion (`storage/src/evidence/reviewer.rs`): it outweighs it, never contests it. (Each
//! run was recorded beside the last, so one `fail` or `inconclusive` left the criterion
//! contested for good: `work.accept_result` answered `evidence_missing` whatever came after.)

use axum::http::{Method, StatusCode};
use serde_json::json;

use super::harness::*;

backends!(
    async fn a_new_review_outweighs_the_last_never_contests_it(kind: Kind) {
        if kind == Kind::Memory {
            return; // no stored file to damage behind the server's back
        }
        let h = harness_files(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        let bytes = vec![3u8; 70_000];
        let artifact = h.put(&worker, "g1", &bytes, &[]).await;
        let review = || {
            h.json_as(
                Method::POST,
                "/v1/workitems/work-1/review",
                &reviewer.token,
                json!({"artifacts": [artifact], "criteria": {"integrity": "ac-1"}}),
                &[],
            )
        };
        let first = review().await;
        assert_eq!(first.status, StatusCode::CREATED, "{kind:?}: {first:?}");
        let first_id = first.json()["evidence"][0]["evidenceId"].clone();
        assert_eq!(
            first.json()["evidence"][0]["evidence"]["result"]["outcome"],
            "pass"
        );
        // The stored bytes go bad: the next run fails, and supersedes the pass.
        h.overwrite_blob(&artifact, &vec![4u8; 70_000]).await;
        let second = review().await;
        assert_eq!(second.status, StatusCode::CREATED, "{kind:?}: {second:?}");
        let record = &second.json()["evidence"][0];
        assert_eq!(
            record["evidence"]["result"]["outcome"], "fail",
            "{kind:?}: {record}"
        );
        assert_eq!(
            record["evidence"]["supersedes"], first_id,
            "{kind:?}: {record}"
        );
        let criteria = h.get_json(&reviewer, "/v1/workitems/work-1/criteria").await;
        let ac1 = criteria["criteria"]
            .as_array()
            .expect("criteria")
            .iter()
            .find(|c| c["criterion"] == "ac-1")
            .cloned()
            .expect("ac-1");
        assert_eq!(ac1["latest"]["outcome"], "fail", "{kind:?}: {ac1}");
        assert_eq!(ac1["contested"], false, "{kind:?}: {ac1}");
    }
);
