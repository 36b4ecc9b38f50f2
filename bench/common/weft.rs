//! What the benches that run the real server share: `weft serve` started on a free port
//! (stopped by its handle, never by name), the CLI, and a Worker enrolled through it with a
//! started WorkItem whose Execution Lease its manifests name, and the request bodies several
//! benches pre-sign (one-request publications, `work.progress` Commands). Included with
//! `#[path]` by `side_by_side.rs`, `garage.rs`, `scale_out.rs` and `write_cost.rs`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use weft_api::digest::Digests;
use weft_api::manifest::{Classification, Content, Execution, Manifest, Producer};
use weft_api::work::COMMAND_TYPE;
use weft_api::{Envelope, Id};

const WEFT: &str = env!("CARGO_BIN_EXE_weft");

/// The `weft` binary to run: `WEFT_BENCH_SERVER` when set (an A/B run puts an earlier build
/// there and runs the bench once with each), else the one this bench was built with.
fn weft_binary() -> String {
    std::env::var("WEFT_BENCH_SERVER").unwrap_or_else(|_| WEFT.to_owned())
}

/// The `weft` binary the bench runs as "this build" (see [`weft_binary`]).
pub(crate) fn this_binary() -> String {
    weft_binary()
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

/// A child process stopped by its handle when dropped (never by name).
pub(crate) struct Process(pub(crate) Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits up to 60 s: a first start creates and syncs its files, which took 4.5 s on a shared
/// disk whose fsyncs were slow.
pub(crate) fn wait_until_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `weft serve` (the release binary this bench was built with, or `WEFT_BENCH_SERVER`) on a free port with its data
/// under `dir/data`, plus `extra` flags and `env`.
pub(crate) fn start_weft_with(
    dir: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Process, String) {
    start_binary_with(&weft_binary(), dir, extra, env)
}

/// [`start_weft_with`] for the `weft` binary at `binary` (an A/B inside one run).
pub(crate) fn start_binary_with(
    binary: &str,
    dir: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Process, String) {
    let port = free_port();
    let child = Command::new(binary)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir.join("data"))
        .args(["--max-uploads-per-agent", "64", "--log-level", "warn"])
        .args(extra)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("weft starts");
    wait_until_listening(port);
    (Process(child), format!("http://127.0.0.1:{port}"))
}

/// `weft serve` with its defaults (see [`start_weft_with`]).
pub(crate) fn start_weft(dir: &Path) -> (Process, String) {
    start_weft_with(dir, &[], &[])
}

/// Runs the CLI with a weft home and the server's address; panics with its output on failure.
pub(crate) fn cli(home: &Path, url: &str, args: &[&str]) -> String {
    let output = Command::new(weft_binary())
        .args(args)
        .env("WEFT_HOME", home)
        .env("WEFT_SERVER", url)
        .output()
        .expect("weft runs");
    assert!(
        output.status.success(),
        "weft {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The Worker the bench publishes as: Agent `bench` in Group `g1` with WorkItem `w1` of
/// Mission `m1` started (its Execution Lease is what every manifest names, LSE-4).
pub(crate) struct Worker {
    /// Its Group, Agent id, Mission and WorkItem (`g1`, `bench`, `m1`, `w1` for the first).
    pub(crate) group: String,
    pub(crate) agent_id: String,
    pub(crate) mission: String,
    pub(crate) work_item: String,
    pub(crate) home: PathBuf,
    pub(crate) url: String,
    pub(crate) token: String,
    pub(crate) key: ed25519_dalek::SigningKey,
    pub(crate) lease_id: String,
    pub(crate) ownership_epoch: u64,
}

pub(crate) fn enrol(dir: &Path, url: &str) -> Worker {
    enrol_in(dir, url, 1)
}

/// Like [`enrol`], the `n`th of several: Group `g<n>`, Agent `bench<n>`, Mission `m<n>` and
/// WorkItem `w<n>` (the first is `bench`'s, as [`enrol`]'s), its CLI home `home<n>`.
pub(crate) fn enrol_in(dir: &Path, url: &str, n: usize) -> Worker {
    let (group, agent, mission, work) = match n {
        1 => (
            "g1".to_owned(),
            "bench".to_owned(),
            "m1".to_owned(),
            "w1".to_owned(),
        ),
        n => (
            format!("g{n}"),
            format!("bench{n}"),
            format!("m{n}"),
            format!("w{n}"),
        ),
    };
    let (group, agent, mission, work) = (
        group.as_str(),
        agent.as_str(),
        mission.as_str(),
        work.as_str(),
    );
    let home = match n {
        1 => dir.join("home"),
        n => dir.join(format!("home{n}")),
    };
    let token_file = dir.join("data/admin.token");
    let token_file = token_file.to_str().expect("utf-8 path");
    let admin = |args: &[&str]| {
        cli(
            &home,
            url,
            &[&["admin", "--admin-token-file", token_file][..], args].concat(),
        )
    };
    cli(&home, url, &["keygen"]);
    admin(&["group", "create", group]);
    admin(&["agent", "register", "--agent-id", agent]);
    admin(&[
        "member",
        "set",
        group,
        agent,
        "--role",
        "worker",
        "--role",
        "coordinator",
    ]);
    cli(
        &home,
        url,
        &["login", "--agent-id", agent, "--group", group],
    );
    cli(
        &home,
        url,
        &["mission", "create", mission, "--title", "bench"],
    );
    std::fs::write(contract_file(dir), CONTRACT).expect("contract");
    let (lease_id, ownership_epoch) = start_work_item(dir, &home, url, (mission, work), agent);
    let session: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.join("session.json")).expect("session"))
            .expect("session json");
    let key: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.join("agent.key")).expect("key"))
            .expect("key json");
    let secret: [u8; 32] = base64::Engine::decode(
        &weft_api::dsse::BASE64,
        key["secretKey"].as_str().expect("secretKey"),
    )
    .expect("base64")
    .try_into()
    .expect("32 bytes");
    Worker {
        group: group.to_owned(),
        agent_id: agent.to_owned(),
        mission: mission.to_owned(),
        work_item: work.to_owned(),
        url: url.to_owned(),
        token: session["token"].as_str().expect("token").to_owned(),
        key: ed25519_dalek::SigningKey::from_bytes(&secret),
        lease_id,
        ownership_epoch,
        home,
    }
}

fn contract_file(dir: &Path) -> PathBuf {
    dir.join("contract.json")
}

/// Authorizes WorkItem `work` in `mission` with [`CONTRACT`] (written in `dir`), offers it to
/// `agent`, who accepts and starts it, all through the CLI home `home`; answers its Execution
/// Lease's id and ownership epoch.
fn start_work_item(
    dir: &Path,
    home: &Path,
    url: &str,
    (mission, work): (&str, &str),
    agent: &str,
) -> (String, u64) {
    let contract = contract_file(dir);
    let contract = contract.to_str().expect("utf-8 path");
    cli(
        home,
        url,
        &[
            "work",
            "authorize",
            work,
            "--mission",
            mission,
            "--contract",
            contract,
        ],
    );
    cli(
        home,
        url,
        &[
            "work",
            "offer",
            work,
            "--candidate",
            agent,
            "--expires-in",
            "600",
            "--capability",
            "cap.bench:1",
            "--policy-rule",
            "bench",
        ],
    );
    cli(home, url, &["work", "accept", work]);
    let started: serde_json::Value =
        serde_json::from_str(&cli(home, url, &["work", "start", work, "--json"]))
            .expect("--json answer");
    let lease = &started["state"]["lease"];
    (
        lease["leaseId"].as_str().expect("lease").to_owned(),
        lease["ownershipEpoch"].as_u64().expect("epoch"),
    )
}

/// Starts `count` more WorkItems of `worker`'s Mission (`<work>-1`, …), each under its own
/// Execution Lease held by `worker`: its WorkItems and their leases, the first its own.
pub(crate) fn start_more(dir: &Path, worker: &Worker, count: usize) -> Vec<(String, String)> {
    let mut items = vec![(worker.work_item.clone(), worker.lease_id.clone())];
    for n in 1..=count {
        let work = format!("{}-{n}", worker.work_item);
        let (lease, _) = start_work_item(
            dir,
            &worker.home,
            &worker.url,
            (&worker.mission, &work),
            &worker.agent_id,
        );
        items.push((work, lease));
    }
    items
}

pub(crate) const CONTRACT: &str = r#"{
  "objective": "benchmark", "deliverables": [{"name": "out", "mediaType": "application/octet-stream", "schema": null}],
  "acceptanceCriteria": [{"id": "ac-1", "description": "bytes", "requiredEvidence": ["integrity_check"]}],
  "inputs": [], "dependsOn": [], "dependencyPolicy": "all_verified",
  "permissions": {"tools": [], "data": [], "operations": []},
  "requiredCapabilities": [{"id": "cap.bench", "version": "1"}],
  "deadline": "2099-12-31T00:00:00Z", "urgency": "normal", "businessImpact": "low",
  "budgets": {"financial": 10.0, "tokens": 1000, "toolCalls": 10, "computeSeconds": 3600,
              "wallClockSeconds": 86400, "sideEffects": 0},
  "retryPolicy": {"maxAttempts": 1, "backoffSeconds": 1, "deadline": null, "maxCost": 1.0},
  "risk": "low", "approvalRequired": false,
  "leases": {"offerSeconds": 600, "ownershipSeconds": 86400, "executionSeconds": 3600,
             "blockedSeconds": 3600, "graceSeconds": 60},
  "childFailurePolicy": "block"
}"#;

pub(crate) fn manifest(worker: &Worker, digests: &Digests) -> Envelope {
    let manifest = Manifest {
        content: Content {
            blake3: digests.blake3,
            sha256: digests.sha256,
            size: digests.size,
            media_type: "application/octet-stream".to_owned(),
            schema: None,
        },
        producer: Producer {
            agent_id: Id::parse("agentId", &worker.agent_id).expect("id"),
            agent_card_version: "1".to_owned(),
        },
        mission_id: Id::parse("missionId", &worker.mission).expect("id"),
        group_id: Id::parse("groupId", &worker.group).expect("id"),
        work_item_id: Id::parse("workItemId", &worker.work_item).expect("id"),
        execution: Execution {
            lease_id: Id::parse("leaseId", &worker.lease_id).expect("id"),
            ownership_epoch: worker.ownership_epoch,
        },
        sources: Vec::new(),
        tools: Vec::new(),
        created_at: chrono::Utc::now().fixed_offset(),
        classification: Classification::Internal,
        retrieval_uri: format!("{}/v1/artifacts/{}/content", worker.url, digests.blake3),
        annotations: Default::default(),
    };
    let payload = serde_json::to_vec(&manifest).expect("manifest json");
    Envelope::sign(&worker.key, weft_api::dsse::MANIFEST_TYPE, &payload)
}

/// The boundary of [`multipart`]'s bodies.
pub(crate) const BOUNDARY: &str = "weft-bench-7MA4YWxkTrZu0gW";

/// The `multipart/form-data` body of a one-request publication (`PUT /v1/artifacts/{digest}`):
/// manifest, then content.
pub(crate) fn multipart(envelope: &Envelope, bytes: &[u8]) -> bytes::Bytes {
    let mut body = Vec::with_capacity(bytes.len() + 2048);
    body.extend_from_slice(
        format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"manifest\"\r\nContent-Type: application/json\r\n\r\n").as_bytes(),
    );
    body.extend_from_slice(&serde_json::to_vec(envelope).expect("envelope json"));
    body.extend_from_slice(
        format!("\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"content\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    body.into()
}

/// The session and Membership epochs `weft login` wrote to the worker's `session.json`.
pub(crate) fn epochs(home: &Path) -> (u64, u64) {
    let session: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.join("session.json")).expect("session"))
            .expect("session json");
    (
        session["sessionEpoch"].as_u64().expect("sessionEpoch"),
        session["membershipEpoch"]
            .as_u64()
            .expect("membershipEpoch"),
    )
}

/// A Command of `worker` in its Group under its Execution Lease, signed, as the JSON body of
/// `POST /v1/groups/{group}/commands`.
pub(crate) fn command(
    worker: &Worker,
    epochs: (u64, u64),
    command_id: &str,
    kind: &str,
    payload: serde_json::Value,
) -> bytes::Bytes {
    command_under(worker, &worker.lease_id, epochs, command_id, kind, payload)
}

/// Like [`command`], under Execution Lease `lease_id` of `worker`'s.
pub(crate) fn command_under(
    worker: &Worker,
    lease_id: &str,
    epochs: (u64, u64),
    command_id: &str,
    kind: &str,
    payload: serde_json::Value,
) -> bytes::Bytes {
    let document = serde_json::json!({
        "commandId": command_id,
        "type": kind, "groupId": worker.group, "agentId": worker.agent_id,
        "issuedAt": chrono::Utc::now().to_rfc3339(), "sessionEpoch": epochs.0,
        "membershipEpoch": epochs.1, "leaseId": lease_id, "expectedRevision": null,
        "extensions": [], "payload": payload
    });
    let envelope = Envelope::sign(&worker.key, COMMAND_TYPE, document.to_string().as_bytes());
    serde_json::to_vec(&envelope).expect("json").into()
}

/// `count` signed `work.progress` Commands of `worker` on its started WorkItem.
pub(crate) fn progress_commands(worker: &Worker, count: usize) -> Vec<bytes::Bytes> {
    let items = [(worker.work_item.clone(), worker.lease_id.clone())];
    progress_commands_over(worker, &items, count)
}

/// `count` signed `work.progress` Commands of `worker`, the `n`th on WorkItem `n % len` of
/// `items` (WorkItem and lease, [`start_more`]).
pub(crate) fn progress_commands_over(
    worker: &Worker,
    items: &[(String, String)],
    count: usize,
) -> Vec<bytes::Bytes> {
    let epochs = epochs(&worker.home);
    (0..count)
        .map(|n| {
            let (work_item, lease_id) = &items[n % items.len()];
            let payload = serde_json::json!({
                "workItemId": work_item, "phase": format!("phase {n}"), "milestonesDone": [],
                "nextCheckpoint": null, "blockers": [],
                "estimate": {"completionAt": null, "confidence": 0.5}, "evidence": []
            });
            command_under(
                worker,
                lease_id,
                epochs,
                &format!("progress-{n}"),
                "work.progress",
                payload,
            )
        })
        .collect()
}

/// Sends one pre-signed request; panics with the server's answer unless it succeeded.
pub(crate) async fn send_ok(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    token: &str,
    content_type: &str,
    body: bytes::Bytes,
) {
    let answer = client
        .request(method, url)
        .bearer_auth(token)
        .header(reqwest::header::CONTENT_TYPE, content_type)
        .body(body)
        .send()
        .await
        .expect("an answer");
    let status = answer.status();
    let text = answer.bytes().await.expect("body");
    assert!(
        status.is_success(),
        "{url}: {status} {}",
        String::from_utf8_lossy(&text)
    );
}
