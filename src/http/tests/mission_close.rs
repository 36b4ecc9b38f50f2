//! How a Mission ends (issue #49): approval never ends a live WorkItem (T18, SM-12 propagate
//! only failure and cancellation), so `mission.approve` waits until none is left; child
//! Missions are created only through `mission.create_child` (T15–T17, SM-11).

use serde_json::json;

use super::harness::*;
use super::work::{group, ok};
use super::work_setup::{
    accepted, authorized, budget, command_doc, command_request, contract, offered,
};

backends!(
    /// T18, SM-12 (issue #49): `mission.approve` with a live WorkItem is refused
    /// `illegal_transition`, naming it, with nothing changed; once the Coordinator cancelled
    /// it, approval goes through and moves no WorkItem.
    async fn t18_approval_waits_until_no_work_item_is_live(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, _, _) = group(&h).await;
        for wi in ["wi-done", "wi-live"] {
            ok(
                &h,
                &coordinator,
                "g1",
                "work.authorize",
                json!({"workItemId": wi, "missionId": "m1", "contract": contract(&[])}),
            )
            .await;
        }
        ok(
            &h,
            &coordinator,
            "g1",
            "work.cancel",
            json!({"workItemId": "wi-done", "reason": "not needed"}),
        )
        .await;
        let approve = command_doc(
            &h,
            &coordinator,
            "g1",
            "mission.approve",
            json!({"missionId": "m1"}),
        )
        .await;
        let answer = refused(
            &h,
            command_request(&coordinator, "g1", &approve),
            "illegal_transition",
        )
        .await;
        let detail = answer.json()["detail"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            detail.contains("wi-live") && !detail.contains("wi-done"),
            "{kind:?}: {detail}"
        );
        ok(
            &h,
            &coordinator,
            "g1",
            "work.cancel",
            json!({"workItemId": "wi-live", "reason": "not needed"}),
        )
        .await;
        let approved = ok(
            &h,
            &coordinator,
            "g1",
            "mission.approve",
            json!({"missionId": "m1"}),
        )
        .await;
        assert_eq!(
            approved["events"].as_array().map(Vec::len),
            Some(1),
            "{approved}"
        );
        let _ = budget;
    }
);

backends!(
    /// SM-11 (issue #49): `mission.create` names no parent; a child Mission is created only by
    /// `mission.create_child` (which blocks the parent): with `parentWorkItemId` it is
    /// `invalid_command`, nothing changed.
    async fn sm_11_a_child_mission_is_created_only_by_create_child(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, _, _) = group(&h).await;
        authorized(&h, &coordinator, "m1", "wi-p", contract(&[])).await;
        let create = command_doc(
            &h,
            &coordinator,
            "g1",
            "mission.create",
            json!({"missionId": "m-side", "title": "t", "priorityClass": "normal",
                   "budget": budget(), "parentWorkItemId": "wi-p"}),
        )
        .await;
        let answer = refused(
            &h,
            command_request(&coordinator, "g1", &create),
            "invalid_command",
        )
        .await;
        assert!(
            answer.json()["detail"]
                .as_str()
                .is_some_and(|d| d.contains("mission.create_child")),
            "{kind:?}: {answer:?}"
        );
    }
);

backends!(
    /// SM-T15, SM-T16, SM-11 (issue #49): `mission.create_child` blocks the parent and fences
    /// its owner while the child runs; an empty child cannot verify its parent
    /// (`evidence_missing`, nothing changed); once a WorkItem of the child is verified (its
    /// integrity checked by the Authority after submission), the child's approval verifies the
    /// parent and becomes Evidence for it: the Authority's `business_rule` record, one per
    /// acceptance criterion, in the approval's transaction, naming the approver and the
    /// verified work, so the parent's criteria view shows why it was verified and the rows stay
    /// the fold of the log.
    async fn sm_t16_a_child_approval_is_evidence_for_its_parent(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        authorized(&h, &coordinator, "m1", "wi-p", contract(&[])).await;
        offered(&h, &coordinator, "wi-p", "o-p", &["w1"]).await;
        accepted(&h, &w1, "wi-p", "o-p").await;
        // The child is the Mission the harness publishes under (`mission-1`).
        let child = ok(
            &h,
            &coordinator,
            "g1",
            "mission.create_child",
            json!({"workItemId": "wi-p", "childMissionId": "mission-1", "title": "sub", "childFailurePolicy": "block"}),
        )
        .await;
        assert_eq!(child["state"]["state"], "blocked", "SM-T15: {child}");
        assert!(child["state"]["owner"].is_null(), "SM-T15: fenced: {child}");
        let empty = command_doc(
            &h,
            &coordinator,
            "g1",
            "mission.approve",
            json!({"missionId": "mission-1"}),
        )
        .await;
        refused(
            &h,
            command_request(&coordinator, "g1", &empty),
            "evidence_missing",
        )
        .await;

        let mut checked = contract(&[]);
        checked["acceptanceCriteria"] = json!([
            {"id": "ac-int", "description": "the bytes are what was published", "requiredEvidence": ["integrity_check"]}
        ]);
        authorized(&h, &coordinator, "mission-1", "wi-c", checked).await;
        offered(&h, &coordinator, "wi-c", "o-c", &["w1"]).await;
        accepted(&h, &w1, "wi-c", "o-c").await;
        let started = ok(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-c"})).await;
        let artifact = h.put_in(&w1, "g1", b"{\"summary\": 1}", &[], "wi-c").await;
        let mut submit = command_doc(
            &h,
            &w1,
            "g1",
            "work.submit",
            json!({"workItemId": "wi-c", "artifacts": [artifact.to_string()], "evidence": []}),
        )
        .await;
        submit["leaseId"] = started["state"]["lease"]["leaseId"].clone();
        let submitted = h.send(command_request(&w1, "g1", &submit)).await;
        assert_eq!(
            submitted.status,
            axum::http::StatusCode::CREATED,
            "{submitted:?}"
        );
        // EVD-3: the review after the submission (a reaction after its commit) records the
        // integrity Evidence `work.accept_result` waits for.
        h.store.reactions_settled().await;
        let verified = ok(
            &h,
            &coordinator,
            "g1",
            "work.accept_result",
            json!({"workItemId": "wi-c"}),
        )
        .await;
        assert_eq!(verified["state"]["state"], "verified", "{verified}");

        let approved = ok(
            &h,
            &coordinator,
            "g1",
            "mission.approve",
            json!({"missionId": "mission-1"}),
        )
        .await;
        let kinds: Vec<&str> = approved["events"]
            .as_array()
            .map(|events| events.iter().filter_map(|e| e["type"].as_str()).collect())
            .unwrap_or_default();
        assert!(kinds.contains(&"evidence.recorded"), "{kind:?}: {approved}");
        let parent = h.get_json(&coordinator, "/v1/workitems/wi-p").await;
        assert_eq!(parent["state"], "verified", "SM-T16: {parent}");
        let criteria = h
            .get_json(&coordinator, "/v1/workitems/wi-p/criteria")
            .await;
        let latest = &criteria["criteria"][0]["latest"];
        assert_eq!(latest["method"], "business_rule", "{criteria}");
        assert_eq!(latest["outcome"], "pass", "{criteria}");
        assert_eq!(latest["producer"], "weft-authority", "{criteria}");
        let id = latest["evidenceId"].as_str().unwrap_or_default();
        let record = h
            .get_json(&coordinator, &format!("/v1/evidence/{id}"))
            .await;
        let text = record.to_string();
        assert!(
            text.contains("child Mission mission-1 approved by c1") && text.contains("wi-c"),
            "the approval, named: {record}"
        );
        let report = h.store.fsck().await.expect("fsck");
        assert!(report.problems.is_empty(), "{kind:?}: {report:?}");
    }
);

backends!(
    /// SM-T17 (issue #49): a child Mission's failure follows the declared child-failure
    /// policy: `fail` fails the parent WorkItem; `block` leaves it `blocked` for the
    /// Coordinator, who may unblock it once the child has ended (`open`: its owner was fenced).
    async fn sm_t17_a_child_failure_follows_its_policy(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, _, _) = group(&h).await;
        for (wi, child, policy) in [("wi-f", "m-f", "fail"), ("wi-b", "m-b", "block")] {
            ok(
                &h,
                &coordinator,
                "g1",
                "work.authorize",
                json!({"workItemId": wi, "missionId": "m1", "contract": contract(&[])}),
            )
            .await;
            ok(
                &h,
                &coordinator,
                "g1",
                "mission.create_child",
                json!({"workItemId": wi, "childMissionId": child, "title": "sub", "childFailurePolicy": policy}),
            )
            .await;
            ok(
                &h,
                &coordinator,
                "g1",
                "mission.fail",
                json!({"missionId": child}),
            )
            .await;
        }
        let failed = h.get_json(&coordinator, "/v1/workitems/wi-f").await;
        assert_eq!(failed["state"], "failed", "{kind:?}: {failed}");
        let blocked = h.get_json(&coordinator, "/v1/workitems/wi-b").await;
        assert_eq!(blocked["state"], "blocked", "{kind:?}: {blocked}");
        let unblocked = ok(
            &h,
            &coordinator,
            "g1",
            "work.unblock",
            json!({"workItemId": "wi-b"}),
        )
        .await;
        assert_eq!(unblocked["state"]["state"], "open", "{unblocked}");
        let report = h.store.fsck().await.expect("fsck");
        assert!(report.problems.is_empty(), "{kind:?}: {report:?}");
    }
);

backends!(
    /// SM-T18, SM-11 (issue #49 review): a parent WorkItem cancelled while its child Mission
    /// runs takes the child with it (`mission.cancelled`, its WorkItems cancelled), so nothing
    /// keeps running under an ended parent, and the parent's Mission may then be approved.
    async fn sm_t18_an_ended_parent_cancels_its_running_child(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, _, _) = group(&h).await;
        authorized(&h, &coordinator, "m1", "wi-p", contract(&[])).await;
        ok(&h, &coordinator, "g1", "mission.create_child",
           json!({"workItemId": "wi-p", "childMissionId": "m-kid", "title": "sub", "childFailurePolicy": "block"})).await;
        authorized(&h, &coordinator, "m-kid", "wi-k", contract(&[])).await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.cancel",
            json!({"workItemId": "wi-p", "reason": "not needed"}),
        )
        .await;
        let child = h.get_json(&coordinator, "/v1/missions/m-kid").await;
        assert_eq!(child["state"], "cancelled", "{kind:?}: {child}");
        let kid = h.get_json(&coordinator, "/v1/workitems/wi-k").await;
        assert_eq!(kid["state"], "cancelled", "{kid}");
        let parent = h.get_json(&coordinator, "/v1/workitems/wi-p").await;
        assert_eq!(parent["state"], "cancelled", "{parent}");
        let report = h.store.fsck().await.expect("fsck");
        assert!(report.problems.is_empty(), "{kind:?}: {report:?}");
    }
);
