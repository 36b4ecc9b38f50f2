//! Context Packages under Mission isolation (CTX-5, CTX-6): a Mission-scoped member gets no
//! package of another Mission (the same answer as for none) and writes none there (the same
//! answer as for a Mission that does not exist); a package
//! cites another Mission's Artifact only once it is reusable knowledge.

use axum::body::Body;
use axum::http::{Method, StatusCode};

use super::context::{head, package, publish_context, published};
use super::harness::*;
use super::scope::world;

backends!(
    /// CTX-5 and CTX-6 for Context Packages.
    async fn context_packages_keep_to_their_missions(kind: Kind) {
        let w = world(kind).await;
        let h = &w.h;
        let to = head(h, "g1").await;
        let other = package(
            &w.producer,
            ("g1", "mission-2"),
            "pkg-2",
            1,
            None,
            (1, to),
            &[w.a2],
        );
        published(h, &w.producer, "g1", &other).await;

        let (scoped, auditor) = (
            Some(w.scoped.token.as_str()),
            Some(w.auditor.token.as_str()),
        );
        let hidden = h
            .call(Method::GET, "/v1/context/pkg-2", scoped, Body::empty())
            .await;
        let missing = h
            .call(Method::GET, "/v1/context/pkg-none", scoped, Body::empty())
            .await;
        assert_eq!(hidden.status, StatusCode::NOT_FOUND, "{hidden:?}");
        assert_eq!(hidden.code(), missing.code());
        for uri in ["/v1/context/pkg-2/versions", "/v1/context/pkg-2/events"] {
            let answer = h
                .call(Method::GET, uri, Some(&w.scoped.token), Body::empty())
                .await;
            assert_eq!(answer.status, StatusCode::NOT_FOUND, "{uri}: {answer:?}");
        }
        let seen = h
            .call(Method::GET, "/v1/context/pkg-2", auditor, Body::empty())
            .await;
        assert_eq!(
            seen.status,
            StatusCode::OK,
            "the auditor sees the whole Group"
        );

        // Forwarding asks for the coordinator role first: the scoped member learns nothing of
        // which packages or versions exist.
        for package_id in ["pkg-2", "pkg-none"] {
            let forward = json_request(
                Method::POST,
                &format!("/v1/context/{package_id}/forward"),
                &w.scoped.token,
                serde_json::json!({"toGroupId": "g2", "version": 1}),
                &[],
            );
            refused(h, forward, "forbidden").await;
        }

        // Mission one's package may not cite Mission two's Artifact: it is not reusable.
        let citing = package(
            &w.producer,
            ("g1", "mission-1"),
            "pkg-1",
            1,
            None,
            (1, to),
            &[w.a2],
        );
        refused(
            h,
            publish_context(&w.producer, "g1", &citing),
            "not_reusable",
        )
        .await;
        // A member scoped to mission-1 writes no context of mission-2, and learns nothing of
        // it: the answer is the one for a Mission that does not exist.
        let scope = |mission| ("g1", mission);
        let foreign = package(
            &w.scoped,
            scope("mission-2"),
            "pkg-3",
            1,
            None,
            (1, to),
            &[],
        );
        let hidden = refused(h, publish_context(&w.scoped, "g1", &foreign), "not_found").await;
        let none = package(
            &w.scoped,
            scope("mission-zzz"),
            "pkg-3",
            1,
            None,
            (1, to),
            &[],
        );
        let absent = refused(h, publish_context(&w.scoped, "g1", &none), "not_found").await;
        assert_eq!(
            hidden.json()["detail"]
                .as_str()
                .map(|d| d.replace("mission-2", "M")),
            absent.json()["detail"]
                .as_str()
                .map(|d| d.replace("mission-zzz", "M")),
        );
        // Another Mission's package id is taken, with no version or Mission named.
        let taken = package(
            &w.scoped,
            scope("mission-1"),
            "pkg-2",
            1,
            None,
            (1, to),
            &[],
        );
        let request = publish_context(&w.scoped, "g1", &taken);
        let answer = refused(h, request, "context_other_mission").await;
        let detail = answer.json()["detail"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            !detail.contains("mission-2") && !detail.contains("version"),
            "{detail}"
        );
    }
);
