//! A revised contract (CON-5, issue #49): `work.revise_contract` keeps the WorkItem's state
//! (SM-2 has no transition out of `offered` or `queued` for it, SM-3) and asks for renewed
//! acceptance: live offers are withdrawn, so an `offered` WorkItem waits for a new offer, and a
//! `queued` owner accepts again, naming the offer it accepted, before it may start.

use serde_json::json;

use super::harness::*;
use super::work::{group, ok};
use super::work_setup::{accepted, authorized, command_doc, command_request, contract, offered};

/// A revised contract: the same, with a new objective.
fn revised() -> serde_json::Value {
    let mut contract = contract(&[]);
    contract["objective"] = json!("summarise the corpus, in French");
    contract
}

backends!(
    /// CON-5, SM-2, SM-3 (issue #49): revising an `offered` WorkItem's contract keeps it
    /// `offered` (not `open`) and withdraws the live offer, whose acceptance is then
    /// `offer_withdrawn`; a new offer (T3 from `offered`) is accepted at the new revision.
    async fn con_5_an_offered_revision_stays_offered_and_asks_for_a_new_offer(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        authorized(&h, &coordinator, "m1", "wi-o", contract(&[])).await;
        offered(&h, &coordinator, "wi-o", "o-1", &["w1"]).await;
        let revision = ok(
            &h,
            &coordinator,
            "g1",
            "work.revise_contract",
            json!({"workItemId": "wi-o", "contract": revised()}),
        )
        .await;
        assert_eq!(
            revision["state"]["state"], "offered",
            "{kind:?}: {revision}"
        );
        assert_eq!(revision["state"]["contractRevision"], 2, "{revision}");
        let late = command_doc(
            &h,
            &w1,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-o", "offerId": "o-1"}),
        )
        .await;
        refused(&h, command_request(&w1, "g1", &late), "offer_withdrawn").await;
        offered(&h, &coordinator, "wi-o", "o-2", &["w1"]).await;
        let accepted = accepted(&h, &w1, "wi-o", "o-2").await;
        assert_eq!(accepted["state"]["state"], "queued", "{accepted}");
    }
);

backends!(
    /// CON-5, SM-2, SM-3 (issue #49): revising a `queued` WorkItem's contract keeps it
    /// `queued` with its owner; the owner may not start (`illegal_transition`) until it
    /// accepts again, naming the offer it accepted, which begins a new ownership epoch (SM-7);
    /// another Agent may not accept for it.
    async fn con_5_a_queued_owner_accepts_the_revision_before_it_starts(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2) = group(&h).await;
        authorized(&h, &coordinator, "m1", "wi-q", contract(&[])).await;
        offered(&h, &coordinator, "wi-q", "o-1", &["w1", "w2"]).await;
        accepted(&h, &w1, "wi-q", "o-1").await;
        let revision = ok(
            &h,
            &coordinator,
            "g1",
            "work.revise_contract",
            json!({"workItemId": "wi-q", "contract": revised()}),
        )
        .await;
        assert_eq!(revision["state"]["state"], "queued", "{kind:?}: {revision}");
        assert_eq!(revision["state"]["owner"]["agentId"], "w1", "{revision}");
        let early = command_doc(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-q"})).await;
        let answer = refused(&h, command_request(&w1, "g1", &early), "illegal_transition").await;
        assert!(
            answer.json()["detail"]
                .as_str()
                .is_some_and(|d| d.contains("CON-5")),
            "{answer:?}"
        );
        let other = command_doc(
            &h,
            &w2,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-q", "offerId": "o-1"}),
        )
        .await;
        refused(&h, command_request(&w2, "g1", &other), "offer_withdrawn").await;
        let again = accepted(&h, &w1, "wi-q", "o-1").await;
        assert_eq!(again["state"]["state"], "queued", "{again}");
        assert_eq!(
            again["state"]["owner"]["ownershipEpoch"], 2,
            "SM-7: {again}"
        );
        let started = ok(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-q"})).await;
        assert_eq!(started["state"]["state"], "active", "{started}");
        // Accepted once: a second acceptance meets the table.
        let twice = command_doc(
            &h,
            &w1,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-q", "offerId": "o-1"}),
        )
        .await;
        refused(&h, command_request(&w1, "g1", &twice), "illegal_transition").await;
        let report = h.store.fsck().await.expect("fsck");
        assert!(
            report.problems.is_empty(),
            "the rows are the fold of the log: {report:?}"
        );
    }
);

backends!(
    /// CON-5, SM-7 (issue #49 review): the owner accepts a revised contract again naming the
    /// offer that opened its ownership epoch, never an older accepted one (another owner's,
    /// fenced since): that is `offer_withdrawn`, nothing changed.
    async fn con_5_a_reacceptance_names_the_offer_of_the_current_epoch(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2) = group(&h).await;
        let mut short = contract(&[]);
        short["leases"]["ownershipSeconds"] = json!(60);
        authorized(&h, &coordinator, "m1", "wi-e", short).await;
        offered(&h, &coordinator, "wi-e", "o-1", &["w1", "w2"]).await;
        accepted(&h, &w2, "wi-e", "o-1").await;
        h.clock.advance(chrono::Duration::seconds(61));
        offered(&h, &coordinator, "wi-e", "o-2", &["w1"]).await;
        accepted(&h, &w1, "wi-e", "o-2").await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.revise_contract",
            json!({"workItemId": "wi-e", "contract": revised()}),
        )
        .await;
        let old = command_doc(
            &h,
            &w1,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-e", "offerId": "o-1"}),
        )
        .await;
        refused(&h, command_request(&w1, "g1", &old), "offer_withdrawn").await;
        let again = accepted(&h, &w1, "wi-e", "o-2").await;
        assert_eq!(again["state"]["state"], "queued", "{kind:?}: {again}");
    }
);
