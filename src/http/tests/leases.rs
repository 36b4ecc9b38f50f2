//! Lease expiry, fencing and session revocation (issue #12): an expired Execution Lease
//! appends `lease.expired` and re-queues its WorkItem (LSE-8), an expired ownership or a
//! missed start deadline appends `ownership.expired` and fences the owner so a re-offer wins
//! a higher epoch (OFL-1, SM-6, SM-10), a replacement session revokes its Agent's leases and
//! re-queues the WorkItems (LSE-9, GAP-1), a quoted lease that ended is `stale_lease` (LSE-5),
//! and every Command expires its own WorkItem first, so nothing depends on the timer.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::harness::*;
use super::work::{group, ok};
use super::work_setup::{command_doc, command_request, contract};

/// `executionSeconds`, `ownershipSeconds` and `blockedSeconds` of `contract(&[])`.
const EXECUTION: i64 = 300;
const OWNERSHIP: i64 = 3600;
const BLOCKED: i64 = 3600;

fn basis() -> Value {
    json!({"capabilityMatches": [{"id": "cap.summarize", "version": "1"}], "authorizationEligible": true,
           "availabilityEstimate": "2026-11-30T12:00:00Z", "expectedCost": 1.2,
           "reliabilityEvidence": [], "policyRules": ["least-loaded"]})
}

/// Authorizes `wi` under Mission `m1` and offers it to `candidates`.
async fn offered(h: &Harness, coordinator: &Agent, wi: &str, offer_id: &str, candidates: &[&str]) {
    let path = format!("/v1/workitems/{wi}");
    let known = h
        .call(Method::GET, &path, Some(&coordinator.token), Body::empty())
        .await;
    if known.status != StatusCode::OK {
        ok(
            h,
            coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": wi, "missionId": "m1", "contract": contract(&[])}),
        )
        .await;
    }
    let expires =
        (weft_storage::Clock::now(&h.clock) + chrono::Duration::seconds(600)).to_rfc3339();
    ok(
        h,
        coordinator,
        "g1",
        "work.offer",
        json!({"workItemId": wi, "offerId": offer_id,
        "candidates": candidates, "expiresAt": expires, "selectionBasis": basis()}),
    )
    .await;
}

/// `worker` accepts `offer_id` of `wi`; answers the view.
async fn accepted(h: &Harness, worker: &Agent, wi: &str, offer_id: &str) -> Value {
    ok(
        h,
        worker,
        "g1",
        "work.accept_offer",
        json!({"workItemId": wi, "offerId": offer_id}),
    )
    .await["state"]
        .clone()
}

/// `worker` starts `wi`; answers the Execution Lease id.
async fn started(h: &Harness, worker: &Agent, wi: &str) -> String {
    let answer = ok(h, worker, "g1", "work.start", json!({"workItemId": wi})).await;
    assert_eq!(answer["state"]["state"], "active", "{answer}");
    answer["state"]["lease"]["leaseId"]
        .as_str()
        .expect("an Execution Lease")
        .to_owned()
}

/// A `work.checkpoint` of `wi` by `worker` quoting `lease`.
async fn checkpoint(h: &Harness, worker: &Agent, wi: &str, lease: &str) -> Value {
    let mut doc = command_doc(
        h,
        worker,
        "g1",
        "work.checkpoint",
        json!({"workItemId": wi, "checkpoint": {"note": "half way"}}),
    )
    .await;
    doc["leaseId"] = json!(lease);
    doc
}

fn payload(event: &Value) -> &Value {
    &event["payload"]
}

async fn expire_now(h: &Harness) -> usize {
    h.store
        .work()
        .expire_due(weft_storage::Clock::now(&h.clock))
        .await
        .expect("expire_due")
}

async fn assert_fsck_clean(h: &Harness) {
    let report = h.store.fsck().await.expect("fsck");
    assert!(report.problems.is_empty(), "{report:?}");
}

backends!(
    /// LSE-8 / LSE-5: past `executionSeconds` the timer appends `lease.expired` (the
    /// Authority's, no causation) and re-queues the WorkItem with its owner; the old lease is
    /// then `stale_lease`, and the owner may start again under a new lease. GAP-4: the
    /// duration is the contract's.
    async fn an_expired_execution_lease_requeues_and_goes_stale(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        offered(&h, &coordinator, "wi-1", "o1", &["w1"]).await;
        accepted(&h, &w1, "wi-1", "o1").await;
        let lease = started(&h, &w1, "wi-1").await;
        // A second start while the lease is live: the WorkItem is active.
        let again = command_doc(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-1"})).await;
        refused(&h, command_request(&w1, "g1", &again), "illegal_transition").await;
        // Nothing is due before the lease's expiry.
        h.clock.advance(chrono::Duration::seconds(EXECUTION - 1));
        assert_eq!(expire_now(&h).await, 0);
        h.clock.advance(chrono::Duration::seconds(2));
        assert_eq!(expire_now(&h).await, 1, "one lease.expired");
        assert_eq!(expire_now(&h).await, 0, "appended once");
        let expired = h.events_of(&coordinator, "lease.expired").await;
        assert_eq!(expired.len(), 1, "{expired:?}");
        assert!(expired[0]["causationCommandId"].is_null(), "{expired:?}");
        let event = payload(&expired[0]);
        assert_eq!(event["state"], "queued", "{event}");
        assert_eq!(
            event["owner"], "w1",
            "the ownership outlives the lease: {event}"
        );
        assert_eq!(event["detail"]["leaseId"], json!(lease), "{event}");
        let view = h.get_json(&coordinator, "/v1/workitems/wi-1").await;
        assert_eq!(view["state"], "queued");
        assert!(view["lease"].is_null(), "{view}");
        // LSE-5: the expired lease is stale, whatever state it left behind.
        let late = checkpoint(&h, &w1, "wi-1", &lease).await;
        refused(&h, command_request(&w1, "g1", &late), "stale_lease").await;
        // The owner starts again under a new lease; the old one stays stale.
        let renewed = started(&h, &w1, "wi-1").await;
        assert_ne!(renewed, lease);
        let late = checkpoint(&h, &w1, "wi-1", &lease).await;
        refused(&h, command_request(&w1, "g1", &late), "stale_lease").await;
        // A lease of another WorkItem is stale for this one.
        offered(&h, &coordinator, "wi-2", "o2", &["w1"]).await;
        accepted(&h, &w1, "wi-2", "o2").await;
        let other = started(&h, &w1, "wi-2").await;
        let crossed = checkpoint(&h, &w1, "wi-1", &other).await;
        refused(&h, command_request(&w1, "g1", &crossed), "stale_lease").await;
        let current = checkpoint(&h, &w1, "wi-1", &renewed).await;
        let answer = h.send(command_request(&w1, "g1", &current)).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        assert_fsck_clean(&h).await;
    }
);

backends!(
    /// LSE-2: the ownership grant carries its epoch and its start deadline (`owner.expiresAt`,
    /// `ownershipSeconds` after the acceptance). OFL-1 / SM-6: a missed start deadline, and an
    /// ownership that ran out while the Worker stopped renewing, append `ownership.expired`:
    /// the owner is fenced (no owner, leases ended, the epoch kept), the WorkItem is `open`,
    /// and a re-offer wins epoch 2; the old owner's Commands are then `forbidden` or
    /// `stale_lease`.
    async fn an_expired_ownership_fences_the_owner(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2) = group(&h).await;
        offered(&h, &coordinator, "wi-q", "oq", &["w1"]).await;
        offered(&h, &coordinator, "wi-a", "oa", &["w1"]).await;
        let view = accepted(&h, &w1, "wi-q", "oq").await;
        assert_eq!(view["owner"]["ownershipEpoch"], 1);
        let deadline = view["owner"]["expiresAt"]
            .as_str()
            .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
            .unwrap_or_else(|| panic!("a start deadline: {view}"));
        let expected = weft_storage::Clock::now(&h.clock) + chrono::Duration::seconds(OWNERSHIP);
        assert_eq!(
            deadline.timestamp_micros(),
            expected.timestamp_micros(),
            "{view}"
        );
        accepted(&h, &w1, "wi-a", "oa").await;
        let lease = started(&h, &w1, "wi-a").await;
        // The start deadline of wi-q passes; wi-a's lease expired long before, and its
        // ownership with it.
        h.clock.advance(chrono::Duration::seconds(OWNERSHIP + 1));
        assert_eq!(
            expire_now(&h).await,
            3,
            "lease.expired, then two ownership.expired"
        );
        let fenced = h.events_of(&coordinator, "ownership.expired").await;
        assert_eq!(fenced.len(), 2, "{fenced:?}");
        for event in &fenced {
            let event = payload(event);
            assert_eq!(event["state"], "open", "{event}");
            assert!(event["owner"].is_null(), "{event}");
            assert_eq!(event["ownershipEpoch"], 1, "the epoch stays: {event}");
            assert_eq!(event["detail"]["previousOwner"], "w1", "{event}");
        }
        let expired = h.events_of(&coordinator, "lease.expired").await;
        assert_eq!(payload(&expired[0])["detail"]["leaseId"], json!(lease));
        let view = h.get_json(&coordinator, "/v1/workitems/wi-a").await;
        assert_eq!(view["state"], "open");
        assert!(view["owner"].is_null() && view["lease"].is_null(), "{view}");
        // The Coordinator reassigns with a higher epoch (OFL-1).
        offered(&h, &coordinator, "wi-a", "oa2", &["w2"]).await;
        let view = accepted(&h, &w2, "wi-a", "oa2").await;
        assert_eq!(view["owner"]["agentId"], "w2");
        assert_eq!(view["owner"]["ownershipEpoch"], 2, "{view}");
        // The fenced owner: not the owner any more, and its lease is stale.
        let start = command_doc(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-a"})).await;
        refused(&h, command_request(&w1, "g1", &start), "forbidden").await;
        let late = checkpoint(&h, &w1, "wi-a", &lease).await;
        refused(&h, command_request(&w1, "g1", &late), "stale_lease").await;
        let mut submit = command_doc(
            &h,
            &w1,
            "g1",
            "work.submit",
            json!({"workItemId": "wi-a", "artifacts": [format!("blake3:{}", "0".repeat(64))], "evidence": []}),
        )
        .await;
        submit["leaseId"] = json!(lease);
        refused(&h, command_request(&w1, "g1", &submit), "stale_lease").await;
        started(&h, &w2, "wi-a").await;
        assert_fsck_clean(&h).await;
    }
);

backends!(
    /// PRG-5 / SM-10: a blocked lease that runs out fences the owner but leaves the WorkItem
    /// `blocked`; `work.unblock` (SM-T10, PRG-6: the Coordinator resolves the blocker) then
    /// answers `open`, ready to be offered again.
    async fn an_expired_blocked_lease_leaves_the_work_item_ownerless(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        offered(&h, &coordinator, "wi-b", "ob", &["w1"]).await;
        accepted(&h, &w1, "wi-b", "ob").await;
        let lease = started(&h, &w1, "wi-b").await;
        let mut block = command_doc(
            &h,
            &w1,
            "g1",
            "work.block",
            json!({"workItemId": "wi-b", "needs": "credentials", "checkpoint": {"note": "waiting"}}),
        )
        .await;
        block["leaseId"] = json!(lease);
        let answer = h.send(command_request(&w1, "g1", &block)).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        h.clock.advance(chrono::Duration::seconds(BLOCKED - 1));
        assert_eq!(
            expire_now(&h).await,
            0,
            "the blocked lease keeps the ownership"
        );
        h.clock.advance(chrono::Duration::seconds(2));
        assert_eq!(expire_now(&h).await, 1);
        let fenced = h.events_of(&coordinator, "ownership.expired").await;
        let event = payload(&fenced[0]);
        assert_eq!(event["state"], "blocked", "{event}");
        assert!(event["owner"].is_null(), "{event}");
        let unblocked = ok(
            &h,
            &coordinator,
            "g1",
            "work.unblock",
            json!({"workItemId": "wi-b"}),
        )
        .await;
        assert_eq!(unblocked["state"]["state"], "open", "SM-10: {unblocked}");
        assert_fsck_clean(&h).await;
    }
);

backends!(
    /// LSE-9 / GAP-1: a new session of the owner revokes its Execution Lease in the same
    /// transaction (`lease.revoked`) and returns the WorkItem to `queued`; the old lease is
    /// `stale_lease` for the new session, which starts the WorkItem under a new lease.
    async fn a_new_session_revokes_the_agents_leases(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2) = group(&h).await;
        offered(&h, &coordinator, "wi-1", "o1", &["w1"]).await;
        accepted(&h, &w1, "wi-1", "o1").await;
        let lease = started(&h, &w1, "wi-1").await;
        // Another Agent's new session revokes nothing of w1's.
        let _w2_again = h.session(&w2.key, "w2", "g1").await;
        assert!(h.events_of(&coordinator, "lease.revoked").await.is_empty());
        let token = h.session(&w1.key, "w1", "g1").await;
        let w1 = Agent {
            id: w1.id.clone(),
            key: w1.key.clone(),
            token,
        };
        let revoked = h.events_of(&coordinator, "lease.revoked").await;
        assert_eq!(revoked.len(), 1, "{revoked:?}");
        assert!(revoked[0]["causationCommandId"].is_null());
        let event = payload(&revoked[0]);
        assert_eq!(event["state"], "queued", "GAP-1: {event}");
        assert_eq!(event["owner"], "w1", "{event}");
        assert_eq!(event["detail"]["leaseId"], json!(lease), "{event}");
        let view = h.get_json(&coordinator, "/v1/workitems/wi-1").await;
        assert_eq!(view["state"], "queued");
        assert!(view["lease"].is_null(), "{view}");
        let late = checkpoint(&h, &w1, "wi-1", &lease).await;
        refused(&h, command_request(&w1, "g1", &late), "stale_lease").await;
        let fresh = started(&h, &w1, "wi-1").await;
        assert_ne!(fresh, lease);
        // The revoked lease never expires later: nothing is due at its old expiry.
        h.clock.advance(chrono::Duration::seconds(EXECUTION - 10));
        assert_eq!(expire_now(&h).await, 0);
        assert_fsck_clean(&h).await;
    }
);

backends!(
    /// Expiry is checked on every Command, not only by the timer: with `expire_due` never
    /// called, a refused Command already answers from the expired state (and still changes
    /// nothing), and an accepted one commits the Authority's `lease.expired` before its own
    /// Event, outside its answer.
    async fn every_command_sees_expiry_without_the_timer(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        offered(&h, &coordinator, "wi-1", "o1", &["w1"]).await;
        accepted(&h, &w1, "wi-1", "o1").await;
        let lease = started(&h, &w1, "wi-1").await;
        h.clock.advance(chrono::Duration::seconds(EXECUTION + 1));
        let late = checkpoint(&h, &w1, "wi-1", &lease).await;
        refused(&h, command_request(&w1, "g1", &late), "stale_lease").await;
        assert!(h.events_of(&coordinator, "lease.expired").await.is_empty());
        // The rows still say active; the Command sees queued and starts again.
        let answer = ok(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-1"})).await;
        let kinds: Vec<&Value> = answer["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| &e["type"])
            .collect();
        assert_eq!(kinds, [&json!("work.started")], "{answer}");
        let expired = h.events_of(&coordinator, "lease.expired").await;
        assert_eq!(expired.len(), 1);
        assert!(expired[0]["sequence"].as_u64() < answer["events"][0]["sequence"].as_u64());
        // A missed start deadline, seen by the Coordinator's re-offer.
        let checkpointed = checkpoint(
            &h,
            &w1,
            "wi-1",
            answer["state"]["lease"]["leaseId"].as_str().expect("lease"),
        )
        .await;
        let sent = h.send(command_request(&w1, "g1", &checkpointed)).await;
        assert_eq!(sent.status, StatusCode::CREATED, "{sent:?}");
        // SM-9: T8 released execution: queued, and no Execution Lease is held any more.
        let state = &sent.json()["state"];
        assert_eq!(state["state"], "queued", "{state}");
        assert_ne!(state["lease"]["kind"], "execution", "{state}");
        h.clock.advance(chrono::Duration::seconds(OWNERSHIP + 1));
        offered(&h, &coordinator, "wi-1", "o2", &["w1"]).await;
        let fenced = h.events_of(&coordinator, "ownership.expired").await;
        assert_eq!(fenced.len(), 1, "{fenced:?}");
        assert_eq!(payload(&fenced[0])["detail"]["rule"], "OFL-1");
        assert_eq!(
            accepted(&h, &w1, "wi-1", "o2").await["owner"]["ownershipEpoch"],
            2
        );
        assert_fsck_clean(&h).await;
    }
);
