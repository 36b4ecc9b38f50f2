//! The Merkle tree rebuilt over a stored log (`storage/src/lifecycle/trees.rs`) takes only
//! Events that chain: each whole and linked to the one before it.

use super::harness::*;
use super::tlog::checkpoint;

/// A store whose tree is gone, and whose log holds an Event that is whole (its hash
/// recomputed) but not linked to the one before: reopened, it builds no tree over that Event
/// (the batch that holds it is refused whole, and fsck names the break). Each Event was
/// checked alone, so the unlinked Event and those after it became leaves.
#[tokio::test]
async fn a_tree_is_never_rebuilt_over_an_unlinked_event() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let auditor = h.agent("auditor", "g1", &["auditor"]).await;
    h.put(&worker, "g1", b"one", &[]).await;
    h.put(&worker, "g1", b"two", &[]).await;
    let head = checkpoint(&h, &auditor).await;
    let index = h.dir.path().join("index.sqlite");
    let h = restart(h).await;
    drop(h.store.clone());
    weft_storage::bench_support::tamper::forget_trees(&index).expect("forget");
    let relinked =
        weft_storage::bench_support::tamper::event_link(&index, "g1", head.size - 1, [9; 32])
            .expect("relink");
    assert_eq!(relinked, 1);
    let h = restart(h).await;
    let rebuilt = checkpoint(&h, &auditor).await;
    assert!(
        rebuilt.size < head.size - 1,
        "the unlinked Event {} is a leaf of the tree of {}",
        head.size - 1,
        rebuilt.size
    );
}
