//! Contract files: JSON and TOML give the same contract, and bad ones are refused before
//! anything is signed.

use super::*;

/// One contract spelled twice: TOML (its own datetime, absent optionals left out) and
/// JSON (explicit nulls).
const TOML: &str = r#"
objective = "summarise the corpus"
inputs = []
dependsOn = []
requiredCapabilities = [{ id = "cap.summarize", version = "1" }]
deadline = 2026-12-31T00:00:00Z
urgency = "normal"
businessImpact = "medium"
risk = "low"
approvalRequired = false
childFailurePolicy = "block"
deliverables = [{ name = "report", mediaType = "application/json" }]
acceptanceCriteria = [{ id = "ac-1", description = "the tests pass", requiredEvidence = ["automated_test"] }]
permissions = { tools = ["search"], data = ["corpus"], operations = ["read"] }
budgets = { financial = 10, tokens = 200000, toolCalls = 500, computeSeconds = 3600, wallClockSeconds = 7200, sideEffects = 5 }
retryPolicy = { maxAttempts = 3, backoffSeconds = 30, maxCost = 2.5 }
leases = { offerSeconds = 600, ownershipSeconds = 3600, executionSeconds = 300, blockedSeconds = 3600, graceSeconds = 120 }
"#;

const JSON: &str = r#"{
  "objective": "summarise the corpus", "inputs": [], "dependsOn": [],
  "dependencyPolicy": "all_verified",
  "requiredCapabilities": [{"id": "cap.summarize", "version": "1"}],
  "deadline": "2026-12-31T00:00:00+00:00", "urgency": "normal", "businessImpact": "medium",
  "risk": "low", "approvalRequired": false, "childFailurePolicy": "block",
  "deliverables": [{"name": "report", "mediaType": "application/json", "schema": null}],
  "acceptanceCriteria": [{"id": "ac-1", "description": "the tests pass", "requiredEvidence": ["automated_test"]}],
  "permissions": {"tools": ["search"], "data": ["corpus"], "operations": ["read"]},
  "budgets": {"financial": 10.0, "tokens": 200000, "toolCalls": 500, "computeSeconds": 3600,
          "wallClockSeconds": 7200, "sideEffects": 5},
  "retryPolicy": {"maxAttempts": 3, "backoffSeconds": 30, "deadline": null, "maxCost": 2.5},
  "leases": {"offerSeconds": 600, "ownershipSeconds": 3600, "executionSeconds": 300,
         "blockedSeconds": 3600, "graceSeconds": 120}
}"#;

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

/// CON-1: the same contract from TOML and from JSON, byte for byte once serialized (the
/// bytes a Command signs).
#[test]
fn toml_and_json_contracts_are_the_same_contract() {
    let dir = tempfile::tempdir().expect("tempdir");
    let from_toml = read_contract(&write(dir.path(), "c.toml", TOML)).expect("TOML");
    let from_json = read_contract(&write(dir.path(), "c.json", JSON)).expect("JSON");
    assert_eq!(from_toml, from_json);
    assert_eq!(
        serde_json::to_vec(&from_toml).expect("json"),
        serde_json::to_vec(&from_json).expect("json")
    );
}

/// CON-1 and unknown fields are refused locally, in either spelling, before signing.
#[test]
fn incomplete_or_unknown_contract_fields_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        ("missing.toml", TOML.replace("risk = \"low\"\n", ""), "risk"),
        (
            "unknown.toml",
            format!("mood = \"optimistic\"\n{TOML}"),
            "mood",
        ),
        (
            "empty-criteria.json",
            JSON.replace(
                r#"[{"id": "ac-1", "description": "the tests pass", "requiredEvidence": ["automated_test"]}]"#,
                "[]",
            ),
            "acceptanceCriteria",
        ),
        (
            "infinite.toml",
            TOML.replace("maxCost = 2.5", "maxCost = inf"),
            "finite",
        ),
    ];
    for (name, text, expected) in cases {
        let chain = format!(
            "{:#}",
            read_contract(&write(dir.path(), name, &text)).expect_err(name)
        );
        assert!(chain.contains(expected), "{name}: {chain}");
    }
}

/// The README's example contracts (`examples/contract.json`, `examples/contract.toml`) are
/// complete, valid, and the same contract but for their notes.
#[test]
fn the_example_contracts_read_and_agree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let json = read_contract(&root.join("contract.json")).expect("examples/contract.json");
    let mut toml = read_contract(&root.join("contract.toml")).expect("examples/contract.toml");
    toml.notes = json.notes.clone();
    assert_eq!(json, toml);
}
