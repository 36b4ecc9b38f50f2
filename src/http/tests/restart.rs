//! Fast restart (issue #15): publications through the real route keep the lineage index's
//! coverage, so a snapshot needs no catch-up; a restart reads the snapshot plus what was
//! published after it, and answers as before. And a large upload written with
//! `--direct-writes` reads back the same across a restart.

use weft_api::{ArtifactId, Digest};
use weft_storage::{Direction, LineageQuery, LineageStart, Options, Reader, Store};

use super::harness::*;

/// Every artifact's ancestors and descendants, as the admin sees them.
async fn every_answer(store: &Store, ids: &[ArtifactId]) -> Vec<String> {
    let mut answers = Vec::new();
    for id in ids {
        for direction in [Direction::Ancestors, Direction::Descendants] {
            let query = LineageQuery {
                direction,
                depth: None,
                limit: 1000,
                skip: 0,
                budget: std::time::Duration::from_secs(5),
                edges: None,
                as_of: None,
                mission: None,
            };
            let answer = store
                .lineage()
                .lineage(Digest::Blake3(*id), query, &Reader::Admin)
                .await
                .expect("lineage");
            answers.push(serde_json::to_string(&answer).expect("json"));
        }
    }
    answers
}

#[tokio::test]
async fn a_restart_reads_the_lineage_snapshot_and_what_was_published_after_it() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let mut ids: Vec<ArtifactId> = Vec::new();
    for n in 0..12 {
        let sources: Vec<ArtifactId> = [n / 2, n / 3]
            .into_iter()
            .filter(|&s| s < n)
            .map(|s| ids[s])
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        ids.push(
            h.put(&worker, "g1", format!("artifact {n}").as_bytes(), &sources)
                .await,
        );
    }
    let saved = h
        .store
        .lineage()
        .save_lineage_snapshot()
        .await
        .expect("save")
        .expect("a snapshot");
    assert_eq!(
        (saved.through, saved.caught_up),
        (12, 0),
        "every publication reached the index with its row"
    );
    // Published after the snapshot, then the server stops without writing another.
    for n in 12..15 {
        let id = h
            .put(
                &worker,
                "g1",
                format!("artifact {n}").as_bytes(),
                &[ids[n - 1]],
            )
            .await;
        ids.push(id);
    }
    let before = every_answer(&h.store, &ids).await;
    let reopened = Store::open(Options::on_disk(h.dir.path()))
        .await
        .expect("reopen");
    assert_eq!(
        reopened.lineage().lineage_start(),
        LineageStart::FromSnapshot { caught_up: 3 }
    );
    assert_eq!(every_answer(&reopened, &ids).await, before);
}

/// Reads `id` back whole and as a Range of its last kilobyte, as `token`, and compares both
/// with `bytes`.
async fn reads_back(h: &Harness, token: &str, id: ArtifactId, bytes: &[u8]) {
    use axum::http::{Method, StatusCode};
    let uri = format!("/v1/artifacts/{id}/content");
    let whole = h
        .call(Method::GET, &uri, Some(token), axum::body::Body::empty())
        .await;
    assert_eq!(whole.status, StatusCode::OK, "{whole:?}");
    assert!(whole.body[..] == bytes[..], "the whole file, byte for byte");
    let end = bytes.len();
    let range = format!("bytes={}-{}", end - 1024, end - 1);
    let (status, part) = super::ranges::range_to_end(h, token, &id, &range).await;
    assert_eq!(status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(part.expect("range"), bytes[end - 1024..]);
}

/// With `--direct-writes`, a large upload written past the page cache (its parts past the
/// first with `O_DIRECT` where the file system takes it, its padded last part cut back to its
/// length) reads back whole and verified, and a Range of its end verifies through its
/// outboard, before and after a restart; nothing is left in staging.
#[tokio::test]
async fn a_directly_written_upload_reads_back_whole_before_and_after_a_restart() {
    let h = harness_with(Kind::Disk, |config| config.direct_writes = true).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let bytes: Vec<u8> = (0..3 * 1024 * 1024 + 123u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let id = h.put(&worker, "g1", &bytes, &[]).await;
    h.assert_staging_empty().await;
    reads_back(&h, &worker.token, id, &bytes).await;
    let h = restart(h).await;
    reads_back(&h, &worker.token, id, &bytes).await;
    assert_eq!(h.stats().await.quarantined, 0);
}
