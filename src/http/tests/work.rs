//! Missions and WorkItems through `POST /v1/groups/{g}/commands` (issue #11): the lifecycle,
//! racing acceptances (OFR-5), refusals with their exact code and nothing changed, Mission
//! ends propagating (T18), child Missions (T15/T16), reads scoped to the Group.
//! The refusals are in `work_refusals.rs`, which uses the helpers here. Long (about 600
//! lines) because the lifecycle and the Mission-end tests each walk every step in one place.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use weft_api::Envelope;

use super::harness::*;
use super::work_setup::{command_doc, command_request, contract, evidence_payload};

pub(super) fn basis() -> Value {
    json!({"capabilityMatches": [{"id": "cap.summarize", "version": "1"}], "authorizationEligible": true,
           "availabilityEstimate": "2026-11-30T12:00:00Z", "expectedCost": 1.2,
           "reliabilityEvidence": [], "policyRules": ["least-loaded"]})
}

/// Sends `kind` with `payload` as `agent`; answers the raw answer.
pub(super) async fn send(
    h: &Harness,
    agent: &Agent,
    group: &str,
    kind: &str,
    payload: Value,
) -> Answer {
    let document = command_doc(h, agent, group, kind, payload).await;
    h.send(command_request(agent, group, &document)).await
}

/// Sends and expects 201; answers the body.
pub(super) async fn ok(
    h: &Harness,
    agent: &Agent,
    group: &str,
    kind: &str,
    payload: Value,
) -> Value {
    let answer = send(h, agent, group, kind, payload).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{kind}: {answer:?}");
    answer.json()
}

/// Mission `mission_id` in `group`, created by `agent`, with a budget of one unit in each
/// dimension (one dollar).
pub(super) async fn mission(h: &Harness, agent: &Agent, group: &str, mission_id: &str) -> Value {
    let budget = json!({"financial": 1.0, "tokens": 1, "toolCalls": 1, "computeSeconds": 1,
        "wallClockSeconds": 1, "sideEffects": 1});
    ok(
        h,
        agent,
        group,
        "mission.create",
        json!({"missionId": mission_id, "title": "t", "priorityClass": "normal", "budget": budget}),
    )
    .await
}

/// A Group g1 with a coordinator, two workers and an approver, a Mission `m1`.
pub(super) async fn group(h: &Harness) -> (Agent, Agent, Agent) {
    let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
    let w1 = h.agent("w1", "g1", &["worker"]).await;
    let w2 = h.agent("w2", "g1", &["worker"]).await;
    ok(h, &coordinator, "g1", "mission.create", json!({"missionId": "m1", "title": "Mission one", "priorityClass": "normal",
        "budget": {"financial": 100.0, "tokens": 1, "toolCalls": 1, "computeSeconds": 1, "wallClockSeconds": 1, "sideEffects": 1}})).await;
    (coordinator, w1, w2)
}

pub(super) fn offer(
    work_item: &str,
    offer_id: &str,
    candidates: &[&str],
    h: &Harness,
    seconds: i64,
) -> Value {
    let expires =
        (weft_storage::Clock::now(&h.clock) + chrono::Duration::seconds(seconds)).to_rfc3339();
    json!({"workItemId": work_item, "offerId": offer_id, "candidates": candidates, "expiresAt": expires, "selectionBasis": basis()})
}

/// Publishes an artifact for `wi` and records passing Evidence for `ac-1`; answers the ids.
pub(super) async fn evidence_for(h: &Harness, worker: &Agent, wi: &str) -> (String, String) {
    evidence_of(h, worker, wi, "automated_test", &format!("result of {wi}")).await
}

/// Publishes `bytes` for `wi` as `agent` and records a passing Evidence of `method` for
/// `ac-1`; answers the artifact and the Evidence id.
pub(super) async fn evidence_of(
    h: &Harness,
    worker: &Agent,
    wi: &str,
    method: &str,
    bytes: &str,
) -> (String, String) {
    let artifact = h.put_in(worker, "g1", bytes.as_bytes(), &[], wi).await;
    let id = record_evidence(h, worker, wi, method, &artifact.to_string()).await;
    (artifact.to_string(), id)
}

/// Records `agent`'s passing Evidence of `method` for `ac-1` of `wi`, citing `artifact`.
pub(super) async fn record_evidence(
    h: &Harness,
    worker: &Agent,
    wi: &str,
    method: &str,
    artifact: &str,
) -> String {
    let evidence = evidence_payload(worker, "g1", "mission-1", wi, method, &[artifact]);
    let envelope = Envelope::sign(
        &worker.key,
        weft_api::evidence::EVIDENCE_TYPE,
        evidence.to_string().as_bytes(),
    );
    let envelope = h.bind_evidence(worker, &envelope).await;
    let answer = h
        .send(request(
            Method::POST,
            "/v1/evidence",
            Some(&worker.token),
            serde_json::to_vec(&envelope).expect("json"),
        ))
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    answer.json()["evidenceId"].as_str().expect("id").to_owned()
}

backends!(
    /// T2, T3 (OFR-2), T4 (SM-7), T7, T11 (EVD-2), T12: authorize → offer → accept → start →
    /// submit → accept_result, each with its Event carrying `causationCommandId`, and the
    /// reads. OFR-6: acceptance queues the WorkItem without starting it (no lease).
    async fn a_work_item_runs_from_authorize_to_verified(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        // The Evidence of a WorkItem names the Mission its manifests do ("mission-1").
        mission(&h, &coordinator, "g1", "mission-1").await;
        let authorized = ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-1", "missionId": "mission-1", "contract": contract(&[])}),
        )
        .await;
        assert_eq!(authorized["state"]["state"], "open");
        assert_eq!(authorized["events"][0]["type"], "work.authorized");
        let offered = ok(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-1", "o1", &["w1"], &h, 600),
        )
        .await;
        // OFR-2: an offer reserves no ownership before it is accepted.
        assert_eq!(offered["state"]["state"], "offered");
        assert!(offered["state"]["owner"].is_null(), "{offered}");
        let accepted = ok(
            &h,
            &w1,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-1", "offerId": "o1"}),
        )
        .await;
        assert_eq!(accepted["state"]["state"], "queued");
        assert!(accepted["state"]["lease"].is_null(), "OFR-6: {accepted}");
        assert_eq!(
            accepted["state"]["owner"]["ownershipEpoch"], 1,
            "SM-7: a new ownership epoch"
        );
        let started = ok(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-1"})).await;
        let lease = started["state"]["lease"]["leaseId"]
            .as_str()
            .expect("an Execution Lease")
            .to_owned();
        assert_eq!(started["state"]["lease"]["kind"], "execution");
        let (artifact, evidence) = evidence_for(&h, &w1, "wi-1").await;
        // LSE-4: the submission quotes the current lease.
        let mut submit = command_doc(
            &h,
            &w1,
            "g1",
            "work.submit",
            json!({"workItemId": "wi-1", "artifacts": [artifact], "evidence": []}),
        )
        .await;
        submit["leaseId"] = json!(lease);
        let before = h.fingerprint().await;
        refused(&h, command_request(&w1, "g1", &submit), "evidence_missing").await;
        submit["payload"]["evidence"] = json!([evidence]);
        submit["commandId"] = json!("cmd-submit-2");
        let stale = {
            let mut doc = submit.clone();
            doc["leaseId"] = json!("lease-other");
            doc["commandId"] = json!("cmd-submit-3");
            doc
        };
        refused(&h, command_request(&w1, "g1", &stale), "stale_lease").await;
        assert_unchanged(&before, &h.fingerprint().await, "refused submissions");
        let submitted = h.send(command_request(&w1, "g1", &submit)).await;
        assert_eq!(submitted.status, StatusCode::CREATED, "{submitted:?}");
        // EVD-3: only a Worker's claim covers ac-1, so reviewers are asked for it.
        let answer = submitted.json();
        let kinds: Vec<&str> = answer["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter_map(|e| e["type"].as_str())
            .collect();
        assert_eq!(kinds, ["work.submitted", "work.review_requested"]);
        // A reviewer's `fail` is in force over the Worker's `pass`: the result waits (EVD-3).
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        let review = json!({
            "subject": {"kind": "workItem", "id": "wi-1"},
            "missionId": "mission-1", "groupId": "g1", "workItemId": "wi-1", "criterion": "ac-1",
            "method": {"kind": "human", "name": "read it", "version": "1"},
            "result": {"outcome": "fail", "summary": "not yet", "metrics": {}},
            "producer": {"agentId": "r1", "agentCardVersion": "1"},
            "timestamp": "2026-11-30T12:06:00Z", "artifacts": [],
        });
        let envelope = Envelope::sign(
            &reviewer.key,
            weft_api::evidence::EVIDENCE_TYPE,
            review.to_string().as_bytes(),
        );
        let recorded = h
            .send(request(
                Method::POST,
                "/v1/evidence",
                Some(&reviewer.token),
                serde_json::to_vec(&envelope).expect("json"),
            ))
            .await;
        assert_eq!(recorded.status, StatusCode::CREATED, "{recorded:?}");
        let failed_review = recorded.json()["evidenceId"]
            .as_str()
            .expect("id")
            .to_owned();
        let early = command_doc(
            &h,
            &coordinator,
            "g1",
            "work.accept_result",
            json!({"workItemId": "wi-1"}),
        )
        .await;
        refused(
            &h,
            command_request(&coordinator, "g1", &early),
            "evidence_missing",
        )
        .await;
        let mut passed = review.clone();
        passed["result"]["outcome"] = json!("pass");
        passed["supersedes"] = json!(failed_review);
        let envelope = Envelope::sign(
            &reviewer.key,
            weft_api::evidence::EVIDENCE_TYPE,
            passed.to_string().as_bytes(),
        );
        let recorded = h
            .send(request(
                Method::POST,
                "/v1/evidence",
                Some(&reviewer.token),
                serde_json::to_vec(&envelope).expect("json"),
            ))
            .await;
        assert_eq!(recorded.status, StatusCode::CREATED, "{recorded:?}");
        let verified = ok(
            &h,
            &coordinator,
            "g1",
            "work.accept_result",
            json!({"workItemId": "wi-1"}),
        )
        .await;
        assert_eq!(verified["state"]["state"], "verified");
        let view = h.get_json(&coordinator, "/v1/workitems/wi-1").await;
        assert_eq!(view["state"], "verified");
        assert_eq!(view["history"].as_array().map(Vec::len), Some(7), "{view}");
        let events = h.get_json(&coordinator, "/v1/groups/g1/events").await;
        let caused: Vec<&Value> = events["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with("work.")))
            .collect();
        assert!(
            caused.iter().all(|e| e["causationCommandId"].is_string()),
            "{caused:?}"
        );
        let graph = h
            .get_json(&coordinator, "/v1/missions/mission-1/workitems")
            .await;
        assert_eq!(graph["nodes"][0]["state"], "verified");
        let mission = h.get_json(&w1, "/v1/missions/mission-1").await;
        assert_eq!(mission["state"], "active");
        assert_eq!(mission["budget"]["limit"]["financial"], 1.0, "{kind:?}");
        // The rows are what the log folds to (fsck replays the Events).
        let report = h.store.fsck().await.expect("fsck");
        assert!(report.problems.is_empty(), "{report:?}");
    }
);

backends!(
    /// OFR-4/OFR-5, SM-7: an offer to eight candidates accepted by all at once: exactly one
    /// wins a new ownership epoch, every other acceptance is `offer_withdrawn`, and the log
    /// holds one `work.offer_accepted`.
    async fn racing_acceptances_have_exactly_one_winner(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, _, _) = group(&h).await;
        let mut workers = Vec::new();
        for i in 0..8 {
            workers.push(h.agent(&format!("racer-{i}"), "g1", &["worker"]).await);
        }
        ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-race", "missionId": "m1", "contract": contract(&[])}),
        )
        .await;
        let names: Vec<String> = workers.iter().map(|w| w.id.to_string()).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        ok(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-race", "o-race", &names, &h, 600),
        )
        .await;
        let mut requests = Vec::new();
        for worker in &workers {
            let doc = command_doc(
                &h,
                worker,
                "g1",
                "work.accept_offer",
                json!({"workItemId": "wi-race", "offerId": "o-race"}),
            )
            .await;
            requests.push(command_request(worker, "g1", &doc));
        }
        let answers = futures::future::join_all(requests.into_iter().map(|r| h.send(r))).await;
        let winners = answers
            .iter()
            .filter(|a| a.status == StatusCode::CREATED)
            .count();
        assert_eq!(winners, 1, "{answers:?}");
        for loser in answers.iter().filter(|a| a.status != StatusCode::CREATED) {
            assert_eq!(loser.code(), "offer_withdrawn", "{loser:?}");
        }
        let events = h.get_json(&coordinator, "/v1/groups/g1/events").await;
        let accepted = events["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["type"] == "work.offer_accepted")
            .count();
        assert_eq!(accepted, 1, "{kind:?}");
    }
);

backends!(
    /// T18 / SM-12 / GAP-3: a cancelled Mission cancels its live WorkItems, a failed one
    /// stays failed, and nothing moves afterwards; T15/T16: a child Mission blocks its parent
    /// WorkItem until the child is approved, which verifies it.
    async fn mission_ends_propagate_and_children_complete_parents(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-open", "missionId": "m1", "contract": contract(&[])}),
        )
        .await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-parent", "missionId": "m1", "contract": contract(&[])}),
        )
        .await;
        let child = ok(&h, &coordinator, "g1", "mission.create_child", json!({"workItemId": "wi-parent", "childMissionId": "m-child", "title": "sub", "childFailurePolicy": "fail"})).await;
        assert_eq!(child["state"]["state"], "blocked");
        let before = h.fingerprint().await;
        refused(
            &h,
            command_request(
                &coordinator,
                "g1",
                &command_doc(
                    &h,
                    &coordinator,
                    "g1",
                    "work.unblock",
                    json!({"workItemId": "wi-parent"}),
                )
                .await,
            ),
            "illegal_transition",
        )
        .await;
        assert_unchanged(
            &before,
            &h.fingerprint().await,
            "a running child holds its parent",
        );
        // T16: an empty child cannot verify its parent (`mission_close.rs` approves one with
        // verified work); its cancellation fails the parent, by its `fail` policy (T17).
        refused(
            &h,
            command_request(
                &coordinator,
                "g1",
                &command_doc(
                    &h,
                    &coordinator,
                    "g1",
                    "mission.approve",
                    json!({"missionId": "m-child"}),
                )
                .await,
            ),
            "evidence_missing",
        )
        .await;
        ok(
            &h,
            &coordinator,
            "g1",
            "mission.cancel",
            json!({"missionId": "m-child"}),
        )
        .await;
        let parent = h.get_json(&coordinator, "/v1/workitems/wi-parent").await;
        assert_eq!(parent["state"], "failed", "T17: {parent}");
        ok(
            &h,
            &coordinator,
            "g1",
            "mission.cancel",
            json!({"missionId": "m1"}),
        )
        .await;
        let open = h.get_json(&coordinator, "/v1/workitems/wi-open").await;
        assert_eq!(open["state"], "cancelled", "T18: {open}");
        let before = h.fingerprint().await;
        refused(
            &h,
            command_request(
                &coordinator,
                "g1",
                &command_doc(
                    &h,
                    &coordinator,
                    "g1",
                    "work.authorize",
                    json!({"workItemId": "wi-late", "missionId": "m1", "contract": contract(&[])}),
                )
                .await,
            ),
            "illegal_transition",
        )
        .await;
        refused(
            &h,
            command_request(
                &coordinator,
                "g1",
                &command_doc(
                    &h,
                    &coordinator,
                    "g1",
                    "mission.approve",
                    json!({"missionId": "m1"}),
                )
                .await,
            ),
            "illegal_transition",
        )
        .await;
        assert_unchanged(&before, &h.fingerprint().await, "a terminal Mission");
        let report = h.store.fsck().await.expect("fsck");
        assert!(
            report.problems.is_empty(),
            "the propagated rows are the fold of the log: {report:?}"
        );
        // Reads are the Group's own: another Group's session sees nothing.
        let outsider = h.agent("x1", "g2", &["auditor"]).await;
        for uri in [
            "/v1/workitems/wi-open",
            "/v1/missions/m1",
            "/v1/missions/m1/workitems",
        ] {
            let answer = h
                .call(Method::GET, uri, Some(&outsider.token), Body::empty())
                .await;
            assert_eq!(answer.status, StatusCode::NOT_FOUND, "{uri}: {answer:?}");
        }
        let _ = (w1, kind);
    }
);

backends!(
    /// EVD-3: a criterion the contract checks by integrity is not the Worker's to evidence:
    /// the submission goes through without it, the built-in reviewer then checks the submitted
    /// artifacts and records the Authority's Evidence, and `work.accept_result` waits for it.
    async fn the_built_in_reviewer_checks_a_submission(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        mission(&h, &coordinator, "g1", "mission-1").await;
        let mut checked = contract(&[]);
        checked["acceptanceCriteria"] = json!([
            {"id": "ac-1", "description": "the tests pass", "requiredEvidence": ["automated_test"]},
            {"id": "ac-int", "description": "the bytes are what was published", "requiredEvidence": ["integrity_check"]}
        ]);
        ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-r", "missionId": "mission-1", "contract": checked}),
        )
        .await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-r", "o-r", &["w1"], &h, 600),
        )
        .await;
        ok(
            &h,
            &w1,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-r", "offerId": "o-r"}),
        )
        .await;
        let started = ok(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-r"})).await;
        let lease = started["state"]["lease"]["leaseId"].clone();
        let (artifact, evidence) = evidence_for(&h, &w1, "wi-r").await;
        let mut submit = command_doc(
            &h,
            &w1,
            "g1",
            "work.submit",
            json!({"workItemId": "wi-r", "artifacts": [artifact], "evidence": [evidence]}),
        )
        .await;
        submit["leaseId"] = lease;
        let submitted = h.send(command_request(&w1, "g1", &submit)).await;
        assert_eq!(submitted.status, StatusCode::CREATED, "{submitted:?}");
        // The review is a reaction after the submission's commit, not part of its answer.
        h.store.reactions_settled().await;
        let criteria = h
            .get_json(&coordinator, "/v1/workitems/wi-r/criteria")
            .await;
        let integrity = criteria["criteria"]
            .as_array()
            .expect("criteria")
            .iter()
            .find(|c| c["criterion"] == "ac-int")
            .cloned()
            .expect("the reviewer recorded ac-int");
        assert_eq!(integrity["latest"]["outcome"], "pass", "{criteria}");
        assert_eq!(integrity["latest"]["standing"], "authority");
        assert_eq!(integrity["latest"]["method"], "integrity_check");
        // The same submission again is a replay: it does nothing, so it reviews nothing (no
        // new Evidence, no Event), one at a time or many in a batch.
        let before = h.fingerprint().await;
        let again = h.send(command_request(&w1, "g1", &submit)).await;
        assert_eq!(again.status, StatusCode::CREATED, "{again:?}");
        let envelope = weft_api::Envelope::sign(
            &w1.key,
            weft_api::work::COMMAND_TYPE,
            submit.to_string().as_bytes(),
        );
        let batch = request(
            axum::http::Method::POST,
            "/v1/groups/g1/commands/batch",
            Some(&w1.token),
            serde_json::to_vec(&json!({"commands": [envelope.clone(), envelope]})).expect("json"),
        );
        let answer = h.send(batch).await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        assert_unchanged(&before, &h.fingerprint().await, "replayed submissions");
        let verified = ok(
            &h,
            &coordinator,
            "g1",
            "work.accept_result",
            json!({"workItemId": "wi-r"}),
        )
        .await;
        assert_eq!(verified["state"]["state"], "verified", "{kind:?}");
    }
);
