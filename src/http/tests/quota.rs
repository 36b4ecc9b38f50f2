//! Issue #46: a Group's quota at upload keeps a running upper bound of its usage and counts
//! exactly only at the quota's edge (`storage/src/artifacts/quota.rs`). The bound must never
//! admit past the quota: bytes that come back after a disposal count again for every Group
//! citing them, so no Group's bound survives them.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::json;

use super::harness::*;
use super::lifecycle::{gc, past_keep_bytes, renewed_in};

/// Sets `group`'s quota to `body` through the admin route; expects 200.
async fn set_quota(h: &Harness, group: &str, body: serde_json::Value) {
    let quota = h
        .admin_json(
            Method::PUT,
            &format!("/v1/admin/groups/{group}/quota"),
            body,
        )
        .await;
    assert_eq!(quota.status, StatusCode::OK, "{:?}: {quota:?}", h.kind);
}

backends!(
    async fn bytes_back_after_a_disposal_are_counted_again(kind: Kind) {
        let h = harness_files(kind).await;
        let w1 = h.agent("w1", "g1", &["worker"]).await;
        let w2 = h.agent("w2", "g2", &["worker"]).await;
        set_quota(&h, "g1", json!({"bytes": 100})).await;
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
        set_quota(&h, "g1", json!({"bytes": 1_000_000, "artifacts": 1_000})).await;
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

backends!(
    /// An upload refused at the quota's edge costs the same in a Group holding 60 blobs as in
    /// one holding 20, once the edge was counted in the epoch (SQLite's virtual-machine steps,
    /// counted by the write meter): each refusal walked every blob the Group holds, in the
    /// writer, so a member at its quota could keep the writer busy. A disposal moves the
    /// epoch on, and the Group's room is counted anew (`bytes_back_after_a_disposal_…`).
    async fn a_refusal_at_the_quota_costs_the_same_however_many_blobs(kind: Kind) {
        let h = harness(kind).await;
        let mut costs = Vec::new();
        for (group, n) in [("g1", 20u32), ("g2", 60)] {
            let worker = h.agent(&format!("w-{group}"), group, &["worker"]).await;
            set_quota(&h, group, json!({"artifacts": n})).await;
            for i in 0..n {
                h.upload(&worker, format!("{group} blob {i}").as_bytes())
                    .await;
            }
            let refused = |i: u32| {
                h.send(request(
                    Method::POST,
                    "/v1/blobs",
                    Some(&worker.token),
                    format!("{group} one too many {i}").into_bytes(),
                ))
            };
            let first = refused(0).await;
            assert_eq!(first.code(), "quota_exceeded", "{kind:?}: {first:?}");
            let before = h.fingerprint().await;
            h.store.start_metering_writes();
            let again = refused(1).await;
            costs.push(h.store.stop_metering_writes().vm_steps);
            assert_eq!(again.code(), "quota_exceeded", "{kind:?}: {again:?}");
            // Refused by the usage remembered: nothing stored, nothing appended.
            assert_unchanged(&before, &h.fingerprint().await, "a refusal at the quota");
        }
        println!("{kind:?}: a refusal's VM steps at 20 and 60 blobs: {costs:?}");
        assert_eq!(costs[0], costs[1], "{kind:?}: 20 blobs against 60");
    }
);

backends!(
    /// What a refusal at the quota's edge remembers bounds the usage from below only until
    /// the usage shrinks: bytes disposed of by collection, or uncited uploads swept, make
    /// room at once, and an upload that fits in it is admitted.
    async fn room_made_after_a_refusal_is_used(kind: Kind) {
        let h = harness_files(kind).await;
        let w1 = h.agent("w1", "g1", &["worker"]).await;
        set_quota(&h, "g1", json!({"bytes": 100})).await;
        h.put(&w1, "g1", &[1u8; 50], &[]).await;
        h.upload(&w1, &[2u8; 30]).await;
        let over = |w: &Agent, bytes: Vec<u8>| {
            h.send(request(Method::POST, "/v1/blobs", Some(&w.token), bytes))
        };
        let refused = over(&w1, vec![3u8; 40]).await;
        assert_eq!(refused.code(), "quota_exceeded", "{kind:?}: {refused:?}");
        // The published 50 bytes are disposed of: 60 fit beside the 30 left.
        past_keep_bytes(&h, 3).await;
        let report = gc(&h, false).await;
        assert_eq!(report["bytes"], 50, "{kind:?}: {report}");
        let w1 = renewed_in(&h, w1, "g1").await;
        let admitted = over(&w1, vec![4u8; 60]).await;
        assert_eq!(
            admitted.status,
            StatusCode::CREATED,
            "{kind:?}: 60 bytes fit once 50 went: {admitted:?}"
        );
        let refused = over(&w1, vec![5u8; 35]).await;
        assert_eq!(refused.code(), "quota_exceeded", "{kind:?}: {refused:?}");
        // The uncited 30, uploaded three days ago, are swept: 35 fit beside the 60.
        let swept = h.store.artifacts().sweep().await.expect("sweep");
        assert_eq!(swept.blobs_removed, 1, "{kind:?}: {swept:?}");
        let admitted = over(&w1, vec![6u8; 35]).await;
        assert_eq!(
            admitted.status,
            StatusCode::CREATED,
            "{kind:?}: 35 bytes fit once 30 went: {admitted:?}"
        );
    }
);
