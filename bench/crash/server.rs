//! The crash campaign's server: the real `weft serve` binary on the campaign's data directory
//! (kept across kills), started on a free port, killed with SIGKILL through its own handle
//! (never by name), and `weft fsck` on the stopped directory. Also the one-time setup through
//! the API: a Group, an Agent with the worker and coordinator roles, its session, and a
//! started WorkItem whose Execution Lease every manifest and Evidence record names.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ed25519_dalek::SigningKey;
use weft_api::Id;
use weft_api::client::{Client, CommandSigner};
use weft_api::session::Role;
use weft_api::work::CommandType;

const WEFT: &str = env!("CARGO_BIN_EXE_weft");

/// One incarnation of `weft serve`.
pub(super) struct Server {
    child: Child,
    pub(super) url: String,
}

impl Server {
    /// Starts `weft serve` on `data` (log lines at `warn` appended to `log`) and waits for its
    /// `listening on` line, which it prints once the store is open and the socket bound.
    /// Answers the server and how long the start took.
    pub(super) async fn start(data: &Path, log: &Path) -> Result<(Self, Duration), String> {
        let (data, log) = (data.to_path_buf(), log.to_path_buf());
        let started = Instant::now();
        let spawned = tokio::task::spawn_blocking(move || spawn(&data, &log));
        let server = tokio::time::timeout(Duration::from_secs(120), spawned)
            .await
            .map_err(|_| "the server did not answer within 120 s".to_owned())?
            .map_err(|e| format!("start task: {e}"))??;
        Ok((server, started.elapsed()))
    }

    /// SIGKILL (`Child::kill` on Unix), as a crash would, then reaps the process.
    pub(super) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGINT, as Ctrl-C would (a clean shutdown), sent to this child's id; then waits.
    pub(super) fn interrupt(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Stops the process this campaign started, by its handle.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(data: &Path, log: &Path) -> Result<Server, String> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("server log {}: {e}", log.display()))?;
    let mut child = Command::new(WEFT)
        .args(["serve", "--listen", "127.0.0.1:0", "--log-level", "warn"])
        .arg("--data-dir")
        .arg(data)
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .spawn()
        .map_err(|e| format!("{WEFT} does not start: {e}"))?;
    let mut first = String::new();
    if let Some(stdout) = child.stdout.take() {
        let _ = BufReader::new(stdout).read_line(&mut first);
    }
    let url = first
        .trim()
        .strip_prefix("listening on ")
        .map(str::to_owned)
        .ok_or_else(|| format!("the server's first line was {first:?} (see the server log)"));
    match url {
        Ok(url) => Ok(Server { child, url }),
        Err(error) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(error)
        }
    }
}

/// `weft fsck --data-dir DIR` on a stopped directory: its exit code (0 clean, 2 crash
/// leftovers only, 1 damage) and its `PROBLEM` lines.
pub(super) async fn fsck(data: &Path) -> (i32, Vec<String>) {
    let data: PathBuf = data.to_path_buf();
    let ran = tokio::task::spawn_blocking(move || {
        Command::new(WEFT)
            .args(["fsck", "--data-dir"])
            .arg(&data)
            .env("RUST_BACKTRACE", "0")
            .output()
    })
    .await;
    match ran {
        Ok(Ok(output)) => {
            let text = String::from_utf8_lossy(&output.stdout);
            let problems = text
                .lines()
                .filter(|line| line.contains("PROBLEM"))
                .map(str::to_owned)
                .collect();
            (output.status.code().unwrap_or(-1), problems)
        }
        Ok(Err(e)) => (-1, vec![format!("fsck did not run: {e}")]),
        Err(e) => (-1, vec![format!("fsck task: {e}")]),
    }
}

/// Who the load acts as, and the lease it publishes under.
#[derive(Clone, Debug)]
pub(super) struct World {
    pub(super) key: SigningKey,
    pub(super) agent: Id,
    pub(super) group: Id,
    pub(super) mission: Id,
    pub(super) work_item: Id,
    pub(super) token: String,
    pub(super) session_epoch: u64,
    pub(super) membership_epoch: u64,
    pub(super) lease: Id,
    pub(super) ownership_epoch: u64,
}

impl World {
    pub(super) fn signer(&self) -> CommandSigner<'_> {
        CommandSigner {
            key: &self.key,
            agent_id: &self.agent,
            group_id: &self.group,
            session_epoch: self.session_epoch,
            membership_epoch: self.membership_epoch,
        }
    }
}

fn fail(step: &'static str) -> impl Fn(weft_api::client::Error) -> String {
    move |e| format!("setup, {step}: {e}")
}

fn id(text: &str) -> Id {
    // Proven invariant: every literal passed here is in the id alphabet.
    Id::parse("id", text).expect("a valid literal id")
}

/// Through the API of the running server: Group `g1`, Agent `crash` (worker and
/// coordinator), its session, Mission `m1` and WorkItem `w1` offered to, accepted and started
/// by `crash`. The lease and ownership last 30 days, so no expiry interferes with a campaign.
pub(super) async fn setup(server: &Server, data: &Path) -> Result<World, String> {
    let admin_token = std::fs::read_to_string(data.join("admin.token"))
        .map_err(|e| format!("admin.token: {e}"))?;
    let admin = Client::new(server.url.clone(), Some(admin_token.trim().to_owned()));
    let (group, agent) = (id("g1"), id("crash"));
    let key = SigningKey::from_bytes(&[7u8; 32]);
    admin.create_group(&group).await.map_err(fail("group"))?;
    admin
        .register_agent(&agent, &key.verifying_key(), "1")
        .await
        .map_err(fail("agent"))?;
    admin
        .set_membership(&group, &agent, &[Role::Worker, Role::Coordinator])
        .await
        .map_err(fail("membership"))?;
    let grant = Client::new(server.url.clone(), None)
        .open_session(&key, &agent, &group)
        .await
        .map_err(fail("session"))?;
    let mut world = World {
        key,
        agent,
        group,
        mission: id("m1"),
        work_item: id("w1"),
        token: grant.token,
        session_epoch: grant.session_epoch,
        membership_epoch: grant.membership_epoch,
        lease: id("none-yet"),
        ownership_epoch: 0,
    };
    let client = Client::new(server.url.clone(), Some(world.token.clone()));
    let signer = world.signer();
    // Room for a billion one-token charges: no campaign ends in `budget_exceeded`.
    let budget = serde_json::json!({"financial": 1000.0, "tokens": 1_000_000_000u64, "toolCalls": 1000,
        "computeSeconds": 1000000, "wallClockSeconds": 1000000, "sideEffects": 1000});
    let mission = serde_json::json!({"missionId": "m1", "title": "crash campaign",
        "priorityClass": "normal", "budget": budget});
    client
        .command(&signer, CommandType::MissionCreate, mission, None, None)
        .await
        .map_err(fail("mission.create"))?;
    let mut contract: serde_json::Value =
        serde_json::from_str(include_str!("../../examples/contract.json"))
            .map_err(|e| format!("examples/contract.json: {e}"))?;
    let month = 30 * 24 * 3600;
    contract["leases"]["ownershipSeconds"] = month.into();
    contract["leases"]["executionSeconds"] = month.into();
    contract["budgets"]["tokens"] = 1_000_000_000u64.into();
    let authorize =
        serde_json::json!({"workItemId": "w1", "missionId": "m1", "contract": contract});
    client
        .command(&signer, CommandType::WorkAuthorize, authorize, None, None)
        .await
        .map_err(fail("work.authorize"))?;
    let expires = (chrono::Utc::now() + chrono::Duration::seconds(600)).to_rfc3339();
    let offer = serde_json::json!({"workItemId": "w1", "offerId": "o-1", "candidates": ["crash"],
        "expiresAt": expires,
        "selectionBasis": {"capabilityMatches": [{"id": "cap.summarize", "version": "1"}],
            "authorizationEligible": true, "availabilityEstimate": "2099-11-30T12:00:00Z",
            "expectedCost": 1.0, "reliabilityEvidence": [], "policyRules": ["crash"]}});
    client
        .command(&signer, CommandType::WorkOffer, offer, None, None)
        .await
        .map_err(fail("work.offer"))?;
    let accept = serde_json::json!({"workItemId": "w1", "offerId": "o-1"});
    client
        .command(&signer, CommandType::WorkAcceptOffer, accept, None, None)
        .await
        .map_err(fail("work.accept_offer"))?;
    let started = client
        .command(
            &signer,
            CommandType::WorkStart,
            serde_json::json!({"workItemId": "w1"}),
            None,
            None,
        )
        .await
        .map_err(fail("work.start"))?;
    let lease = &started.state["lease"];
    world.lease = lease["leaseId"]
        .as_str()
        .and_then(|text| Id::parse("leaseId", text).ok())
        .ok_or_else(|| format!("work.start answered no lease: {}", started.state))?;
    world.ownership_epoch = lease["ownershipEpoch"]
        .as_u64()
        .ok_or_else(|| format!("work.start answered no epoch: {}", started.state))?;
    Ok(world)
}
