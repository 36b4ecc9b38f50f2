//! CTX-6, reusable knowledge: an Artifact is citable and readable outside its Mission only
//! after an Organization approver signed a `reuse` approval Evidence for it and it was
//! published as reusable with a classification (`POST /v1/artifacts/{digest}/reuse`). Before
//! that, citing it from another Mission is `not_reusable` (or `unknown_source` for a member who
//! cannot see it at all); an approval by anyone but an approver is `forbidden`.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::harness::{
    Agent, Harness, Kind, backends, digest_of, json_request, manifest, publish_request, refused,
    request, sign,
};
use super::scope::{World, get, publish_in, scoped_agent, world};
use super::work_setup::{evidence_payload, signed_evidence};

/// Passing `reuse` Evidence about artifact `artifact` of `mission-1` / `work-1`, by `agent`.
fn approval(agent: &Agent, artifact: &str) -> Value {
    json!({
        "subject": {"kind": "artifact", "id": artifact},
        "missionId": "mission-1", "groupId": "g1", "workItemId": "work-1", "criterion": "reuse",
        "method": {"kind": "human", "name": "knowledge review", "version": "1"},
        "result": {"outcome": "pass", "summary": "fit for reuse across Missions", "metrics": {}},
        "producer": {"agentId": agent.id, "agentCardVersion": "1"},
        "timestamp": "2026-11-30T12:05:00Z", "artifacts": [artifact],
    })
}

/// Records `payload` as `agent`'s Evidence; answers its id.
async fn record(h: &Harness, agent: &Agent, payload: &Value) -> String {
    let answer = h
        .send(request(
            Method::POST,
            "/v1/evidence",
            Some(&agent.token),
            signed_evidence(agent, payload),
        ))
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    answer.json()["evidenceId"].as_str().expect("id").to_owned()
}

/// `POST /v1/artifacts/{artifact}/reuse` as `agent`.
fn reuse_request(
    agent: &Agent,
    artifact: &str,
    approval: &str,
) -> axum::http::Request<axum::body::Body> {
    json_request(
        Method::POST,
        &format!("/v1/artifacts/{artifact}/reuse"),
        &agent.token,
        json!({"classification": "internal", "approval": approval}),
        &[],
    )
}

backends!(
    /// CTX-6: citing another Mission's Artifact is refused until an approver's signed approval
    /// and a classification publish it as reusable; then any Mission cites and reads it, with
    /// its provenance (approval, approver, origin Mission) kept and announced.
    async fn another_missions_artifact_is_citable_only_once_published_as_reusable(kind: Kind) {
        let World {
            h,
            producer,
            scoped,
            a1,
            a2,
            ..
        } = world(kind).await;
        let (a1_text, a2_text) = (a1.to_string(), a2.to_string());
        // Not reusable yet: a whole-Group worker sees a1 but may not cite it from mission-2 ...
        let digests = h.upload(&producer, b"built on mission one").await;
        let mut derived = manifest(&producer, "g1", digests, &[a1]);
        derived.mission_id = weft_api::Id::parse("m", "mission-2").expect("id");
        derived.work_item_id = weft_api::Id::parse("w", "work-2").expect("id");
        let bound = h
            .bind_to_lease(&producer, &sign(&producer.key, &derived))
            .await;
        refused(&h, publish_request(&producer, &bound), "not_reusable").await;
        // ... and a member scoped to mission-1 does not even learn that a2 exists.
        let digests = h.upload(&scoped, b"built on mission two").await;
        let citing_hidden = manifest(&scoped, "g1", digests, &[a2]);
        refused(
            &h,
            publish_request(&scoped, &sign(&scoped.key, &citing_hidden)),
            "unknown_source",
        )
        .await;

        // The approval is an approver's: a reviewer's `reuse` Evidence is refused.
        let reviewer = h.agent("reviewer", "g1", &["reviewer"]).await;
        let by_reviewer = approval(&reviewer, &a1_text);
        refused(
            &h,
            request(
                Method::POST,
                "/v1/evidence",
                Some(&reviewer.token),
                signed_evidence(&reviewer, &by_reviewer),
            ),
            "forbidden",
        )
        .await;
        let approver = h.agent("approver", "g1", &["approver"]).await;
        let approval_id = record(&h, &approver, &approval(&approver, &a1_text)).await;

        // Publishing needs an approver, and an approval Evidence about this Artifact.
        refused(
            &h,
            reuse_request(&reviewer, &a1_text, &approval_id),
            "forbidden",
        )
        .await;
        let claim = evidence_payload(
            &producer,
            "g1",
            "mission-1",
            "work-1",
            "automated_test",
            &[&a1_text],
        );
        let claim: weft_api::Envelope =
            serde_json::from_slice(&signed_evidence(&producer, &claim)).expect("envelope");
        let claim = h.bind_evidence(&producer, &claim).await;
        let claim = h
            .send(request(
                Method::POST,
                "/v1/evidence",
                Some(&producer.token),
                serde_json::to_vec(&claim).expect("json"),
            ))
            .await;
        assert_eq!(claim.status, StatusCode::CREATED, "{claim:?}");
        let claim_id = claim.json()["evidenceId"].as_str().expect("id").to_owned();
        refused(
            &h,
            reuse_request(&approver, &a1_text, &claim_id),
            "evidence_missing",
        )
        .await;
        refused(
            &h,
            reuse_request(&approver, &a2_text, &approval_id),
            "evidence_missing",
        )
        .await;
        let unknown = digest_of(b"no approval").blake3.to_string();
        refused(
            &h,
            reuse_request(&approver, &a1_text, &unknown),
            "unknown_evidence",
        )
        .await;

        let published = h
            .send(reuse_request(&approver, &a1_text, &approval_id))
            .await;
        assert_eq!(published.status, StatusCode::CREATED, "{published:?}");
        let record_json = published.json();
        assert_eq!(
            (
                record_json["classification"].clone(),
                record_json["approvedBy"].clone(),
                record_json["missionId"].clone()
            ),
            (json!("internal"), json!("approver"), json!("mission-1"))
        );
        let again = h
            .send(reuse_request(&approver, &a1_text, &approval_id))
            .await;
        assert_eq!(again.status, StatusCode::OK, "{again:?}");

        // Reusable now: mission-2 cites it, a member scoped to mission-2 reads it ...
        let answer = publish_in(
            &h,
            &producer,
            "mission-2",
            "work-2",
            b"built on mission one",
            &[a1],
        )
        .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        let derived_id = answer.json()["artifact"]
            .as_str()
            .expect("artifact")
            .to_owned();
        let other = scoped_agent(&h, "scoped-2", &["worker"], &["mission-2"]).await;
        let view = get(&h, &other, &format!("/v1/artifacts/{a1_text}")).await;
        assert_eq!(view.status, StatusCode::OK, "{view:?}");
        assert_eq!(view.json()["reuse"]["approval"], json!(approval_id));
        // ... and its lineage reaches back into mission-1 through the reusable source,
        let up = get(
            &h,
            &other,
            &format!("/v1/artifacts/{derived_id}/provenance"),
        )
        .await;
        let up = up.json();
        assert_eq!(up["artifacts"][1]["id"], json!(a1_text), "{up}");
        // while mission-1's member does not learn of the descendant in mission-2: an edge
        // declared by a manifest it cannot see is not there for it, as across Groups.
        let down = get(
            &h,
            &scoped,
            &format!("/v1/artifacts/{a1_text}/provenance?direction=descendants"),
        )
        .await;
        assert_eq!(down.status, StatusCode::OK, "{down:?}");
        let down = down.json();
        assert_eq!(
            down["artifacts"].as_array().map(Vec::len),
            Some(1),
            "{down}"
        );
        assert!(!down.to_string().contains(&derived_id));
        // The publication is a Group-level Event: every member hears of it, in the clear.
        let events = get(&h, &scoped, "/v1/groups/g1/events?limit=1000")
            .await
            .json();
        let announced = events["events"]
            .as_array()
            .expect("events")
            .iter()
            .find(|e| e["type"] == "artifact.reuse_published")
            .cloned()
            .expect("artifact.reuse_published");
        assert_eq!(announced["payload"]["evidenceId"], json!(approval_id));
        assert_eq!(announced["payload"]["artifact"], json!(a1_text));
        // a1's publication stays mission-1's Event: withheld from mission-2's member for good.
        let theirs = get(&h, &other, "/v1/groups/g1/events?limit=1000")
            .await
            .json();
        let published_in_one = theirs["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| {
                e["type"] == "artifact.published" && e["payload"]["missionId"] == "mission-1"
            })
            .count();
        assert_eq!(published_in_one, 0);
    }
);

backends!(
    /// An approver's session ended meanwhile (its Agent deactivated) that another server's
    /// cache still served (here: the `Session` read before, handed to the store as that cache
    /// would): publishing as reusable re-checks it under the Group's lock and answers 401,
    /// changing nothing (its Membership, which outlives the deactivation, let it through).
    async fn publishing_as_reusable_under_a_session_ended_meanwhile_is_refused(kind: Kind) {
        let World { h, a1, .. } = world(kind).await;
        let approver = h.agent("approver", "g1", &["approver"]).await;
        let approval_id = record(&h, &approver, &approval(&approver, &a1.to_string())).await;
        let cached =
            crate::http::tests::context_forward::session_ended_after_read(&h, &approver).await;
        let before = h.fingerprint().await;
        let request: weft_api::views::ReuseRequest =
            serde_json::from_value(json!({"classification": "internal", "approval": approval_id}))
                .expect("request");
        let refused = h
            .store
            .artifacts()
            .publish_reusable(a1, request, &cached)
            .await
            .expect_err("refused");
        assert_eq!(
            refused.code(),
            weft_api::ErrorCode::Unauthorized,
            "{kind:?}"
        );
        assert_eq!(h.fingerprint().await, before, "{kind:?}: nothing changed");
    }
);

backends!(
    /// CTX-5 on the approval a reuse cites: a member scoped to mission-2, holding the bytes
    /// there too, cannot cite mission-1's approval: it answers as an unknown Evidence id, as an
    /// absent one does. Before, the approval was found whatever the caller's scope (and so
    /// accepted, or `evidence_missing`: either way it told the caller it exists).
    async fn a_scoped_approver_cannot_cite_another_missions_approval(kind: Kind) {
        let World {
            h, producer, a1, ..
        } = world(kind).await;
        let a1_text = a1.to_string();
        let approver = h.agent("approver", "g1", &["approver"]).await;
        let approval_id = record(&h, &approver, &approval(&approver, &a1_text)).await;
        let answer = publish_in(
            &h,
            &producer,
            "mission-2",
            "work-2",
            b"mission one's notes",
            &[],
        )
        .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        let scoped = scoped_agent(&h, "approver-2", &["approver"], &["mission-2"]).await;
        refused(
            &h,
            reuse_request(&scoped, &a1_text, &approval_id),
            "unknown_evidence",
        )
        .await;
        let absent = digest_of(b"no approval").blake3.to_string();
        refused(
            &h,
            reuse_request(&scoped, &a1_text, &absent),
            "unknown_evidence",
        )
        .await;
        // The Group-wide approver cites it.
        let published = h
            .send(reuse_request(&approver, &a1_text, &approval_id))
            .await;
        assert_eq!(published.status, StatusCode::CREATED, "{published:?}");
    }
);
