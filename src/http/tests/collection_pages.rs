//! Issue #46: collection reads a due Mission's blobs a page at a time (`collection.rs`), so a
//! call costs what it decides: more blobs than a page, a call's `limit`, and the next call
//! carrying on, with every blob disposed of exactly once.

use axum::body::Body;
use axum::http::{Method, StatusCode};

use super::harness::*;
use super::lifecycle::{gc, past_keep_bytes};

backends!(
    async fn collection_pages_through_a_missions_blobs(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        for i in 0..300u32 {
            h.put(&worker, "g1", format!("blob {i}").as_bytes(), &[])
                .await;
        }
        past_keep_bytes(&h, 2).await;
        let limited = h
            .call(
                Method::POST,
                "/v1/admin/gc?limit=100",
                Some(ADMIN),
                Body::empty(),
            )
            .await;
        assert_eq!(limited.status, StatusCode::OK, "{kind:?}: {limited:?}");
        assert_eq!(limited.json()["blobs"], 100, "{kind:?}");
        let rest = gc(&h, false).await;
        assert_eq!(rest["blobs"], 200, "{kind:?}: {rest}");
        assert_eq!(h.stats().await.disposed, 300, "{kind:?}");
        assert_eq!(gc(&h, false).await["blobs"], 0, "{kind:?}");
    }
);
