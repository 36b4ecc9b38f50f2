//! The Worker runtime (issue #47), measured. `cargo bench --bench worker`.
//!
//! **End to end.** The release `weft serve` and one `weft worker` (16 slots, a no-op executor
//! `true`) on this machine; three Groups weighted 1:2:4, each flooded with `WEFT_BENCH_ITEMS`
//! (1,000) WorkItems offered to the Worker before it starts. Every WorkItem goes through
//! everything a real one does: admission and a signed `work.accept_offer`, `work.start` with
//! its lease, a capability token, the executor, the run report uploaded and its manifest
//! published bound to the lease, signed Evidence, a signed `work.submit`; every answer after
//! its commit. From the Groups' logs it prints (1) each Group's share of the runs started
//! while all three were backlogged, against 1:2:4 (goal: within 5 %), and (2) WorkItems
//! submitted per second from the first start to the last submission (goal: ≥ 200/s).
//!
//! **Starvation** (the pure Scheduler, `weft_api::worker::scheduler`): the longest wait of a
//! low-urgency WorkItem in one slot while fresh critical ones keep arriving at the rate the
//! slot serves them, and at twice it; the bound is `4 × aging_seconds × arrival/service`.

#[path = "common/weft.rs"]
#[allow(dead_code)]
mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use chrono::{DateTime, TimeZone as _, Utc};
use serde_json::json;
use weft_api::Id;
use weft_api::client::{Client, CommandSigner};
use weft_api::dsse::BASE64;
use weft_api::session::Role;
use weft_api::work::CommandType;
use weft_api::work::contract::Level;
use weft_api::worker::scheduler::{self, Fairness, GroupShare, Policy, Waiting};

const GROUPS: [(&str, u32); 3] = [("ga", 1), ("gb", 2), ("gc", 4)];
const SLOTS: u32 = 16;

fn id(text: &str) -> Id {
    Id::parse("id", text).expect("an id")
}

fn contract() -> serde_json::Value {
    let mut contract: serde_json::Value =
        serde_json::from_str(common::CONTRACT).expect("the bench contract");
    contract["acceptanceCriteria"][0]["requiredEvidence"] = json!(["automated_test"]);
    contract["requiredCapabilities"] = json!([{"id": "cap.noop", "version": "1"}]);
    contract
}

/// Signed Commands of `kind` with `payloads`, sent in batches of 256.
async fn batch(
    api: &Client,
    signer: &CommandSigner<'_>,
    kind: CommandType,
    payloads: Vec<serde_json::Value>,
) {
    for chunk in payloads.chunks(256) {
        let envelopes = chunk
            .iter()
            .enumerate()
            .map(|(i, payload)| {
                let command = weft_api::work::Command {
                    command_id: id(&format!(
                        "b-{}-{i}-{}",
                        kind.as_str(),
                        rand::random::<u64>()
                    )),
                    kind,
                    group_id: signer.group_id.clone(),
                    agent_id: signer.agent_id.clone(),
                    issued_at: Utc::now().fixed_offset(),
                    session_epoch: signer.session_epoch,
                    membership_epoch: signer.membership_epoch,
                    lease_id: None,
                    expected_revision: None,
                    extensions: Vec::new(),
                    payload: payload.clone(),
                };
                let bytes = serde_json::to_vec(&command).expect("json");
                weft_api::Envelope::sign(signer.key, weft_api::work::COMMAND_TYPE, &bytes)
            })
            .collect();
        let answer = api
            .command_batch(signer.group_id, envelopes)
            .await
            .expect("a batch");
        assert!(answer.refused.is_none(), "{:?}", answer.refused);
    }
}

/// (kind, appended at) of every Event of `group`.
async fn log(admin: &Client, group: &Id) -> Vec<(String, DateTime<Utc>)> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let page = admin.events(group, after, 1000).await.expect("events");
        if page.is_empty() {
            return out;
        }
        for delivered in page {
            if let weft_api::event::Delivered::Event(event) = delivered {
                after = event.sequence;
                let at = DateTime::parse_from_rfc3339(&event.appended_at)
                    .expect("an instant")
                    .to_utc();
                out.push((event.kind, at));
            }
        }
    }
}

/// The starvation bound of the pure Scheduler: ticks until a low item is placed in one slot
/// while `per_tick` critical items arrive each tick.
fn low_item_wait(per_tick: u32) -> u64 {
    let t0 = Utc
        .with_ymd_and_hms(2026, 12, 1, 0, 0, 0)
        .single()
        .expect("t0");
    let groups = [GroupShare {
        group: "g".into(),
        weight: 1,
        max_slots: None,
    }];
    let policy = Policy::default();
    let item = |name: String, urgency, since| Waiting {
        work_item: name,
        group: "g".into(),
        mission: "m".into(),
        priority_class: Level::Normal,
        urgency,
        deadline: t0 + chrono::Duration::days(30),
        since,
        runnable: true,
    };
    let mut queue = vec![item("low".into(), Level::Low, t0)];
    let mut fairness = Fairness::default();
    for tick in 0..100_000u32 {
        let now = t0 + chrono::Duration::seconds(i64::from(tick));
        for k in 0..per_tick {
            queue.push(item(format!("c{tick}-{k}"), Level::Critical, now));
        }
        let placed = scheduler::schedule(&policy, &groups, &mut fairness, &queue, &[], &[1], now);
        let name = placed[0].work_item.clone();
        queue.retain(|w| w.work_item != name);
        if name == "low" {
            return u64::from(tick);
        }
    }
    u64::MAX
}

#[tokio::main]
async fn main() {
    let items: usize = std::env::var("WEFT_BENCH_ITEMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let aging = Policy::default().aging_seconds;
    for (per_tick, name) in [(1, "1:1"), (2, "2:1")] {
        let waited = low_item_wait(per_tick);
        println!(
            "starvation: a low item waited {waited} s in one slot with critical arrivals at {name} (bound {} s)",
            4 * aging * u64::from(per_tick)
        );
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let (server_process, url) =
        common::start_weft_with(dir.path(), &["--commands-per-minute", "0"], &[]);
    let token = std::fs::read_to_string(dir.path().join("data/admin.token")).expect("token");
    let admin = Client::new(url.clone(), Some(token.trim().to_owned()));
    let coordinator = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let worker_key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    admin
        .register_agent(&id("coord"), &coordinator.verifying_key(), "1")
        .await
        .expect("coord");
    admin
        .register_agent(&id("bench-w"), &worker_key.verifying_key(), "1")
        .await
        .expect("worker");
    let key_file = dir.path().join("bench-w.key");
    std::fs::write(
        &key_file,
        json!({"secretKey": BASE64.encode(worker_key.to_bytes()),
            "publicKey": BASE64.encode(worker_key.verifying_key().as_bytes()), "keyid": "-"})
        .to_string(),
    )
    .expect("key file");

    let budget = json!({"financial": 1e9, "tokens": 1_000_000_000u64, "toolCalls": 1_000_000_000u64,
        "computeSeconds": 1_000_000_000u64, "wallClockSeconds": 1_000_000_000u64, "sideEffects": 1_000_000_000u64});
    let expires = (Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let setup = std::time::Instant::now();
    let mut group_toml = String::new();
    for (group, weight) in GROUPS {
        let g = id(group);
        admin.create_group(&g).await.expect("group");
        admin
            .set_membership(&g, &id("coord"), &[Role::Coordinator])
            .await
            .expect("coord member");
        admin
            .set_membership(&g, &id("bench-w"), &[Role::Worker])
            .await
            .expect("worker member");
        let grant = Client::new(url.clone(), None)
            .open_session(&coordinator, &id("coord"), &g)
            .await
            .expect("session");
        let api = Client::new(url.clone(), Some(grant.token));
        let coord = id("coord");
        let signer = CommandSigner {
            key: &coordinator,
            agent_id: &coord,
            group_id: &g,
            session_epoch: grant.session_epoch,
            membership_epoch: grant.membership_epoch,
        };
        let mission = format!("m-{group}");
        batch(
            &api,
            &signer,
            CommandType::MissionCreate,
            vec![json!({"missionId": mission,
            "title": "bench", "priorityClass": "normal", "budget": budget})],
        )
        .await;
        let wis: Vec<String> = (0..items).map(|i| format!("{group}-{i:05}")).collect();
        batch(
            &api,
            &signer,
            CommandType::WorkAuthorize,
            wis.iter()
                .map(|w| json!({"workItemId": w, "missionId": mission, "contract": contract()}))
                .collect(),
        )
        .await;
        let basis = json!({"capabilityMatches": [{"id": "cap.noop", "version": "1"}],
            "authorizationEligible": true, "availabilityEstimate": Utc::now().to_rfc3339(),
            "expectedCost": 0.0, "reliabilityEvidence": [], "policyRules": ["bench"]});
        batch(
            &api,
            &signer,
            CommandType::WorkOffer,
            wis.iter()
                .map(|w| {
                    json!({"workItemId": w, "offerId": format!("o-{w}"), "candidates": ["bench-w"],
                    "expiresAt": expires, "selectionBasis": basis})
                })
                .collect(),
        )
        .await;
        group_toml.push_str(&format!("[[group]]\nid = \"{group}\"\nweight = {weight}\n"));
    }
    println!(
        "setup: {} WorkItems authorized and offered in {:.1} s",
        items * GROUPS.len(),
        setup.elapsed().as_secs_f64()
    );
    let config = dir.path().join("worker.toml");
    std::fs::write(
        &config,
        format!(
            "authority = \"{url}\"\nagent_id = \"bench-w\"\nkey = \"bench-w.key\"\nstate_dir = \"state\"\n\
             slots = {SLOTS}\nmax_queued = 100000\npresence_seconds = 5\n{group_toml}\n\
             [[executor]]\ncapability = \"cap.noop\"\nversion = \"1\"\ncommand = [\"true\"]\ntypical_seconds = 0\n"
        ),
    )
    .expect("worker.toml");
    let worker = std::process::Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["worker", "--config"])
        .arg(&config)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(match std::env::var_os("WEFT_BENCH_WORKER_LOG") {
            Some(path) => std::process::Stdio::from(std::fs::File::create(path).expect("log")),
            None => std::process::Stdio::null(),
        })
        .spawn()
        .expect("weft worker");
    let worker = common::Process(worker);

    // Until every WorkItem was submitted (or ten minutes).
    let total = items * GROUPS.len();
    let began = std::time::Instant::now();
    let mut logs: BTreeMap<&str, Vec<(String, DateTime<Utc>)>> = BTreeMap::new();
    let mut last = (0, std::time::Instant::now());
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mut submitted = 0;
        for (group, _) in GROUPS {
            let events = log(&admin, &id(group)).await;
            submitted += events.iter().filter(|(k, _)| k == "work.submitted").count();
            logs.insert(group, events);
        }
        if submitted > last.0 {
            last = (submitted, std::time::Instant::now());
        }
        // Done, or no progress for 30 s (what is left is stuck: say so).
        if submitted >= total
            || last.1.elapsed() > Duration::from_secs(30)
            || began.elapsed() > Duration::from_secs(600)
        {
            println!("submitted {submitted} of {total}");
            break;
        }
    }
    // Where the two cores went: each process's user + system time (clock ticks of 10 ms).
    let cpu = |pid: u32| -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        // utime, stime, cutime, cstime: fields 14..17, here 11..14 after the name.
        (ticks(11) + ticks(12) + ticks(13) + ticks(14)) / 100.0
    };
    println!(
        "cpu: server {:.1} s, worker {:.1} s (with its executors) over {:.1} s",
        cpu(server_process.0.id()),
        cpu(worker.0.id()),
        began.elapsed().as_secs_f64()
    );
    let times = |group: &str, kind: &str| -> Vec<DateTime<Utc>> {
        logs[group]
            .iter()
            .filter(|(k, _)| k == kind)
            .map(|(_, at)| *at)
            .collect()
    };
    // The window in which all three Groups had runs left: from the latest first start to the
    // earliest last start.
    let from = GROUPS
        .iter()
        .filter_map(|(g, _)| times(g, "work.started").into_iter().min())
        .max()
        .expect("starts");
    let to = GROUPS
        .iter()
        .filter_map(|(g, _)| times(g, "work.started").into_iter().max())
        .min()
        .expect("starts");
    let counts: Vec<usize> = GROUPS
        .iter()
        .map(|(g, _)| {
            times(g, "work.started")
                .iter()
                .filter(|at| **at >= from && **at <= to)
                .count()
        })
        .collect();
    let sum: usize = counts.iter().sum();
    let weights: u32 = GROUPS.iter().map(|(_, w)| w).sum();
    for ((group, weight), count) in GROUPS.iter().zip(&counts) {
        let share = *count as f64 / sum.max(1) as f64;
        let want = f64::from(*weight) / f64::from(weights);
        println!(
            "fairness: {group} (weight {weight}) started {count} of {sum} runs while all were backlogged: share {share:.3}, want {want:.3}, off by {:.1} %",
            100.0 * (share - want).abs() / want
        );
    }
    println!(
        "fairness window: {:.1} s",
        (to - from).num_milliseconds() as f64 / 1000.0
    );
    let first = GROUPS
        .iter()
        .filter_map(|(g, _)| times(g, "work.started").into_iter().min())
        .min()
        .expect("a start");
    let last = GROUPS
        .iter()
        .filter_map(|(g, _)| times(g, "work.submitted").into_iter().max())
        .max()
        .expect("a submission");
    let submitted: usize = GROUPS
        .iter()
        .map(|(g, _)| times(g, "work.submitted").len())
        .sum();
    let seconds = (last - first).num_milliseconds() as f64 / 1000.0;
    println!(
        "throughput: {submitted} WorkItems submitted in {seconds:.1} s from the first start: {:.0}/s with {SLOTS} slots (goal ≥ 200/s)",
        submitted as f64 / seconds
    );
}
