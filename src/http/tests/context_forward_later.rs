//! CTX-7 after a forward: a Context Package forwarded into another Group vouches for the
//! source Group's manifests of its artifacts as they stood when it was forwarded. Before
//! (V51), the target Group saw every manifest of the artifact in the source Group, also
//! those published later, whose classification the forward never weighed: a `restricted`
//! manifest published after an `internal` one was forwarded showed its envelope (Mission,
//! WorkItem, producer, sources) to the target's members.

use axum::http::{Method, StatusCode};
use serde_json::json;
use weft_api::manifest::Classification;

use super::context::{package, published, setting};
use super::harness::*;

backends!(
    async fn a_forward_shows_the_manifests_it_weighed_not_later_ones(kind: Kind) {
        let h = harness(kind).await;
        let (worker, artifact) = setting(&h).await;
        published(
            &h,
            &worker,
            "g1",
            &package(
                &worker,
                ("g1", "mission-1"),
                "pkg-1",
                1,
                None,
                (1, 2),
                &[artifact],
            ),
        )
        .await;
        let coordinator = h.agent("ctx-coord", "g1", &["coordinator"]).await;
        h.join(&coordinator, "g2", &["coordinator"]).await;
        let reader = h.agent("ctx-reader", "g2", &["worker"]).await;
        let answer = h
            .json_as(
                Method::POST,
                "/v1/context/pkg-1/forward",
                &coordinator.token,
                json!({"toGroupId": "g2"}),
                &[],
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{kind:?}: {answer:?}");
        let uri = format!("/v1/artifacts/{artifact}");
        let before = h.get_json(&reader, &uri).await;
        assert_eq!(
            before["manifests"].as_array().map(Vec::len),
            Some(1),
            "{before}"
        );

        // The source Group publishes the same bytes again, restricted.
        let mut restricted = manifest(&worker, "g1", digest_of(b"{\"findings\": 3}"), &[]);
        restricted.classification = Classification::Restricted;
        let envelope = sign(&worker.key, &restricted);
        let published = h.publish(&worker, &envelope).await;
        assert_eq!(published.status, StatusCode::CREATED, "{published:?}");
        let in_g1 = h.get_json(&worker, &uri).await;
        assert_eq!(
            in_g1["manifests"].as_array().map(Vec::len),
            Some(2),
            "{in_g1}"
        );

        let after = h.get_json(&reader, &uri).await;
        assert_eq!(
            after["manifests"], before["manifests"],
            "{kind:?}: the target still sees only what was forwarded"
        );
    }
);
