//! The Group Schemathesis fuzzes (issue #40: against an empty server 24 to 32 operations only
//! ever answered 404): a Mission, a WorkItem under a live Execution Lease, artifacts of
//! several media types (JSON under a registered schema, the schema itself, text, bytes),
//! Evidence, a Context Package and an upload in progress, all made through the CLI and HTTP as
//! a user would. Their ids become Schemathesis dictionaries for the parameters that take them.

use std::path::Path;

use crate::support::{TestServer, enrol, leased_work_item, weft};

pub(crate) const GROUP: &str = "g-fuzz";
pub(crate) const WORKER: &str = "fuzz-worker";
const MISSION: &str = "m-fuzz";
const WORK_ITEM: &str = "w-fuzz";
const PACKAGE: &str = "p-fuzz";
const SCHEMA_URI: &str = "urn:weft:fuzz:report";

/// The ids of what [`populate`] made.
pub(crate) struct Populated {
    /// The worker's session token (it holds the lease).
    pub(crate) worker_token: String,
    lease: String,
    evidence: String,
    upload: String,
    artifacts: Vec<String>,
}

fn ok(outcome: (bool, String, String)) -> String {
    assert!(outcome.0, "{outcome:?}");
    outcome.1
}

/// Makes the Group and everything in it; the worker's CLI home is `root/worker`.
pub(crate) async fn populate(server: &TestServer, root: &Path) -> Populated {
    let url = server.url();
    let home = root.join("worker");
    enrol(server, &home, GROUP, WORKER, "worker");
    let lease = leased_work_item(server, root, GROUP, MISSION, WORK_ITEM, &home, WORKER);
    let put = |name: &str, bytes: &[u8], media_type: &str, schema: Option<&str>| {
        let file = root.join(name);
        std::fs::write(&file, bytes).expect("write");
        let mut args = vec![
            "put",
            file.to_str().expect("utf-8"),
            "--group",
            GROUP,
            "--mission",
            MISSION,
            "--work-item",
            WORK_ITEM,
            "--lease",
            &lease,
            "--media-type",
            media_type,
            "-q",
        ];
        args.extend(schema.iter().flat_map(|schema| ["--schema", schema]));
        ok(weft(&home, &url, &args)).trim().to_owned()
    };
    let schema = put(
        "report.schema.json",
        br#"{"type": "object", "required": ["findings"], "properties": {"findings": {"type": "integer"}}}"#,
        "application/schema+json",
        None,
    );
    let token_file = server.data_dir.join("admin.token");
    let token_file = token_file.to_str().expect("utf-8");
    let admin = ["admin", "--admin-token-file", token_file];
    ok(weft(
        &home,
        &url,
        &[&admin[..], &["schema", SCHEMA_URI, &schema]].concat(),
    ));
    let report = put(
        "report.json",
        br#"{"findings": 3}"#,
        "application/json",
        Some(SCHEMA_URI),
    );
    let notes = put(
        "notes.txt",
        b"plain notes\n",
        "text/plain; charset=utf-8",
        None,
    );
    let bytes: Vec<u8> = (0..3000u32).map(|n| (n * 7 % 251) as u8).collect();
    let blob = put("blob.bin", &bytes, "application/octet-stream", None);
    ok(weft(
        &home,
        &url,
        &[
            "evidence",
            "add",
            "--mission",
            MISSION,
            "--work-item",
            WORK_ITEM,
            "--criterion",
            "ac-1",
            "--outcome",
            "pass",
            "--method",
            "automated_test",
            "--artifact",
            &report,
        ],
    ));
    let listed = ok(weft(
        &home,
        &url,
        &["evidence", "ls", "--work-item", WORK_ITEM, "--json"],
    ));
    let evidence: serde_json::Value =
        serde_json::from_str(listed.lines().next().expect("one record")).expect("json");
    let evidence = evidence["evidenceId"].as_str().expect("id").to_owned();
    ok(weft(
        &home,
        &url,
        &[
            "context",
            "publish",
            "--package",
            PACKAGE,
            "--mission",
            MISSION,
            "--from",
            "1",
            "--to",
            "3",
            "--artifact",
            &report,
            "--decision",
            "report in JSON",
        ],
    ));
    let session: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.join("session.json")).expect("session"))
            .expect("json");
    let worker_token = session["token"].as_str().expect("token").to_owned();
    let started: serde_json::Value = reqwest::Client::new()
        .post(format!("{url}/v1/uploads"))
        .bearer_auth(&worker_token)
        .header("content-type", "application/octet-stream")
        .body("the first bytes")
        .send()
        .await
        .expect("upload starts")
        .json()
        .await
        .expect("json");
    let upload = started["uploadId"].as_str().expect("uploadId").to_owned();
    Populated {
        worker_token,
        lease,
        evidence,
        upload,
        artifacts: vec![report, notes, blob, schema],
    }
}

impl Populated {
    /// Schemathesis configuration after `base`: a dictionary per kind of id, bound to the
    /// parameters that take it. A bound parameter still gets a generated value one time in ten,
    /// so the absent paths stay fuzzed too.
    pub(crate) fn config(&self, base: &str) -> String {
        let quoted = |values: &[&str]| {
            let values: Vec<String> = values.iter().map(|value| format!("{value:?}")).collect();
            format!("[{}]", values.join(", "))
        };
        let artifacts: Vec<&str> = self.artifacts.iter().map(String::as_str).collect();
        let dictionaries = [
            ("group", quoted(&[GROUP])),
            ("agent", quoted(&[WORKER])),
            ("mission", quoted(&[MISSION])),
            ("work_item", quoted(&[WORK_ITEM])),
            ("lease", quoted(&[&self.lease])),
            ("package", quoted(&[PACKAGE])),
            ("evidence", quoted(&[&self.evidence])),
            ("upload", quoted(&[&self.upload])),
            ("artifact", quoted(&artifacts)),
            ("version", "[1]".to_owned()),
        ];
        let bindings = [
            ("path.group_id", "group"),
            ("path.agent_id", "agent"),
            ("path.mission_id", "mission"),
            ("path.work_item_id", "work_item"),
            ("path.lease_id", "lease"),
            ("path.package_id", "package"),
            ("path.evidence_id", "evidence"),
            ("path.upload_id", "upload"),
            ("path.digest", "artifact"),
            ("path.version", "version"),
            ("query.group", "group"),
            ("query.missionId", "mission"),
            ("query.workItemId", "work_item"),
            ("query.producer", "agent"),
            ("query.artifact", "artifact"),
            ("query.from", "artifact"),
            ("query.to", "artifact"),
        ];
        let mut config =
            format!("{base}\n# The populated Group's ids (tests/e2e/schemathesis_data.rs).\n");
        for (name, values) in dictionaries {
            config.push_str(&format!("[dictionaries.{name}]\nvalues = {values}\n"));
        }
        config.push_str("[parameters]\n");
        for (parameter, dictionary) in bindings {
            config.push_str(&format!(
                "\"{parameter}\" = {{ dictionary = \"{dictionary}\", probability = 0.9 }}\n"
            ));
        }
        config
    }
}
