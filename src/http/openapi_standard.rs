//! The OpenAPI document against the OpenAPI standard itself (tests only, issue #40): every
//! operation has a unique `operationId`, the headers the server sends are declared, and an
//! independent validator (`openapi-spec-validator`, which `scripts/test` installs beside
//! Schemathesis) accepts the document as served.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

use super::meta;

/// `(method, path, operation)` of every operation in the document.
fn operations() -> Vec<(String, String, Value)> {
    let mut found = Vec::new();
    if let Some(Value::Object(paths)) = meta::document().get("paths") {
        for (path, item) in paths {
            let Value::Object(item) = item else { continue };
            for (method, operation) in item {
                found.push((method.clone(), path.clone(), operation.clone()));
            }
        }
    }
    found
}

/// issue #40: six `operationId`s were used twice, which validators reject and code generators
/// clash on; every operation now has its own.
#[test]
fn every_operation_id_is_unique() {
    let mut by_id: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (method, path, operation) in operations() {
        let id = operation["operationId"]
            .as_str()
            .unwrap_or_else(|| panic!("{method} {path} has no operationId"))
            .to_owned();
        by_id
            .entry(id)
            .or_default()
            .push(format!("{method} {path}"));
    }
    let doubled: Vec<_> = by_id.iter().filter(|(_, uses)| uses.len() > 1).collect();
    assert!(
        doubled.is_empty(),
        "operationIds used more than once: {doubled:?}"
    );
    assert!(by_id.len() > 60, "{} operations", by_id.len());
}

/// issue #40: the headers clients act on are declared: `Retry-After` on every 429, 503 and 507,
/// `ETag` on the content's answers, `Location` and `Upload-Offset` on uploads.
#[test]
fn the_headers_the_server_sends_are_declared() {
    let header = |method: &str, path: &str, status: &str, name: &str| {
        operations().into_iter().any(|(m, p, operation)| {
            m == method
                && p == path
                && operation["responses"][status]["headers"]
                    .get(name)
                    .is_some()
        })
    };
    for (method, path, operation) in operations() {
        let Some(Value::Object(responses)) = operation.get("responses") else {
            continue;
        };
        for status in ["429", "503", "507"] {
            if responses.contains_key(status) {
                assert!(
                    responses[status]["headers"].get("Retry-After").is_some(),
                    "{method} {path} {status}"
                );
            }
        }
    }
    let content = "/v1/artifacts/{digest}/content";
    assert!(header("get", content, "200", "ETag"));
    assert!(header("get", content, "206", "Content-Range"));
    assert!(header("post", "/v1/uploads", "202", "Location"));
    assert!(header("post", "/v1/uploads", "202", "Upload-Offset"));
    assert!(header(
        "head",
        "/v1/uploads/{upload_id}",
        "204",
        "Upload-Offset"
    ));
}

/// issue #40: answers that carry an id another operation takes declare it as a link (the
/// stateful fuzzer followed none), and every link names an operation of the document and
/// exactly that operation's path parameters.
#[test]
fn every_link_names_an_operation_and_its_path_parameters() {
    let document = meta::document();
    let mut sources = Vec::new();
    for (method, path, operation) in operations() {
        let Some(Value::Object(responses)) = operation.get("responses") else {
            continue;
        };
        for (status, response) in responses {
            let Some(Value::Object(links)) = response.get("links") else {
                continue;
            };
            assert!(status.starts_with('2'), "{method} {path} {status}");
            for (name, link) in links {
                let pointer = link["operationRef"]
                    .as_str()
                    .and_then(|reference| reference.strip_prefix('#'))
                    .unwrap_or_else(|| panic!("{method} {path} {name}: operationRef"));
                let target = document
                    .pointer(pointer)
                    .unwrap_or_else(|| panic!("{method} {path} {name}: no {pointer}"));
                let mut wanted: Vec<&str> = target["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|parameter| parameter["in"] == "path")
                    .filter_map(|parameter| parameter["name"].as_str())
                    .collect();
                let mut given: Vec<&str> = link["parameters"]
                    .as_object()
                    .map(|parameters| parameters.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                wanted.sort_unstable();
                given.sort_unstable();
                assert_eq!(given, wanted, "{method} {path} {name}");
            }
            sources.push(format!("{method} {path}"));
        }
    }
    for source in [
        "post /v1/artifacts",
        "post /v1/evidence",
        "post /v1/groups/{group_id}/commands",
        "post /v1/uploads",
    ] {
        assert!(sources.iter().any(|s| s == source), "{source}: {sources:?}");
    }
}

/// issue #40: `openapi-spec-validator` accepts the served document. Needs `WEFT_PYTHON` with
/// the package (`scripts/test` installs it); skipped, saying so, without.
#[test]
fn the_document_passes_openapi_spec_validator() {
    let Ok(python) = std::env::var("WEFT_PYTHON") else {
        eprintln!(
            "SKIPPED: WEFT_PYTHON is not set; run scripts/test, which installs openapi-spec-validator"
        );
        return;
    };
    let has_validator = Command::new(&python)
        .args(["-c", "import openapi_spec_validator"])
        .status()
        .is_ok_and(|status| status.success());
    if !has_validator {
        eprintln!(
            "SKIPPED: WEFT_PYTHON has no openapi-spec-validator; run scripts/test, which installs it"
        );
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, serde_json::to_vec(meta::document()).expect("json")).expect("write");
    let output = Command::new(&python)
        .args([
            "-c",
            "import json, sys\nfrom openapi_spec_validator import validate\nvalidate(json.load(open(sys.argv[1])))",
        ])
        .arg(&file)
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "openapi-spec-validator refused the document:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
