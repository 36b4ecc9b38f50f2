//! Lifecycle across Groups that published the same bytes: what one Group's log tells of a
//! disposal is its own; which other Groups published the bytes, their Missions, policies and
//! when those ended are theirs to know (the operator's report has it all).

use axum::http::{Method, StatusCode};
use serde_json::json;

use super::harness::*;
use super::lifecycle::{end_mission, gc, lift_hold, renewed_in, set_retention};

backends!(
    /// Two Groups publish the same bytes, both Missions end, both policies let them go: each
    /// Group's `artifact.disposed` names only its own Mission, policy and reason. (Each named
    /// the other's too: its Mission's id, when it ended, its policy.)
    async fn a_disposal_tells_each_group_only_its_own(kind: Kind) {
        let h = harness_files(kind).await;
        let w1 = h.agent("w1", "g1", &["worker"]).await;
        let w2 = h.agent("w2", "g2", &["worker"]).await;
        let auditors = [
            h.agent("aud1", "g1", &["auditor"]).await,
            h.agent("aud2", "g2", &["auditor"]).await,
        ];
        let bytes = vec![4u8; 30_000];
        let artifact = h.put(&w1, "g1", &bytes, &[]).await;
        h.put(&w2, "g2", &bytes, &[]).await;
        for (group, keep) in [("g1", "1d"), ("g2", "2d")] {
            let set = set_retention(&h, group, json!({"keepBytes": keep})).await;
            assert_eq!(set.status, StatusCode::OK, "{kind:?}: {set:?}");
        }
        end_mission(&h, "g1", "mission-1").await;
        end_mission(&h, "g2", "mission-1-g2").await;
        h.clock.advance(chrono::Duration::days(3));
        let report = gc(&h, false).await;
        let operators = &report["disposed"][0];
        assert_eq!(operators["artifact"], artifact.to_string(), "{report}");
        for told in ["mission-1-g2", "group g2", "group g1"] {
            assert!(
                operators["policy"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(told)
                    || operators["reason"]
                        .as_str()
                        .unwrap_or_default()
                        .contains(told),
                "{kind:?}: the operator is told of {told}: {report}"
            );
        }
        for (auditor, (own, other)) in auditors.into_iter().zip([("g1", "g2"), ("g2", "g1")]) {
            let auditor = renewed_in(&h, auditor, own).await;
            let page = h
                .get_json(&auditor, &format!("/v1/groups/{own}/events?limit=1000"))
                .await;
            let disposed: Vec<&serde_json::Value> = page["events"]
                .as_array()
                .expect("events")
                .iter()
                .filter(|e| e["type"] == "artifact.disposed")
                .collect();
            assert_eq!(disposed.len(), 1, "{kind:?}: {own}");
            let told = disposed[0]["payload"].to_string();
            assert!(told.contains(&format!("group {own}")), "{kind:?}: {told}");
            assert!(
                !told.contains(other),
                "{kind:?}: {own} is told of {other}: {told}"
            );
        }
    }
);

backends!(
    /// The operator holds bytes only g1 published; g2 publishes them afterwards. The hold
    /// stays g1's: lifting it appends `hold.lifted` to g1 alone, and g2's approvers never see
    /// it. (It was judged by who published the bytes at each read: g2 got a `hold.lifted`
    /// for a hold it never had placed, and its approvers listed it, with its reason and a
    /// `placedAt` before their own publication.)
    async fn an_operators_hold_stays_in_the_groups_it_was_placed_in(kind: Kind) {
        let h = harness(kind).await;
        let w1 = h.agent("w1", "g1", &["worker"]).await;
        let w2 = h.agent("w2", "g2", &["worker"]).await;
        let approver = h.agent("a2", "g2", &["approver", "auditor"]).await;
        let bytes = b"held before g2 had them";
        let artifact = h.put(&w1, "g1", bytes, &[]).await;
        let placed = h
            .admin_json(
                Method::POST,
                "/v1/admin/holds",
                json!({"artifact": artifact.to_string(), "reason": "g1's matter"}),
            )
            .await;
        assert_eq!(placed.status, StatusCode::CREATED, "{kind:?}: {placed:?}");
        assert_eq!(placed.json()["groups"], json!(["g1"]), "{placed:?}");
        let hold_id = placed.json()["holdId"].as_str().expect("id").to_owned();
        h.put(&w2, "g2", bytes, &[]).await;
        let listed = h.get_json(&approver, "/v1/groups/g2/holds").await;
        assert_eq!(listed["holds"], json!([]), "{kind:?}: {listed}");
        let lifted = lift_hold(&h, &hold_id).await;
        assert_eq!(lifted.status, StatusCode::OK, "{kind:?}: {lifted:?}");
        assert_eq!(lifted.json()["groups"], json!(["g1"]), "{lifted:?}");
        let g2 = h
            .get_json(&approver, "/v1/groups/g2/events?limit=1000")
            .await;
        let heard: Vec<&serde_json::Value> = g2["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with("hold.")))
            .collect();
        assert!(heard.is_empty(), "{kind:?}: {heard:?}");
    }
);

backends!(
    /// g2's approver holds bytes g1 and g2 both published. g1's Mission ends and its policy
    /// lets its records go: g1's manifest of them goes (`records.disposed` in g1), while the
    /// bytes stay for g2. (g2's hold kept g1's records past g1's policy, with nothing in g1's
    /// log, and g1's approvers could not see why.)
    async fn another_groups_hold_keeps_its_bytes_not_this_groups_records(kind: Kind) {
        let h = harness_files(kind).await;
        let w1 = h.agent("w1", "g1", &["worker"]).await;
        let w2 = h.agent("w2", "g2", &["worker"]).await;
        let approver = h.agent("a2", "g2", &["approver"]).await;
        let auditor = h.agent("aud1", "g1", &["auditor"]).await;
        let bytes = vec![5u8; 30_000];
        let artifact = h.put(&w1, "g1", &bytes, &[]).await;
        h.put(&w2, "g2", &bytes, &[]).await;
        let placed = h
            .json_as(
                Method::POST,
                "/v1/groups/g2/holds",
                &approver.token,
                json!({"artifact": artifact.to_string(), "reason": "g2's review"}),
                &[],
            )
            .await;
        assert_eq!(placed.status, StatusCode::CREATED, "{kind:?}: {placed:?}");
        let set = set_retention(&h, "g1", json!({"keepBytes": "1d", "keepRecords": "2d"})).await;
        assert_eq!(set.status, StatusCode::OK, "{kind:?}: {set:?}");
        end_mission(&h, "g1", "mission-1").await;
        h.clock.advance(chrono::Duration::days(3));
        let report = gc(&h, false).await;
        assert!(
            report["disposed"].as_array().is_some_and(Vec::is_empty),
            "{kind:?}: g2's hold keeps the bytes: {report}"
        );
        let auditor = renewed_in(&h, auditor, "g1").await;
        let disposed = h.events_of(&auditor, "records.disposed").await;
        assert_eq!(disposed.len(), 1, "{kind:?}: g1's records went: {report}");
        let w2 = renewed_in(&h, w2, "g2").await;
        let content = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{artifact}/content"),
                Some(&w2.token),
                axum::body::Body::empty(),
            )
            .await;
        assert_eq!(content.status, StatusCode::OK, "{kind:?}: {content:?}");
    }
);
