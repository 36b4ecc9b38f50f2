//! Retention policies and holds through two servers at once over one PostgreSQL index (issue
//! #43): a policy reads the holds in force under its Group's lock, so a hold placed through
//! another server meanwhile is seen. Two `Store`s in one test process, as in `servers.rs`; on
//! the other backends this test says it skipped.

use axum::http::{Method, StatusCode};
use serde_json::json;

use super::harness::*;
use super::lifecycle::{end_mission, lift_hold, renewed_in, set_retention};

/// A hold placed through one server while another sets a policy that would let the held
/// artifact go now: the policy is refused `held`, or it committed first and the hold after
/// it. The policy read the holds before it took the Group's lock, so both could land with the
/// hold first in the log: a policy in force that a hold placed before it forbids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_and_a_policy_its_artifact_forbids_through_two_servers_never_land_hold_first() {
    if !postgres_available() {
        return;
    }
    let a = harness_files(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let worker = a.agent("w1", "g1", &["worker"]).await;
    let auditor = a.agent("aud", "g1", &["auditor"]).await;
    let artifact = a.put(&worker, "g1", b"held, or not yet", &[]).await;
    end_mission(&a, "g1", "mission-1").await;
    a.clock.advance(chrono::Duration::days(2));
    let auditor = renewed_in(&a, auditor, "g1").await;
    let (mut refused, mut first) = (0, 0);
    for round in 0..16 {
        let keep = set_retention(&a, "g1", json!({"keepBytes": "3650d"})).await;
        assert_eq!(keep.status, StatusCode::OK, "{keep:?}");
        let hold = json!({"artifact": artifact.to_string(), "reason": format!("round {round}")});
        let (placed, policy) = tokio::join!(
            a.admin_json(Method::POST, "/v1/admin/holds", hold),
            set_retention(&b, "g1", json!({"keepBytes": "1d"}))
        );
        assert_eq!(placed.status, StatusCode::CREATED, "{placed:?}");
        let hold_id = placed.json()["holdId"].as_str().expect("id").to_owned();
        if policy.status == StatusCode::CONFLICT {
            assert_eq!(policy.code(), "held");
            refused += 1;
        } else {
            assert_eq!(policy.status, StatusCode::OK, "{policy:?}");
            let page = a
                .get_json(&auditor, "/v1/groups/g1/events?limit=1000")
                .await;
            let events = page["events"].as_array().expect("events");
            let at = |kind: &str, field: &str, value: serde_json::Value| {
                events
                    .iter()
                    .rposition(|e| e["type"] == kind && e["payload"][field] == value)
            };
            let hold_at = at("hold.placed", "holdId", json!(hold_id));
            let policy_at = at("retention.set", "keepBytesSeconds", json!(86_400));
            assert!(
                policy_at < hold_at,
                "round {round}: the policy landed after a hold that forbids it"
            );
            first += 1;
        }
        let keep = set_retention(&a, "g1", json!({"keepBytes": "3650d"})).await;
        assert_eq!(keep.status, StatusCode::OK, "{keep:?}");
        let lifted = lift_hold(&a, &hold_id).await;
        assert_eq!(lifted.status, StatusCode::OK, "{lifted:?}");
    }
    eprintln!("policies refused: {refused}, committed before the hold: {first}");
}
