//! `TestServer`: a temp data dir and the real binary listening on 127.0.0.1:0.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub(crate) const WEFT: &str = env!("CARGO_BIN_EXE_weft");

pub(crate) struct TestServer {
    child: Child,
    pub(crate) addr: SocketAddr,
    pub(crate) data_dir: PathBuf,
}

impl TestServer {
    /// Starts `weft serve` on `data_dir` and waits for its `listening on` line.
    pub(crate) fn start(data_dir: &Path, extra: &[&str]) -> Self {
        Self::start_on(data_dir, "127.0.0.1:0", extra)
    }

    /// Starts on a given address (to restart a killed server where its clients expect it).
    pub(crate) fn start_on(data_dir: &Path, listen: &str, extra: &[&str]) -> Self {
        Self::spawn(data_dir, listen, extra, &[], Stdio::null())
    }

    /// Starts with more environment variables (test hooks such as the one that holds the
    /// reactions after commit).
    pub(crate) fn start_with_env(data_dir: &Path, env: &[(&str, &str)]) -> Self {
        Self::spawn(data_dir, "127.0.0.1:0", &[], env, Stdio::null())
    }

    /// Starts with the server's log (stderr) written to `log`.
    pub(crate) fn start_logged(data_dir: &Path, extra: &[&str], log: &Path) -> Self {
        let file = std::fs::File::create(log).expect("log file");
        Self::spawn(data_dir, "127.0.0.1:0", extra, &[], Stdio::from(file))
    }

    fn spawn(
        data_dir: &Path,
        listen: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        stderr: Stdio,
    ) -> Self {
        let mut child = Command::new(WEFT)
            .args(["serve", "--listen", listen, "--data-dir"])
            .arg(data_dir)
            .args(extra)
            .envs(env.iter().copied())
            .env("RUST_BACKTRACE", "0")
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("weft starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut first = String::new();
        BufReader::new(stdout)
            .read_line(&mut first)
            .expect("first line");
        let addr = first
            .trim()
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .parse()
            .expect("socket address");
        Self {
            child,
            addr,
            data_dir: data_dir.to_path_buf(),
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGINT, as Ctrl-C would (a clean shutdown), through `kill` with this child's id; then
    /// waits for it to exit.
    pub(crate) fn interrupt(mut self) {
        let sent = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "SIGINT sent");
        let _ = self.child.wait();
    }

    /// SIGKILL, as a crash would.
    pub(crate) fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        // Stop the process this test started, by its handle (never by name).
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the CLI with `WEFT_HOME` and `WEFT_SERVER` set; returns (success, stdout, stderr).
pub(crate) fn weft(home: &Path, server: &str, args: &[&str]) -> (bool, String, String) {
    weft_with(home, server, args, &[])
}

/// [`weft`] with more environment variables (test hooks).
pub(crate) fn weft_with(
    home: &Path,
    server: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (bool, String, String) {
    let output = Command::new(WEFT)
        .args(args)
        .envs(env.iter().copied())
        .env("WEFT_HOME", home)
        .env("WEFT_SERVER", server)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("weft runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `weft fsck --data-dir DIR`: (exit code, stdout).
pub(crate) fn fsck(data_dir: &Path) -> (i32, String) {
    let output = Command::new(WEFT)
        .args(["fsck", "--data-dir"])
        .arg(data_dir)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("weft runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// Files below `dir` (recursively), for "nothing was kept" checks.
pub(crate) fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Through the CLI: a key for `agent` in `home`, the Group (created if new), the Agent, its
/// Membership with `role`, and a session. Fails the test with the CLI's output on any step.
pub(crate) fn enrol(server: &TestServer, home: &Path, group: &str, agent: &str, role: &str) {
    let url = server.url();
    let token_file = server.data_dir.join("admin.token");
    let token_file = token_file.to_str().expect("utf-8");
    let admin = |rest: &[&'static str]| -> Vec<String> {
        ["admin", "--admin-token-file", token_file]
            .iter()
            .chain(rest)
            .map(|s| (*s).to_owned())
            .collect()
    };
    let steps: Vec<Vec<String>> = vec![
        vec!["keygen".into()],
        [admin(&["group", "create"]), vec![group.into()]].concat(),
        [
            admin(&["agent", "register", "--agent-id"]),
            vec![agent.into()],
        ]
        .concat(),
        [
            admin(&["member", "set"]),
            vec![group.into(), agent.into(), "--role".into(), role.into()],
        ]
        .concat(),
        ["login", "--agent-id", agent, "--group", group]
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
    ];
    for args in steps {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let outcome = weft(home, &url, &args);
        assert!(outcome.0, "{args:?}: {outcome:?}");
    }
}

/// A typed client holding the server's admin token.
pub(crate) fn admin_client(server: &TestServer) -> weft_api::client::Client {
    let token = std::fs::read_to_string(server.data_dir.join("admin.token")).expect("admin.token");
    weft_api::client::Client::new(server.url(), Some(token.trim().to_owned()))
}

/// Through the API: the Group (created if new), an Agent with a key from `seed`, its
/// Membership with `role`, and a session. Returns the key and the session token.
pub(crate) async fn member_session(
    server: &TestServer,
    admin: &weft_api::client::Client,
    group: &str,
    agent: &str,
    role: weft_api::session::Role,
    seed: u8,
) -> (ed25519_dalek::SigningKey, String) {
    let id = |text: &str| weft_api::Id::parse("id", text).expect("valid id");
    let key = ed25519_dalek::SigningKey::from_bytes(&[seed; 32]);
    admin.create_group(&id(group)).await.expect("group");
    admin
        .register_agent(&id(agent), &key.verifying_key(), "1")
        .await
        .expect("agent");
    admin
        .set_membership(&id(group), &id(agent), &[role])
        .await
        .expect("member");
    let grant = weft_api::client::Client::new(server.url(), None)
        .open_session(&key, &id(agent), &id(group))
        .await
        .expect("session");
    (key, grant.token)
}

/// A complete v1 work contract (every CON-1 item), as JSON.
pub(crate) const CONTRACT_JSON: &str = r#"{
  "objective": "summarise the corpus",
  "deliverables": [{"name": "report", "mediaType": "application/json", "schema": null}],
  "acceptanceCriteria": [{"id": "ac-1", "description": "the tests pass", "requiredEvidence": ["automated_test"]}],
  "inputs": [], "dependsOn": [], "dependencyPolicy": "all_verified",
  "permissions": {"tools": ["search"], "data": ["corpus"], "operations": ["read"]},
  "requiredCapabilities": [{"id": "cap.summarize", "version": "1"}],
  "deadline": "2026-12-31T00:00:00Z", "urgency": "normal", "businessImpact": "medium",
  "budgets": {"financial": 10.0, "tokens": 200000, "toolCalls": 500, "computeSeconds": 3600,
              "wallClockSeconds": 7200, "sideEffects": 5},
  "retryPolicy": {"maxAttempts": 3, "backoffSeconds": 30, "deadline": null, "maxCost": 2.0},
  "risk": "low", "approvalRequired": false,
  "leases": {"offerSeconds": 600, "ownershipSeconds": 3600, "executionSeconds": 300,
             "blockedSeconds": 3600, "graceSeconds": 120},
  "childFailurePolicy": "block"
}"#;

/// Through the CLI, as a coordinator of `group` (its own weft home under `root`): Mission
/// `mission` (created if new) and WorkItem `work_item` in it, which manifests and Evidence
/// then name (issue #11: a WorkItem id is a reference, not a label).
pub(crate) fn work_item(
    server: &TestServer,
    root: &Path,
    group: &str,
    mission: &str,
    work_item: &str,
) {
    let home = root.join(format!("coordinator-{group}"));
    let url = server.url();
    if !home.join("session.json").exists() {
        enrol(
            server,
            &home,
            group,
            &format!("coordinator-{group}"),
            "coordinator",
        );
    }
    let (shown, _, _) = weft(&home, &url, &["mission", "show", mission]);
    if !shown {
        let created = weft(
            &home,
            &url,
            &["mission", "create", mission, "--title", "e2e"],
        );
        assert!(created.0, "{created:?}");
    }
    let contract = root.join("contract.json");
    std::fs::write(&contract, CONTRACT_JSON).expect("write contract");
    let contract = contract.to_str().expect("utf-8 path");
    let authorized = weft(
        &home,
        &url,
        &[
            "work",
            "authorize",
            work_item,
            "--mission",
            mission,
            "--contract",
            contract,
        ],
    );
    assert!(authorized.0, "{authorized:?}");
}

/// [`work_item`], then the WorkItem's Execution Lease for the worker whose CLI home is
/// `worker_home` (issue #12: a manifest names its WorkItem's current lease, LSE-4): the
/// coordinator offers it to `worker`, which accepts and starts it. Answers the lease id.
pub(crate) fn leased_work_item(
    server: &TestServer,
    root: &Path,
    group: &str,
    mission: &str,
    work_item: &str,
    worker_home: &Path,
    worker: &str,
) -> String {
    self::work_item(server, root, group, mission, work_item);
    offer_to(server, root, group, work_item, worker);
    let url = server.url();
    let accepted = weft(worker_home, &url, &["work", "accept", work_item]);
    assert!(accepted.0, "{accepted:?}");
    let started = weft(worker_home, &url, &["work", "start", work_item, "--json"]);
    assert!(started.0, "{started:?}");
    let started: serde_json::Value = serde_json::from_str(&started.1).expect("--json answer");
    started["state"]["lease"]["leaseId"]
        .as_str()
        .expect("an Execution Lease")
        .to_owned()
}

/// Through the CLI, as the coordinator of `group` that [`work_item`] enrolled: offers
/// `work_item` to `candidate`.
pub(crate) fn offer_to(
    server: &TestServer,
    root: &Path,
    group: &str,
    work_item: &str,
    candidate: &str,
) {
    let home = root.join(format!("coordinator-{group}"));
    let offered = weft(
        &home,
        &server.url(),
        &[
            "work",
            "offer",
            work_item,
            "--candidate",
            candidate,
            "--expires-in",
            "600",
            "--capability",
            "cap.summarize:1",
            "--policy-rule",
            "e2e",
        ],
    );
    assert!(offered.0, "{offered:?}");
}

/// A throwaway PostgreSQL cluster and a one-node Garage for the several-servers tests (issue
/// #43), or `None` (the test skips) where either is not installed; where `WEFT_POSTGRES` or
/// `WEFT_GARAGE` says one is, its failing to start fails the test instead.
pub(crate) fn scale_out_engines() -> Option<(weft_testkit::Postgres, weft_testkit::Garage)> {
    let Some(cluster) = weft_testkit::Postgres::new() else {
        assert!(
            !weft_testkit::postgres_required(),
            "WEFT_POSTGRES is set but no PostgreSQL runs"
        );
        eprintln!("skipped: no PostgreSQL binaries");
        return None;
    };
    let Some(garage) = weft_testkit::Garage::start(1) else {
        assert!(
            !weft_testkit::garage_required(),
            "WEFT_GARAGE is set but no Garage runs"
        );
        eprintln!("skipped: no Garage binary");
        return None;
    };
    Some((cluster, garage))
}
