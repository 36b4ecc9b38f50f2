//! Command benchmark for issue #11 (not a test; `cargo bench --bench commands`); long
//! (just over 600 lines) because its setup, two measurements and baselines share one file. It starts
//! the real server in-process, listening on 127.0.0.1:0, with on-disk SQLite and blobs in a
//! temp dir, and talks to it over loopback with reqwest. Two measurements:
//!  * signed, durable Commands per second (each answer sent after its commit) from 64
//!    concurrent clients on ONE Group, then spread over 64 Groups; each client drives its own
//!    WorkItems (authorize → offer → accept → start → checkpoint → start → …), signing every
//!    Command with Ed25519 inside the timed loop. Baseline in the same run and layout: signed
//!    Evidence records (`POST /v1/evidence`, also signed, verified and durable) per second;
//!  * eligibility recomputation when a WorkItem with 1,000 dependents becomes `verified`: the
//!    Mission's graph read (`Store::mission_graph`, and `GET /v1/missions/{id}/workitems`
//!    over HTTP), p50/p99 before (baseline) and after the dependency is verified.
//!
//! Knobs: `WEFT_BENCH_SECONDS` (each throughput phase, default 5), `WEFT_BENCH_RUNS`
//! (eligibility reads per case, default 200), `WEFT_BENCH_DEPENDENTS` (default 1000).

use std::time::{Duration, Instant};

use ed25519_dalek::SigningKey;
use serde_json::{Value, json};
use weft_api::Manifest;
use weft_api::client::Client;
use weft_api::evidence::{
    Evidence, EvidenceResult, Method, MethodKind, Outcome, Subject, SubjectKind,
};
use weft_api::manifest::{Classification, Content, Execution, Producer, Tool, ToolKind};
use weft_api::session::Role;
use weft_api::work::COMMAND_TYPE;
use weft_api::{Envelope, Id};

const CLIENTS: usize = 64;
/// `start` + `checkpoint` pairs per WorkItem before a client moves to its next one, so a
/// WorkItem's history (returned in every answer) stays short, as in a real run.
const ROUNDS_PER_ITEM: usize = 8;
const ADMIN: &str = "bench-admin";

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A complete v1 contract (every CON-1 item), as `src/http/tests/work.rs` builds it.
fn contract(depends_on: &[String]) -> Value {
    json!({
        "objective": "summarise the corpus",
        "deliverables": [{"name": "report", "mediaType": "application/json", "schema": null}],
        "acceptanceCriteria": [{"id": "ac-1", "description": "the tests pass", "requiredEvidence": ["automated_test"]}],
        "inputs": [], "dependsOn": depends_on, "dependencyPolicy": "all_verified",
        "permissions": {"tools": ["search"], "data": ["corpus"], "operations": ["read"]},
        "requiredCapabilities": [{"id": "cap.summarize", "version": "1"}],
        "deadline": "2099-12-31T00:00:00Z", "urgency": "normal", "businessImpact": "medium",
        "budgets": {"financial": 10.0, "tokens": 200000, "toolCalls": 500, "computeSeconds": 3600,
                    "wallClockSeconds": 7200, "sideEffects": 5},
        "retryPolicy": {"maxAttempts": 1000, "backoffSeconds": 30, "deadline": null, "maxCost": 2.0},
        "risk": "low", "approvalRequired": false,
        "leases": {"offerSeconds": 600, "ownershipSeconds": 3600, "executionSeconds": 300,
                   "blockedSeconds": 3600, "graceSeconds": 120},
        "childFailurePolicy": "block"
    })
}

fn offer(work_item: &str, offer_id: &str, candidate: &Id) -> Value {
    let expires = (chrono::Utc::now() + chrono::Duration::seconds(600)).to_rfc3339();
    json!({"workItemId": work_item, "offerId": offer_id, "candidates": [candidate], "expiresAt": expires,
           "selectionBasis": {"capabilityMatches": [{"id": "cap.summarize", "version": "1"}],
               "authorizationEligible": true, "availabilityEstimate": "2099-11-30T12:00:00Z",
               "expectedCost": 1.2, "reliabilityEvidence": [], "policyRules": ["least-loaded"]}})
}

/// One Agent's session in one Group: what a Command needs besides its payload.
struct Actor {
    agent: Id,
    key: SigningKey,
    group: Id,
    session_epoch: u64,
    membership_epoch: u64,
    token: String,
    http: reqwest::Client,
    base: String,
    /// The Mission its WorkItems belong to.
    mission: String,
    /// Makes every `commandId` unique.
    sent: u64,
}

impl Actor {
    /// Registers nothing: `agent` (already registered with `key`) opens a session in `group`.
    async fn open(
        base: &str,
        agent: &Id,
        key: &SigningKey,
        group: &Id,
        mission: &str,
    ) -> anyhow::Result<Self> {
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
            mission: mission.to_owned(),
            sent: 0,
        })
    }

    fn client(&self) -> Client {
        Client::new(self.base.clone(), Some(self.token.clone()))
    }

    /// Builds, signs and sends one Command; answers the 201 body.
    async fn command(
        &mut self,
        kind: &str,
        payload: Value,
        lease: Option<&str>,
    ) -> anyhow::Result<Value> {
        self.sent += 1;
        let document = json!({
            "commandId": format!("cmd-{}-{}-{}", self.agent, self.group, self.sent),
            "type": kind, "groupId": self.group, "agentId": self.agent,
            "issuedAt": chrono::Utc::now().to_rfc3339(), "sessionEpoch": self.session_epoch,
            "membershipEpoch": self.membership_epoch, "leaseId": lease, "expectedRevision": null,
            "extensions": [], "payload": payload
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
        let body: Value = response.json().await?;
        anyhow::ensure!(
            status == reqwest::StatusCode::CREATED,
            "{kind}: {status} {body}"
        );
        Ok(body)
    }

    /// The Commands of one client until `deadline`: its own WorkItems, each authorized,
    /// offered to itself, accepted, then started and checkpointed `ROUNDS_PER_ITEM` times.
    /// Answers how many Commands were accepted.
    async fn drive(&mut self, tag: &str, deadline: Instant) -> anyhow::Result<u64> {
        let mission = self.mission.clone();
        let mut count = 0u64;
        let mut item = 0usize;
        while Instant::now() < deadline {
            let wi = format!("wi-{tag}-{}-{item}", self.agent);
            item += 1;
            self.command(
                "work.authorize",
                json!({"workItemId": wi, "missionId": mission, "contract": contract(&[])}),
                None,
            )
            .await?;
            self.command(
                "work.offer",
                offer(&wi, &format!("o-{wi}"), &self.agent.clone()),
                None,
            )
            .await?;
            self.command(
                "work.accept_offer",
                json!({"workItemId": wi, "offerId": format!("o-{wi}")}),
                None,
            )
            .await?;
            count += 3;
            for round in 0..ROUNDS_PER_ITEM {
                if Instant::now() >= deadline {
                    break;
                }
                let started = self
                    .command("work.start", json!({"workItemId": wi}), None)
                    .await?;
                let lease = started["state"]["lease"]["leaseId"]
                    .as_str()
                    .ok_or_else(|| anyhow::anyhow!("no Execution Lease in {started}"))?
                    .to_owned();
                self.command(
                    "work.checkpoint",
                    json!({"workItemId": wi, "checkpoint": {"note": format!("round {round}")}}),
                    Some(&lease),
                )
                .await?;
                count += 2;
            }
        }
        Ok(count)
    }
}

fn evidence(actor: &Actor, mission: &str, work_item: &str, n: u64) -> anyhow::Result<Evidence> {
    Ok(Evidence {
        subject: Subject {
            kind: SubjectKind::WorkItem,
            id: work_item.to_owned(),
        },
        mission_id: Id::parse("m", mission)?,
        group_id: actor.group.clone(),
        work_item_id: Id::parse("w", work_item)?,
        criterion: "ac-1".into(),
        method: Method {
            kind: MethodKind::AutomatedTest,
            name: "suite".into(),
            version: "1".into(),
        },
        result: EvidenceResult {
            outcome: Outcome::Pass,
            summary: format!("run {n}"),
            metrics: Default::default(),
        },
        producer: Producer {
            agent_id: actor.agent.clone(),
            agent_card_version: "1".into(),
        },
        timestamp: chrono::Utc::now().fixed_offset(),
        artifacts: vec![],
        supersedes: None,
        execution: None,
    })
}

/// The WorkItem an actor's baseline Evidence is about (ids are unique in the store).
fn evidence_work_item(actor: &Actor) -> String {
    format!("wi-ev-{}-{}", actor.group, actor.agent)
}

/// Baseline: the same clients record signed Evidence until `deadline`.
async fn record_evidence(actor: &Actor, deadline: Instant) -> anyhow::Result<u64> {
    let client = actor.client();
    let mut count = 0u64;
    while Instant::now() < deadline {
        let record = evidence(actor, &actor.mission, &evidence_work_item(actor), count)?;
        client.record_evidence(&actor.key, &record).await?;
        count += 1;
    }
    Ok(count)
}

/// Runs one timed phase over every actor; answers (operations, seconds).
async fn phase(
    actors: Vec<Actor>,
    seconds: u64,
    tag: &'static str,
    commands: bool,
) -> anyhow::Result<(Vec<Actor>, u64, f64)> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let tasks: Vec<_> = actors
        .into_iter()
        .map(|mut actor| {
            tokio::spawn(async move {
                let done = if commands {
                    actor.drive(tag, deadline).await?
                } else {
                    record_evidence(&actor, deadline).await?
                };
                Ok::<_, anyhow::Error>((actor, done))
            })
        })
        .collect();
    let mut actors = Vec::with_capacity(CLIENTS);
    let mut total = 0u64;
    for task in tasks {
        let (actor, done) = task.await??;
        actors.push(actor);
        total += done;
    }
    Ok((actors, total, started.elapsed().as_secs_f64()))
}

/// Latencies of the three reads that recompute every node's eligibility, sorted.
struct Reads {
    /// `Store::mission`: the Mission and its nodes (state + eligibility), no edges.
    nodes: Vec<Duration>,
    /// `Store::mission_graph`: nodes and `dependsOn` edges.
    graph: Vec<Duration>,
    /// `GET /v1/missions/{id}/workitems` over loopback.
    over_http: Vec<Duration>,
    eligible: usize,
}

async fn time_graph_reads(
    store: &weft_storage::Store,
    http: &reqwest::Client,
    url: &str,
    mission: &Id,
    runs: usize,
) -> anyhow::Result<Reads> {
    let mut nodes = Vec::with_capacity(runs);
    let mut storage = Vec::with_capacity(runs);
    let mut over_http = Vec::with_capacity(runs);
    let mut eligible = 0;
    for _ in 0..runs {
        let started = Instant::now();
        let view = store
            .work()
            .mission(mission.clone(), &weft_storage::Reader::Admin)
            .await?;
        nodes.push(started.elapsed());
        anyhow::ensure!(view.work_items.len() > 1, "the Mission has its WorkItems");
        let started = Instant::now();
        let graph = store
            .work()
            .mission_graph(mission.clone(), &weft_storage::Reader::Admin)
            .await?;
        storage.push(started.elapsed());
        eligible = graph.nodes.iter().filter(|n| n.eligible).count();
        let started = Instant::now();
        let response = http.get(url).bearer_auth(ADMIN).send().await?;
        anyhow::ensure!(
            response.status().is_success(),
            "{url}: {}",
            response.status()
        );
        let _body = response.bytes().await?;
        over_http.push(started.elapsed());
    }
    nodes.sort();
    storage.sort();
    over_http.sort();
    Ok(Reads {
        nodes,
        graph: storage,
        over_http,
        eligible,
    })
}

/// Drives `x` (no dependencies) to `verified`: offer, accept, start, an artifact and
/// passing Evidence, submit (all by `actor`), then accept_result by `lead`, a coordinator that
/// did not do the work (separation of duties). Answers how long the last Command took.
async fn verify(
    actor: &mut Actor,
    lead: &mut Actor,
    mission: &str,
    x: &str,
    dir: &std::path::Path,
) -> anyhow::Result<Duration> {
    actor
        .command("work.offer", offer(x, "o-x", &actor.agent.clone()), None)
        .await?;
    actor
        .command(
            "work.accept_offer",
            json!({"workItemId": x, "offerId": "o-x"}),
            None,
        )
        .await?;
    let started = actor
        .command("work.start", json!({"workItemId": x}), None)
        .await?;
    let lease = started["state"]["lease"]["leaseId"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("no lease"))?
        .to_owned();
    let file = dir.join("result.json");
    std::fs::write(&file, br#"{"result": "of x"}"#)?;
    let client = actor.client();
    let receipt = client.upload_file(&file, |_| {}).await?;
    let manifest = Manifest {
        content: Content {
            blake3: receipt.blake3,
            sha256: receipt.sha256,
            size: receipt.size,
            media_type: "application/json".into(),
            schema: None,
        },
        producer: Producer {
            agent_id: actor.agent.clone(),
            agent_card_version: "1".into(),
        },
        mission_id: Id::parse("m", mission)?,
        group_id: actor.group.clone(),
        work_item_id: Id::parse("w", x)?,
        execution: Execution {
            lease_id: Id::parse("l", &lease)?,
            ownership_epoch: 1,
        },
        sources: vec![],
        tools: vec![Tool {
            kind: ToolKind::Model,
            id: "m".into(),
            version: "1".into(),
        }],
        created_at: chrono::Utc::now().fixed_offset(),
        classification: Classification::Internal,
        retrieval_uri: format!(
            "https://weft.example/v1/artifacts/{}/content",
            receipt.blake3
        ),
        annotations: Default::default(),
    };
    let published = client.publish(&actor.key, &manifest).await?;
    let mut record = evidence(actor, mission, x, 0)?;
    record.artifacts = vec![published.artifact];
    // The owner's Evidence names its current Execution Lease (DESIGN §5.1).
    record.execution = Some(manifest.execution.clone());
    let recorded = client.record_evidence(&actor.key, &record).await?;
    actor
        .command(
            "work.submit",
            json!({"workItemId": x, "artifacts": [published.artifact], "evidence": [recorded.evidence_id]}),
            Some(&lease),
        )
        .await?;
    let started = Instant::now();
    let accepted = lead
        .command("work.accept_result", json!({"workItemId": x}), None)
        .await?;
    let took = started.elapsed();
    anyhow::ensure!(accepted["state"]["state"] == "verified", "{accepted}");
    Ok(took)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let seconds: u64 = env_or("WEFT_BENCH_SECONDS", 5);
    let runs: usize = env_or("WEFT_BENCH_RUNS", 200);
    let dependents: usize = env_or("WEFT_BENCH_DEPENDENTS", 1000);
    let dir = tempfile::tempdir()?;
    let mut config = server::config::Config::with_data_dir(dir.path().to_path_buf());
    // The bench measures throughput: the per-Agent Command rate (issue #40) would cap it.
    config.commands_per_minute = 0;
    let store = weft_storage::Store::open(config.storage_options()).await?;
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
    let roles = [Role::Coordinator, Role::Worker, Role::Reviewer];
    let budget = json!({"financial": 100.0, "tokens": 1, "toolCalls": 1, "computeSeconds": 1,
                        "wallClockSeconds": 1, "sideEffects": 1});

    eprintln!("setting up {CLIENTS} agents, 1 + {CLIENTS} Groups …");
    let one = Id::parse("g", "one")?;
    admin.create_group(&one).await?;
    let mut single = Vec::with_capacity(CLIENTS);
    let mut spread = Vec::with_capacity(CLIENTS);
    for i in 0..CLIENTS {
        let agent = Id::parse("a", &format!("agent-{i}"))?;
        let key = SigningKey::from_bytes(&[i as u8 + 1; 32]);
        admin
            .register_agent(&agent, &key.verifying_key(), "1")
            .await?;
        let own = Id::parse("g", &format!("g-{i}"))?;
        admin.create_group(&own).await?;
        for group in [&one, &own] {
            admin.set_membership(group, &agent, &roles).await?;
        }
        single.push(Actor::open(&base, &agent, &key, &one, "m-bench").await?);
        let mission = format!("m-bench-{i}");
        let mut actor = Actor::open(&base, &agent, &key, &own, &mission).await?;
        actor
            .command(
                "mission.create",
                json!({"missionId": mission, "title": "bench",
                "priorityClass": "normal", "budget": budget}),
                None,
            )
            .await?;
        spread.push(actor);
    }
    single[0]
        .command(
            "mission.create",
            json!({"missionId": "m-bench", "title": "bench",
            "priorityClass": "normal", "budget": budget}),
            None,
        )
        .await?;
    // The baseline's Evidence names a WorkItem of the actor's Mission that exists (issue
    // #11); nobody owns it, so the Evidence names no lease.
    for actor in single.iter_mut().chain(spread.iter_mut()) {
        let (wi, mission) = (evidence_work_item(actor), actor.mission.clone());
        actor
            .command(
                "work.authorize",
                json!({"workItemId": wi, "missionId": mission, "contract": contract(&[])}),
                None,
            )
            .await?;
    }
    let (single, one_group_commands, one_group_secs) = phase(single, seconds, "one", true).await?;
    let (_single, one_group_evidence, one_group_evidence_secs) =
        phase(single, seconds, "ev", false).await?;
    let (spread, spread_commands, spread_secs) = phase(spread, seconds, "spread", true).await?;
    let (_spread, spread_evidence, spread_evidence_secs) =
        phase(spread, seconds, "ev", false).await?;

    eprintln!("building a Mission of 1 + {dependents} WorkItems …");
    let elig_group = Id::parse("g", "elig")?;
    admin.create_group(&elig_group).await?;
    let coordinator_id = Id::parse("a", "elig-coordinator")?;
    let key = SigningKey::from_bytes(&[200u8; 32]);
    admin
        .register_agent(&coordinator_id, &key.verifying_key(), "1")
        .await?;
    admin
        .set_membership(&elig_group, &coordinator_id, &roles)
        .await?;
    let mut actor = Actor::open(&base, &coordinator_id, &key, &elig_group, "m-elig").await?;
    // Accepts x's result: a coordinator that did not do the work.
    let lead_id = Id::parse("a", "elig-lead")?;
    let lead_key = SigningKey::from_bytes(&[201u8; 32]);
    admin
        .register_agent(&lead_id, &lead_key.verifying_key(), "1")
        .await?;
    admin
        .set_membership(&elig_group, &lead_id, &[Role::Coordinator])
        .await?;
    let mut lead = Actor::open(&base, &lead_id, &lead_key, &elig_group, "m-elig").await?;
    actor
        .command(
            "mission.create",
            json!({"missionId": "m-elig", "title": "fan-out",
            "priorityClass": "normal", "budget": budget}),
            None,
        )
        .await?;
    actor
        .command(
            "work.authorize",
            json!({"workItemId": "x", "missionId": "m-elig", "contract": contract(&[])}),
            None,
        )
        .await?;
    let on_x = vec!["x".to_owned()];
    for n in 0..dependents {
        actor
            .command(
                "work.authorize",
                json!({"workItemId": format!("dep-{n}"), "missionId": "m-elig",
                "contract": contract(&on_x)}),
                None,
            )
            .await?;
    }
    let mission = Id::parse("m", "m-elig")?;
    let http = reqwest::Client::new();
    let url = format!("{base}/v1/missions/m-elig/workitems");
    let before = time_graph_reads(&store, &http, &url, &mission, runs).await?;
    let accept_took = verify(&mut actor, &mut lead, "m-elig", "x", dir.path()).await?;
    let after = time_graph_reads(&store, &http, &url, &mission, runs).await?;
    anyhow::ensure!(
        before.eligible == 1 && after.eligible == dependents + 1,
        "eligible before {}, after {}",
        before.eligible,
        after.eligible
    );

    println!(
        "server: in-process, listening on 127.0.0.1 (loopback, reqwest), on-disk SQLite + blobs in a temp dir; clients share the machine's cores"
    );
    println!(
        "signed durable Commands, 1 Group     {:>8.0} commands/s  ({one_group_commands} in {one_group_secs:.1} s, {CLIENTS} concurrent clients)",
        one_group_commands as f64 / one_group_secs
    );
    println!(
        "signed durable Commands, {CLIENTS} Groups  {:>8.0} commands/s  ({spread_commands} in {spread_secs:.1} s)",
        spread_commands as f64 / spread_secs
    );
    println!(
        "baseline: signed Evidence, 1 Group   {:>8.0} records/s   ({one_group_evidence} in {one_group_evidence_secs:.1} s)",
        one_group_evidence as f64 / one_group_evidence_secs
    );
    println!(
        "baseline: signed Evidence, {CLIENTS} Groups{:>8.0} records/s   ({spread_evidence} in {spread_evidence_secs:.1} s)",
        spread_evidence as f64 / spread_evidence_secs
    );
    println!(
        "Commands / Evidence                  {:.2} (1 Group)  {:.2} ({CLIENTS} Groups)",
        (one_group_commands as f64 / one_group_secs)
            / (one_group_evidence as f64 / one_group_evidence_secs),
        (spread_commands as f64 / spread_secs) / (spread_evidence as f64 / spread_evidence_secs)
    );
    println!(
        "command mix: authorize, offer, accept_offer, then {ROUNDS_PER_ITEM} x (start, checkpoint) per WorkItem, each client its own WorkItems"
    );
    println!(
        "work.accept_result making x verified ({dependents} dependents)  {:.2} ms",
        ms(accept_took)
    );
    println!(
        "eligibility of 1 + {dependents} WorkItems, p50 / p99 over {runs} sequential runs each:"
    );
    for (label, reads) in [
        ("before x is verified (baseline)", &before),
        ("after x is verified", &after),
    ] {
        println!("  {label}:");
        for (what, sorted) in [
            ("Store::mission (nodes only)", &reads.nodes),
            ("Store::mission_graph (nodes + edges)", &reads.graph),
            ("GET /v1/missions/{id}/workitems", &reads.over_http),
        ] {
            println!(
                "    {what:<40} p50 {:>6.2} ms  p99 {:>6.2} ms",
                ms(percentile(sorted, 0.5)),
                ms(percentile(sorted, 0.99)),
            );
        }
    }
    Ok(())
}
