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
    // Ids with `:` and `_` (issue #16: PROV-XML needs NCName local parts).
    let worker = h.agent("w:1", "g1", &["worker"]).await;
    let input = h.put_in(&worker, "g1", b"input", &[], "collect").await;
    let report = h
        .put_in(&worker, "g1", b"report", &[input], "ana:ly_se")
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
    // 2 attributions, 1 usage (the ana:ly_se WorkItem used the input), 2 associations (each
    // WorkItem with w:1; issue #16).
    let checked = run_python(
        "prov_roundtrip.py",
        &["2", "3", "1", "1", "2", "2", "1", "2"],
        &answer.body,
    );
    assert!(checked.starts_with("ok"), "{checked}");
    let prov: Value = serde_json::from_slice(&answer.body).expect("prov-json");
    let mut associations: Vec<(String, String)> = prov["wasAssociatedWith"]
        .as_object()
        .expect("wasAssociatedWith")
        .values()
        .map(|r| {
            (
                r["prov:activity"].as_str().expect("activity").to_owned(),
                r["prov:agent"].as_str().expect("agent").to_owned(),
            )
        })
        .collect();
    associations.sort();
    assert_eq!(
        associations,
        [
            (
                "weft:workItem_ana_-ly__se".to_owned(),
                "weft:agent_w_-1".to_owned()
            ),
            (
                "weft:workItem_collect".to_owned(),
                "weft:agent_w_-1".to_owned()
            ),
        ]
    );

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
        "https://weft.dev/agents/w:1"
    );
    let refused = h
        .call(
            Method::GET,
            "/v1/workitems/ana:ly_se/provenance?format=intoto",
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
        .artifacts()
        .artifact(
            weft_api::Digest::Blake3(report),
            &weft_storage::Reader::Admin,
        )
        .await
        .expect("view");
    let sources = crate::http::exports::StatementSources {
        hidden: [hidden].into(),
        ..Default::default()
    };
    let statement = crate::http::exports::intoto_statement(&view, &sources);
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

/// The quoted strings of a DOT text, decoded (`\"` and `\\` unescaped, DOT's `\n` kept as
/// `\n`), or an error naming where a string never closes: the lexer rule `dot` applies.
fn dot_strings(dot: &str) -> Result<Vec<String>, String> {
    let mut strings = Vec::new();
    let mut characters = dot.char_indices();
    while let Some((start, character)) = characters.next() {
        if character != '"' {
            continue;
        }
        let mut decoded = String::new();
        loop {
            match characters.next() {
                None => return Err(format!("string opened at byte {start} never closes")),
                Some((_, '"')) => break,
                Some((_, '\\')) => match characters.next() {
                    Some((_, '"')) => decoded.push('"'),
                    Some((_, '\\')) => decoded.push('\\'),
                    Some((_, other)) => {
                        decoded.push('\\');
                        decoded.push(other);
                    }
                    None => return Err(format!("string opened at byte {start} never closes")),
                },
                Some((_, other)) => decoded.push(other),
            }
        }
        strings.push(decoded);
    }
    Ok(strings)
}

/// Issue #16: every DOT id and label is escaped, so a media type with a backslash (or a
/// quote) neither ends its string early nor swallows the closing quote.
#[test]
fn dot_quoting_escapes_backslashes_quotes_and_line_breaks() {
    use crate::http::lineage::dot_quoted;
    for (text, expected) in [
        (r"text/plain; x=a\", r#""text/plain; x=a\\""#),
        (r#"say "hi""#, r#""say \"hi\"""#),
        ("two\nlines", r#""two\nlines""#),
        (r#"\"#, r#""\\""#),
        (r#"\""#, r#""\\\"""#),
        ("bell\u{7}", r#""bell""#),
    ] {
        let quoted = dot_quoted(text);
        assert_eq!(quoted, expected, "{text:?}");
        let decoded = dot_strings(&quoted).expect("closes");
        assert_eq!(decoded.len(), 1, "{quoted}");
    }
}

/// Issue #16, end to end: a media type with backslashes and quotes, `text/plain; x="a\"b\\"`
/// (a quoted-string parameter; issue #40 refuses an unterminated one), renders as a DOT graph
/// whose strings all close and whose label carries the media type as it was published.
#[tokio::test]
async fn dot_export_survives_a_media_type_with_a_backslash_and_a_quote() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let digests = h.upload(&worker, b"odd media type").await;
    let mut manifest = manifest(&worker, "g1", digests, &[]);
    let media_type = r#"text/plain; x="a\"b\\""#;
    manifest.content.media_type = media_type.into();
    let answer = h.publish(&worker, &sign(&worker.key, &manifest)).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let dot = h
        .call(
            Method::GET,
            &format!("/v1/artifacts/{}/provenance?format=dot", digests.blake3),
            Some(&worker.token),
            Body::empty(),
        )
        .await;
    assert_eq!(dot.status, StatusCode::OK);
    let dot = String::from_utf8(dot.body.to_vec()).expect("utf-8");
    let strings = dot_strings(&dot).unwrap_or_else(|error| panic!("{error}:\n{dot}"));
    assert!(
        strings
            .iter()
            .any(|label| label.ends_with(&format!("\\n{media_type}"))),
        "{strings:?}\n{dot}"
    );
    assert!(dot.trim_end().ends_with('}'), "{dot}");
}

/// Issue #16, the in-toto validators' rules checked here (the `in-toto-attestation` package
/// is not in the test venv): every resolvedDependency carries a `uri`, `digest` or `content`;
/// tools and models a `urn:weft:` uri; sources both their blake3 and sha256; and timestamps
/// are UTC ending in `Z`, whatever offset the manifest was signed with.
#[tokio::test]
async fn intoto_dependencies_carry_a_uri_or_digest_and_timestamps_end_in_z() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let input = h.put(&worker, "g1", b"input", &[]).await;
    let digests = h.upload(&worker, b"report").await;
    let mut manifest = manifest(&worker, "g1", digests, &[input]);
    let plus_two = chrono::FixedOffset::east_opt(2 * 3600).expect("offset");
    manifest.created_at = chrono::Utc::now().with_timezone(&plus_two);
    manifest.tools = vec![
        weft_api::manifest::Tool {
            kind: weft_api::manifest::ToolKind::Model,
            id: "gpt 5/turbo:x".into(),
            version: "2025-01 β".into(),
        },
        weft_api::manifest::Tool {
            kind: weft_api::manifest::ToolKind::Tool,
            id: "rustc".into(),
            version: "1.95".into(),
        },
    ];
    let answer = h.publish(&worker, &sign(&worker.key, &manifest)).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let envelope = h
        .call(
            Method::GET,
            &format!("/v1/artifacts/{}/provenance?format=intoto", digests.blake3),
            Some(&worker.token),
            Body::empty(),
        )
        .await;
    assert_eq!(envelope.status, StatusCode::OK);
    let envelope: Envelope = serde_json::from_slice(&envelope.body).expect("envelope");
    let statement: Value =
        serde_json::from_slice(&BASE64.decode(&envelope.payload).expect("payload"))
            .expect("statement");
    let dependencies = statement["predicate"]["buildDefinition"]["resolvedDependencies"]
        .as_array()
        .expect("dependencies");
    assert_eq!(dependencies.len(), 3, "{dependencies:?}");
    for dependency in dependencies {
        let has = |field: &str| match &dependency[field] {
            Value::String(text) => !text.is_empty(),
            Value::Object(map) => !map.is_empty(),
            _ => false,
        };
        assert!(
            has("uri") || has("digest") || has("content"),
            "{dependency}"
        );
    }
    let input_digests = digest_of(b"input");
    assert_eq!(
        dependencies[0]["digest"],
        json!({"blake3": input.hex(), "sha256": input_digests.sha256.hex()})
    );
    assert_eq!(
        dependencies[1]["uri"],
        json!("urn:weft:model:gpt%205%2Fturbo%3Ax:2025-01%20%CE%B2")
    );
    assert_eq!(dependencies[2]["uri"], json!("urn:weft:tool:rustc:1.95"));
    let finished_on = statement["predicate"]["runDetails"]["metadata"]["finishedOn"]
        .as_str()
        .expect("finishedOn");
    assert!(finished_on.ends_with('Z'), "{finished_on}");
    let parsed = chrono::DateTime::parse_from_rfc3339(finished_on).expect("RFC 3339");
    assert_eq!(parsed, manifest.created_at);
}
