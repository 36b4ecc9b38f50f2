//! Separation of duties (EVD-1): an Agent that holds a reviewer or coordinator role besides
//! the worker role weighs as a Worker on work it did itself (a WorkItem it owns, held a lease
//! of or published for, an Artifact it published): it may report its own tests, never review
//! itself, never supersede another's record there. On other work its standing is whole.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use weft_api::Envelope;
use weft_api::evidence::EVIDENCE_TYPE;

use super::budget::{MISSION, limit, mission_with, started};
use super::harness::*;
use super::work::{offer, ok};
use super::work_setup::{command_doc, command_request, contract, evidence_payload};

/// `payload` signed by `agent`, bound to its Execution Lease when it owns the WorkItem.
async fn bound(h: &Harness, agent: &Agent, payload: &Value) -> Request<Body> {
    let envelope = Envelope::sign(&agent.key, EVIDENCE_TYPE, payload.to_string().as_bytes());
    let envelope = h.bind_evidence(agent, &envelope).await;
    request(
        Method::POST,
        "/v1/evidence",
        Some(&agent.token),
        serde_json::to_vec(&envelope).expect("json"),
    )
}

/// `agent`'s Evidence of `method` and `outcome` on criterion ac-1 of `wi`, recorded: its id.
async fn recorded(h: &Harness, agent: &Agent, wi: &str, method: &str, outcome: &str) -> String {
    let mut payload = evidence_payload(agent, "g1", MISSION, wi, method, &[]);
    payload["result"]["outcome"] = json!(outcome);
    let answer = h.send(bound(h, agent, &payload).await).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    answer.json()["evidenceId"]
        .as_str()
        .expect("an id")
        .to_owned()
}

/// The verdict in force on ac-1 of `wi`: (its producer, its standing, its outcome).
async fn in_force(h: &Harness, agent: &Agent, wi: &str) -> (Value, Value, Value) {
    let criteria = h
        .get_json(agent, &format!("/v1/workitems/{wi}/criteria"))
        .await;
    let latest = &criteria["criteria"][0]["latest"];
    (
        latest["producer"].clone(),
        latest["standing"].clone(),
        latest["outcome"].clone(),
    )
}

/// The coordinator `c1`, `d1` (worker and reviewer) and the reviewer `r1` of `g1`, and the
/// Mission.
async fn cast(h: &Harness) -> (Agent, Agent, Agent) {
    let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
    let dual = h.agent("d1", "g1", &["worker", "reviewer"]).await;
    let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
    mission_with(h, &coordinator, MISSION, limit(1_000_000, 100.0), None).await;
    (coordinator, dual, reviewer)
}

/// `wi` authorized by `coordinator` in the Mission, not offered yet.
async fn authorized(h: &Harness, coordinator: &Agent, wi: &str) {
    let authorize = json!({"workItemId": wi, "missionId": MISSION, "contract": contract(&[])});
    ok(h, coordinator, "g1", "work.authorize", authorize).await;
}

/// `wi` offered by `coordinator` to `worker` alone, and accepted by it.
async fn taken(h: &Harness, coordinator: &Agent, worker: &Agent, wi: &str) {
    let offer_id = format!("o-{wi}");
    let offered = offer(wi, &offer_id, &[worker.id.as_str()], h, 600);
    ok(h, coordinator, "g1", "work.offer", offered).await;
    let accept = json!({"workItemId": wi, "offerId": offer_id});
    ok(h, worker, "g1", "work.accept_offer", accept).await;
}

backends!(
    /// A worker who is also a reviewer (or a coordinator) cannot pass its own WorkItem: every
    /// method only reviewers or coordinators claim is `forbidden` there (nothing changes), its
    /// own test report counts as a worker's claim, a reviewer's `fail` outranks it, and it
    /// cannot supersede that `fail`. On a WorkItem it did not work on, its reviewer standing
    /// is whole.
    async fn a_producer_does_not_review_its_own_work(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, dual, reviewer) = cast(&h).await;
        let lead = h.agent("l1", "g1", &["worker", "coordinator"]).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        for (owner, wi) in [
            (&dual, "wi-dual"),
            (&lead, "wi-lead"),
            (&worker, "wi-other"),
        ] {
            started(&h, &coordinator, owner, MISSION, wi, limit(1000, 1.0)).await;
        }
        let attempts = [
            (&dual, "wi-dual", "reviewer_agent"),
            (&dual, "wi-dual", "human"),
            (&dual, "wi-dual", "integrity_check"),
            (&dual, "wi-dual", "schema_validation"),
            (&lead, "wi-lead", "human"),
        ];
        for (agent, wi, method) in attempts {
            let payload = evidence_payload(agent, "g1", MISSION, wi, method, &[]);
            let answer = refused(&h, bound(&h, agent, &payload).await, "forbidden").await;
            assert_eq!(answer.status, StatusCode::FORBIDDEN, "{method}");
            let detail = answer.json()["detail"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            assert!(
                detail.contains("separation of duties"),
                "{method}: {detail}"
            );
        }
        // Its own test report is a worker's claim, and a review outranks it.
        recorded(&h, &dual, "wi-dual", "automated_test", "pass").await;
        assert_eq!(
            in_force(&h, &dual, "wi-dual").await,
            (json!("d1"), json!("worker"), json!("pass"))
        );
        let failed = recorded(&h, &reviewer, "wi-dual", "reviewer_agent", "fail").await;
        assert_eq!(
            in_force(&h, &dual, "wi-dual").await,
            (json!("r1"), json!("reviewer"), json!("fail"))
        );
        // It cannot supersede the review of its own work, as a reviewer could.
        let mut overturn = evidence_payload(&dual, "g1", MISSION, "wi-dual", "automated_test", &[]);
        overturn["supersedes"] = json!(failed);
        refused(&h, bound(&h, &dual, &overturn).await, "forbidden").await;
        // Elsewhere it is a reviewer, and the lead a coordinator.
        recorded(&h, &dual, "wi-other", "reviewer_agent", "pass").await;
        assert_eq!(
            in_force(&h, &dual, "wi-other").await,
            (json!("d1"), json!("reviewer"), json!("pass"))
        );
        recorded(&h, &lead, "wi-other", "human", "pass").await;
        assert_eq!(
            in_force(&h, &lead, "wi-other").await.1,
            json!("coordinator")
        );
    }
);

backends!(
    /// Separation of duties when the work comes after the review: a reviewer's pass recorded
    /// on a WorkItem before it took the work weighs as a worker's claim once it owns it, so
    /// it neither stands as the verdict over another reviewer's `fail` nor counts for its
    /// submission.
    async fn a_review_recorded_before_taking_the_work_is_a_claim(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, dual, reviewer) = cast(&h).await;
        let wi = "wi-later";
        authorized(&h, &coordinator, wi).await;
        let early = recorded(&h, &dual, wi, "automated_test", "pass").await;
        assert_eq!(
            in_force(&h, &dual, wi).await,
            (json!("d1"), json!("reviewer"), json!("pass")),
            "a review while it has not worked on it"
        );
        taken(&h, &coordinator, &dual, wi).await;
        assert_eq!(
            in_force(&h, &dual, wi).await,
            (json!("d1"), json!("worker"), json!("pass")),
            "the owner's own review is a claim now"
        );
        // Its submission cannot cite it: a Worker's claim counts only under the current lease.
        let started = ok(&h, &dual, "g1", "work.start", json!({"workItemId": wi})).await;
        let artifact = h.put_in(&dual, "g1", b"the report", &[], wi).await;
        let submit =
            json!({"workItemId": wi, "artifacts": [artifact.to_string()], "evidence": [early]});
        let mut submit = command_doc(&h, &dual, "g1", "work.submit", submit).await;
        submit["leaseId"] = started["state"]["lease"]["leaseId"].clone();
        refused(
            &h,
            command_request(&dual, "g1", &submit),
            "evidence_missing",
        )
        .await;
        recorded(&h, &reviewer, wi, "reviewer_agent", "fail").await;
        assert_eq!(
            in_force(&h, &dual, wi).await,
            (json!("r1"), json!("reviewer"), json!("fail")),
            "a review outranks it, uncontested"
        );
    }
);

backends!(
    /// Separation of duties for the Commands: an Agent with the coordinator and worker roles
    /// that did a WorkItem may not accept its result (`forbidden`, nothing changed), even
    /// when its own claims cover every criterion; a coordinator that did not do it may.
    async fn a_coordinator_does_not_accept_its_own_result(kind: Kind) {
        let h = harness(kind).await;
        let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
        let lead = h.agent("l1", "g1", &["worker", "coordinator"]).await;
        mission_with(&h, &coordinator, MISSION, limit(1_000_000, 100.0), None).await;
        let wi = "wi-lead";
        let lease = started(&h, &coordinator, &lead, MISSION, wi, limit(1000, 1.0)).await;
        let artifact = h.put_in(&lead, "g1", b"the lead's report", &[], wi).await;
        let claim = recorded(&h, &lead, wi, "automated_test", "pass").await;
        let submit =
            json!({"workItemId": wi, "artifacts": [artifact.to_string()], "evidence": [claim]});
        let mut submit = command_doc(&h, &lead, "g1", "work.submit", submit).await;
        submit["leaseId"] = json!(lease);
        let submitted = h.send(command_request(&lead, "g1", &submit)).await;
        assert_eq!(submitted.status, StatusCode::CREATED, "{submitted:?}");
        let accept = json!({"workItemId": wi});
        let own = command_doc(&h, &lead, "g1", "work.accept_result", accept.clone()).await;
        let answer = refused(&h, command_request(&lead, "g1", &own), "forbidden").await;
        let detail = answer.json()["detail"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(detail.contains("separation of duties"), "{detail}");
        let accepted = ok(&h, &coordinator, "g1", "work.accept_result", accept).await;
        assert_eq!(accepted["state"]["state"], "verified", "{accepted}");
    }
);

backends!(
    /// Separation of duties through a child Mission: approving it verifies its parent
    /// WorkItem (T16), so the Agent that did the parent's work may not approve it
    /// (`forbidden`, nothing changed), whatever the child holds; another coordinator gets past
    /// that check.
    async fn a_coordinator_does_not_approve_the_child_mission_of_its_own_work(kind: Kind) {
        let h = harness(kind).await;
        let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
        let lead = h.agent("l1", "g1", &["worker", "coordinator"]).await;
        mission_with(&h, &coordinator, MISSION, limit(1_000_000, 100.0), None).await;
        let wi = "wi-parent";
        started(&h, &coordinator, &lead, MISSION, wi, limit(1000, 1.0)).await;
        let child = json!({"workItemId": wi, "childMissionId": "m-child", "title": "sub",
                           "childFailurePolicy": "fail"});
        let blocked = ok(&h, &lead, "g1", "mission.create_child", child).await;
        assert_eq!(blocked["state"]["state"], "blocked", "{blocked}");
        let approve = json!({"missionId": "m-child"});
        let own = command_doc(&h, &lead, "g1", "mission.approve", approve.clone()).await;
        let answer = refused(&h, command_request(&lead, "g1", &own), "forbidden").await;
        let detail = answer.json()["detail"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(detail.contains("separation of duties"), "{detail}");
        // Another coordinator passes this check; the empty child then has no verified work to
        // stand for its parent (T16, `mission_close::sm_t16_…` approves one that has).
        let other = command_doc(&h, &coordinator, "g1", "mission.approve", approve).await;
        refused(
            &h,
            command_request(&coordinator, "g1", &other),
            "evidence_missing",
        )
        .await;
    }
);

backends!(
    /// Separation of duties for corrections: a reviewer that supersedes another reviewer's
    /// `fail` and then takes the work has not overturned it: once it did the work, its
    /// correction no longer counts, and the `fail` is the verdict again.
    async fn a_correction_recorded_before_taking_the_work_stops_counting(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, dual, reviewer) = cast(&h).await;
        let wi = "wi-corrected";
        authorized(&h, &coordinator, wi).await;
        let failed = recorded(&h, &reviewer, wi, "reviewer_agent", "fail").await;
        let mut correction = evidence_payload(&dual, "g1", MISSION, wi, "reviewer_agent", &[]);
        correction["supersedes"] = json!(failed);
        let answer = h.send(bound(&h, &dual, &correction).await).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        assert_eq!(
            in_force(&h, &dual, wi).await,
            (json!("d1"), json!("reviewer"), json!("pass")),
            "a reviewer's correction, before it worked on it"
        );
        taken(&h, &coordinator, &dual, wi).await;
        assert_eq!(
            in_force(&h, &dual, wi).await,
            (json!("r1"), json!("reviewer"), json!("fail")),
            "the fail stands again once the corrector took the work"
        );
    }
);
