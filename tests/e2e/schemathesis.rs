//! Schemathesis (issues #16, #40): every check of the OpenAPI conformance fuzzer, every phase
//! (the stateful one following the document's links), run against the real binary's own
//! `/v1/openapi.json` as a worker's session and as the operator, over a populated Group
//! (`schemathesis_data.rs`), finds no failure. The script and its configuration are
//! `tests/python/schemathesis_run.sh` and `tests/python/schemathesis.toml`; `scripts/test`
//! installs the pinned schemathesis.

use std::process::Command;

use crate::schemathesis_data::populate;
use crate::support::TestServer;

/// The Python `scripts/test` prepared, if it has schemathesis.
fn python_with_schemathesis() -> Option<String> {
    let python = std::env::var("WEFT_PYTHON").ok()?;
    let found = Command::new(&python)
        .args(["-c", "import schemathesis"])
        .status()
        .is_ok_and(|status| status.success());
    found.then_some(python)
}

#[tokio::test]
async fn schemathesis_finds_no_failure_for_a_worker_or_the_operator() {
    let Some(python) = python_with_schemathesis() else {
        eprintln!("SKIPPED: WEFT_PYTHON has no schemathesis; run scripts/test, which installs it");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start(&dir.path().join("data"), &[]);
    let populated = populate(&server, dir.path()).await;
    let admin_token = std::fs::read_to_string(dir.path().join("data/admin.token")).expect("token");
    let config = dir.path().join("schemathesis.toml");
    std::fs::write(
        &config,
        populated.config(include_str!("../python/schemathesis.toml")),
    )
    .expect("write config");
    let worker_token = populated.worker_token.clone();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/schemathesis_run.sh"
    );
    let report = tempfile::tempdir().expect("report dir");
    let output = tokio::task::spawn_blocking({
        let url = server.url();
        let report = report.path().to_path_buf();
        move || {
            Command::new("bash")
                .arg(script)
                .env("WEFT_URL", url)
                .env("WEFT_WORKER_TOKEN", worker_token)
                .env("WEFT_ADMIN_TOKEN", admin_token.trim())
                .env("WEFT_PYTHON", python)
                .env("WEFT_SCHEMATHESIS_REPORT", report)
                .env("WEFT_SCHEMATHESIS_CONFIG", config)
                .env("WEFT_SCHEMATHESIS_EXAMPLES", "4")
                .output()
                .expect("bash runs")
        }
    })
    .await
    .expect("the run ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "schemathesis found failures:\n{stdout}\n{stderr}"
    );
    // Both callers were run over every operation (a run that tested nothing would pass too):
    // the JUnit report names one testcase per operation, the stream's among them.
    let runs: Vec<&str> = stdout.split("== schemathesis as ").skip(1).collect();
    assert_eq!(runs.len(), 2, "{stdout}");
    for (caller, run) in ["worker", "admin"].into_iter().zip(runs) {
        let report_file = |prefix: &str| {
            std::fs::read_dir(report.path().join(caller))
                .expect("report dir")
                .flatten()
                .find(|entry| entry.file_name().to_string_lossy().starts_with(prefix))
                .map(|entry| std::fs::read_to_string(entry.path()).expect("report"))
                .unwrap_or_else(|| panic!("no {prefix} report for {caller}:\n{stdout}"))
        };
        let junit = report_file("junit");
        let operations = junit.matches("<testcase ").count();
        assert!(operations >= 60, "{caller}: {operations} operations tested");
        for operation in [
            "POST /v1/groups/{group_id}/commands",
            "GET /v1/groups/{group_id}/events/stream",
        ] {
            assert!(junit.contains(operation), "{caller}: {operation}");
        }
        assert!(!junit.contains("<failure"), "{caller}: {junit}");
        // The populated Group is reached (issue #40): operations answer real data, and the
        // stateful phase follows links.
        let answered = answered_with_success(&report_file("ndjson"));
        let links = followed_links(run);
        let only_404 = run
            .lines()
            .find_map(|line| line.trim().strip_prefix("⚠️ Missing test data: "))
            .unwrap_or("no operation repeatedly returned 404");
        eprintln!(
            "{caller}: {} operations answered 2xx, {links} links followed; {only_404}",
            answered.len()
        );
        assert!(answered.len() >= 30, "{caller}: only {answered:?}");
        for operation in [
            "GET /v1/artifacts/{digest}/content",
            "GET /v1/evidence/{evidence_id}",
            "GET /v1/workitems/{work_item_id}",
            "GET /v1/groups/{group_id}/events/stream",
        ] {
            assert!(answered.contains(operation), "{caller}: {operation}");
        }
        assert!(links.0 >= 1, "{caller}: {links}\n{run}");
    }
}

/// The operations (`METHOD /path`) that answered a 2xx at least once in the phases that test
/// one operation at a time, from the NDJSON report.
fn answered_with_success(ndjson: &str) -> std::collections::BTreeSet<String> {
    let mut answered = std::collections::BTreeSet::new();
    for line in ndjson.lines() {
        let event: serde_json::Value = serde_json::from_str(line).expect("ndjson");
        let scenario = &event["ScenarioFinished"];
        let recorder = &scenario["recorder"];
        if scenario["phase"] == "stateful" {
            continue;
        }
        let success = recorder["interactions"]
            .as_object()
            .into_iter()
            .flatten()
            .any(|(_, interaction)| {
                interaction["response"]["status_code"]
                    .as_u64()
                    .is_some_and(|status| (200..300).contains(&status))
            });
        if success && let Some(label) = recorder["label"].as_str() {
            answered.insert(label.to_owned());
        }
    }
    answered
}

/// `(covered, total)` from the stateful phase's "API Links:    N covered / M selected" line.
#[derive(Debug)]
struct Links(u64, u64);

impl std::fmt::Display for Links {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of {}", self.0, self.1)
    }
}

fn followed_links(run: &str) -> Links {
    let line = run
        .lines()
        .find_map(|line| line.trim().strip_prefix("API Links:"))
        .unwrap_or_else(|| panic!("no API Links line:\n{run}"));
    let numbers: Vec<u64> = line
        .split_whitespace()
        .filter_map(|word| word.parse().ok())
        .collect();
    Links(numbers[0], numbers[1])
}
