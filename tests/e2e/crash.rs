//! The crash campaign of `bench/crash.rs` in small (issue #15): the same code, included
//! through `#[path]`, runs a few SIGKILLs of the real binary under mixed load and must report
//! acknowledged writes of every main kind and no loss (each `work.progress` charge applied
//! exactly once, those cut by a kill re-sent after the restart); and an acknowledged write
//! and an acknowledged charge that never happened must be reported lost, so the oracle is
//! known not to be blind.

#[path = "../../bench/crash/mod.rs"]
mod campaign;

fn settings(root: &std::path::Path, kills: usize, phantom: bool) -> campaign::Settings {
    campaign::Settings {
        kills,
        seed: 15,
        check_every: 1,
        fsck_every: 2,
        burst_ms: (150, 300),
        sample: 20,
        dir: root.to_path_buf(),
        phantom,
        verbose: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_few_kills_under_mixed_load_lose_nothing_acknowledged() {
    let root = tempfile::tempdir().expect("tempdir");
    let report = campaign::run(settings(root.path(), 5, false))
        .await
        .expect("the campaign starts");
    let rendered = report.render();
    eprintln!("{rendered}");
    assert!(report.losses.is_empty(), "{rendered}");
    assert_eq!(report.kills, 5, "{rendered}");
    assert_eq!(report.oracle_runs, 5, "{rendered}");
    let acknowledged = |prefix: &str| {
        report
            .acknowledged
            .iter()
            .filter(|(label, _)| label.starts_with(prefix))
            .map(|(_, count)| count)
            .sum::<u64>()
    };
    for kind in ["blobs", "manifests", "Evidence records", "Commands", "ACKs"] {
        assert!(
            acknowledged(kind) > 0,
            "some {kind} were acknowledged: {rendered}"
        );
    }
    // Two runs on killed directories, then one after the clean shutdown, which is clean.
    assert_eq!(report.fsck.len(), 3, "{rendered}");
    assert_eq!(report.fsck.last().map(|run| run.1), Some(0), "{rendered}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oracle_reports_an_acknowledged_blob_that_is_not_there() {
    let root = tempfile::tempdir().expect("tempdir");
    let report = campaign::run(settings(root.path(), 1, true))
        .await
        .expect("the campaign starts");
    let phantom = weft_api::ArtifactId::of(b"never uploaded").to_string();
    let rendered = report.render();
    let (blob, charge): (Vec<&String>, Vec<&String>) = report
        .losses
        .iter()
        .partition(|loss| loss.contains(&phantom));
    assert_eq!(blob.len(), 1, "the blob never uploaded: {rendered}");
    assert!(!charge.is_empty(), "the charge never sent: {rendered}");
    assert!(
        charge
            .iter()
            .all(|loss| loss.contains("charges acknowledged")),
        "nothing else is lost: {rendered}"
    );
}
