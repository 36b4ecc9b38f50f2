//! Reconciliation benchmark for issue #13 (not a test; `cargo bench --bench reconcile`). It
//! starts the real server in-process, listening on 127.0.0.1:0, with on-disk SQLite and blobs
//! in a temp dir, and talks to it over loopback with reqwest, as a Worker that was cut off:
//!  * it starts a WorkItem, then buffers a journal of `work.progress` Commands (default
//!    10,000) under the critical bounded-offline-execution binding, each with a usage delta;
//!  * it reconnects (a new session, which revokes its lease, LSE-9), then the client's
//!    journal (`weft_api::journal`) rebases, re-signs and sends it in order, 128 Commands per
//!    `POST /v1/groups/{g}/commands/batch`, stopping at the first refusal (OFL-8). Each answer is durable: the usage Event, the budget
//!    lineage and the Command commit together before it is sent (OFL-10/11).
//!
//! Printed: reconciled Commands per second (signing included, as the Worker re-signs on
//! reconnect), the same figure for ordinary `work.progress` under a live lease, one at a time, as a baseline
//! in the same run, and the process's peak resident memory (`VmHWM`; server and client share
//! the process, so it bounds the server's). Knob: `WEFT_BENCH_JOURNAL` (default 10000).

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use ed25519_dalek::SigningKey;
use serde_json::{Value, json};
use weft_api::client::Client;
use weft_api::journal::{Journal, OfflineLease, Rebase};
use weft_api::session::Role;
use weft_api::work::COMMAND_TYPE;
use weft_api::work::CommandType;
use weft_api::work::contract::Budgets;
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
    let mut config = server::config::Config::with_data_dir(dir.path().to_path_buf());
    // The bench measures throughput: the per-Agent Command rate (issue #40) would cap it.
    config.commands_per_minute = 0;
    let store = Store::open(config.storage_options()).await?;
    let state = server::AppState::new(store.clone(), ADMIN, &config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(server::serve(
        listener,
        server::app(state),
        Duration::from_secs(10),
        Duration::from_secs(30),
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

    // The journal, buffered while cut off through the client's own offline journal
    // (`weft_api::journal`: each entry fsynced), buffering times spread over the lease so far.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cut_off = Utc::now();
    let span = (cut_off - lease_start)
        .num_microseconds()
        .unwrap_or(1_000_000)
        .max(1);
    let offline = OfflineLease {
        agent_id: agent.clone(),
        group_id: group.clone(),
        work_item_id: Id::parse("w", wi)?,
        lease_id: Id::parse("l", &lease_id)?,
        session_epoch: worker.session_epoch,
        membership_epoch: worker.membership_epoch,
        ownership_epoch: lease["ownershipEpoch"].as_u64().unwrap_or(1),
        lease_expires_at: DateTime::parse_from_rfc3339(
            lease["expiresAt"].as_str().unwrap_or_default(),
        )?,
        grace_seconds: 3600,
    };
    let mut log = Journal::open(&dir.path().join("journal.jsonl"))?;
    let buffering = Instant::now();
    for n in 0..journal {
        let offset = span * n as i64 / journal as i64;
        let buffered_at = (lease_start + chrono::Duration::microseconds(offset)).fixed_offset();
        let usage: Budgets = serde_json::from_value(usage())?;
        log.buffer(
            &offline,
            lease_start.fixed_offset(),
            CommandType::WorkProgress,
            progress(wi, n),
            usage,
            buffered_at,
        )?;
    }
    let buffered_per_second = journal as f64 / buffering.elapsed().as_secs_f64();
    let rss_before = peak_rss();
    let worker = Worker::open(&base, &agent, &key, &group).await?;
    let client = Client::new(base.clone(), Some(worker.token.clone()));
    let began = Instant::now();
    let done = log
        .reconcile(
            &client,
            Rebase {
                key: &key,
                session_epoch: worker.session_epoch,
                membership_epoch: worker.membership_epoch,
                issued_at: Utc::now().fixed_offset(),
            },
        )
        .await?;
    if let Some((id, code, detail)) = &done.refused {
        eprintln!("the journal stopped at {id}: {code} {detail}");
    }
    let n_reconciled = done.accepted.len();
    let took = began.elapsed().as_secs_f64();
    let view: Value = reqwest::Client::new()
        .get(format!("{base}/v1/workitems/{wi}"))
        .bearer_auth(&worker.token)
        .send()
        .await?
        .json()
        .await?;
    println!(
        "server: in-process, listening on 127.0.0.1 (loopback, reqwest), on-disk SQLite + blobs in a temp dir; one Worker"
    );
    println!(
        "buffered offline (weft_api::journal, one fsync per entry): {journal} at {buffered_per_second:.0} Commands/s"
    );
    println!(
        "reconciled through Journal::reconcile (rebased, re-signed, 128 per batch request, in order; each durable with its usage Event and lineage charge): {n_reconciled} in {took:.1} s, {:.0} Commands/s",
        n_reconciled as f64 / took
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
