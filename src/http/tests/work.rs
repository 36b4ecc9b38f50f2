//! Missions and WorkItems through `POST /v1/groups/{g}/commands` (issue #11): the lifecycle,
//! racing acceptances (OFR-5), refusals with their exact code and nothing changed, Mission
//! ends propagating (T18), child Missions (T15/T16), reads scoped to the Group.
//! It is long because the issue's list of bad Commands stays one table-like test, next to
//! the helpers that build and sign Commands (the CLI and bench reuse their shapes).

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use weft_api::Envelope;

use super::harness::*;
use super::work_setup::{command_doc, command_request, contract};

fn basis() -> Value {
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
    let artifact = h
        .put_in(worker, "g1", format!("result of {wi}").as_bytes(), &[], wi)
        .await;
    let evidence = json!({
        "subject": {"kind": "workItem", "id": wi},
        "missionId": "mission-1", "groupId": "g1", "workItemId": wi, "criterion": "ac-1",
        "method": {"kind": "automated_test", "name": "unit", "version": "1"},
        "result": {"outcome": "pass", "summary": "ok", "metrics": {}},
        "producer": {"agentId": worker.id, "agentCardVersion": "1"},
        "timestamp": "2026-11-30T12:05:00Z", "artifacts": [artifact],
    });
    let envelope = Envelope::sign(
        &worker.key,
        weft_api::evidence::EVIDENCE_TYPE,
        evidence.to_string().as_bytes(),
    );
    let answer = h
        .send(request(
            Method::POST,
            "/v1/evidence",
            Some(&worker.token),
            serde_json::to_vec(&envelope).expect("json"),
        ))
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    (
        artifact.to_string(),
        answer.json()["evidenceId"].as_str().expect("id").to_owned(),
    )
}

backends!(
    /// T2, T3, T4 (SM-7), T7, T11 (EVD-2), T12: authorize → offer → accept → start → submit →
    /// accept_result, each with its Event carrying `causationCommandId`, and the reads.
    async fn a_work_item_runs_from_authorize_to_verified(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        // The Evidence of a WorkItem names the Mission its manifests do ("mission-1").
        ok(&h, &coordinator, "g1", "mission.create", json!({"missionId": "mission-1", "title": "t", "priorityClass": "high",
            "budget": {"financial": 1.0, "tokens": 1, "toolCalls": 1, "computeSeconds": 1, "wallClockSeconds": 1, "sideEffects": 1}})).await;
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
        ok(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-1", "o1", &["w1"], &h, 600),
        )
        .await;
        let accepted = ok(
            &h,
            &w1,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-1", "offerId": "o1"}),
        )
        .await;
        assert_eq!(accepted["state"]["state"], "queued");
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
        assert_eq!(view["history"].as_array().map(Vec::len), Some(6), "{view}");
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
    /// Bad Commands (issue #11's list): each answers its exact code and changes nothing.
    async fn bad_commands_are_refused_and_change_nothing(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2) = group(&h).await;
        let outsider = h.agent("x1", "g2", &["coordinator"]).await;
        ok(&h, &outsider, "g2", "mission.create", json!({"missionId": "m2", "title": "other", "priorityClass": "low",
            "budget": {"financial": 1.0, "tokens": 1, "toolCalls": 1, "computeSeconds": 1, "wallClockSeconds": 1, "sideEffects": 1}})).await;
        ok(
            &h,
            &outsider,
            "g2",
            "work.authorize",
            json!({"workItemId": "wi-g2", "missionId": "m2", "contract": contract(&[])}),
        )
        .await;
        ok(&h, &coordinator, "g1", "mission.create", json!({"missionId": "m1b", "title": "second", "priorityClass": "low",
            "budget": {"financial": 1.0, "tokens": 1, "toolCalls": 1, "computeSeconds": 1, "wallClockSeconds": 1, "sideEffects": 1}})).await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-a", "missionId": "m1", "contract": contract(&[])}),
        )
        .await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-b", "missionId": "m1", "contract": contract(&["wi-a"])}),
        )
        .await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-other", "missionId": "m1b", "contract": contract(&[])}),
        )
        .await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-b", "o-b", &["w1"], &h, 60),
        )
        .await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-a", "o-a", &["w1"], &h, 1),
        )
        .await;

        let base = |kind: &str, payload: Value| (kind.to_owned(), payload);
        let docs = [
            // (code, type, payload, signer, tweak)
            (
                "unknown_work_item",
                base(
                    "work.cancel",
                    json!({"workItemId": "wi-g2", "reason": "mine now"}),
                ),
                &coordinator,
                "",
            ),
            (
                "forbidden",
                base(
                    "mission.create",
                    json!({"missionId": "m9", "title": "t", "priorityClass": "low", "budget": {"financial": 1.0, "tokens": 1, "toolCalls": 1, "computeSeconds": 1, "wallClockSeconds": 1, "sideEffects": 1}}),
                ),
                &w1,
                "",
            ),
            (
                "forbidden",
                base(
                    "work.accept_offer",
                    json!({"workItemId": "wi-b", "offerId": "o-b"}),
                ),
                &w2,
                "",
            ),
            (
                "illegal_transition",
                base("work.start", json!({"workItemId": "wi-a"})),
                &w1,
                "",
            ),
            (
                "unknown_work_item",
                base(
                    "work.authorize",
                    json!({"workItemId": "wi-c", "missionId": "m1", "contract": contract(&["wi-nowhere"])}),
                ),
                &coordinator,
                "",
            ),
            (
                "unknown_work_item",
                base(
                    "work.authorize",
                    json!({"workItemId": "wi-c", "missionId": "m1", "contract": contract(&["wi-g2"])}),
                ),
                &coordinator,
                "",
            ),
            (
                "mission_mismatch",
                base(
                    "work.authorize",
                    json!({"workItemId": "wi-c", "missionId": "m1", "contract": contract(&["wi-other"])}),
                ),
                &coordinator,
                "",
            ),
            (
                "cycle",
                base(
                    "work.revise_contract",
                    json!({"workItemId": "wi-a", "contract": contract(&["wi-b"])}),
                ),
                &coordinator,
                "",
            ),
            (
                "illegal_transition",
                base(
                    "work.authorize",
                    json!({"workItemId": "wi-a", "missionId": "m1", "contract": contract(&[])}),
                ),
                &coordinator,
                "",
            ),
            (
                "not_found",
                base(
                    "work.authorize",
                    json!({"workItemId": "wi-c", "missionId": "m2", "contract": contract(&[])}),
                ),
                &coordinator,
                "",
            ),
            (
                "invalid_command",
                base(
                    "work.authorize",
                    json!({"workItemId": "wi-c", "missionId": "m1", "contract": {"objective": "only prose"}}),
                ),
                &coordinator,
                "",
            ),
            (
                "invalid_command",
                base("work.offer", {
                    let mut o = offer("wi-a", "o-x", &["w1"], &h, 60);
                    o["selectionBasis"]["reasoning"] = json!("because I thought hard about it");
                    o
                }),
                &coordinator,
                "",
            ),
            (
                "invalid_command",
                base("work.authorize", {
                    let mut c = contract(&[]);
                    c["mood"] = json!("optimistic");
                    json!({"workItemId": "wi-c", "missionId": "m1", "contract": c})
                }),
                &coordinator,
                "",
            ),
            (
                "stale_revision",
                base("work.cancel", json!({"workItemId": "wi-a", "reason": "r"})),
                &coordinator,
                "revision",
            ),
            (
                "group_mismatch",
                base("work.cancel", json!({"workItemId": "wi-a", "reason": "r"})),
                &coordinator,
                "group",
            ),
            (
                "stale_session",
                base("work.cancel", json!({"workItemId": "wi-a", "reason": "r"})),
                &coordinator,
                "session",
            ),
            (
                "stale_membership",
                base("work.cancel", json!({"workItemId": "wi-a", "reason": "r"})),
                &coordinator,
                "membership",
            ),
            (
                "producer_mismatch",
                base("work.cancel", json!({"workItemId": "wi-a", "reason": "r"})),
                &coordinator,
                "key",
            ),
            (
                "unknown_extension",
                base("work.cancel", json!({"workItemId": "wi-a", "reason": "r"})),
                &coordinator,
                "extension",
            ),
        ];
        let before = h.fingerprint().await;
        for (code, (kind, payload), signer, tweak) in docs {
            let mut doc = command_doc(&h, signer, "g1", &kind, payload).await;
            let mut key = signer.key.clone();
            match tweak {
                "revision" => doc["expectedRevision"] = json!(99),
                "group" => doc["groupId"] = json!("g2"),
                "session" => doc["sessionEpoch"] = json!(7),
                "membership" => doc["membershipEpoch"] = json!(7),
                "key" => key = w2.key.clone(),
                "extension" => {
                    doc["extensions"] =
                        json!([{"urn": "urn:x:unknown", "critical": true, "value": {}}])
                }
                _ => {}
            }
            let signed = Agent {
                id: signer.id.clone(),
                key,
                token: signer.token.clone(),
            };
            let answer = refused(&h, command_request(&signed, "g1", &doc), code).await;
            assert!(answer.json()["detail"].is_string(), "{code}: {answer:?}");
        }
        assert_unchanged(&before, &h.fingerprint().await, "every refusal above");
        // DEP-3: wi-b depends on wi-a, which is not verified: its owner cannot start it.
        ok(
            &h,
            &w1,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-b", "offerId": "o-b"}),
        )
        .await;
        let start = command_doc(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-b"})).await;
        refused(&h, command_request(&w1, "g1", &start), "not_eligible").await;
        // Accepting after expiry (T5: expiry appended nothing), a reused commandId with other
        // bytes.
        h.clock.advance(chrono::Duration::seconds(5));
        refused(
            &h,
            command_request(
                &w1,
                "g1",
                &command_doc(
                    &h,
                    &w1,
                    "g1",
                    "work.accept_offer",
                    json!({"workItemId": "wi-a", "offerId": "o-a"}),
                )
                .await,
            ),
            "offer_expired",
        )
        .await;
        let mut reused = command_doc(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-a", "o-a2", &["w1"], &h, 60),
        )
        .await;
        reused["commandId"] = json!("cmd-fixed");
        let first = h.send(command_request(&coordinator, "g1", &reused)).await;
        assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
        let replay = h.send(command_request(&coordinator, "g1", &reused)).await;
        assert_eq!(
            (replay.status, replay.json()),
            (StatusCode::CREATED, first.json()),
            "the same bytes replay"
        );
        let middle = h.fingerprint().await;
        reused["payload"]["offerId"] = json!("o-a3");
        refused(
            &h,
            command_request(&coordinator, "g1", &reused),
            "idempotency_key_reused",
        )
        .await;
        assert_unchanged(&middle, &h.fingerprint().await, "reused commandId");
        // Accepting twice: the winner meets the table (`queued`), a loser the withdrawal.
        ok(
            &h,
            &w1,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-a", "offerId": "o-a2"}),
        )
        .await;
        let again = command_doc(
            &h,
            &w1,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-a", "offerId": "o-a2"}),
        )
        .await;
        refused(&h, command_request(&w1, "g1", &again), "illegal_transition").await;
        // SM-4: a child Mission under a terminal WorkItem.
        ok(
            &h,
            &coordinator,
            "g1",
            "work.cancel",
            json!({"workItemId": "wi-other", "reason": "not needed"}),
        )
        .await;
        let child = command_doc(&h, &coordinator, "g1", "mission.create_child",
            json!({"workItemId": "wi-other", "childMissionId": "m-late", "title": "too late", "childFailurePolicy": "block"})).await;
        refused(
            &h,
            command_request(&coordinator, "g1", &child),
            "illegal_transition",
        )
        .await;
        let _ = kind;
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
        ok(
            &h,
            &coordinator,
            "g1",
            "mission.approve",
            json!({"missionId": "m-child"}),
        )
        .await;
        let parent = h.get_json(&coordinator, "/v1/workitems/wi-parent").await;
        assert_eq!(parent["state"], "verified", "T16: {parent}");
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
    /// Issue #11: `workItemId` is a reference: a manifest or Evidence naming a WorkItem that
    /// does not exist, or exists only in another Group, is `unknown_work_item`; naming it
    /// under another Mission is `mission_mismatch`.
    async fn manifests_and_evidence_name_existing_work_items(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        let outsider = h.agent("x1", "g2", &["coordinator"]).await;
        ok(&h, &outsider, "g2", "mission.create", json!({"missionId": "m2", "title": "other", "priorityClass": "low",
            "budget": {"financial": 1.0, "tokens": 1, "toolCalls": 1, "computeSeconds": 1, "wallClockSeconds": 1, "sideEffects": 1}})).await;
        ok(
            &h,
            &outsider,
            "g2",
            "work.authorize",
            json!({"workItemId": "wi-g2", "missionId": "m2", "contract": contract(&[])}),
        )
        .await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-1", "missionId": "m1", "contract": contract(&[])}),
        )
        .await;
        let digests = h.upload(&w1, b"labelled output").await;
        for (mission, work_item, code) in [
            ("m1", "wi-nowhere", "unknown_work_item"),
            ("m2", "wi-g2", "unknown_work_item"),
            ("m1b", "wi-1", "mission_mismatch"),
        ] {
            let mut labelled = manifest(&w1, "g1", digests, &[]);
            labelled.mission_id = weft_api::Id::parse("m", mission).expect("id");
            labelled.work_item_id = weft_api::Id::parse("w", work_item).expect("id");
            refused(&h, publish_request(&w1, &sign(&w1.key, &labelled)), code).await;
        }
        let evidence = json!({
            "subject": {"kind": "workItem", "id": "wi-nowhere"},
            "missionId": "m1", "groupId": "g1", "workItemId": "wi-nowhere", "criterion": "ac-1",
            "method": {"kind": "automated_test", "name": "unit", "version": "1"},
            "result": {"outcome": "pass", "summary": "ok", "metrics": {}},
            "producer": {"agentId": w1.id, "agentCardVersion": "1"},
            "timestamp": "2026-11-30T12:05:00Z", "artifacts": [],
        });
        let envelope = Envelope::sign(
            &w1.key,
            weft_api::evidence::EVIDENCE_TYPE,
            evidence.to_string().as_bytes(),
        );
        let record = request(
            Method::POST,
            "/v1/evidence",
            Some(&w1.token),
            serde_json::to_vec(&envelope).expect("json"),
        );
        refused(&h, record, "unknown_work_item").await;
        let _ = kind;
    }
);
