//! A Context Package's journey through the CLI (DESIGN §11): a worker publishes two versions,
//! lists and shows them, verifies the latest against the log and the signed checkpoint
//! (CTX-1), and a coordinator of two Groups forwards it (CTX-7).

use crate::support::{TestServer, enrol, weft};

fn ok(outcome: (bool, String, String)) -> String {
    assert!(
        outcome.0,
        "command failed:\nstdout: {}\nstderr: {}",
        outcome.1, outcome.2
    );
    outcome.1
}

#[test]
fn a_context_package_is_published_verified_and_forwarded() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let worker_home = root.path().join("worker");
    let coordinator_home = root.path().join("coordinator");
    let reader_home = root.path().join("reader");
    let server = TestServer::start(&data, &[]);
    let url = server.url();
    enrol(&server, &worker_home, "g1", "w1", "worker");
    let lease = crate::support::leased_work_item(
        &server,
        root.path(),
        "g1",
        "m1",
        "w1",
        &worker_home,
        "w1",
    );
    let report = root.path().join("report.json");
    std::fs::write(&report, br#"{"findings": 3}"#).expect("write");
    let digest = ok(weft(
        &worker_home,
        &url,
        &[
            "put",
            report.to_str().expect("utf-8"),
            "--group",
            "g1",
            "--mission",
            "m1",
            "--work-item",
            "w1",
            "--lease",
            &lease,
            "--media-type",
            "application/json",
            "-q",
        ],
    ))
    .trim()
    .to_owned();
    let head = ok(weft(
        &worker_home,
        &url,
        &["events", "tail", "--group", "g1"],
    ))
    .lines()
    .count()
    .to_string();
    let publish = |to: &str| {
        ok(weft(
            &worker_home,
            &url,
            &[
                "context",
                "publish",
                "--package",
                "p1",
                "--mission",
                "m1",
                "--from",
                "1",
                "--to",
                to,
                "--artifact",
                &digest,
                "--decision",
                "report in JSON",
                "--constraint",
                "no network",
                "--question",
                "who reviews?",
            ],
        ))
        .trim()
        .to_owned()
    };
    let first = publish("2");
    let second = publish(&head);
    assert!(first.starts_with("blake3:") && second.starts_with("blake3:") && first != second);
    let versions = ok(weft(&worker_home, &url, &["context", "versions", "p1"]));
    assert_eq!(versions.lines().count(), 2, "{versions}");
    let shown = ok(weft(&worker_home, &url, &["context", "show", "p1"]));
    assert!(shown.contains(&format!("previous  {first}")), "{shown}");
    let verified = ok(weft(&worker_home, &url, &["context", "verify", "p1"]));
    assert!(verified.contains("ok: payload hashes to"), "{verified}");
    assert!(
        verified.contains("ok: signed by"),
        "the worker's own key checks its package: {verified}"
    );
    assert!(
        verified.contains(&format!(
            "ok: events 1..={head} of g1 chain to the signed checkpoint"
        )),
        "{verified}"
    );

    enrol(&server, &coordinator_home, "g1", "c1", "coordinator");
    let token_file = data.join("admin.token");
    let token_file = token_file.to_str().expect("utf-8");
    for args in [
        vec![
            "admin",
            "--admin-token-file",
            token_file,
            "group",
            "create",
            "g2",
        ],
        vec![
            "admin",
            "--admin-token-file",
            token_file,
            "member",
            "set",
            "g2",
            "c1",
            "--role",
            "coordinator",
        ],
    ] {
        ok(weft(&coordinator_home, &url, &args));
    }
    let forwarded = ok(weft(
        &coordinator_home,
        &url,
        &["context", "forward", "p1", "--to-group", "g2"],
    ));
    assert!(
        forwarded.contains(&format!("forwarded {second} from g1")),
        "{forwarded}"
    );
    enrol(&server, &reader_home, "g2", "r2", "worker");
    let copy = ok(weft(&reader_home, &url, &["context", "show", "p1"]));
    assert!(
        copy.contains("forwarded from g1 into g2") && copy.contains(&second),
        "{copy}"
    );
    let refused = weft(&reader_home, &url, &["context", "verify", "p1"]);
    assert!(
        !refused.0 && refused.2.contains("forbidden"),
        "CTX-3: g2 may not read g1's log: {refused:?}"
    );
}

/// CTX-1 after compaction: a package citing Events that were archived into signed snapshots
/// is verified through the snapshot archives and the signed checkpoint.
#[test]
fn a_package_citing_compacted_events_verifies_through_the_snapshots() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let home = root.path().join("home");
    let server = TestServer::start(
        &data,
        &["--retain-events", "2", "--compaction-interval-secs", "1"],
    );
    let url = server.url();
    enrol(&server, &home, "g1", "w1", "worker");
    crate::support::leased_work_item(&server, root.path(), "g1", "m1", "w1", &home, "w1");
    ok(weft(
        &home,
        &url,
        &[
            "context",
            "publish",
            "--package",
            "p1",
            "--mission",
            "m1",
            "--from",
            "1",
            "--to",
            "3",
            "--decision",
            "start small",
        ],
    ));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let tail = weft(&home, &url, &["events", "tail", "--group", "g1"]);
        if !tail.0 && tail.2.contains("cursor_too_old") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no compaction happened: {tail:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let verified = ok(weft(&home, &url, &["context", "verify", "p1"]));
    assert!(
        verified.contains(
            "ok: events 1..=3 of g1 lie in history verified through its signed snapshots"
        ),
        "{verified}"
    );
}
