//! The first hour with the CLI (issue #16): errors that name the next step and never show a
//! backtrace, `show` verifying signatures, `put -` and `get -o -`, `get` without `-o`, and
//! `whoami`, `logout`, `review` and `admin schema`.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::{TestServer, WEFT, enrol, files_under, leased_work_item, weft};

fn ok(outcome: (bool, String, String)) -> String {
    assert!(
        outcome.0,
        "command failed:\nstdout: {}\nstderr: {}",
        outcome.1, outcome.2
    );
    outcome.1
}

/// The command fails; answers its stderr.
fn fails(outcome: (bool, String, String)) -> String {
    assert!(!outcome.0, "expected a failure: {}", outcome.1);
    outcome.2
}

/// Runs the CLI in `dir` with `stdin` piped in and `RUST_BACKTRACE=1` (what a user with it
/// set in their shell gets); returns (success, stdout bytes, stderr).
fn weft_raw(
    home: &Path,
    server: &str,
    dir: &Path,
    args: &[&str],
    stdin: &[u8],
) -> (bool, Vec<u8>, String) {
    let mut child = Command::new(WEFT)
        .args(args)
        .current_dir(dir)
        .env("WEFT_HOME", home)
        .env("WEFT_SERVER", server)
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weft runs");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin).expect("write stdin");
    drop(input);
    let output = child.wait_with_output().expect("weft ends");
    (
        output.status.success(),
        output.stdout,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn put_args<'a>(file: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
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
    ];
    args.extend_from_slice(extra);
    args
}

#[test]
fn errors_name_the_next_step_and_never_show_a_backtrace() {
    let root = tempfile::tempdir().expect("tempdir");
    let lonely = root.path().join("lonely");
    ok(weft(&lonely, "http://127.0.0.1:1", &["keygen"]));
    // No server: the address tried and WEFT_SERVER, no backtrace although RUST_BACKTRACE=1.
    let (done, _, stderr) = weft_raw(
        &lonely,
        "http://127.0.0.1:1",
        root.path(),
        &["login", "--agent-id", "a1", "--group", "g1"],
        b"",
    );
    assert!(!done);
    assert!(
        stderr.starts_with("error: ")
            && stderr.contains("http://127.0.0.1:1")
            && stderr.contains("WEFT_SERVER")
            && !stderr.contains("acktrace"),
        "{stderr}"
    );

    let server = TestServer::start(&root.path().join("data"), &[]);
    let url = server.url();
    let home = root.path().join("home");
    enrol(&server, &home, "g1", "agent-1", "worker");
    // A newer session replaces this one: stale_session names `weft login`.
    let old = std::fs::read(home.join("session.json")).expect("session");
    ok(weft(
        &home,
        &url,
        &["login", "--agent-id", "agent-1", "--group", "g1"],
    ));
    std::fs::write(home.join("session.json"), old).expect("restore");
    let stderr = fails(weft(&home, &url, &["ls"]));
    assert!(
        stderr.contains("stale_session")
            && stderr.contains("next: ")
            && stderr.contains("weft login"),
        "{stderr}"
    );
    // `whoami` says the server refuses the replaced session, and exits non-zero (issue #50).
    let (done, stdout, _) = weft(&home, &url, &["whoami"]);
    assert!(
        !done && stdout.contains("REFUSED by the server"),
        "{stdout}"
    );
    ok(weft(
        &home,
        &url,
        &["login", "--agent-id", "agent-1", "--group", "g1"],
    ));
    // A corrupted blob: the download says what happened, not "error decoding response body".
    leased_work_item(&server, root.path(), "g1", "m1", "w1", &home, "agent-1");
    // A bad enum value lists the allowed ones.
    let stderr = fails(weft(
        &home,
        &url,
        &[
            "evidence",
            "add",
            "--mission",
            "m1",
            "--work-item",
            "w1",
            "--criterion",
            "c",
            "--outcome",
            "maybe",
            "--method",
            "human",
        ],
    ));
    assert!(
        stderr.contains("\"maybe\"") && stderr.contains("pass, fail, inconclusive"),
        "{stderr}"
    );

    let input = root.path().join("input.txt");
    let bytes: Vec<u8> = (0..400_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&input, &bytes).expect("write");
    let digest = ok(weft(
        &home,
        &url,
        &put_args(input.to_str().expect("utf-8"), &[]),
    ))
    .trim()
    .to_owned();
    let blob = files_under(&server.data_dir.join("blobs"))
        .into_iter()
        .find(|path| path.to_string_lossy().contains(&digest[7..]))
        .expect("blob file");
    let mut stored = std::fs::read(&blob).expect("blob");
    stored[1000] ^= 1;
    std::fs::write(&blob, stored).expect("write");
    let out = root.path().join("out.bin");
    for _ in 0..2 {
        // The first download finds the damage; the second meets the quarantine.
        let stderr = fails(weft(
            &home,
            &url,
            &["get", &digest, "-o", out.to_str().expect("utf-8"), "-q"],
        ));
        assert!(
            stderr.contains("integrity failure; the server has quarantined it")
                && !stderr.contains("error decoding response body"),
            "{stderr}"
        );
    }
}

#[test]
fn show_verifies_signatures_and_bytes_stream_through_stdin_and_stdout() {
    let root = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start(&root.path().join("data"), &[]);
    let url = server.url();
    let worker = root.path().join("worker");
    let reviewer = root.path().join("reviewer");
    enrol(&server, &worker, "g1", "agent-1", "worker");
    enrol(&server, &reviewer, "g1", "agent-2", "reviewer");
    leased_work_item(&server, root.path(), "g1", "m1", "w1", &worker, "agent-1");

    // `put -` reads stdin and leaves nothing spooled behind.
    let bytes = b"bytes from a pipe\n".repeat(10_000);
    let (done, stdout, stderr) = weft_raw(
        &worker,
        &url,
        root.path(),
        &put_args("-", &["--annotation", "name=../report.txt"]),
        &bytes,
    );
    assert!(done, "{stderr}");
    let digest = String::from_utf8(stdout).expect("utf-8").trim().to_owned();
    assert_eq!(digest, format!("blake3:{}", blake3::hash(&bytes).to_hex()));
    assert!(
        files_under(&worker.join("spool")).is_empty(),
        "spool emptied"
    );

    // `get -o -` writes the bytes to stdout; `get` alone names the file after the manifest
    // (its last path component only), else the digest's hex.
    let (done, stdout, stderr) = weft_raw(
        &reviewer,
        &url,
        root.path(),
        &["get", &digest, "-o", "-"],
        b"",
    );
    assert!(done && stdout == bytes, "{stderr}");
    let downloads = root.path().join("downloads");
    std::fs::create_dir_all(&downloads).expect("mkdir");
    let (done, _, stderr) = weft_raw(&reviewer, &url, &downloads, &["get", &digest, "-q"], b"");
    assert!(done, "{stderr}");
    assert_eq!(
        std::fs::read(downloads.join("report.txt")).expect("named"),
        bytes
    );
    // Without -o a download never replaces a file (issue #50); with -o it does.
    std::fs::write(downloads.join("report.txt"), b"mine").expect("write");
    let (done, _, stderr) = weft_raw(&reviewer, &url, &downloads, &["get", &digest, "-q"], b"");
    assert!(
        !done && stderr.contains("report.txt exists here"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(downloads.join("report.txt")).expect("kept"),
        b"mine"
    );
    let (done, _, stderr) = weft_raw(
        &reviewer,
        &url,
        &downloads,
        &["get", &digest, "-q", "-o", "report.txt"],
        b"",
    );
    assert!(done, "{stderr}");
    assert_eq!(
        std::fs::read(downloads.join("report.txt")).expect("replaced"),
        bytes
    );
    // A name that would be a dotfile is not taken: the digest's hex names it.
    let (done, stdout, stderr) = weft_raw(
        &worker,
        &url,
        root.path(),
        &put_args("-", &["--annotation", "name=.bashrc"]),
        b"echo owned",
    );
    assert!(done, "{stderr}");
    let dotted = String::from_utf8(stdout).expect("utf-8").trim().to_owned();
    let (done, _, stderr) = weft_raw(&reviewer, &url, &downloads, &["get", &dotted, "-q"], b"");
    assert!(done, "{stderr}");
    assert!(!downloads.join(".bashrc").exists(), "no dotfile");
    assert!(
        downloads.join(&dotted[7..]).exists(),
        "named by the digest's hex"
    );
    // Bytes from stdin carry no name (a file's name is recorded by `weft put FILE`).
    let (done, unnamed, stderr) =
        weft_raw(&worker, &url, root.path(), &put_args("-", &[]), b"no name");
    assert!(done, "{stderr}");
    let unnamed = String::from_utf8(unnamed).expect("utf-8").trim().to_owned();
    let (done, _, stderr) = weft_raw(&reviewer, &url, &downloads, &["get", &unnamed, "-q"], b"");
    assert!(done, "{stderr}");
    assert!(
        downloads.join(&unnamed[7..]).exists(),
        "named by the digest's hex"
    );

    // The producer verifies its own manifest with its own key.
    let shown = ok(weft(&worker, &url, &["show", &digest]));
    assert!(
        shown.contains("signature   valid (key ed25519:") && shown.contains("agent agent-1"),
        "{shown}"
    );
    // Another member holds no key of agent-1: it checks against the key the Authority
    // registered for it, and says that is whose word it took (issue #50).
    let shown = ok(weft(&reviewer, &url, &["show", &digest]));
    assert!(
        shown.contains("signature   valid (key ed25519:")
            && shown.contains("the key the Authority registered for agent agent-1"),
        "{shown}"
    );
    // Given agent-1's public key, it verifies; given another key, it still does not.
    let key_file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(worker.join("agent.key")).expect("key"))
            .expect("JSON");
    let public_key = key_file["publicKey"].as_str().expect("publicKey");
    let shown = ok(weft(
        &reviewer,
        &url,
        &["show", &digest, "--producer-key", public_key],
    ));
    assert!(shown.contains("signature   valid (key ed25519:"), "{shown}");
    let reviewer_key: serde_json::Value =
        serde_json::from_slice(&std::fs::read(reviewer.join("agent.key")).expect("key"))
            .expect("JSON");
    let shown = ok(weft(
        &reviewer,
        &url,
        &[
            "show",
            &digest,
            "--producer-key",
            reviewer_key["publicKey"].as_str().expect("publicKey"),
        ],
    ));
    assert!(
        shown.contains("registered for agent agent-1") && !shown.contains("--producer-key)"),
        "a key given for nothing it signed is not the one that checks: {shown}"
    );
    // Timestamps to the second.
    let created = shown
        .lines()
        .find(|line| line.trim_start().starts_with("created"))
        .expect("created line");
    assert!(
        created.contains("Z  classification") && !created.contains('.'),
        "{created}"
    );
}

#[test]
fn whoami_logout_review_and_admin_schema() {
    let root = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start(&root.path().join("data"), &[]);
    let url = server.url();
    let worker = root.path().join("worker");
    let reviewer = root.path().join("reviewer");
    enrol(&server, &worker, "g1", "agent-1", "worker");
    enrol(&server, &reviewer, "g1", "agent-2", "reviewer");
    leased_work_item(&server, root.path(), "g1", "m1", "w1", &worker, "agent-1");
    let file = root.path().join("result.txt");
    std::fs::write(&file, b"result").expect("write");
    let digest = ok(weft(
        &worker,
        &url,
        &put_args(file.to_str().expect("utf-8"), &[]),
    ))
    .trim()
    .to_owned();

    let who = ok(weft(&reviewer, &url, &["whoami"]));
    assert!(
        who.contains("agent     agent-2")
            && who.contains("group     g1")
            && who.contains("expires   ")
            && who.contains("roles     reviewer")
            && who.contains("scope     the whole Group")
            && who.contains("the server accepts this session"),
        "{who}"
    );

    let token = ok(weft(&reviewer, &url, &["whoami", "--token"]));
    let stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(reviewer.join("session.json")).expect("session"))
            .expect("json");
    assert_eq!(token.trim(), stored["token"].as_str().expect("token"));

    let none = ok(weft(&reviewer, &url, &["criteria", "w1"]));
    assert!(none.starts_with("no Evidence recorded for w1"), "{none}");
    let reviewed = ok(weft(
        &reviewer,
        &url,
        &["review", "w1", "--criterion", "ac-1", "--artifact", &digest],
    ));
    let lines: Vec<&str> = reviewed.lines().collect();
    assert!(
        lines[0].starts_with("EVIDENCE")
            && lines.len() == 2
            && lines[1].contains(" ac-1 ")
            && lines[1].contains(" pass "),
        "{reviewed}"
    );
    let stderr = fails(weft(
        &reviewer,
        &url,
        &[
            "review",
            "w1",
            "--criterion",
            "ac-1",
            "--artifact",
            &digest,
            "--check",
            "lint",
        ],
    ));
    assert!(stderr.contains("expected integrity or schema"), "{stderr}");

    let token_file = server.data_dir.join("admin.token");
    let admin = [
        "admin",
        "--admin-token-file",
        token_file.to_str().expect("utf-8"),
    ];
    // A wrong admin token points at the admin token, not at `weft login` (issue #50).
    let stderr = fails(weft(
        &worker,
        &url,
        &[
            "admin",
            "--admin-token",
            "not-the-token",
            "group",
            "create",
            "g9",
        ],
    ));
    assert!(
        stderr.contains("admin token") && !stderr.contains("weft login"),
        "{stderr}"
    );
    let registered = ok(weft(
        &worker,
        &url,
        &[
            &admin[..],
            &["schema", "https://example.org/s.json", &digest],
        ]
        .concat(),
    ));
    assert!(
        registered.contains("https://example.org/s.json"),
        "{registered}"
    );
    let unknown = format!("blake3:{}", "0".repeat(64));
    let stderr = fails(weft(
        &worker,
        &url,
        &[
            &admin[..],
            &["schema", "https://example.org/t.json", &unknown],
        ]
        .concat(),
    ));
    assert!(stderr.contains("unknown_artifact"), "{stderr}");

    let bye = ok(weft(&reviewer, &url, &["logout"]));
    assert!(bye.contains("until"), "{bye}");
    assert!(!reviewer.join("session.json").exists());
    assert!(reviewer.join("agent.key").exists(), "the key stays");
    let stderr = fails(weft(&reviewer, &url, &["whoami"]));
    assert!(stderr.contains("weft login"), "{stderr}");
    let again: serde_json::Value =
        serde_json::from_str(&ok(weft(&reviewer, &url, &["logout", "--json"]))).expect("JSON");
    assert_eq!(
        again,
        serde_json::json!({"forgotten": false}),
        "nothing left to forget"
    );

    // Roles print as typed, not as Rust debug output.
    let set = ok(weft(
        &worker,
        &url,
        &[
            &admin[..],
            &[
                "member", "set", "g1", "agent-2", "--role", "reviewer", "--role", "auditor",
            ],
        ]
        .concat(),
    ));
    assert!(
        set.contains("agent-2 in g1: reviewer, auditor (membership epoch"),
        "{set}"
    );

    // The operator's reads: a table with a header and one row per member, and an Agent's keys.
    let members = ok(weft(
        &worker,
        &url,
        &[&admin[..], &["member", "ls", "g1"]].concat(),
    ));
    let lines: Vec<&str> = members.lines().collect();
    assert!(
        lines[0].starts_with("AGENT") && lines[0].contains("ROLES"),
        "{members}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("agent-2")
            && l.contains("reviewer, auditor")
            && l.contains("the whole Group")),
        "{members}"
    );
    let shown = ok(weft(
        &worker,
        &url,
        &[&admin[..], &["agent", "show", "agent-1"]].concat(),
    ));
    assert!(
        shown.contains("agent        agent-1")
            && shown.contains("KEYID")
            && shown.contains("current"),
        "{shown}"
    );
    let stderr = fails(weft(
        &worker,
        &url,
        &[&admin[..], &["agent", "show", "nobody"]].concat(),
    ));
    assert!(stderr.contains("not_found"), "{stderr}");
}
