//! Verified ranges in O(range) (issue #15): a Range of a large blob reads only the chunk
//! groups it serves (counted through the store's bytes-read hook), verified against the
//! address through the blob's outboard; a corrupt byte in the range quarantines, one outside
//! it does not stop the range; a corrupt or missing outboard falls back to the full re-hash
//! and is rebuilt; and the `bao` proof verifies on the client and fails when tampered with.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use std::time::Duration;
use tower::ServiceExt as _;
use weft_api::ArtifactId;

use super::harness::*;

/// 3 MiB of bytes that differ from chunk to chunk.
fn large() -> Vec<u8> {
    (0..3 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect()
}

pub(super) async fn get_range(
    h: &Harness,
    token: &str,
    id: &ArtifactId,
    range: &str,
    accept: Option<&str>,
) -> Answer {
    let mut request = Request::builder()
        .uri(format!("/v1/artifacts/{id}/content"))
        .header("authorization", format!("Bearer {token}"))
        .header("range", range);
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    h.send(request.body(Body::empty()).expect("request")).await
}

/// A range's body read to its end; `Err` when the body was aborted.
pub(super) async fn range_to_end(
    h: &Harness,
    token: &str,
    id: &ArtifactId,
    range: &str,
) -> (StatusCode, Result<Vec<u8>, String>) {
    let request = Request::builder()
        .uri(format!("/v1/artifacts/{id}/content"))
        .header("authorization", format!("Bearer {token}"))
        .header("range", range)
        .body(Body::empty())
        .expect("request");
    let response = h.app.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await;
    (status, body.map(|b| b.to_vec()).map_err(|e| e.to_string()))
}

/// Whether the outboard at `path` comes to hold `good` within 5 s (the rebuild runs on a
/// spawned task).
pub(super) async fn rebuilt_as(path: &std::path::Path, good: &[u8]) -> bool {
    for _ in 0..500 {
        if std::fs::read(path).ok().as_deref() == Some(good) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// A quarantined blob answers a proof with `integrity_failure`, before any byte.
pub(super) async fn refuses_a_proof(h: &Harness, token: &str, id: &ArtifactId) {
    let answer = get_range(h, token, id, "bytes=0-9", Some("application/vnd.weft.bao")).await;
    assert_eq!(answer.code(), "integrity_failure");
}

pub(super) fn outboard_file(h: &Harness, id: &ArtifactId) -> std::path::PathBuf {
    h.dir.path().join("outboards").join(id.hex())
}

backends!(
    async fn a_range_of_a_large_blob_reads_only_its_chunk_groups(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes = large();
        let id = h.put(&worker, "g1", &bytes, &[]).await;
        for (start, end) in [
            (1_500_000usize, 1_565_536usize),
            (0, 1),
            (3 * 1024 * 1024 - 7, 3 * 1024 * 1024),
            (16_383, 16_385),
        ] {
            let before = h.store.artifacts().blob_bytes_read();
            let answer = get_range(
                &h,
                &worker.token,
                &id,
                &format!("bytes={start}-{}", end - 1),
                None,
            )
            .await;
            assert_eq!(answer.status, StatusCode::PARTIAL_CONTENT, "{kind:?}");
            assert_eq!(answer.body, bytes[start..end], "{start}..{end}");
            let read = h.store.artifacts().blob_bytes_read() - before;
            // The 16 KiB chunk groups that cover the range, never the whole blob.
            let groups = (end as u64).div_ceil(16_384) - start as u64 / 16_384;
            assert_eq!(read, groups * 16_384, "{start}..{end}: {read} bytes read");
        }
        // A long range goes window by window and is still exact.
        let answer = get_range(&h, &worker.token, &id, "bytes=5-3145000", None).await;
        assert_eq!(answer.body, bytes[5..=3_145_000]);
        // The whole blob keeps the full re-hash.
        let before = h.store.artifacts().blob_bytes_read();
        let whole = h
            .call(
                axum::http::Method::GET,
                &format!("/v1/artifacts/{id}/content"),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(whole.body, bytes);
        assert_eq!(
            h.store.artifacts().blob_bytes_read() - before,
            bytes.len() as u64
        );
    }
);

#[tokio::test]
async fn a_flipped_byte_inside_the_range_quarantines_and_one_outside_does_not_stop_it() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let bytes = large();
    let id = h.put(&worker, "g1", &bytes, &[]).await;
    let path = h.blob_file(&id);
    let mut stored = std::fs::read(&path).expect("blob");
    stored[3_000_000] ^= 1;
    std::fs::write(&path, &stored).expect("write");
    // Outside the range: the range's chunk groups verify, so it is served (ART-5 per byte
    // served), and nothing is quarantined.
    let (status, body) = range_to_end(&h, &worker.token, &id, "bytes=0-65535").await;
    assert_eq!(
        (status, body),
        (StatusCode::PARTIAL_CONTENT, Ok(bytes[..65_536].to_vec()))
    );
    assert_eq!(h.stats().await.quarantined, 0);
    // Inside the range: the body ends with an error, the blob is quarantined.
    let (status, body) = range_to_end(&h, &worker.token, &id, "bytes=2990000-3010000").await;
    assert_eq!(
        status,
        StatusCode::PARTIAL_CONTENT,
        "headers went before the check"
    );
    assert!(
        body.is_err(),
        "never a clean body: {:?}",
        body.map(|b| b.len())
    );
    assert_eq!(h.stats().await.quarantined, 1);
    let answer = get_range(&h, &worker.token, &id, "bytes=0-9", None).await;
    assert_eq!(answer.code(), "integrity_failure");
}

#[tokio::test]
async fn a_corrupt_or_missing_outboard_falls_back_to_the_full_rehash_and_is_rebuilt() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let bytes = large();
    let id = h.put(&worker, "g1", &bytes, &[]).await;
    let outboard = outboard_file(&h, &id);
    let good = std::fs::read(&outboard).expect("an outboard beside the large blob");
    assert_eq!(
        good.len() as u64,
        weft_api::bao::tree(bytes.len() as u64).outboard_size()
    );
    // A small blob has none.
    let small = h.put(&worker, "g1", b"small bytes", &[]).await;
    assert!(!outboard_file(&h, &small).exists());
    for damage in ["flip", "truncate", "remove"] {
        match damage {
            "flip" => {
                let mut bad = good.clone();
                bad[good.len() - 1] ^= 1; // the root's pair: every range depends on it
                std::fs::write(&outboard, &bad).expect("write");
            }
            "truncate" => std::fs::write(&outboard, &good[..100]).expect("write"),
            _ => std::fs::remove_file(&outboard).expect("remove"),
        }
        let before = h.store.artifacts().blob_bytes_read();
        let (status, body) = range_to_end(&h, &worker.token, &id, "bytes=2000000-2065535").await;
        assert_eq!(
            (status, body),
            (
                StatusCode::PARTIAL_CONTENT,
                Ok(bytes[2_000_000..2_065_536].to_vec())
            ),
            "{damage}"
        );
        assert!(
            h.store.artifacts().blob_bytes_read() - before >= bytes.len() as u64,
            "{damage}: the full re-hash"
        );
        assert_eq!(
            h.stats().await.quarantined,
            0,
            "{damage}: the bytes are intact"
        );
        // Rebuilt in the background from the verified bytes.
        assert!(
            rebuilt_as(&outboard, &good).await,
            "{damage}: the outboard is rebuilt"
        );
        // It was spilled to a file as it was built (flat memory); no spill file is left.
        h.assert_staging_empty().await;
        let before = h.store.artifacts().blob_bytes_read();
        let answer = get_range(&h, &worker.token, &id, "bytes=2000000-2065535", None).await;
        assert_eq!(answer.body, bytes[2_000_000..2_065_536]);
        assert!(
            h.store.artifacts().blob_bytes_read() - before < 128 * 1024,
            "{damage}: O(range) again"
        );
    }
    // fsck: an intact outboard is left as it is; a wrong one (a flipped byte, a byte
    // less, one more) is a problem and is replaced; a missing one is rebuilt. fsck compares
    // and places the one it computes as a stream through a spill file, never left behind.
    let report = h.store.fsck().await.expect("fsck");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(report.leftovers.is_empty(), "{:?}", report.leftovers);
    h.assert_staging_empty().await;
    let mut flipped = good.clone();
    flipped[good.len() - 1] ^= 1;
    let mut longer = good.clone();
    longer.push(0);
    for bad in [flipped, good[..good.len() - 1].to_vec(), longer] {
        std::fs::write(&outboard, &bad).expect("write");
        let report = h.store.fsck().await.expect("fsck");
        assert!(
            report.problems.iter().any(|p| p.contains("outboard")),
            "{:?}",
            report.problems
        );
        assert_eq!(std::fs::read(&outboard).expect("replaced"), good);
        h.assert_staging_empty().await;
    }
    std::fs::remove_file(&outboard).expect("remove");
    let report = h.store.fsck().await.expect("fsck");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(
        report.leftovers.iter().any(|p| p.contains("outboard")),
        "{:?}",
        report.leftovers
    );
    assert_eq!(std::fs::read(&outboard).expect("rebuilt"), good);
    h.assert_staging_empty().await;
}

backends!(
    async fn the_bao_proof_verifies_against_the_digest_and_fails_when_tampered(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes = large();
        let id = h.put(&worker, "g1", &bytes, &[]).await;
        let small_bytes: Vec<u8> = (0..40_000u32).map(|i| (i % 7) as u8).collect();
        let small = h.put(&worker, "g1", &small_bytes, &[]).await;
        for (id, bytes, start, end) in [
            (id, &bytes, 1_000_000u64, 1_065_536u64),
            (small, &small_bytes, 100, 30_000),
        ] {
            let range = format!("bytes={start}-{}", end - 1);
            let answer = get_range(
                &h,
                &worker.token,
                &id,
                &range,
                Some("application/vnd.weft.bao"),
            )
            .await;
            // A proof is its own representation (issue #40): 200, the range it proves in
            // Weft-Proof-Range, none of the content's headers.
            assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
            assert_eq!(answer.headers["content-type"], "application/vnd.weft.bao");
            let size = bytes.len() as u64;
            assert_eq!(
                answer.headers["weft-proof-range"],
                format!("bytes {start}-{}/{size}", end - 1)
            );
            assert!(!answer.headers.contains_key("content-range"));
            let verified =
                weft_api::bao::verify_range(&id, size, start..end, &answer.body).expect("verifies");
            assert_eq!(verified, bytes[start as usize..end as usize]);
            let mut tampered = answer.body.to_vec();
            let at = tampered.len() / 2;
            tampered[at] ^= 1;
            assert!(weft_api::bao::verify_range(&id, size, start..end, &tampered).is_err());
            // `?proof=bao` is the same answer.
            let request = Request::builder()
                .uri(format!("/v1/artifacts/{id}/content?proof=bao"))
                .header("authorization", format!("Bearer {}", worker.token))
                .header("range", &range)
                .body(Body::empty())
                .expect("request");
            assert_eq!(h.send(request).await.body, answer.body);
        }
        let request = Request::builder()
            .uri(format!("/v1/artifacts/{id}/content?proof=merkle"))
            .header("authorization", format!("Bearer {}", worker.token))
            .body(Body::empty())
            .expect("request");
        refused(&h, request, "bad_request").await;
    }
);

#[tokio::test]
async fn the_client_fetches_and_verifies_a_range() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let bytes = large();
    let id = h.put(&worker, "g1", &bytes, &[]).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let serving = tokio::spawn(crate::serve(
        listener,
        h.app.clone(),
        Duration::from_secs(5),
        Duration::from_secs(30),
        futures::future::pending(),
    ));
    let client = weft_api::client::Client::new(base, Some(worker.token.clone()));
    let got = client
        .verified_range(&id, 2_500_000..2_565_536)
        .await
        .expect("verified");
    assert_eq!(got, bytes[2_500_000..2_565_536]);
    // A different digest of the same size: the server answers not_found, never a proof.
    let other = ArtifactId(*blake3::hash(b"other").as_bytes());
    assert!(client.verified_range(&other, 0..10).await.is_err());
    serving.abort();
}

#[tokio::test]
async fn the_sweep_removes_an_uncited_blobs_outboard_with_it() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let abandoned = h.upload(&worker, &large()).await.blake3;
    assert!(outboard_file(&h, &abandoned).exists());
    h.clock.advance(chrono::Duration::hours(25));
    let report = h.store.artifacts().sweep().await.expect("sweep");
    assert_eq!(report.blobs_removed, 1, "{report:?}");
    assert!(!h.blob_file(&abandoned).exists());
    assert!(
        !outboard_file(&h, &abandoned).exists(),
        "the outboard went with its blob"
    );
}

/// A crash between an outboard's placing and its blob's rename (the outboard goes first)
/// leaves an outboard no blob row names: fsck reports it as a leftover, not as damage, and the
/// next start removes it; a stored blob's outboard stays.
#[tokio::test]
async fn an_outboard_no_blob_row_names_is_a_leftover_the_next_start_removes() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let id = h.put(&worker, "g1", &large(), &[]).await;
    let stray_id = ArtifactId::of(b"a blob whose rename a crash cut");
    let stray = outboard_file(&h, &stray_id);
    std::fs::write(&stray, [0u8; 64]).expect("a stray outboard");
    let report = h.store.fsck().await.expect("fsck");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let named = format!("{stray_id}: outboard has no blob row");
    assert!(
        report.leftovers.iter().any(|left| left.starts_with(&named)),
        "{:?}",
        report.leftovers
    );
    let h = restart(h).await;
    assert!(!stray.exists(), "removed at the start");
    assert!(
        outboard_file(&h, &id).exists(),
        "a stored blob's outboard stays"
    );
    let report = h.store.fsck().await.expect("fsck");
    assert!(report.leftovers.is_empty(), "{:?}", report.leftovers);
}

#[tokio::test]
async fn a_proof_without_an_outboard_is_built_from_verified_bytes_or_refused() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let bytes = large();
    let id = h.put(&worker, "g1", &bytes, &[]).await;
    let size = bytes.len() as u64;
    std::fs::remove_file(outboard_file(&h, &id)).expect("remove");
    let bao = Some("application/vnd.weft.bao");
    // Two at once: both wait for the blob's one rebuild (one full read), then answer through
    // the outboard it put in place, reading only the chunk groups of their ranges.
    let before = h.store.artifacts().blob_bytes_read();
    let (one, two) = tokio::join!(
        get_range(&h, &worker.token, &id, "bytes=100-200", bao),
        get_range(&h, &worker.token, &id, "bytes=2000000-2099999", bao)
    );
    for (answer, range) in [(one, 100..201), (two, 2_000_000..2_100_000)] {
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        let verified =
            weft_api::bao::verify_range(&id, size, range.clone(), &answer.body).expect("verifies");
        assert_eq!(verified, bytes[range.start as usize..range.end as usize]);
    }
    let read = h.store.artifacts().blob_bytes_read() - before;
    assert!(
        (size..size + 256 * 1024).contains(&read),
        "one full read and two ranges' chunk groups, not {read} bytes"
    );
    assert!(outboard_file(&h, &id).exists(), "stored on the way");
    // Corrupt bytes (outside the range) and no outboard: the whole blob is checked first.
    let path = h.blob_file(&id);
    let mut stored = std::fs::read(&path).expect("blob");
    stored[2_000_000] ^= 1;
    std::fs::write(&path, &stored).expect("write");
    std::fs::remove_file(outboard_file(&h, &id)).expect("remove");
    let (one, two) = tokio::join!(
        get_range(&h, &worker.token, &id, "bytes=100-200", bao),
        get_range(&h, &worker.token, &id, "bytes=100-200", bao)
    );
    for answer in [one, two] {
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (StatusCode::INTERNAL_SERVER_ERROR, "integrity_failure")
        );
    }
    assert_eq!(h.stats().await.quarantined, 1);
    assert!(
        !outboard_file(&h, &id).exists(),
        "no outboard for bytes that are not theirs"
    );
}

/// A blob cut shorter than its row after its read was opened (the open checks the size,
/// so only a cut in between reaches the read): the Range read past the cut is corrupt, as a
/// full read would find, not a read error that the next read meets again (ART-5).
#[tokio::test]
async fn a_blob_cut_while_its_range_is_read_is_quarantined() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let id = h.put(&worker, "g1", &large(), &[]).await;
    let content = h
        .store
        .artifacts()
        .open_content(weft_api::Digest::Blake3(id), &weft_storage::Reader::Admin)
        .await
        .expect("opens");
    std::fs::OpenOptions::new()
        .write(true)
        .open(h.blob_file(&id))
        .and_then(|file| file.set_len(2_000_000))
        .expect("cut");
    let mut body = content.into_body(Some(2_500_000..2_565_536));
    let first = futures::StreamExt::next(&mut body).await.expect("an item");
    assert_eq!(
        first.map(|bytes| bytes.len()).map_err(|error| error.code()),
        Err(weft_api::ErrorCode::IntegrityFailure)
    );
    assert_eq!(h.stats().await.quarantined, 1);
    refuses_a_proof(&h, &worker.token, &id).await;
}
