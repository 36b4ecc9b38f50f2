//! Forwarding Context Packages across Groups (CTX-7) and the scheduling metadata of a WorkItem
//! (CTX-8). The package helpers are in `context.rs`.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::json;
use weft_api::manifest::Classification;

use super::context::{head, package, published, setting};
use super::harness::*;

backends!(
    /// CTX-7: a coordinator of both Groups forwards a version; it is readable in the target
    /// Group with the Artifacts it cites (by digest), `context.forwarded` is in both logs
    /// naming each other, and the target's members may not read the source's Events (CTX-3).
    /// DEP-6: the Groups are related by Artifacts and correlated Events, not a transaction.
    async fn ctx7_a_coordinator_of_both_groups_forwards_a_package(kind: Kind) {
        let h = harness(kind).await;
        let (worker, artifact) = setting(&h).await;
        let id = published(
            &h,
            &worker,
            "g1",
            &package(
                &worker,
                ("g1", "mission-1"),
                "pkg-1",
                1,
                None,
                (1, 2),
                &[artifact],
            ),
        )
        .await;
        let coordinator = h.agent("ctx-coord", "g1", &["coordinator"]).await;
        let in_g2 = h.join(&coordinator, "g2", &["coordinator"]).await;
        let reader = h.agent("ctx-reader", "g2", &["worker"]).await;
        let before = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{artifact}/content"),
                Some(&reader.token),
                Body::empty(),
            )
            .await;
        assert_eq!(
            before.status,
            StatusCode::NOT_FOUND,
            "not readable in g2 before: {before:?}"
        );

        let answer = h
            .json_as(
                Method::POST,
                "/v1/context/pkg-1/forward",
                &coordinator.token,
                json!({"toGroupId": "g2"}),
                &[],
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        let forwarded = answer.json();
        assert_eq!(forwarded["contextId"], json!(id.to_string()));
        let again = h
            .json_as(
                Method::POST,
                "/v1/context/pkg-1/forward",
                &coordinator.token,
                json!({"toGroupId": "g2"}),
                &[],
            )
            .await;
        assert_eq!(
            again.status,
            StatusCode::OK,
            "a second forward replays: {again:?}"
        );

        let copy = h.get_json(&reader, "/v1/context/pkg-1").await;
        assert_eq!(
            copy["contextId"],
            json!(id.to_string()),
            "the same signed bytes, the same id"
        );
        assert_eq!(copy["forwardedFrom"], "g1");
        assert_eq!(copy["groupId"], "g2");
        let content = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{artifact}/content"),
                Some(&reader.token),
                Body::empty(),
            )
            .await;
        assert_eq!(
            content.status,
            StatusCode::OK,
            "the cited Artifact came along: {content:?}"
        );
        let view = h
            .get_json(&reader, &format!("/v1/artifacts/{artifact}"))
            .await;
        assert_eq!(
            view["manifests"][0]["manifest"]["groupId"], "g1",
            "its provenance came along: {view}"
        );
        for (agent, group, other) in [(&worker, "g1", "g2"), (&in_g2, "g2", "g1")] {
            let events = h
                .get_json(
                    agent,
                    &format!("/v1/groups/{group}/events?after=0&limit=1000"),
                )
                .await;
            let event = events["events"]
                .as_array()
                .expect("events")
                .iter()
                .find(|e| e["type"] == "context.forwarded")
                .unwrap_or_else(|| panic!("context.forwarded in {group}"));
            assert_eq!(event["payload"]["fromGroupId"], "g1");
            assert_eq!(event["payload"]["toGroupId"], "g2");
            assert_eq!(
                event["sequence"],
                forwarded[if group == "g1" {
                    "fromSequence"
                } else {
                    "toSequence"
                }],
                "{group} names {other}"
            );
        }
        let events = h
            .call(
                Method::GET,
                "/v1/context/pkg-1/events",
                Some(&reader.token),
                Body::empty(),
            )
            .await;
        assert_eq!(
            events.code(),
            "forbidden",
            "CTX-3: g2's Membership does not cover g1's log"
        );
        let report = h.store.fsck().await.expect("fsck");
        assert!(
            report.problems.is_empty(),
            "fsck re-checks context rows: {:?}",
            report.problems
        );
    }
);

backends!(
    /// CTX-7: no forward to a Group the forwarder cannot write (not a member, or not a
    /// coordinator there; an unknown Group answers alike), by a non-coordinator of the source,
    /// or of a package citing confidential content; nothing is appended anywhere.
    async fn ctx7_forwards_without_permission_or_clearance_are_refused(kind: Kind) {
        let h = harness(kind).await;
        let (worker, artifact) = setting(&h).await;
        published(
            &h,
            &worker,
            "g1",
            &package(
                &worker,
                ("g1", "mission-1"),
                "pkg-1",
                1,
                None,
                (1, 2),
                &[artifact],
            ),
        )
        .await;
        let coordinator = h.agent("ctx-coord", "g1", &["coordinator"]).await;
        h.join(&coordinator, "g2", &["worker"]).await;
        h.agent("ctx-g3", "g3", &["worker"]).await;
        let forward = |token: &str, to: &str| {
            json_request(
                Method::POST,
                "/v1/context/pkg-1/forward",
                token,
                json!({"toGroupId": to}),
                &[],
            )
        };
        refused(&h, forward(&coordinator.token, "g3"), "not_a_member").await;
        // A forward is an Agent's act: the operator's token is refused.
        refused(&h, forward(ADMIN, "g2"), "forbidden").await;
        refused(
            &h,
            forward(&coordinator.token, "no-such-group"),
            "not_a_member",
        )
        .await;
        refused(&h, forward(&coordinator.token, "g2"), "forbidden").await;
        h.join(&worker, "g2", &["coordinator"]).await;
        refused(&h, forward(&worker.token, "g2"), "forbidden").await;
        refused(&h, forward(&coordinator.token, "g1"), "bad_request").await;
        refused(
            &h,
            json_request(
                Method::POST,
                "/v1/context/pkg-9/forward",
                &coordinator.token,
                json!({"toGroupId": "g2"}),
                &[],
            ),
            "not_found",
        )
        .await;

        // Confidential content never leaves its Group.
        let digests = h.upload(&worker, b"confidential findings").await;
        let mut manifest = manifest(&worker, "g1", digests, &[]);
        manifest.classification = Classification::Confidential;
        let answer = h.publish(&worker, &sign(&worker.key, &manifest)).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        published(
            &h,
            &worker,
            "g1",
            &package(
                &worker,
                ("g1", "mission-1"),
                "pkg-2",
                1,
                None,
                (1, 2),
                &[digests.blake3],
            ),
        )
        .await;
        let in_g2 = h.join(&coordinator, "g2", &["coordinator"]).await;
        let _ = in_g2;
        let request = json_request(
            Method::POST,
            "/v1/context/pkg-2/forward",
            &coordinator.token,
            json!({"toGroupId": "g2"}),
            &[],
        );
        refused(&h, request, "classification_forbids").await;

        // A forwarded version never joins a chain the target Group published itself: g1's
        // pkg-1 v2 may not land beside g2's own pkg-1 v1.
        let v1 = h.get_json(&worker, "/v1/context/pkg-1").await["contextId"]
            .as_str()
            .expect("contextId")
            .parse::<weft_api::ArtifactId>()
            .expect("digest");
        let v2 = package(
            &worker,
            ("g1", "mission-1"),
            "pkg-1",
            2,
            Some(&v1),
            (1, 2),
            &[artifact],
        );
        published(&h, &worker, "g1", &v2).await;
        let local = h.join(&worker, "g2", &["coordinator"]).await;
        let budget = crate::http::tests::budget::limit(10, 1.0);
        let create = json!({"missionId": "m-g2", "title": "t", "priorityClass": "normal",
                            "budget": budget});
        crate::http::tests::work::ok(&h, &local, "g2", "mission.create", create).await;
        let to = head(&h, "g2").await;
        let own = package(&local, ("g2", "m-g2"), "pkg-1", 1, None, (1, to), &[]);
        published(&h, &local, "g2", &own).await;
        refused(&h, forward(&coordinator.token, "g2"), "conflict").await;
    }
);

backends!(
    /// CTX-8: the scheduling view carries urgency, deadline, budget state, dependencies and
    /// classification, and no content of the WorkItem; another Group's session gets nothing.
    async fn ctx8_the_scheduler_sees_metadata_and_no_content(kind: Kind) {
        let h = harness(kind).await;
        let (worker, _artifact) = setting(&h).await;
        let view = h.get_json(&worker, "/v1/workitems/work-1/scheduling").await;
        for field in [
            "urgency",
            "deadline",
            "budget",
            "dependsOn",
            "classification",
            "priorityClass",
            "state",
            "eligible",
        ] {
            assert!(view.get(field).is_some(), "{field} in {view}");
        }
        assert_eq!(view["classification"], "internal");
        assert!(
            view["budget"]["limit"].is_object() && view["budget"]["spent"].is_object(),
            "{view}"
        );
        let text = view.to_string();
        for content in [
            "objective",
            "contract",
            "acceptanceCriteria",
            "inputs",
            "notes",
            "progress",
            "history",
            "lease",
        ] {
            assert!(
                !text.contains(&format!("\"{content}\"")),
                "no {content} in {view}"
            );
        }
        let typed: weft_api::work::views::SchedulingView =
            serde_json::from_value(view).expect("exactly the api type");
        assert_eq!(typed.work_item_id, "work-1");
        let stranger = h.agent("ctx-stranger", "g2", &["worker"]).await;
        let answer = h
            .call(
                Method::GET,
                "/v1/workitems/work-1/scheduling",
                Some(&stranger.token),
                Body::empty(),
            )
            .await;
        assert_eq!(answer.code(), "unknown_work_item");
    }
);

backends!(
    /// A session ended meanwhile (its Agent deactivated) that another server's cache still
    /// served (here: the `Session` read before, handed to the store as that cache would):
    /// the forward re-checks it under both Groups' locks, answers 401, and appends nothing
    /// (its Membership rows outlive the deactivation, so the role check alone let it commit).
    async fn a_forward_under_a_session_ended_meanwhile_is_refused(kind: Kind) {
        let h = harness(kind).await;
        let (worker, artifact) = setting(&h).await;
        let pkg = package(
            &worker,
            ("g1", "mission-1"),
            "pkg-1",
            1,
            None,
            (1, 2),
            &[artifact],
        );
        published(&h, &worker, "g1", &pkg).await;
        let coordinator = h.agent("ctx-coord", "g1", &["coordinator"]).await;
        h.join(&coordinator, "g2", &["coordinator"]).await;
        let cached = session_ended_after_read(&h, &coordinator).await;
        let before = h.fingerprint().await;
        let request: weft_api::context::ForwardRequest =
            serde_json::from_value(json!({"toGroupId": "g2"})).expect("request");
        let package_id = weft_api::Id::parse("packageId", "pkg-1").expect("id");
        let refused = h
            .store
            .context()
            .forward_context(package_id, request, Some(&cached))
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

/// `agent`'s session as another server's cache holds it, its Agent deactivated since: the
/// cache would still serve it, and the store must refuse it under its locks (also `reuse.rs`).
pub(super) async fn session_ended_after_read(h: &Harness, agent: &Agent) -> weft_storage::Session {
    let cached = h
        .store
        .sessions()
        .authenticate(&agent.token)
        .await
        .expect("live");
    h.store
        .directory()
        .deactivate_agent(agent.id.clone())
        .await
        .expect("deactivated");
    cached
}
