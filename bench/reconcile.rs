//! Reconciliation benchmark for issue #13 (not a test; `cargo bench --bench reconcile`). It
//! starts the real server in-process, listening on 127.0.0.1:0, with on-disk SQLite and blobs
//! in a temp dir, and talks to it over loopback with reqwest, as a Worker that was cut off:
//!  * it starts a WorkItem, then buffers a journal of `work.progress` Commands (default
//!    10,000) under the critical bounded-offline-execution binding, each with a usage delta;
//!  * it reconnects (a new session, which revokes its lease, LSE-9), then rebases, re-signs
//!    and sends the journal in order, one Command at a time, stopping at the first refusal,
//!    as the client journal does (OFL-8). Each answer is durable: the usage Event, the budget
//!    lineage and the Command commit together before it is sent (OFL-10/11).
//!
//! Printed: reconciled Commands per second (signing included, as the Worker re-signs on
//! reconnect), and per tenth of the journal (the WorkItem's history grows with it), the same figure for ordinary `work.progress` under a live lease as a baseline
//! in the same run, and the process's peak resident memory (`VmHWM`; server and client share
//! the process, so it bounds the server's). Knob: `WEFT_BENCH_JOURNAL` (default 10000).

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use ed25519_dalek::SigningKey;
use serde_json::{Value, json};
use weft_api::client::Client;
use weft_api::session::Role;
use weft_api::work::COMMAND_TYPE;
use weft_api::work::offline::OFFLINE_EXTENSION;
use weft_api::{Envelope, Id};
use weft_storage::Store;

const ADMIN: &str = "bench-admin";

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Peak resident memory of this process, from `/proc/self/status` (Linux only).
fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmHWM:"))
                .map(|line| line["VmHWM:".len()..].trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// A contract roomy enough for the whole journal: an hour's lease and grace.
fn contract() -> Value {
    json!({
        "objective": "summarise the corpus",
        "deliverables": [{"name": "report", "mediaType": "application/json", "schema": null}],
        "acceptanceCriteria": [{"id": "ac-1", "description": "the tests pass", "requiredEvidence": ["automated_test"]}],
        "inputs": [], "dependsOn": [], "dependencyPolicy": "all_verified",
        "permissions": {"tools": ["search"], "data": ["corpus"], "operations": ["read"]},
        "requiredCapabilities": [{"id": "cap.summarize", "version": "1"}],
        "deadline": "2099-12-31T00:00:00Z", "urgency": "normal", "businessImpact": "medium",
        "budgets": roomy(),
        "retryPolicy": {"maxAttempts": 3, "backoffSeconds": 0, "deadline": null, "maxCost": 2.0},
        "risk": "low", "approvalRequired": false,
        "leases": {"offerSeconds": 600, "ownershipSeconds": 36000, "executionSeconds": 3600,
                   "blockedSeconds": 3600, "graceSeconds": 3600},
        "childFailurePolicy": "block"
    })
}

fn roomy() -> Value {
    json!({"financial": 1.0e9, "tokens": 1_000_000_000u64, "toolCalls": 1_000_000_000u64,
           "computeSeconds": 1_000_000_000u64, "wallClockSeconds": 1_000_000_000u64,
           "sideEffects": 1_000_000_000u64})
}

fn usage() -> Value {
    json!({"financial": 0.001, "tokens": 120, "toolCalls": 1, "computeSeconds": 2,
           "wallClockSeconds": 3, "sideEffects": 0})
}

fn progress(work_item: &str, n: usize) -> Value {
    json!({"workItemId": work_item, "phase": format!("step {n}"), "milestonesDone": [],
           "nextCheckpoint": null, "blockers": [],
           "estimate": {"completionAt": null, "confidence": 0.5}, "evidence": []})
}

/// One session of the bench's Agent.
struct Worker {
    agent: Id,
    key: SigningKey,
    group: Id,
    session_epoch: u64,
    membership_epoch: u64,
    token: String,
    http: reqwest::Client,
    base: String,
}

impl Worker {
    async fn open(base: &str, agent: &Id, key: &SigningKey, group: &Id) -> anyhow::Result<Self> {
        let grant = Client::new(base.to_owned(), None)
            .open_session(key, agent, group)
            .await?;
        Ok(Self {
            agent: agent.clone(),
            key: key.clone(),
            group: group.clone(),
            session_epoch: grant.session_epoch,
            membership_epoch: grant.membership_epoch,
            token: grant.token,
            http: reqwest::Client::new(),
            base: base.to_owned(),
        })
    }

    /// Signs `kind` for this session (rebased onto it) and sends it; answers the status and
    /// body.
    async fn send(
        &self,
        command_id: &str,
        kind: &str,
        payload: &Value,
        lease: Option<&str>,
        binding: Option<&Value>,
    ) -> anyhow::Result<(reqwest::StatusCode, Value)> {
        let extensions = match binding {
            Some(value) => json!([{"urn": OFFLINE_EXTENSION, "critical": true, "value": value}]),
            None => json!([]),
        };
        let document = json!({
            "commandId": command_id, "type": kind, "groupId": self.group, "agentId": self.agent,
            "issuedAt": Utc::now().to_rfc3339(), "sessionEpoch": self.session_epoch,
            "membershipEpoch": self.membership_epoch, "leaseId": lease, "expectedRevision": null,
            "extensions": extensions, "payload": payload
        });
        let envelope = Envelope::sign(&self.key, COMMAND_TYPE, document.to_string().as_bytes());
        let response = self
            .http
            .post(format!("{}/v1/groups/{}/commands", self.base, self.group))
            .bearer_auth(&self.token)
            .json(&envelope)
            .send()
            .await?;
        let status = response.status();
        Ok((status, response.json().await?))
    }

    async fn ok(&self, id: &str, kind: &str, payload: Value) -> anyhow::Result<Value> {
        let (status, body) = self.send(id, kind, &payload, None, None).await?;
        anyhow::ensure!(
            status == reqwest::StatusCode::CREATED,
            "{kind}: {status} {body}"
        );
        Ok(body)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let journal: usize = env_or("WEFT_BENCH_JOURNAL", 10_000);
    let dir = tempfile::tempdir()?;
    let config = server::config::Config::with_data_dir(dir.path().to_path_buf());
    let store = Store::open(config.storage_options()).await?;
    let state = server::AppState::new(store.clone(), ADMIN, &config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(server::serve(
        listener,
        server::app(state),
        Duration::from_secs(10),
        futures::future::pending(),
    ));
    let admin = Client::new(base.clone(), Some(ADMIN.into()));
    let group = Id::parse("g", "one")?;
    let agent = Id::parse("a", "worker-1")?;
    let key = SigningKey::from_bytes(&[7; 32]);
    admin.create_group(&group).await?;
    admin
        .register_agent(&agent, &key.verifying_key(), "1")
        .await?;
    admin
        .set_membership(&group, &agent, &[Role::Coordinator, Role::Worker])
        .await?;
    let worker = Worker::open(&base, &agent, &key, &group).await?;
    worker
        .ok(
            "m",
            "mission.create",
            json!({"missionId": "m1", "title": "t", "priorityClass": "normal", "budget": roomy()}),
        )
        .await?;
    let wi = "wi-1";
    worker
        .ok(
            "auth",
            "work.authorize",
            json!({"workItemId": wi, "missionId": "m1", "contract": contract()}),
        )
        .await?;
    let expires = (Utc::now() + chrono::Duration::seconds(600)).to_rfc3339();
    worker
        .ok(
            "offer",
            "work.offer",
            json!({"workItemId": wi, "offerId": "o1", "candidates": [agent], "expiresAt": expires,
                   "selectionBasis": {"capabilityMatches": [], "authorizationEligible": true,
                       "availabilityEstimate": "2099-11-30T12:00:00Z", "expectedCost": 1.0,
                       "reliabilityEvidence": [], "policyRules": []}}),
        )
        .await?;
    worker
        .ok(
            "accept",
            "work.accept_offer",
            json!({"workItemId": wi, "offerId": "o1"}),
        )
        .await?;
    let started = worker
        .ok("start", "work.start", json!({"workItemId": wi}))
        .await?;
    let lease = started["state"]["lease"].clone();
    let lease_start: DateTime<Utc> = lease["startedAt"].as_str().unwrap_or_default().parse()?;

    // Baseline: ordinary progress under the live lease, sent in order.
    let n_baseline = (journal / 5).max(100);
    let lease_id = lease["leaseId"].as_str().unwrap_or_default().to_owned();
    let began = Instant::now();
    for n in 0..n_baseline {
        let mut payload = progress(wi, n);
        payload["usage"] = usage();
        let (status, body) = worker
            .send(
                &format!("live-{n}"),
                "work.progress",
                &payload,
                Some(&lease_id),
                None,
            )
            .await?;
        anyhow::ensure!(status == reqwest::StatusCode::CREATED, "{status} {body}");
    }
    let baseline = n_baseline as f64 / began.elapsed().as_secs_f64();

    // The journal, buffered while cut off: bindings spread over the last second.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cut_off = Utc::now();
    let span = (cut_off - lease_start)
        .num_microseconds()
        .unwrap_or(1_000_000)
        .max(1);
    let bindings: Vec<Value> = (0..journal)
        .map(|n| {
            let offset = span * n as i64 / journal as i64;
            let buffered_at = lease_start + chrono::Duration::microseconds(offset);
            json!({"agentId": agent, "groupId": group, "workItemId": wi,
                   "sessionEpoch": lease["sessionEpoch"], "ownershipEpoch": lease["ownershipEpoch"],
                   "leaseId": lease["leaseId"], "disconnectedAt": lease_start.to_rfc3339(),
                   "bufferedAt": buffered_at.to_rfc3339(), "graceSeconds": 3600,
                   "leaseExpiresAt": lease["expiresAt"], "usage": usage()})
        })
        .collect();
    let rss_before = peak_rss();
    let worker = Worker::open(&base, &agent, &key, &group).await?;
    let began = Instant::now();
    let mut n_reconciled = 0;
    // Per tenth of the journal: does the rate hold as the WorkItem's history grows?
    let tenth = (journal / 10).max(1);
    let mut tenth_began = Instant::now();
    let mut tenths = Vec::new();
    for (n, binding) in bindings.iter().enumerate() {
        if n > 0 && n % tenth == 0 {
            tenths.push(tenth as f64 / tenth_began.elapsed().as_secs_f64());
            tenth_began = Instant::now();
        }
        let (status, body) = worker
            .send(
                &format!("buffered-{n}"),
                "work.progress",
                &progress(wi, n),
                Some(&lease_id),
                Some(binding),
            )
            .await?;
        if status != reqwest::StatusCode::CREATED {
            eprintln!("the journal stopped at Command {n}: {status} {body}");
            break;
        }
        n_reconciled += 1;
    }
    let took = began.elapsed().as_secs_f64();
    let view: Value = reqwest::Client::new()
        .get(format!("{base}/v1/workitems/{wi}"))
        .bearer_auth(&worker.token)
        .send()
        .await?
        .json()
        .await?;
    println!(
        "server: in-process, listening on 127.0.0.1 (loopback, reqwest), on-disk SQLite + blobs in a temp dir; one Worker sends in order, one Command at a time"
    );
    println!(
        "reconciled buffered work.progress (signed, durable, usage Event + lineage + Command): {n_reconciled} in {took:.1} s, {:.0} Commands/s",
        n_reconciled as f64 / took
    );
    let tenths: Vec<String> = tenths.iter().map(|rate| format!("{rate:.0}")).collect();
    println!(
        "  Commands/s per tenth of the journal: {}",
        tenths.join(" ")
    );
    println!(
        "baseline: work.progress under a live lease, same client:                    {n_baseline} at {baseline:.0} Commands/s"
    );
    println!(
        "spent after: {}; peak RSS before reconnect {rss_before}, after {}",
        view["budget"]["spent"],
        peak_rss()
    );
    Ok(())
}
