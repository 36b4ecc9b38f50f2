//! The work contract over HTTP (CON-1, CON-6): `work.authorize` takes a contract only with
//! every CON-1 item present; prose may supplement the fields (`notes`) but never replace one.

use serde_json::json;

use super::harness::*;
use super::work::{group, ok};
use super::work_setup::{command_doc, command_request, contract};

/// Each CON-1 item and the contract fields that carry it.
const ITEMS: [(&str, &[&str]); 9] = [
    ("CON-1.1", &["objective", "deliverables"]),
    ("CON-1.2", &["acceptanceCriteria"]),
    ("CON-1.3", &["inputs", "dependsOn"]),
    ("CON-1.4", &["permissions"]),
    ("CON-1.5", &["requiredCapabilities"]),
    ("CON-1.6", &["deadline", "urgency", "businessImpact"]),
    ("CON-1.7", &["budgets"]),
    ("CON-1.8", &["retryPolicy"]),
    ("CON-1.9", &["risk", "approvalRequired"]),
];

backends!(
    /// CON-1, CON-1.1, CON-1.2, CON-1.3, CON-1.4, CON-1.5, CON-1.6, CON-1.7, CON-1.8, CON-1.9:
    /// a contract missing any field of any CON-1 item (objective, deliverables, acceptance
    /// criteria, inputs, dependencies, permissions, capabilities, deadline, urgency, business
    /// impact, the six budgets, the retry policy, risk, the approval requirement) or any one of
    /// the six budget dimensions is `invalid_command` and changes nothing. CON-6: prose
    /// (`notes`) supplements a complete contract and is kept in the view.
    async fn con_1_con_6_a_contract_carries_every_item(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, _, _) = group(&h).await;
        let mut missing_fields: Vec<(String, serde_json::Value)> = Vec::new();
        for (item, fields) in ITEMS {
            for field in fields {
                let mut partial = contract(&[]);
                let removed = partial.as_object_mut().and_then(|c| c.remove(*field));
                assert!(removed.is_some(), "{item}: {field} is in the contract");
                missing_fields.push((format!("{item} {field}"), partial));
            }
        }
        for dimension in [
            "financial",
            "tokens",
            "toolCalls",
            "computeSeconds",
            "wallClockSeconds",
            "sideEffects",
        ] {
            let mut partial = contract(&[]);
            let removed = partial["budgets"]
                .as_object_mut()
                .and_then(|b| b.remove(dimension));
            assert!(removed.is_some(), "CON-1.7: {dimension} is a budget");
            missing_fields.push((format!("CON-1.7 budgets.{dimension}"), partial));
        }
        for (what, partial) in missing_fields {
            let payload = json!({"workItemId": "wi-c", "missionId": "m1", "contract": partial});
            let doc = command_doc(&h, &coordinator, "g1", "work.authorize", payload).await;
            let answer = refused(
                &h,
                command_request(&coordinator, "g1", &doc),
                "invalid_command",
            )
            .await;
            assert!(!answer.body.is_empty(), "{what}");
        }
        let mut annotated = contract(&[]);
        annotated["notes"] = json!("Prefer the 2025 corpus; ask before using the archive.");
        ok(
            &h,
            &coordinator,
            "g1",
            "work.authorize",
            json!({"workItemId": "wi-c", "missionId": "m1", "contract": annotated}),
        )
        .await;
        let view = h.get_json(&coordinator, "/v1/workitems/wi-c").await;
        assert_eq!(
            view["contract"]["notes"],
            json!("Prefer the 2025 corpus; ask before using the archive.")
        );
        assert_eq!(view["contract"]["objective"], contract(&[])["objective"]);
    }
);
