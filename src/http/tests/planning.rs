//! Dynamic planning and the ways back from failure over HTTP: a Mission's graph grows while
//! its work runs (DEP-1, DEP-2), a failed review becomes `work.fail` and a new offer (GAP-2,
//! SM-5), and an offer outlives a restart (OFR-1).

use serde_json::json;

use super::harness::*;
use super::work::{evidence_for, group, mission, offer, ok};
use super::work_setup::{command_doc, command_request, contract};

/// Authorizes `wi` in `m1` with `depends_on`, offers it to `w1`, which accepts.
async fn queued_for(
    h: &Harness,
    coordinator: &Agent,
    worker: &Agent,
    wi: &str,
    depends_on: &[&str],
) {
    let authorize = json!({"workItemId": wi, "missionId": "m1", "contract": contract(depends_on)});
    ok(h, coordinator, "g1", "work.authorize", authorize).await;
    let offer_id = format!("o-{wi}");
    ok(
        h,
        coordinator,
        "g1",
        "work.offer",
        offer(wi, &offer_id, &["w1"], h, 600),
    )
    .await;
    let accept = json!({"workItemId": wi, "offerId": offer_id});
    ok(h, worker, "g1", "work.accept_offer", accept).await;
}

backends!(
    /// DEP-1, DEP-2: the Coordinator starts work before the graph is known and adds
    /// WorkItems as it goes: `wi-a` runs while `wi-b` (depending on it) and `wi-c`
    /// (independent) are authorized; `wi-c` runs in parallel with `wi-a`, `wi-b` is not
    /// eligible (DEP-3) until `wi-a` is verified, and the Mission's graph shows the edge.
    async fn dep_1_dep_2_the_graph_grows_while_its_branches_run(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        queued_for(&h, &coordinator, &w1, "wi-a", &[]).await;
        let started = ok(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-a"})).await;
        assert_eq!(started["state"]["state"], "active");
        queued_for(&h, &coordinator, &w1, "wi-b", &["wi-a"]).await;
        queued_for(&h, &coordinator, &w1, "wi-c", &[]).await;
        let parallel = ok(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-c"})).await;
        assert_eq!(parallel["state"]["state"], "active");
        let a = h.get_json(&w1, "/v1/workitems/wi-a").await;
        assert_eq!(a["state"], "active", "both branches run: {a}");
        let early = command_doc(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-b"})).await;
        refused(&h, command_request(&w1, "g1", &early), "not_eligible").await;
        let graph = h.get_json(&coordinator, "/v1/missions/m1/workitems").await;
        assert_eq!(graph["nodes"].as_array().map(Vec::len), Some(3), "{graph}");
        assert_eq!(
            graph["edges"],
            json!([{"from": "wi-b", "to": "wi-a"}]),
            "{graph}"
        );
    }
);

backends!(
    /// GAP-2, SM-T13, SM-5: a submitted result that fails review leaves `submitted` only by
    /// `work.fail` with the review's Evidence (without Evidence it is `evidence_missing`),
    /// and `failed` returns control to the Coordinator: the old owner can no longer start it,
    /// and only a new `work.offer` (SM-T3) moves it, under a new ownership epoch.
    async fn gap_2_sm_5_a_failed_review_fails_and_is_offered_again(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2) = group(&h).await;
        mission(&h, &coordinator, "g1", "mission-1").await;
        let authorize =
            json!({"workItemId": "wi-r", "missionId": "mission-1", "contract": contract(&[])});
        ok(&h, &coordinator, "g1", "work.authorize", authorize).await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-r", "o-1", &["w1"], &h, 600),
        )
        .await;
        ok(
            &h,
            &w1,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-r", "offerId": "o-1"}),
        )
        .await;
        let started = ok(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-r"})).await;
        let lease = started["state"]["lease"]["leaseId"].clone();
        let (artifact, evidence) = evidence_for(&h, &w1, "wi-r").await;
        let mut submit = command_doc(
            &h,
            &w1,
            "g1",
            "work.submit",
            json!({"workItemId": "wi-r", "artifacts": [artifact], "evidence": [evidence]}),
        )
        .await;
        submit["leaseId"] = lease;
        let submitted = h.send(command_request(&w1, "g1", &submit)).await;
        assert_eq!(
            submitted.json()["state"]["state"],
            "submitted",
            "{submitted:?}"
        );
        let bare = command_doc(
            &h,
            &coordinator,
            "g1",
            "work.fail",
            json!({"workItemId": "wi-r", "reason": "review_failed", "evidence": []}),
        )
        .await;
        refused(
            &h,
            command_request(&coordinator, "g1", &bare),
            "evidence_missing",
        )
        .await;
        let failed = ok(
            &h,
            &coordinator,
            "g1",
            "work.fail",
            json!({"workItemId": "wi-r", "reason": "review_failed", "evidence": [evidence]}),
        )
        .await;
        assert_eq!(failed["state"]["state"], "failed", "{failed}");
        assert_eq!(failed["events"][0]["type"], "work.failed");
        let restart = command_doc(&h, &w1, "g1", "work.start", json!({"workItemId": "wi-r"})).await;
        refused(
            &h,
            command_request(&w1, "g1", &restart),
            "illegal_transition",
        )
        .await;
        let again = ok(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-r", "o-2", &["w2"], &h, 600),
        )
        .await;
        assert_eq!(again["state"]["state"], "offered", "{again}");
        let accepted = ok(
            &h,
            &w2,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-r", "offerId": "o-2"}),
        )
        .await;
        assert_eq!(
            accepted["state"]["owner"]["ownershipEpoch"], 2,
            "{accepted}"
        );
    }
);

/// OFR-1: an offer is durable and carries its expiry: made before a restart, it is still
/// `live` with the same `expiresAt` afterwards, and its candidate accepts it then.
#[tokio::test]
async fn ofr_1_an_offer_outlives_a_restart() {
    let h = harness(Kind::Disk).await;
    let (coordinator, w1, _) = group(&h).await;
    let authorize = json!({"workItemId": "wi-o", "missionId": "m1", "contract": contract(&[])});
    ok(&h, &coordinator, "g1", "work.authorize", authorize).await;
    let offered = offer("wi-o", "o-1", &["w1"], &h, 600);
    ok(&h, &coordinator, "g1", "work.offer", offered.clone()).await;
    let h = restart(h).await;
    // The Worker comes back with a new session (it may have been offline all along).
    let token = h.session(&w1.key, "w1", "g1").await;
    let w1 = Agent { token, ..w1 };
    let view = h.get_json(&w1, "/v1/workitems/wi-o").await;
    assert_eq!(view["offers"][0]["status"], "live", "{view}");
    let expires = |text: &serde_json::Value| {
        text.as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            // Stored to the microsecond.
            .map(|t| t.timestamp_micros())
    };
    assert_eq!(
        expires(&view["offers"][0]["expiresAt"]),
        expires(&offered["expiresAt"])
    );
    let accepted = ok(
        &h,
        &w1,
        "g1",
        "work.accept_offer",
        json!({"workItemId": "wi-o", "offerId": "o-1"}),
    )
    .await;
    assert_eq!(accepted["state"]["state"], "queued", "{accepted}");
}
