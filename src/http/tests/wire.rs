//! The lineage answers' wire shape: every JSON answer the provenance routes send decodes into
//! its `weft_api::lineage` type and re-serialises to the same JSON value, so the api types
//! neither lose nor invent a field (they deny unknown ones, so a new server field fails here).

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use weft_api::lineage::{Lineage, LineagePath};

use super::harness::*;

/// GETs `uri` as `agent`, decodes it as `T`, and asserts re-serialising gives what was sent;
/// returns the decoded answer and the bytes the server sent.
async fn round_trip<T: DeserializeOwned + Serialize>(
    h: &Harness,
    agent: &Agent,
    uri: &str,
) -> (T, String) {
    let answer = h
        .call(Method::GET, uri, Some(&agent.token), Body::empty())
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{uri}: {answer:?}");
    let sent = answer.json();
    let typed: T =
        serde_json::from_value(sent.clone()).unwrap_or_else(|e| panic!("{uri}: {e}: {sent}"));
    let again = serde_json::to_value(&typed).expect("serialise");
    assert_eq!(again, sent, "{uri}");
    let text = String::from_utf8(answer.body.to_vec()).expect("utf-8");
    (typed, text)
}

/// A [`Lineage`] answer round-trips byte for byte, not only as a JSON value: `weft lineage
/// --format json` prints the re-serialised answer and must print what the server sent.
async fn lineage(h: &Harness, agent: &Agent, uri: &str) -> Lineage {
    let (typed, text) = round_trip::<Lineage>(h, agent, uri).await;
    assert_eq!(
        serde_json::to_string(&typed).expect("serialise"),
        text,
        "{uri}"
    );
    typed
}

backends!(
    /// Every JSON lineage answer kind (artifact lineage in each direction, truncated and
    /// continued, WorkItem and Mission subgraphs, impact, path) round-trips through the api
    /// types, with `withheld`, `truncated` and `cursor` all exercised.
    async fn lineage_answers_round_trip_through_the_api_types(kind: Kind) {
        let h = harness(kind).await;
        let reader = h.agent("r1", "g1", &["reviewer"]).await;
        let bridge = h.agent("bridge", "g1", &["worker"]).await;
        let a = h.put_in(&bridge, "g1", b"a", &[], "collect").await;
        let b = h.put_in(&bridge, "g1", b"b", &[a], "analyse").await;
        let c = h.put_in(&bridge, "g1", b"c", &[b], "analyse").await;
        let d = h.put_in(&bridge, "g1", b"d", &[a, c], "report").await;

        let up = lineage(&h, &reader, &format!("/v1/artifacts/{d}/provenance")).await;
        assert_eq!(up.root, Some(d));
        assert_eq!(up.artifacts.len(), 4);
        assert_eq!(
            up.withheld, 0,
            "a manifest cites only its own Group's sources: {up:?}"
        );
        assert!(!up.truncated && up.cursor.is_none());
        assert!(!up.work_items.is_empty() && !up.missions.is_empty() && !up.agents.is_empty());
        assert_eq!(up.artifacts[0].manifests[0].work_item_id, "report");

        let cut = lineage(
            &h,
            &reader,
            &format!("/v1/artifacts/{a}/provenance?direction=descendants&limit=2"),
        )
        .await;
        assert!(cut.truncated, "{cut:?}");
        let cursor = cut.cursor.clone().expect("cursor");
        let rest = lineage(
            &h,
            &reader,
            &format!("/v1/artifacts/{a}/provenance?direction=descendants&limit=2&cursor={cursor}"),
        )
        .await;
        assert!(!rest.artifacts.is_empty());
        let _ = lineage(
            &h,
            &reader,
            &format!("/v1/artifacts/{b}/provenance?direction=both&depth=1"),
        )
        .await;

        let work_item = lineage(&h, &reader, "/v1/workitems/analyse/provenance?limit=1").await;
        assert_eq!(work_item.root, None);
        assert!(
            work_item.truncated && work_item.cursor.is_some(),
            "{work_item:?}"
        );
        let mission = lineage(&h, &reader, "/v1/missions/mission-1/provenance").await;
        assert_eq!(mission.withheld, 0, "{mission:?}");

        let impact = lineage(&h, &reader, &format!("/v1/provenance/impact?artifact={a}")).await;
        assert_eq!(impact.root, Some(a));
        assert_eq!(impact.artifacts.len(), 4);

        let (path, _): (LineagePath, _) =
            round_trip(&h, &reader, &format!("/v1/provenance/path?from={d}&to={b}")).await;
        assert_eq!(path.path, [d, c, b]);
        assert_eq!(path.length, 2);
    }
);
