//! Capability tokens (issue #12, LSE-6/7): issued to the lease's owner, narrowed to a scope,
//! bound to the lease's WorkItem, rotated and revoked while the lease stays, and dead with
//! their lease (released, expired). Each refusal goes through `refused`: exact code, nothing
//! changed.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use weft_api::{Envelope, Id};

use super::harness::*;
use super::work::{mission, ok};
use super::work_setup::{
    command_doc, command_request, contract, evidence_payload, signed_evidence,
};

/// Authorizes `work_item` in Mission `mission-1`, offers it to `worker`, which accepts and
/// starts it; answers the Execution Lease (`state.lease` of `work.start`).
pub(super) async fn started(
    h: &Harness,
    coordinator: &Agent,
    worker: &Agent,
    work_item: &str,
) -> Value {
    ok(
        h,
        coordinator,
        "g1",
        "work.authorize",
        json!({"workItemId": work_item, "missionId": "mission-1", "contract": contract(&[])}),
    )
    .await;
    let expires =
        (weft_storage::Clock::now(&h.clock) + chrono::Duration::seconds(600)).to_rfc3339();
    let basis = json!({"capabilityMatches": [{"id": "cap.summarize", "version": "1"}], "authorizationEligible": true,
        "availabilityEstimate": "2026-11-30T12:00:00Z", "expectedCost": 1.2, "reliabilityEvidence": [], "policyRules": []});
    ok(
        h,
        coordinator,
        "g1",
        "work.offer",
        json!({"workItemId": work_item, "offerId": format!("o-{work_item}"),
        "candidates": [worker.id], "expiresAt": expires, "selectionBasis": basis}),
    )
    .await;
    ok(
        h,
        worker,
        "g1",
        "work.accept_offer",
        json!({"workItemId": work_item, "offerId": format!("o-{work_item}")}),
    )
    .await;
    let answer = ok(
        h,
        worker,
        "g1",
        "work.start",
        json!({"workItemId": work_item}),
    )
    .await;
    answer["state"]["lease"].clone()
}

/// Group g1 with coordinator `c1` and workers `w1`, `w2`; Mission `mission-1`; WorkItem `wi-1`
/// started by `w1`. Answers the three Agents and `wi-1`'s lease.
pub(super) async fn setup(h: &Harness) -> (Agent, Agent, Agent, Value) {
    let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
    let w1 = h.agent("w1", "g1", &["worker"]).await;
    let w2 = h.agent("w2", "g1", &["worker"]).await;
    mission(h, &coordinator, "g1", "mission-1").await;
    let lease = started(h, &coordinator, &w1, "wi-1").await;
    (coordinator, w1, w2, lease)
}

pub(super) fn lease_id(lease: &Value) -> &str {
    lease["leaseId"].as_str().expect("a lease id")
}

/// `POST /v1/leases/{lease}/tokens` as `bearer`.
fn token_request(bearer: &str, lease: &str, body: Value) -> Request<Body> {
    json_request(
        Method::POST,
        &format!("/v1/leases/{lease}/tokens"),
        bearer,
        body,
        &[],
    )
}

/// Issues a token for `lease` as `owner`; answers `{tokenId, token, scope, expiresAt}`.
pub(super) async fn issue(
    h: &Harness,
    owner: &Agent,
    lease: &str,
    scope: &[&str],
    ttl: u64,
) -> Value {
    let answer = h
        .send(token_request(
            &owner.token,
            lease,
            json!({"scope": scope, "ttlSeconds": ttl}),
        ))
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    answer.json()
}

pub(super) fn secret(issued: &Value) -> &str {
    issued["token"].as_str().expect("a token")
}

pub(super) fn upload_request(bearer: &str, bytes: &[u8]) -> Request<Body> {
    let digests = digest_of(bytes);
    request(
        Method::PUT,
        &format!("/v1/blobs/{}", digests.blake3),
        Some(bearer),
        bytes.to_vec(),
    )
}

/// A manifest by `worker` for `bytes` of `work_item` under `lease`.
pub(super) fn manifest_for(worker: &Agent, bytes: &[u8], work_item: &str, lease: &str) -> Envelope {
    let mut manifest = manifest(worker, "g1", digest_of(bytes), &[]);
    manifest.work_item_id = Id::parse("w", work_item).expect("id");
    manifest.execution.lease_id = Id::parse("l", lease).expect("id");
    sign(&worker.key, &manifest)
}

pub(super) fn publish_as(bearer: &str, envelope: &Envelope) -> Request<Body> {
    request(
        Method::POST,
        "/v1/artifacts",
        Some(bearer),
        serde_json::to_vec(envelope).expect("json"),
    )
}

/// Passing Evidence by `worker` for `ac-1` of `work_item`, sent with `bearer`, naming
/// `execution` (the owner's current lease, DESIGN §5.1) if given.
pub(super) fn evidence_as(
    bearer: &str,
    worker: &Agent,
    work_item: &str,
    execution: Option<serde_json::Value>,
) -> Request<Body> {
    let mut evidence =
        evidence_payload(worker, "g1", "mission-1", work_item, "automated_test", &[]);
    if let Some(execution) = execution {
        evidence["execution"] = execution;
    }
    request(
        Method::POST,
        "/v1/evidence",
        Some(bearer),
        signed_evidence(worker, &evidence),
    )
}

backends!(
    /// LSE-6: the owner's token uploads, publishes and records Evidence for its lease's
    /// WorkItem, as its owner; and it opens no other route.
    async fn a_token_uploads_publishes_and_records_for_its_lease(kind: Kind) {
        let h = harness(kind).await;
        let (_, w1, _, lease) = setup(&h).await;
        let issued = issue(
            &h,
            &w1,
            lease_id(&lease),
            &["blob:write", "artifact:publish", "evidence:record"],
            60,
        )
        .await;
        assert_eq!(
            issued["scope"],
            json!(["blob:write", "artifact:publish", "evidence:record"])
        );
        assert!(
            issued["tokenId"]
                .as_str()
                .is_some_and(|id| id.starts_with("tok-")),
            "{issued}"
        );
        let token = secret(&issued);
        let bytes = b"the report";
        let uploaded = h.send(upload_request(token, bytes)).await;
        assert_eq!(uploaded.status, StatusCode::CREATED, "{uploaded:?}");
        let published = h
            .send(publish_as(
                token,
                &manifest_for(&w1, bytes, "wi-1", lease_id(&lease)),
            ))
            .await;
        assert_eq!(published.status, StatusCode::CREATED, "{published:?}");
        let execution = h.execution_of(&w1, "wi-1").await;
        let recorded = h.send(evidence_as(token, &w1, "wi-1", execution)).await;
        assert_eq!(recorded.status, StatusCode::CREATED, "{recorded:?}");
        // Published as the lease's owner.
        let artifact = h
            .get_json(&w1, &format!("/v1/artifacts/{}", digest_of(bytes).blake3))
            .await;
        assert_eq!(
            artifact["manifests"][0]["manifest"]["producer"]["agentId"], "w1",
            "{artifact}"
        );

        // Every other route refuses a token, even one that carries every scope.
        refused(
            &h,
            request(
                Method::GET,
                "/v1/groups/g1/events",
                Some(token),
                Body::empty(),
            ),
            "forbidden",
        )
        .await;
        // HEAD answers with no body: the status says it.
        let head = h
            .send(request(
                Method::HEAD,
                &format!("/v1/blobs/{}", digest_of(bytes).blake3),
                Some(token),
                Body::empty(),
            ))
            .await;
        assert_eq!(head.status, StatusCode::FORBIDDEN, "{head:?}");
        refused(
            &h,
            request(
                Method::GET,
                "/v1/workitems/wi-1",
                Some(token),
                Body::empty(),
            ),
            "forbidden",
        )
        .await;
        let document =
            command_doc(&h, &w1, "g1", "lease.renew", json!({"workItemId": "wi-1"})).await;
        let mut command = command_request(&w1, "g1", &document);
        command.headers_mut().insert(
            "authorization",
            format!("Bearer {token}").parse().expect("header"),
        );
        refused(&h, command, "forbidden").await;
        // A token mints no token.
        refused(
            &h,
            token_request(
                token,
                lease_id(&lease),
                json!({"scope": ["blob:write"], "ttlSeconds": 5}),
            ),
            "forbidden",
        )
        .await;
    }
);

backends!(
    /// LSE-6: a token is narrowed to its scope: a blob:write-only token neither publishes nor
    /// records Evidence, a publish-only token uploads nothing; and an unknown scope is refused.
    async fn a_token_acts_only_within_its_scope(kind: Kind) {
        let h = harness(kind).await;
        let (_, w1, _, lease) = setup(&h).await;
        let lease = lease_id(&lease);
        let writer = issue(&h, &w1, lease, &["blob:write"], 60).await;
        let bytes = b"only bytes";
        let uploaded = h.send(upload_request(secret(&writer), bytes)).await;
        assert_eq!(uploaded.status, StatusCode::CREATED, "{uploaded:?}");
        refused(
            &h,
            evidence_as(secret(&writer), &w1, "wi-1", None),
            "forbidden",
        )
        .await;
        refused(
            &h,
            publish_as(secret(&writer), &manifest_for(&w1, bytes, "wi-1", lease)),
            "forbidden",
        )
        .await;
        let publisher = issue(&h, &w1, lease, &["artifact:publish"], 60).await;
        refused(
            &h,
            upload_request(secret(&publisher), b"other bytes"),
            "forbidden",
        )
        .await;
        refused(
            &h,
            token_request(
                &w1.token,
                lease,
                json!({"scope": ["blob:delete"], "ttlSeconds": 5}),
            ),
            "bad_request",
        )
        .await;
        refused(
            &h,
            token_request(&w1.token, lease, json!({"scope": [], "ttlSeconds": 5})),
            "bad_request",
        )
        .await;
        refused(
            &h,
            token_request(
                &w1.token,
                lease,
                json!({"scope": ["blob:write"], "ttlSeconds": 0}),
            ),
            "bad_request",
        )
        .await;
    }
);

backends!(
    /// LSE-6: only the lease's owner gets a token, and a token acts for its own lease's
    /// WorkItem and lease only: not for another WorkItem, not under another lease id.
    async fn a_token_belongs_to_its_owner_and_its_work_item(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2, lease) = setup(&h).await;
        let lease = lease_id(&lease).to_owned();
        let body = json!({"scope": ["blob:write"], "ttlSeconds": 60});
        refused(
            &h,
            token_request(&w2.token, &lease, body.clone()),
            "forbidden",
        )
        .await;
        refused(
            &h,
            token_request(&coordinator.token, &lease, body.clone()),
            "forbidden",
        )
        .await;
        refused(&h, token_request(ADMIN, &lease, body.clone()), "forbidden").await;
        refused(
            &h,
            token_request(&w1.token, "lease-unknown", body.clone()),
            "not_found",
        )
        .await;
        // Another Group does not see the lease at all.
        let outsider = h.agent("w1", "g2", &["worker"]).await;
        refused(
            &h,
            token_request(&outsider.token, &lease, body),
            "not_found",
        )
        .await;

        // w2 owns wi-2 under its own lease; its token publishes for wi-2, never for wi-1.
        let other = started(&h, &coordinator, &w2, "wi-2").await;
        let other_token = issue(
            &h,
            &w2,
            lease_id(&other),
            &["blob:write", "artifact:publish", "evidence:record"],
            60,
        )
        .await;
        let bytes = b"w2's bytes";
        let uploaded = h.send(upload_request(secret(&other_token), bytes)).await;
        assert_eq!(uploaded.status, StatusCode::CREATED, "{uploaded:?}");
        refused(
            &h,
            publish_as(
                secret(&other_token),
                &manifest_for(&w2, bytes, "wi-1", lease_id(&other)),
            ),
            "forbidden",
        )
        .await;
        refused(
            &h,
            publish_as(
                secret(&other_token),
                &manifest_for(&w2, bytes, "wi-1", &lease),
            ),
            "forbidden",
        )
        .await;
        refused(
            &h,
            evidence_as(secret(&other_token), &w2, "wi-1", None),
            "forbidden",
        )
        .await;
        // Its own WorkItem, but naming another lease than the token's.
        refused(
            &h,
            publish_as(
                secret(&other_token),
                &manifest_for(&w2, bytes, "wi-2", &lease),
            ),
            "forbidden",
        )
        .await;
        let published = h
            .send(publish_as(
                secret(&other_token),
                &manifest_for(&w2, bytes, "wi-2", lease_id(&other)),
            ))
            .await;
        assert_eq!(published.status, StatusCode::CREATED, "{published:?}");
    }
);

backends!(
    /// LSE-6/7: a token expires no later than its lease, and dies with it: after a checkpoint
    /// releases the lease, and once the lease's time is up, whatever its own expiry says.
    async fn a_token_dies_with_its_lease(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2, lease) = setup(&h).await;
        // LSE-7: asked for an hour, clamped to the lease's 300 s.
        let long = issue(&h, &w1, lease_id(&lease), &["blob:write"], 3600).await;
        assert_eq!(long["expiresAt"], lease["expiresAt"], "{long} vs {lease}");
        let short = issue(&h, &w1, lease_id(&lease), &["blob:write"], 10).await;
        assert_ne!(short["expiresAt"], lease["expiresAt"]);

        // Released: w2 checkpoints wi-2, and its token dies although its own expiry is ahead.
        let other = started(&h, &coordinator, &w2, "wi-2").await;
        let other_token = issue(&h, &w2, lease_id(&other), &["blob:write"], 60).await;
        let uploaded = h
            .send(upload_request(
                secret(&other_token),
                b"before the checkpoint",
            ))
            .await;
        assert_eq!(uploaded.status, StatusCode::CREATED, "{uploaded:?}");
        let mut checkpoint = command_doc(
            &h,
            &w2,
            "g1",
            "work.checkpoint",
            json!({"workItemId": "wi-2", "checkpoint": {"note": "pausing"}}),
        )
        .await;
        checkpoint["leaseId"] = other["leaseId"].clone();
        let answer = h.send(command_request(&w2, "g1", &checkpoint)).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        refused(
            &h,
            upload_request(secret(&other_token), b"after the checkpoint"),
            "unauthorized",
        )
        .await;
        refused(
            &h,
            token_request(
                &w2.token,
                lease_id(&other),
                json!({"scope": ["blob:write"], "ttlSeconds": 5}),
            ),
            "stale_lease",
        )
        .await;

        // The token's own expiry ends it first; the lease's expiry ends the clamped one.
        h.clock.advance(chrono::Duration::seconds(11));
        refused(
            &h,
            upload_request(secret(&short), b"after ten seconds"),
            "unauthorized",
        )
        .await;
        let uploaded = h
            .send(upload_request(secret(&long), b"still inside the lease"))
            .await;
        assert_eq!(uploaded.status, StatusCode::CREATED, "{uploaded:?}");
        h.clock.advance(chrono::Duration::seconds(290));
        refused(
            &h,
            upload_request(secret(&long), b"past the lease"),
            "unauthorized",
        )
        .await;
        refused(
            &h,
            token_request(
                &w1.token,
                lease_id(&lease),
                json!({"scope": ["blob:write"], "ttlSeconds": 5}),
            ),
            "stale_lease",
        )
        .await;
    }
);

backends!(
    /// LSE-6: tokens rotate while the lease stays: `replaces` revokes the previous one in the
    /// same step, `DELETE` revokes one; a revoked token is refused.
    async fn tokens_rotate_and_are_revoked_while_the_lease_stays(kind: Kind) {
        let h = harness(kind).await;
        let (_, w1, w2, lease) = setup(&h).await;
        let lease = lease_id(&lease).to_owned();
        let first = issue(&h, &w1, &lease, &["blob:write"], 60).await;
        let rotated = h
            .send(token_request(
                &w1.token,
                &lease,
                json!({"scope": ["blob:write"], "ttlSeconds": 60, "replaces": first["tokenId"]}),
            ))
            .await;
        assert_eq!(rotated.status, StatusCode::CREATED, "{rotated:?}");
        let second = rotated.json();
        refused(
            &h,
            upload_request(secret(&first), b"with the old token"),
            "unauthorized",
        )
        .await;
        let uploaded = h
            .send(upload_request(secret(&second), b"with the new token"))
            .await;
        assert_eq!(uploaded.status, StatusCode::CREATED, "{uploaded:?}");
        refused(
            &h,
            token_request(
                &w1.token,
                &lease,
                json!({"scope": ["blob:write"], "ttlSeconds": 60, "replaces": "tok-unknown"}),
            ),
            "not_found",
        )
        .await;

        let revoke = |bearer: &str, token_id: &Value| {
            request(
                Method::DELETE,
                &format!(
                    "/v1/leases/{lease}/tokens/{}",
                    token_id.as_str().expect("id")
                ),
                Some(bearer),
                Body::empty(),
            )
        };
        refused(&h, revoke(&w2.token, &second["tokenId"]), "forbidden").await;
        let revoked = h.send(revoke(&w1.token, &second["tokenId"])).await;
        assert_eq!(revoked.status, StatusCode::NO_CONTENT, "{revoked:?}");
        refused(
            &h,
            upload_request(secret(&second), b"after revocation"),
            "unauthorized",
        )
        .await;
        let again = h.send(revoke(&w1.token, &second["tokenId"])).await;
        assert_eq!(again.status, StatusCode::NO_CONTENT, "{again:?}");
        refused(&h, revoke(&w1.token, &json!("tok-unknown")), "not_found").await;
        // The lease stays: a fresh token works.
        let third = issue(&h, &w1, &lease, &["blob:write"], 60).await;
        let uploaded = h
            .send(upload_request(secret(&third), b"with a third token"))
            .await;
        assert_eq!(uploaded.status, StatusCode::CREATED, "{uploaded:?}");
    }
);
