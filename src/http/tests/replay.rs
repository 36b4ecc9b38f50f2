//! Retries of Commands (DESIGN §10, DLV-11): the same `commandId` with the same bytes replays
//! its answer, also from a session that replaced the one it was sent under (issue #49: an
//! answer lost across a reconnect), and a `commandId` is its Agent's in its Group (issue #40:
//! another Group's or Agent's use of an id is neither an oracle nor a way to pre-claim it).

use axum::http::StatusCode;
use serde_json::json;

use super::harness::*;
use super::progress::{ok_quoting, owned, setup};
use super::work::group;
use super::work_setup::{budget, command_doc, command_request, contract};

backends!(
    /// DLV-11, GAP-1 (issue #49): a Command whose answer was lost when the session was
    /// replaced is sent again, same bytes, under the new session: its stored answer replays
    /// (not `stale_session`), nothing is appended twice; other bytes under its id are still
    /// `idempotency_key_reused`, and a new Command quoting the old epochs `stale_session`.
    async fn dlv_11_an_answer_lost_across_a_reconnect_replays(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, _, _) = group(&h).await;
        let document = command_doc(
            &h,
            &coordinator,
            "g1",
            "mission.create",
            json!({"missionId": "m-lost", "title": "t", "priorityClass": "normal", "budget": budget()}),
        )
        .await;
        let first = h.send(command_request(&coordinator, "g1", &document)).await;
        assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
        let coordinator = Agent {
            id: coordinator.id.clone(),
            key: coordinator.key.clone(),
            token: h.session(&coordinator.key, "c1", "g1").await,
        };
        let before = h.fingerprint().await;
        let again = h.send(command_request(&coordinator, "g1", &document)).await;
        assert_eq!(again.status, StatusCode::CREATED, "{kind:?}: {again:?}");
        let (first, again) = (first.json(), again.json());
        assert_eq!(again, first, "the stored answer, as it was");
        assert_unchanged(&before, &h.fingerprint().await, "a replay");

        let mut other = document.clone();
        other["payload"]["title"] = json!("another title");
        refused(
            &h,
            command_request(&coordinator, "g1", &other),
            "idempotency_key_reused",
        )
        .await;
        let mut stale = document.clone();
        stale["commandId"] = json!("cmd-new-under-old-epochs");
        refused(
            &h,
            command_request(&coordinator, "g1", &stale),
            "stale_session",
        )
        .await;
    }
);

/// `agent`'s `mission.create` of `mission_id` in `group` under the id `cmd-predictable-1`.
async fn predictable(
    h: &Harness,
    agent: &Agent,
    group: &str,
    mission_id: &str,
) -> axum::http::Request<axum::body::Body> {
    let mut document = command_doc(
        h,
        agent,
        group,
        "mission.create",
        json!({"missionId": mission_id, "title": "t", "priorityClass": "normal", "budget": budget()}),
    )
    .await;
    document["commandId"] = json!("cmd-predictable-1");
    command_request(agent, group, &document)
}

backends!(
    /// Issue #40 (`commandId` was one namespace for the whole server): an id used in another
    /// Group, or by another Agent of the same Group, is free for this Agent (accepted, not
    /// `idempotency_key_reused`), so its answer tells nothing about the other's; the same
    /// Agent reusing its own id with other bytes is still refused.
    async fn command_ids_are_each_agents_in_its_group(kind: Kind) {
        let h = harness(kind).await;
        let (c1, _, _) = group(&h).await;
        let c2 = h.agent("c2", "g2", &["coordinator"]).await;
        let c3 = h.agent("c3", "g1", &["coordinator"]).await;
        let request = predictable(&h, &c1, "g1", "m-a").await;
        let answer = h.send(request).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        let request = predictable(&h, &c2, "g2", "m-b").await;
        let answer = h.send(request).await;
        assert_eq!(
            answer.status,
            StatusCode::CREATED,
            "{kind:?}: another Group's id: {answer:?}"
        );
        assert_eq!(answer.json()["state"]["missionId"], "m-b", "not a replay");
        let request = predictable(&h, &c3, "g1", "m-c").await;
        let answer = h.send(request).await;
        assert_eq!(
            answer.status,
            StatusCode::CREATED,
            "{kind:?}: another Agent's id: {answer:?}"
        );
        let request = predictable(&h, &c1, "g1", "m-d").await;
        refused(&h, request, "idempotency_key_reused").await;
    }
);

backends!(
    /// Issue #44: a Command's kept answer names its aggregate instead of holding its view, so a
    /// retry after the WorkItem moved on answers the same `commandId` and Events with the view
    /// as it is now (changing nothing); a retry by a member whose Membership no longer covers
    /// the WorkItem's Mission answers as an unknown WorkItem does (CTX-5), never its state.
    async fn a_replay_answers_the_aggregate_as_it_is_now_to_whoever_may_see_it(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, worker, _) = setup(&h).await;
        owned(&h, &coordinator, &worker, "wi-1", contract(&[])).await;
        let document = command_doc(
            &h,
            &worker,
            "g1",
            "work.start",
            json!({"workItemId": "wi-1"}),
        )
        .await;
        let first = h.send(command_request(&worker, "g1", &document)).await;
        assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
        let first = first.json();
        let lease = first["state"]["lease"]["leaseId"]
            .as_str()
            .expect("an Execution Lease")
            .to_owned();
        let renew = json!({"workItemId": "wi-1"});
        ok_quoting(&h, &worker, "lease.renew", renew, &lease).await;

        let before = h.fingerprint().await;
        let again = h.send(command_request(&worker, "g1", &document)).await;
        assert_eq!(again.status, StatusCode::CREATED, "{kind:?}: {again:?}");
        let again = again.json();
        assert_eq!(again["commandId"], first["commandId"]);
        assert_eq!(
            again["events"], first["events"],
            "{kind:?}: the same Events"
        );
        let revision = first["state"]["revision"].as_u64().expect("revision");
        assert_eq!(
            again["state"]["revision"],
            json!(revision + 1),
            "{kind:?}: the view as it is now, after the renewal"
        );
        assert_unchanged(&before, &h.fingerprint().await, "a replay");

        // The worker's Membership narrowed to another Mission, and a new session under it.
        let answer = h
            .admin_json(
                axum::http::Method::PUT,
                "/v1/admin/groups/g1/members/w1",
                json!({"roles": ["worker"], "missions": ["mission-elsewhere"]}),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        let narrowed = Agent {
            token: h.session(&worker.key, "w1", "g1").await,
            ..worker
        };
        let before = h.fingerprint().await;
        refused(
            &h,
            command_request(&narrowed, "g1", &document),
            "unknown_work_item",
        )
        .await;
        assert_unchanged(&before, &h.fingerprint().await, "a refused replay");
    }
);
