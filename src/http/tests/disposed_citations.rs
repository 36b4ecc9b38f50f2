//! Issue #46: Evidence may not cite bytes a retention policy disposed of (a reviewer could
//! never fetch them): `410 disposed`, nothing changed; once the bytes are uploaded again, the
//! same Evidence is recorded. On a shared index the record takes the disposal fence, so a
//! collection batch either committed before it (and it is refused) or sees its citation.

use axum::http::{Method, StatusCode};

use super::harness::*;
use super::lifecycle::{gc, past_keep_bytes};
use super::work_setup::{evidence_payload, signed_evidence};

backends!(
    async fn evidence_may_not_cite_disposed_bytes(kind: Kind) {
        let h = harness_files(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes = b"the bytes a reviewer would fetch".to_vec();
        let artifact = h.put(&worker, "g1", &bytes, &[]).await;
        past_keep_bytes(&h, 2).await;
        let report = gc(&h, false).await;
        assert_eq!(
            report["disposed"][0]["artifact"],
            artifact.to_string(),
            "{report}"
        );
        let coordinator = h.harness_coordinator("g1").await;
        let cited = artifact.to_string();
        let evidence = evidence_payload(
            &coordinator,
            "g1",
            "mission-1",
            "work-1",
            "human",
            &[&cited],
        );
        let send = |agent: &Agent| {
            request(
                Method::POST,
                "/v1/evidence",
                Some(&agent.token),
                signed_evidence(agent, &evidence),
            )
        };
        refused(&h, send(&coordinator), "disposed").await;
        let worker = Agent {
            token: h.session(&worker.key, "w1", "g1").await,
            ..worker
        };
        h.upload(&worker, &bytes).await;
        let recorded = h.send(send(&coordinator)).await;
        assert_eq!(
            recorded.status,
            StatusCode::CREATED,
            "{kind:?}: {recorded:?}"
        );
    }
);
