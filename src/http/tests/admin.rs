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

backends!(
    /// The operator's reads (issue #16): a Group's Memberships and an Agent's key history;
    /// a session, even a coordinator's, is refused, and unknown names are `not_found`.
    async fn the_operator_lists_members_and_an_agents_keys(kind: Kind) {
        let h = harness(kind).await;
        let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
        let _worker = h.agent("w1", "g1", &["worker", "reviewer"]).await;
        let answer = h
            .admin_json(
                Method::PUT,
                "/v1/admin/groups/g1/members/w1",
                json!({"roles": ["worker"], "missions": ["m1"]}),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        let new_key = SigningKey::from_bytes(&[7; 32]);
        let answer = h
            .admin_json(
                Method::POST,
                "/v1/admin/agents/w1/keys",
                json!({"publicKey": BASE64.encode(new_key.verifying_key().as_bytes())}),
            )
            .await;
        assert!(answer.status.is_success(), "{answer:?}");

        let list = h
            .call(
                Method::GET,
                "/v1/admin/groups/g1/members",
                Some(ADMIN),
                Body::empty(),
            )
            .await;
        assert_eq!(list.status, StatusCode::OK, "{list:?}");
        let list = list.json();
        assert_eq!(list["groupId"], "g1");
        assert_eq!(list["members"][0]["agentId"], "c1");
        assert_eq!(list["members"][0]["roles"], json!(["coordinator"]));
        assert!(list["members"][0].get("missions").is_none());
        assert_eq!(list["members"][1]["agentId"], "w1");
        assert_eq!(list["members"][1]["missions"], json!(["m1"]));
        assert_eq!(list["members"][1]["epoch"], 2);

        let record = h
            .call(
                Method::GET,
                "/v1/admin/agents/w1",
                Some(ADMIN),
                Body::empty(),
            )
            .await;
        assert_eq!(record.status, StatusCode::OK, "{record:?}");
        let record = record.json();
        let keys = record["keys"].as_array().expect("keys");
        assert_eq!(keys.len(), 2, "{record}");
        assert_eq!(
            keys[0]["publicKey"],
            BASE64.encode(new_key.verifying_key().as_bytes()),
            "the current key first"
        );
        assert!(keys[0].get("retiredAt").is_none());
        assert!(keys[1]["retiredAt"].is_string());
        assert_eq!(record["memberships"][0]["groupId"], "g1");

        for uri in ["/v1/admin/groups/g1/members", "/v1/admin/agents/w1"] {
            let as_session = request(Method::GET, uri, Some(&coordinator.token), Body::empty());
            refused(&h, as_session, "forbidden").await;
        }
        for uri in ["/v1/admin/groups/g9/members", "/v1/admin/agents/nobody"] {
            refused(
                &h,
                request(Method::GET, uri, Some(ADMIN), Body::empty()),
                "not_found",
            )
            .await;
        }
    }
);
