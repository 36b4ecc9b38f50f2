//! Issue #41: the review after a submission (EVD-3) is a reaction after its commit, owed in
//! the database. A process killed (SIGKILL) after answering a submission and before reviewing
//! it reviews it after the restart, once.

use std::path::Path;

use crate::support::{CONTRACT_JSON, TestServer, enrol, offer_to, weft};

/// The server's test hook that holds every reaction after commit (`src/serve.rs`).
const HOLD_REACTIONS: &str = "WEFT_TEST_HOLD_REACTIONS";

/// Runs the CLI as the agent of `home`; fails the test with its output unless it succeeds.
fn ok(home: &Path, url: &str, args: &[&str]) -> String {
    let (success, stdout, stderr) = weft(home, url, args);
    assert!(
        success,
        "{args:?} failed:\nstdout: {stdout}\nstderr: {stderr}"
    );
    stdout
}

/// The Authority's Evidence records for `wi-1`, one JSON value per record.
fn authority_records(home: &Path, url: &str) -> Vec<serde_json::Value> {
    let listed = ok(
        home,
        url,
        &[
            "evidence",
            "ls",
            "--work-item",
            "wi-1",
            "--producer",
            "weft-authority",
            "--json",
        ],
    );
    listed
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON record per line"))
        .collect()
}

/// EVD-3 (issue #41): the server answers a submission whose contract asks for an integrity
/// check and is SIGKILLed before the review ran (the test hook holds it); after the restart
/// the owed review runs and records the Authority's Evidence exactly once, which a further
/// restart does not repeat, and the result can be accepted on it.
#[test]
fn the_review_after_a_submission_survives_a_kill_between_commit_and_review() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let server = TestServer::start_with_env(&data, &[(HOLD_REACTIONS, "1")]);
    let url = server.url();
    let coordinator = root.path().join("coordinator-g1");
    enrol(&server, &coordinator, "g1", "coordinator-g1", "coordinator");
    let worker = root.path().join("worker");
    enrol(&server, &worker, "g1", "agent-1", "worker");
    ok(
        &coordinator,
        &url,
        &["mission", "create", "m1", "--title", "e2e"],
    );
    let checked = CONTRACT_JSON.replace(
        r#""requiredEvidence": ["automated_test"]"#,
        r#""requiredEvidence": ["integrity_check"]"#,
    );
    assert_ne!(
        checked, CONTRACT_JSON,
        "the criterion asks for an integrity check"
    );
    let contract = root.path().join("contract.json");
    std::fs::write(&contract, checked).expect("write contract");
    ok(
        &coordinator,
        &url,
        &[
            "work",
            "authorize",
            "wi-1",
            "--mission",
            "m1",
            "--contract",
            contract.to_str().expect("utf-8"),
        ],
    );
    offer_to(&server, root.path(), "g1", "wi-1", "agent-1");
    ok(&worker, &url, &["work", "accept", "wi-1"]);
    ok(&worker, &url, &["work", "start", "wi-1"]);
    let report = root.path().join("report.json");
    std::fs::write(&report, br#"{"summary": "short"}"#).expect("write report");
    let artifact = ok(
        &worker,
        &url,
        &[
            "put",
            report.to_str().expect("utf-8"),
            "--group",
            "g1",
            "--mission",
            "m1",
            "--work-item",
            "wi-1",
            "--media-type",
            "application/json",
            "-q",
        ],
    )
    .trim()
    .to_owned();
    let submitted = ok(
        &worker,
        &url,
        &["work", "submit", "wi-1", "--artifact", &artifact],
    );
    assert!(submitted.contains("submitted"), "{submitted}");
    assert!(
        authority_records(&coordinator, &url).is_empty(),
        "the submission was answered after its commit, before its review"
    );
    server.kill();

    let server = TestServer::start(&data, &[]);
    let url = server.url();
    // The owed review runs in the background after the start; this process has no handle to
    // await it, so the test reads until it is there (or gives up after 30 s).
    let started = std::time::Instant::now();
    let records = loop {
        let records = authority_records(&coordinator, &url);
        if !records.is_empty() || started.elapsed() > std::time::Duration::from_secs(30) {
            break records;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(
        records.len(),
        1,
        "reviewed once after the restart: {records:?}"
    );
    let evidence = &records[0]["evidence"];
    assert_eq!(evidence["criterion"], "ac-1", "{evidence}");
    assert_eq!(evidence["method"]["kind"], "integrity_check", "{evidence}");
    assert_eq!(evidence["result"]["outcome"], "pass", "{evidence}");
    server.interrupt();

    // Its reaction was marked done with the record: a further start owes nothing.
    let server = TestServer::start(&data, &[]);
    let url = server.url();
    let accepted = ok(&coordinator, &url, &["work", "accept-result", "wi-1"]);
    assert!(accepted.contains("verified"), "{accepted}");
    assert_eq!(
        authority_records(&coordinator, &url).len(),
        1,
        "not reviewed again"
    );
}
