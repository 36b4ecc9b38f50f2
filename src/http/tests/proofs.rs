//! Proofs of any length, streamed window by window (issue #15): a proof over several windows,
//! to the blob's last, partial chunk group, is exactly bao-tree's own encoding of the range
//! and verifies against the digest; a short proof of a long blob reads only the chunk groups
//! it covers; a proof that fails part-way is cut, never served clean, and what failed is
//! found: a bad outboard is rebuilt, bad bytes are quarantined.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use std::time::Duration;
use tower::ServiceExt as _;
use weft_api::ArtifactId;

use super::harness::*;
use super::ranges::{outboard_file, rebuilt_as, refuses_a_proof};

/// A little over 20 MiB of bytes that differ from chunk to chunk: five of the proof's 4 MiB
/// windows and part of a sixth, ending in a partial chunk group.
fn long() -> Vec<u8> {
    (0..20 * 1024 * 1024 + 12_345u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect()
}

async fn with_long_blob(kind: Kind) -> (Harness, Agent, Vec<u8>, ArtifactId) {
    let h = harness_with(kind, |config| config.max_upload_bytes = 32 * 1024 * 1024).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let bytes = long();
    let id = h.put(&worker, "g1", &bytes, &[]).await;
    (h, worker, bytes, id)
}

/// The proof of `range` (`bytes=a-b`, or the whole artifact), read to its end: the status
/// and the body, or `Err` when the body was cut.
async fn proof(
    h: &Harness,
    token: &str,
    id: &ArtifactId,
    range: Option<&str>,
) -> (StatusCode, Result<Vec<u8>, String>) {
    let mut request = Request::builder()
        .uri(format!("/v1/artifacts/{id}/content?proof=bao"))
        .header("authorization", format!("Bearer {token}"));
    if let Some(range) = range {
        request = request.header("range", range);
    }
    let request = request.body(Body::empty()).expect("request");
    let response = h.app.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await;
    (status, body.map(|b| b.to_vec()).map_err(|e| e.to_string()))
}

/// bao-tree's own encoding of `range` of `bytes`, from an outboard built in memory.
fn reference(bytes: &[u8], range: std::ops::Range<u64>) -> Vec<u8> {
    let outboard =
        bao_tree::io::outboard::PreOrderMemOutboard::create(bytes, weft_api::bao::BLOCK_SIZE);
    let mut encoded = Vec::new();
    bao_tree::io::sync::encode_ranges_validated(
        bytes,
        &outboard,
        &weft_api::bao::chunk_ranges(&range),
        &mut encoded,
    )
    .expect("encodes");
    encoded
}

backends!(
    /// A proof of the whole 20 MiB, past the 16 MiB it was once limited to, and of ranges
    /// across windows, one to the last byte: each is bao-tree's encoding and verifies.
    async fn a_long_proof_is_the_reference_encoding_and_verifies(kind: Kind) {
        let (h, worker, bytes, id) = with_long_blob(kind).await;
        let size = bytes.len() as u64;
        let to_the_end = format!("bytes=5000001-{}", size - 1);
        for (header, range) in [
            (None, 0..size),
            (Some("bytes=3000000-13000000"), 3_000_000..13_000_001),
            (Some(to_the_end.as_str()), 5_000_001..size),
        ] {
            let (status, body) = proof(&h, &worker.token, &id, header).await;
            let body = body.expect("a whole body");
            // A proof is its own representation, whole, ranged or not (issue #40).
            assert_eq!(status, StatusCode::OK);
            assert_eq!(body, reference(&bytes, range.clone()), "{header:?}");
            let verified =
                weft_api::bao::verify_range(&id, size, range.clone(), &body).expect("verifies");
            assert_eq!(verified, bytes[range.start as usize..range.end as usize]);
        }
    }
);

backends!(
    /// A proof of 64 KiB in the middle of 20 MiB reads the chunk groups that cover it, not a
    /// window.
    async fn a_short_proof_of_a_long_blob_reads_only_its_chunk_groups(kind: Kind) {
        let (h, worker, bytes, id) = with_long_blob(kind).await;
        let (start, end) = (10_000_000u64, 10_065_536u64);
        let before = h.store.artifacts().blob_bytes_read();
        let (status, body) = proof(
            &h,
            &worker.token,
            &id,
            Some(&format!("bytes={start}-{}", end - 1)),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        let body = body.expect("a whole body");
        assert_eq!(body, reference(&bytes, start..end));
        let groups = end.div_ceil(16_384) - start / 16_384;
        assert_eq!(
            h.store.artifacts().blob_bytes_read() - before,
            groups * 16_384,
            "O(range)"
        );
    }
);

/// A wrong hash pair deep in the outboard (off the first window's paths, so the answer has
/// begun): the proof is cut, the outboard is rebuilt from the intact bytes, and the next
/// proof is whole. Flipped bytes at 15 MiB: the proof is cut, and the rebuild's full re-hash
/// quarantines the blob.
#[tokio::test]
async fn a_proof_that_fails_part_way_is_cut_and_its_cause_found() {
    let (h, worker, bytes, id) = with_long_blob(Kind::Disk).await;
    let outboard = outboard_file(&h, &id);
    let good = std::fs::read(&outboard).expect("an outboard");
    let mut bad = good.clone();
    let at = good.len() * 3 / 4 / 64 * 64; // inside the root's right subtree
    bad[at] ^= 1;
    std::fs::write(&outboard, &bad).expect("write");
    let (status, body) = proof(&h, &worker.token, &id, None).await;
    assert_eq!(status, StatusCode::OK, "headers went before the failure");
    assert!(body.is_err(), "never a clean body");
    assert!(
        rebuilt_as(&outboard, &good).await,
        "the outboard is rebuilt from the intact bytes"
    );
    assert_eq!(h.stats().await.quarantined, 0, "the bytes are intact");
    let (_, body) = proof(&h, &worker.token, &id, None).await;
    assert_eq!(
        body.expect("whole"),
        reference(&bytes, 0..bytes.len() as u64)
    );

    let path = h.blob_file(&id);
    let mut stored = std::fs::read(&path).expect("blob");
    stored[15 * 1024 * 1024] ^= 1;
    std::fs::write(&path, &stored).expect("write");
    let (status, body) = proof(&h, &worker.token, &id, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.is_err(), "never a clean body");
    let mut quarantined = false;
    for _ in 0..500 {
        if h.stats().await.quarantined == 1 {
            quarantined = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        quarantined,
        "the rebuild's full re-hash quarantines the blob"
    );
    refuses_a_proof(&h, &worker.token, &id).await;
}

/// An outboard removed while a proof is read (another request found it wrong and is
/// rebuilding it): the next window ends the proof with `storage_unavailable` (ask again), not
/// `integrity_failure`, and nothing is quarantined: the bytes may be fine.
#[tokio::test]
async fn an_outboard_removed_during_a_proof_ends_it_as_unavailable() {
    let (h, _, _, id) = with_long_blob(Kind::Disk).await;
    let content = h
        .store
        .artifacts()
        .open_content(weft_api::Digest::Blake3(id), &weft_storage::Reader::Admin)
        .await
        .expect("opens");
    let mut encoded = content
        .proof(None)
        .await
        .expect("the first window verifies");
    let first = futures::StreamExt::next(&mut encoded)
        .await
        .expect("a window");
    assert!(first.is_ok(), "{first:?}");
    std::fs::remove_file(outboard_file(&h, &id)).expect("remove");
    let next = futures::StreamExt::next(&mut encoded)
        .await
        .expect("an item");
    assert_eq!(
        next.map(|bytes| bytes.len()).map_err(|error| error.code()),
        Err(weft_api::ErrorCode::StorageUnavailable)
    );
    assert!(
        futures::StreamExt::next(&mut encoded).await.is_none(),
        "nothing after the error"
    );
    assert_eq!(h.stats().await.quarantined, 0);
}
