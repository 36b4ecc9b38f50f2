//! Offers over HTTP: a candidate's structured decline (OFR-9) and the structured selection
//! basis every offer records (OFR-10), in the WorkItem view and in the log.

use serde_json::{Value, json};

use super::harness::*;
use super::work::{basis, group, offer, ok};
use super::work_setup::{command_doc, command_request, contract};

/// OFR-9's reasons, and the catch-all the protocol's "such as" leaves room for.
const REASONS: [&str; 7] = [
    "capacity",
    "deadline",
    "capability",
    "authorization",
    "dependency",
    "budget",
    "other",
];

backends!(
    /// OFR-9: `work.decline_offer` carries a structured reason. Each reason is
    /// accepted on its own offer, the WorkItem stays `offered`, the `work.offer_declined`
    /// Event and the view's offer record the reason under the candidate, and the declined
    /// candidate can no longer accept that offer. A reason outside the list, or none, is
    /// `invalid_command` and changes nothing.
    async fn ofr_9_a_decline_carries_a_structured_reason(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-d", "missionId": "m1", "contract": contract(&[])}),
        )
        .await;
        for reason in REASONS {
            let offer_id = format!("o-{reason}");
            ok(
                &h,
                &coordinator,
                "g1",
                "work.offer",
                offer("wi-d", &offer_id, &["w1"], &h, 600),
            )
            .await;
            let declined = ok(
                &h,
                &w1,
                "g1",
                "work.decline_offer",
                json!({"workItemId": "wi-d", "offerId": offer_id, "reason": reason,
                       "detail": "structured, with a note"}),
            )
            .await;
            assert_eq!(declined["state"]["state"], "offered", "{declined}");
            assert_eq!(declined["events"][0]["type"], "work.offer_declined");
            let view = h.get_json(&w1, "/v1/workitems/wi-d").await;
            let recorded = view["offers"]
                .as_array()
                .and_then(|offers| offers.iter().find(|o| o["offerId"] == offer_id.as_str()))
                .map(|o| o["declined"]["w1"].clone());
            assert_eq!(recorded, Some(json!(reason)), "{view}");
            let accept = command_doc(
                &h,
                &w1,
                "g1",
                "work.accept_offer",
                json!({"workItemId": "wi-d", "offerId": offer_id}),
            )
            .await;
            refused(&h, command_request(&w1, "g1", &accept), "forbidden").await;
        }
        let logged: Vec<Value> = h
            .events_of(&w1, "work.offer_declined")
            .await
            .iter()
            .map(|event| event["payload"]["detail"]["reason"].clone())
            .collect();
        assert_eq!(logged, REASONS.map(|reason| json!(reason)), "in the log");
        ok(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-d", "o-last", &["w1"], &h, 600),
        )
        .await;
        for payload in [
            json!({"workItemId": "wi-d", "offerId": "o-last", "reason": "bored"}),
            json!({"workItemId": "wi-d", "offerId": "o-last"}),
        ] {
            let doc = command_doc(&h, &w1, "g1", "work.decline_offer", payload).await;
            refused(&h, command_request(&w1, "g1", &doc), "invalid_command").await;
        }
    }
);

backends!(
    /// OFR-10: every assignment records a structured selection basis. A `work.offer` missing
    /// any one of its six fields (capability matches, authorization eligibility,
    /// availability estimate, expected cost, reliability Evidence, policy rules), or with no
    /// basis at all, is `invalid_command` and changes nothing; an accepted offer's basis is
    /// in its `work.offered` Event and in the WorkItem view, field for field.
    async fn ofr_10_an_offer_records_its_selection_basis(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-b", "missionId": "m1", "contract": contract(&[])}),
        )
        .await;
        let fields = [
            "capabilityMatches",
            "authorizationEligible",
            "availabilityEstimate",
            "expectedCost",
            "reliabilityEvidence",
            "policyRules",
        ];
        for missing in fields.iter().copied().chain(["selectionBasis"]) {
            let mut payload = offer("wi-b", "o-partial", &["w1"], &h, 600);
            let removed = match payload["selectionBasis"].as_object_mut() {
                Some(basis) if missing != "selectionBasis" => basis.remove(missing),
                _ => payload
                    .as_object_mut()
                    .and_then(|p| p.remove("selectionBasis")),
            };
            assert!(removed.is_some(), "{missing} was in the offer");
            let doc = command_doc(&h, &coordinator, "g1", "work.offer", payload).await;
            refused(
                &h,
                command_request(&coordinator, "g1", &doc),
                "invalid_command",
            )
            .await;
        }
        let offered = ok(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-b", "o-whole", &["w1"], &h, 600),
        )
        .await;
        assert_eq!(offered["events"][0]["type"], "work.offered");
        let logged = h.events_of(&w1, "work.offered").await;
        assert_eq!(logged.len(), 1, "{logged:?}");
        assert_eq!(logged[0]["payload"]["detail"]["selectionBasis"], basis());
        let view = h.get_json(&w1, "/v1/workitems/wi-b").await;
        assert_eq!(view["offers"][0]["offerId"], "o-whole", "{view}");
        for field in fields {
            assert_eq!(
                view["offers"][0]["selectionBasis"][field],
                basis()[field],
                "{field}: {view}"
            );
        }
    }
);

backends!(
    /// A WorkItem's view lists its newest 16 offers (`offersTruncated` past them), the live
    /// one last: a Coordinator offering it again and again no longer makes every Command on it
    /// answer every offer so far (each new offer withdraws the live one, T3).
    async fn the_view_lists_the_newest_offers(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-o", "missionId": "m1", "contract": contract(&[])}),
        )
        .await;
        let mut answer = Value::Null;
        for n in 0..20 {
            let offer_id = format!("o-{n}");
            answer = ok(
                &h,
                &coordinator,
                "g1",
                "work.offer",
                offer("wi-o", &offer_id, &["w1"], &h, 600),
            )
            .await;
            if n == 15 {
                assert_eq!(answer["state"]["offersTruncated"], false, "{kind:?}");
            }
        }
        let shown = &answer["state"];
        let ids: Vec<&str> = shown["offers"]
            .as_array()
            .expect("offers")
            .iter()
            .map(|offer| offer["offerId"].as_str().expect("id"))
            .collect();
        let expected: Vec<String> = (4..20).map(|n| format!("o-{n}")).collect();
        assert_eq!(ids, expected, "{kind:?}");
        assert_eq!(shown["offersTruncated"], true, "{kind:?}");
        assert_eq!(shown["offers"][15]["status"], "live", "{kind:?}");
        assert_eq!(shown["offers"][14]["status"], "withdrawn", "{kind:?}");
        let view = h.get_json(&w1, "/v1/workitems/wi-o").await;
        assert_eq!(
            view, *shown,
            "{kind:?}: GET shows what the Command answered"
        );
    }
);

backends!(
    /// OFR-3: an exclusive WorkItem is offered one candidate at a time, the highest-ranked
    /// first. The Authority keeps the sequence: each `work.offer` withdraws the live one (T3),
    /// so a candidate the Coordinator has moved past can no longer accept
    /// (`offer_withdrawn`, nothing changed), nor can one who declined (`forbidden` while its
    /// offer is live, `offer_withdrawn` after), and the next candidate's acceptance wins
    /// ownership epoch 1. The log shows the offers
    /// in the Coordinator's order, each naming one candidate.
    async fn ofr_3_an_exclusive_work_item_is_offered_one_candidate_at_a_time(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2) = group(&h).await;
        let w3 = h.agent("w3", "g1", &["worker"]).await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-s", "missionId": "m1", "contract": contract(&[])}),
        )
        .await;
        // The highest-ranked candidate first: it declines.
        let ranked = [("o-1", "w1"), ("o-2", "w2"), ("o-3", "w3")];
        ok(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-s", "o-1", &["w1"], &h, 600),
        )
        .await;
        ok(
            &h,
            &w1,
            "g1",
            "work.decline_offer",
            json!({"workItemId": "wi-s", "offerId": "o-1", "reason": "capacity"}),
        )
        .await;
        let declined = command_doc(
            &h,
            &w1,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-s", "offerId": "o-1"}),
        )
        .await;
        refused(&h, command_request(&w1, "g1", &declined), "forbidden").await;
        // The next: the Coordinator moves on before it answers.
        ok(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-s", "o-2", &["w2"], &h, 600),
        )
        .await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-s", "o-3", &["w3"], &h, 600),
        )
        .await;
        let late = command_doc(
            &h,
            &w2,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-s", "offerId": "o-2"}),
        )
        .await;
        refused(&h, command_request(&w2, "g1", &late), "offer_withdrawn").await;
        refused(&h, command_request(&w1, "g1", &declined), "offer_withdrawn").await;
        let accepted = ok(
            &h,
            &w3,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-s", "offerId": "o-3"}),
        )
        .await;
        assert_eq!(accepted["state"]["state"], "queued", "{kind:?}: {accepted}");
        assert_eq!(accepted["state"]["owner"]["agentId"], "w3", "{kind:?}");
        assert_eq!(accepted["state"]["owner"]["ownershipEpoch"], 1, "{kind:?}");
        let offered: Vec<(Value, Value)> = h
            .events_of(&coordinator, "work.offered")
            .await
            .iter()
            .map(|event| {
                let detail = &event["payload"]["detail"];
                (detail["offerId"].clone(), detail["candidates"].clone())
            })
            .collect();
        let expected: Vec<(Value, Value)> = ranked
            .iter()
            .map(|(offer_id, candidate)| (json!(offer_id), json!([candidate])))
            .collect();
        assert_eq!(offered, expected, "{kind:?}: the offers in order");
    }
);
