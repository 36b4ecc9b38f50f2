//! Sessions (DESIGN §8.1): signed session requests and their checks, and the ways a session
//! goes stale (replaced, membership changed, expired).

use axum::body::Body;
use axum::http::{Method, StatusCode};
use ed25519_dalek::SigningKey;
use serde_json::json;
use weft_api::Envelope;
use weft_api::dsse::MANIFEST_TYPE;

use super::harness::*;

backends!(
    async fn session_requests_are_checked(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        h.agent("w2", "g2", &["worker"]).await;
        let skewed =
            (weft_storage::Clock::now(&h.clock) - chrono::Duration::minutes(6)).to_rfc3339();
        let stranger = SigningKey::from_bytes(&[5u8; 32]);
        let now = h.clock_now();
        for (code, key, agent_id, group, issued_at, nonce) in [
            (
                "clock_skew",
                &worker.key,
                "w1",
                "g1",
                skewed,
                random_nonce(),
            ),
            (
                "not_a_member",
                &worker.key,
                "w1",
                "g2",
                now.clone(),
                random_nonce(),
            ),
            (
                "producer_mismatch",
                &worker.key,
                "w2",
                "g2",
                now.clone(),
                random_nonce(),
            ),
            (
                "unknown_key",
                &stranger,
                "w1",
                "g1",
                now.clone(),
                random_nonce(),
            ),
            (
                "bad_request",
                &worker.key,
                "w1",
                "g1",
                now.clone(),
                "short".to_owned(),
            ),
        ] {
            let session = session_request(key, agent_id, group, issued_at, &nonce);
            refused(&h, session, code).await;
        }
        // A manifest envelope replayed at the session endpoint.
        let manifest_envelope = Envelope::sign(&worker.key, MANIFEST_TYPE, b"{}");
        let replayed = request(
            Method::POST,
            "/v1/sessions",
            None,
            serde_json::to_vec(&manifest_envelope).expect("json"),
        );
        refused(&h, replayed, "wrong_payload_type").await;
        let nonce = random_nonce();
        assert_eq!(
            h.open_session(&worker.key, "w1", "g1", h.clock_now(), &nonce)
                .await
                .status,
            StatusCode::CREATED
        );
        let again = session_request(&worker.key, "w1", "g1", h.clock_now(), &nonce);
        refused(&h, again, "nonce_reused").await;
    }
);

backends!(
    async fn sessions_go_stale_when_replaced_membership_changes_or_time_passes(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let newer = h.session(&worker.key, "w1", "g1").await;
        let answer = h
            .call(
                Method::GET,
                "/v1/artifacts",
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (StatusCode::UNAUTHORIZED, "stale_session")
        );
        assert_eq!(
            h.call(Method::GET, "/v1/artifacts", Some(&newer), Body::empty())
                .await
                .status,
            StatusCode::OK
        );
        h.admin_json(
            Method::PUT,
            "/v1/admin/groups/g1/members/w1",
            json!({"roles": ["worker", "reviewer"]}),
        )
        .await;
        assert_eq!(
            h.call(Method::GET, "/v1/artifacts", Some(&newer), Body::empty())
                .await
                .code(),
            "stale_membership",
            "DESIGN §10: a Membership change makes the session stale"
        );
        let latest = h.session(&worker.key, "w1", "g1").await;
        h.clock.advance(chrono::Duration::hours(13));
        assert_eq!(
            h.call(Method::GET, "/v1/artifacts", Some(&latest), Body::empty())
                .await
                .code(),
            "unauthorized",
            "{kind:?}"
        );
    }
);

backends!(
    async fn a_session_reads_itself_and_the_admin_token_is_none(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker", "reviewer"]).await;
        let view = h.get_json(&worker, "/v1/session").await;
        assert_eq!(view["agentId"], "w1");
        assert_eq!(view["groupId"], "g1");
        assert_eq!(view["roles"], json!(["worker", "reviewer"]));
        assert!(view.get("missions").is_none(), "a Group-wide Membership");
        let expires =
            chrono::DateTime::parse_from_rfc3339(view["expiresAt"].as_str().expect("expiresAt"))
                .expect("RFC 3339");
        assert!(expires > weft_storage::Clock::now(&h.clock));
        assert_eq!(view["sessionEpoch"], 1);
        let admin = h
            .call(Method::GET, "/v1/session", Some(ADMIN), Body::empty())
            .await;
        assert_eq!(
            (admin.status, admin.code().as_str()),
            (StatusCode::FORBIDDEN, "forbidden")
        );
        // A replaced session reads as stale, like any other route.
        h.session(&worker.key, "w1", "g1").await;
        let stale = h
            .call(
                Method::GET,
                "/v1/session",
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(stale.code(), "stale_session");
    }
);

/// `POST /v1/session/renew` with a session request signed by `key`, as `token`.
pub(super) fn renewal(
    token: &str,
    key: &SigningKey,
    agent_id: &str,
    group: &str,
    issued_at: String,
    nonce: &str,
) -> axum::http::Request<Body> {
    let payload =
        json!({"agentId": agent_id, "groupId": group, "issuedAt": issued_at, "nonce": nonce});
    let envelope = Envelope::sign(
        key,
        weft_api::dsse::SESSION_TYPE,
        payload.to_string().as_bytes(),
    );
    request(
        Method::POST,
        "/v1/session/renew",
        Some(token),
        serde_json::to_vec(&envelope).expect("json"),
    )
}

backends!(
    async fn a_session_is_renewed_by_its_own_signed_request_and_keeps_its_epochs(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let other = h.agent("w2", "g1", &["worker"]).await;
        h.agent("w1", "g2", &["worker"]).await;
        let before = h.get_json(&worker, "/v1/session").await;
        // Eleven of its twelve hours later, a renewal gives it twelve from now.
        h.clock.advance(chrono::Duration::hours(11));
        let nonce = random_nonce();
        let renewed = h
            .send(renewal(
                &worker.token,
                &worker.key,
                "w1",
                "g1",
                h.clock_now(),
                &nonce,
            ))
            .await;
        assert_eq!(renewed.status, StatusCode::OK, "{kind:?}: {renewed:?}");
        let renewed = renewed.json();
        assert_eq!(renewed["sessionEpoch"], before["sessionEpoch"], "{kind:?}");
        assert_eq!(renewed["membershipEpoch"], before["membershipEpoch"]);
        assert!(renewed["expiresAt"].as_str() > before["expiresAt"].as_str());
        h.clock.advance(chrono::Duration::hours(2));
        let after = h.get_json(&worker, "/v1/session").await;
        assert_eq!(
            after["expiresAt"], renewed["expiresAt"],
            "{kind:?}: still live, renewed"
        );
        assert_eq!(after["sessionEpoch"], before["sessionEpoch"]);
        // Refusals change nothing.
        let now = h.clock_now();
        let skewed =
            (weft_storage::Clock::now(&h.clock) - chrono::Duration::minutes(6)).to_rfc3339();
        for (token, key, agent_id, group, issued_at, nonce, code) in [
            (
                &*worker.token,
                &worker.key,
                "w1",
                "g1",
                now.clone(),
                nonce.clone(),
                "nonce_reused",
            ),
            (
                &*worker.token,
                &other.key,
                "w2",
                "g1",
                now.clone(),
                random_nonce(),
                "producer_mismatch",
            ),
            (
                &*worker.token,
                &worker.key,
                "w1",
                "g2",
                now.clone(),
                random_nonce(),
                "producer_mismatch",
            ),
            (
                &*worker.token,
                &other.key,
                "w1",
                "g1",
                now.clone(),
                random_nonce(),
                "producer_mismatch",
            ),
            (
                ADMIN,
                &worker.key,
                "w1",
                "g1",
                now.clone(),
                random_nonce(),
                "forbidden",
            ),
            (
                &*worker.token,
                &worker.key,
                "w1",
                "g1",
                skewed,
                random_nonce(),
                "clock_skew",
            ),
        ] {
            refused(
                &h,
                renewal(token, key, agent_id, group, issued_at, &nonce),
                code,
            )
            .await;
        }
        // A replaced session is not renewed; nor is an expired one.
        let newer = h.session(&worker.key, "w1", "g1").await;
        refused(
            &h,
            renewal(
                &worker.token,
                &worker.key,
                "w1",
                "g1",
                h.clock_now(),
                &random_nonce(),
            ),
            "stale_session",
        )
        .await;
        h.clock.advance(chrono::Duration::hours(13));
        refused(
            &h,
            renewal(
                &newer,
                &worker.key,
                "w1",
                "g1",
                h.clock_now(),
                &random_nonce(),
            ),
            "unauthorized",
        )
        .await;
    }
);
