//! Provenance exports checked by independent implementations: PROV-JSON by the W3C `prov`
//! package, in-toto by another Ed25519 implementation (both in `tests/python`).

use axum::body::Body;
use axum::http::{Method, StatusCode};
use base64::Engine as _;
use serde_json::{Value, json};
use weft_api::Envelope;
use weft_api::dsse::BASE64;

use super::harness::*;

/// The Python with `prov` and `cryptography` that `.ci/run` installs (`WEFT_PYTHON`).
fn python() -> String {
    std::env::var("WEFT_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

pub(super) fn run_python(script: &str, args: &[&str], input: &[u8]) -> String {
    use std::io::Write as _;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(script);
    let mut child = std::process::Command::new(python())
        .arg(&path)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python runs (run .ci/run to install the checkers' packages)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write");
    let output = child.wait_with_output().expect("python finishes");
    assert!(
        output.status.success(),
        "{script} failed (run .ci/run, which installs `prov` and `cryptography`):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// PROV-JSON validated by the W3C `prov` package (round trip, record counts, no dangling
/// references); in-toto checked by an independent Ed25519 implementation and the Statement
/// structure, digest syntax checked here.
#[tokio::test]
async fn prov_json_and_intoto_exports_validate_independently() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let input = h.put_in(&worker, "g1", b"input", &[], "collect").await;
    let report = h
        .put_in(&worker, "g1", b"report", &[input], "analyse")
        .await;
    let answer = h
        .call(
            Method::GET,
            &format!("/v1/artifacts/{report}/provenance?format=prov-json"),
            Some(&worker.token),
            Body::empty(),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    // 2 entities; activities: 2 WorkItems + 1 Mission; 1 agent; 1 derivation, 2 generations,
    // 2 attributions, 1 usage (the analyse WorkItem used the input).
    let checked = run_python(
        "prov_roundtrip.py",
        &["2", "3", "1", "1", "2", "2", "1"],
        &answer.body,
    );
    assert!(checked.starts_with("ok"), "{checked}");

    let envelope = h
        .call(
            Method::GET,
            &format!("/v1/artifacts/{report}/provenance?format=intoto"),
            Some(&worker.token),
            Body::empty(),
        )
        .await;
    assert_eq!(envelope.status, StatusCode::OK);
    let keys = h
        .call(Method::GET, "/v1/authority/keys", None, Body::empty())
        .await
        .json();
    let public_key = keys["keys"][0]["publicKey"]
        .as_str()
        .expect("key")
        .to_owned();
    assert!(run_python("intoto_verify.py", &[&public_key], &envelope.body).starts_with("ok"));
    let envelope: Envelope = serde_json::from_slice(&envelope.body).expect("envelope");
    let statement: Value =
        serde_json::from_slice(&BASE64.decode(&envelope.payload).expect("payload"))
            .expect("statement");
    let digests = digest_of(b"report");
    assert_eq!(
        statement["subject"][0]["digest"],
        json!({"blake3": digests.blake3.hex(), "sha256": digests.sha256.hex()})
    );
    for value in [
        &statement["subject"][0]["digest"]["blake3"],
        &statement["subject"][0]["digest"]["sha256"],
    ] {
        let hex = value.as_str().expect("hex");
        assert!(
            hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "lowercase hex digest: {hex}"
        );
    }
    let dependencies = &statement["predicate"]["buildDefinition"]["resolvedDependencies"];
    assert_eq!(dependencies[0]["digest"]["blake3"], json!(input.hex()));
    assert_eq!(
        dependencies[1]["annotations"],
        json!({"kind": "model", "version": "1"})
    );
    assert_eq!(
        statement["predicate"]["runDetails"]["builder"]["id"],
        "https://weft.dev/agents/w1"
    );
    let refused = h
        .call(
            Method::GET,
            "/v1/workitems/analyse/provenance?format=intoto",
            Some(&worker.token),
            Body::empty(),
        )
        .await;
    assert_eq!(refused.code(), "bad_request");
}

/// Issue #10 finding 5, defence in depth: a manifest recorded before publication refused
/// unreadable sources may still name one; the in-toto export then lists only the sources the
/// reader may see and counts the others (`withheldSources`), never naming them.
#[tokio::test]
async fn intoto_exports_count_hidden_sources_without_naming_them() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let shown = h.put(&worker, "g1", b"shown", &[]).await;
    let hidden = h.put(&worker, "g1", b"taken as hidden", &[]).await;
    let report = h.put(&worker, "g1", b"report", &[shown, hidden]).await;
    let view = h
        .store
        .artifact(
            weft_api::Digest::Blake3(report),
            &weft_storage::Reader::Admin,
        )
        .await
        .expect("view");
    let statement = crate::http::exports::intoto_statement(&view, &[hidden].into());
    let text = statement.to_string();
    assert!(!text.contains(&hidden.hex()), "{text}");
    assert!(text.contains(&shown.hex()), "{text}");
    assert_eq!(
        statement["predicate"]["buildDefinition"]["internalParameters"]["withheldSources"],
        json!(1)
    );
    let everything = crate::http::exports::intoto_statement(&view, &Default::default());
    assert!(
        everything["predicate"]["buildDefinition"]["internalParameters"]
            .get("withheldSources")
            .is_none()
    );
}
