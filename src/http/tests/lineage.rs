//! Provenance for auditors (ART-4, CTX-5): bounded lineage, paths, impact, formats, access,
//! and provenance per Mission when Missions share bytes (issue #50). Long (about 700 lines):
//! one file per feature's suite, and lineage's questions share the helpers above.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use weft_api::ArtifactId;
use weft_storage::{Options, Store};

use super::harness::*;

async fn lineage(h: &Harness, agent: &Agent, uri: &str) -> Value {
    let answer = h
        .call(Method::GET, uri, Some(&agent.token), Body::empty())
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{uri}: {answer:?}");
    answer.json()
}

fn ids(answer: &Value) -> Vec<String> {
    answer["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .map(|a| a["id"].as_str().expect("id").to_owned())
        .collect()
}

backends!(
    /// ART-4: derived Artifacts form a graph through their sources; queries walk it both ways,
    /// bounded by depth and limit, with typed edges and the depth each node was reached at.
    async fn lineage_walks_ancestors_and_descendants_with_bounds(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let a = h.put(&worker, "g1", b"a", &[]).await;
        let b = h.put(&worker, "g1", b"b", &[a]).await;
        let c = h.put(&worker, "g1", b"c", &[b]).await;
        let d = h.put(&worker, "g1", b"d", &[a, c]).await;
        let up = lineage(
            &h,
            &worker,
            &format!("/v1/artifacts/{c}/provenance?depth=1"),
        )
        .await;
        assert_eq!(ids(&up), [c.to_string(), b.to_string()]);
        assert_eq!(up["artifacts"][1]["depth"], json!(1));
        let all_up = lineage(&h, &worker, &format!("/v1/artifacts/{d}/provenance")).await;
        assert_eq!(
            ids(&all_up),
            [d.to_string(), a.to_string(), c.to_string(), b.to_string()]
        );
        let down = lineage(
            &h,
            &worker,
            &format!("/v1/artifacts/{a}/provenance?direction=descendants"),
        )
        .await;
        assert_eq!(
            ids(&down),
            [a.to_string(), b.to_string(), d.to_string(), c.to_string()]
        );
        let edges: Vec<(String, String, String)> = down["edges"]
            .as_array()
            .expect("edges")
            .iter()
            .map(|e| {
                (
                    e["from"].as_str().unwrap_or_default().to_owned(),
                    e["to"].as_str().unwrap_or_default().to_owned(),
                    e["type"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        assert!(edges.contains(&(c.to_string(), b.to_string(), "derivedFrom".into())));
        assert!(edges.contains(&(
            a.to_string(),
            "workItem:work-1".into(),
            "generatedBy".into()
        )));
        assert!(edges.contains(&(
            "workItem:work-1".into(),
            "mission:mission-1".into(),
            "partOf".into()
        )));
        assert!(edges.contains(&(a.to_string(), "agent:w1".into(), "attributedTo".into())));
        assert_eq!(down["workItems"], json!(["work-1"]));
        // A limit cuts the answer and hands out a cursor for the rest.
        let first = lineage(
            &h,
            &worker,
            &format!("/v1/artifacts/{a}/provenance?direction=descendants&limit=2"),
        )
        .await;
        assert_eq!(
            (first["truncated"].as_bool(), ids(&first).len()),
            (Some(true), 2)
        );
        let cursor = first["cursor"].as_str().expect("cursor");
        let rest = lineage(
            &h,
            &worker,
            &format!("/v1/artifacts/{a}/provenance?direction=descendants&limit=2&cursor={cursor}"),
        )
        .await;
        assert_eq!(ids(&rest), [d.to_string(), c.to_string()], "{kind:?}");
        // Both directions at once.
        let both = lineage(
            &h,
            &worker,
            &format!("/v1/artifacts/{b}/provenance?direction=both&depth=1"),
        )
        .await;
        assert_eq!(ids(&both).len(), 3);
    }
);

#[tokio::test]
async fn paths_impact_and_formats() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let a = h.put(&worker, "g1", b"a", &[]).await;
    let b = h.put(&worker, "g1", b"b", &[a]).await;
    let c = h.put(&worker, "g1", b"c", &[b]).await;
    let lonely = h.put(&worker, "g1", b"unrelated", &[]).await;
    let path = lineage(&h, &worker, &format!("/v1/provenance/path?from={a}&to={c}")).await;
    assert_eq!(path["path"], json!([a, b, c]));
    let back = lineage(&h, &worker, &format!("/v1/provenance/path?from={c}&to={a}")).await;
    assert_eq!(back["path"], json!([c, b, a]));
    let none = h
        .call(
            Method::GET,
            &format!("/v1/provenance/path?from={a}&to={lonely}"),
            Some(&worker.token),
            Body::empty(),
        )
        .await;
    assert_eq!(
        (none.status, none.code().as_str()),
        (StatusCode::NOT_FOUND, "no_path")
    );
    let short = h
        .call(
            Method::GET,
            &format!("/v1/provenance/path?from={a}&to={c}&maxDepth=1"),
            Some(&worker.token),
            Body::empty(),
        )
        .await;
    assert_eq!(short.code(), "no_path");
    let impact = lineage(&h, &worker, &format!("/v1/provenance/impact?artifact={a}")).await;
    assert_eq!(ids(&impact), [a.to_string(), b.to_string(), c.to_string()]);
    assert_eq!(
        (impact["workItems"].clone(), impact["missions"].clone()),
        (json!(["work-1"]), json!(["mission-1"]))
    );
    let dot = h
        .call(
            Method::GET,
            &format!("/v1/artifacts/{c}/provenance?format=dot"),
            Some(&worker.token),
            Body::empty(),
        )
        .await;
    let dot = String::from_utf8_lossy(&dot.body).into_owned();
    assert!(
        dot.starts_with("digraph lineage {")
            && dot.contains(&format!("\"{c}\" -> \"{b}\" [label=\"derivedFrom\"]")),
        "{dot}"
    );
    let mermaid = h
        .call(
            Method::GET,
            &format!("/v1/artifacts/{c}/provenance?format=mermaid"),
            Some(&worker.token),
            Body::empty(),
        )
        .await;
    let mermaid = String::from_utf8_lossy(&mermaid.body).into_owned();
    assert!(
        mermaid.starts_with("graph BT") && mermaid.contains("-->|derivedFrom|"),
        "{mermaid}"
    );
    for bad in [
        format!("/v1/artifacts/{a}/provenance?direction=sideways"),
        format!("/v1/artifacts/{a}/provenance?depth=-1"),
        format!("/v1/artifacts/{a}/provenance?format=svg"),
        format!("/v1/artifacts/{a}/provenance?bogus=1"),
        format!("/v1/provenance/path?from={a}"),
        "/v1/provenance/impact".to_owned(),
    ] {
        refused(
            &h,
            request(Method::GET, &bad, Some(&worker.token), Body::empty()),
            "bad_request",
        )
        .await;
    }
    let answer = h
        .call(
            Method::GET,
            "/v1/provenance/path?from=blake3:XYZ&to=blake3:00",
            Some(&worker.token),
            Body::empty(),
        )
        .await;
    assert_eq!(answer.code(), "invalid_digest");
}

/// A reviewer of g1, and a worker of both g1 and g2: `bridge` holds a g1 session, `bridge2`
/// the same Agent's g2 session (a session acts in its own Group only).
async fn reader_and_bridge(h: &Harness) -> (Agent, Agent, Agent) {
    let reader = h.agent("r1", "g1", &["reviewer"]).await;
    let bridge2 = h.agent("bridge", "g2", &["worker"]).await;
    let bridge = h.join(&bridge2, "g1", &["worker"]).await;
    (reader, bridge, bridge2)
}

backends!(
    /// CTX-5, issue #10 finding 5: a manifest may cite only sources published in its own
    /// Group, so no Group's log, manifest view or export ever names what another Group holds;
    /// the same bytes published in two Groups show each reader its own Group's edges only.
    async fn lineage_withholds_other_groups(kind: Kind) {
        let h = harness(kind).await;
        let (reader, bridge, bridge2) = reader_and_bridge(&h).await;
        let root = h.put(&bridge2, "g2", b"secret root", &[]).await;
        let hidden = h.put(&bridge2, "g2", b"secret middle", &[root]).await;
        let digests = h.upload(&bridge, b"public child").await;
        let citing = sign(&bridge.key, &manifest(&bridge, "g1", digests, &[hidden]));
        let answer = refused(&h, publish_request(&bridge, &citing), "unknown_source").await;
        assert!(!answer.json().to_string().contains(&root.to_string()));
        // Published in g2 with its g2 source, and in g1 on its own.
        assert_eq!(
            h.put(&bridge2, "g2", b"public child", &[hidden]).await,
            digests.blake3
        );
        let visible = h.put(&bridge, "g1", b"public child", &[]).await;
        let answer = lineage(&h, &reader, &format!("/v1/artifacts/{visible}/provenance")).await;
        assert_eq!(ids(&answer), [visible.to_string()]);
        let text = answer.to_string();
        assert!(
            !text.contains(&hidden.to_string()) && !text.contains(&root.to_string()),
            "{kind:?}"
        );
        let events = h
            .get_json(&reader, "/v1/groups/g1/events")
            .await
            .to_string();
        assert!(
            !events.contains(&hidden.to_string()),
            "g1's log names no g2 artifact"
        );
        let denied = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{hidden}/provenance"),
                Some(&reader.token),
                Body::empty(),
            )
            .await;
        assert_eq!(denied.code(), "not_found");
        let full = lineage(&h, &bridge2, &format!("/v1/artifacts/{visible}/provenance")).await;
        assert_eq!(ids(&full).len(), 3);
        // The same Agent's g1 session sees g1 only.
        let own = lineage(&h, &bridge, &format!("/v1/artifacts/{visible}/provenance")).await;
        assert_eq!(ids(&own).len(), 1);
    }
);

backends!(
    /// A lineage query may name an artifact by its `sha256:` alias; a path to or from an artifact
    /// the reader cannot see is `not_found` (never `no_path`, which would tell it exists), and so
    /// is an alias nobody published (CTX-5).
    async fn aliases_and_paths_to_hidden_artifacts(kind: Kind) {
        let h = harness(kind).await;
        let (reader, bridge, bridge2) = reader_and_bridge(&h).await;
        let hidden = h.put(&bridge2, "g2", b"secret source", &[]).await;
        let parent = h.put(&bridge, "g1", b"public parent", &[]).await;
        let digests = h.upload(&bridge, b"public child").await;
        let child = manifest(&bridge, "g1", digests, &[parent]);
        assert_eq!(
            h.publish(&bridge, &sign(&bridge.key, &child)).await.status,
            StatusCode::CREATED
        );
        let by_blake3 = lineage(
            &h,
            &reader,
            &format!("/v1/artifacts/{}/provenance", digests.blake3),
        )
        .await;
        let by_sha256 = lineage(
            &h,
            &reader,
            &format!("/v1/artifacts/{}/provenance", digests.sha256),
        )
        .await;
        assert_eq!(by_sha256, by_blake3, "{kind:?}");
        assert_eq!(ids(&by_sha256).len(), 2);
        let unknown = format!("sha256:{}", "0".repeat(64));
        let hidden_sha256 = {
            let view = lineage(&h, &bridge2, &format!("/v1/artifacts/{hidden}")).await;
            view["digests"]["sha256"]
                .as_str()
                .expect("sha256")
                .to_owned()
        };
        for uri in [
            format!("/v1/artifacts/{unknown}/provenance"),
            format!("/v1/artifacts/{hidden_sha256}/provenance"),
            format!("/v1/provenance/path?from={}&to={hidden}", digests.blake3),
            format!("/v1/provenance/path?from={hidden}&to={}", digests.blake3),
            format!("/v1/provenance/path?from={}&to={unknown}", digests.sha256),
        ] {
            let get = request(Method::GET, &uri, Some(&reader.token), Body::empty());
            let answer = refused(&h, get, "not_found").await;
            assert_eq!(answer.status, StatusCode::NOT_FOUND, "{uri}");
        }
        let path = lineage(
            &h,
            &reader,
            &format!("/v1/provenance/path?from={}&to={parent}", digests.sha256),
        )
        .await;
        assert_eq!(path["path"].as_array().map(Vec::len), Some(2), "{path}");
    }
);

backends!(
    /// CTX-5: an edge declared by a manifest in another Group is not followed by a path search,
    /// even between two artifacts the reader can see.
    async fn paths_follow_only_edges_the_reader_can_see(kind: Kind) {
        let h = harness(kind).await;
        let (reader, bridge, bridge2) = reader_and_bridge(&h).await;
        let source = h.put(&bridge, "g1", b"shared source", &[]).await;
        let derived = h.put(&bridge, "g1", b"shared artifact", &[]).await;
        // The same bytes published again in g2, this time derived from `source` (published
        // in g2 too).
        assert_eq!(h.put(&bridge2, "g2", b"shared source", &[]).await, source);
        assert_eq!(
            h.put(&bridge2, "g2", b"shared artifact", &[source]).await,
            derived
        );
        let uri = format!("/v1/provenance/path?from={derived}&to={source}");
        let hidden = h
            .call(Method::GET, &uri, Some(&reader.token), Body::empty())
            .await;
        assert_eq!(
            (hidden.status, hidden.code().as_str()),
            (StatusCode::NOT_FOUND, "no_path"),
            "{kind:?}"
        );
        let seen = lineage(&h, &bridge2, &uri).await;
        assert_eq!(seen["path"].as_array().map(Vec::len), Some(2), "{seen}");
    }
);

/// Deep graphs are walked iteratively, and the index is rebuilt from the tables at start.
#[tokio::test]
async fn deep_chains_and_restarts() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let mut previous: Vec<ArtifactId> = Vec::new();
    for n in 0..300 {
        let id = h
            .put(&worker, "g1", format!("link {n}").as_bytes(), &previous)
            .await;
        previous = vec![id];
    }
    let tip = previous[0];
    let answer = lineage(
        &h,
        &worker,
        &format!("/v1/artifacts/{tip}/provenance?limit=10000"),
    )
    .await;
    assert_eq!(ids(&answer).len(), 300);
    assert_eq!(answer["artifacts"][299]["depth"], json!(299));
    let reopened = Store::open(Options::on_disk(h.dir.path()))
        .await
        .expect("reopen");
    let query = weft_storage::LineageQuery {
        direction: weft_storage::Direction::Ancestors,
        depth: Some(5),
        limit: 100,
        skip: 0,
        budget: std::time::Duration::from_secs(1),
        edges: None,
        as_of: None,
        mission: None,
    };
    let rebuilt = reopened
        .lineage()
        .lineage(
            weft_api::Digest::Blake3(tip),
            query,
            &weft_storage::Reader::Admin,
        )
        .await
        .expect("lineage");
    assert_eq!(
        rebuilt.artifacts.len(),
        6,
        "depth 0..=5 after a rebuild from the tables"
    );
}

backends!(
    /// WorkItem and Mission subgraphs, and the `edges=` filter.
    async fn scopes_and_edge_filters(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let input = h.put_in(&worker, "g1", b"input", &[], "collect").await;
        let report = h
            .put_in(&worker, "g1", b"report", &[input], "analyse")
            .await;
        let summary = h
            .put_in(&worker, "g1", b"summary", &[report], "analyse")
            .await;
        let analyse = lineage(&h, &worker, "/v1/workitems/analyse/provenance").await;
        let mut reached = ids(&analyse);
        reached.sort();
        let mut expected = vec![input.to_string(), report.to_string(), summary.to_string()];
        expected.sort();
        assert_eq!(
            reached, expected,
            "what the WorkItem produced and what that came from"
        );
        let roots: Vec<&Value> = analyse["artifacts"]
            .as_array()
            .expect("artifacts")
            .iter()
            .filter(|a| a["depth"] == json!(0))
            .collect();
        assert_eq!(roots.len(), 2);
        let collect = lineage(&h, &worker, "/v1/workitems/collect/provenance").await;
        assert_eq!(ids(&collect), [input.to_string()]);
        let mission = lineage(&h, &worker, "/v1/missions/mission-1/provenance").await;
        assert_eq!(ids(&mission).len(), 3);
        let only_derivations = lineage(
            &h,
            &worker,
            &format!("/v1/artifacts/{summary}/provenance?edges=derivedFrom"),
        )
        .await;
        assert!(
            only_derivations["edges"]
                .as_array()
                .expect("edges")
                .iter()
                .all(|e| e["type"] == "derivedFrom")
        );
        assert_eq!(ids(&only_derivations).len(), 3);
        let no_walk = lineage(
            &h,
            &worker,
            &format!("/v1/artifacts/{summary}/provenance?edges=generatedBy,attributedTo"),
        )
        .await;
        assert_eq!(
            ids(&no_walk),
            [summary.to_string()],
            "without derivedFrom nothing is walked"
        );
        assert!(
            no_walk["edges"]
                .as_array()
                .expect("edges")
                .iter()
                .all(|e| e["type"] != "derivedFrom")
        );
        let bad = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{summary}/provenance?edges=derivedFrom,wasBornIn"),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(bad.code(), "bad_request");
        let nothing = h
            .call(
                Method::GET,
                "/v1/workitems/never-ran/provenance",
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(nothing.code(), "not_found");
        let outsider = h.agent("x1", "g2", &["auditor"]).await;
        let hidden = h
            .call(
                Method::GET,
                "/v1/missions/mission-1/provenance",
                Some(&outsider.token),
                Body::empty(),
            )
            .await;
        assert_eq!(hidden.code(), "not_found", "{kind:?}");
    }
);

/// Time travel: `asOf=SEQ` answers as the graph stood after that sequence of the Group's log.
#[tokio::test]
async fn as_of_answers_as_the_log_stood() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let a = h.put_in(&worker, "g1", b"a", &[], "w").await;
    let b = h.put_in(&worker, "g1", b"b", &[a], "w").await;
    let sequence_of = |view: Value| view["manifests"][0]["sequence"].as_u64().expect("sequence");
    let seq_a = sequence_of(
        h.call(
            Method::GET,
            &format!("/v1/artifacts/{a}"),
            Some(&worker.token),
            Body::empty(),
        )
        .await
        .json(),
    );
    let seq_b = sequence_of(
        h.call(
            Method::GET,
            &format!("/v1/artifacts/{b}"),
            Some(&worker.token),
            Body::empty(),
        )
        .await
        .json(),
    );
    let then = lineage(
        &h,
        &worker,
        &format!("/v1/artifacts/{a}/provenance?direction=descendants&asOf={seq_a}"),
    )
    .await;
    assert_eq!(ids(&then), [a.to_string()], "b did not exist yet");
    assert_eq!(
        then["withheld"],
        json!(0),
        "not existing yet is not withholding"
    );
    let now = lineage(
        &h,
        &worker,
        &format!("/v1/artifacts/{a}/provenance?direction=descendants&asOf={seq_b}"),
    )
    .await;
    assert_eq!(ids(&now), [a.to_string(), b.to_string()]);
    let before = h
        .call(
            Method::GET,
            &format!("/v1/artifacts/{b}/provenance?asOf={}", seq_b - 1),
            Some(&worker.token),
            Body::empty(),
        )
        .await;
    assert_eq!(before.code(), "not_found");
    let admin = h
        .call(
            Method::GET,
            &format!("/v1/artifacts/{a}/provenance?asOf=3"),
            Some(ADMIN),
            Body::empty(),
        )
        .await;
    assert_eq!(admin.code(), "bad_request", "the admin names the Group");
    let admin = h
        .call(
            Method::GET,
            &format!("/v1/artifacts/{a}/provenance?asOf={seq_b}&group=g1&direction=descendants"),
            Some(ADMIN),
            Body::empty(),
        )
        .await;
    assert_eq!(ids(&admin.json()).len(), 2);
    assert_eq!(
        h.call(
            Method::GET,
            &format!("/v1/artifacts/{a}/provenance?asOf=-1"),
            Some(&worker.token),
            Body::empty()
        )
        .await
        .code(),
        "bad_request"
    );
}

/// Publishes `bytes` by `agent` in `group`, in Mission `mission` (WorkItem `work_item`).
async fn put_at(
    h: &Harness,
    agent: &Agent,
    group: &str,
    (mission, work_item): (&str, &str),
    bytes: &[u8],
    sources: &[ArtifactId],
) -> ArtifactId {
    let digests = h.upload(agent, bytes).await;
    let mut manifest = manifest(agent, group, digests, sources);
    manifest.mission_id = weft_api::Id::parse("m", mission).expect("id");
    manifest.work_item_id = weft_api::Id::parse("w", work_item).expect("id");
    let answer = h.publish(agent, &sign(&agent.key, &manifest)).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    digests.blake3
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

backends!(
    /// Issue #50: content addressing never merges provenance. The same report bytes are
    /// published in Mission A (from A's data), in Mission B (from B's data) and in another
    /// Group: an ancestry question names its Mission (or the bytes have only one), follows
    /// that Mission's manifests only, and the root's manifests say where else the bytes were
    /// published. Impact (descendants) still spans every Mission: everything made from bad
    /// bytes must be re-checked.
    async fn lineage_never_merges_missions_that_share_bytes(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let other = h.agent("w2", "g2", &["worker"]).await;
        let a_data = put_at(&h, &worker, "g1", ("mission-a", "wa"), b"A data", &[]).await;
        let b_data = put_at(&h, &worker, "g1", ("mission-b", "wb"), b"B data", &[]).await;
        let c_data = put_at(&h, &other, "g2", ("mission-c", "wc"), b"C data", &[]).await;
        let report = b"the final report";
        let r = put_at(&h, &worker, "g1", ("mission-a", "wa"), report, &[a_data]).await;
        put_at(&h, &worker, "g1", ("mission-b", "wb"), report, &[b_data]).await;
        put_at(&h, &other, "g2", ("mission-c", "wc"), report, &[c_data]).await;

        let ambiguous = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{r}/provenance"),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(ambiguous.status, StatusCode::BAD_REQUEST, "{ambiguous:?}");
        let message = ambiguous.json()["detail"].to_string();
        assert!(
            message.contains("mission-a") && message.contains("mission-b"),
            "{message}"
        );
        assert!(
            !message.contains("mission-c"),
            "another Group's Mission: {message}"
        );

        let in_b = lineage(
            &h,
            &worker,
            &format!("/v1/artifacts/{r}/provenance?missionId=mission-b"),
        )
        .await;
        assert_eq!(
            sorted(ids(&in_b)),
            sorted(vec![r.to_string(), b_data.to_string()]),
            "{kind:?}: B's report derives from B's data only"
        );
        assert_eq!(
            in_b["withheld"], 0,
            "g2's manifests are not B's: not walked"
        );
        let root_missions: Vec<&str> = in_b["artifacts"][0]["manifests"]
            .as_array()
            .expect("manifests")
            .iter()
            .map(|m| m["missionId"].as_str().expect("mission"))
            .collect();
        assert_eq!(
            root_missions,
            ["mission-a", "mission-b"],
            "where else the bytes are"
        );
        let in_a = lineage(
            &h,
            &worker,
            &format!("/v1/artifacts/{r}/provenance?missionId=mission-a"),
        )
        .await;
        assert_eq!(
            sorted(ids(&in_a)),
            sorted(vec![r.to_string(), a_data.to_string()])
        );
        let elsewhere = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{r}/provenance?missionId=mission-c"),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(elsewhere.status, StatusCode::NOT_FOUND, "{elsewhere:?}");

        // A Mission's own subgraph follows its own manifests, and so does its WorkItem's.
        let mission_b = lineage(&h, &worker, "/v1/missions/mission-b/provenance").await;
        assert_eq!(
            sorted(ids(&mission_b)),
            sorted(vec![r.to_string(), b_data.to_string()])
        );
        let work_item_b = lineage(&h, &worker, "/v1/workitems/wb/provenance").await;
        assert_eq!(
            sorted(ids(&work_item_b)),
            sorted(ids(&mission_b)),
            "{kind:?}"
        );
        // One Mission only: no name needed. Impact spans every Mission.
        let only = lineage(&h, &worker, &format!("/v1/artifacts/{a_data}/provenance")).await;
        assert_eq!(ids(&only), [a_data.to_string()]);
        let impact = lineage(
            &h,
            &worker,
            &format!("/v1/artifacts/{b_data}/provenance?direction=descendants"),
        )
        .await;
        assert_eq!(
            sorted(ids(&impact)),
            sorted(vec![b_data.to_string(), r.to_string()])
        );
        // The other Group's reader sees its own Mission's provenance only.
        let in_c = lineage(&h, &other, &format!("/v1/artifacts/{r}/provenance")).await;
        assert_eq!(
            sorted(ids(&in_c)),
            sorted(vec![r.to_string(), c_data.to_string()])
        );
    }
);
