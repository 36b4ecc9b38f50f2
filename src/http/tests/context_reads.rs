//! Reading Context Packages (CTX-1, CTX-3, CTX-4, DESIGN §11): versions read back, the cited
//! Events to a member of the Group and nothing to another Group, and provenance in every
//! export format.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use weft_api::Envelope;

use super::harness::*;
use crate::http::tests::context::{head, package, publish_context, published, setting};

backends!(
    /// CTX-4, CTX-1: version 1 then 2, each with its Event; latest, every version and one
    /// version read back with the signed envelope; the same version again is a replay.
    async fn ctx4_a_package_gains_versions_and_reads_them_back(kind: Kind) {
        let h = harness(kind).await;
        let (worker, artifact) = setting(&h).await;
        let v1 = package(
            &worker,
            ("g1", "mission-1"),
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
            ("g1", "mission-1"),
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
        // A version is also found by its own id.
        let by_id = h.get_json(&worker, &format!("/v1/context/{id1}")).await;
        assert_eq!(by_id["package"], v1);
        let listed_by_id = h
            .get_json(&worker, &format!("/v1/context/{id1}/versions"))
            .await;
        assert_eq!(listed_by_id["packageId"], "pkg-1");
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
        // Versions are SQLite integers: one above i64 is refused, not a 500 (Schemathesis).
        for version in ["9223372036854775808", "+1", "-1", "1.0"] {
            let path = format!("/v1/context/pkg-1/versions/{version}");
            refused(
                &h,
                request(Method::GET, &path, Some(&worker.token), Body::empty()),
                "bad_request",
            )
            .await;
        }
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
            ("g1", "mission-1"),
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
                ("g1", "mission-1"),
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
                ("g1", "mission-1"),
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
        // The W3C `prov` package reads it back, every relation pointing at a declared node.
        let checked = crate::http::tests::exports::run_python(
            "prov_roundtrip.py",
            &[],
            prov.to_string().as_bytes(),
        );
        assert!(checked.starts_with("ok"), "{checked}");
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

backends!(
    /// Issue #40 (DESIGN §11: "the same parameters and formats as an artifact's"): a package's
    /// provenance takes `direction`; `descendants` walks the cited Artifacts forward (what was
    /// derived from them), the default walks them back; an unknown direction is `bad_request`.
    async fn context_provenance_takes_a_direction(kind: Kind) {
        let h = harness(kind).await;
        let (worker, artifact) = setting(&h).await;
        let derived = h
            .put(&worker, "g1", b"{\"later\": true}", &[artifact])
            .await;
        let cites = package(
            &worker,
            ("g1", "mission-1"),
            "pkg-d",
            1,
            None,
            (1, 2),
            &[artifact],
        );
        published(&h, &worker, "g1", &cites).await;
        let derived_from = |lineage: &Value| {
            lineage["edges"].as_array().expect("edges").iter().any(|e| {
                e["from"] == json!(derived.to_string())
                    && e["to"] == json!(artifact.to_string())
                    && e["type"] == "derivedFrom"
            })
        };
        let back = h.get_json(&worker, "/v1/context/pkg-d/provenance").await;
        assert!(!derived_from(&back), "{back}");
        for direction in ["descendants", "both"] {
            let forward = h
                .get_json(
                    &worker,
                    &format!("/v1/context/pkg-d/provenance?direction={direction}"),
                )
                .await;
            assert!(derived_from(&forward), "{direction}: {forward}");
            assert_eq!(forward["contexts"].as_array().map(Vec::len), Some(1));
        }
        let edges = h
            .get_json(
                &worker,
                "/v1/context/pkg-d/provenance?direction=descendants&edges=derivedFrom&format=json",
            )
            .await;
        assert!(derived_from(&edges), "{edges}");
        // The operator's `asOf` counts in the package's own Group.
        let answer = h
            .call(
                Method::GET,
                "/v1/context/pkg-d/provenance?asOf=1",
                Some(ADMIN),
                Body::empty(),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        refused(
            &h,
            request(
                Method::GET,
                "/v1/context/pkg-d/provenance?direction=sideways",
                Some(&worker.token),
                Body::empty(),
            ),
            "bad_request",
        )
        .await;
    }
);

backends!(
    /// Collection keeps the bytes a Context Package version cites, past every policy, and
    /// disposes of the rest (V41: the version's citations are rows of their own, found by
    /// the digest; before, a scan of every version's JSON for each blob).
    async fn collection_keeps_what_a_context_package_cites(kind: Kind) {
        let h = harness(kind).await;
        let (worker, cited) = crate::http::tests::context::setting(&h).await;
        let other = h.put(&worker, "g1", b"cited by nothing", &[]).await;
        let payload = crate::http::tests::context::package(
            &worker,
            ("g1", "mission-1"),
            "pkg-kept",
            1,
            None,
            (1, 2),
            &[cited],
        );
        crate::http::tests::context::published(&h, &worker, "g1", &payload).await;
        crate::http::tests::lifecycle::past_keep_bytes(&h, 3).await;
        let report = crate::http::tests::lifecycle::gc(&h, false).await;
        assert_eq!(
            crate::http::tests::lifecycle::disposed(&report),
            [other.to_string()],
            "{kind:?}: {report}"
        );
    }
);
