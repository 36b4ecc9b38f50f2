//! The offline journal through the real binary (issue #13, OFL-3…OFL-8): a Worker whose server
//! is gone buffers its progress report (with usage) in the weft home's journal; after the
//! server is back and the Worker logs in again (a new session, which revokes the old lease,
//! LSE-9), `weft work journal --sync` rebases and sends it, and the WorkItem's budget shows
//! the spend once.

use crate::support::{TestServer, enrol, leased_work_item, weft};

#[test]
fn a_cut_off_worker_buffers_progress_and_reconciles_after_login() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let server = TestServer::start(&data, &[]);
    let url = server.url();
    let addr = server.addr.to_string();
    let worker = root.path().join("worker");
    enrol(&server, &worker, "g1", "worker-1", "worker");
    // The Mission with a budget (a CLI Mission's is zero unless given: nothing may be spent).
    let coordinator = root.path().join("coordinator-g1");
    enrol(&server, &coordinator, "g1", "coordinator-g1", "coordinator");
    let mission = [
        "mission",
        "create",
        "m-1",
        "--title",
        "offline",
        "--tokens",
        "100",
        "--financial",
        "1",
    ];
    let (created, _, stderr) = weft(&coordinator, &url, &mission);
    assert!(created, "{stderr}");
    leased_work_item(
        &server,
        root.path(),
        "g1",
        "m-1",
        "wi-1",
        &worker,
        "worker-1",
    );
    server.kill();

    let progress = [
        "work",
        "progress",
        "wi-1",
        "--phase",
        "offline",
        "--usage",
        "tokens=5",
        "--usage",
        "financial=0.25",
    ];
    let (buffered, _, stderr) = weft(&worker, &url, &progress);
    assert!(buffered, "{stderr}");
    assert!(stderr.contains("buffered"), "{stderr}");
    let (shown, stdout, _) = weft(&worker, &url, &["work", "journal"]);
    assert!(shown && stdout.contains("pending"), "{stdout}");

    let server = TestServer::start_on(&data, &addr, &[]);
    assert_eq!(server.url(), url);
    let (logged_in, _, stderr) = weft(
        &worker,
        &url,
        &["login", "--agent-id", "worker-1", "--group", "g1"],
    );
    assert!(logged_in, "{stderr}");
    let (synced, _, stderr) = weft(&worker, &url, &["work", "journal", "--sync"]);
    assert!(synced, "{stderr}");
    assert!(
        stderr.contains("1 buffered Command(s) reconciled"),
        "{stderr}"
    );
    let (shown, stdout, _) = weft(&worker, &url, &["work", "journal", "--json"]);
    assert!(shown, "{stdout}");
    let entries: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(entries[0]["status"]["status"], "accepted", "{entries}");

    let (shown, stdout, stderr) = weft(&worker, &url, &["work", "show", "wi-1", "--json"]);
    assert!(shown, "{stderr}");
    let view: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(view["budget"]["spent"]["tokens"], 5, "{view}");
    assert_eq!(view["budget"]["spent"]["financial"], 0.25, "{view}");
    // Sent once: another sync sends nothing.
    let (synced, _, stderr) = weft(&worker, &url, &["work", "journal", "--sync"]);
    assert!(synced && !stderr.contains("reconciled"), "{stderr}");
}

/// OFL-5: a Worker reconciles before it causes any further side effect. With a progress
/// report buffered in the journal (the Authority did not answer), `weft put` first sends it
/// through the batch route, so its `work.progress_reported` Event precedes the
/// `artifact.published` one in the log, and the journal has nothing pending afterwards.
#[test]
fn ofl_5_put_reconciles_the_journal_before_publishing() {
    let root = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start(&root.path().join("data"), &[]);
    let url = server.url();
    let worker = root.path().join("worker");
    enrol(&server, &worker, "g1", "worker-1", "worker");
    leased_work_item(
        &server,
        root.path(),
        "g1",
        "m-1",
        "wi-1",
        &worker,
        "worker-1",
    );

    // A port nothing listens on: the Authority "does not answer" this one Command.
    let away = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}", listener.local_addr().expect("addr"))
    };
    let progress = ["work", "progress", "wi-1", "--phase", "offline"];
    let (buffered, _, stderr) = weft(&worker, &away, &progress);
    assert!(buffered && stderr.contains("buffered"), "{stderr}");

    let file = root.path().join("report.json");
    std::fs::write(&file, br#"{"report": 1}"#).expect("write");
    let put = [
        "put",
        file.to_str().expect("utf-8"),
        "--group",
        "g1",
        "--mission",
        "m-1",
        "--work-item",
        "wi-1",
        "--media-type",
        "application/json",
        "-q",
    ];
    let (published, _, stderr) = weft(&worker, &url, &put);
    assert!(published, "{stderr}");
    assert!(
        stderr.contains("1 buffered Command(s) reconciled"),
        "{stderr}"
    );
    let (tailed, tail, stderr) = weft(&worker, &url, &["events", "tail", "--group", "g1"]);
    assert!(tailed, "{stderr}");
    let kinds: Vec<String> = tail
        .lines()
        .map(|line| {
            let event: serde_json::Value = serde_json::from_str(line).expect("JSON line");
            event["type"].as_str().unwrap_or_default().to_owned()
        })
        .collect();
    let position = |kind: &str| kinds.iter().position(|k| k == kind);
    let (Some(progress), Some(published)) = (
        position("work.progress_reported"),
        position("artifact.published"),
    ) else {
        panic!("both Events in the log: {kinds:?}");
    };
    assert!(progress < published, "{kinds:?}");
    let (shown, stdout, _) = weft(&worker, &url, &["work", "journal"]);
    assert!(shown && !stdout.contains("pending"), "{stdout}");
}
