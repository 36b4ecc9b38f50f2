//! Schemathesis (issue #16): every check of the OpenAPI conformance fuzzer, run against the
//! real binary's own `/v1/openapi.json` as a worker's session and as the operator, finds no
//! failure. The script and its configuration are `tests/python/schemathesis_run.sh` and
//! `tests/python/schemathesis.toml`; `scripts/test` installs the pinned schemathesis.

use std::process::Command;

use crate::support::{TestServer, admin_client, member_session};

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
    let server = TestServer::start(dir.path(), &[]);
    let admin = admin_client(&server);
    let (_key, worker_token) = member_session(
        &server,
        &admin,
        "g-fuzz",
        "fuzz-worker",
        weft_api::session::Role::Worker,
        16,
    )
    .await;
    let admin_token = std::fs::read_to_string(dir.path().join("admin.token")).expect("token");
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
    // Both callers were run over every operation but the stream (a run that tested nothing
    // would pass too): the JUnit report names one testcase per operation.
    for caller in ["worker", "admin"] {
        let junit = std::fs::read_dir(report.path().join(caller))
            .expect("report dir")
            .flatten()
            .find(|entry| entry.file_name().to_string_lossy().starts_with("junit"))
            .map(|entry| std::fs::read_to_string(entry.path()).expect("junit"))
            .unwrap_or_else(|| panic!("no JUnit report for {caller}:\n{stdout}"));
        let operations = junit.matches("<testcase ").count();
        assert!(operations >= 50, "{caller}: {operations} operations tested");
        assert!(
            junit.contains("POST /v1/groups/{group_id}/commands"),
            "{caller}"
        );
        assert!(
            !junit.contains("/events/stream"),
            "{caller}: the stream is excluded"
        );
        assert!(!junit.contains("<failure"), "{caller}: {junit}");
    }
}
