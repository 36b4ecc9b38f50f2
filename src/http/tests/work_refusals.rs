//! Refused Commands (issue #11's list of bad input, each with its exact code and nothing
//! changed), WorkItems as references for manifests and Evidence, and Evidence-gated
//! submission (issue #12, EVD-1/EVD-2).

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::harness::*;
use super::work::{evidence_of, group, mission, offer, ok, record_evidence};
use super::work_setup::{
    command_doc, command_request, contract, evidence_payload, signed_evidence,
};

backends!(
    /// Bad Commands (issue #11's list): each answers its exact code and changes nothing. A
    /// Command never reaches into another Group (DEP-5: no cross-Group transactions): naming
    /// its WorkItem, as a dependency or a target, is `unknown_work_item`. CON-6: prose alone is
    /// no contract; OFR-11: a selection basis with reasoning in it is refused; DEP-4: the
    /// Command that would close a dependency cycle is `cycle`; SM-T5, SM-8: accepting an
    /// expired offer is `offer_expired`; SM-4: nothing hangs off a cancelled WorkItem.
    async fn bad_commands_are_refused_and_change_nothing(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2) = group(&h).await;
        let outsider = h.agent("x1", "g2", &["coordinator"]).await;
        mission(&h, &outsider, "g2", "m2").await;
        ok(
            &h,
            &outsider,
            "g2",
            "work.authorize",
            json!({"workItemId": "wi-g2", "missionId": "m2", "contract": contract(&[])}),
        )
        .await;
        mission(&h, &coordinator, "g1", "m1b").await;
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
    /// Issue #11: `workItemId` is a reference: a manifest or Evidence naming a WorkItem that
    /// does not exist, or exists only in another Group, is `unknown_work_item`; naming it
    /// under another Mission is `mission_mismatch`.
    async fn manifests_and_evidence_name_existing_work_items(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        let outsider = h.agent("x1", "g2", &["coordinator"]).await;
        mission(&h, &outsider, "g2", "m2").await;
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
        let evidence = evidence_payload(&w1, "g1", "m1", "wi-nowhere", "automated_test", &[]);
        let body = signed_evidence(&w1, &evidence);
        let record = request(Method::POST, "/v1/evidence", Some(&w1.token), body);
        refused(&h, record, "unknown_work_item").await;
        let _ = kind;
    }
);

backends!(
    /// EVD-1/EVD-2 (issue #12): a submission needs, for every acceptance criterion, passing
    /// Evidence of a method the contract requires: a Worker's own `pass` does not count where
    /// the contract asks for a human review, nor does Evidence it recorded before its current
    /// Execution Lease started; a reviewer's does.
    async fn submission_needs_evidence_of_a_required_method(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        mission(&h, &coordinator, "g1", "mission-1").await;
        let mut reviewed = contract(&[]);
        reviewed["acceptanceCriteria"][0]["requiredEvidence"] = json!(["human"]);
        ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-h", "missionId": "mission-1", "contract": reviewed}),
        )
        .await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-t", "missionId": "mission-1", "contract": contract(&[])}),
        )
        .await;
        for wi in ["wi-h", "wi-t"] {
            ok(
                &h,
                &coordinator,
                "g1",
                "work.offer",
                offer(wi, &format!("o-{wi}"), &["w1"], &h, 600),
            )
            .await;
            ok(
                &h,
                &w1,
                "g1",
                "work.accept_offer",
                json!({"workItemId": wi, "offerId": format!("o-{wi}")}),
            )
            .await;
        }
        let mut leases = std::collections::HashMap::new();
        for wi in ["wi-h", "wi-t"] {
            let started = ok(&h, &w1, "g1", "work.start", json!({"workItemId": wi})).await;
            leases.insert(
                wi,
                started["state"]["lease"]["leaseId"]
                    .as_str()
                    .expect("lease")
                    .to_owned(),
            );
        }
        // Evidence the Worker recorded under an earlier lease of wi-t is not bound to the
        // current one. (Issue #12: it publishes for wi-t only under a lease, so "before it
        // owns and starts wi-t" became "under the lease it checkpointed".)
        let (early_artifact, early) = evidence_of(&h, &w1, "wi-t", "automated_test", "early").await;
        let mut checkpoint = command_doc(
            &h,
            &w1,
            "g1",
            "work.checkpoint",
            json!({"workItemId": "wi-t", "checkpoint": {"note": "pause"}}),
        )
        .await;
        checkpoint["leaseId"] = json!(leases["wi-t"]);
        let answer = h.send(command_request(&w1, "g1", &checkpoint)).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        let restarted = ok(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-t"})).await;
        leases.insert(
            "wi-t",
            restarted["state"]["lease"]["leaseId"]
                .as_str()
                .expect("lease")
                .to_owned(),
        );
        let submit = |wi: &str, artifact: &str, evidence: &[&str], id: &str| {
            let lease = leases[wi].clone();
            let (wi, artifact, evidence, id) = (
                wi.to_owned(),
                artifact.to_owned(),
                evidence.iter().map(|e| (*e).to_owned()).collect::<Vec<_>>(),
                id.to_owned(),
            );
            let (h, w1) = (&h, &w1);
            async move {
                let mut doc = command_doc(
                    h,
                    w1,
                    "g1",
                    "work.submit",
                    json!({"workItemId": wi, "artifacts": [artifact], "evidence": evidence}),
                )
                .await;
                doc["leaseId"] = json!(lease);
                doc["commandId"] = json!(id);
                command_request(w1, "g1", &doc)
            }
        };
        refused(
            &h,
            submit("wi-t", &early_artifact, &[&early], "s1").await,
            "evidence_missing",
        )
        .await;
        let (own_artifact, own) = evidence_of(&h, &w1, "wi-h", "automated_test", "own claim").await;
        refused(
            &h,
            submit("wi-h", &own_artifact, &[&own], "s2").await,
            "evidence_missing",
        )
        .await;
        let human = record_evidence(&h, &reviewer, "wi-h", "human", &own_artifact).await;
        let accepted = h
            .send(submit("wi-h", &own_artifact, &[&own, &human], "s3").await)
            .await;
        assert_eq!(accepted.status, StatusCode::CREATED, "{accepted:?}");
        let (fresh_artifact, fresh) = evidence_of(&h, &w1, "wi-t", "automated_test", "fresh").await;
        let accepted = h
            .send(submit("wi-t", &fresh_artifact, &[&fresh], "s4").await)
            .await;
        assert_eq!(
            accepted.status,
            StatusCode::CREATED,
            "{kind:?}: {accepted:?}"
        );
    }
);
