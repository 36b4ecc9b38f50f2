//! Issue #10 findings 1, 3 and 4: a session acts in its own Group only; Memberships can be
//! removed, Agents deactivated and keys rotated, each ending the affected sessions and their
//! open streams at once.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use base64::Engine as _;
use futures::StreamExt as _;
use serde_json::json;
use tower::ServiceExt as _;

use super::harness::*;
use super::work_setup::{evidence_payload, signed_evidence};

/// Opens the SSE stream of `group` with `token`.
async fn open_stream(h: &Harness, token: &str, group: &str) -> axum::response::Response {
    let request = Request::builder()
        .uri(format!("/v1/groups/{group}/events/stream"))
        .header("authorization", format!("Bearer {token}"))
        .body(Body::empty())
        .expect("request");
    h.app.clone().oneshot(request).await.expect("infallible")
}

/// Spawns a reader that collects a stream's text until it ends (or 10 s pass: then `None`).
fn read_to_end(response: axum::response::Response) -> tokio::task::JoinHandle<Option<String>> {
    tokio::spawn(async move {
        let mut body = response.into_body().into_data_stream();
        let mut text = String::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            match tokio::time::timeout_at(deadline, body.next()).await {
                Err(_) => return None,
                Ok(None) => return Some(text),
                Ok(Some(Ok(chunk))) => text.push_str(&String::from_utf8_lossy(&chunk)),
                Ok(Some(Err(_))) => return Some(text),
            }
        }
    })
}

/// The stream ended with an `error` frame naming `code` (and a comment saying why).
async fn assert_closed_with(reader: tokio::task::JoinHandle<Option<String>>, code: &str) {
    let text = reader
        .await
        .expect("reader")
        .expect("the stream ends within seconds of the change");
    assert!(
        text.contains(&format!("event: error\ndata: {code}\n"))
            && text.contains(": the session ended"),
        "{text}"
    );
}

backends!(
    /// Finding 1: a session opened for g1 neither reads nor acts in g2, although its Agent is a
    /// member there: every Group route answers as to a non-member, publishing and recording
    /// Evidence there are `not_a_member`, and nothing changes.
    async fn a_session_acts_in_its_own_group_only(kind: Kind) {
        let h = harness(kind).await;
        let in_g2 = h.agent("w1", "g2", &["worker", "reviewer"]).await;
        let in_g1 = h.join(&in_g2, "g1", &["worker"]).await;
        let secret = h.put(&in_g2, "g2", b"g2 only", &[]).await;
        for (method, uri, body) in [
            (Method::GET, "/v1/groups/g2/events", None),
            (Method::GET, "/v1/groups/g2/events/stream", None),
            (Method::GET, "/v1/groups/g2/cursors", None),
            (Method::GET, "/v1/groups/g2/checkpoint", None),
            (Method::GET, "/v1/groups/g2/snapshots", None),
            (
                Method::POST,
                "/v1/groups/g2/cursors",
                Some(json!({"cursors": [{"groupId": "g2", "sequence": 1}]})),
            ),
        ] {
            let body = body.map_or_else(Vec::new, |body| body.to_string().into_bytes());
            refused(
                &h,
                request(method, uri, Some(&in_g1.token), body),
                "not_found",
            )
            .await;
        }
        // Reads that are not Group-scoped see only what g1 may see.
        for uri in [
            format!("/v1/artifacts/{secret}"),
            format!("/v1/artifacts/{secret}/content"),
            format!("/v1/artifacts/{secret}/provenance"),
        ] {
            refused(
                &h,
                request(Method::GET, &uri, Some(&in_g1.token), Body::empty()),
                "not_found",
            )
            .await;
        }
        let listing = h.get_json(&in_g1, "/v1/artifacts").await;
        assert_eq!(listing["items"], json!([]), "{listing}");
        let head = request(
            Method::HEAD,
            &format!("/v1/blobs/{secret}"),
            Some(&in_g1.token),
            Body::empty(),
        );
        assert_eq!(h.send(head).await.status, StatusCode::NOT_FOUND);
        // Acting in g2 with the g1 session.
        let digests = h.upload(&in_g2, b"more g2 work").await;
        let envelope = sign(&in_g1.key, &manifest(&in_g1, "g2", digests, &[]));
        let before_publish = h.fingerprint().await;
        refused(&h, publish_request(&in_g1, &envelope), "not_a_member").await;
        assert_unchanged(
            &before_publish,
            &h.fingerprint().await,
            "publish in g2 with a g1 session",
        );
        let evidence = evidence_for(&in_g1, "g2", secret);
        let record = request(Method::POST, "/v1/evidence", Some(&in_g1.token), evidence);
        refused(&h, record, "not_a_member").await;
        assert_unchanged(
            &before_publish,
            &h.fingerprint().await,
            "Evidence in g2 with a g1 session",
        );
        // Replacing the g2 session fences the old g2 session and leaves the g1 one alone.
        let newer_g2 = h.session(&in_g2.key, "w1", "g2").await;
        let old = h
            .call(
                Method::GET,
                "/v1/groups/g2/events",
                Some(&in_g2.token),
                Body::empty(),
            )
            .await;
        assert_eq!(
            (old.status, old.code().as_str()),
            (StatusCode::UNAUTHORIZED, "stale_session")
        );
        for token in [&newer_g2, &in_g1.token] {
            let answer = h
                .call(Method::GET, "/v1/artifacts", Some(token), Body::empty())
                .await;
            assert_eq!(answer.status, StatusCode::OK, "{kind:?}");
        }
    }
);

/// A signed Evidence envelope (as a request body) about `artifact` in `group`.
fn evidence_for(agent: &Agent, group: &str, artifact: weft_api::ArtifactId) -> Vec<u8> {
    let artifact = artifact.to_string();
    let payload = evidence_payload(
        agent,
        group,
        "mission-1",
        "work-1",
        "automated_test",
        &[&artifact],
    );
    signed_evidence(agent, &payload)
}

backends!(
    /// Finding 3: removing a Membership appends `membership.removed`, makes its sessions
    /// `stale_membership` at once, and a later Membership never revives them (the epoch keeps
    /// counting).
    async fn removing_a_membership_ends_its_sessions(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let auditor = h.agent("a1", "g1", &["auditor"]).await;
        let removed = h
            .call(
                Method::DELETE,
                "/v1/admin/groups/g1/members/w1",
                Some(ADMIN),
                Body::empty(),
            )
            .await;
        assert_eq!(removed.status, StatusCode::OK, "{removed:?}");
        assert_eq!(removed.json()["epoch"], json!(2));
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
            (StatusCode::UNAUTHORIZED, "stale_membership")
        );
        let events = h.get_json(&auditor, "/v1/groups/g1/events").await;
        let last = events["events"]
            .as_array()
            .and_then(|e| e.last())
            .cloned()
            .expect("events");
        assert_eq!(last["type"], json!("membership.removed"));
        assert_eq!(
            last["payload"],
            json!({"agentId": "w1", "membershipEpoch": 2})
        );
        // Removing again, or a stranger: not_a_member, nothing changes.
        let before = h.fingerprint().await;
        refused(
            &h,
            request(
                Method::DELETE,
                "/v1/admin/groups/g1/members/w1",
                Some(ADMIN),
                Body::empty(),
            ),
            "not_a_member",
        )
        .await;
        refused(
            &h,
            request(
                Method::DELETE,
                "/v1/admin/groups/g1/members/w1",
                Some(&auditor.token),
                Body::empty(),
            ),
            "forbidden",
        )
        .await;
        assert_unchanged(&before, &h.fingerprint().await, "refused removals");
        // No new session while removed; back in, the old session stays dead.
        let session = session_request(&worker.key, "w1", "g1", h.clock_now(), &random_nonce());
        refused(&h, session, "not_a_member").await;
        let again = h
            .admin_json(
                Method::PUT,
                "/v1/admin/groups/g1/members/w1",
                json!({"roles": ["worker"]}),
            )
            .await;
        assert_eq!(again.json()["epoch"], json!(3), "{again:?}");
        let answer = h
            .call(
                Method::GET,
                "/v1/artifacts",
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(answer.code(), "stale_membership", "{kind:?}");
    }
);

backends!(
    /// Finding 3: a deactivated Agent's sessions end, it opens no new one and nothing it signs
    /// is accepted (`agent_deactivated`); each of its Groups is told; what it published before
    /// stays readable and verifiable.
    async fn a_deactivated_agent_can_do_nothing_more(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let in_g2 = h.join(&worker, "g2", &["worker"]).await;
        let auditor = h.agent("a1", "g1", &["auditor"]).await;
        let earlier = h.put(&worker, "g1", b"before deactivation", &[]).await;
        let digests = h.upload(&worker, b"after deactivation").await;
        let answer = h
            .call(
                Method::POST,
                "/v1/admin/agents/w1/deactivate",
                Some(ADMIN),
                Body::empty(),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        assert_eq!(answer.json()["groups"], json!(["g1", "g2"]));
        for token in [&worker.token, &in_g2.token] {
            let answer = h
                .call(Method::GET, "/v1/artifacts", Some(token), Body::empty())
                .await;
            assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{answer:?}");
        }
        let before = h.fingerprint().await;
        let session = session_request(&worker.key, "w1", "g1", h.clock_now(), &random_nonce());
        refused(&h, session, "agent_deactivated").await;
        let envelope = sign(&worker.key, &manifest(&worker, "g1", digests, &[]));
        refused(
            &h,
            publish_request(&auditor, &envelope),
            "agent_deactivated",
        )
        .await;
        let membership = admin_request(
            Method::PUT,
            "/v1/admin/groups/g1/members/w1",
            json!({"roles": ["worker"]}),
        );
        refused(&h, membership, "agent_deactivated").await;
        assert_unchanged(&before, &h.fingerprint().await, "a deactivated agent");
        let events = h.get_json(&auditor, "/v1/groups/g1/events").await;
        assert!(events.to_string().contains("agent.deactivated"), "{events}");
        let view = h
            .get_json(&auditor, &format!("/v1/artifacts/{earlier}"))
            .await;
        assert_eq!(view["manifests"].as_array().map(Vec::len), Some(1));
        // Again: 200, no Group told twice.
        let again = h
            .call(
                Method::POST,
                "/v1/admin/agents/w1/deactivate",
                Some(ADMIN),
                Body::empty(),
            )
            .await;
        assert_eq!(again.json()["groups"], json!([]), "{kind:?}");
    }
);

backends!(
    /// Finding 3: after a key rotation the old key still verifies what it signed before (fsck
    /// re-verifies every manifest) and is refused for anything newer (`key_retired`); the
    /// Agent's sessions end; a key is never registered twice.
    async fn a_rotated_key_verifies_the_past_only(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let auditor = h.agent("a1", "g1", &["auditor"]).await;
        h.put(&worker, "g1", b"signed with the first key", &[])
            .await;
        let new_key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
        let rotation =
            json!({"publicKey": weft_api::dsse::BASE64.encode(new_key.verifying_key().as_bytes())});
        let answer = h
            .admin_json(Method::POST, "/v1/admin/agents/w1/keys", rotation.clone())
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        assert_eq!(
            answer.json()["keyid"],
            json!(weft_api::KeyId::of(&new_key.verifying_key()).as_str())
        );
        let old_session = h
            .call(
                Method::GET,
                "/v1/artifacts",
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(old_session.status, StatusCode::UNAUTHORIZED);
        let before = h.fingerprint().await;
        let session = session_request(&worker.key, "w1", "g1", h.clock_now(), &random_nonce());
        refused(&h, session, "key_retired").await;
        refused(
            &h,
            admin_request(Method::POST, "/v1/admin/agents/w1/keys", rotation),
            "conflict",
        )
        .await;
        let old_key = json!({"publicKey": weft_api::dsse::BASE64.encode(worker.key.verifying_key().as_bytes())});
        refused(
            &h,
            admin_request(Method::POST, "/v1/admin/agents/w1/keys", old_key),
            "conflict",
        )
        .await;
        // The server's own key, and the operator's calls on nobody.
        let keys = h
            .call(Method::GET, "/v1/authority/keys", None, Body::empty())
            .await
            .json();
        let authority = json!({"publicKey": keys["keys"][0]["publicKey"]});
        refused(
            &h,
            admin_request(Method::POST, "/v1/admin/agents/w1/keys", authority.clone()),
            "conflict",
        )
        .await;
        refused(
            &h,
            admin_request(
                Method::POST,
                "/v1/admin/agents/nobody/keys",
                json!({"publicKey": weft_api::dsse::BASE64.encode(ed25519_dalek::SigningKey::from_bytes(&[5; 32]).verifying_key().as_bytes())}),
            ),
            "unknown_agent",
        )
        .await;
        refused(
            &h,
            request(
                Method::POST,
                "/v1/admin/agents/nobody/deactivate",
                Some(ADMIN),
                Body::empty(),
            ),
            "unknown_agent",
        )
        .await;
        refused(
            &h,
            request(
                Method::DELETE,
                "/v1/admin/groups/nowhere/members/w1",
                Some(ADMIN),
                Body::empty(),
            ),
            "unknown_group",
        )
        .await;
        refused(
            &h,
            request(
                Method::POST,
                "/v1/admin/agents/w1/keys",
                Some(&auditor.token),
                authority.to_string(),
            ),
            "forbidden",
        )
        .await;
        assert_unchanged(
            &before,
            &h.fingerprint().await,
            "refused with the retired key",
        );
        let rotated = Agent {
            id: worker.id.clone(),
            key: new_key.clone(),
            token: h.session(&new_key, "w1", "g1").await,
        };
        h.put(&rotated, "g1", b"signed with the second key", &[])
            .await;
        let report = h.store.fsck().await.expect("fsck");
        assert!(
            report.problems.is_empty(),
            "both manifests verify: {report:?}"
        );
        let events = h.get_json(&auditor, "/v1/groups/g1/events").await;
        assert!(events.to_string().contains("agent.key_rotated"), "{kind:?}");
    }
);

backends!(
    /// Finding 4: a stream closes, with a final frame saying why, within a second of its
    /// session ending: Membership changed, removed, session replaced, Agent deactivated, or
    /// the session expired.
    async fn streams_end_with_their_session(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let auditor = h.agent("a1", "g1", &["auditor"]).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;

        let reader = read_to_end(open_stream(&h, &worker.token, "g1").await);
        h.admin_json(
            Method::PUT,
            "/v1/admin/groups/g1/members/w1",
            json!({"roles": ["worker", "reviewer"]}),
        )
        .await;
        assert_closed_with(reader, "stale_membership").await;

        let reader = read_to_end(open_stream(&h, &auditor.token, "g1").await);
        let _newer = h.session(&auditor.key, "a1", "g1").await;
        assert_closed_with(reader, "stale_session").await;

        let reader = read_to_end(open_stream(&h, &reviewer.token, "g1").await);
        h.call(
            Method::DELETE,
            "/v1/admin/groups/g1/members/r1",
            Some(ADMIN),
            Body::empty(),
        )
        .await;
        assert_closed_with(reader, "stale_membership").await;

        let fresh = h.session(&worker.key, "w1", "g1").await;
        let reader = read_to_end(open_stream(&h, &fresh, "g1").await);
        h.call(
            Method::POST,
            "/v1/admin/agents/w1/deactivate",
            Some(ADMIN),
            Body::empty(),
        )
        .await;
        assert_closed_with(reader, "unauthorized").await;

        let latest = h.session(&auditor.key, "a1", "g1").await;
        let reader = read_to_end(open_stream(&h, &latest, "g1").await);
        // Expiry changes nothing in the store: the periodic re-check (every second) ends it.
        h.clock.advance(chrono::Duration::hours(13));
        assert_closed_with(reader, "unauthorized").await;
        let _ = kind;
    }
);
