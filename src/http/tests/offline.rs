//! Bounded offline execution (issue #13, OFL-3…OFL-12, DESIGN §12): a Worker cut off from the
//! Authority buffers `work.progress` and `work.checkpoint` under the critical binding
//! `urn:missionweaveprotocol:extension:bounded-offline-execution`; after reconnecting (its new
//! session revoked the historical lease, LSE-9) it rebases and re-signs them (OFL-8), and each
//! is reconciled in one transaction: `resource_usage_recorded`, the budget lineage, then the
//! Command (OFL-10/11), all or nothing (the fault hook fails the transaction after each step).
//! Every bad input of the issue is refused with its exact code and nothing changed; OFL-4's
//! server side (no start, submission, publication or token under a dead lease) too.
//! Long (about 620 lines) because every bad input of the issue is one test here, each spelled out.

use axum::http::Method;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use weft_api::work::offline::OFFLINE_EXTENSION;
use weft_storage::ReconcileStep;

use super::budget::{MISSION, accepted, budget_of, limit, mission_with, progress, started, usage};
use super::harness::*;
use super::work::{group, offer, ok};
use super::work_setup::{command_doc, command_request};

const WI: &str = "wi-o";

/// Group g1 (c1, w1, w2), Mission `mission-1`, WorkItem `wi-o` started by w1. Answers the
/// Agents and the Execution Lease as `GET /v1/workitems/wi-o` shows it.
async fn setup(h: &Harness) -> (Agent, Agent, Agent, Value) {
    let (coordinator, w1, w2) = group(h).await;
    mission_with(h, &coordinator, MISSION, limit(1000, 50.0), None).await;
    started(h, &coordinator, &w1, MISSION, WI, limit(500, 10.0)).await;
    let lease = h.get_json(&w1, &format!("/v1/workitems/{WI}")).await["lease"].clone();
    assert_eq!(lease["kind"], "execution");
    (coordinator, w1, w2, lease)
}

fn now(h: &Harness) -> DateTime<Utc> {
    weft_storage::Clock::now(&h.clock)
}

fn instant(value: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(value.as_str().expect("an instant"))
        .expect("RFC 3339")
        .to_utc()
}

/// The binding of a Command buffered at `buffered_at` under `lease` (DESIGN §12).
fn binding(lease: &Value, buffered_at: DateTime<Utc>, usage: Value) -> Value {
    json!({"agentId": lease["agentId"], "groupId": "g1", "workItemId": lease["workItemId"],
           "sessionEpoch": lease["sessionEpoch"], "ownershipEpoch": lease["ownershipEpoch"],
           "leaseId": lease["leaseId"], "disconnectedAt": (buffered_at - Duration::seconds(5)).to_rfc3339(),
           "bufferedAt": buffered_at.to_rfc3339(), "graceSeconds": 120,
           "leaseExpiresAt": lease["expiresAt"], "usage": usage})
}

/// `kind` with `payload` as `agent` rebased onto its current session (OFL-8): the binding
/// unchanged, the historical lease quoted.
async fn buffered(
    h: &Harness,
    agent: &Agent,
    kind: &str,
    payload: Value,
    binding: &Value,
) -> Value {
    let mut document = command_doc(h, agent, "g1", kind, payload).await;
    document["leaseId"] = binding["leaseId"].clone();
    document["extensions"] =
        json!([{"urn": OFFLINE_EXTENSION, "critical": true, "value": binding}]);
    document
}

/// w1's new session (the reconnect): LSE-9 revokes its Execution Lease.
async fn reconnect(h: &Harness, w1: &Agent) -> Agent {
    let token = h.session(&w1.key, "w1", "g1").await;
    Agent {
        id: w1.id.clone(),
        key: w1.key.clone(),
        token,
    }
}

fn kinds(answer: &Value) -> Vec<String> {
    answer["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["type"].as_str().expect("type").to_owned())
        .collect()
}

const USAGE_RECORDED: &str = "ext.missionweaveprotocol.core.resource_usage_recorded";

backends!(
    /// OFL-8, OFL-10, OFL-11: after the reconnect revoked the historical lease, a rebased
    /// buffered progress report and checkpoint each append `resource_usage_recorded` (naming
    /// the historical and the reconciling session), charge the lineage, then apply to the
    /// `queued` WorkItem; the same buffered Command again replays its answer and is charged
    /// once.
    async fn buffered_progress_and_checkpoint_reconcile_after_reconnect(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _, lease) = setup(&h).await;
        h.clock.advance(Duration::seconds(20));
        let report_binding = binding(&lease, now(&h), usage(30, 0.5));
        h.clock.advance(Duration::seconds(20));
        let checkpoint_binding = binding(&lease, now(&h), usage(20, 0.25));
        h.clock.advance(Duration::seconds(30));
        let w1 = reconnect(&h, &w1).await;
        let view = h.get_json(&w1, &format!("/v1/workitems/{WI}")).await;
        assert_eq!(view["state"], "queued", "LSE-9 revoked the lease: {view}");

        let report = buffered(
            &h,
            &w1,
            "work.progress",
            progress(WI, usage(30, 0.5)),
            &report_binding,
        )
        .await;
        let answer = accepted(&h, &w1, &report).await;
        assert_eq!(
            kinds(&answer),
            [USAGE_RECORDED, "work.progress_reported"],
            "OFL-11 order"
        );
        assert_eq!(answer["state"]["state"], "queued");
        assert_eq!(answer["state"]["budget"]["spent"], usage(30, 0.5));
        let (_, mission_spent) = budget_of(&h, &w1, &format!("/v1/missions/{MISSION}")).await;
        assert_eq!(mission_spent, usage(30, 0.5), "the whole lineage");
        let events = h
            .get_json(&coordinator, "/v1/groups/g1/events?limit=1000")
            .await;
        let recorded: Vec<&Value> = events["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["type"] == USAGE_RECORDED)
            .collect();
        assert_eq!(recorded.len(), 1);
        let detail = &recorded[0]["payload"]["detail"];
        assert_eq!(
            detail["historicalSession"],
            json!({"agentId": "w1", "sessionEpoch": lease["sessionEpoch"]})
        );
        let epoch = lease["sessionEpoch"].as_u64().expect("epoch");
        assert_eq!(
            detail["reconcilingSession"],
            json!({"agentId": "w1", "sessionEpoch": epoch + 1})
        );
        assert_eq!(detail["usage"], usage(30, 0.5));
        assert_eq!(detail["workItemId"], WI);
        assert_eq!(detail["commandId"], report["commandId"]);
        assert_eq!(recorded[0]["causationCommandId"], report["commandId"]);

        // The same buffered Command twice: its answer again, charged once.
        let before = h.fingerprint().await;
        let again = accepted(&h, &w1, &report).await;
        assert_eq!(again, answer);
        assert_unchanged(&before, &h.fingerprint().await, "a replayed reconciliation");
        // Rebased again onto yet another session (the Worker lost the answer and reconnected):
        // still the same buffered Command, replayed, charged once.
        let w1 = reconnect(&h, &w1).await;
        let mut rebased = buffered(
            &h,
            &w1,
            "work.progress",
            progress(WI, usage(30, 0.5)),
            &report_binding,
        )
        .await;
        rebased["commandId"] = report["commandId"].clone();
        assert_ne!(rebased["sessionEpoch"], report["sessionEpoch"]);
        let before = h.fingerprint().await;
        let again = accepted(&h, &w1, &rebased).await;
        assert_eq!(again, answer);
        assert_unchanged(
            &before,
            &h.fingerprint().await,
            "a re-rebased reconciliation",
        );

        let checkpoint = buffered(
            &h,
            &w1,
            "work.checkpoint",
            json!({"workItemId": WI, "checkpoint": {"note": "offline safe point"}}),
            &checkpoint_binding,
        )
        .await;
        let answer = accepted(&h, &w1, &checkpoint).await;
        assert_eq!(kinds(&answer), [USAGE_RECORDED, "work.checkpointed"]);
        assert_eq!(answer["state"]["state"], "queued");
        assert_eq!(answer["state"]["budget"]["spent"], usage(50, 0.75));
        // The checkpoint closed the historical lease when it was buffered: what the Worker
        // buffered after it is past the lease (OFL-9).
        let after_checkpoint = binding(
            &lease,
            instant(&checkpoint_binding["bufferedAt"]) + Duration::seconds(5),
            usage(1, 0.0),
        );
        let late = buffered(
            &h,
            &w1,
            "work.progress",
            progress(WI, usage(1, 0.0)),
            &after_checkpoint,
        )
        .await;
        refused(
            &h,
            command_request(&w1, "g1", &late),
            "offline_lease_closed",
        )
        .await;
        // Nor a second checkpoint dated before the first: it would push the ownership
        // deadline again without a start.
        let earlier = binding(
            &lease,
            instant(&checkpoint_binding["bufferedAt"]) - Duration::seconds(1),
            usage(0, 0.0),
        );
        let second = buffered(
            &h,
            &w1,
            "work.checkpoint",
            json!({"workItemId": WI, "checkpoint": {"note": "again"}}),
            &earlier,
        )
        .await;
        refused(
            &h,
            command_request(&w1, "g1", &second),
            "offline_lease_closed",
        )
        .await;
        // Reconciled, the Worker starts again under a new lease.
        let restarted = ok(&h, &w1, "g1", "work.start", json!({"workItemId": WI})).await;
        assert_ne!(restarted["state"]["lease"]["leaseId"], lease["leaseId"]);
        let report = h.store.fsck().await.expect("fsck");
        assert!(report.problems.is_empty(), "{report:?}");
    }
);

backends!(
    /// A binding whose historical lease still runs (the Authority was unreachable but the
    /// session survived): the Command applies as an ordinary owner Command, still charged
    /// through `resource_usage_recorded` first; a zero delta appends no usage Event.
    async fn a_buffered_command_under_a_running_lease_applies_as_usual(kind: Kind) {
        let h = harness(kind).await;
        let (_, w1, _, lease) = setup(&h).await;
        h.clock.advance(Duration::seconds(10));
        let bound = binding(&lease, now(&h), usage(5, 0.0));
        let report = buffered(
            &h,
            &w1,
            "work.progress",
            progress(WI, usage(5, 0.0)),
            &bound,
        )
        .await;
        let answer = accepted(&h, &w1, &report).await;
        assert_eq!(kinds(&answer), [USAGE_RECORDED, "work.progress_reported"]);
        assert_eq!(answer["state"]["state"], "active");
        let zero = binding(&lease, now(&h), usage(0, 0.0));
        let mut payload = progress(WI, usage(0, 0.0));
        payload.as_object_mut().expect("object").remove("usage");
        let report = buffered(&h, &w1, "work.progress", payload, &zero).await;
        let answer = accepted(&h, &w1, &report).await;
        assert_eq!(
            kinds(&answer),
            ["work.progress_reported"],
            "OFL-11: nonzero deltas only"
        );
    }
);

backends!(
    /// OFL-9 / DESIGN §12: `bufferedAt` counts, inside [lease start, lease expiry + grace]:
    /// after the lease expired, progress buffered within the grace is reconciled; buffered
    /// past it, before the lease started, or in the future is `offline_outside_grace`.
    async fn buffering_time_is_judged_against_lease_and_grace(kind: Kind) {
        let h = harness(kind).await;
        let (_, w1, _, lease) = setup(&h).await;
        let expires = instant(&lease["expiresAt"]);
        h.clock.advance(Duration::seconds(300 + 130));
        let within = binding(&lease, expires + Duration::seconds(119), usage(1, 0.0));
        let report = buffered(
            &h,
            &w1,
            "work.progress",
            progress(WI, usage(1, 0.0)),
            &within,
        )
        .await;
        let answer = accepted(&h, &w1, &report).await;
        assert_eq!(
            answer["state"]["state"], "queued",
            "the lease expired: {answer}"
        );
        for (why, at) in [
            ("past the grace", expires + Duration::seconds(121)),
            (
                "before the lease started",
                instant(&lease["startedAt"]) - Duration::seconds(1),
            ),
            ("in the future", now(&h) + Duration::seconds(1)),
        ] {
            let late = binding(&lease, at, usage(1, 0.0));
            let document =
                buffered(&h, &w1, "work.progress", progress(WI, usage(1, 0.0)), &late).await;
            let answer = refused(
                &h,
                command_request(&w1, "g1", &document),
                "offline_outside_grace",
            )
            .await;
            assert!(answer.status.is_client_error(), "{why}");
        }
    }
);

backends!(
    /// The bad inputs on a buffered Command after the reconnect, each with its exact
    /// code and nothing changed: no critical marking, an unknown critical extension, no
    /// binding at all, the binding altered on rebase, not rebased, another WorkItem, a payload
    /// usage that is not the binding's, and a Command type that may not be buffered (OFL-6:
    /// the critical binding is required; OFL-7: what it records is checked against the lease).
    async fn bad_buffered_commands_are_refused(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2, lease) = setup(&h).await;
        started(&h, &coordinator, &w2, MISSION, "wi-other", limit(500, 10.0)).await;
        h.clock.advance(Duration::seconds(20));
        let good = binding(&lease, now(&h), usage(3, 0.0));
        h.clock.advance(Duration::seconds(20));
        let old_session = w1;
        let w1 = reconnect(&h, &old_session).await;
        let send = |document: Value| command_request(&w1, "g1", &document);
        let report = buffered(&h, &w1, "work.progress", progress(WI, usage(3, 0.0)), &good).await;

        // OFL-6: the binding must be critical.
        let mut document = report.clone();
        document["extensions"][0]["critical"] = json!(false);
        refused(&h, send(document), "invalid_command").await;
        // Any other critical extension is still unknown.
        let mut document = report.clone();
        document["extensions"] =
            json!([{"urn": "urn:example:other", "critical": true, "value": {}}]);
        refused(&h, send(document), "unknown_extension").await;
        // Without the binding, the historical lease is just an old lease (LSE-5).
        let mut document = report.clone();
        document["extensions"] = json!([]);
        refused(&h, send(document), "stale_lease").await;
        // OFL-8: the binding must be kept unchanged on rebase.
        let current_epoch = lease["sessionEpoch"].as_u64().expect("epoch") + 1;
        for (field, altered) in [
            ("sessionEpoch", json!(current_epoch)),
            ("ownershipEpoch", json!(2)),
            (
                "leaseExpiresAt",
                json!((instant(&lease["expiresAt"]) + Duration::seconds(60)).to_rfc3339()),
            ),
            ("graceSeconds", json!(121)),
            ("leaseId", json!("lease-not-a-lease")),
        ] {
            let mut changed = good.clone();
            changed[field] = altered;
            let document = buffered(
                &h,
                &w1,
                "work.progress",
                progress(WI, usage(3, 0.0)),
                &changed,
            )
            .await;
            let answer = refused(&h, send(document), "offline_binding_mismatch").await;
            assert!(answer.status.is_client_error(), "{field}");
        }
        let mut document = report.clone();
        document["leaseId"] = json!("lease-other");
        refused(&h, send(document), "offline_binding_mismatch").await;
        // OFL-8: not rebased (the old session's epoch).
        let mut document = report.clone();
        document["sessionEpoch"] = lease["sessionEpoch"].clone();
        refused(&h, send(document), "stale_session").await;
        let mut document = report.clone();
        document["membershipEpoch"] = json!(report["membershipEpoch"].as_u64().expect("epoch") + 1);
        refused(&h, send(document), "stale_membership").await;
        // OFL-9: outside the bound WorkItem, whichever side names the other one.
        let document = buffered(
            &h,
            &w1,
            "work.progress",
            progress("wi-other", usage(3, 0.0)),
            &good,
        )
        .await;
        refused(&h, send(document), "offline_wrong_work_item").await;
        let mut other = good.clone();
        other["workItemId"] = json!("wi-other");
        let document = buffered(
            &h,
            &w1,
            "work.progress",
            progress(WI, usage(3, 0.0)),
            &other,
        )
        .await;
        refused(&h, send(document), "offline_wrong_work_item").await;
        // One delta per buffered Command: the payload may only repeat the binding's.
        let document = buffered(&h, &w1, "work.progress", progress(WI, usage(4, 0.0)), &good).await;
        refused(&h, send(document), "invalid_command").await;
        // OFL-3/OFL-5: only progress and checkpoints are buffered.
        for (kind, payload) in [
            (
                "work.submit",
                json!({"workItemId": WI, "artifacts": [digest_of(b"x").blake3.to_string()], "evidence": []}),
            ),
            ("work.start", json!({"workItemId": WI})),
            ("lease.renew", json!({"workItemId": WI})),
        ] {
            let document = buffered(&h, &w1, kind, payload, &good).await;
            refused(&h, send(document), "invalid_command").await;
        }
        // The unaltered one is accepted, once.
        let answer = accepted(&h, &w1, &report).await;
        assert_eq!(kinds(&answer), [USAGE_RECORDED, "work.progress_reported"]);
    }
);

backends!(
    /// OFL-9: progress buffered after the lease was closed (the Coordinator cancelled the
    /// WorkItem while the Worker was cut off) is `offline_lease_closed`; buffered before, it
    /// passes the binding but the cancelled WorkItem (SM-T14) takes nothing (`illegal_transition`).
    async fn progress_buffered_after_the_lease_closed_is_refused(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _, lease) = setup(&h).await;
        h.clock.advance(Duration::seconds(10));
        let before_close = binding(&lease, now(&h), usage(2, 0.0));
        h.clock.advance(Duration::seconds(10));
        ok(
            &h,
            &coordinator,
            "g1",
            "work.cancel",
            json!({"workItemId": WI, "reason": "not needed"}),
        )
        .await;
        h.clock.advance(Duration::seconds(10));
        let after_close = binding(&lease, now(&h), usage(2, 0.0));
        h.clock.advance(Duration::seconds(10));
        let w1 = reconnect(&h, &w1).await;
        let document = buffered(
            &h,
            &w1,
            "work.progress",
            progress(WI, usage(2, 0.0)),
            &after_close,
        )
        .await;
        refused(
            &h,
            command_request(&w1, "g1", &document),
            "offline_lease_closed",
        )
        .await;
        let document = buffered(
            &h,
            &w1,
            "work.checkpoint",
            json!({"workItemId": WI, "checkpoint": {}}),
            &after_close,
        )
        .await;
        refused(
            &h,
            command_request(&w1, "g1", &document),
            "offline_lease_closed",
        )
        .await;
        let document = buffered(
            &h,
            &w1,
            "work.progress",
            progress(WI, usage(2, 0.0)),
            &before_close,
        )
        .await;
        refused(
            &h,
            command_request(&w1, "g1", &document),
            "illegal_transition",
        )
        .await;
    }
);

backends!(
    /// OFL-9: after reassignment (the lease and the ownership expired, the WorkItem was
    /// offered again and w2 accepted it under a new ownership epoch), w1's buffered progress is
    /// `offline_owner_changed`, even inside its lease's window.
    async fn progress_buffered_for_a_reassigned_work_item_is_refused(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2, lease) = setup(&h).await;
        h.clock.advance(Duration::seconds(10));
        let bound = binding(&lease, now(&h), usage(2, 0.0));
        h.clock.advance(Duration::seconds(3700));
        assert!(h.store.work().expire_due(now(&h)).await.expect("expire") > 0);
        ok(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer(WI, "o-again", &["w2"], &h, 600),
        )
        .await;
        ok(
            &h,
            &w2,
            "g1",
            "work.accept_offer",
            json!({"workItemId": WI, "offerId": "o-again"}),
        )
        .await;
        let document = buffered(
            &h,
            &w1,
            "work.progress",
            progress(WI, usage(2, 0.0)),
            &bound,
        )
        .await;
        refused(
            &h,
            command_request(&w1, "g1", &document),
            "offline_owner_changed",
        )
        .await;
    }
);

backends!(
    /// OFL-10/11: reconciliation is one transaction: failing it right after the usage Event,
    /// after the lineage charge, or after the Command's own Event leaves every table as it was
    /// (the same fingerprint); then it goes through once, charged once.
    async fn a_crash_at_any_step_of_reconciliation_leaves_nothing(kind: Kind) {
        let h = harness(kind).await;
        let (_, w1, _, lease) = setup(&h).await;
        h.clock.advance(Duration::seconds(10));
        let bound = binding(&lease, now(&h), usage(9, 0.5));
        let w1 = reconnect(&h, &w1).await;
        let report = buffered(
            &h,
            &w1,
            "work.progress",
            progress(WI, usage(9, 0.5)),
            &bound,
        )
        .await;
        for step in [
            ReconcileStep::UsageRecorded,
            ReconcileStep::LineageCharged,
            ReconcileStep::CommandApplied,
        ] {
            h.faults.fail_reconciliation_after(Some(step));
            let answer = refused(&h, command_request(&w1, "g1", &report), "internal").await;
            assert!(answer.status.is_server_error(), "{step:?}");
        }
        h.faults.fail_reconciliation_after(None);
        let answer = accepted(&h, &w1, &report).await;
        assert_eq!(answer["state"]["budget"]["spent"], usage(9, 0.5));
        let again = accepted(&h, &w1, &report).await;
        assert_eq!(
            again["state"]["budget"]["spent"],
            usage(9, 0.5),
            "charged once"
        );
    }
);

backends!(
    /// OFL-4 on the server side: once the reconnect revoked the historical lease, nothing
    /// externally visible happens under it, buffered or not: its capability token is dead, no
    /// new token is issued for it, a manifest naming it is `stale_lease`, and a buffered start
    /// or submission is refused (`invalid_command`, above); a new start needs a new lease.
    async fn nothing_visible_happens_under_the_revoked_lease(kind: Kind) {
        let h = harness(kind).await;
        let (_, w1, _, lease) = setup(&h).await;
        let lease_id = lease["leaseId"].as_str().expect("lease id").to_owned();
        let issued = h
            .json_as(
                Method::POST,
                &format!("/v1/leases/{lease_id}/tokens"),
                &w1.token,
                json!({"scope": ["blob:write", "artifact:publish"], "ttlSeconds": 60}),
                &[],
            )
            .await;
        assert_eq!(issued.status, axum::http::StatusCode::CREATED, "{issued:?}");
        let token = issued.json()["token"].as_str().expect("token").to_owned();
        let w1 = reconnect(&h, &w1).await;
        let bytes = b"made while cut off";
        let upload = request(
            Method::PUT,
            &format!("/v1/blobs/{}", digest_of(bytes).blake3),
            Some(&token),
            bytes.to_vec(),
        );
        refused(&h, upload, "unauthorized").await;
        let again = json_request(
            Method::POST,
            &format!("/v1/leases/{lease_id}/tokens"),
            &w1.token,
            json!({"scope": ["blob:write"], "ttlSeconds": 60}),
            &[],
        );
        // The new session is not the one the lease ran under (LSE-3): no token for it.
        refused(&h, again, "forbidden").await;
        let digests = h.upload(&w1, bytes).await;
        let mut manifest = manifest(&w1, "g1", digests, &[]);
        manifest.mission_id = weft_api::Id::parse("m", MISSION).expect("id");
        manifest.work_item_id = weft_api::Id::parse("w", WI).expect("id");
        manifest.execution.lease_id = weft_api::Id::parse("l", &lease_id).expect("id");
        let envelope = sign(&w1.key, &manifest);
        refused(&h, publish_request(&w1, &envelope), "stale_lease").await;
    }
);
