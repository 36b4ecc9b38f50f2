//! Issue #46: a Group's quota at upload keeps a running upper bound of its usage and counts
//! exactly only at the quota's edge (`storage/src/artifacts/quota.rs`). The bound must never
//! admit past the quota: bytes that come back after a disposal count again for every Group
//! citing them, so no Group's bound survives them.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::json;

use super::harness::*;
use super::lifecycle::{gc, past_keep_bytes, renewed_in};

backends!(
    async fn bytes_back_after_a_disposal_are_counted_again(kind: Kind) {
        let h = harness_files(kind).await;
        let w1 = h.agent("w1", "g1", &["worker"]).await;
        let w2 = h.agent("w2", "g2", &["worker"]).await;
        let quota = h
            .admin_json(
                Method::PUT,
                "/v1/admin/groups/g1/quota",
                json!({"bytes": 100}),
            )
            .await;
        assert_eq!(quota.status, StatusCode::OK, "{kind:?}: {quota:?}");
        let shared = vec![9u8; 40];
        h.upload(&w2, &shared).await;
        h.put(&w1, "g1", &shared, &[]).await;
        past_keep_bytes(&h, 3).await;
        let report = gc(&h, false).await;
        assert_eq!(
            report["bytes"], 40,
            "{kind:?}: the shared bytes go: {report}"
        );
        let (w1, w2) = (
            renewed_in(&h, w1, "g1").await,
            renewed_in(&h, w2, "g2").await,
        );
        // 70 bytes fit the 40 disposed of.
        h.upload(&w1, &[7u8; 70]).await;
        // g2 uploads the shared bytes again: g1's manifest cites them, so they count for g1.
        h.upload(&w2, &shared).await;
        let usage = h
            .call(
                Method::GET,
                "/v1/admin/groups/g1/usage",
                Some(ADMIN),
                Body::empty(),
            )
            .await
            .json();
        assert_eq!(usage["bytes"], 110, "{kind:?}: {usage}");
        let before = h.fingerprint().await;
        let over = h
            .send(request(
                Method::POST,
                "/v1/blobs",
                Some(&w1.token),
                vec![5u8; 5],
            ))
            .await;
        assert_eq!(over.code(), "quota_exceeded", "{kind:?}: {over:?}");
        assert_unchanged(&before, &h.fingerprint().await, "an upload past the quota");
    }
);

backends!(
    /// The quota check costs an upload the same in a Group holding 60 blobs as in one holding
    /// 20 (SQLite's virtual-machine steps, counted by the write meter): it walked every blob
    /// the Group holds, twice, before the running bound.
    async fn the_quota_check_costs_the_same_however_many_blobs(kind: Kind) {
        let h = harness(kind).await;
        let w1 = h.agent("w1", "g1", &["worker"]).await;
        let quota = h
            .admin_json(
                Method::PUT,
                "/v1/admin/groups/g1/quota",
                json!({"bytes": 1_000_000, "artifacts": 1_000}),
            )
            .await;
        assert_eq!(quota.status, StatusCode::OK, "{kind:?}: {quota:?}");
        let mut costs = Vec::new();
        for n in 0u32..62 {
            let bytes = format!("blob number {n}").into_bytes();
            if n == 20 || n == 61 {
                h.store.start_metering_writes();
                h.upload(&w1, &bytes).await;
                costs.push(h.store.stop_metering_writes().vm_steps);
            } else {
                h.upload(&w1, &bytes).await;
            }
        }
        println!("{kind:?}: an upload's VM steps at 20 and 61 blobs: {costs:?}");
        assert_eq!(
            costs[0], costs[1],
            "{kind:?}: the 21st upload against the 62nd"
        );
    }
);

backends!(
    /// A quota cleared and set again counts anew: uploads while the Group had no quota never
    /// raised the bound kept before.
    async fn a_quota_set_again_counts_anew(kind: Kind) {
        let h = harness(kind).await;
        let w1 = h.agent("w1", "g1", &["worker"]).await;
        let set =
            |body: serde_json::Value| h.admin_json(Method::PUT, "/v1/admin/groups/g1/quota", body);
        assert_eq!(set(json!({"bytes": 100})).await.status, StatusCode::OK);
        h.upload(&w1, &[1u8; 10]).await;
        assert_eq!(
            set(json!({})).await.status,
            StatusCode::OK,
            "{kind:?}: cleared"
        );
        h.upload(&w1, &[2u8; 95]).await;
        assert_eq!(set(json!({"bytes": 100})).await.status, StatusCode::OK);
        let over = h
            .send(request(
                Method::POST,
                "/v1/blobs",
                Some(&w1.token),
                vec![3u8; 5],
            ))
            .await;
        assert_eq!(over.code(), "quota_exceeded", "{kind:?}: {over:?}");
    }
);
