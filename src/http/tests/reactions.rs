//! The review after a submission (EVD-3) as a reaction after its commit (issue #41): the
//! submission answers before the review, a review the process did not get to runs after the
//! restart, and it records its Evidence once however often the store restarts.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::budget::started_under;
use super::harness::*;
use super::work::{evidence_for, group, mission, ok};
use super::work_setup::{command_doc, command_request, contract};

/// The Authority's Evidence records for `wi`, as the coordinator lists them.
async fn authority_records(h: &Harness, coordinator: &Agent, wi: &str) -> Vec<Value> {
    let page = h
        .get_json(
            coordinator,
            &format!("/v1/evidence?workItemId={wi}&producer=weft-authority"),
        )
        .await;
    page["items"].as_array().cloned().unwrap_or_default()
}

/// A coordinator and a worker of g1, and the worker's signed `work.submit` of WorkItem `wi-k`
/// (started under a contract with an integrity criterion, its artifact and Evidence recorded),
/// not yet sent: its review is what the tests watch.
async fn submission(h: &Harness) -> (Agent, Agent, Value) {
    let (coordinator, w1, _) = group(h).await;
    mission(h, &coordinator, "g1", "mission-1").await;
    let mut checked = contract(&[]);
    checked["acceptanceCriteria"] = json!([
        {"id": "ac-1", "description": "the tests pass", "requiredEvidence": ["automated_test"]},
        {"id": "ac-int", "description": "the bytes are what was published", "requiredEvidence": ["integrity_check"]}
    ]);
    let lease = started_under(h, &coordinator, &w1, "mission-1", "wi-k", checked).await;
    let (artifact, evidence) = evidence_for(h, &w1, "wi-k").await;
    let mut submit = command_doc(
        h,
        &w1,
        "g1",
        "work.submit",
        json!({"workItemId": "wi-k", "artifacts": [artifact], "evidence": [evidence]}),
    )
    .await;
    submit["leaseId"] = json!(lease);
    (coordinator, w1, submit)
}

/// EVD-3 (issue #41): with the reactions held, as in a process killed between the commit of a
/// submission and its review, the submission is answered and nothing is reviewed; after a
/// restart the owed review runs and records the Authority's integrity Evidence, and a further
/// restart does not record it again (exactly once in effect).
#[tokio::test]
async fn an_owed_review_runs_after_a_restart_exactly_once() {
    let h = harness(Kind::Disk).await;
    let (coordinator, w1, submit) = submission(&h).await;
    h.faults.hold_reactions(true);
    let submitted = h.send(command_request(&w1, "g1", &submit)).await;
    assert_eq!(submitted.status, StatusCode::CREATED, "{submitted:?}");
    assert!(
        authority_records(&h, &coordinator, "wi-k").await.is_empty(),
        "the answer came before the review"
    );

    let h = restart(h).await;
    assert!(
        authority_records(&h, &coordinator, "wi-k").await.is_empty(),
        "still held"
    );
    h.faults.hold_reactions(false);
    h.store.reactions_settled().await;
    let records = authority_records(&h, &coordinator, "wi-k").await;
    assert_eq!(
        records.len(),
        1,
        "one review after the restart: {records:?}"
    );
    assert_eq!(records[0]["evidence"]["method"]["kind"], "integrity_check");
    assert_eq!(records[0]["evidence"]["result"]["outcome"], "pass");
    assert_eq!(records[0]["evidence"]["criterion"], "ac-int");

    let h = restart(h).await;
    h.store.reactions_settled().await;
    assert_eq!(
        authority_records(&h, &coordinator, "wi-k").await.len(),
        1,
        "a reaction that committed is never run again"
    );
    // The review the submission waited for in the request before is there for the verdict.
    let verified = ok(
        &h,
        &coordinator,
        "g1",
        "work.accept_result",
        json!({"workItemId": "wi-k"}),
    )
    .await;
    assert_eq!(verified["state"]["state"], "verified", "{verified}");
}

/// Issue #43: on an index two servers share, an owed review is claimed by one of them and run
/// there only: with both servers' reactions released at once, one review runs in all and one
/// Evidence is recorded. (When a claim ends is `rows/reactions.rs`'s unit test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_run_an_owed_review_once() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let (coordinator, w1, submit) = submission(&a).await;
    a.faults.hold_reactions(true);
    b.faults.hold_reactions(true);
    let submitted = a.send(command_request(&w1, "g1", &submit)).await;
    assert_eq!(submitted.status, StatusCode::CREATED, "{submitted:?}");
    let before = a.store.reactions_ran() + b.store.reactions_ran();
    a.faults.hold_reactions(false);
    b.faults.hold_reactions(false);
    tokio::join!(a.store.reactions_settled(), b.store.reactions_settled());
    let ran = a.store.reactions_ran() + b.store.reactions_ran() - before;
    assert_eq!(ran, 1, "one server ran the review");
    assert_eq!(authority_records(&a, &coordinator, "wi-k").await.len(), 1);
}
