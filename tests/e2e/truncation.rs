//! Issue #40, "truncating the tail of a Group's log goes unnoticed": with the newest Events
//! deleted from a stopped server's index, `weft fsck` exits 1 (rows still name them), and
//! `weft events verify --since-checkpoint FILE` refuses the shorter log a restarted server
//! signs.

use crate::support::{TestServer, enrol, fsck, weft};

/// Issue #40: a cut log tail is caught offline by fsck and online by a client's checkpoint.
#[test]
fn a_cut_log_tail_is_caught_by_fsck_and_by_a_saved_checkpoint() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let home = root.path().join("home");
    let saved = root.path().join("checkpoint.json");
    let saved_arg = saved.to_str().expect("utf-8").to_owned();
    let server = TestServer::start(&data, &[]);
    let url = server.url();
    enrol(&server, &home, "g1", "agent-1", "coordinator");
    for mission in ["m1", "m2", "m3"] {
        let made = weft(&home, &url, &["mission", "create", mission, "--title", "t"]);
        assert!(made.0, "{made:?}");
    }
    let verify = |url: &str| {
        weft(
            &home,
            url,
            &[
                "events",
                "verify",
                "--group",
                "g1",
                "--since-checkpoint",
                &saved_arg,
            ],
        )
    };
    let first = verify(&url);
    assert!(first.0 && saved.exists(), "{first:?}");
    let again = verify(&url);
    assert!(again.0, "the same head again: {again:?}");
    server.kill();
    assert_eq!(fsck(&data).0, 0, "intact");

    let index = data.join("index.sqlite");
    let (deleted, _) =
        weft_storage::bench_support::tamper::cut_log_tail(&index, "g1", 2).expect("cut the tail");
    assert_eq!(deleted, 2);
    let (code, report) = fsck(&data);
    assert_eq!(code, 1, "{report}");
    assert!(report.contains("PROBLEM"), "{report}");

    let server = TestServer::start(&data, &[]);
    let refused = verify(&server.url());
    // The Merkle tree (issue #45) still holds the cut Events, so the transparency-log check
    // sees the log end before its signed tree; without it, the saved checkpoint does.
    assert!(
        !refused.0
            && (refused.2.contains("older than the checkpoint")
                || refused
                    .2
                    .contains("before the transparency-log checkpoint's tree")),
        "{refused:?}"
    );
    server.kill();
}
