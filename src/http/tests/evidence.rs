//! Evidence for reviewers (EVD-1, EVD-3 steps 1, 2 and 5, EVD-4, EVD-5): recording, fetching by
//! criterion, the criteria summary, access, bad input, and the built-in reviewer.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use ed25519_dalek::SigningKey;
use serde_json::{Value, json};
use weft_api::dsse::MANIFEST_TYPE;
use weft_api::{ArtifactId, Envelope};

use super::harness::*;
use weft_api::evidence::EVIDENCE_TYPE;

pub(super) fn evidence(
    agent: &Agent,
    group: &str,
    work_item: &str,
    criterion: &str,
    outcome: &str,
    artifacts: &[ArtifactId],
) -> Value {
    json!({
        "subject": {"kind": "workItem", "id": work_item},
        "missionId": "mission-1", "groupId": group, "workItemId": work_item,
        "criterion": criterion,
        "method": {"kind": "automated_test", "name": "pytest suite", "version": "1.4"},
        "result": {"outcome": outcome, "summary": "412 passed", "metrics": {"passed": 412}},
        "producer": {"agentId": agent.id, "agentCardVersion": "1"},
        "timestamp": "2026-11-30T12:05:00Z",
        "artifacts": artifacts,
    })
}

pub(super) fn sign_evidence(key: &SigningKey, payload: &Value) -> Envelope {
    Envelope::sign(key, EVIDENCE_TYPE, payload.to_string().as_bytes())
}

/// `envelope` recorded by `agent`.
pub(super) fn record_request(agent: &Agent, envelope: &Envelope) -> Request<Body> {
    request(
        Method::POST,
        "/v1/evidence",
        Some(&agent.token),
        serde_json::to_vec(envelope).expect("json"),
    )
}

impl Harness {
    /// Records `envelope`, first making sure the WorkItem it names exists (in its Mission).
    async fn record(&self, agent: &Agent, envelope: &Envelope) -> Answer {
        use base64::Engine as _;
        if let Ok(payload) = weft_api::dsse::BASE64.decode(&envelope.payload)
            && let Ok(evidence) = serde_json::from_slice::<Value>(&payload)
            && let (Some(group), Some(mission), Some(work_item)) = (
                evidence["groupId"].as_str(),
                evidence["missionId"].as_str(),
                evidence["workItemId"].as_str(),
            )
        {
            self.ensure_work_item(group, mission, work_item).await;
        }
        let envelope = self.bind_evidence(agent, envelope).await;
        self.send(record_request(agent, &envelope)).await
    }
}

backends!(
    /// EVD-4 and the by-criterion queries: record, correct by superseding, read the summary.
    async fn evidence_is_recorded_and_fetched_by_criterion(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        let report = h.put(&worker, "g1", b"{\"tests\":412}", &[]).await;
        let first = h
            .record(
                &reviewer,
                &sign_evidence(
                    &reviewer.key,
                    &evidence(&reviewer, "g1", "work-1", "ac-2", "fail", &[report]),
                ),
            )
            .await;
        assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
        let first_id = first.json()["evidenceId"].as_str().expect("id").to_owned();
        h.record(
            &worker,
            &sign_evidence(
                &worker.key,
                &evidence(&worker, "g1", "work-1", "ac-1", "pass", &[]),
            ),
        )
        .await;
        let mut correction = evidence(&reviewer, "g1", "work-1", "ac-2", "pass", &[report]);
        correction["supersedes"] = json!(first_id);
        let second = h
            .record(&reviewer, &sign_evidence(&reviewer.key, &correction))
            .await;
        assert_eq!(second.status, StatusCode::CREATED, "{second:?}");
        let second_id = second.json()["evidenceId"].as_str().expect("id").to_owned();

        let page = h
            .get_json(&worker, "/v1/evidence?workItemId=work-1&criterion=ac-2")
            .await;
        let ids: Vec<&str> = page["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|i| i["evidenceId"].as_str())
            .collect();
        assert_eq!(ids, [second_id.as_str(), first_id.as_str()], "newest first");
        let failing = h
            .get_json(&worker, "/v1/evidence?workItemId=work-1&outcome=fail")
            .await;
        assert_eq!(failing["items"].as_array().map(Vec::len), Some(1));
        // DESIGN §8 names the filter `result`.
        let by_result = h
            .get_json(&worker, "/v1/evidence?workItemId=work-1&result=fail")
            .await;
        assert_eq!(by_result, failing);
        let both = h
            .get_json(
                &worker,
                "/v1/evidence?workItemId=work-1&result=fail&outcome=fail",
            )
            .await;
        assert_eq!(both, failing);
        let paged = h
            .get_json(&worker, "/v1/evidence?workItemId=work-1&limit=2")
            .await;
        let next = paged["next"].as_u64().expect("a second page");
        let rest = h
            .get_json(
                &worker,
                &format!("/v1/evidence?workItemId=work-1&after={next}"),
            )
            .await;
        assert_eq!(rest["items"].as_array().map(Vec::len), Some(1));

        let criteria = h.get_json(&worker, "/v1/workitems/work-1/criteria").await;
        let ac2 = &criteria["criteria"][1];
        assert_eq!(ac2["criterion"], "ac-2");
        assert_eq!(
            ac2["latest"]["outcome"], "pass",
            "the superseded fail is no longer in force"
        );
        assert_eq!(
            ac2["counts"],
            json!({"pass": 1, "fail": 1, "inconclusive": 0})
        );
        assert_eq!(ac2["contested"], json!(false));
        assert_eq!(criteria["criteria"][0]["criterion"], "ac-1");

        let one = h
            .get_json(&worker, &format!("/v1/evidence/{second_id}"))
            .await;
        assert_eq!(one["evidence"]["supersedes"], json!(first_id));
        let citing = h
            .get_json(&worker, &format!("/v1/artifacts/{report}/evidence"))
            .await;
        assert_eq!(
            citing["items"].as_array().map(Vec::len),
            Some(2),
            "{kind:?}"
        );
        // Recording the same envelope again is idempotent.
        assert_eq!(
            h.record(&reviewer, &sign_evidence(&reviewer.key, &correction))
                .await
                .status,
            StatusCode::OK
        );
    }
);

/// EVD-1: a Worker's claim ranks below a review, whatever the order; reviews that disagree
/// are contested.
#[tokio::test]
async fn contested_criteria_are_flagged() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
    let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
    for (agent, outcome) in [(&worker, "pass"), (&reviewer, "fail")] {
        let recorded = h
            .record(
                agent,
                &sign_evidence(
                    &agent.key,
                    &evidence(agent, "g1", "work-1", "ac-3", outcome, &[]),
                ),
            )
            .await;
        assert_eq!(recorded.status, StatusCode::CREATED, "{recorded:?}");
    }
    let criteria = h.get_json(&worker, "/v1/workitems/work-1/criteria").await;
    let ac3 = &criteria["criteria"][0];
    assert_eq!(ac3["latest"]["outcome"], "fail", "{criteria}");
    assert_eq!(ac3["latest"]["standing"], "reviewer");
    assert_eq!(
        ac3["contested"],
        json!(false),
        "a claim does not contest a review"
    );
    assert_eq!(ac3["producers"], json!(["r1", "w1"]));
    h.record(
        &coordinator,
        &sign_evidence(
            &coordinator.key,
            &evidence(&coordinator, "g1", "work-1", "ac-3", "pass", &[]),
        ),
    )
    .await;
    let criteria = h.get_json(&worker, "/v1/workitems/work-1/criteria").await;
    assert_eq!(criteria["criteria"][0]["contested"], json!(true));
    assert_eq!(criteria["criteria"][0]["latest"]["producer"], "c1");
}

/// `payload` with `method.kind` set to `method` and, if given, `supersedes`.
fn with_method(mut payload: Value, method: &str, supersedes: Option<&str>) -> Value {
    payload["method"]["kind"] = json!(method);
    if let Some(earlier) = supersedes {
        payload["supersedes"] = json!(earlier);
    }
    payload
}

impl Harness {
    /// Records `payload` signed by `agent`; must be created. Its evidence id.
    pub(super) async fn recorded(&self, agent: &Agent, payload: &Value) -> String {
        let answer = self
            .record(agent, &sign_evidence(&agent.key, payload))
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        answer.json()["evidenceId"].as_str().expect("id").to_owned()
    }
}

backends!(
    /// EVD-1 (issue #10): a Worker, even the producer of the artifact, cannot overturn a
    /// reviewer's `fail`: not by superseding it, not by claiming a method only reviewers may
    /// claim, not by recording a later `pass`. Its own records it may correct; a reviewer or
    /// coordinator may correct anyone's.
    async fn a_worker_cannot_overturn_a_review(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
        let report = h.put(&worker, "g1", b"{\"tests\":412}", &[]).await;
        let verdict = |agent: &Agent, outcome: &str| {
            evidence(agent, "g1", "work-1", "ac-1", outcome, &[report])
        };
        let failed = h
            .recorded(
                &reviewer,
                &with_method(verdict(&reviewer, "fail"), "human", None),
            )
            .await;
        for (method, supersedes) in [
            ("human", Some(failed.as_str())),
            ("integrity_check", Some(failed.as_str())),
            ("schema_validation", Some(failed.as_str())),
            ("reviewer_agent", Some(failed.as_str())),
            ("automated_test", Some(failed.as_str())),
            ("human", None),
            ("integrity_check", None),
        ] {
            let attack = with_method(verdict(&worker, "pass"), method, supersedes);
            let answer = refused(
                &h,
                record_request(&worker, &sign_evidence(&worker.key, &attack)),
                "forbidden",
            )
            .await;
            assert_eq!(
                answer.status,
                StatusCode::FORBIDDEN,
                "{method} {supersedes:?}"
            );
        }
        // A later `pass` of its own is recorded, but does not outrank the review.
        let claim = h.recorded(&worker, &verdict(&worker, "pass")).await;
        let criteria = h.get_json(&worker, "/v1/workitems/work-1/criteria").await;
        let ac1 = &criteria["criteria"][0];
        assert_eq!(ac1["latest"]["evidenceId"], json!(failed), "{criteria}");
        assert_eq!(ac1["latest"]["outcome"], "fail");
        assert_eq!(ac1["contested"], json!(false));
        assert_eq!(criteria["missionId"], "mission-1");
        // The producer corrects its own record.
        let corrected = h
            .recorded(
                &worker,
                &with_method(
                    verdict(&worker, "inconclusive"),
                    "automated_test",
                    Some(&claim),
                ),
            )
            .await;
        // Supersedes stays within one criterion.
        let mut elsewhere = verdict(&reviewer, "pass");
        elsewhere["criterion"] = json!("ac-2");
        elsewhere["supersedes"] = json!(failed);
        refused(
            &h,
            record_request(&reviewer, &sign_evidence(&reviewer.key, &elsewhere)),
            "supersedes_mismatch",
        )
        .await;
        // A reviewer corrects a worker's record, a coordinator a reviewer's.
        h.recorded(
            &reviewer,
            &with_method(
                verdict(&reviewer, "fail"),
                "automated_test",
                Some(&corrected),
            ),
        )
        .await;
        let overturned = h
            .recorded(
                &coordinator,
                &with_method(verdict(&coordinator, "pass"), "human", Some(&failed)),
            )
            .await;
        let criteria = h.get_json(&worker, "/v1/workitems/work-1/criteria").await;
        let ac1 = &criteria["criteria"][0];
        assert_eq!(ac1["latest"]["evidenceId"], json!(overturned), "{criteria}");
        assert_eq!(ac1["latest"]["standing"], "coordinator");
        assert_eq!(
            ac1["contested"],
            json!(true),
            "the coordinator's pass and the reviewer's later fail (of the worker's record) disagree"
        );
    }
);

backends!(
    /// Issue #10 finding 5: a WorkItem id is unique only within its Mission, so the criteria
    /// of `work-1` in two Missions are never merged: the reader names the Mission.
    async fn criteria_answer_for_one_mission(kind: Kind) {
        let h = harness(kind).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        let payload = evidence(&reviewer, "g1", "work-1", "ac-1", "pass", &[]);
        h.recorded(&reviewer, &payload).await;
        // Issue #11: a WorkItem belongs to one Mission, so Evidence naming it under another
        // is refused and criteria never mix Missions.
        let mut other = evidence(&reviewer, "g1", "work-1", "ac-1", "fail", &[]);
        other["missionId"] = json!("mission-2");
        let envelope = sign_evidence(&reviewer.key, &other);
        refused(&h, record_request(&reviewer, &envelope), "mission_mismatch").await;
        for uri in [
            "/v1/workitems/work-1/criteria",
            "/v1/workitems/work-1/criteria?missionId=mission-1",
        ] {
            let view = h.get_json(&reviewer, uri).await;
            assert_eq!(view["missionId"], "mission-1");
            assert_eq!(view["criteria"][0]["latest"]["outcome"], "pass", "{view}");
            assert_eq!(view["criteria"][0]["counts"]["pass"], json!(1));
        }
        let _ = kind;
    }
);

backends!(
    /// EVD-4/EVD-5 bad input: each refused with its code, nothing stored.
    async fn bad_evidence_is_refused_and_changes_nothing(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        let outsider = h.agent("x1", "g2", &["reviewer"]).await;
        let auditor = h.agent("a1", "g1", &["auditor"]).await;
        let report = h.put(&worker, "g1", b"report", &[]).await;
        let hidden = h
            .put(
                &h.agent("x2", "g2", &["worker"]).await,
                "g2",
                b"hidden",
                &[],
            )
            .await;
        let other_item = h
            .record(
                &reviewer,
                &sign_evidence(
                    &reviewer.key,
                    &evidence(&reviewer, "g1", "work-2", "ac-1", "pass", &[]),
                ),
            )
            .await;
        let other_id = other_item.json()["evidenceId"]
            .as_str()
            .expect("id")
            .to_owned();
        let good = evidence(&reviewer, "g1", "work-1", "ac-2", "pass", &[report]);
        let envelope = sign_evidence(&reviewer.key, &good);
        let mutated = |f: &dyn Fn(&mut Value)| {
            let mut payload = good.clone();
            f(&mut payload);
            sign_evidence(&reviewer.key, &payload)
        };
        let mut replayed =
            Envelope::sign(&reviewer.key, MANIFEST_TYPE, good.to_string().as_bytes());
        let cases: Vec<(&str, &Agent, Envelope)> = vec![
            (
                "bad_signature",
                &reviewer,
                with_sig(&envelope, |mut s| {
                    s[0] ^= 1;
                    s
                }),
            ),
            (
                "bad_signature",
                &reviewer,
                with_sig(&envelope, |s| s[..60].to_vec()),
            ),
            ("bad_signature", &reviewer, with_sig(&envelope, s_plus_l)),
            ("wrong_payload_type", &reviewer, replayed.clone()),
            (
                "producer_mismatch",
                &worker,
                sign_evidence(&worker.key, &good),
            ),
            ("producer_mismatch", &worker, envelope.clone()),
            (
                "not_a_member",
                &outsider,
                sign_evidence(
                    &outsider.key,
                    &evidence(&outsider, "g1", "work-1", "ac-2", "pass", &[]),
                ),
            ),
            (
                "forbidden",
                &auditor,
                sign_evidence(
                    &auditor.key,
                    &evidence(&auditor, "g1", "work-1", "ac-2", "pass", &[]),
                ),
            ),
            (
                "invalid_evidence",
                &reviewer,
                mutated(&|p| p["reasoning"] = json!("first I thought…")),
            ),
            (
                "invalid_evidence",
                &reviewer,
                mutated(&|p| p["criterion"] = json!("ac-2; DROP")),
            ),
            (
                "invalid_evidence",
                &reviewer,
                mutated(&|p| p["criterion"] = json!("ac\u{202e}2")),
            ),
            (
                "invalid_evidence",
                &reviewer,
                mutated(&|p| p["result"]["summary"] = json!("x".repeat(5000))),
            ),
            (
                "invalid_evidence",
                &reviewer,
                mutated(&|p| {
                    p.as_object_mut().map(|o| o.remove("timestamp"));
                }),
            ),
            (
                "unknown_artifact",
                &reviewer,
                mutated(&|p| p["artifacts"] = json!([digest_of(b"never").blake3])),
            ),
            (
                "unknown_artifact",
                &reviewer,
                mutated(&|p| p["artifacts"] = json!([hidden])),
            ),
            (
                "unknown_evidence",
                &reviewer,
                mutated(&|p| p["supersedes"] = json!(digest_of(b"no such").blake3)),
            ),
            (
                "supersedes_mismatch",
                &reviewer,
                mutated(&|p| p["supersedes"] = json!(other_id)),
            ),
            // Another Mission's record answers as an unknown one (CTX-5), never confirming it.
            (
                "unknown_evidence",
                &reviewer,
                mutated(&|p| {
                    p["supersedes"] = json!(other_id);
                    p["missionId"] = json!("mission-elsewhere");
                    p["artifacts"] = json!([]);
                }),
            ),
        ];
        for (code, caller, envelope) in cases {
            refused(&h, record_request(caller, &envelope), code).await;
        }
        // The payload type is bound by PAE: relabelling the envelope breaks the signature.
        replayed.payload_type = EVIDENCE_TYPE.into();
        refused(&h, record_request(&reviewer, &replayed), "bad_signature").await;
        for (bad, code) in [
            ("criterion=a%20b", "invalid_id"),
            ("outcome=maybe", "bad_request"),
            ("result=maybe", "bad_request"),
            ("result=pass&outcome=fail", "bad_request"),
            ("method=vibes", "bad_request"),
            ("after=-1", "bad_request"),
            ("workItemId=..", "invalid_id"),
            ("bogus=1", "bad_request"),
        ] {
            let get = request(
                Method::GET,
                &format!("/v1/evidence?{bad}"),
                Some(&reviewer.token),
                Body::empty(),
            );
            refused(&h, get, code).await;
        }
    }
);

backends!(
    /// Evidence is visible only to members of its Group.
    async fn evidence_stays_in_its_group(kind: Kind) {
        let h = harness(kind).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        let outsider = h.agent("x1", "g2", &["reviewer"]).await;
        let recorded = h
            .record(
                &reviewer,
                &sign_evidence(
                    &reviewer.key,
                    &evidence(&reviewer, "g1", "work-1", "ac-1", "pass", &[]),
                ),
            )
            .await;
        let id = recorded.json()["evidenceId"]
            .as_str()
            .expect("id")
            .to_owned();
        assert_eq!(
            h.get_json(&outsider, "/v1/evidence?workItemId=work-1")
                .await["items"],
            json!([])
        );
        assert_eq!(
            h.get_json(&outsider, "/v1/workitems/work-1/criteria").await["criteria"],
            json!([])
        );
        let get = request(
            Method::GET,
            &format!("/v1/evidence/{id}"),
            Some(&outsider.token),
            Body::empty(),
        );
        refused(&h, get, "not_found").await;
    }
);
