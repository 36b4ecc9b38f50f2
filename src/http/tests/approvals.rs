//! The start gate (SM-T6, CON-1.9): a WorkItem whose contract classifies it as high risk, or
//! says an Approval is required, is not started until an approver issues
//! `approval.grant_execution`; the grant keeps the WorkItem `queued` and executes nothing.

use serde_json::json;

use super::harness::*;
use super::work::{group, offer, ok};
use super::work_setup::{command_doc, command_request, contract};

backends!(
    /// SM-T6, CON-1.9: a `risk: "high"` contract, and a low-risk one with
    /// `approvalRequired: true`, each make `work.start` refused `approval_required` (nothing
    /// changed) until an `approver` sends `approval.grant_execution`. The grant is refused
    /// `forbidden` to the owning worker and to the coordinator (they lack the role) and
    /// `illegal_transition` before the WorkItem is queued; once granted, the WorkItem stays
    /// `queued` with `approvalGranted`, an `approval.execution_granted` Event is appended, and
    /// the owner's `work.start` succeeds.
    async fn sm_t6_con_1_9_a_gated_start_waits_for_an_approver(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        let approver = h.agent("a1", "g1", &["approver"]).await;
        let high_risk = {
            let mut c = contract(&[]);
            c["risk"] = json!("high");
            c
        };
        let required = {
            let mut c = contract(&[]);
            c["approvalRequired"] = json!(true);
            c
        };
        for (work_item, gated) in [("wi-high", high_risk), ("wi-required", required)] {
            ok(
                &h,
                &coordinator,
                "g1",
                "work.authorize",
                json!({"workItemId": work_item, "missionId": "m1", "contract": gated}),
            )
            .await;
            let offer_id = format!("o-{work_item}");
            ok(
                &h,
                &coordinator,
                "g1",
                "work.offer",
                offer(work_item, &offer_id, &["w1"], &h, 600),
            )
            .await;
            let grant = json!({"workItemId": work_item});
            // Before acceptance the WorkItem is `offered`: T6 starts from `queued` only.
            let early = command_doc(
                &h,
                &approver,
                "g1",
                "approval.grant_execution",
                grant.clone(),
            );
            refused(
                &h,
                command_request(&approver, "g1", &early.await),
                "illegal_transition",
            )
            .await;
            ok(
                &h,
                &w1,
                "g1",
                "work.accept_offer",
                json!({"workItemId": work_item, "offerId": offer_id}),
            )
            .await;
            let start = json!({"workItemId": work_item});
            let gated_start = command_doc(&h, &w1, "g1", "work.start", start.clone()).await;
            let answer = refused(
                &h,
                command_request(&w1, "g1", &gated_start),
                "approval_required",
            )
            .await;
            assert!(
                answer.json()["detail"]
                    .as_str()
                    .is_some_and(|detail| detail.contains("approval.grant_execution")),
                "{answer:?}"
            );
            // Neither the owner nor the coordinator holds the approver role.
            for unapproved in [&w1, &coordinator] {
                let doc = command_doc(
                    &h,
                    unapproved,
                    "g1",
                    "approval.grant_execution",
                    grant.clone(),
                )
                .await;
                refused(&h, command_request(unapproved, "g1", &doc), "forbidden").await;
            }
            let granted = ok(&h, &approver, "g1", "approval.grant_execution", grant).await;
            assert_eq!(granted["state"]["state"], "queued", "{granted}");
            assert_eq!(granted["state"]["approvalGranted"], true, "{granted}");
            assert_eq!(
                granted["events"][0]["type"], "approval.execution_granted",
                "{granted}"
            );
            let started = ok(&h, &w1, "g1", "work.start", start).await;
            assert_eq!(started["state"]["state"], "active", "{started}");
        }
    }
);
