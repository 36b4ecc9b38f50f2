//! Budgets (issue #13, CON-1.7, OFL-12, DESIGN §12): usage deltas on `work.progress`,
//! `work.checkpoint` and `work.submit` are charged to the WorkItem, its Mission and every
//! enclosing parent WorkItem and Mission in the Command's transaction; the reads show limit
//! and spend per dimension; exactly up to a limit is allowed; a delta overflowing any budget
//! on the lineage is `budget_exceeded` whole, and a negative or non-finite one
//! `invalid_command`, each through `refused` (exact code, nothing changed). The helpers here
//! are shared with `offline.rs`.

use serde_json::{Value, json};

use super::harness::*;
use super::work::{evidence_for, group, offer, ok};
use super::work_setup::{command_doc, command_request, contract};

/// The Mission the Evidence helpers publish under.
pub(super) const MISSION: &str = "mission-1";

/// A usage delta: `tokens` and `financial`, the other four dimensions zero.
pub(super) fn usage(tokens: u64, financial: f64) -> Value {
    json!({"financial": financial, "tokens": tokens, "toolCalls": 0, "computeSeconds": 0,
           "wallClockSeconds": 0, "sideEffects": 0})
}

/// A budget roomy in every dimension but `tokens` (and `financial`).
pub(super) fn limit(tokens: u64, financial: f64) -> Value {
    json!({"financial": financial, "tokens": tokens, "toolCalls": 1000, "computeSeconds": 100_000,
           "wallClockSeconds": 100_000, "sideEffects": 100})
}

/// Mission `mission_id` with `budget`; under `parent` WorkItem if given, as its child Mission
/// (`mission.create_child`, SM-11: its budget is then the parent's contract budgets, and the
/// parent is blocked while it runs).
pub(super) async fn mission_with(
    h: &Harness,
    coordinator: &Agent,
    mission_id: &str,
    budget: Value,
    parent: Option<&str>,
) {
    if let Some(parent) = parent {
        let payload = json!({"workItemId": parent, "childMissionId": mission_id, "title": "t",
                             "childFailurePolicy": "block"});
        ok(h, coordinator, "g1", "mission.create_child", payload).await;
        return;
    }
    let payload = json!({"missionId": mission_id, "title": "t", "priorityClass": "normal",
                         "budget": budget});
    ok(h, coordinator, "g1", "mission.create", payload).await;
}

/// WorkItem `wi` of `mission_id` with contract budget `budget`, owned by `owner` and started;
/// answers the Execution Lease.
pub(super) async fn started(
    h: &Harness,
    coordinator: &Agent,
    owner: &Agent,
    mission_id: &str,
    wi: &str,
    budget: Value,
) -> String {
    let mut contract = contract(&[]);
    contract["budgets"] = budget;
    started_under(h, coordinator, owner, mission_id, wi, contract).await
}

/// WorkItem `wi` of `mission_id` under `contract`, owned by `owner` and started; answers the
/// Execution Lease.
pub(super) async fn started_under(
    h: &Harness,
    coordinator: &Agent,
    owner: &Agent,
    mission_id: &str,
    wi: &str,
    contract: Value,
) -> String {
    ok(
        h,
        coordinator,
        "g1",
        "work.authorize",
        json!({"workItemId": wi, "missionId": mission_id, "contract": contract}),
    )
    .await;
    let offer_id = format!("o-{wi}");
    ok(
        h,
        coordinator,
        "g1",
        "work.offer",
        offer(wi, &offer_id, &[owner.id.as_str()], h, 600),
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
    let started = ok(h, owner, "g1", "work.start", json!({"workItemId": wi})).await;
    started["state"]["lease"]["leaseId"]
        .as_str()
        .expect("an Execution Lease")
        .to_owned()
}

/// A `work.progress` payload for `wi` reporting `usage`.
pub(super) fn progress(wi: &str, usage: Value) -> Value {
    json!({"workItemId": wi, "phase": "summarising", "milestonesDone": [], "nextCheckpoint": null,
           "blockers": [], "estimate": {"completionAt": null, "confidence": 0.5},
           "evidence": [], "usage": usage})
}

/// `agent`'s Command `kind` quoting `lease`, as a document to sign.
pub(super) async fn quoting(
    h: &Harness,
    agent: &Agent,
    kind: &str,
    payload: Value,
    lease: &str,
) -> Value {
    let mut document = command_doc(h, agent, "g1", kind, payload).await;
    document["leaseId"] = json!(lease);
    document
}

/// Sends `document` as `agent` and expects 201; answers the body.
pub(super) async fn accepted(h: &Harness, agent: &Agent, document: &Value) -> Value {
    let answer = h.send(command_request(agent, "g1", document)).await;
    assert_eq!(
        answer.status,
        axum::http::StatusCode::CREATED,
        "{}: {answer:?}",
        document["type"]
    );
    answer.json()
}

/// fsck finds nothing: every `spent` agrees with the fold of the log (each WorkItem's usage
/// on every budget of its lineage).
pub(super) async fn assert_fsck_clean(h: &Harness) {
    let report = h.store.fsck().await.expect("fsck");
    assert!(report.problems.is_empty(), "{report:?}");
}

/// The `budget` of a WorkItem or Mission read back: (limit, spent).
pub(super) async fn budget_of(h: &Harness, reader: &Agent, uri: &str) -> (Value, Value) {
    let view = h.get_json(reader, uri).await;
    (
        view["budget"]["limit"].clone(),
        view["budget"]["spent"].clone(),
    )
}

backends!(
    /// DESIGN §12, OFL-11 step 2: `usage` on `work.progress`, `work.checkpoint` and
    /// `work.submit` is charged to the WorkItem and its Mission, and the reads show limit and
    /// spend per dimension.
    async fn usage_is_charged_to_the_lineage_and_read_back(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        mission_with(&h, &coordinator, MISSION, limit(1000, 50.0), None).await;
        let lease = started(&h, &coordinator, &w1, MISSION, "wi-b", limit(500, 10.0)).await;
        let (limit_read, spent) = budget_of(&h, &w1, "/v1/workitems/wi-b").await;
        assert_eq!(limit_read, limit(500, 10.0));
        assert_eq!(spent, usage(0, 0.0), "nothing spent yet");
        let mut delta = usage(100, 1.25);
        delta["toolCalls"] = json!(3);
        delta["sideEffects"] = json!(1);
        let report = quoting(&h, &w1, "work.progress", progress("wi-b", delta), &lease).await;
        accepted(&h, &w1, &report).await;
        let (_, spent) = budget_of(&h, &w1, "/v1/workitems/wi-b").await;
        assert_eq!(spent["tokens"], 100);
        assert_eq!(spent["toolCalls"], 3);
        assert_eq!(spent["sideEffects"], 1);
        assert_eq!(spent["financial"], 1.25);
        let (mission_limit, mission_spent) =
            budget_of(&h, &w1, &format!("/v1/missions/{MISSION}")).await;
        assert_eq!(mission_limit, limit(1000, 50.0));
        assert_eq!(
            mission_spent, spent,
            "the Mission is charged the same delta"
        );

        // Submission charges too (after Evidence under the same lease).
        let (artifact, evidence) = evidence_for(&h, &w1, "wi-b").await;
        let submit = quoting(
            &h,
            &w1,
            "work.submit",
            json!({"workItemId": "wi-b", "artifacts": [artifact], "evidence": [evidence],
                   "usage": usage(50, 0.75)}),
            &lease,
        )
        .await;
        accepted(&h, &w1, &submit).await;
        let (_, spent) = budget_of(&h, &w1, "/v1/workitems/wi-b").await;
        assert_eq!(spent["tokens"], 150);
        assert_eq!(spent["financial"], 2.0);
        let (_, mission_spent) = budget_of(&h, &w1, &format!("/v1/missions/{MISSION}")).await;
        assert_eq!(mission_spent["tokens"], 150);
        assert_fsck_clean(&h).await;
    }
);

backends!(
    /// DESIGN §12: a checkpoint's `usage` is charged as it releases the lease.
    async fn a_checkpoint_charges_its_usage(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        mission_with(&h, &coordinator, MISSION, limit(1000, 50.0), None).await;
        let lease = started(&h, &coordinator, &w1, MISSION, "wi-c", limit(500, 10.0)).await;
        let checkpoint = quoting(
            &h,
            &w1,
            "work.checkpoint",
            json!({"workItemId": "wi-c", "checkpoint": {"note": "safe"}, "usage": usage(7, 0.5)}),
            &lease,
        )
        .await;
        let answer = accepted(&h, &w1, &checkpoint).await;
        assert_eq!(answer["state"]["state"], "queued");
        assert_eq!(answer["state"]["budget"]["spent"], usage(7, 0.5));
    }
);

backends!(
    /// OFL-12 / DESIGN §12: spending exactly up to the WorkItem's limit is allowed; one more
    /// token overflows it: `budget_exceeded`, no Event, no spend, no state change.
    async fn exactly_the_limit_fits_one_more_is_refused_whole(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        mission_with(&h, &coordinator, MISSION, limit(1000, 50.0), None).await;
        let lease = started(&h, &coordinator, &w1, MISSION, "wi-x", limit(100, 1.0)).await;
        let first = quoting(
            &h,
            &w1,
            "work.progress",
            progress("wi-x", usage(60, 0.4)),
            &lease,
        )
        .await;
        accepted(&h, &w1, &first).await;
        let exact = quoting(
            &h,
            &w1,
            "work.progress",
            progress("wi-x", usage(40, 0.6)),
            &lease,
        )
        .await;
        accepted(&h, &w1, &exact).await;
        let (_, spent) = budget_of(&h, &w1, "/v1/workitems/wi-x").await;
        assert_eq!(
            spent,
            usage(100, 1.0),
            "exactly at the limit in two dimensions"
        );
        let over = quoting(
            &h,
            &w1,
            "work.progress",
            progress("wi-x", usage(1, 0.0)),
            &lease,
        )
        .await;
        let answer = refused(&h, command_request(&w1, "g1", &over), "budget_exceeded").await;
        assert!(
            answer.json()["detail"]
                .as_str()
                .is_some_and(|d| d.contains("tokens") && d.contains("WorkItem wi-x")),
            "{answer:?}"
        );
        let over = quoting(
            &h,
            &w1,
            "work.progress",
            progress("wi-x", usage(0, 0.01)),
            &lease,
        )
        .await;
        refused(&h, command_request(&w1, "g1", &over), "budget_exceeded").await;
        // A checkpoint carrying an overflowing delta is refused whole too: the WorkItem stays
        // active, its lease unreleased (OFL-12: no state change).
        let checkpoint = quoting(
            &h,
            &w1,
            "work.checkpoint",
            json!({"workItemId": "wi-x", "checkpoint": {}, "usage": usage(1, 0.0)}),
            &lease,
        )
        .await;
        refused(
            &h,
            command_request(&w1, "g1", &checkpoint),
            "budget_exceeded",
        )
        .await;
        let view = h.get_json(&w1, "/v1/workitems/wi-x").await;
        assert_eq!(view["state"], "active");
    }
);

backends!(
    /// The case: a delta that overflows the Mission's budget but not the WorkItem's is
    /// `budget_exceeded` (the Mission is named), and neither budget moves.
    async fn mission_overflow_but_not_work_item_is_refused(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2) = group(&h).await;
        mission_with(&h, &coordinator, MISSION, limit(100, 50.0), None).await;
        // Two WorkItems whose budgets add up to more than the Mission's (allowed: the limit is
        // enforced on spend).
        let first = started(&h, &coordinator, &w1, MISSION, "wi-1", limit(80, 10.0)).await;
        let second = started(&h, &coordinator, &w2, MISSION, "wi-2", limit(80, 10.0)).await;
        let spend = quoting(
            &h,
            &w1,
            "work.progress",
            progress("wi-1", usage(70, 0.0)),
            &first,
        )
        .await;
        accepted(&h, &w1, &spend).await;
        let over = quoting(
            &h,
            &w2,
            "work.progress",
            progress("wi-2", usage(31, 0.0)),
            &second,
        )
        .await;
        let answer = refused(&h, command_request(&w2, "g1", &over), "budget_exceeded").await;
        assert!(
            answer.json()["detail"]
                .as_str()
                .is_some_and(|d| d.contains(&format!("Mission {MISSION}"))),
            "{answer:?}"
        );
        let (_, spent) = budget_of(&h, &w2, "/v1/workitems/wi-2").await;
        assert_eq!(spent["tokens"], 0, "the WorkItem's budget did not move");
        let fits = quoting(
            &h,
            &w2,
            "work.progress",
            progress("wi-2", usage(30, 0.0)),
            &second,
        )
        .await;
        accepted(&h, &w2, &fits).await;
        let (_, mission_spent) = budget_of(&h, &w2, &format!("/v1/missions/{MISSION}")).await;
        assert_eq!(mission_spent["tokens"], 100);
    }
);

backends!(
    /// Nesting WorkItem ⊂ Mission ⊂ parent Mission: a child Mission's WorkItem charges the
    /// parent WorkItem and the parent Mission too, and overflowing the parent Mission alone is
    /// `budget_exceeded`.
    async fn parent_mission_overflow_is_refused(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        mission_with(&h, &coordinator, "m-parent", limit(100, 50.0), None).await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-parent", "missionId": "m-parent", "contract": contract(&[])}),
        )
        .await;
        mission_with(
            &h,
            &coordinator,
            MISSION,
            limit(1000, 50.0),
            Some("wi-parent"),
        )
        .await;
        let lease = started(
            &h,
            &coordinator,
            &w1,
            MISSION,
            "wi-child",
            limit(1000, 10.0),
        )
        .await;
        let spend = quoting(
            &h,
            &w1,
            "work.progress",
            progress("wi-child", usage(90, 1.0)),
            &lease,
        )
        .await;
        accepted(&h, &w1, &spend).await;
        for uri in [
            "/v1/workitems/wi-child",
            "/v1/missions/mission-1",
            "/v1/workitems/wi-parent",
            "/v1/missions/m-parent",
        ] {
            let (_, spent) = budget_of(&h, &w1, uri).await;
            assert_eq!(spent["tokens"], 90, "{uri} is on the lineage");
        }
        let over = quoting(
            &h,
            &w1,
            "work.progress",
            progress("wi-child", usage(11, 0.0)),
            &lease,
        )
        .await;
        let answer = refused(&h, command_request(&w1, "g1", &over), "budget_exceeded").await;
        assert!(
            answer.json()["detail"]
                .as_str()
                .is_some_and(|d| d.contains("Mission m-parent")),
            "{answer:?}"
        );
        let exact = quoting(
            &h,
            &w1,
            "work.progress",
            progress("wi-child", usage(10, 0.0)),
            &lease,
        )
        .await;
        accepted(&h, &w1, &exact).await;
        assert_fsck_clean(&h).await;
    }
);

backends!(
    /// OFL-12: a negative or non-finite delta is `invalid_command` (the whole-unit dimensions
    /// are unsigned; `financial` must be finite and non-negative); nothing is charged.
    async fn negative_or_non_finite_usage_is_invalid(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        mission_with(&h, &coordinator, MISSION, limit(1000, 50.0), None).await;
        let lease = started(&h, &coordinator, &w1, MISSION, "wi-n", limit(100, 1.0)).await;
        let mut negative_tokens = usage(0, 0.0);
        negative_tokens["tokens"] = json!(-1);
        let mut huge = usage(0, 0.0);
        huge["financial"] = json!(1e308);
        for (why, delta) in [
            ("negative tokens", negative_tokens),
            ("negative financial", usage(0, -0.5)),
            (
                "fractional tokens",
                json!({"financial": 0.0, "tokens": 1.5, "toolCalls": 0,
                "computeSeconds": 0, "wallClockSeconds": 0, "sideEffects": 0}),
            ),
            (
                "a missing dimension",
                json!({"financial": 0.0, "tokens": 1}),
            ),
        ] {
            let document = quoting(&h, &w1, "work.progress", progress("wi-n", delta), &lease).await;
            let answer =
                refused(&h, command_request(&w1, "g1", &document), "invalid_command").await;
            assert!(answer.status.is_client_error(), "{why}");
        }
        // 1e308 is finite JSON but over every budget; 1e999 is not a finite number at all.
        let document = quoting(&h, &w1, "work.progress", progress("wi-n", huge), &lease).await;
        refused(&h, command_request(&w1, "g1", &document), "budget_exceeded").await;
        let document = quoting(
            &h,
            &w1,
            "work.progress",
            progress("wi-n", usage(0, 0.0)),
            &lease,
        )
        .await;
        let text = document
            .to_string()
            .replace("\"financial\":0.0", "\"financial\":1e999");
        assert!(text.contains("1e999"));
        let envelope =
            weft_api::Envelope::sign(&w1.key, weft_api::work::COMMAND_TYPE, text.as_bytes());
        let request = request(
            axum::http::Method::POST,
            "/v1/groups/g1/commands",
            Some(&w1.token),
            serde_json::to_vec(&envelope).expect("json"),
        );
        refused(&h, request, "invalid_command").await;
    }
);

backends!(
    /// CTX-5 in a budget refusal: a worker scoped to the child Mission overflowing the parent
    /// Mission is refused `budget_exceeded` without the parent's id, limit or spend.
    async fn a_scoped_worker_is_not_told_the_enclosing_budget(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, _, _) = group(&h).await;
        mission_with(&h, &coordinator, "m-parent", limit(100, 50.0), None).await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-parent", "missionId": "m-parent", "contract": contract(&[])}),
        )
        .await;
        mission_with(
            &h,
            &coordinator,
            MISSION,
            limit(1000, 50.0),
            Some("wi-parent"),
        )
        .await;
        let scoped =
            crate::http::tests::scope::scoped_agent(&h, "w-scoped", &["worker"], &[MISSION]).await;
        let lease = started(
            &h,
            &coordinator,
            &scoped,
            MISSION,
            "wi-child",
            limit(1000, 10.0),
        )
        .await;
        let over = quoting(
            &h,
            &scoped,
            "work.progress",
            progress("wi-child", usage(101, 0.0)),
            &lease,
        )
        .await;
        let answer = refused(&h, command_request(&scoped, "g1", &over), "budget_exceeded").await;
        let detail = answer.json()["detail"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            detail.contains("enclosing") && !detail.contains("m-parent") && !detail.contains("100"),
            "{detail}"
        );
    }
);
