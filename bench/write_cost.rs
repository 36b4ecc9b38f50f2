//! What a signed durable write costs the server, as a multiple of its signature check (issue
//! #44; not a test; `cargo bench --bench write_cost`). Starts the release `weft serve` as its
//! own process (on-disk SQLite and blobs in a temp dir, fsync on), enrols a Worker with a
//! started WorkItem, and sends it pre-signed requests from 16 connections: everything is
//! signed before the clock, so the load generator's signing is not what is measured. For each
//! kind of write it reads the server's CPU time (user + system, `/proc/<pid>/stat`) before and
//! after `WEFT_BENCH_REQUESTS` requests (default 3000) and prints µs per request and that as a
//! multiple of one signature check measured in the same run: `Envelope::verify` of one of the
//! same Commands (the server's check: payload type, keyid, base64, PAE, `verify_strict`),
//! timed as this process's own CPU over 20,000 calls on one thread while the server is idle.
//! The writes: a `lease.renew`, a `work.progress`, a one-request 4 KiB publication
//! (`PUT /v1/artifacts/{digest}`, multipart: manifest and bytes) and a signed Evidence record.
//!
//! Then a renewal's cost against its lease's age: `WEFT_BENCH_RENEWALS` (default 20,000)
//! renewals of the one lease in four equal quarters, the server's CPU per renewal printed per
//! quarter and the last quarter over the first (a renewal must cost the same on its
//! 100,000th as on its first).
//!
//! With `WEFT_BENCH_BASELINE=/path/to/weft`, only an A/B of this build against that one,
//! inside one run (`write_cost/compare.rs`).
//!
//! And the floor (`write_cost/floor.rs`): the same renewals sent to the least server that
//! answers a signed Command durably (HTTP, the same check, one row appended in a group commit),
//! its CPU per request as a multiple of the check and weft's as a multiple of it, so the goal
//! can be read against what this machine allows.

#[path = "write_cost/compare.rs"]
mod compare;
#[path = "side_by_side/cpu.rs"]
#[allow(dead_code)] // the nginx probes and ceilings are side_by_side's
mod cpu;
#[path = "write_cost/floor.rs"]
mod floor;
#[path = "common/weft.rs"]
#[allow(dead_code)] // `start_weft`: the server here takes flags
mod weft;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cpu::Cpu;
use serde_json::json;
use weft_api::Envelope;
use weft_api::evidence::{
    EVIDENCE_TYPE, Evidence, EvidenceResult, Method, MethodKind, Outcome, Subject, SubjectKind,
};
use weft_api::manifest::{Execution, Producer};
use weft_api::work::COMMAND_TYPE;
use weft_api::{Id, digest::Hasher};

/// The floor server runs this binary again; it and weft both allocate with mimalloc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CONNECTIONS: usize = 16;
const CHECKS: usize = 20_000;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One pre-signed request: path, content type, body.
type Request = (String, String, bytes::Bytes);

/// Sends every request on [`CONNECTIONS`] tasks (each must succeed) and answers the server's
/// CPU µs per request.
async fn server_cpu_per_request(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    server: &Cpu,
    method: reqwest::Method,
    requests: Vec<Request>,
) -> f64 {
    let count = requests.len();
    let before = server.seconds();
    send_all(client, base, token, &method, requests).await;
    // The last answers are sent before the server's tick accounting settles.
    tokio::time::sleep(Duration::from_millis(50)).await;
    (server.seconds() - before) * 1e6 / count as f64
}

/// Sends every request on [`CONNECTIONS`] tasks; each must succeed.
async fn send_all(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    method: &reqwest::Method,
    requests: Vec<Request>,
) {
    let requests = Arc::new(requests);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CONNECTIONS {
        let (client, requests, next) = (client.clone(), requests.clone(), next.clone());
        let (base, token, method) = (base.to_owned(), token.to_owned(), method.clone());
        tasks.spawn(async move {
            while let Some((path, content_type, body)) =
                requests.get(next.fetch_add(1, Ordering::Relaxed))
            {
                let url = format!("{base}{path}");
                weft::send_ok(
                    &client,
                    method.clone(),
                    &url,
                    &token,
                    content_type,
                    body.clone(),
                )
                .await;
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("task");
    }
}

fn json_request(path: &str, body: bytes::Bytes) -> Request {
    (path.to_owned(), "application/json".to_owned(), body)
}

/// The server's check of one Command, in µs of this process's CPU: 20,000 calls on one thread.
fn signature_check_us(worker: &weft::Worker, sample: &bytes::Bytes) -> f64 {
    let envelope: Envelope = serde_json::from_slice(sample).expect("envelope");
    let public = worker.key.verifying_key();
    let me = Cpu(vec![std::process::id()]);
    let before = me.seconds();
    let started = std::time::Instant::now();
    for _ in 0..CHECKS {
        std::hint::black_box(&envelope)
            .verify(COMMAND_TYPE, &public)
            .expect("verifies");
    }
    let wall = started.elapsed().as_secs_f64() * 1e6 / CHECKS as f64;
    let cpu = (me.seconds() - before) * 1e6 / CHECKS as f64;
    eprintln!("signature check: {cpu:.1} µs of CPU, {wall:.1} µs of wall time");
    cpu
}

fn renewals(worker: &weft::Worker, from: usize, count: usize) -> Vec<Request> {
    let epochs = weft::epochs(&worker.home);
    (from..from + count)
        .map(|n| {
            json_request(
                "/v1/groups/g1/commands",
                weft::command(
                    worker,
                    epochs,
                    &format!("renew-{n}"),
                    "lease.renew",
                    json!({"workItemId": "w1"}),
                ),
            )
        })
        .collect()
}

fn evidence(worker: &weft::Worker, count: usize) -> Vec<Request> {
    (0..count)
        .map(|n| {
            let record = Evidence {
                subject: Subject {
                    kind: SubjectKind::WorkItem,
                    id: "w1".into(),
                },
                mission_id: Id::parse("missionId", "m1").expect("id"),
                group_id: Id::parse("groupId", "g1").expect("id"),
                work_item_id: Id::parse("workItemId", "w1").expect("id"),
                criterion: "ac-1".into(),
                method: Method {
                    // A worker may claim only its own tests' results (separation of duties).
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
                    agent_id: Id::parse("agentId", "bench").expect("id"),
                    agent_card_version: "1".into(),
                },
                timestamp: chrono::Utc::now().fixed_offset(),
                artifacts: vec![],
                supersedes: None,
                execution: Some(Execution {
                    lease_id: Id::parse("leaseId", &worker.lease_id).expect("id"),
                    ownership_epoch: worker.ownership_epoch,
                }),
            };
            let payload = serde_json::to_vec(&record).expect("json");
            let envelope = Envelope::sign(&worker.key, EVIDENCE_TYPE, &payload);
            json_request(
                "/v1/evidence",
                serde_json::to_vec(&envelope).expect("json").into(),
            )
        })
        .collect()
}

fn publications(worker: &weft::Worker, count: usize) -> Vec<Request> {
    (0..count)
        .map(|n| {
            let mut bytes = vec![0u8; 4096];
            bytes[..8].copy_from_slice(&(n as u64).to_le_bytes());
            bytes[8..16].copy_from_slice(&0x5745_4654_u64.to_le_bytes());
            let digests = Hasher::digest(&bytes);
            let envelope = weft::manifest(worker, &digests);
            (
                format!("/v1/artifacts/{}", digests.blake3),
                format!("multipart/form-data; boundary={}", weft::BOUNDARY),
                weft::multipart(&envelope, &bytes),
            )
        })
        .collect()
}

fn main() {
    if let Ok(dir) = std::env::var(floor::FLOOR_DIR) {
        return floor::serve(&dir);
    }
    let count = setting("WEFT_BENCH_REQUESTS", 3000);
    let ages = setting("WEFT_BENCH_RENEWALS", 20_000) / 4 * 4;
    if let Ok(baseline) = std::env::var("WEFT_BENCH_BASELINE") {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(CONNECTIONS)
            .build()
            .expect("client");
        return compare::run(&client, &runtime, &baseline, count);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, url) = weft::start_weft_with(dir.path(), &["--commands-per-minute", "0"], &[]);
    let worker = weft::enrol(dir.path(), &url);
    let server_cpu = Cpu(vec![server.0.id()]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(CONNECTIONS)
        .build()
        .expect("client");

    eprintln!("signing {count} requests of each kind");
    let renew = renewals(&worker, 0, count);
    let progress: Vec<Request> = weft::progress_commands(&worker, count)
        .into_iter()
        .map(|body| json_request("/v1/groups/g1/commands", body))
        .collect();
    let published = publications(&worker, count);
    let recorded = evidence(&worker, count);
    std::thread::sleep(Duration::from_millis(200));
    let check = signature_check_us(&worker, &renew[0].2);

    let post = reqwest::Method::POST;
    let floor_dir = tempfile::tempdir().expect("tempdir");
    let (floor_server, floor_url) = floor::start(floor_dir.path(), &worker.key.verifying_key());
    let floor_cpu = Cpu(vec![floor_server.0.id()]);
    // The floor keeps no idempotency: it takes the renewals three times over (its CPU per
    // request is a third of weft's, so as many clock ticks are counted), after a warm-up.
    let floor_renewals: Vec<Request> = (0..3).flat_map(|_| renew.iter().cloned()).collect();
    let floor_at = |requests: Vec<Request>| {
        runtime.block_on(server_cpu_per_request(
            &client,
            &floor_url,
            &worker.token,
            &floor_cpu,
            post.clone(),
            requests,
        ))
    };
    eprintln!("phase: the floor, before");
    floor_at(renew[..count / 4].to_vec());
    let floor_before = floor_at(floor_renewals.clone());
    let writes: [(&str, reqwest::Method, Vec<Request>); 4] = [
        ("lease.renew", post.clone(), renew),
        ("work.progress", post.clone(), progress),
        (
            "4 KiB publication, one request",
            reqwest::Method::PUT,
            published,
        ),
        ("Evidence record", post.clone(), recorded),
    ];
    println!(
        "server CPU per signed durable write, {count} pre-signed requests each from {CONNECTIONS} connections"
    );
    println!("one signature check (Envelope::verify of a Command): {check:.1} µs");
    println!(
        "the floor (write_cost/floor.rs: HTTP, the check, one row in a group commit): {floor_before:.0} µs, {:.1}× the check",
        floor_before / check
    );
    for (name, method, requests) in writes {
        eprintln!("phase: {name}");
        let us = runtime.block_on(server_cpu_per_request(
            &client,
            &url,
            &worker.token,
            &server_cpu,
            method,
            requests,
        ));
        println!(
            "  {name:<32} {us:>7.0} µs  {:>5.1}× the check  (issue: ≤ 2×)  {:>4.1}× the floor (≤ 2×, bench/README)",
            us / check,
            us / floor_before
        );
    }
    eprintln!("phase: the floor, after");
    let floor_after = floor_at(floor_renewals);
    println!(
        "the floor again: {floor_after:.0} µs, {:.1}× the check (before/after {:.2})",
        floor_after / check,
        floor_before / floor_after
    );
    drop(floor_server);

    let quarter = ages / 4;
    println!("a renewal's cost against its lease's age: {ages} renewals of one lease in quarters");
    let mut quarters = Vec::new();
    for q in 0..4 {
        eprintln!("renewals: quarter {} of 4", q + 1);
        let requests = renewals(&worker, count + q * quarter, quarter);
        let us = runtime.block_on(server_cpu_per_request(
            &client,
            &url,
            &worker.token,
            &server_cpu,
            post.clone(),
            requests,
        ));
        println!(
            "  renewals {:>6}…{:<6} {us:>7.0} µs each",
            count + q * quarter + 1,
            count + (q + 1) * quarter
        );
        quarters.push(us);
    }
    println!(
        "last quarter / first quarter: {:.2} (goal: 1, within the machine's noise)",
        quarters[3] / quarters[0]
    );
}
