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

/// Issue #50: the actor index (what search by an Agent reads) must say what each Event's
/// payload says; fsck reports an Event indexed under another Agent.
#[tokio::test]
async fn fsck_notices_an_event_indexed_under_another_agent() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    h.put(&worker, "g1", b"first", &[]).await;
    let clean = h.store.fsck().await.expect("fsck");
    assert!(clean.problems.is_empty(), "{:?}", clean.problems);
    let head = h.head_of("g1").await;
    let index = h.dir.path().join("index.sqlite");
    let changed = weft_storage::bench_support::tamper::event_actor(&index, "g1", head, "mallory")
        .expect("tamper");
    assert_eq!(changed, 1);
    let report = h.store.fsck().await.expect("fsck");
    assert!(
        report.problems.iter().any(|p| p.contains(&format!(
            "Event {head} is indexed as acted by Some(\"mallory\")"
        ))),
        "{:?}",
        report.problems
    );
}

/// Stop 70 (V40): a WorkItem's history says each Event's type, and `work.start`'s retry
/// look-ups and the review's last submission trust it; fsck reports an entry whose type is
/// not its Event's.
#[tokio::test]
async fn fsck_notices_a_history_entry_of_another_type() {
    let h = harness(Kind::Disk).await;
    let (coordinator, worker, _) = super::progress::setup(&h).await;
    let contract = super::work_setup::contract(&[]);
    super::progress::owned(&h, &coordinator, &worker, "wi-1", contract).await;
    let clean = h.store.fsck().await.expect("fsck");
    assert!(clean.problems.is_empty(), "{:?}", clean.problems);
    let head = h.head_of("g1").await;
    let index = h.dir.path().join("index.sqlite");
    let changed =
        weft_storage::bench_support::tamper::history_type(&index, "wi-1", head, "work.failed")
            .expect("tamper");
    assert_eq!(changed, 1, "the newest Event is wi-1's");
    let report = h.store.fsck().await.expect("fsck");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("WorkItem history")
                && p.contains(&format!("says Event {head} is a work.failed"))),
        "{:?}",
        report.problems
    );
}
