//! Context Packages (CTX-1…4, DESIGN §11): publishing signed versions, the version chain and
//! each way to break it, the cited Event range, cited Artifacts, reads scoped to the Group,
//! and provenance in every export format. Forwarding (CTX-7) and the scheduling view (CTX-8)
//! are in `context_forward.rs`.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use weft_api::context::CONTEXT_TYPE;
use weft_api::{ArtifactId, Envelope};

use super::harness::*;

/// A valid version of `package` by `agent` in `group`, Mission `mission`, citing `artifacts`
/// and Events `from..=to`.
pub(super) fn package(
    agent: &Agent,
    group: &str,
    mission: &str,
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
    /// CTX-4, CTX-1: version 1 then 2, each with its Event; latest, every version and one
    /// version read back with the signed envelope; the same version again is a replay.
    async fn ctx4_a_package_gains_versions_and_reads_them_back(kind: Kind) {
        let h = harness(kind).await;
        let (worker, artifact) = setting(&h).await;
        let v1 = package(
            &worker,
            "g1",
            "mission-1",
            "pkg-1",
            1,
            None,
            (1, 3),
            &[artifact],
        );
        let id1 = published(&h, &worker, "g1", &v1).await;
        let again = h.send(publish_context(&worker, "g1", &v1)).await;
        assert_eq!(
            again.status,
            StatusCode::OK,
            "the same version again replays: {again:?}"
        );
        let to = head(&h, "g1").await;
        let v2 = package(
            &worker,
            "g1",
            "mission-1",
            "pkg-1",
            2,
            Some(&id1),
            (1, to),
            &[artifact],
        );
        let id2 = published(&h, &worker, "g1", &v2).await;

        let latest = h.get_json(&worker, "/v1/context/pkg-1").await;
        assert_eq!(latest["contextId"], json!(id2.to_string()));
        assert_eq!(latest["package"]["previous"], json!(id1.to_string()));
        let versions = h.get_json(&worker, "/v1/context/pkg-1/versions").await;
        let listed: Vec<&str> = versions["versions"]
            .as_array()
            .expect("versions")
            .iter()
            .map(|v| v["contextId"].as_str().expect("id"))
            .collect();
        assert_eq!(listed, [id1.to_string(), id2.to_string()]);
        let first = h.get_json(&worker, "/v1/context/pkg-1/versions/1").await;
        assert_eq!(first["package"], v1);
        let events = h
            .get_json(&worker, "/v1/groups/g1/events?after=0&limit=1000")
            .await;
        let published: Vec<&Value> = events["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["type"] == "context.published")
            .collect();
        assert_eq!(published.len(), 2, "one Event per version");
        assert_eq!(published[1]["payload"]["previous"], json!(id1.to_string()));
        let missing = h
            .call(
                Method::GET,
                "/v1/context/pkg-1/versions/3",
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(missing.code(), "not_found");
    }
);

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
            "g1",
            "mission-1",
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
                "g1",
                "mission-1",
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
            &package(&worker, "g1", "mission-1", "pkg-b", 1, None, range, &[]),
        )
        .await;
        let c1 = published(
            &h,
            &worker,
            "g1",
            &package(&worker, "g1", "mission-2", "pkg-c", 1, None, range, &[]),
        )
        .await;
        let unknown: ArtifactId = weft_api::digest::Hasher::digest(b"no such version").blake3;
        for (name, payload, code) in [
            (
                "version 1 of a started package",
                package(&worker, "g1", "mission-1", "pkg-a", 1, None, (1, 3), &[]),
                "context_previous_mismatch",
            ),
            (
                "previous unknown",
                package(
                    &worker,
                    "g1",
                    "mission-1",
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
                    "g1",
                    "mission-1",
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
                    "g1",
                    "mission-1",
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
                    "g1",
                    "mission-1",
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
                    "g1",
                    "mission-1",
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
                "g1",
                "mission-1",
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
            "g1",
            "mission-1",
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
            "g1",
            "mission-1",
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
            "g1",
            "mission-1",
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
            "g1",
            "mission-1",
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
        let payload = package(&worker, "g2", "mission-1-g2", "pkg-1", 1, None, (1, 2), &[]);
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
            "g1",
            "mission-1",
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
            "g1",
            "mission-1",
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
            "g1",
            "mission-1",
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
            "g1",
            "mission-1",
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
            "g1",
            "mission-1",
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
            "g1",
            "no-such-mission",
            "pkg-1",
            1,
            None,
            (1, 2),
            &[],
        );
        refused(&h, publish_context(&worker, "g1", &payload), "not_found").await;
        let mut payload = package(&worker, "g1", "mission-1", "pkg-1", 1, None, (1, 2), &[]);
        payload["workItemId"] = json!("no-such-work");
        refused(
            &h,
            publish_context(&worker, "g1", &payload),
            "unknown_work_item",
        )
        .await;
    }
);

backends!(
    /// CTX-3, CTX-1: the cited Events come back in order with their chain links, to a member
    /// of the Group; another Group's session gets `not_found` for the package and its Events.
    async fn ctx3_the_cited_events_come_back_to_a_member(kind: Kind) {
        let h = harness(kind).await;
        let (worker, artifact) = setting(&h).await;
        let to = head(&h, "g1").await;
        let payload = package(
            &worker,
            "g1",
            "mission-1",
            "pkg-1",
            1,
            None,
            (2, to),
            &[artifact],
        );
        let id = published(&h, &worker, "g1", &payload).await;
        let answer = h.get_json(&worker, "/v1/context/pkg-1/events").await;
        assert_eq!(answer["contextId"], json!(id.to_string()));
        let events = answer["events"].as_array().expect("events");
        let sequences: Vec<u64> = events
            .iter()
            .map(|e| e["sequence"].as_u64().expect("seq"))
            .collect();
        assert_eq!(sequences, (2..=to).collect::<Vec<_>>());
        for pair in events.windows(2) {
            assert_eq!(pair[1]["prevHash"], pair[0]["hash"], "the chain links hold");
        }
        let stranger = h.agent("ctx-stranger", "g2", &["coordinator"]).await;
        for uri in [
            "/v1/context/pkg-1",
            "/v1/context/pkg-1/versions",
            "/v1/context/pkg-1/versions/1",
            "/v1/context/pkg-1/events",
            "/v1/context/pkg-1/provenance",
        ] {
            let answer = h
                .call(Method::GET, uri, Some(&stranger.token), Body::empty())
                .await;
            assert_eq!(answer.code(), "not_found", "{uri}: no existence oracle");
        }
    }
);

backends!(
    /// DESIGN §11, CTX-4: provenance shows `revisionOf` between versions and `cites` of the
    /// Artifacts, in JSON, DOT, Mermaid, PROV-JSON and a signed in-toto Statement.
    async fn ctx4_provenance_shows_the_chain_in_every_format(kind: Kind) {
        let h = harness(kind).await;
        let (worker, artifact) = setting(&h).await;
        let derived = h
            .put(&worker, "g1", b"{\"derived\": true}", &[artifact])
            .await;
        let id1 = published(
            &h,
            &worker,
            "g1",
            &package(
                &worker,
                "g1",
                "mission-1",
                "pkg-1",
                1,
                None,
                (1, 2),
                &[artifact],
            ),
        )
        .await;
        let id2 = published(
            &h,
            &worker,
            "g1",
            &package(
                &worker,
                "g1",
                "mission-1",
                "pkg-1",
                2,
                Some(&id1),
                (1, 3),
                &[derived],
            ),
        )
        .await;
        let lineage = h.get_json(&worker, "/v1/context/pkg-1/provenance").await;
        assert_eq!(lineage["root"], json!(id2.to_string()));
        let edges = lineage["edges"].as_array().expect("edges");
        let has = |from: String, to: String, kind: &str| {
            edges
                .iter()
                .any(|e| e["from"] == json!(from) && e["to"] == json!(to) && e["type"] == kind)
        };
        assert!(
            has(
                format!("context:{id2}"),
                format!("context:{id1}"),
                "revisionOf"
            ),
            "{lineage}"
        );
        assert!(
            has(format!("context:{id1}"), artifact.to_string(), "cites"),
            "{lineage}"
        );
        assert!(
            has(format!("context:{id2}"), derived.to_string(), "cites"),
            "{lineage}"
        );
        assert!(
            has(derived.to_string(), artifact.to_string(), "derivedFrom"),
            "the cited Artifact's lineage: {lineage}"
        );
        assert_eq!(lineage["contexts"].as_array().expect("contexts").len(), 2);
        let typed: weft_api::lineage::Lineage =
            serde_json::from_value(lineage.clone()).expect("the api type reads it");
        assert_eq!(typed.contexts.len(), 2);

        let text = |answer: Answer| String::from_utf8(answer.body.to_vec()).expect("utf-8");
        let dot = text(
            h.call(
                Method::GET,
                "/v1/context/pkg-1/provenance?format=dot",
                Some(&worker.token),
                Body::empty(),
            )
            .await,
        );
        assert!(
            dot.contains(&format!(
                "\"context:{id2}\" -> \"context:{id1}\" [label=\"revisionOf\"]"
            )),
            "{dot}"
        );
        let mermaid = text(
            h.call(
                Method::GET,
                "/v1/context/pkg-1/provenance?format=mermaid",
                Some(&worker.token),
                Body::empty(),
            )
            .await,
        );
        assert!(
            mermaid.contains("|revisionOf|") && mermaid.contains("|cites|"),
            "{mermaid}"
        );
        let prov = h
            .get_json(&worker, "/v1/context/pkg-1/provenance?format=prov-json")
            .await;
        let revisions = prov["wasDerivedFrom"]
            .as_object()
            .expect("wasDerivedFrom")
            .values()
            .filter(|r| r["prov:type"]["$"] == "prov:Revision")
            .count();
        assert_eq!(revisions, 1, "{prov}");
        let envelope: Envelope = serde_json::from_value(
            h.get_json(&worker, "/v1/context/pkg-1/provenance?format=intoto")
                .await,
        )
        .expect("envelope");
        use base64::Engine as _;
        let statement: Value = serde_json::from_slice(
            &weft_api::dsse::BASE64
                .decode(&envelope.payload)
                .expect("b64"),
        )
        .expect("json");
        let dependencies = statement["predicate"]["buildDefinition"]["resolvedDependencies"]
            .as_array()
            .expect("deps");
        assert!(
            dependencies
                .iter()
                .any(|d| d["name"] == json!(format!("context:{id1}"))
                    && d["annotations"]["relation"] == "revisionOf"),
            "{statement}"
        );
        assert_eq!(
            statement["subject"][0]["name"],
            json!(format!("context:{id2}"))
        );
    }
);
