//! What every route shares: 405 for unsupported methods, the OpenAPI description and docs,
//! metrics, health and request ids.

use axum::body::Body;
use axum::http::{Method, StatusCode};

use super::harness::*;

backends!(
    async fn unsupported_methods_answer_405(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let uri = format!("/v1/blobs/{}", digest_of(b"x").blake3);
        for (method, uri) in [
            (Method::TRACE, uri.as_str()),
            (Method::PATCH, uri.as_str()),
            (Method::TRACE, "/v1/blobs"),
            (Method::DELETE, "/v1/artifacts"),
        ] {
            let unsupported = request(method, uri, Some(&worker.token), Body::empty());
            let answer = refused(&h, unsupported, "method_not_allowed").await;
            assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED);
        }
    }
);

#[tokio::test]
async fn openapi_and_metrics_are_served() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    h.put(&worker, "g1", b"counted", &[]).await;
    let spec = h
        .call(Method::GET, "/v1/openapi.json", None, Body::empty())
        .await
        .json();
    for path in [
        "/v1/blobs/{digest}",
        "/v1/artifacts",
        "/v1/artifacts/{digest}/content",
        "/v1/sessions",
        "/v1/admin/agents",
    ] {
        assert!(
            spec["paths"].get(path).is_some(),
            "{path} missing from the OpenAPI description"
        );
    }
    let docs = h.call(Method::GET, "/docs/", None, Body::empty()).await;
    assert_eq!(docs.status, StatusCode::OK);
    assert!(
        !String::from_utf8_lossy(&docs.body).contains("https://"),
        "docs load no external assets"
    );
    let metrics = h
        .call(Method::GET, "/metrics", Some(ADMIN), Body::empty())
        .await;
    assert!(String::from_utf8_lossy(&metrics.body).contains("weft_upload_bytes_total"));
    assert!(
        h.call(Method::GET, "/healthz", None, Body::empty())
            .await
            .headers
            .contains_key("x-request-id")
    );
}

backends!(
    /// Cursors are SQLite integers: `after` above i64::MAX is `bad_request` on every paged
    /// route (it was a 500), and i64::MAX itself is an empty page.
    async fn cursors_above_i64_are_bad_requests(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let artifact = h.put(&worker, "g1", b"paged", &[]).await;
        let routes = [
            "/v1/artifacts".to_owned(),
            "/v1/evidence".to_owned(),
            "/v1/groups/g1/events".to_owned(),
            format!("/v1/artifacts/{artifact}/evidence"),
        ];
        for route in routes {
            let over = format!("{route}?after=9223372036854775808");
            let answer = h
                .call(Method::GET, &over, Some(&worker.token), Body::empty())
                .await;
            assert_eq!(answer.code(), "bad_request", "{over}: {answer:?}");
            let max = format!("{route}?after=9223372036854775807");
            let answer = h
                .call(Method::GET, &max, Some(&worker.token), Body::empty())
                .await;
            assert_eq!(answer.status, StatusCode::OK, "{max}: {answer:?}");
        }
    }
);
