//! Lease-bound publication (issue #12, LSE-4/5, OFL-1/2): a manifest's `execution` must name
//! the current Execution Lease of its WorkItem, held by its producer under its ownership
//! epoch, whoever sends it. Each stale case is `stale_lease` with nothing changed; a fenced
//! owner's late manifest is kept as one inert audit record, in no read but the WorkItem's.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use weft_api::Id;
use weft_api::manifest::Execution;
use weft_storage::Fingerprint;

use super::harness::*;
use super::work::{group, offer, ok};
use super::work_setup::{
    command_doc, command_request, contract, evidence_payload, signed_evidence,
};

/// `executionSeconds` and `ownershipSeconds` of `contract(&[])`.
const EXECUTION: i64 = 300;
const OWNERSHIP: i64 = 3600;

/// `bytes` uploaded by `agent` and a manifest of them for `work_item` of Mission `m1`, signed
/// by `agent` and naming `lease` under `epoch`, to be sent as built with `publish_request`
/// (the harness's `publish` would rebind it to the current lease).
async fn publication(
    h: &Harness,
    agent: &Agent,
    bytes: &[u8],
    work_item: &str,
    lease: &str,
    epoch: u64,
) -> (weft_api::ArtifactId, weft_api::Envelope) {
    let digests = h.upload(agent, bytes).await;
    let mut manifest = manifest(agent, "g1", digests, &[]);
    manifest.mission_id = Id::parse("m", "m1").expect("id");
    manifest.work_item_id = Id::parse("w", work_item).expect("id");
    manifest.execution = Execution {
        lease_id: Id::parse("l", lease).expect("id"),
        ownership_epoch: epoch,
    };
    (digests.blake3, sign(&agent.key, &manifest))
}

/// Authorizes `wi` in Mission `m1` with `contract(&[])` (300 s leases) and gives `worker`
/// its Execution Lease through the harness; answers the lease id.
async fn leased(h: &Harness, coordinator: &Agent, worker: &Agent, wi: &str) -> String {
    ok(
        h,
        coordinator,
        "g1",
        "work.authorize",
        json!({"workItemId": wi, "missionId": "m1", "contract": contract(&[])}),
    )
    .await;
    let (lease, epoch) = h
        .ensure_lease(worker, "g1", "m1", wi)
        .await
        .expect("the worker gets the lease");
    assert_eq!(epoch, 1);
    lease
}

/// A `work.checkpoint` of `wi` by `worker` quoting `lease`, accepted.
async fn checkpoint(h: &Harness, worker: &Agent, wi: &str, lease: &str) {
    let mut doc = command_doc(
        h,
        worker,
        "g1",
        "work.checkpoint",
        json!({"workItemId": wi, "checkpoint": {"note": "pause"}}),
    )
    .await;
    doc["leaseId"] = json!(lease);
    let answer = h.send(command_request(worker, "g1", &doc)).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
}

/// Asserts that `after` differs from `before` only by `added` rows of `inert_publications`.
fn only_inert_added(before: &Fingerprint, after: &Fingerprint, added: u64) {
    let mut expected = before.clone();
    let rows = before
        .tables
        .get("inert_publications")
        .map_or(0, |(rows, _)| *rows);
    let (after_rows, after_hash) = after.tables["inert_publications"].clone();
    assert_eq!(after_rows, rows + added, "inert_publications rows");
    expected
        .tables
        .insert("inert_publications".to_owned(), (after_rows, after_hash));
    assert_unchanged(&expected, after, "a fenced owner's publication");
}

backends!(
    /// LSE-4/LSE-5: the current lease publishes; an older lease id of the same owner under
    /// the same epoch (released by a checkpoint), an expired lease, a lease of another
    /// WorkItem, another Agent's lease and a lease that does not exist are `stale_lease`.
    async fn only_the_current_execution_lease_publishes(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2) = group(&h).await;
        let first = leased(&h, &coordinator, &w1, "wi-1").await;
        checkpoint(&h, &w1, "wi-1", &first).await;
        let (second, _) = h
            .ensure_lease(&w1, "g1", "m1", "wi-1")
            .await
            .expect("restart");
        assert_ne!(first, second);
        let (_, old) = publication(&h, &w1, b"under the old lease", "wi-1", &first, 1).await;
        let answer = refused(&h, publish_request(&w1, &old), "stale_lease").await;
        assert_eq!(answer.status, StatusCode::CONFLICT);
        // Another WorkItem's lease of the same owner and epoch.
        let other = leased(&h, &coordinator, &w1, "wi-2").await;
        let (_, crossed) = publication(&h, &w1, b"crossed", "wi-1", &other, 1).await;
        let before = h.fingerprint().await;
        let answer = refused(&h, publish_request(&w1, &crossed), "stale_lease").await;
        assert_unchanged(&before, &h.fingerprint().await, "another WorkItem's lease");
        // Without naming the lease's WorkItem: a lease id can be another Group's.
        let said = String::from_utf8_lossy(&answer.body);
        assert!(!said.contains("wi-2"), "{said}");
        // Another Agent's lease of the WorkItem it publishes for.
        let theirs = leased(&h, &coordinator, &w2, "wi-3").await;
        let (_, borrowed) = publication(&h, &w1, b"borrowed", "wi-3", &theirs, 1).await;
        refused(&h, publish_request(&w1, &borrowed), "stale_lease").await;
        // The right lease under a wrong epoch, and a lease nobody was given.
        let (_, epoch) = publication(&h, &w1, b"epoch", "wi-1", &second, 2).await;
        refused(&h, publish_request(&w1, &epoch), "stale_lease").await;
        let (_, unknown) = publication(&h, &w1, b"unknown", "wi-1", "lease-1", 1).await;
        refused(&h, publish_request(&w1, &unknown), "stale_lease").await;
        // The current lease publishes.
        let (_, current) = publication(&h, &w1, b"current", "wi-1", &second, 1).await;
        let answer = h.send(publish_request(&w1, &current)).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        // An expired lease: still unreleased (no timer ran), but past its expiry.
        h.clock.advance(chrono::Duration::seconds(EXECUTION + 1));
        let (_, late) = publication(&h, &w1, b"late", "wi-1", &second, 1).await;
        refused(&h, publish_request(&w1, &late), "stale_lease").await;
    }
);

backends!(
    /// LSE-9 + LSE-5: a replacement session revokes the lease; a manifest naming it is
    /// `stale_lease` even from the new session, until the owner starts again.
    async fn a_revoked_lease_does_not_publish(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        let lease = leased(&h, &coordinator, &w1, "wi-1").await;
        let digests = h.upload(&w1, b"after revocation").await;
        let w1 = Agent {
            token: h.session(&w1.key, "w1", "g1").await,
            ..w1
        };
        let view = h.get_json(&w1, "/v1/workitems/wi-1").await;
        assert_eq!(view["state"], "queued", "LSE-9 re-queued it: {view}");
        let mut manifest = manifest(&w1, "g1", digests, &[]);
        manifest.mission_id = Id::parse("m", "m1").expect("id");
        manifest.work_item_id = Id::parse("w", "wi-1").expect("id");
        manifest.execution = Execution {
            lease_id: Id::parse("l", &lease).expect("id"),
            ownership_epoch: 1,
        };
        let envelope = sign(&w1.key, &manifest);
        refused(&h, publish_request(&w1, &envelope), "stale_lease").await;
        // The operator publishing the Agent's manifest meets the same rule.
        let by_admin = request(
            Method::POST,
            "/v1/artifacts",
            Some(ADMIN),
            serde_json::to_vec(&envelope).expect("json"),
        );
        refused(&h, by_admin, "stale_lease").await;
        // Started again, the Agent publishes under its new lease (the harness rebinds).
        let answer = h.publish(&w1, &envelope).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }
);

backends!(
    /// OFL-1/OFL-2: after the ownership expired and the WorkItem was reassigned under epoch 2,
    /// the fenced owner's manifest under its epoch-1 lease is `stale_lease` and kept as
    /// exactly one inert audit record: shown in the WorkItem view, absent from the artifact
    /// reads, listings and lineage, never a source, and appending no Event.
    async fn a_fenced_owners_publication_is_kept_inert(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2) = group(&h).await;
        let lease = leased(&h, &coordinator, &w1, "wi-f").await;
        h.clock.advance(chrono::Duration::seconds(OWNERSHIP + 1));
        h.store
            .work()
            .expire_due(weft_storage::Clock::now(&h.clock))
            .await
            .expect("expire_due");
        ok(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-f", "o-2", &["w2"], &h, 600),
        )
        .await;
        let view = ok(
            &h,
            &w2,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-f", "offerId": "o-2"}),
        )
        .await;
        assert_eq!(view["state"]["owner"]["ownershipEpoch"], 2, "{view}");
        let (artifact, late) = publication(&h, &w1, b"late result", "wi-f", &lease, 1).await;
        let before = h.fingerprint().await;
        let answer = h.send(publish_request(&w1, &late)).await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (StatusCode::CONFLICT, "stale_lease")
        );
        assert!(
            answer.json()["detail"]
                .as_str()
                .is_some_and(|d| d.contains("inert audit record")),
            "{answer:?}"
        );
        let after = h.fingerprint().await;
        only_inert_added(&before, &after, 1);
        // The same bytes again: refused alike, nothing more kept.
        let answer = h.send(publish_request(&w1, &late)).await;
        assert_eq!(answer.code(), "stale_lease");
        assert_eq!(h.fingerprint().await, after);
        // New bytes with their manifest in one request (issue #15): refused alike, the
        // manifest kept inert, and nothing of the bytes kept.
        let fresh = b"a late result, sent with its bytes";
        let mut with_bytes = manifest(&w1, "g1", digest_of(fresh), &[]);
        with_bytes.mission_id = Id::parse("m", "m1").expect("id");
        with_bytes.work_item_id = Id::parse("w", "wi-f").expect("id");
        with_bytes.execution = Execution {
            lease_id: Id::parse("l", &lease).expect("id"),
            ownership_epoch: 1,
        };
        let answer = h
            .send(crate::http::tests::with_content::publication(
                &w1,
                &sign(&w1.key, &with_bytes),
                fresh,
            ))
            .await;
        assert_eq!(answer.code(), "stale_lease");
        only_inert_added(&after, &h.fingerprint().await, 1);

        let view = h.get_json(&coordinator, "/v1/workitems/wi-f").await;
        let inert = view["inertPublications"].as_array().expect("inert records");
        // One from each route; both alike but for their manifests.
        assert_eq!(inert.len(), 2, "{view}");
        assert_eq!(inert[0]["leaseId"], inert[1]["leaseId"]);
        assert_ne!(inert[0]["manifestId"], inert[1]["manifestId"]);
        assert_eq!(
            (
                inert[0]["producer"].as_str(),
                inert[0]["leaseId"].as_str(),
                inert[0]["ownershipEpoch"].as_u64()
            ),
            (Some("w1"), Some(lease.as_str()), Some(1))
        );
        assert!(
            inert[0]["manifestId"]
                .as_str()
                .is_some_and(|id| id.starts_with("blake3:"))
        );
        assert!(
            inert[0]["receivedAt"]
                .as_str()
                .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
                .is_some_and(|at| {
                    let now = weft_storage::Clock::now(&h.clock);
                    (now - at.to_utc()).abs() < chrono::Duration::seconds(1)
                }),
            "{view}"
        );
        // Not an artifact of anything: no manifest, no listing, no lineage, no source.
        let shown = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{artifact}"),
                Some(&coordinator.token),
                Body::empty(),
            )
            .await;
        assert_eq!(shown.status, StatusCode::NOT_FOUND, "{shown:?}");
        let listed = h
            .get_json(&coordinator, "/v1/artifacts?workItemId=wi-f")
            .await;
        assert_eq!(listed["items"], json!([]), "{listed}");
        let lineage = h
            .call(
                Method::GET,
                "/v1/workitems/wi-f/provenance",
                Some(&coordinator.token),
                Body::empty(),
            )
            .await;
        assert_eq!(lineage.code(), "not_found", "nothing published in wi-f");
        let events: Value = h
            .get_json(&coordinator, "/v1/groups/g1/events?limit=1000")
            .await;
        assert!(
            !events.to_string().contains(&artifact.hex()),
            "no Event names it"
        );
        let digests = h.upload(&w2, b"derived").await;
        let mut derived = manifest(&w2, "g1", digests, &[artifact]);
        derived.mission_id = Id::parse("m", "m1").expect("id");
        derived.work_item_id = Id::parse("w", "wi-f").expect("id");
        let derived = h.bind_to_lease(&w2, &sign(&w2.key, &derived)).await;
        refused(&h, publish_request(&w2, &derived), "unknown_source").await;
    }
);

/// Signed Evidence by `agent` for `ac-1` of `wi` (Mission `m1`), naming `execution` if given.
fn evidence_request(
    agent: &Agent,
    wi: &str,
    execution: Option<Value>,
) -> axum::http::Request<Body> {
    let mut evidence = evidence_payload(agent, "g1", "m1", wi, "automated_test", &[]);
    if let Some(execution) = execution {
        evidence["execution"] = execution;
    }
    let body = signed_evidence(agent, &evidence);
    request(Method::POST, "/v1/evidence", Some(&agent.token), body)
}

backends!(
    /// DESIGN §5.1, LSE-4/5: the owner's Evidence names its current Execution Lease, checked
    /// like a manifest's: none, an older lease id or another WorkItem's is `stale_lease` and
    /// nothing changes; the current one is recorded. A reviewer (not the owner) names none.
    async fn an_owners_evidence_names_its_current_lease(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        let first = leased(&h, &coordinator, &w1, "wi-1").await;
        checkpoint(&h, &w1, "wi-1", &first).await;
        let (second, _) = h
            .ensure_lease(&w1, "g1", "m1", "wi-1")
            .await
            .expect("restart");
        let other = leased(&h, &coordinator, &w1, "wi-2").await;
        for execution in [
            None,
            Some(json!({"leaseId": first, "ownershipEpoch": 1})),
            Some(json!({"leaseId": other, "ownershipEpoch": 1})),
        ] {
            refused(&h, evidence_request(&w1, "wi-1", execution), "stale_lease").await;
        }
        let current = Some(json!({"leaseId": second, "ownershipEpoch": 1}));
        let recorded = h.send(evidence_request(&w1, "wi-1", current)).await;
        assert_eq!(recorded.status, StatusCode::CREATED, "{recorded:?}");
        let reviewed = h.send(evidence_request(&reviewer, "wi-1", None)).await;
        assert_eq!(
            reviewed.status,
            StatusCode::CREATED,
            "{kind:?}: {reviewed:?}"
        );
    }
);

backends!(
    /// Issue #40 (OFL-2): a fenced owner's refused manifests are kept as inert records up to
    /// the cap per (WorkItem, producer); past it the refusal stands and nothing is kept, and
    /// the WorkItem view shows only the newest 32 with `inertPublicationsTruncated`.
    async fn inert_publications_are_capped_and_paged(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2) = group(&h).await;
        let lease = leased(&h, &coordinator, &w1, "wi-c").await;
        h.clock.advance(chrono::Duration::seconds(OWNERSHIP + 1));
        h.store
            .work()
            .expire_due(weft_storage::Clock::now(&h.clock))
            .await
            .expect("expire_due");
        ok(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-c", "o-2", &["w2"], &h, 600),
        )
        .await;
        ok(
            &h,
            &w2,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-c", "offerId": "o-2"}),
        )
        .await;
        const CAP: usize = 64;
        for n in 0..CAP {
            let (_, late) =
                publication(&h, &w1, format!("late {n}").as_bytes(), "wi-c", &lease, 1).await;
            assert_eq!(
                h.send(publish_request(&w1, &late)).await.code(),
                "stale_lease"
            );
        }
        let (_, over) = publication(&h, &w1, b"one too many", "wi-c", &lease, 1).await;
        refused(&h, publish_request(&w1, &over), "stale_lease").await;
        let view = h.get_json(&coordinator, "/v1/workitems/wi-c").await;
        let inert = view["inertPublications"].as_array().expect("inert records");
        assert_eq!(inert.len(), 32, "{view}");
        assert_eq!(view["inertPublicationsTruncated"], true);
    }
);
