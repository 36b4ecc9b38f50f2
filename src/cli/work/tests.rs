//! Contract files: JSON and TOML give the same contract, and bad ones are refused before
//! anything is signed. The lease memory of `work.json` and the `work.progress` payload.

use serde_json::json;

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

/// `work.json` remembers the Execution Lease an answer shows this agent holding, replaces it
/// when a new one starts, and forgets it when an answer shows none (checkpoint, expiry) or
/// another agent's, or a non-execution lease (blocked); answers about no WorkItem change
/// nothing.
#[test]
fn work_json_follows_the_answers() {
    use super::lease::LocalState;
    let dir = tempfile::tempdir().expect("tempdir");
    let answer =
        |lease: serde_json::Value| json!({"workItemId": "wi-1", "state": "active", "lease": lease});
    let held = |id: &str, kind: &str, agent: &str| {
        json!({"leaseId": id, "kind": kind, "agentId": agent, "ownershipEpoch": 2,
               "expiresAt": "2026-11-30T12:05:00Z"})
    };
    let mut local = LocalState::load(dir.path()).expect("absent is empty");
    assert!(local.work_items.is_empty());
    assert!(local.observe("w1", &answer(held("lease-a", "execution", "w1"))));
    assert!(!local.observe("w1", &answer(held("lease-a", "execution", "w1"))));
    assert_eq!(local.work_items["wi-1"].lease_id, "lease-a");
    assert_eq!(local.work_items["wi-1"].ownership_epoch, 2);
    assert!(!local.observe("w1", &json!({"missionId": "m1", "state": "active"})));
    assert!(local.observe("w1", &answer(held("lease-b", "execution", "w1"))));
    assert_eq!(local.work_items["wi-1"].lease_id, "lease-b");
    for gone in [
        json!(null),
        held("lease-c", "execution", "w2"),
        held("lease-d", "blocked", "w1"),
    ] {
        local.observe("w1", &answer(held("lease-b", "execution", "w1")));
        assert!(local.observe("w1", &answer(gone.clone())), "{gone}");
        assert!(local.work_items.is_empty(), "{gone}");
    }
    // It survives a reload, written by `remember` (the path every answer takes).
    super::lease::remember(
        dir.path(),
        "w1",
        &answer(held("lease-e", "execution", "w1")),
    );
    let reloaded = LocalState::load(dir.path()).expect("reload");
    assert_eq!(reloaded.work_items["wi-1"].lease_id, "lease-e");
    std::fs::write(dir.path().join("work.json"), "not json").expect("write");
    assert!(LocalState::load(dir.path()).is_err());
}

/// PRG-1: the flags spell `work.progress`'s payload; an estimate needs an RFC 3339 instant,
/// and what the payload's own checks refuse is refused by the server, not guessed here.
#[test]
fn progress_flags_make_the_payload() {
    use clap::Parser as _;
    let parse = |extra: &[&str]| {
        let mut args = vec!["weft", "work", "progress", "wi-1", "--phase", "drafting"];
        args.extend_from_slice(extra);
        match crate::cli::Cli::try_parse_from(args)
            .expect("flags")
            .command
        {
            crate::cli::Command::Work {
                action: WorkAction::Progress(progress),
                ..
            } => progress,
            other => panic!("{other:?}"),
        }
    };
    let payload = super::owner::progress_payload(&parse(&[
        "--milestone",
        "outline",
        "--milestone",
        "sources",
        "--next-checkpoint",
        "first draft",
        "--blocker",
        "corpus access",
        "--completion-at",
        "2026-12-01T10:00:00Z",
        "--confidence",
        "0.7",
        "--percent",
        "40",
    ]))
    .expect("payload");
    assert_eq!(
        serde_json::to_value(&payload).expect("json"),
        json!({"workItemId": "wi-1", "phase": "drafting", "milestonesDone": ["outline", "sources"],
               "nextCheckpoint": "first draft", "blockers": ["corpus access"],
               "estimate": {"completionAt": "2026-12-01T10:00:00Z", "confidence": 0.7},
               "evidence": [], "percent": 40.0})
    );
    let bare = super::owner::progress_payload(&parse(&[])).expect("bare");
    assert_eq!(bare.estimate.completion_at, None);
    assert_eq!(bare.percent, None);
    assert!(
        super::owner::progress_payload(&parse(&[
            "--completion-at",
            "tomorrow",
            "--confidence",
            "1"
        ]))
        .is_err()
    );
    // --completion-at without --confidence is a usage error.
    assert!(
        crate::cli::Cli::try_parse_from([
            "weft",
            "work",
            "progress",
            "wi-1",
            "--phase",
            "p",
            "--completion-at",
            "2026-12-01T10:00:00Z"
        ])
        .is_err()
    );
}

/// `weft work contract-template` prints a contract the authorize path accepts (issue #50).
#[test]
fn the_contract_template_is_a_valid_contract() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("contract.toml");
    std::fs::write(&path, CONTRACT_TEMPLATE).expect("write");
    let contract = read_contract(&path).expect("the template is a valid contract");
    assert_eq!(contract.acceptance_criteria.len(), 2);
    assert!(contract.retry_policy.deadline.is_none());
    assert!(
        CONTRACT_TEMPLATE
            .lines()
            .filter(|l| l.starts_with('#'))
            .count()
            > 20
    );
}

/// A contract's problems come back all at once, not one per try (issue #50).
#[test]
fn every_problem_of_a_contract_is_named_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = TOML
        .replace(
            r#"objective = "summarise the corpus""#,
            r#"objective = " ""#,
        )
        .replace("maxCost = 2.5", "maxCost = -1.0")
        .replace(
            r#"deliverables = [{ name = "report", mediaType = "application/json" }]"#,
            "deliverables = []",
        );
    let chain = format!(
        "{:#}",
        read_contract(&write(dir.path(), "broken.toml", &broken)).expect_err("invalid")
    );
    for problem in ["objective", "deliverables", "retryPolicy.maxCost"] {
        assert!(chain.contains(problem), "{problem} missing from: {chain}");
    }
}
