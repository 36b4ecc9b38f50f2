//! Paging parameters as the OpenAPI document states them (issue #16): `limit` is a u32 on
//! every listing, clamped to the route's page size but refused above `u32::MAX`, so a client
//! generated from the document never sends a value the server would read differently.

use axum::body::Body;
use axum::http::{Method, StatusCode};

use super::harness::*;

backends!(
    async fn limit_is_a_u32_on_every_listing(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let digest = format!("blake3:{}", "a".repeat(64));
        for route in [
            "/v1/artifacts".to_owned(),
            "/v1/evidence".to_owned(),
            "/v1/groups/g1/events".to_owned(),
            format!("/v1/artifacts/{digest}/provenance"),
        ] {
            let largest = format!("{route}?limit={}", u32::MAX);
            let answer = h
                .call(Method::GET, &largest, Some(&worker.token), Body::empty())
                .await;
            assert!(
                matches!(answer.status, StatusCode::OK | StatusCode::NOT_FOUND),
                "{largest}: {answer:?}"
            );
            let above = format!("{route}?limit={}", u64::from(u32::MAX) + 1);
            refused(
                &h,
                request(Method::GET, &above, Some(&worker.token), Body::empty()),
                "bad_request",
            )
            .await;
        }
    }
);
