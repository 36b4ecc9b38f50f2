//! Context Packages (CTX-1…4, DESIGN §11): the helpers every context test uses, and the
//! refusals of publication: each way to break the version chain, a missing CTX-2 item, an
//! Event range past the head or of another Group, cited Artifacts, the generator's rights.
//! Reads and provenance are in `context_reads.rs`; forwarding (CTX-7) and the scheduling view
//! (CTX-8) in `context_forward.rs`.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use weft_api::context::CONTEXT_TYPE;
use weft_api::{ArtifactId, Envelope};

use super::harness::*;

/// A valid version of `package` by `agent` in its scope (Group, Mission), citing `artifacts`
/// and Events `from..=to`.
pub(super) fn package(
    agent: &Agent,
    (group, mission): (&str, &str),
    package: &str,
    version: u64,
    previous: Option<&ArtifactId>,
    (from, to): (u64, u64),
    artifacts: &[ArtifactId],
) -> Value {
    json!({
        "packageId": package, "version": version, "previous": previous,
        "groupId": group, "missionId": mission, "workItemId": null,
        "sourceEvents": {"from": from, "to": to},
        "artifacts": artifacts,
        "decisions": ["report in JSON"], "constraints": ["no network"],
        "openQuestions": ["who reviews the schema?"],
        "generator": {"agentId": agent.id, "agentCardVersion": "1"},
        "createdAt": "2026-11-30T12:00:00Z"
    })
}

/// `payload` signed by `agent` and sent to `POST /v1/groups/{group}/context`.
pub(super) fn publish_context(agent: &Agent, group: &str, payload: &Value) -> Request<Body> {
    let envelope = Envelope::sign(&agent.key, CONTEXT_TYPE, payload.to_string().as_bytes());
    request(
        Method::POST,
        &format!("/v1/groups/{group}/context"),
        Some(&agent.token),
        serde_json::to_vec(&envelope).expect("json"),
    )
}

/// Publishes `payload` as `agent`; its `contextId`.
pub(super) async fn published(
    h: &Harness,
    agent: &Agent,
    group: &str,
    payload: &Value,
) -> ArtifactId {
    let answer = h.send(publish_context(agent, group, payload)).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    answer.json()["contextId"]
        .as_str()
        .expect("contextId")
        .parse()
        .expect("digest")
}

/// A worker of g1 with one published Artifact (Mission `mission-1`): the setting of most tests.
pub(super) async fn setting(h: &Harness) -> (Agent, ArtifactId) {
    let worker = h.agent("ctx-worker", "g1", &["worker"]).await;
    let artifact = h.put(&worker, "g1", b"{\"findings\": 3}", &[]).await;
    (worker, artifact)
}

/// The head sequence of `group`'s log, as the admin sees it.
pub(super) async fn head(h: &Harness, group: &str) -> u64 {
    let answer = h
        .call(
            Method::GET,
            &format!("/v1/groups/{group}/events?after=0&limit=10000"),
            Some(ADMIN),
            Body::empty(),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    answer.json()["events"].as_array().map_or(0, |events| {
        events
            .last()
            .and_then(|e| e["sequence"].as_u64())
            .unwrap_or(0)
    })
}

backends!(
    /// CTX-4: a `previous` that is wrong (unknown, or not the latest), skips a version, names
    /// another package or another Mission's version: each refused with its own code, nothing
    /// stored.
    async fn ctx4_every_broken_chain_is_refused(kind: Kind) {
        let h = harness(kind).await;
        let (worker, artifact) = setting(&h).await;
        h.ensure_work_item("g1", "mission-2", "work-2").await;
        let range = (1, 2);
        let v1 = package(
            &worker,
            ("g1", "mission-1"),
            "pkg-a",
            1,
            None,
            range,
            &[artifact],
        );
        let a1 = published(&h, &worker, "g1", &v1).await;
        let a2 = published(
            &h,
            &worker,
            "g1",
            &package(
                &worker,
                ("g1", "mission-1"),
                "pkg-a",
                2,
                Some(&a1),
                range,
                &[],
            ),
        )
        .await;
        let b1 = published(
            &h,
            &worker,
            "g1",
            &package(&worker, ("g1", "mission-1"), "pkg-b", 1, None, range, &[]),
        )
        .await;
        let c1 = published(
            &h,
            &worker,
            "g1",
            &package(&worker, ("g1", "mission-2"), "pkg-c", 1, None, range, &[]),
        )
        .await;
        let unknown: ArtifactId = weft_api::digest::Hasher::digest(b"no such version").blake3;
        for (name, payload, code) in [
            (
                "version 1 of a started package",
                package(&worker, ("g1", "mission-1"), "pkg-a", 1, None, (1, 3), &[]),
                "context_previous_mismatch",
            ),
            (
                "previous unknown",
                package(
                    &worker,
                    ("g1", "mission-1"),
                    "pkg-a",
                    3,
                    Some(&unknown),
                    range,
                    &[],
                ),
                "context_previous_mismatch",
            ),
            (
                "previous not the latest (a fork)",
                package(
                    &worker,
                    ("g1", "mission-1"),
                    "pkg-a",
                    2,
                    Some(&a1),
                    (1, 3),
                    &[],
                ),
                "context_previous_mismatch",
            ),
            (
                "version skipped",
                package(
                    &worker,
                    ("g1", "mission-1"),
                    "pkg-a",
                    4,
                    Some(&a2),
                    range,
                    &[],
                ),
                "context_version_skipped",
            ),
            (
                "previous of another package",
                package(
                    &worker,
                    ("g1", "mission-1"),
                    "pkg-a",
                    3,
                    Some(&b1),
                    range,
                    &[],
                ),
                "context_other_package",
            ),
            (
                "previous of another Mission",
                package(
                    &worker,
                    ("g1", "mission-1"),
                    "pkg-c",
                    2,
                    Some(&c1),
                    range,
                    &[],
                ),
                "context_other_mission",
            ),
        ] {
            eprintln!("CTX-4: {name}");
            refused(&h, publish_context(&worker, "g1", &payload), code).await;
        }
    }
);

backends!(
    /// CTX-2: a package missing any item (Mission or WorkItem scope, range, Artifacts,
    /// decisions, constraints, questions, generator, time) is refused whole; so is one with a
    /// field CTX-2 does not name.
    async fn ctx2_a_package_missing_an_item_is_refused(kind: Kind) {
        let h = harness(kind).await;
        let (worker, artifact) = setting(&h).await;
        for field in [
            "missionId",
            "workItemId",
            "sourceEvents",
            "artifacts",
            "decisions",
            "constraints",
            "openQuestions",
            "generator",
            "createdAt",
        ] {
            let mut payload = package(
                &worker,
                ("g1", "mission-1"),
                "pkg-1",
                1,
                None,
                (1, 2),
                &[artifact],
            );
            payload.as_object_mut().expect("object").remove(field);
            eprintln!("CTX-2: without {field}");
            refused(
                &h,
                publish_context(&worker, "g1", &payload),
                "invalid_context",
            )
            .await;
        }
        let mut payload = package(
            &worker,
            ("g1", "mission-1"),
            "pkg-1",
            1,
            None,
            (1, 2),
            &[artifact],
        );
        payload["reasoning"] = json!("first I considered…");
        refused(
            &h,
            publish_context(&worker, "g1", &payload),
            "invalid_context",
        )
        .await;
        // The signature is the envelope's: an unsigned or wrongly signed one is refused.
        let payload = package(
            &worker,
            ("g1", "mission-1"),
            "pkg-1",
            1,
            None,
            (1, 2),
            &[artifact],
        );
        let mut envelope =
            Envelope::sign(&worker.key, CONTEXT_TYPE, payload.to_string().as_bytes());
        envelope.signatures.clear();
        let request = request(
            Method::POST,
            "/v1/groups/g1/context",
            Some(&worker.token),
            serde_json::to_vec(&envelope).expect("json"),
        );
        refused(&h, request, "bad_signature").await;
    }
);

backends!(
    /// CTX-1: the cited range lies within the Group's own log: past its head is refused, and a
    /// range that exists only in another Group's longer log is past this one's head.
    async fn ctx1_an_event_range_past_the_head_or_of_another_group_is_refused(kind: Kind) {
        let h = harness(kind).await;
        let (worker, artifact) = setting(&h).await;
        let g1_head = head(&h, "g1").await;
        let payload = package(
            &worker,
            ("g1", "mission-1"),
            "pkg-1",
            1,
            None,
            (1, g1_head + 1),
            &[artifact],
        );
        refused(
            &h,
            publish_context(&worker, "g1", &payload),
            "events_out_of_range",
        )
        .await;
        // g2's log runs well past g1's head.
        let other = h.agent("ctx-other", "g2", &["worker"]).await;
        for n in 0..3 {
            h.put(&other, "g2", format!("g2 artifact {n}").as_bytes(), &[])
                .await;
        }
        let g2_head = head(&h, "g2").await;
        assert!(g2_head > g1_head, "g2 {g2_head} > g1 {g1_head}");
        let payload = package(
            &worker,
            ("g1", "mission-1"),
            "pkg-1",
            1,
            None,
            (g1_head, g2_head),
            &[artifact],
        );
        refused(
            &h,
            publish_context(&worker, "g1", &payload),
            "events_out_of_range",
        )
        .await;
        // A package of g2 cannot be published through g1's route, nor by a g1 session in g2.
        let payload = package(
            &worker,
            ("g2", "mission-1-g2"),
            "pkg-1",
            1,
            None,
            (1, 2),
            &[],
        );
        refused(
            &h,
            publish_context(&worker, "g1", &payload),
            "group_mismatch",
        )
        .await;
        refused(&h, publish_context(&worker, "g2", &payload), "not_a_member").await;
    }
);

backends!(
    /// DESIGN §11: a cited Artifact must exist and be readable by the generator; one of
    /// another Group answers as one that does not exist.
    async fn cited_artifacts_must_exist_and_be_readable(kind: Kind) {
        let h = harness(kind).await;
        let (worker, artifact) = setting(&h).await;
        let unknown = weft_api::digest::Hasher::digest(b"never published").blake3;
        let payload = package(
            &worker,
            ("g1", "mission-1"),
            "pkg-1",
            1,
            None,
            (1, 2),
            &[artifact, unknown],
        );
        refused(
            &h,
            publish_context(&worker, "g1", &payload),
            "unknown_artifact",
        )
        .await;
        let other = h.agent("ctx-other", "g2", &["worker"]).await;
        let theirs = h.put(&other, "g2", b"g2 secret", &[]).await;
        let payload = package(
            &worker,
            ("g1", "mission-1"),
            "pkg-1",
            1,
            None,
            (1, 2),
            &[theirs],
        );
        refused(
            &h,
            publish_context(&worker, "g1", &payload),
            "unknown_artifact",
        )
        .await;
    }
);

backends!(
    /// CTX-4: the generator is the signer, a member allowed to write the Mission, and the
    /// Mission and WorkItem scope exist in the Group.
    async fn ctx4_the_generator_must_be_a_member_allowed_to_write(kind: Kind) {
        let h = harness(kind).await;
        let (worker, artifact) = setting(&h).await;
        let auditor = h.agent("ctx-auditor", "g1", &["auditor"]).await;
        let payload = package(
            &auditor,
            ("g1", "mission-1"),
            "pkg-1",
            1,
            None,
            (1, 2),
            &[artifact],
        );
        refused(&h, publish_context(&auditor, "g1", &payload), "forbidden").await;
        // Signed by the worker, sent by the auditor's session.
        let payload = package(
            &worker,
            ("g1", "mission-1"),
            "pkg-1",
            1,
            None,
            (1, 2),
            &[artifact],
        );
        let envelope = Envelope::sign(&worker.key, CONTEXT_TYPE, payload.to_string().as_bytes());
        let request = request(
            Method::POST,
            "/v1/groups/g1/context",
            Some(&auditor.token),
            serde_json::to_vec(&envelope).expect("json"),
        );
        refused(&h, request, "producer_mismatch").await;
        // A generator naming another Agent than the signer.
        let mut payload = package(
            &worker,
            ("g1", "mission-1"),
            "pkg-1",
            1,
            None,
            (1, 2),
            &[artifact],
        );
        payload["generator"]["agentId"] = json!("ctx-auditor");
        refused(
            &h,
            publish_context(&worker, "g1", &payload),
            "producer_mismatch",
        )
        .await;
        let payload = package(
            &worker,
            ("g1", "no-such-mission"),
            "pkg-1",
            1,
            None,
            (1, 2),
            &[],
        );
        refused(&h, publish_context(&worker, "g1", &payload), "not_found").await;
        let mut payload = package(&worker, ("g1", "mission-1"), "pkg-1", 1, None, (1, 2), &[]);
        payload["workItemId"] = json!("no-such-work");
        refused(
            &h,
            publish_context(&worker, "g1", &payload),
            "unknown_work_item",
        )
        .await;
    }
);
