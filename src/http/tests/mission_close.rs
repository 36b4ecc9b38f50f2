//! How a Mission ends (issue #49): approval never ends a live WorkItem (T18, SM-12 propagate
//! only failure and cancellation), so `mission.approve` waits until none is left; child
//! Missions are created only through `mission.create_child` (T15–T17, SM-11).

use serde_json::json;

use super::harness::*;
use super::work::{group, ok};
use super::work_setup::{budget, command_doc, command_request, contract};

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
