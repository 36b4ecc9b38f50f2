//! Transport-level bad input, over raw TCP against the real binary: lying Content-Length,
//! Content-Length with Transfer-Encoding, a client that disconnects mid-body, slowloris.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::{TestServer, enrol, files_under};

/// Registers agent `w1` in `g1` through the CLI and returns its session token.
fn session(server: &TestServer, root: &std::path::Path) -> String {
    let home = root.join("home");
    enrol(server, &home, "g1", "w1", "worker");
    let session: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.join("session.json")).expect("session"))
            .expect("json");
    session["token"].as_str().expect("token").to_owned()
}

/// Sends `request` raw and returns everything the server answers until it closes or 3 s pass.
fn exchange(server: &TestServer, request: &[u8], then_close: bool) -> String {
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(3)))
        .expect("timeout");
    stream.write_all(request).expect("send");
    if then_close {
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

fn blobs_and_staging(server: &TestServer) -> (usize, usize) {
    (
        files_under(&server.data_dir.join("blobs")).len(),
        files_under(&server.data_dir.join("staging")).len(),
    )
}

/// Uploads the server refused or lost so far: `weft_uploads_total` of every outcome but `ok`.
fn failed_uploads(server: &TestServer) -> u64 {
    let admin = std::fs::read_to_string(server.data_dir.join("admin.token")).expect("admin.token");
    let request = format!(
        "GET /metrics HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        admin.trim()
    );
    exchange(server, request.as_bytes(), false)
        .lines()
        .filter(|line| line.starts_with("weft_uploads_total{") && !line.contains("\"ok\""))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Waits (up to 30 s each, for a loaded machine) until the server has counted more failed
/// uploads than `before`, then until staging is empty. Staging is cleaned by a task the
/// failed upload starts, once the part writes and flushes already begun have ended; polling
/// staging alone could look before the server had even created the file (the flake CI saw:
/// `(0, 1)` right after an empty look).
fn wait_for_empty_staging(server: &TestServer, before: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while failed_uploads(server) <= before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while blobs_and_staging(server).1 > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn lying_lengths_aborts_and_smuggling_keep_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start(&root.path().join("data"), &["--header-timeout-secs", "1"]);
    let token = session(&server, root.path());
    let body = vec![b'x'; 100_000];
    let digest = weft_api::digest::Hasher::digest(&body).blake3;
    let head = |length: &str, extra: &str| {
        format!(
            "PUT /v1/blobs/{digest} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\nContent-Length: {length}\r\n{extra}\r\n"
        )
    };

    // Content-Length longer than the body, then the client closes: an incomplete body.
    let before = failed_uploads(&server);
    let mut request = head("200000", "").into_bytes();
    request.extend_from_slice(&body);
    let answer = exchange(&server, &request, true);
    assert!(
        answer.is_empty() || answer.contains("incomplete_body"),
        "{answer}"
    );
    wait_for_empty_staging(&server, before);
    assert_eq!(
        blobs_and_staging(&server),
        (0, 0),
        "nothing kept after a short body"
    );

    // Content-Length shorter than the body: the server hashes what was declared, which does
    // not match the claimed digest; the excess is not a second request it would obey.
    let mut request = head("50000", "").into_bytes();
    request.extend_from_slice(&body);
    let answer = exchange(&server, &request, false);
    assert!(
        answer.starts_with("HTTP/1.1 400") && answer.contains("\"code\":\"digest_mismatch\""),
        "{answer}"
    );
    assert_eq!(blobs_and_staging(&server).0, 0);

    // Both Content-Length and Transfer-Encoding: refused, nothing stored.
    let mut request = head("5", "Transfer-Encoding: chunked\r\n").into_bytes();
    request.extend_from_slice(b"5\r\nhello\r\n0\r\n\r\n");
    let answer = exchange(&server, &request, false);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert_eq!(blobs_and_staging(&server).0, 0);

    // A client that disconnects mid-body (no close of its write side, just gone).
    let before = failed_uploads(&server);
    {
        let mut stream = TcpStream::connect(server.addr).expect("connect");
        let mut request = head("10000000", "").into_bytes();
        request.extend_from_slice(&vec![b'y'; 3_000_000]);
        stream.write_all(&request).expect("send");
    }
    wait_for_empty_staging(&server, before);
    assert_eq!(
        blobs_and_staging(&server),
        (0, 0),
        "nothing kept after an abort"
    );

    // The server still works.
    let mut request = head(&body.len().to_string(), "").into_bytes();
    request.extend_from_slice(&body);
    let answer = exchange(&server, &request, false);
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
}

#[test]
fn slowloris_connections_are_cut() {
    let root = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start(&root.path().join("data"), &["--header-timeout-secs", "1"]);
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n")
        .expect("send");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let started = Instant::now();
    let mut answer = Vec::new();
    // Never finish the headers; the server must close the connection by itself.
    let outcome = stream.read_to_end(&mut answer);
    let elapsed = started.elapsed();
    assert!(
        outcome.is_ok(),
        "the server closed the connection: {outcome:?}"
    );
    assert!(
        elapsed < Duration::from_secs(4),
        "cut after the header timeout, took {elapsed:?}"
    );
}

/// Issue #16: one access line per request at `info` (method, route template, status,
/// duration, caller, request id), never the token, and no colour codes in a log file.
#[test]
fn every_request_leaves_one_access_line_without_its_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("server.log");
    let server = TestServer::start_logged(&dir.path().join("data"), &[], &log);
    let token = session(&server, dir.path());
    let get = |path: &str, token: &str, id: &str| {
        exchange(
            &server,
            format!(
                "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nx-request-id: {id}\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
            false,
        )
    };
    assert!(get("/v1/session", &token, "req-session").starts_with("HTTP/1.1 200"));
    let digest = format!("blake3:{}", "ab".repeat(32));
    assert!(
        get(&format!("/v1/artifacts/{digest}"), &token, "req-missing").starts_with("HTTP/1.1 404")
    );
    assert!(get("/v1/session", "not-a-token", "req-refused").starts_with("HTTP/1.1 401"));
    // The console signs in with its cookie; its caller is noted too.
    let console = exchange(
        &server,
        format!(
            "GET /ui HTTP/1.1\r\nHost: x\r\nCookie: weft_session={token}\r\nx-request-id: req-console\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
        false,
    );
    assert!(console.starts_with("HTTP/1.1 200"), "{console}");
    drop(server);

    let text = std::fs::read_to_string(&log).expect("log");
    assert!(
        !text.contains('\u{1b}'),
        "colour codes in a log file: {text}"
    );
    assert!(!text.contains(&token), "the session token was logged");
    assert!(!text.contains("not-a-token"), "a refused token was logged");
    assert!(!text.contains(&digest[7..]), "a raw path was logged");
    let line = |id: &str| {
        let lines: Vec<&str> = text
            .lines()
            .filter(|line| line.contains("weft::access") && line.contains(id))
            .collect();
        assert_eq!(lines.len(), 1, "one access line for {id}: {text}");
        lines[0].to_owned()
    };
    let ok = line("req-session");
    for field in [
        "INFO",
        "method=GET",
        "route=/v1/session",
        "status=200",
        "duration_ms=",
        "caller=agent:",
    ] {
        assert!(ok.contains(field), "{field} missing in {ok}");
    }
    assert!(line("req-missing").contains("route=/v1/artifacts/{digest}"));
    assert!(line("req-missing").contains("status=404"));
    assert!(
        line("req-console").contains("caller=agent:w1 (console)"),
        "{text}"
    );
    let refused = line("req-refused");
    assert!(
        refused.contains("status=401") && refused.contains("caller=-"),
        "{refused}"
    );
}

/// Issue #46: each collection round (`--gc-interval-secs`) sets every Group's usage gauges in
/// `/metrics`, for the operator.
#[test]
fn each_collection_round_puts_group_usage_in_the_metrics() {
    let root = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start(&root.path().join("data"), &["--gc-interval-secs", "1"]);
    let _ = session(&server, root.path());
    let admin = std::fs::read_to_string(server.data_dir.join("admin.token")).expect("admin.token");
    let request = format!(
        "GET /metrics HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        admin.trim()
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let metrics = exchange(&server, request.as_bytes(), false);
        if metrics
            .lines()
            .any(|line| line.starts_with("weft_group_usage_bytes{group=\"g1\"}"))
        {
            assert!(
                metrics.contains("# HELP weft_group_usage_artifacts"),
                "{metrics}"
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no usage gauge for g1:\n{metrics}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
