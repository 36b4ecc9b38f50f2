//! Evidence benchmark (not a test; `cargo bench --bench evidence`): ingest 100,000 signed
//! Evidence records over 1,000 WorkItems × 10 criteria through the real HTTP server (on-disk
//! SQLite + local blobs, durable before each 201), then time the by-criterion query and the
//! latest-per-criterion summary. Prints records/s and p50/p99 latencies.
//!
//! `WEFT_BENCH_EVIDENCE=10000` scales the record count down for a quick run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ed25519_dalek::SigningKey;
use futures::StreamExt as _;
use weft_api::Id;
use weft_api::client::Client;
use weft_api::evidence::{
    Evidence, EvidenceResult, Method, MethodKind, Metric, Outcome, Subject, SubjectKind,
};
use weft_api::manifest::Producer;
use weft_api::session::Role;

const WORK_ITEMS: usize = 1000;
const CRITERIA: usize = 10;
const CONCURRENCY: usize = 64;
const QUERIES: usize = 2000;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn evidence(n: usize, agent: &Id) -> Evidence {
    let work_item = Id::parse("w", &format!("wi-{}", n % WORK_ITEMS)).expect("id");
    let outcome = match n % 7 {
        0 => Outcome::Fail,
        1 => Outcome::Inconclusive,
        _ => Outcome::Pass,
    };
    Evidence {
        subject: Subject {
            kind: SubjectKind::WorkItem,
            id: work_item.to_string(),
        },
        mission_id: Id::parse("m", "mission-1").expect("id"),
        group_id: Id::parse("g", "bench").expect("id"),
        work_item_id: work_item,
        criterion: format!("ac-{}", (n / WORK_ITEMS) % CRITERIA),
        method: Method {
            kind: MethodKind::AutomatedTest,
            name: "suite".into(),
            version: "1".into(),
        },
        result: EvidenceResult {
            outcome,
            summary: format!("run {n}"),
            metrics: [("passed".to_owned(), Metric::Number(n as f64))].into(),
        },
        producer: Producer {
            agent_id: agent.clone(),
            agent_card_version: "1".into(),
        },
        timestamp: chrono::Utc::now().fixed_offset(),
        artifacts: vec![],
        supersedes: None,
        execution: None,
    }
}

async fn time_queries(client: &Client, paths: Vec<String>) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(paths.len());
    for path in paths {
        let started = Instant::now();
        let response = reqwest_get(client, &path).await;
        latencies.push(started.elapsed());
        assert!(response, "{path}");
    }
    latencies.sort();
    latencies
}

async fn reqwest_get(client: &Client, path: &str) -> bool {
    if let Some(query) = path.strip_prefix("evidence?") {
        let filters: Vec<(&str, String)> = query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k, v.to_owned()))
            .collect();
        client.list_evidence(&filters).await.is_ok()
    } else {
        let work_item = Id::parse("w", path).expect("id");
        client.criteria(&work_item).await.is_ok()
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n_records: usize = std::env::var("WEFT_BENCH_EVIDENCE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir()?;
    let mut config = server::config::Config::with_data_dir(dir.path().to_path_buf());
    // The bench measures throughput: the per-Agent Command rate (issue #40) would cap it.
    config.commands_per_minute = 0;
    let store = weft_storage::Store::open(config.storage_options()).await?;
    let state = server::AppState::new(store, "bench-admin", &config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(server::serve(
        listener,
        server::app(state),
        Duration::from_secs(10),
        Duration::from_secs(30),
        futures::future::pending(),
    ));

    let admin = Client::new(base.clone(), Some("bench-admin".into()));
    let group = Id::parse("g", "bench")?;
    let agent = Id::parse("a", "reviewer-1")?;
    let key = SigningKey::from_bytes(&[42u8; 32]);
    admin.create_group(&group).await?;
    admin
        .register_agent(&agent, &key.verifying_key(), "1")
        .await?;
    admin
        .set_membership(&group, &agent, &[Role::Reviewer, Role::Coordinator])
        .await?;
    let grant = Client::new(base.clone(), None)
        .open_session(&key, &agent, &group)
        .await?;
    let client = Arc::new(Client::new(base.clone(), Some(grant.token)));
    // Evidence names WorkItems that exist (issue #11): the Mission and its WorkItems first,
    // authorized by the same Agent as coordinator (not timed).
    let signer = weft_api::client::CommandSigner {
        key: &key,
        agent_id: &agent,
        group_id: &group,
        session_epoch: grant.session_epoch,
        membership_epoch: grant.membership_epoch,
    };
    let budget = serde_json::json!({"financial": 1.0, "tokens": 1, "toolCalls": 1,
        "computeSeconds": 1, "wallClockSeconds": 1, "sideEffects": 1});
    client
        .command(&signer, weft_api::work::CommandType::MissionCreate,
            serde_json::json!({"missionId": "mission-1", "title": "bench", "priorityClass": "normal", "budget": budget}),
            None, None)
        .await?;
    let contract: serde_json::Value =
        serde_json::from_str(include_str!("../examples/contract.json"))?;
    for n in 0..WORK_ITEMS {
        client
            .command(&signer, weft_api::work::CommandType::WorkAuthorize,
                serde_json::json!({"workItemId": format!("wi-{n}"), "missionId": "mission-1", "contract": contract}),
                None, None)
            .await?;
    }

    eprintln!("ingesting {n_records} records with {CONCURRENCY} concurrent clients …");
    let key = Arc::new(key);
    let started = Instant::now();
    let outcomes: Vec<bool> = futures::stream::iter(0..n_records)
        .map(|n| {
            let (client, key, agent) = (Arc::clone(&client), Arc::clone(&key), agent.clone());
            async move {
                client
                    .record_evidence(&key, &evidence(n, &agent))
                    .await
                    .is_ok()
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let ingest = started.elapsed();
    let n_ok = outcomes.iter().filter(|ok| **ok).count();
    assert_eq!(n_ok, n_records, "every record is accepted");

    let by_criterion: Vec<String> = (0..QUERIES)
        .map(|i| {
            format!(
                "evidence?workItemId=wi-{}&criterion=ac-{}",
                (i * 7919) % WORK_ITEMS,
                i % CRITERIA
            )
        })
        .collect();
    let latest: Vec<String> = (0..QUERIES)
        .map(|i| format!("wi-{}", (i * 104_729) % WORK_ITEMS))
        .collect();
    let by_criterion = time_queries(&client, by_criterion).await;
    let latest = time_queries(&client, latest).await;

    println!(
        "evidence records                   {n_records} over {WORK_ITEMS} WorkItems x {CRITERIA} criteria"
    );
    println!(
        "durable ingest over HTTP           {:.0} records/s ({CONCURRENCY} concurrent clients, {:.1} s)",
        n_records as f64 / ingest.as_secs_f64(),
        ingest.as_secs_f64()
    );
    println!(
        "by criterion (GET /v1/evidence)    p50 {:.2} ms  p99 {:.2} ms  ({QUERIES} queries, sequential)",
        percentile(&by_criterion, 0.5).as_secs_f64() * 1e3,
        percentile(&by_criterion, 0.99).as_secs_f64() * 1e3
    );
    println!(
        "latest per criterion (criteria)    p50 {:.2} ms  p99 {:.2} ms  ({QUERIES} queries, sequential)",
        percentile(&latest, 0.5).as_secs_f64() * 1e3,
        percentile(&latest, 0.99).as_secs_f64() * 1e3
    );
    Ok(())
}
