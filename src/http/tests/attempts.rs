//! Attempts and ownership while an owner executes (issue #49): the ownership lasts as long as
//! the live Execution Lease it runs under (LSE-1, LSE-11, SM-6), a resume is not a retry
//! (PRG-8, LSE-12), and the retry policy bounds the attempts that follow a failure (PRG-8,
//! PRG-9, PRG-10). Every refusal goes through `refused`: its exact code and nothing changed.

use chrono::Duration;
use serde_json::{Value, json};

use super::harness::*;
use super::progress::{
    MISSION, checkpoint, instant, now, ok_quoting, owned, refused_quoting, setup, start, with_retry,
};
use super::work::{evidence_for, offer, ok};
use super::work_setup::{command_doc, command_request, contract};

/// `wi`'s view as `agent` reads it.
async fn view(h: &Harness, agent: &Agent, wi: &str) -> Value {
    h.get_json(agent, &format!("/v1/workitems/{wi}")).await
}

/// The coordinator offers `wi` again to `owner`, who accepts (after a failure, T3/T4).
async fn reoffered(h: &Harness, coordinator: &Agent, owner: &Agent, wi: &str, offer_id: &str) {
    ok(
        h,
        coordinator,
        "g1",
        "work.offer",
        offer(wi, offer_id, &[owner.id.as_str()], h, 600),
    )
    .await;
    ok(
        h,
        owner,
        "g1",
        "work.accept_offer",
        json!({"workItemId": wi, "offerId": offer_id}),
    )
    .await;
}

/// The owner fails `wi` under `lease`, citing Evidence (T13).
async fn owner_fails(h: &Harness, owner: &Agent, wi: &str, lease: &str, evidence: &str) {
    ok_quoting(
        h,
        owner,
        "work.fail",
        json!({"workItemId": wi, "evidence": [evidence], "reason": "worker_error"}),
        lease,
    )
    .await;
}

backends!(
    /// LSE-1, LSE-3, LSE-11, SM-6 (issue #49): an owner that starts late in its start window
    /// keeps its ownership for as long as its Execution Lease lives: past the deadline set at
    /// acceptance it still renews, reports progress and checkpoints, and a Coordinator's
    /// `work.offer` cannot fence it mid-execution (`illegal_transition`: a live owner).
    async fn lse_1_a_late_start_keeps_ownership_while_its_lease_lives(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = setup(&h).await;
        let mut short = contract(&[]);
        short["leases"]["ownershipSeconds"] = json!(100);
        short["leases"]["executionSeconds"] = json!(300);
        owned(&h, &coordinator, &w1, "wi-late", short).await;
        h.clock.advance(Duration::seconds(90));
        let lease = start(&h, &w1, "wi-late").await;
        let started = view(&h, &w1, "wi-late").await;
        assert!(
            instant(&started["owner"]["expiresAt"]) >= instant(&started["lease"]["expiresAt"]),
            "LSE-1: the ownership covers the lease: {started}"
        );
        // Past the acceptance's deadline (100 s), well inside the lease (300 s).
        h.clock.advance(Duration::seconds(60));
        let offer_doc = command_doc(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-late", "o-2", &["w1"], &h, 600),
        )
        .await;
        refused(
            &h,
            command_request(&coordinator, "g1", &offer_doc),
            "illegal_transition",
        )
        .await;
        let renewed = ok_quoting(
            &h,
            &w1,
            "lease.renew",
            json!({"workItemId": "wi-late"}),
            &lease,
        )
        .await;
        assert_eq!(renewed["state"]["state"], "active", "{kind:?}");
        assert!(
            instant(&renewed["state"]["owner"]["expiresAt"])
                >= instant(&renewed["state"]["lease"]["expiresAt"]),
            "LSE-1: a renewal extends both: {renewed}"
        );
        h.clock.advance(Duration::seconds(250));
        let report = json!({"workItemId": "wi-late", "phase": "drafting", "milestonesDone": [],
            "nextCheckpoint": null, "blockers": [], "estimate": {"completionAt": null, "confidence": 0.5},
            "evidence": []});
        ok_quoting(&h, &w1, "work.progress", report, &lease).await;
        let paused = ok_quoting(&h, &w1, "work.checkpoint", checkpoint("wi-late"), &lease).await;
        assert_eq!(paused["state"]["state"], "queued", "{kind:?}");
        assert_eq!(paused["state"]["owner"]["agentId"], "w1", "{paused}");
        let report = h.store.fsck().await.expect("fsck");
        assert!(report.problems.is_empty(), "{kind:?}: {report:?}");
    }
);

backends!(
    /// PRG-8, LSE-12, PRG-9 (issue #49): a resume is not a retry. With `maxAttempts` 1 and a
    /// retry deadline already past, the owner resumes after a checkpoint (T8), after a
    /// preemption (LSE-12 step 5), after an unblock (SM-T10; PRG-7: back to its queue) and
    /// after its session was replaced
    /// (GAP-1): one attempt throughout, under one attempt key. Only the start after a
    /// failure is a retry, and that one is refused `budget_exceeded`.
    async fn prg_8_resumes_are_not_retries(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = setup(&h).await;
        let deadline = (now(&h) + Duration::seconds(10)).to_rfc3339();
        let policy =
            json!({"maxAttempts": 1, "backoffSeconds": 0, "deadline": deadline, "maxCost": 1.0});
        owned(&h, &coordinator, &w1, "wi-r", with_retry(policy)).await;
        let lease = start(&h, &w1, "wi-r").await;
        let first = view(&h, &w1, "wi-r").await;
        assert_eq!(first["attempts"], 1);
        let key = first["attemptKey"].clone();
        h.clock.advance(Duration::seconds(60));

        // T8: checkpoint, then resume past the retry deadline.
        ok_quoting(&h, &w1, "work.checkpoint", checkpoint("wi-r"), &lease).await;
        let lease = start(&h, &w1, "wi-r").await;
        // LSE-12: a preemption ends in a checkpoint; the resume is the same attempt.
        ok(
            &h,
            &coordinator,
            "g1",
            "preemption.request",
            json!({"workItemId": "wi-r"}),
        )
        .await;
        ok_quoting(&h, &w1, "work.checkpoint", checkpoint("wi-r"), &lease).await;
        let lease = start(&h, &w1, "wi-r").await;
        // T10: blocked, unblocked, resumed.
        ok_quoting(
            &h,
            &w1,
            "work.block",
            json!({"workItemId": "wi-r", "needs": "corpus access", "checkpoint": {"note": "read half"}}),
            &lease,
        )
        .await;
        let unblocked = ok(
            &h,
            &coordinator,
            "g1",
            "work.unblock",
            json!({"workItemId": "wi-r"}),
        )
        .await;
        assert_eq!(unblocked["state"]["state"], "queued", "PRG-7: {unblocked}");
        start(&h, &w1, "wi-r").await;
        // GAP-1: a replaced session revokes the lease; the new session resumes.
        let w1 = Agent {
            id: w1.id.clone(),
            key: w1.key.clone(),
            token: h.session(&w1.key, "w1", "g1").await,
        };
        let lease = start(&h, &w1, "wi-r").await;
        let resumed = view(&h, &w1, "wi-r").await;
        assert_eq!(resumed["attempts"], 1, "{kind:?}: {resumed}");
        assert_eq!(resumed["attemptKey"], key, "PRG-9: one attempt, one key");
        let starts = h.events_of(&coordinator, "work.started").await;
        assert_eq!(starts.len(), 5, "{starts:?}");
        assert!(
            starts[1..]
                .iter()
                .all(|e| e["payload"]["detail"]["resumed"] == json!(true)),
            "{starts:?}"
        );

        // A failure, then a start: a retry, past the deadline and over the bound.
        let (_, evidence) = evidence_for(&h, &w1, "wi-r").await;
        owner_fails(&h, &w1, "wi-r", &lease, &evidence).await;
        reoffered(&h, &coordinator, &w1, "wi-r", "o-r2").await;
        let again = command_doc(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-r"})).await;
        refused(&h, command_request(&w1, "g1", &again), "budget_exceeded").await;
    }
);

backends!(
    /// PRG-8: `retryPolicy.maxAttempts` bounds the attempts after failures
    /// (`budget_exceeded`); PRG-10: the Coordinator then ends it with `work.failed`, reason
    /// `retries_exhausted`, with Evidence; PRG-9: each attempt has a key derived from the
    /// DLV-11 operation key.
    async fn attempts_are_bounded_by_the_retry_policy(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = setup(&h).await;
        let policy =
            json!({"maxAttempts": 1, "backoffSeconds": 0, "deadline": null, "maxCost": 1.0});
        owned(&h, &coordinator, &w1, "wi-a", with_retry(policy)).await;
        let lease = start(&h, &w1, "wi-a").await;
        let started = view(&h, &w1, "wi-a").await;
        assert_eq!(started["attempts"], 1);
        let mission = weft_api::Id::parse("m", MISSION).expect("id");
        let work_item = weft_api::Id::parse("w", "wi-a").expect("id");
        let key = weft_api::idempotency::operation_key(&mission, &work_item, 1, "attempt-1");
        assert_eq!(started["attemptKey"], key.as_str(), "PRG-9");
        let (_, evidence) = evidence_for(&h, &w1, "wi-a").await;
        owner_fails(&h, &w1, "wi-a", &lease, &evidence).await;
        reoffered(&h, &coordinator, &w1, "wi-a", "o-a2").await;

        let again = command_doc(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-a"})).await;
        let answer = refused(&h, command_request(&w1, "g1", &again), "budget_exceeded").await;
        assert!(
            answer.json()["detail"]
                .as_str()
                .is_some_and(|d| d.contains("PRG-8")),
            "{answer:?}"
        );
        let failed = ok(
            &h,
            &coordinator,
            "g1",
            "work.fail",
            json!({"workItemId": "wi-a", "evidence": [evidence], "reason": "retries_exhausted"}),
        )
        .await;
        assert_eq!(failed["state"]["state"], "failed", "PRG-10");
        assert_eq!(failed["state"]["attempts"], 1, "{kind:?}");
    }
);

backends!(
    /// PRG-8: after a failure the next attempt waits `backoffSeconds` (`not_eligible`, then
    /// accepted), and no retry starts past `retryPolicy.deadline` (`budget_exceeded`);
    /// PRG-9: the new attempt, under a new ownership epoch, has a new key.
    async fn backoff_and_deadline_bound_retries(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = setup(&h).await;
        let deadline = (now(&h) + Duration::seconds(600)).to_rfc3339();
        let policy =
            json!({"maxAttempts": 5, "backoffSeconds": 30, "deadline": deadline, "maxCost": 1.0});
        owned(&h, &coordinator, &w1, "wi-b", with_retry(policy)).await;
        let first = start(&h, &w1, "wi-b").await;
        let first_key = view(&h, &w1, "wi-b").await["attemptKey"].clone();
        let (_, evidence) = evidence_for(&h, &w1, "wi-b").await;
        owner_fails(&h, &w1, "wi-b", &first, &evidence).await;
        reoffered(&h, &coordinator, &w1, "wi-b", "o-b2").await;
        h.clock.advance(Duration::seconds(29));
        let early = command_doc(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-b"})).await;
        refused(&h, command_request(&w1, "g1", &early), "not_eligible").await;
        h.clock.advance(Duration::seconds(1));
        let second = start(&h, &w1, "wi-b").await;
        assert_ne!(first, second);
        let retried = view(&h, &w1, "wi-b").await;
        assert_eq!(retried["attempts"], 2);
        assert_eq!(retried["owner"]["ownershipEpoch"], 2);
        assert_ne!(
            retried["attemptKey"], first_key,
            "PRG-9: one key per attempt"
        );
        owner_fails(&h, &w1, "wi-b", &second, &evidence).await;
        reoffered(&h, &coordinator, &w1, "wi-b", "o-b3").await;
        h.clock.advance(Duration::seconds(600));
        let late = command_doc(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-b"})).await;
        refused(&h, command_request(&w1, "g1", &late), "budget_exceeded").await;
        let report = h.store.fsck().await.expect("fsck");
        assert!(report.problems.is_empty(), "{kind:?}: {report:?}");
    }
);

backends!(
    /// PRG-8: the cost bound: once the WorkItem's financial spend reaches
    /// `retryPolicy.maxCost`, no retry starts after a failure (`budget_exceeded`), whatever
    /// the attempts left; the owner's own resume is not a retry and is not bound by it.
    async fn spend_bounds_retries(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = setup(&h).await;
        let policy =
            json!({"maxAttempts": 5, "backoffSeconds": 0, "deadline": null, "maxCost": 0.5});
        owned(&h, &coordinator, &w1, "wi-c", with_retry(policy)).await;
        let lease = start(&h, &w1, "wi-c").await;
        let mut paused = checkpoint("wi-c");
        paused["usage"] = json!({"financial": 0.5, "tokens": 0, "toolCalls": 0,
                                 "computeSeconds": 0, "wallClockSeconds": 0, "sideEffects": 0});
        ok_quoting(&h, &w1, "work.checkpoint", paused, &lease).await;
        let lease = start(&h, &w1, "wi-c").await;
        let (_, evidence) = evidence_for(&h, &w1, "wi-c").await;
        owner_fails(&h, &w1, "wi-c", &lease, &evidence).await;
        reoffered(&h, &coordinator, &w1, "wi-c", "o-c2").await;
        let again = command_doc(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-c"})).await;
        let answer = refused(&h, command_request(&w1, "g1", &again), "budget_exceeded").await;
        assert!(
            answer.json()["detail"]
                .as_str()
                .is_some_and(|d| d.contains("maxCost")),
            "{answer:?}"
        );
        // A quoted lease that ended stays stale for the fenced attempt (LSE-5).
        refused_quoting(
            &h,
            &w1,
            "lease.renew",
            json!({"workItemId": "wi-c"}),
            Some(&lease),
            "stale_lease",
        )
        .await;
    }
);

backends!(
    /// SM-T9, PRG-4 (issue #49): `work.block` is a checkpoint plus a bounded blocked lease: it
    /// carries its checkpoint, recorded in `work.blocked`; one without a checkpoint is
    /// `invalid_command`, nothing changed.
    async fn t9_a_block_carries_its_checkpoint(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = setup(&h).await;
        owned(&h, &coordinator, &w1, "wi-k", contract(&[])).await;
        let lease = start(&h, &w1, "wi-k").await;
        refused_quoting(
            &h,
            &w1,
            "work.block",
            json!({"workItemId": "wi-k", "needs": "corpus access"}),
            Some(&lease),
            "invalid_command",
        )
        .await;
        let blocked = ok_quoting(
            &h,
            &w1,
            "work.block",
            json!({"workItemId": "wi-k", "needs": "corpus access", "checkpoint": {"note": "chapter 2 drafted"}}),
            &lease,
        )
        .await;
        assert_eq!(blocked["state"]["state"], "blocked", "{kind:?}");
        let events = h.events_of(&coordinator, "work.blocked").await;
        assert_eq!(
            events[0]["payload"]["detail"]["checkpoint"]["note"], "chapter 2 drafted",
            "{events:?}"
        );
    }
);

backends!(
    /// PRG-8, PRG-9 (issue #49 review): a start under a new ownership epoch is a new attempt.
    /// A Worker whose lease and ownership ran out (fenced, SM-6) and that is offered the
    /// WorkItem again starts a retry, bounded by `maxAttempts` like one after a failure, so a
    /// crash-looping Worker is not restarted forever.
    async fn prg_8_a_start_after_fencing_is_a_retry(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = setup(&h).await;
        let mut contract = with_retry(
            json!({"maxAttempts": 1, "backoffSeconds": 0, "deadline": null, "maxCost": 1.0}),
        );
        contract["leases"]["ownershipSeconds"] = json!(100);
        contract["leases"]["executionSeconds"] = json!(50);
        owned(&h, &coordinator, &w1, "wi-f", contract).await;
        start(&h, &w1, "wi-f").await;
        h.clock.advance(Duration::seconds(101));
        h.store
            .work()
            .expire_due(weft_storage::Clock::now(&h.clock))
            .await
            .expect("expire_due");
        let fenced = view(&h, &coordinator, "wi-f").await;
        assert_eq!(fenced["state"], "open", "{kind:?}: {fenced}");
        reoffered(&h, &coordinator, &w1, "wi-f", "o-f2").await;
        let again = command_doc(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-f"})).await;
        refused(&h, command_request(&w1, "g1", &again), "budget_exceeded").await;
    }
);
