//! Administration: the admin token, Agent registration, and ids with path or Unicode tricks.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use base64::Engine as _;
use ed25519_dalek::SigningKey;
use serde_json::json;
use weft_api::dsse::BASE64;

use super::harness::*;

backends!(
    async fn ids_with_path_and_unicode_tricks_are_refused(kind: Kind) {
        let h = harness(kind).await;
        let long = "a".repeat(10 * 1024);
        for bad in [
            "%2e%2e",
            "..",
            "..%2Fetc",
            "a%2Fb",
            "a%00b",
            "a%5Cb",
            "caf%C3%A9",
            "cafe%CC%81",
            "a%E2%80%8Bb",
            "a%E2%80%AEb",
            "%EF%BD%81",
            "a%20b",
            long.as_str(),
        ] {
            let put = request(
                Method::PUT,
                &format!("/v1/admin/groups/{bad}"),
                Some(ADMIN),
                Body::empty(),
            );
            let answer = refused(&h, put, "invalid_id").await;
            assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{bad}");
        }
        for bad in [
            "../x",
            "a\u{0}b",
            "a\\b",
            "cafe\u{301}",
            "a\u{200b}b",
            "a\u{202e}b",
            long.as_str(),
        ] {
            let body = json!({"agentId": bad, "publicKey": BASE64.encode([9u8; 32]), "agentCardVersion": "1"});
            refused(
                &h,
                admin_request(Method::POST, "/v1/admin/agents", body),
                "invalid_id",
            )
            .await;
        }
    }
);

backends!(
    async fn admin_calls_need_the_admin_token(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let as_worker = request(
            Method::PUT,
            "/v1/admin/groups/g2",
            Some(&worker.token),
            Body::empty(),
        );
        let answer = refused(&h, as_worker, "forbidden").await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN);
        let anonymous = request(Method::PUT, "/v1/admin/groups/g2", None, Body::empty());
        let answer = refused(&h, anonymous, "unauthorized").await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
        let challenge = answer
            .headers
            .get("www-authenticate")
            .map(|v| v.to_str().ok());
        assert!(
            challenge
                .flatten()
                .is_some_and(|c| c.starts_with("Bearer ")),
            "a 401 names its scheme (RFC 9110 §11.6.1): {challenge:?}"
        );
        let forged = request(
            Method::PUT,
            "/v1/admin/groups/g2",
            Some("not-a-token"),
            Body::empty(),
        );
        refused(&h, forged, "unauthorized").await;
        // Same agent, another key: conflict.
        let other = SigningKey::from_bytes(&[3u8; 32]);
        let body = json!({"agentId": "w1", "publicKey": BASE64.encode(other.verifying_key().as_bytes()), "agentCardVersion": "1"});
        let answer = refused(
            &h,
            admin_request(Method::POST, "/v1/admin/agents", body),
            "conflict",
        )
        .await;
        assert_eq!(answer.status, StatusCode::CONFLICT);
        for body in [
            json!({"agentId": "w9", "publicKey": "AAAA", "agentCardVersion": "1"}),
            json!({"agentId": "w9", "publicKey": BASE64.encode([1u8; 32]), "agentCardVersion": "1", "extra": 1}),
        ] {
            refused(
                &h,
                admin_request(Method::POST, "/v1/admin/agents", body),
                "bad_request",
            )
            .await;
        }
        // Every route but /healthz needs authentication.
        assert_eq!(
            h.call(Method::GET, "/healthz", None, Body::empty())
                .await
                .status,
            StatusCode::OK
        );
        for uri in ["/metrics", "/v1/artifacts", "/v1/groups/g1/events"] {
            refused(
                &h,
                request(Method::GET, uri, None, Body::empty()),
                "unauthorized",
            )
            .await;
        }
    }
);
