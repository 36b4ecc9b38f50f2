//! Issue #15: small artifacts read from memory (`storage/src/engine/hot.rs`): the same
//! answer as a read from the index, still verified, never across a Group or a Mission, and
//! never once the stored bytes are found corrupt.

use axum::body::Body;
use axum::http::{Method, StatusCode};

use super::harness::*;
use super::scope::scoped_agent;
use weft_api::ArtifactId;

/// The headers two reads of the same artifact must agree on.
fn shown(answer: &Answer) -> Vec<(String, String)> {
    [
        "content-type",
        "content-length",
        "etag",
        "repr-digest",
        "cache-control",
        "content-security-policy",
    ]
    .iter()
    .map(|name| {
        let value = answer
            .headers
            .get(*name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        (name.to_string(), value.to_owned())
    })
    .collect()
}

backends!(
    /// A small artifact read right after its publication is answered from memory, with the
    /// headers and bytes of a read from the index (by its SHA-256, which always goes there).
    async fn a_small_artifact_is_answered_from_memory_as_the_index_would(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes: Vec<u8> = (0..4096u32).map(|i| (i % 253) as u8).collect();
        let id = h.put(&worker, "g1", &bytes, &[]).await;
        let sha256 = digest_of(&bytes).sha256;
        let before = h.store.artifacts().hot_stats().hits;
        let hot = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{id}/content"),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(
            h.store.artifacts().hot_stats().hits,
            before + 1,
            "answered from memory"
        );
        let stored = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{sha256}/content"),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(
            h.store.artifacts().hot_stats().hits,
            before + 1,
            "the SHA-256 form reads the index"
        );
        assert_eq!(hot.status, StatusCode::OK);
        assert_eq!(stored.status, StatusCode::OK);
        assert_eq!(shown(&hot), shown(&stored));
        assert_eq!(hot.body, bytes);
        assert_eq!(stored.body, bytes);
    }
);

backends!(
    /// Visibility comes before memory: another Group, a Mission-scoped member of another
    /// Mission and an uploader of the same bytes in another Group get what a nonexistent
    /// artifact gets, and the cache is not asked.
    async fn memory_answers_no_one_the_index_would_refuse(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes = b"a small report of mission one".to_vec();
        let id = h.put(&worker, "g1", &bytes, &[]).await;
        let stranger = h.agent("w2", "g2", &["worker", "auditor"]).await;
        h.upload(&stranger, &bytes).await;
        let scoped = scoped_agent(&h, "s1", &["worker"], &["mission-2"]).await;
        let before = h.store.artifacts().hot_stats().hits;
        for reader in [&stranger, &scoped] {
            let request = axum::http::Request::builder()
                .uri(format!("/v1/artifacts/{id}/content"))
                .header("authorization", format!("Bearer {}", reader.token))
                .body(Body::empty())
                .expect("request");
            refused(&h, request, "not_found").await;
        }
        assert_eq!(h.store.artifacts().hot_stats().hits, before);
    }
);

/// ART-5 with the cache: bytes changed in the index under a cached artifact are never served
/// (memory holds the verified bytes); verify-now reads the index, finds the change and
/// quarantines the blob, which leaves memory at once; an upload of the good bytes repairs it.
#[tokio::test]
async fn a_corrupt_stored_copy_is_found_by_verify_now_and_never_served_from_memory() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let bytes: Vec<u8> = (0..4096u32).map(|i| (i % 241) as u8).collect();
    let id = h.put(&worker, "g1", &bytes, &[]).await;
    let uri = format!("/v1/artifacts/{id}/content");
    let mut flipped = bytes.clone();
    flipped[7] ^= 1;
    h.tamper_inline(&id, &flipped);
    let answer = h
        .call(Method::GET, &uri, Some(&worker.token), Body::empty())
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        answer.body, bytes,
        "the verified copy, never the changed bytes"
    );

    let reader = weft_storage::Reader::Agent {
        agent_id: worker.id.clone(),
        group_id: weft_api::Id::parse("g", "g1").expect("id"),
        scope: weft_storage::MissionScope::Group,
    };
    let verdict = h
        .store
        .artifacts()
        .verify_now(weft_api::Digest::Blake3(id), &reader)
        .await;
    assert!(
        matches!(verdict, Err(weft_storage::Error::Corrupt(_))),
        "{verdict:?}"
    );
    assert_eq!(h.stats().await.quarantined, 1);
    let answer = h
        .call(Method::GET, &uri, Some(&worker.token), Body::empty())
        .await;
    assert_eq!(answer.code(), "integrity_failure");

    h.upload(&worker, &bytes).await;
    let answer = h
        .call(Method::GET, &uri, Some(&worker.token), Body::empty())
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, bytes);
    assert_eq!(h.stats().await.quarantined, 0);
}

backends!(
    /// With the bytes not in memory (cache off), visibility and the media type still come from
    /// memory and the read is only the blob's row: the answer is the index's, including the
    /// media type of the Group's newest manifest.
    async fn visibility_from_memory_answers_as_the_index_does(kind: Kind) {
        let h = harness_with(kind, |config| config.hot_blob_bytes = 0).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes = b"{\"report\": 1}".to_vec();
        let digests = h.upload(&worker, &bytes).await;
        for media_type in ["application/json", "text/plain"] {
            let mut manifest = manifest(&worker, "g1", digests, &[]);
            manifest.content.media_type = media_type.into();
            let answer = h.publish(&worker, &sign(&worker.key, &manifest)).await;
            assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        }
        let by_blake3 = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{}/content", digests.blake3),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        let by_sha256 = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{}/content", digests.sha256),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(h.store.artifacts().hot_stats().hits, 0);
        assert_eq!(by_blake3.status, StatusCode::OK);
        assert_eq!(shown(&by_blake3), shown(&by_sha256));
        assert_eq!(shown(&by_blake3)[0].1, "text/plain");
        assert_eq!(by_blake3.body, bytes);
    }
);

/// A 4 KiB artifact published by a worker of g1, then a restart: the memory cache is empty.
async fn published_then_restarted() -> (Harness, Agent, ArtifactId, Vec<u8>) {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let bytes: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
    let id = h.put(&worker, "g1", &bytes, &[]).await;
    let h = restart(h).await;
    assert_eq!(
        h.store.artifacts().hot_stats().entries,
        0,
        "a restart starts cold"
    );
    (h, worker, id, bytes)
}

async fn get_content(h: &Harness, worker: &Agent, id: &ArtifactId) -> Answer {
    h.call(
        Method::GET,
        &format!("/v1/artifacts/{id}/content"),
        Some(&worker.token),
        Body::empty(),
    )
    .await
}

/// Issue #15: a small artifact read after a restart comes from its row, in one statement, and
/// the verification that answers it also keeps it in memory: the next read is a hit, with the
/// same bytes.
#[tokio::test]
async fn a_cold_read_is_verified_once_and_kept_in_memory() {
    let (h, worker, id, bytes) = published_then_restarted().await;
    let cold = get_content(&h, &worker, &id).await;
    assert_eq!(cold.status, StatusCode::OK);
    assert_eq!(cold.body, bytes);
    assert_eq!(
        h.store.artifacts().hot_stats().hits,
        0,
        "the first read is the row's"
    );
    assert_eq!(
        h.store.artifacts().hot_stats().entries,
        1,
        "kept once verified"
    );
    let warm = get_content(&h, &worker, &id).await;
    assert_eq!(
        h.store.artifacts().hot_stats().hits,
        1,
        "the second read is memory's"
    );
    assert_eq!(shown(&warm), shown(&cold));
    assert_eq!(warm.body, bytes);
}

/// Issue #15 with ART-5: bytes changed in their row after a restart are read cold, fail the
/// one verification that answers them, and so are neither served nor kept in memory; the
/// blob is quarantined.
#[tokio::test]
async fn a_tampered_row_read_cold_is_refused_and_not_kept_in_memory() {
    let (h, worker, id, bytes) = published_then_restarted().await;
    let mut flipped = bytes.clone();
    flipped[7] ^= 1;
    h.tamper_inline(&id, &flipped);
    let answer = get_content(&h, &worker, &id).await;
    assert_eq!(answer.code(), "integrity_failure");
    assert_eq!(
        h.store.artifacts().hot_stats().entries,
        0,
        "nothing corrupt is kept"
    );
    assert_eq!(h.stats().await.quarantined, 1);
}
