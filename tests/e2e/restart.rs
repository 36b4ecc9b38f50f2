//! Fast restart (issue #15): a clean shutdown leaves the lineage index's snapshot beside the
//! index database, and the next start reads it instead of rebuilding the index.

use crate::support::*;

#[test]
fn a_clean_shutdown_leaves_a_lineage_snapshot_the_next_start_reads() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let server = TestServer::start(&data, &[]);
    let url = server.url();
    let worker = root.path().join("worker");
    enrol(&server, &worker, "g1", "agent-1", "worker");
    leased_work_item(&server, root.path(), "g1", "m1", "w1", &worker, "agent-1");
    let file = root.path().join("report.txt");
    std::fs::write(&file, b"a report").expect("write");
    let file = file.to_str().expect("utf-8 path");
    let put = weft(
        &worker,
        &url,
        &[
            "put",
            file,
            "--group",
            "g1",
            "--mission",
            "m1",
            "--work-item",
            "w1",
            "--media-type",
            "text/plain",
            "-q",
        ],
    );
    assert!(put.0, "{put:?}");
    server.interrupt();
    let snapshot = data.join("index.sqlite-lineage");
    assert!(snapshot.exists(), "shutdown wrote {}", snapshot.display());

    let log = root.path().join("second.log");
    let server = TestServer::start_logged(&data, &[], &log);
    server.interrupt();
    let log = std::fs::read_to_string(&log).expect("log");
    assert!(
        log.contains("FromSnapshot { caught_up: 0 }"),
        "the second start read the snapshot: {log}"
    );
}
