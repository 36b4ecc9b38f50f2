//! Isolation between Groups (CTX-5): another Group learns nothing about your bytes, not even
//! whether they exist.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::json;

use super::harness::*;

backends!(
    async fn other_groups_learn_nothing_about_your_bytes(kind: Kind) {
        let h = harness(kind).await;
        let alice = h.agent("alice", "ga", &["worker"]).await;
        let bob = h.agent("bob", "gb", &["worker"]).await;
        let secret = b"group A's secret";
        let id = h.put(&alice, "ga", secret, &[]).await;
        let sha = digest_of(secret).sha256;
        for uri in [
            format!("/v1/artifacts/{id}"),
            format!("/v1/artifacts/{id}/content"),
            format!("/v1/artifacts/{sha}"),
        ] {
            assert_eq!(
                h.call(Method::GET, &uri, Some(&bob.token), Body::empty())
                    .await
                    .code(),
                "not_found",
                "{uri}"
            );
        }
        let head = h
            .call(
                Method::HEAD,
                &format!("/v1/blobs/{id}"),
                Some(&bob.token),
                Body::empty(),
            )
            .await;
        assert_eq!(head.status, StatusCode::NOT_FOUND);
        let head = h
            .call(
                Method::HEAD,
                &format!("/v1/blobs/{id}"),
                Some(&alice.token),
                Body::empty(),
            )
            .await;
        assert_eq!(head.status, StatusCode::OK);
        // Uploading A's bytes answers exactly as for new bytes: 201, not 200.
        let upload = h
            .call(
                Method::PUT,
                &format!("/v1/blobs/{id}"),
                Some(&bob.token),
                secret.to_vec(),
            )
            .await;
        assert_eq!(upload.status, StatusCode::CREATED);
        let fresh = h
            .call(
                Method::PUT,
                &format!("/v1/blobs/{}", digest_of(b"new").blake3),
                Some(&bob.token),
                b"new".to_vec(),
            )
            .await;
        assert_eq!(fresh.status, StatusCode::CREATED);
        let listing = h
            .call(
                Method::GET,
                "/v1/artifacts",
                Some(&bob.token),
                Body::empty(),
            )
            .await;
        assert_eq!(listing.json()["items"], json!([]), "{kind:?}");
        let events = h
            .call(
                Method::GET,
                "/v1/groups/ga/events",
                Some(&bob.token),
                Body::empty(),
            )
            .await;
        assert_eq!(events.code(), "not_found");
        // Having uploaded the bytes, bob may publish them in his own Group.
        h.put(&bob, "gb", secret, &[]).await;
        assert_eq!(
            h.call(
                Method::GET,
                &format!("/v1/artifacts/{id}/content"),
                Some(&bob.token),
                Body::empty()
            )
            .await
            .status,
            StatusCode::OK
        );
        let view = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{id}"),
                Some(&bob.token),
                Body::empty(),
            )
            .await;
        assert_eq!(
            view.json()["manifests"].as_array().map(Vec::len),
            Some(1),
            "bob sees only his own manifest"
        );
    }
);
