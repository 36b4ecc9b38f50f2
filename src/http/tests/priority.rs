//! The Organization's priority over HTTP (SCH-6, SCH-7): a Coordinator's `mission.create`
//! cannot ask for a `priorityClass` above its Group's policy; the operator escalates by
//! raising the Group's `missionPriorityCeiling` (`PUT /v1/admin/groups/{g}/policy`).

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::harness::*;
use super::work::ok;
use super::work_setup::{budget, command_doc, command_request};

fn create(mission_id: &str, priority: &str) -> Value {
    json!({"missionId": mission_id, "title": "t", "priorityClass": priority, "budget": budget()})
}

backends!(
    /// SCH-6: a Coordinator supplies urgency, deadline and business impact, and cannot force
    /// its Mission ahead: a `mission.create` asking for a `priorityClass` above the Group's
    /// ceiling (`normal` until the operator sets one) is `forbidden`, naming SCH-6, and
    /// changes nothing; at or below the ceiling it is accepted as asked.
    async fn sch_6_a_coordinator_cannot_force_its_mission_ahead(kind: Kind) {
        let h = harness(kind).await;
        let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
        for priority in ["high", "critical"] {
            let document = command_doc(
                &h,
                &coordinator,
                "g1",
                "mission.create",
                create("m-up", priority),
            )
            .await;
            let answer = refused(
                &h,
                command_request(&coordinator, "g1", &document),
                "forbidden",
            )
            .await;
            assert!(
                answer.json()["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains("SCH-6")),
                "{answer:?}"
            );
        }
        for (mission, priority) in [("m-low", "low"), ("m-normal", "normal")] {
            let created = ok(
                &h,
                &coordinator,
                "g1",
                "mission.create",
                create(mission, priority),
            )
            .await;
            assert_eq!(created["state"]["priorityClass"], priority, "{created}");
        }
    }
);

backends!(
    /// SCH-7: escalation is the Organization's, through policy: the operator (admin token
    /// only) sets the Group's `missionPriorityCeiling`, recorded as `group.policy_set` in the
    /// log; a Coordinator may then create a Mission up to it. A Coordinator cannot set the
    /// policy; an unknown level is `bad_request`, an unknown Group `unknown_group`.
    async fn sch_7_the_operator_escalates_through_the_groups_policy(kind: Kind) {
        let h = harness(kind).await;
        let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
        let policy = |level: &str| json!({"missionPriorityCeiling": level});
        let own = h
            .json_as(
                Method::PUT,
                "/v1/admin/groups/g1/policy",
                &coordinator.token,
                policy("critical"),
                &[],
            )
            .await;
        assert_eq!(own.code(), "forbidden", "{own:?}");
        refused(
            &h,
            admin_request(Method::PUT, "/v1/admin/groups/g1/policy", policy("urgent")),
            "bad_request",
        )
        .await;
        refused(
            &h,
            admin_request(Method::PUT, "/v1/admin/groups/g9/policy", policy("high")),
            "unknown_group",
        )
        .await;
        let set = h
            .admin_json(Method::PUT, "/v1/admin/groups/g1/policy", policy("high"))
            .await;
        assert_eq!(set.status, StatusCode::OK, "{set:?}");
        assert_eq!(
            set.json(),
            json!({"groupId": "g1", "missionPriorityCeiling": "high"})
        );
        let logged = h.events_of(&coordinator, "group.policy_set").await;
        assert_eq!(logged.len(), 1);
        assert_eq!(logged[0]["payload"]["missionPriorityCeiling"], "high");
        let created = ok(
            &h,
            &coordinator,
            "g1",
            "mission.create",
            create("m-high", "high"),
        )
        .await;
        assert_eq!(created["state"]["priorityClass"], "high");
        let document = command_doc(
            &h,
            &coordinator,
            "g1",
            "mission.create",
            create("m-crit", "critical"),
        )
        .await;
        refused(
            &h,
            command_request(&coordinator, "g1", &document),
            "forbidden",
        )
        .await;
    }
);
