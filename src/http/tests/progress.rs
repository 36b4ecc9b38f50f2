//! The owner's Commands while it executes (issue #12): `lease.renew` (LSE-1, LSE-3, LSE-4,
//! LSE-5), `work.progress` (PRG-1, PRG-2), `preemption.request` (LSE-11, LSE-12) and the
//! retry policy at `work.start` (PRG-8, PRG-9, PRG-10). Every refusal goes through `refused`:
//! its exact code and nothing changed.

use chrono::{DateTime, Duration, SubsecRound as _, Utc};
use serde_json::{Value, json};

use super::harness::*;
use super::work::{group, mission, offer, ok};
use super::work_setup::{command_doc, command_request, contract};

/// The Evidence of a WorkItem names the Mission its manifests do (`mission-1`).
pub(super) const MISSION: &str = "mission-1";

/// `work::group`'s Group g1 (c1, w1, w2) plus the Mission `mission-1`.
pub(super) async fn setup(h: &Harness) -> (Agent, Agent, Agent) {
    let agents = group(h).await;
    mission(h, &agents.0, "g1", MISSION).await;
    agents
}

/// A WorkItem `wi` under `contract`, offered to and accepted by `owner`.
pub(super) async fn owned(
    h: &Harness,
    coordinator: &Agent,
    owner: &Agent,
    wi: &str,
    contract: Value,
) {
    ok(
        h,
        coordinator,
        "g1",
        "work.authorize",
        json!({"workItemId": wi, "missionId": MISSION, "contract": contract}),
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
}

/// `work.start` by `owner`; answers the new Execution Lease's id.
pub(super) async fn start(h: &Harness, owner: &Agent, wi: &str) -> String {
    let started = ok(h, owner, "g1", "work.start", json!({"workItemId": wi})).await;
    assert_eq!(started["state"]["state"], "active");
    started["state"]["lease"]["leaseId"]
        .as_str()
        .expect("an Execution Lease")
        .to_owned()
}

/// A signed Command of `agent` quoting `lease` (LSE-4).
pub(super) async fn quoting(
    h: &Harness,
    agent: &Agent,
    kind: &str,
    payload: Value,
    lease: Option<&str>,
) -> Value {
    let mut document = command_doc(h, agent, "g1", kind, payload).await;
    document["leaseId"] = json!(lease);
    document
}

/// Sends `kind` quoting `lease` and expects 201; answers the body.
pub(super) async fn ok_quoting(
    h: &Harness,
    agent: &Agent,
    kind: &str,
    payload: Value,
    lease: &str,
) -> Value {
    let document = quoting(h, agent, kind, payload, Some(lease)).await;
    let answer = h.send(command_request(agent, "g1", &document)).await;
    assert_eq!(
        answer.status,
        axum::http::StatusCode::CREATED,
        "{kind}: {answer:?}"
    );
    answer.json()
}

/// `kind` quoting `lease` is refused with `code`, nothing changed.
pub(super) async fn refused_quoting(
    h: &Harness,
    agent: &Agent,
    kind: &str,
    payload: Value,
    lease: Option<&str>,
    code: &str,
) {
    let document = quoting(h, agent, kind, payload, lease).await;
    refused(h, command_request(agent, "g1", &document), code).await;
}

pub(super) fn instant(value: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(
        value
            .as_str()
            .unwrap_or_else(|| panic!("not an instant: {value}")),
    )
    .expect("RFC 3339")
    .to_utc()
}

/// The clock's instant at the precision the store keeps (microseconds).
pub(super) fn now(h: &Harness) -> DateTime<Utc> {
    weft_storage::Clock::now(&h.clock).trunc_subsecs(6)
}

pub(super) fn checkpoint(wi: &str) -> Value {
    json!({"workItemId": wi, "checkpoint": {"note": "safe point"}})
}

pub(super) fn progress(wi: &str, percent: f64) -> Value {
    json!({"workItemId": wi, "phase": "summarising", "milestonesDone": ["corpus read"],
           "nextCheckpoint": "draft written", "blockers": [],
           "estimate": {"completionAt": "2026-12-01T00:00:00Z", "confidence": 0.7},
           "evidence": [], "percent": percent})
}

/// A contract whose retry policy is `policy`.
pub(super) fn with_retry(policy: Value) -> Value {
    let mut contract = contract(&[]);
    contract["retryPolicy"] = policy;
    contract
}

backends!(
    /// LSE-1, LSE-3: `lease.renew` extends the Execution Lease by `executionSeconds` from now
    /// and records the renewal; LSE-4/LSE-5: an older lease id of the same epoch, a missing
    /// one, or a lease past its expiry is `stale_lease`; GAP-5: a non-owner is `forbidden`.
    async fn renew_extends_the_lease_and_records_it(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2) = setup(&h).await;
        owned(&h, &coordinator, &w1, "wi-r", contract(&[])).await;
        let first = start(&h, &w1, "wi-r").await;
        h.clock.advance(Duration::seconds(100));
        let renewed = ok_quoting(
            &h,
            &w1,
            "lease.renew",
            json!({"workItemId": "wi-r"}),
            &first,
        )
        .await;
        assert_eq!(renewed["events"][0]["type"], "lease.renewed", "{renewed}");
        let lease = &renewed["state"]["lease"];
        assert_eq!(
            lease["leaseId"],
            first.as_str(),
            "the lease keeps its id (LSE-3)"
        );
        assert_eq!(
            instant(&lease["expiresAt"]),
            now(&h) + Duration::seconds(300),
            "{kind:?}"
        );
        assert_eq!(
            lease["renewals"].as_array().map(Vec::len),
            Some(1),
            "{lease}"
        );
        assert_eq!(instant(&lease["renewals"][0]), now(&h));
        assert_eq!(renewed["state"]["state"], "active");
        // Ownership is kept at least as long as the lease it works under.
        assert!(instant(&renewed["state"]["owner"]["expiresAt"]) >= instant(&lease["expiresAt"]));

        let payload = json!({"workItemId": "wi-r"});
        refused_quoting(
            &h,
            &w2,
            "lease.renew",
            payload.clone(),
            Some(&first),
            "forbidden",
        )
        .await;
        refused_quoting(&h, &w1, "lease.renew", payload.clone(), None, "stale_lease").await;
        // LSE-5: after a checkpoint and a new start, the first lease id is stale under the
        // same ownership epoch.
        ok_quoting(&h, &w1, "work.checkpoint", checkpoint("wi-r"), &first).await;
        let second = start(&h, &w1, "wi-r").await;
        assert_ne!(first, second);
        refused_quoting(
            &h,
            &w1,
            "lease.renew",
            payload.clone(),
            Some(&first),
            "stale_lease",
        )
        .await;
        // Renewal after expiry: the current lease id, 301 s after its start.
        h.clock.advance(Duration::seconds(301));
        refused_quoting(
            &h,
            &w1,
            "lease.renew",
            payload,
            Some(&second),
            "stale_lease",
        )
        .await;
        let report = h.store.fsck().await.expect("fsck");
        assert!(report.problems.is_empty(), "{report:?}");
    }
);

backends!(
    /// PRG-1: `work.progress` is structured (unknown fields and an out-of-range confidence are
    /// `invalid_command`), sent by the owner quoting its lease (LSE-4), recorded as
    /// `work.progress_reported` and shown as the latest report; PRG-2: `percent` is stored
    /// but the WorkItem stays `active` whatever it says.
    async fn progress_is_structured_and_percent_decides_nothing(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2) = setup(&h).await;
        owned(&h, &coordinator, &w1, "wi-p", contract(&[])).await;
        let lease = start(&h, &w1, "wi-p").await;

        let mut unknown = progress("wi-p", 10.0);
        unknown["mood"] = json!("optimistic");
        refused_quoting(
            &h,
            &w1,
            "work.progress",
            unknown,
            Some(&lease),
            "invalid_command",
        )
        .await;
        let mut estimate = progress("wi-p", 10.0);
        estimate["estimate"]["confidence"] = json!(1.5);
        refused_quoting(
            &h,
            &w1,
            "work.progress",
            estimate,
            Some(&lease),
            "invalid_command",
        )
        .await;
        let mut missing = progress("wi-p", 10.0);
        missing.as_object_mut().expect("object").remove("phase");
        refused_quoting(
            &h,
            &w1,
            "work.progress",
            missing,
            Some(&lease),
            "invalid_command",
        )
        .await;
        refused_quoting(
            &h,
            &w2,
            "work.progress",
            progress("wi-p", 10.0),
            Some(&lease),
            "forbidden",
        )
        .await;
        refused_quoting(
            &h,
            &w1,
            "work.progress",
            progress("wi-p", 10.0),
            None,
            "stale_lease",
        )
        .await;
        let mut foreign = progress("wi-p", 10.0);
        foreign["evidence"] = json!([format!("blake3:{}", "ab".repeat(32))]);
        refused_quoting(
            &h,
            &w1,
            "work.progress",
            foreign,
            Some(&lease),
            "unknown_evidence",
        )
        .await;

        let reported = ok_quoting(&h, &w1, "work.progress", progress("wi-p", 100.0), &lease).await;
        assert_eq!(reported["events"][0]["type"], "work.progress_reported");
        assert_eq!(reported["events"].as_array().map(Vec::len), Some(1));
        let view = h.get_json(&coordinator, "/v1/workitems/wi-p").await;
        assert_eq!(view["state"], "active", "PRG-2: 100 % moves nothing");
        assert_eq!(view["lease"]["leaseId"], lease.as_str());
        assert_eq!(view["progress"]["report"]["percent"], 100.0);
        assert_eq!(view["progress"]["report"]["phase"], "summarising");
        assert_eq!(view["progress"]["agentId"], "w1");
        assert_eq!(
            view["progress"]["sequence"],
            reported["events"][0]["sequence"]
        );
        // The next report replaces it as the latest; the first stays in the log.
        let mut later = progress("wi-p", 5.0);
        later["phase"] = json!("drafting");
        // Usage is charged (issue #13): within the Mission's budget of one unit a dimension.
        later["usage"] = json!({"financial": 0.5, "tokens": 1, "toolCalls": 1, "computeSeconds": 1, "wallClockSeconds": 1, "sideEffects": 0});
        ok_quoting(&h, &w1, "work.progress", later, &lease).await;
        let view = h.get_json(&w1, "/v1/workitems/wi-p").await;
        assert_eq!(view["progress"]["report"]["phase"], "drafting");
        assert_eq!(view["state"], "active");
        let events = h.get_json(&coordinator, "/v1/groups/g1/events").await;
        let reports = events["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["type"] == "work.progress_reported")
            .count();
        assert_eq!(reports, 2, "{kind:?}");
        let report = h.store.fsck().await.expect("fsck");
        assert!(report.problems.is_empty(), "{report:?}");
    }
);

backends!(
    /// LSE-11, LSE-12: `preemption.request` (the Coordinator, or the owner's own scheduler)
    /// is recorded and the WorkItem stays `active`, however long it takes; the owner's
    /// checkpoint releases the lease and re-queues it (SM-T8, SM-9), which ends the request.
    async fn preemption_waits_for_the_owners_checkpoint(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2) = setup(&h).await;
        owned(&h, &coordinator, &w1, "wi-x", contract(&[])).await;
        let lease = start(&h, &w1, "wi-x").await;
        let payload = json!({"workItemId": "wi-x"});
        refused(
            &h,
            command_request(
                &w2,
                "g1",
                &command_doc(&h, &w2, "g1", "preemption.request", payload.clone()).await,
            ),
            "forbidden",
        )
        .await;

        let requested = ok(
            &h,
            &coordinator,
            "g1",
            "preemption.request",
            payload.clone(),
        )
        .await;
        assert_eq!(requested["events"][0]["type"], "work.preemption_requested");
        assert_eq!(
            requested["state"]["state"], "active",
            "LSE-11: nothing forces it out"
        );
        assert_eq!(
            requested["state"]["preemptionRequested"]["requestedBy"],
            "c1"
        );
        assert_eq!(
            requested["state"]["preemptionRequested"]["leaseId"],
            lease.as_str()
        );
        // The owner's own scheduler may ask too.
        ok(&h, &w1, "g1", "preemption.request", payload.clone()).await;
        h.clock.advance(Duration::seconds(200));
        let view = h.get_json(&coordinator, "/v1/workitems/wi-x").await;
        assert_eq!(view["state"], "active");
        assert_eq!(view["preemptionRequested"]["requestedBy"], "w1");
        // The owner keeps working and reporting until it reaches a safe point.
        ok_quoting(&h, &w1, "work.progress", progress("wi-x", 60.0), &lease).await;

        let checkpointed = ok_quoting(&h, &w1, "work.checkpoint", checkpoint("wi-x"), &lease).await;
        assert_eq!(checkpointed["state"]["state"], "queued", "LSE-12 step 5");
        assert_eq!(
            checkpointed["state"]["lease"],
            Value::Null,
            "step 4: the slot is released"
        );
        assert_eq!(checkpointed["state"]["preemptionRequested"], Value::Null);
        // Nothing runs any more, so there is nothing to preempt.
        refused(
            &h,
            command_request(
                &coordinator,
                "g1",
                &command_doc(&h, &coordinator, "g1", "preemption.request", payload).await,
            ),
            "illegal_transition",
        )
        .await;
        // Resumed later under a new lease, with no request pending.
        start(&h, &w1, "wi-x").await;
        let view = h.get_json(&w1, "/v1/workitems/wi-x").await;
        assert_eq!(view["preemptionRequested"], Value::Null, "{kind:?}");
    }
);
