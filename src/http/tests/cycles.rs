//! DESIGN §6 with Groups: a publication's cycle check walks its own Group's provenance, never
//! another's. It ran before the WorkItem and lease checks and followed every Group's edges, so
//! its `cycle` answer told a member whether bytes it guessed were an ancestor of an artifact
//! in another Group's provenance (and another Group's edges refused this Group's work).

use axum::http::StatusCode;

use super::harness::*;

backends!(
    async fn the_cycle_check_never_reads_another_groups_provenance(kind: Kind) {
        let h = harness(kind).await;
        let theirs = h.agent("w3", "g2", &["worker"]).await;
        let mine = h.agent("w1", "g1", &["worker"]).await;
        let input = h.put(&theirs, "g2", b"their confidential input", &[]).await;
        let deliverable = h.put(&theirs, "g2", b"their deliverable", &[input]).await;
        // A member of g1 holds the deliverable's bytes and publishes them in its Group, then
        // guesses the input: its bytes, published citing the deliverable.
        assert_eq!(
            h.put(&mine, "g1", b"their deliverable", &[]).await,
            deliverable
        );
        let guessed = h.upload(&mine, b"their confidential input").await;
        let envelope = sign(&mine.key, &manifest(&mine, "g1", guessed, &[deliverable]));
        let answer = h.publish(&mine, &envelope).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{kind:?}: {answer:?}");
        // In its own Group, a cycle is refused as ever.
        let closing = sign(
            &mine.key,
            &manifest(
                &mine,
                "g1",
                digest_of(b"their deliverable"),
                &[guessed.blake3],
            ),
        );
        let answer = h.publish(&mine, &closing).await;
        assert_eq!(answer.code(), "cycle", "{kind:?}: {answer:?}");
    }
);
