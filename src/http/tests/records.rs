//! Issue #46: a Mission's records (the signed envelopes of its manifests and Evidence) go
//! after `keepRecords`, counted from the Mission's end plus the clock margin, later than its
//! bytes. One `records.disposed` Event names them; reads answer 410 `disposed` naming it; the
//! rows stay as tombstones (lineage, criteria, the log and fsck are whole); holds keep them.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use weft_api::Envelope;

use super::harness::*;
use super::lifecycle::{end_mission, gc, lift_hold, renewed_in, set_retention};
use super::with_content::{bound, publication};
use super::work_setup::evidence_payload;

/// The classification work-7's scheduling view (CTX-8) shows `worker`.
async fn scheduled(h: &Harness, worker: &Agent) -> Value {
    h.get_json(worker, "/v1/workitems/work-7/scheduling").await["classification"].clone()
}

/// A report's records entries.
fn records(report: &Value) -> &Vec<Value> {
    report["records"].as_array().expect("records")
}

/// `worker` publishes an artifact in mission-1 and the coordinator records Evidence citing
/// it: (artifact, Evidence id).
async fn a_record_of_each(h: &Harness, worker: &Agent) -> (weft_api::ArtifactId, String) {
    let artifact = h
        .put(worker, "g1", b"the report a reviewer reads", &[])
        .await;
    let coordinator = h.harness_coordinator("g1").await;
    let cited = artifact.to_string();
    let payload = evidence_payload(
        &coordinator,
        "g1",
        "mission-1",
        "work-1",
        "human",
        &[&cited],
    );
    let id = h.recorded(&coordinator, &payload).await;
    (artifact, id)
}

/// An artifact of mission-1 and an approver's signed approval of it for reuse, not yet
/// used: (approver, artifact, the approval's Evidence id).
async fn approved(h: &Harness) -> (Agent, weft_api::ArtifactId, String) {
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let approver = h.agent("approver", "g1", &["approver"]).await;
    let artifact = h.put(&worker, "g1", b"knowledge worth keeping", &[]).await;
    let approval = json!({
        "subject": {"kind": "artifact", "id": artifact.to_string()},
        "missionId": "mission-1", "groupId": "g1", "workItemId": "work-1", "criterion": "reuse",
        "method": {"kind": "human", "name": "knowledge review", "version": "1"},
        "result": {"outcome": "pass", "summary": "fit for reuse", "metrics": {}},
        "producer": {"agentId": approver.id, "agentCardVersion": "1"},
        "timestamp": "2026-11-30T12:05:00Z", "artifacts": [artifact.to_string()],
    });
    let approval_id = h.recorded(&approver, &approval).await;
    (approver, artifact, approval_id)
}

/// `approver` asks to publish `artifact` as reusable knowledge under `approval`.
fn reuse(
    approver: &Agent,
    artifact: &weft_api::ArtifactId,
    approval: &str,
) -> axum::http::Request<Body> {
    json_request(
        Method::POST,
        &format!("/v1/artifacts/{artifact}/reuse"),
        &approver.token,
        json!({"classification": "internal", "approval": approval}),
        &[],
    )
}

backends!(
    /// Bytes go after `keepBytes`, records only after `keepRecords`: before that the manifest
    /// and the Evidence read whole. Then a dry run names them and changes nothing, and a
    /// collection appends one `records.disposed` Event naming both. The artifact view and
    /// the Evidence answer 410 `disposed` with its sequence, the Evidence list leaves it out,
    /// the WorkItem's criteria still weigh its verdict, fsck is clean before and after
    /// compaction, and a second collection has nothing left to do.
    async fn keep_records_disposes_of_signed_records_after_the_bytes(kind: Kind) {
        let h = harness_files(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let auditor = h.agent("aud", "g1", &["auditor"]).await;
        let (artifact, evidence_id) = a_record_of_each(&h, &worker).await;
        let set = set_retention(&h, "g1", json!({"keepBytes": "1d", "keepRecords": "2d"})).await;
        assert_eq!(set.status, StatusCode::OK, "{kind:?}: {set:?}");
        end_mission(&h, "g1", "mission-1").await;
        h.clock
            .advance(chrono::Duration::days(1) + chrono::Duration::minutes(6));
        let report = gc(&h, false).await;
        assert_eq!(report["blobs"], 1, "{kind:?}: the bytes go first: {report}");
        assert!(records(&report).is_empty(), "{kind:?}: {report}");
        // Inside the records' clock margin: nothing yet.
        h.clock
            .advance(chrono::Duration::days(1) - chrono::Duration::minutes(2));
        let auditor = renewed_in(&h, auditor, "g1").await;
        assert!(records(&gc(&h, false).await).is_empty(), "{kind:?}");
        let view = h
            .get_json(&auditor, &format!("/v1/artifacts/{artifact}"))
            .await;
        assert_eq!(
            view["manifests"].as_array().map(Vec::len),
            Some(1),
            "{view}"
        );
        h.clock.advance(chrono::Duration::minutes(2));
        let auditor = renewed_in(&h, auditor, "g1").await;
        let before = h.fingerprint().await;
        let dry = gc(&h, true).await;
        assert_eq!(records(&dry).len(), 1, "{kind:?}: {dry}");
        assert_eq!(records(&dry)[0]["manifests"], 1, "{dry}");
        assert_eq!(records(&dry)[0]["evidence"], 1, "{dry}");
        assert_unchanged(&before, &h.fingerprint().await, "a dry run");
        let report = gc(&h, false).await;
        let entry = &records(&report)[0];
        assert_eq!(entry["missionId"], "mission-1", "{kind:?}: {report}");
        assert!(
            entry["policy"]
                .as_str()
                .is_some_and(|p| p.contains("group g1 keep-bytes 1d keep-records 2d")),
            "{report}"
        );
        let events = h.events_of(&auditor, "records.disposed").await;
        assert_eq!(events.len(), 1, "{kind:?}");
        let event = &events[0];
        assert_eq!(entry["sequence"], event["sequence"], "{report}");
        assert_eq!(
            event["payload"]["manifests"][0]["artifact"],
            artifact.to_string()
        );
        assert_eq!(
            event["payload"]["evidence"],
            json!([{"evidenceId": evidence_id, "artifacts": [artifact.to_string()]}])
        );
        // Reads answer 410, naming the Event.
        for uri in [
            format!("/v1/artifacts/{artifact}"),
            format!("/v1/evidence/{evidence_id}"),
        ] {
            let answer = h
                .call(Method::GET, &uri, Some(&auditor.token), Body::empty())
                .await;
            assert_eq!(
                answer.status,
                StatusCode::GONE,
                "{kind:?} {uri}: {answer:?}"
            );
            assert_eq!(answer.code(), "disposed");
            assert_eq!(answer.json()["sequence"], event["sequence"], "{answer:?}");
        }
        let listed = h.get_json(&auditor, "/v1/evidence?workItemId=work-1").await;
        assert_eq!(listed["items"], json!([]), "{kind:?}: {listed}");
        // The verdict's columns stay: the WorkItem's criteria still weigh it.
        let criteria = h.get_json(&auditor, "/v1/workitems/work-1/criteria").await;
        assert!(
            criteria.to_string().contains(&evidence_id),
            "{kind:?}: {criteria}"
        );
        let fsck = h.store.fsck().await.expect("fsck");
        assert!(fsck.problems.is_empty(), "{kind:?}: {:?}", fsck.problems);
        assert!(records(&gc(&h, false).await).is_empty(), "{kind:?}");
        h.store
            .compaction()
            .compact(weft_storage::Retention::events(1))
            .await
            .expect("compaction");
        let fsck = h.store.fsck().await.expect("fsck");
        assert!(fsck.problems.is_empty(), "{kind:?}: {:?}", fsck.problems);
    }
);

backends!(
    /// A hold on the Mission keeps its records past `keepRecords` (counted as kept, no
    /// Event), and a policy of records alone that would let them go now is refused (`held`);
    /// once lifted, the next collection disposes of them. A policy with no `keepRecords`
    /// keeps records forever.
    async fn a_hold_keeps_records_past_their_policy(kind: Kind) {
        let h = harness_files(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let auditor = h.agent("aud", "g1", &["auditor"]).await;
        let (artifact, _) = a_record_of_each(&h, &worker).await;
        let set = set_retention(&h, "g1", json!({"keepBytes": "1d"})).await;
        assert_eq!(set.status, StatusCode::OK, "{kind:?}: {set:?}");
        end_mission(&h, "g1", "mission-1").await;
        h.clock.advance(chrono::Duration::days(30));
        let report = gc(&h, false).await;
        assert!(records(&report).is_empty(), "{kind:?}: forever: {report}");
        let set = set_retention(&h, "g1", json!({"keepBytes": "1d", "keepRecords": "1d"})).await;
        assert_eq!(set.status, StatusCode::OK, "{kind:?}: {set:?}");
        let placed = h
            .admin_json(
                Method::POST,
                "/v1/admin/holds",
                json!({"missionId": "mission-1", "reason": "audit 7"}),
            )
            .await;
        assert_eq!(placed.status, StatusCode::CREATED, "{kind:?}: {placed:?}");
        let hold_id = placed.json()["holdId"].as_str().expect("id").to_owned();
        // A policy of records alone that would let the held records go now: refused, naming
        // the hold, nothing changed.
        let before = h.fingerprint().await;
        let refused = set_retention(&h, "g1", json!({"keepRecords": "1d"})).await;
        assert_eq!(
            refused.status,
            StatusCode::CONFLICT,
            "{kind:?}: {refused:?}"
        );
        assert_eq!(refused.code(), "held");
        assert!(
            refused.json()["detail"]
                .as_str()
                .is_some_and(|d| d.contains(&hold_id))
        );
        assert_unchanged(&before, &h.fingerprint().await, "a refused policy");
        let report = gc(&h, false).await;
        assert!(records(&report).is_empty(), "{kind:?}: held: {report}");
        assert_eq!(report["recordsKept"], 2, "{kind:?}: {report}");
        let lifted = lift_hold(&h, &hold_id).await;
        assert_eq!(lifted.status, StatusCode::OK, "{kind:?}: {lifted:?}");
        let report = gc(&h, false).await;
        assert_eq!(records(&report).len(), 1, "{kind:?}: {report}");
        let auditor = renewed_in(&h, auditor, "g1").await;
        let answer = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{artifact}"),
                Some(&auditor.token),
                Body::empty(),
            )
            .await;
        assert_eq!(answer.status, StatusCode::GONE, "{kind:?}: {answer:?}");
    }
);

backends!(
    /// Reusable knowledge keeps its records: the manifest its readers read and the signed
    /// approval its reuse record cites stay whole past `keepRecords` (counted as kept), and
    /// the artifact still reads.
    async fn reusable_knowledge_keeps_its_manifest_and_approval(kind: Kind) {
        let h = harness_files(kind).await;
        let auditor = h.agent("aud", "g1", &["auditor"]).await;
        let (approver, artifact, approval_id) = approved(&h).await;
        let reused = h.send(reuse(&approver, &artifact, &approval_id)).await;
        assert_eq!(reused.status, StatusCode::CREATED, "{kind:?}: {reused:?}");
        let set = set_retention(&h, "g1", json!({"keepBytes": "1d", "keepRecords": "1d"})).await;
        assert_eq!(set.status, StatusCode::OK, "{kind:?}: {set:?}");
        end_mission(&h, "g1", "mission-1").await;
        h.clock.advance(chrono::Duration::days(3));
        let report = gc(&h, false).await;
        assert!(records(&report).is_empty(), "{kind:?}: {report}");
        assert_eq!(report["recordsKept"], 2, "{kind:?}: {report}");
        let auditor = renewed_in(&h, auditor, "g1").await;
        let view = h
            .get_json(&auditor, &format!("/v1/artifacts/{artifact}"))
            .await;
        assert_eq!(
            view["manifests"].as_array().map(Vec::len),
            Some(1),
            "{view}"
        );
        let approval = h
            .get_json(&auditor, &format!("/v1/evidence/{approval_id}"))
            .await;
        assert_eq!(approval["evidenceId"], approval_id.as_str(), "{approval}");
    }
);

backends!(
    /// CTX-8 after records go: a WorkItem whose input's every visible manifest is a tombstone
    /// is scheduled as restricted, never as a lower classification than its signed
    /// manifests said (the tombstones keep theirs; a read of the artifact answers 410).
    async fn an_input_with_only_tombstones_is_scheduled_as_restricted(kind: Kind) {
        let h = harness_files(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let (artifact, _) = a_record_of_each(&h, &worker).await;
        let coordinator = h.harness_coordinator("g1").await;
        let mut contract = crate::http::tests::work_setup::contract(&[]);
        contract["inputs"] = json!([artifact.to_string()]);
        crate::http::tests::work_setup::authorized(
            &h,
            &coordinator,
            "mission-1",
            "work-7",
            contract,
        )
        .await;
        assert_eq!(scheduled(&h, &worker).await, "internal", "{kind:?}");
        let set = set_retention(&h, "g1", json!({"keepBytes": "1d", "keepRecords": "1d"})).await;
        assert_eq!(set.status, StatusCode::OK, "{kind:?}: {set:?}");
        end_mission(&h, "g1", "mission-1").await;
        h.clock.advance(chrono::Duration::days(2));
        let report = gc(&h, false).await;
        assert_eq!(records(&report).len(), 1, "{kind:?}: {report}");
        let worker = renewed_in(&h, worker, "g1").await;
        assert_eq!(scheduled(&h, &worker).await, "restricted", "{kind:?}");
    }
);

backends!(
    /// Reusable knowledge is never published from tombstones: once an artifact's records
    /// went past `keepRecords` (its manifest and the approval are tombstones), asking to make
    /// it reusable answers `not_found`, as for an artifact never published, and changes
    /// nothing.
    async fn reusable_knowledge_is_not_published_from_tombstones(kind: Kind) {
        let h = harness_files(kind).await;
        let (approver, artifact, approval_id) = approved(&h).await;
        let set = set_retention(&h, "g1", json!({"keepBytes": "1d", "keepRecords": "1d"})).await;
        assert_eq!(set.status, StatusCode::OK, "{kind:?}: {set:?}");
        end_mission(&h, "g1", "mission-1").await;
        h.clock.advance(chrono::Duration::days(3));
        let report = gc(&h, false).await;
        assert_eq!(records(&report).len(), 1, "{kind:?}: {report}");
        let approver = renewed_in(&h, approver, "g1").await;
        let answer = refused(&h, reuse(&approver, &artifact, &approval_id), "not_found").await;
        let detail = answer.json()["detail"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            detail.contains("disposed of by policy"),
            "{kind:?}: refused for its tombstones, not its bytes: {detail}"
        );
    }
);

backends!(
    /// A manifest whose signed record went by policy, sent again, is neither restored (the
    /// policy would take it again) nor answered "already published": 410 `disposed`, naming
    /// the `records.disposed` Event's sequence, and nothing changed, on both publication
    /// routes. The one-request route refuses before it stages the bytes: the blob stays
    /// disposed, no file comes back. Before, the same envelope sent again is a retry (200).
    async fn a_disposed_manifest_sent_again_answers_disposed(kind: Kind) {
        let h = harness_files(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let digests = h.upload(&worker, b"published once").await;
        let signed = sign(&worker.key, &manifest(&worker, "g1", digests, &[]));
        let envelope = h.bind_to_lease(&worker, &signed).await;
        let first = h.send(publish_request(&worker, &envelope)).await;
        assert_eq!(first.status, StatusCode::CREATED, "{kind:?}: {first:?}");
        let again = h.send(publish_request(&worker, &envelope)).await;
        assert_eq!(again.status, StatusCode::OK, "{kind:?}: a retry: {again:?}");
        let bytes = vec![7u8; 100_000];
        let in_one = bound(&h, &worker, &bytes).await;
        let first = h.send(publication(&worker, &in_one, &bytes)).await;
        assert_eq!(first.status, StatusCode::CREATED, "{kind:?}: {first:?}");
        let set = set_retention(&h, "g1", json!({"keepBytes": "1d", "keepRecords": "1d"})).await;
        assert_eq!(set.status, StatusCode::OK, "{kind:?}: {set:?}");
        end_mission(&h, "g1", "mission-1").await;
        h.clock.advance(chrono::Duration::days(3));
        let report = gc(&h, false).await;
        assert_eq!(report["blobs"], 2, "{kind:?}: {report}");
        let disposal = records(&report).first().cloned().unwrap_or_default();
        assert_eq!(disposal["manifests"], 2, "{kind:?}: {report}");
        let sequence = disposal["sequence"].as_u64().expect("the Event's sequence");
        let worker = renewed_in(&h, worker, "g1").await;
        for request in [
            publish_request(&worker, &envelope),
            publication(&worker, &in_one, &bytes),
        ] {
            let answer = refused(&h, request, "disposed").await;
            assert_eq!(answer.status, StatusCode::GONE, "{kind:?}");
            assert_eq!(answer.json()["sequence"], sequence, "{kind:?}: {answer:?}");
        }
        let digest = digest_of(&bytes).blake3;
        let content = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{digest}/content"),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(content.status, StatusCode::GONE, "{kind:?}: {content:?}");
        // A signer since scoped out of the Mission (CTX-5) is refused as for a new
        // publication there, and learns nothing of the disposal.
        let scoped = h
            .admin_json(
                Method::PUT,
                "/v1/admin/groups/g1/members/w1",
                json!({"roles": ["worker"], "missions": ["mission-2"]}),
            )
            .await;
        assert_eq!(scoped.status, StatusCode::OK, "{kind:?}: {scoped:?}");
        let worker = renewed_in(&h, worker, "g1").await;
        let answer = refused(&h, publish_request(&worker, &envelope), "not_a_member").await;
        assert!(answer.json()["sequence"].is_null(), "{kind:?}: {answer:?}");
    }
);

backends!(
    /// As for a manifest: a signed Evidence record whose envelope went by policy, sent again,
    /// answers 410 `disposed` naming the `records.disposed` Event and changes nothing (it was
    /// answered "already recorded", 200, over a tombstone). Before, the same envelope sent
    /// again is a retry: 200 with the same id and sequence, even from a signer since scoped
    /// out of the Mission (the record is in the log; a lost answer's retry must say so). After
    /// disposal, that signer is refused as for a new record there (CTX-5), learning no
    /// sequence.
    async fn disposed_evidence_sent_again_answers_disposed(kind: Kind) {
        let h = harness(kind).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        let payload = evidence_payload(&reviewer, "g1", "mission-1", "work-1", "human", &[]);
        let evidence_id = h.recorded(&reviewer, &payload).await;
        let signed = Envelope::sign(
            &reviewer.key,
            weft_api::evidence::EVIDENCE_TYPE,
            payload.to_string().as_bytes(),
        );
        let envelope = h.bind_evidence(&reviewer, &signed).await;
        let send = |agent: &Agent| crate::http::tests::evidence::record_request(agent, &envelope);
        let again = h.send(send(&reviewer)).await;
        assert_eq!(again.status, StatusCode::OK, "{kind:?}: a retry: {again:?}");
        assert_eq!(
            again.json()["evidenceId"],
            evidence_id.as_str(),
            "{again:?}"
        );
        let scope = |missions: Value| {
            h.admin_json(
                Method::PUT,
                "/v1/admin/groups/g1/members/r1",
                json!({"roles": ["reviewer"], "missions": missions}),
            )
        };
        let scoped = scope(json!(["mission-2"])).await;
        assert_eq!(scoped.status, StatusCode::OK, "{kind:?}: {scoped:?}");
        let reviewer = renewed_in(&h, reviewer, "g1").await;
        let retry = h.send(send(&reviewer)).await;
        assert_eq!(
            retry.status,
            StatusCode::OK,
            "{kind:?}: scoped out: {retry:?}"
        );
        assert_eq!(retry.json(), again.json(), "{kind:?}");
        let whole = scope(Value::Null).await;
        assert_eq!(whole.status, StatusCode::OK, "{kind:?}: {whole:?}");
        let set = set_retention(&h, "g1", json!({"keepBytes": "1d", "keepRecords": "1d"})).await;
        assert_eq!(set.status, StatusCode::OK, "{kind:?}: {set:?}");
        end_mission(&h, "g1", "mission-1").await;
        h.clock.advance(chrono::Duration::days(3));
        let report = gc(&h, false).await;
        let disposal = records(&report).first().cloned().unwrap_or_default();
        assert_eq!(disposal["evidence"], 1, "{kind:?}: {report}");
        let sequence = disposal["sequence"].as_u64().expect("the Event's sequence");
        let reviewer = renewed_in(&h, reviewer, "g1").await;
        let answer = refused(&h, send(&reviewer), "disposed").await;
        assert_eq!(answer.status, StatusCode::GONE, "{kind:?}: {answer:?}");
        assert_eq!(answer.json()["sequence"], sequence, "{kind:?}: {answer:?}");
        let scoped = scope(json!(["mission-2"])).await;
        assert_eq!(scoped.status, StatusCode::OK, "{kind:?}: {scoped:?}");
        let reviewer = renewed_in(&h, reviewer, "g1").await;
        let answer = refused(&h, send(&reviewer), "not_a_member").await;
        assert!(answer.json()["sequence"].is_null(), "{kind:?}: {answer:?}");
    }
);
