//! Missions and WorkItems through the CLI (issue #11): a coordinator and a worker, each with
//! its own weft home, take a WorkItem from `mission create` to `verified` with signed
//! Commands (the contract from a TOML file), and a non-candidate's acceptance is refused
//! with its code, as is a contract file missing a CON-1 item before anything is signed.
//! The owner's lease (issue #12): `work start` leaves the lease in the home's `work.json`;
//! `work renew`, `work progress` and `work token` act on it, `put` publishes under it without
//! being told, and a checkpoint forgets it.

use std::path::Path;

use crate::support::{TestServer, enrol, weft};

/// A complete v1 contract in TOML: every CON-1 item, an absent optional field left out (TOML
/// has no null) and a datetime in TOML's own syntax.
const CONTRACT_TOML: &str = r#"
objective = "summarise the corpus"
inputs = []
dependsOn = []
dependencyPolicy = "all_verified"
requiredCapabilities = [{ id = "cap.summarize", version = "1" }]
deadline = 2026-12-31T00:00:00Z
urgency = "normal"
businessImpact = "medium"
risk = "low"
approvalRequired = false
childFailurePolicy = "block"
notes = "a TOML contract"

[[deliverables]]
name = "report"
mediaType = "application/json"

[[acceptanceCriteria]]
id = "ac-1"
description = "the tests pass"
requiredEvidence = ["automated_test"]

[permissions]
tools = ["search"]
data = ["corpus"]
operations = ["read"]

[budgets]
financial = 10.0
tokens = 200000
toolCalls = 500
computeSeconds = 3600
wallClockSeconds = 7200
sideEffects = 5

[retryPolicy]
maxAttempts = 3
backoffSeconds = 30
maxCost = 2.0

[leases]
offerSeconds = 600
ownershipSeconds = 3600
executionSeconds = 300
blockedSeconds = 3600
graceSeconds = 120
"#;

/// Runs the CLI as the agent of `home`; fails the test with its output unless it succeeds.
fn ok(home: &Path, url: &str, args: &[&str]) -> String {
    let (success, stdout, stderr) = weft(home, url, args);
    assert!(
        success,
        "{args:?} failed:\nstdout: {stdout}\nstderr: {stderr}"
    );
    stdout
}

/// The state a Command's human answer reports for its WorkItem (`work item X: STATE (…)`).
fn state_after(answer: &str) -> &str {
    answer
        .lines()
        .find_map(|line| line.strip_prefix("work item wi-1: "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no WorkItem state in {answer}"))
}

#[test]
fn coordinator_and_worker_run_a_work_item_through_the_cli() {
    let root = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start(&root.path().join("data"), &[]);
    let url = server.url();
    let coordinator = root.path().join("coordinator");
    let worker = root.path().join("worker");
    let bystander = root.path().join("bystander");
    enrol(&server, &coordinator, "g1", "coord-1", "coordinator");
    enrol(&server, &worker, "g1", "worker-1", "worker");
    enrol(&server, &bystander, "g1", "worker-2", "worker");

    let created = ok(
        &coordinator,
        &url,
        &[
            "mission",
            "create",
            "m1",
            "--title",
            "Summaries",
            "--financial",
            "100",
            "--tokens",
            "1000000",
        ],
    );
    assert!(created.contains("mission m1: active"), "{created}");
    // The contract file is parsed and validated before anything is signed: one missing a
    // CON-1 item never reaches the server.
    let contract = root.path().join("contract.toml");
    let contract_path = contract.to_str().expect("utf-8");
    std::fs::write(&contract, CONTRACT_TOML.replace("risk = \"low\"\n", "")).expect("write");
    let (success, _, stderr) = weft(
        &coordinator,
        &url,
        &[
            "work",
            "authorize",
            "wi-1",
            "--mission",
            "m1",
            "--contract",
            contract_path,
        ],
    );
    assert!(!success && stderr.contains("risk"), "{stderr}");
    let (found, _, stderr) = weft(&coordinator, &url, &["work", "show", "wi-1"]);
    assert!(!found && stderr.contains("unknown_work_item"), "{stderr}");
    std::fs::write(&contract, CONTRACT_TOML).expect("write contract");
    let authorized = ok(
        &coordinator,
        &url,
        &[
            "work",
            "authorize",
            "wi-1",
            "--mission",
            "m1",
            "--contract",
            contract_path,
        ],
    );
    assert!(authorized.contains("work.authorized"), "{authorized}");
    assert_eq!(state_after(&authorized), "open");
    let offered = ok(
        &coordinator,
        &url,
        &[
            "work",
            "offer",
            "wi-1",
            "--offer",
            "o1",
            "--candidate",
            "worker-1",
            "--expires-in",
            "600",
            "--capability",
            "cap.summarize:1",
            "--policy-rule",
            "least-loaded",
        ],
    );
    assert_eq!(state_after(&offered), "offered");

    // OFR-4: an Agent the offer does not name cannot take it; the code reaches the user and
    // the WorkItem is still offered.
    let (accepted, stdout, stderr) = weft(
        &bystander,
        &url,
        &["work", "accept", "wi-1", "--offer", "o1"],
    );
    assert!(
        !accepted && stderr.contains("(forbidden)"),
        "{stdout}\n{stderr}"
    );
    let shown = ok(&coordinator, &url, &["work", "show", "wi-1"]);
    assert!(shown.contains("state       offered"), "{shown}");

    // The worker takes the live offer naming it (no --offer needed) and runs the WorkItem.
    let accepted = ok(&worker, &url, &["work", "accept", "wi-1"]);
    assert_eq!(state_after(&accepted), "queued");
    let started = ok(&worker, &url, &["work", "start", "wi-1"]);
    assert_eq!(state_after(&started), "active");
    assert!(started.contains("lease lease-"), "{started}");
    let remembered = |home: &Path| -> serde_json::Value {
        let text = std::fs::read_to_string(home.join("work.json")).expect("work.json");
        serde_json::from_str(&text).expect("work.json is JSON")
    };
    let local = remembered(&worker);
    let first_lease = local["workItems"]["wi-1"]["leaseId"]
        .as_str()
        .expect("work start remembered its lease")
        .to_owned();
    assert_eq!(local["workItems"]["wi-1"]["ownershipEpoch"], 1, "{local}");
    assert!(
        started.contains(&format!("lease {first_lease} until")),
        "{started}"
    );

    // Owner Commands quote the current Execution Lease without being told (LSE-4).
    let renewed = ok(&worker, &url, &["work", "renew", "wi-1"]);
    assert!(renewed.contains("lease.renewed"), "{renewed}");
    assert_eq!(state_after(&renewed), "active");
    let progressed = ok(
        &worker,
        &url,
        &[
            "work",
            "progress",
            "wi-1",
            "--phase",
            "reading",
            "--milestone",
            "corpus fetched",
            "--next-checkpoint",
            "outline",
            "--completion-at",
            "2026-12-30T00:00:00Z",
            "--confidence",
            "0.6",
            "--percent",
            "30",
        ],
    );
    assert!(progressed.contains("work.progress"), "{progressed}");
    let shown = ok(&worker, &url, &["work", "show", "wi-1", "--json"]);
    assert!(shown.contains("corpus fetched"), "{shown}");
    // A capability token bound to the remembered lease, printed once; then rotated.
    let (issued, token, stderr) = weft(
        &worker,
        &url,
        &[
            "work",
            "token",
            "wi-1",
            "--scope",
            "blob:write",
            "--scope",
            "artifact:publish",
        ],
    );
    assert!(
        issued && token.trim().len() > 16,
        "{token}
{stderr}"
    );
    assert!(
        stderr.contains(&format!("of lease {first_lease}")),
        "{stderr}"
    );
    let issued = ok(
        &worker,
        &url,
        &[
            "work",
            "token",
            "wi-1",
            "--scope",
            "blob:write",
            "--ttl",
            "60",
            "--json",
        ],
    );
    let issued: serde_json::Value = serde_json::from_str(&issued).expect("--json answer");
    let token_id = issued["tokenId"].as_str().expect("tokenId");
    let rotated = ok(
        &worker,
        &url,
        &[
            "work",
            "token",
            "wi-1",
            "--scope",
            "blob:write",
            "--replaces",
            token_id,
        ],
    );
    assert_ne!(rotated.trim(), issued["token"].as_str().expect("token"));
    // `put` names the remembered lease and epoch (no --lease).
    let draft = root.path().join("draft.json");
    std::fs::write(&draft, br#"{"draft": 1}"#).expect("write draft");
    let draft_id = ok(
        &worker,
        &url,
        &[
            "put",
            draft.to_str().expect("utf-8"),
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
    let shown = ok(&worker, &url, &["show", &draft_id]);
    assert!(
        shown.contains(&format!("lease       {first_lease} (epoch 1)")),
        "{shown}"
    );
    // The bystander holds no lease of wi-1: its `put` stops before uploading anything.
    let (published, _, stderr) = weft(
        &bystander,
        &url,
        &[
            "put",
            draft.to_str().expect("utf-8"),
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
    );
    assert!(
        !published && stderr.contains("holds no Execution Lease"),
        "{stderr}"
    );
    let checkpointed = ok(
        &worker,
        &url,
        &["work", "checkpoint", "wi-1", "--note", "half way"],
    );
    assert_eq!(state_after(&checkpointed), "queued");
    // The checkpoint released the lease: work.json forgets it, and renewing it now is the
    // server's refusal, not a guess.
    assert_eq!(remembered(&worker)["workItems"], serde_json::json!({}));
    let (renewed, _, stderr) = weft(&worker, &url, &["work", "renew", "wi-1"]);
    assert!(!renewed, "{stderr}");
    ok(&worker, &url, &["work", "start", "wi-1"]);
    let blocked = ok(
        &worker,
        &url,
        &["work", "block", "wi-1", "--needs", "access to the corpus"],
    );
    assert_eq!(state_after(&blocked), "blocked");
    let unblocked = ok(&coordinator, &url, &["work", "unblock", "wi-1"]);
    assert_eq!(state_after(&unblocked), "queued");
    let started = ok(&worker, &url, &["work", "start", "wi-1", "--json"]);
    let started: serde_json::Value = serde_json::from_str(&started).expect("--json answer");
    assert_eq!(started["state"]["state"], "active", "{started}");
    let lease = started["state"]["lease"]["leaseId"]
        .as_str()
        .expect("an Execution Lease")
        .to_owned();
    assert_ne!(lease, first_lease);
    assert_eq!(remembered(&worker)["workItems"]["wi-1"]["leaseId"], *lease);

    // The result: an artifact under the lease, Evidence for ac-1, submit, accept.
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
    let evidence = ok(
        &worker,
        &url,
        &[
            "evidence",
            "add",
            "--mission",
            "m1",
            "--work-item",
            "wi-1",
            "--criterion",
            "ac-1",
            "--outcome",
            "pass",
            "--method",
            "automated_test",
            "--artifact",
            &artifact,
        ],
    )
    .trim()
    .to_owned();
    let submitted = ok(
        &worker,
        &url,
        &[
            "work",
            "submit",
            "wi-1",
            "--artifact",
            &artifact,
            "--evidence",
            &evidence,
        ],
    );
    assert_eq!(state_after(&submitted), "submitted");
    let verified = ok(&coordinator, &url, &["work", "accept-result", "wi-1"]);
    assert_eq!(state_after(&verified), "verified");

    let shown = ok(&worker, &url, &["work", "show", "wi-1"]);
    assert!(shown.contains("state       verified"), "{shown}");
    assert!(shown.contains("owner       worker-1"), "{shown}");
    // Issue #50, from the CLI: who accepted it, and under which lease the work was done.
    let story: Vec<&str> = shown.lines().skip_while(|line| *line != "story").collect();
    assert!(
        story
            .iter()
            .any(|line| line.contains("work.result_accepted by coord-1")),
        "{shown}"
    );
    assert!(
        story.iter().any(
            |line| line.contains("work.started by worker-1") && line.contains("leaseId lease-")
        ),
        "{shown}"
    );
    let listed = ok(&coordinator, &url, &["work", "ls", "--mission", "m1"]);
    let rows: Vec<Vec<&str>> = listed
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        ["WORK", "ITEM", "STATE", "ELIGIBLE", "DEPENDS", "ON"],
        "{listed}"
    );
    assert_eq!(rows[1][..2], ["wi-1", "verified"], "{listed}");
    let mission = ok(&coordinator, &url, &["mission", "show", "m1"]);
    assert!(mission.contains("state       active"), "{mission}");
    let approved = ok(&coordinator, &url, &["mission", "approve", "m1"]);
    assert!(approved.contains("mission m1: approved"), "{approved}");
}

/// Issue #50: `mission approve` with live WorkItems names them and sends nothing; with
/// `--force` it cancels each (one signed `work.cancel`, printed) and then approves.
#[test]
fn approving_a_mission_with_live_work_items_asks_for_force() {
    let root = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start(&root.path().join("data"), &[]);
    let url = server.url();
    let coordinator = root.path().join("coordinator");
    enrol(&server, &coordinator, "g1", "coord-1", "coordinator");
    ok(
        &coordinator,
        &url,
        &[
            "mission",
            "create",
            "m2",
            "--title",
            "Drafts",
            "--financial",
            "100",
            "--tokens",
            "1000",
        ],
    );
    let contract = root.path().join("contract.toml");
    std::fs::write(&contract, CONTRACT_TOML).expect("write contract");
    let contract = contract.to_str().expect("utf-8");
    for wi in ["wi-a", "wi-b"] {
        ok(
            &coordinator,
            &url,
            &[
                "work",
                "authorize",
                wi,
                "--mission",
                "m2",
                "--contract",
                contract,
            ],
        );
    }
    let (approved, _, stderr) = weft(&coordinator, &url, &["mission", "approve", "m2"]);
    assert!(!approved, "refused without --force");
    assert!(
        stderr.contains("wi-a (open)")
            && stderr.contains("wi-b (open)")
            && stderr.contains("--force"),
        "{stderr}"
    );
    let untouched = ok(&coordinator, &url, &["mission", "show", "m2"]);
    assert!(
        untouched.contains("state       active"),
        "nothing was sent: {untouched}"
    );
    assert!(untouched.contains("work item   wi-a open"), "{untouched}");

    let (forced, stdout, stderr) =
        weft(&coordinator, &url, &["mission", "approve", "m2", "--force"]);
    assert!(forced, "{stderr}");
    assert!(
        stderr.contains("cancelling wi-a (open)") && stderr.contains("cancelling wi-b (open)"),
        "{stderr}"
    );
    assert!(stdout.contains("mission m2: approved"), "{stdout}");
    let closed = ok(&coordinator, &url, &["mission", "show", "m2"]);
    assert!(closed.contains("work item   wi-a cancelled"), "{closed}");
    assert!(closed.contains("work item   wi-b cancelled"), "{closed}");
}
