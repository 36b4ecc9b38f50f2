//! Issue #40, "truncating the tail of a Group's log goes unnoticed": fsck cross-checks every
//! row that names an Event by its sequence against the log.

use super::harness::*;

/// Issue #40: with the newest Events of a Group deleted behind the server's back, the chain
/// still verifies, but the manifest and WorkItem rows that name them do not: fsck reports a
/// PROBLEM for each (so `weft fsck` exits 1); the intact store reports none.
#[tokio::test]
async fn fsck_notices_a_truncated_log() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    h.put(&worker, "g1", b"first", &[]).await;
    h.put(&worker, "g1", b"second", &[]).await;
    let clean = h.store.fsck().await.expect("fsck");
    assert!(clean.problems.is_empty(), "{:?}", clean.problems);
    let index = h.dir.path().join("index.sqlite");
    let (deleted, head) =
        weft_storage::bench_support::tamper::cut_log_tail(&index, "g1", 3).expect("truncate");
    assert_eq!(deleted, 3);
    let report = h.store.fsck().await.expect("fsck");
    let named: Vec<&String> = report
        .problems
        .iter()
        .filter(|p| p.contains("which the log does not hold"))
        .collect();
    assert!(
        named
            .iter()
            .any(|p| p.contains("manifest") && p.contains(&format!("Event {head}"))),
        "{:?}",
        report.problems
    );
}
