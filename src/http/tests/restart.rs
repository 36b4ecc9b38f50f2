//! Fast restart (issue #15): publications through the real route keep the lineage index's
//! coverage, so a snapshot needs no catch-up; a restart reads the snapshot plus what was
//! published after it, and answers as before.

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
            };
            let answer = store
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
        reopened.lineage_start(),
        LineageStart::FromSnapshot { caught_up: 3 }
    );
    assert_eq!(every_answer(&reopened, &ids).await, before);
}
