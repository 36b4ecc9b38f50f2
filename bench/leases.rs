//! Lease benchmark for issue #12 (not a test; `cargo bench --bench leases`; long, because one
//! server set-up serves all three #12 measurements). It starts the
//! real server in-process, listening on 127.0.0.1:0, with on-disk SQLite and blobs in a temp
//! dir, the same 200 ms expiry timer `weft serve` runs (`Store::expire_due` on the real
//! clock), and talks to it over loopback with reqwest. Two measurements:
//!  * `lease.renew` per second (signed, durable: each answer after its commit) from 64
//!    concurrent clients over 1,000 active Execution Leases in one Group, each client renewing
//!    its own ~16 leases round robin. Baselines in the same run, same clients, same Group: the
//!    cheapest durable write (an ACK, `POST /v1/groups/{id}/cursors`, moving the client's
//!    cursor by one each time) and the cheapest signed durable write (signed Evidence);
//!  * the time from an Execution Lease's `expiresAt` to its `lease.expired` Event, with
//!    100,000 live leases: probe WorkItems whose contract says `executionSeconds: 1` are
//!    started over HTTP 20 ms apart and never renewed; a client subscribed to the Group's SSE
//!    stream notes when each `lease.expired` arrives. Printed: the Event's `appendedAt` minus
//!    the lease's `expiresAt` (the server's lag) and arrival minus `expiresAt` (what a
//!    subscriber sees), p50/p99/max; first with the 1,000 leases of the renewal phase
//!    (baseline), then again after the Group holds 100,000 live leases.
//!
//! The 1,000 leases are set up over HTTP; the other ~99,000 are set up through
//! `Store::execute_command` in-process (the same signed Commands, without the HTTP hop) to
//! keep the setup to minutes; the measured expiries go through the real server either way.
//!
//!  * the cost the lease check adds to a 4 KiB publication (LSE-4/5): 4 KiB publications per
//!    second (blob upload + a manifest signed under the publisher's current Execution Lease,
//!    64 clients), and the mean time of the check itself (`binding::check_lease`, run on the
//!    writer's connection over the same 1,000 leases). The check runs inside the serial writer
//!    transaction, so its share of the work is at most `check time × publications/s` (the
//!    fraction of each writer-second it takes).
//!
//! Knobs: `WEFT_BENCH_SECONDS` (each throughput phase, default 5), `WEFT_BENCH_ACTIVE`
//! (leases renewed, default 1000), `WEFT_BENCH_LIVE` (live leases for the expiry probe,
//! default 100000), `WEFT_BENCH_PROBES` (expiring leases per probe run, default 100).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use ed25519_dalek::SigningKey;
use futures::StreamExt as _;
use serde_json::{Value, json};
use weft_api::client::Client;
use weft_api::evidence::{
    Evidence, EvidenceResult, Method, MethodKind, Outcome, Subject, SubjectKind,
};
use weft_api::manifest::Producer;
use weft_api::session::Role;
use weft_api::work::COMMAND_TYPE;
use weft_api::{Envelope, Id};
use weft_storage::{Session, Store};

const CLIENTS: usize = 64;
const ADMIN: &str = "bench-admin";
/// As `src/serve.rs`'s `EXPIRY_TICK`.
const EXPIRY_TICK: Duration = Duration::from_millis(200);

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// A complete v1 contract whose Execution Lease lasts `execution` seconds.
fn contract(execution: u64) -> Value {
    json!({
        "objective": "summarise the corpus",
        "deliverables": [{"name": "report", "mediaType": "application/json", "schema": null}],
        "acceptanceCriteria": [{"id": "ac-1", "description": "the tests pass", "requiredEvidence": ["automated_test"]}],
        "inputs": [], "dependsOn": [], "dependencyPolicy": "all_verified",
        "permissions": {"tools": ["search"], "data": ["corpus"], "operations": ["read"]},
        "requiredCapabilities": [{"id": "cap.summarize", "version": "1"}],
        "deadline": "2099-12-31T00:00:00Z", "urgency": "normal", "businessImpact": "medium",
        "budgets": {"financial": 10.0, "tokens": 200000, "toolCalls": 500, "computeSeconds": 3600,
                    "wallClockSeconds": 7200, "sideEffects": 5},
        "retryPolicy": {"maxAttempts": 3, "backoffSeconds": 30, "deadline": null, "maxCost": 2.0},
        "risk": "low", "approvalRequired": false,
        "leases": {"offerSeconds": 600, "ownershipSeconds": 36000, "executionSeconds": execution,
                   "blockedSeconds": 3600, "graceSeconds": 120},
        "childFailurePolicy": "block"
    })
}

fn budget() -> Value {
    json!({"financial": 100.0, "tokens": 1, "toolCalls": 1, "computeSeconds": 1,
           "wallClockSeconds": 1, "sideEffects": 1})
}

fn offer(work_item: &str, candidate: &Id) -> Value {
    let expires = (Utc::now() + chrono::Duration::seconds(600)).to_rfc3339();
    json!({"workItemId": work_item, "offerId": format!("o-{work_item}"), "candidates": [candidate],
           "expiresAt": expires,
           "selectionBasis": {"capabilityMatches": [{"id": "cap.summarize", "version": "1"}],
               "authorizationEligible": true, "availabilityEstimate": "2099-11-30T12:00:00Z",
               "expectedCost": 1.2, "reliabilityEvidence": [], "policyRules": ["least-loaded"]}})
}

/// One Agent's session in the Group, over HTTP and in-process.
struct Actor {
    agent: Id,
    key: SigningKey,
    group: Id,
    session_epoch: u64,
    membership_epoch: u64,
    token: String,
    session: Session,
    http: reqwest::Client,
    api: Client,
    base: String,
    store: Store,
    sent: u64,
    /// Its active Execution Leases: (WorkItem, lease, Mission).
    leases: Vec<(String, String, String)>,
}

impl Actor {
    async fn open(
        base: &str,
        store: &Store,
        agent: &Id,
        key: &SigningKey,
        group: &Id,
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
            session: store.sessions().authenticate(&grant.token).await?,
            api: Client::new(base.to_owned(), Some(grant.token.clone())),
            token: grant.token,
            http: reqwest::Client::new(),
            base: base.to_owned(),
            store: store.clone(),
            sent: 0,
            leases: Vec::new(),
        })
    }

    /// The typed client on this session (one connection pool per actor).
    fn client(&self) -> &Client {
        &self.api
    }

    fn envelope(&mut self, kind: &str, payload: Value, lease: Option<&str>) -> Envelope {
        self.sent += 1;
        let document = json!({
            "commandId": format!("cmd-{}-{}", self.agent, self.sent),
            "type": kind, "groupId": self.group, "agentId": self.agent,
            "issuedAt": Utc::now().to_rfc3339(), "sessionEpoch": self.session_epoch,
            "membershipEpoch": self.membership_epoch, "leaseId": lease, "expectedRevision": null,
            "extensions": [], "payload": payload
        });
        Envelope::sign(&self.key, COMMAND_TYPE, document.to_string().as_bytes())
    }

    /// Signs and sends one Command over HTTP; answers the 201 body.
    async fn command(
        &mut self,
        kind: &str,
        payload: Value,
        lease: Option<&str>,
    ) -> anyhow::Result<Value> {
        let envelope = self.envelope(kind, payload, lease);
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

    /// The same signed Command through `Store::execute_command` (setup only).
    async fn local(&mut self, kind: &str, payload: Value) -> anyhow::Result<Value> {
        let envelope = self.envelope(kind, payload, None);
        let accepted = self
            .store
            .work()
            .execute_command(self.group.clone(), envelope, &self.session)
            .await?;
        Ok(serde_json::to_value(accepted)?)
    }

    /// Authorizes, offers to itself, accepts and starts `work_item`, every Command either
    /// over HTTP or in-process, and keeps its lease.
    async fn prepare(
        &mut self,
        mission: &str,
        work_item: &str,
        over_http: bool,
    ) -> anyhow::Result<()> {
        let authorize = json!({"workItemId": work_item, "missionId": mission,
                               "contract": contract(3600)});
        let offer = offer(work_item, &self.agent.clone());
        let accept = json!({"workItemId": work_item, "offerId": format!("o-{work_item}")});
        let start = json!({"workItemId": work_item});
        let started = if over_http {
            self.command("work.authorize", authorize, None).await?;
            self.command("work.offer", offer, None).await?;
            self.command("work.accept_offer", accept, None).await?;
            self.command("work.start", start, None).await?
        } else {
            self.local("work.authorize", authorize).await?;
            self.local("work.offer", offer).await?;
            self.local("work.accept_offer", accept).await?;
            self.local("work.start", start).await?
        };
        let lease = started["state"]["lease"]["leaseId"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("no Execution Lease in {started}"))?;
        self.leases
            .push((work_item.to_owned(), lease.to_owned(), mission.to_owned()));
        Ok(())
    }
}

/// What one timed phase does per operation.
#[derive(Clone, Copy)]
enum Op {
    Renew,
    Ack,
    Evidence,
    Publish,
}

async fn run_op(actor: &mut Actor, op: Op, n: u64) -> anyhow::Result<()> {
    match op {
        Op::Renew => {
            let (work_item, lease, _) = actor.leases[n as usize % actor.leases.len()].clone();
            actor
                .command(
                    "lease.renew",
                    json!({"workItemId": work_item}),
                    Some(&lease),
                )
                .await?;
        }
        Op::Ack => {
            let cursor = actor.client().ack(&actor.group, n + 1).await?;
            anyhow::ensure!(cursor.moved == Some(true), "the cursor moved: {cursor:?}");
        }
        Op::Evidence => {
            let (work_item, lease, mission) = actor.leases[0].clone();
            let record = Evidence {
                subject: Subject {
                    kind: SubjectKind::WorkItem,
                    id: work_item.clone(),
                },
                mission_id: Id::parse("m", &mission)?,
                group_id: actor.group.clone(),
                work_item_id: Id::parse("w", &work_item)?,
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
                timestamp: Utc::now().fixed_offset(),
                artifacts: vec![],
                supersedes: None,
                // The owner's Evidence names its current Execution Lease (DESIGN §5.1).
                execution: Some(weft_api::manifest::Execution {
                    lease_id: Id::parse("l", &lease)?,
                    ownership_epoch: 1,
                }),
            };
            actor.client().record_evidence(&actor.key, &record).await?;
        }
        Op::Publish => publish_4k(actor, n).await?,
    }
    Ok(())
}

/// Uploads 4 KiB of fresh bytes and publishes them under one of `actor`'s leases.
async fn publish_4k(actor: &mut Actor, n: u64) -> anyhow::Result<()> {
    use weft_api::manifest::{Classification, Content, Execution, Manifest, Tool, ToolKind};
    let (work_item, lease, mission) = actor.leases[n as usize % actor.leases.len()].clone();
    let mut bytes = format!("{} {n} ", actor.agent).into_bytes();
    bytes.resize(4096, b'.');
    let response = actor
        .http
        .post(format!("{}/v1/blobs", actor.base))
        .bearer_auth(&actor.token)
        .header("content-type", "application/octet-stream")
        .body(bytes)
        .send()
        .await?;
    anyhow::ensure!(
        response.status().is_success(),
        "upload: {}",
        response.status()
    );
    let receipt: weft_api::views::UploadReceipt = response.json().await?;
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
        mission_id: Id::parse("m", &mission)?,
        group_id: actor.group.clone(),
        work_item_id: Id::parse("w", &work_item)?,
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
        created_at: Utc::now().fixed_offset(),
        classification: Classification::Internal,
        retrieval_uri: format!(
            "https://weft.example/v1/artifacts/{}/content",
            receipt.blake3
        ),
        annotations: Default::default(),
    };
    actor.client().publish(&actor.key, &manifest).await?;
    Ok(())
}

/// Runs `op` on every actor until the deadline; answers (operations, seconds).
async fn phase(actors: Vec<Actor>, seconds: u64, op: Op) -> anyhow::Result<(Vec<Actor>, f64)> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let tasks: Vec<_> = actors
        .into_iter()
        .map(|mut actor| {
            tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < deadline {
                    run_op(&mut actor, op, n).await?;
                    n += 1;
                }
                Ok::<_, anyhow::Error>((actor, n))
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
    Ok((actors, total as f64 / started.elapsed().as_secs_f64()))
}

/// Every actor prepares its share of `count` WorkItems named `{tag}-{agent}-{n}`.
async fn prepare_all(
    actors: Vec<Actor>,
    tag: &'static str,
    count: usize,
    over_http: bool,
) -> anyhow::Result<Vec<Actor>> {
    let n_actors = actors.len();
    let began = Instant::now();
    let tasks: Vec<_> = actors
        .into_iter()
        .enumerate()
        .map(|(i, mut actor)| {
            tokio::spawn(async move {
                let mine = count / n_actors + usize::from(i < count % n_actors);
                for n in 0..mine {
                    // A Mission per 100 WorkItems: the Mission's reads stay the size of a
                    // real one's, so the setup does not slow down as the Group grows.
                    let mission = format!("m-{tag}-{}-{}", actor.agent, n / 100);
                    if n % 100 == 0 {
                        let create = json!({"missionId": mission, "title": "bench",
                                            "priorityClass": "normal", "budget": budget()});
                        if over_http {
                            actor.command("mission.create", create, None).await?;
                        } else {
                            actor.local("mission.create", create).await?;
                        }
                    }
                    let work_item = format!("{tag}-{}-{n}", actor.agent);
                    actor.prepare(&mission, &work_item, over_http).await?;
                    if !over_http && i == 0 && n % 25 == 24 {
                        let done = (n + 1) * n_actors;
                        eprintln!(
                            "  … {done} more live leases, {:.0} leases/s so far",
                            done as f64 / began.elapsed().as_secs_f64()
                        );
                    }
                }
                Ok::<_, anyhow::Error>(actor)
            })
        })
        .collect();
    let mut actors = Vec::with_capacity(n_actors);
    for task in tasks {
        actors.push(task.await??);
    }
    Ok(actors)
}

/// Lags in milliseconds, sorted: (appendedAt − expiresAt, arrival − expiresAt).
struct Lags {
    appended: Vec<f64>,
    arrived: Vec<f64>,
}

/// Starts `probes` WorkItems with a 1 s Execution Lease, 20 ms apart, and waits for their
/// `lease.expired` on the Group's SSE stream.
async fn expiry_probe(actor: &mut Actor, tag: &str, probes: usize) -> anyhow::Result<Lags> {
    let mut names = Vec::with_capacity(probes);
    let mission = format!("m-probe-{tag}");
    let create = json!({"missionId": mission, "title": "probe", "priorityClass": "normal",
                        "budget": budget()});
    actor.local("mission.create", create).await?;
    for n in 0..probes {
        let work_item = format!("probe-{tag}-{n}");
        let authorize = json!({"workItemId": work_item, "missionId": mission,
                               "contract": contract(1)});
        actor.local("work.authorize", authorize).await?;
        actor
            .local("work.offer", offer(&work_item, &actor.agent.clone()))
            .await?;
        actor
            .local(
                "work.accept_offer",
                json!({"workItemId": work_item, "offerId": format!("o-{work_item}")}),
            )
            .await?;
        names.push(work_item);
    }
    let client = actor.client().clone();
    let head = client
        .checkpoint(&actor.group)
        .await
        .map(|c| c.checkpoint.sequence)
        .unwrap_or(0);
    let stream = client.event_stream(&actor.group, head).await?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, String, DateTime<Utc>)>();
    let listener = tokio::spawn(async move {
        let mut body = stream.bytes_stream();
        let mut buffer = String::new();
        while let Some(chunk) = body.next().await {
            let Ok(chunk) = chunk else { break };
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let frame: String = buffer.drain(..end + 2).collect();
                let arrived = Utc::now();
                let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) else {
                    continue;
                };
                let Ok(event) = serde_json::from_str::<Value>(data) else {
                    continue;
                };
                if event["type"] == "lease.expired" {
                    let payload = &event["payload"]["detail"];
                    let lease = payload["leaseId"].as_str().unwrap_or("").to_owned();
                    let appended = event["appendedAt"].as_str().unwrap_or("").to_owned();
                    if tx.send((lease, appended, arrived)).is_err() {
                        return;
                    }
                }
            }
        }
    });
    let mut expires: HashMap<String, DateTime<Utc>> = HashMap::new();
    for work_item in &names {
        let started = actor
            .command("work.start", json!({"workItemId": work_item}), None)
            .await?;
        let lease = &started["state"]["lease"];
        let at: DateTime<Utc> = lease["expiresAt"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("no lease in {started}"))?
            .parse()?;
        expires.insert(lease["leaseId"].as_str().unwrap_or("").to_owned(), at);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut lags = Lags {
        appended: Vec::new(),
        arrived: Vec::new(),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while lags.arrived.len() < probes {
        let Ok(Some((lease, appended, arrived))) =
            tokio::time::timeout_at(deadline, rx.recv()).await
        else {
            let tail = client.events(&actor.group, head, 1000).await?;
            let kinds: Vec<&str> = tail
                .iter()
                .map(|e| e.event().map_or("withheld", |e| e.kind.as_str()))
                .collect();
            anyhow::bail!(
                "{} of {probes} lease.expired seen in 30 s; after {head}: {kinds:?}",
                lags.arrived.len()
            );
        };
        let Some(at) = expires.get(&lease) else {
            continue;
        };
        let appended: DateTime<Utc> = appended.parse()?;
        lags.appended
            .push((appended - *at).num_microseconds().unwrap_or(0) as f64 / 1e3);
        lags.arrived
            .push((arrived - *at).num_microseconds().unwrap_or(0) as f64 / 1e3);
    }
    listener.abort();
    lags.appended.sort_by(f64::total_cmp);
    lags.arrived.sort_by(f64::total_cmp);
    Ok(lags)
}

fn print_lags(label: &str, lags: &Lags) {
    for (what, sorted) in [
        ("appendedAt - expiresAt", &lags.appended),
        ("arrival on SSE - expiresAt", &lags.arrived),
    ] {
        println!(
            "  {label:<34} {what:<28} p50 {:>6.0} ms  p99 {:>6.0} ms  max {:>6.0} ms",
            percentile(sorted, 0.5),
            percentile(sorted, 0.99),
            sorted[sorted.len() - 1],
        );
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let seconds: u64 = env_or("WEFT_BENCH_SECONDS", 5);
    let active: usize = env_or("WEFT_BENCH_ACTIVE", 1000);
    let live: usize = env_or("WEFT_BENCH_LIVE", 100_000);
    let probes: usize = env_or("WEFT_BENCH_PROBES", 100);
    let dir = tempfile::tempdir()?;
    let mut config = server::config::Config::with_data_dir(dir.path().to_path_buf());
    // The bench measures throughput: the per-Agent Command rate (issue #40) would cap it.
    config.commands_per_minute = 0;
    let store = Store::open(config.storage_options()).await?;
    {
        let store = store.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(EXPIRY_TICK);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if let Err(error) = store.work().expire_due(store.now()).await {
                    eprintln!("expire_due failed: {error}");
                }
            }
        });
    }
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
    let group = Id::parse("g", "one")?;
    admin.create_group(&group).await?;

    eprintln!("setting up {CLIENTS} agents and {active} active leases over HTTP …");
    let mut actors = Vec::with_capacity(CLIENTS);
    for i in 0..CLIENTS {
        let agent = Id::parse("a", &format!("agent-{i}"))?;
        let key = SigningKey::from_bytes(&[i as u8 + 1; 32]);
        admin
            .register_agent(&agent, &key.verifying_key(), "1")
            .await?;
        admin.set_membership(&group, &agent, &roles).await?;
        actors.push(Actor::open(&base, &store, &agent, &key, &group).await?);
    }
    let actors = prepare_all(actors, "wi", active, true).await?;

    let (actors, renewals) = phase(actors, seconds, Op::Renew).await?;
    let (actors, acks) = phase(actors, seconds, Op::Ack).await?;
    let (actors, evidence) = phase(actors, seconds, Op::Evidence).await?;
    let (mut actors, publications) = phase(actors, seconds, Op::Publish).await?;
    let leases: Vec<_> = actors
        .iter()
        .flat_map(|actor| {
            actor.leases.iter().map(|(work_item, lease, _)| {
                (work_item.clone(), lease.clone(), 1, actor.agent.to_string())
            })
        })
        .collect();
    let check = weft_storage::bench_support::time_lease_checks(&store, leases, 20).await?;

    println!(
        "server: in-process, listening on 127.0.0.1 (loopback, reqwest), on-disk SQLite + blobs in a temp dir, expiry timer every {} ms on the real clock; clients share the machine's cores",
        EXPIRY_TICK.as_millis()
    );
    println!(
        "lease.renew (signed, durable)        {renewals:>8.0} renewals/s  ({CLIENTS} clients, {active} active leases, {seconds} s)"
    );
    println!("baseline: ACK (durable cursor move)  {acks:>8.0} ACKs/s");
    println!("baseline: signed Evidence            {evidence:>8.0} records/s");
    println!(
        "renewals / ACK {:.2}   renewals / Evidence {:.2}",
        renewals / acks,
        renewals / evidence
    );
    println!(
        "4 KiB publication (blob + manifest under its lease) {publications:>8.0} publications/s"
    );
    let share = check.as_secs_f64() * publications;
    println!(
        "lease check (LSE-4/5) on the writer: {:.1} µs each = {:.2} % of the writer's time at that rate (goal ≤ 5 %)",
        check.as_secs_f64() * 1e6,
        share * 100.0
    );
    eprintln!("expiry probe with {active} live leases …");
    let few = expiry_probe(&mut actors[0], "few", probes).await?;
    println!("expiry → lease.expired, {probes} leases of 1 s started 20 ms apart, never renewed:");
    print_lags(&format!("{active} live leases (baseline)"), &few);
    let more = live.saturating_sub(active);
    eprintln!("setting up {more} more live leases in-process …");
    let began = Instant::now();
    let mut actors = prepare_all(actors, "live", more, false).await?;
    let setup = began.elapsed().as_secs_f64();
    eprintln!("expiry probe with {live} live leases …");
    let many = expiry_probe(&mut actors[0], "many", probes).await?;
    print_lags(&format!("{live} live leases"), &many);
    println!(
        "(setup of the {more} more leases, 4 signed Commands each through Store::execute_command: {setup:.0} s, {:.0} leases/s)",
        more as f64 / setup
    );
    Ok(())
}
