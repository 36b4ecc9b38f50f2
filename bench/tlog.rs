//! Transparency-log benchmark (issue #45; not a test; `cargo bench --bench tlog`):
//!  * appends with the Merkle tree maintained: durable appends per second by 256 concurrent
//!    appenders on one on-disk store (compare `cargo bench --bench events` of a build before
//!    the tree, `WEFT_BENCH_EVENTS` the same, for the A/B);
//!  * inclusion and consistency proofs served over loopback HTTP from a log of
//!    `WEFT_BENCH_TLOG_EVENTS` Events (default 1,000,000; the goal names 10,000,000):
//!    p50 / p99 / max latency of 2,000 random proofs each, every proof checked;
//!  * checkpoints under load: while 64 appenders write, a client fetches the signed checkpoint
//!    every 100 ms for 10 s; each must verify and none may go backwards, and its latency is
//!    printed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use weft_api::Id;
use weft_api::tlog::{self, Proof};

const APPENDERS: usize = 256;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n_appends: u64 = std::env::var("WEFT_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let n_log: u64 = std::env::var("WEFT_BENCH_TLOG_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir()?;
    let mut config = server::config::Config::with_data_dir(dir.path().to_path_buf());
    config.commands_per_minute = 0;
    let store = weft_storage::Store::open(config.storage_options()).await?;
    let appends = Id::parse("g", "appends")?;
    store.directory().create_group(appends.clone()).await?;

    // 1. Durable appends with the tree, as `bench/events.rs` measures them without.
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..APPENDERS)
        .map(|_| {
            let (store, group, next) = (store.clone(), appends.clone(), Arc::clone(&next));
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::Relaxed) < n_appends {
                    store
                        .delivery()
                        .append(
                            group.clone(),
                            "bench.tick",
                            serde_json::json!({"note": "a small payload"}),
                        )
                        .await?;
                }
                Ok::<_, weft_storage::Error>(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    let append_time = started.elapsed();
    println!(
        "durable appends, tree maintained   {:.0} events/s ({APPENDERS} appenders, {n_appends} Events, {:.1} s)",
        n_appends as f64 / append_time.as_secs_f64(),
        append_time.as_secs_f64()
    );

    // 2. A big log, then proofs over HTTP.
    let big = Id::parse("g", "big")?;
    store.directory().create_group(big.clone()).await?;
    let started = Instant::now();
    weft_storage::bench_support::load_events(&store, &big, n_log).await?;
    eprintln!(
        "loaded {n_log} Events with their tree in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let state = server::AppState::new(store.clone(), "bench-admin", &config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(server::serve(
        listener,
        server::app(state),
        Duration::from_secs(10),
        Duration::from_secs(30),
        futures::future::pending(),
    ));
    let http = reqwest::Client::new();
    let authority = {
        let keys: serde_json::Value = http
            .get(format!("{base}/v1/authority/keys"))
            .send()
            .await?
            .json()
            .await?;
        weft_api::dsse::parse_public_key(keys["keys"][0]["publicKey"].as_str().unwrap_or_default())?
    };
    let checkpoint = |group: &'static str| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let started = Instant::now();
            let note = http
                .get(format!("{base}/v1/groups/{group}/tlog/checkpoint"))
                .bearer_auth("bench-admin")
                .send()
                .await?
                .error_for_status()?
                .bytes()
                .await?;
            let elapsed = started.elapsed();
            let head = tlog::open_checkpoint(&note, &authority, &tlog::origin(&authority, group))?;
            anyhow::Ok((head, elapsed))
        }
    };
    let (head, _) = checkpoint("big").await?;
    // The Group's creation, then the loaded Events.
    anyhow::ensure!(
        head.size == n_log + 1,
        "the tree holds {} leaves, not {}",
        head.size,
        n_log + 1
    );
    let n_log = head.size;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    let mut inclusion = Vec::new();
    let mut consistency = Vec::new();
    for _ in 0..2_000 {
        let sequence = 1 + random(n_log);
        let started = Instant::now();
        let proof: Proof = http
            .get(format!(
                "{base}/v1/groups/big/tlog/proof/inclusion?sequence={sequence}&size={n_log}"
            ))
            .bearer_auth("bench-admin")
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        inclusion.push(started.elapsed());
        anyhow::ensure!(proof.leaf_index == Some(sequence - 1) && !proof.hashes.is_empty());
        let from = 1 + random(n_log - 1);
        let started = Instant::now();
        let proof: Proof = http
            .get(format!(
                "{base}/v1/groups/big/tlog/proof/consistency?from={from}&to={n_log}"
            ))
            .bearer_auth("bench-admin")
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        consistency.push(started.elapsed());
        anyhow::ensure!(proof.tree_size == n_log);
    }
    // A sample of the proofs, checked against the signed root with the Events they prove.
    for sequence in [1, n_log / 2, n_log] {
        let page: weft_api::views::EventPage = http
            .get(format!(
                "{base}/v1/groups/big/events?after={}&limit=1",
                sequence - 1
            ))
            .bearer_auth("bench-admin")
            .send()
            .await?
            .json()
            .await?;
        let event = page.events[0]
            .event()
            .ok_or_else(|| anyhow::anyhow!("withheld"))?
            .clone();
        let proof: Proof = http
            .get(format!(
                "{base}/v1/groups/big/tlog/proof/inclusion?sequence={sequence}&size={n_log}"
            ))
            .bearer_auth("bench-admin")
            .send()
            .await?
            .json()
            .await?;
        tlog::check_inclusion(&proof, tlog::leaf_hash(&event.canonical_bytes()), head)?;
    }
    for (what, mut times) in [("inclusion", inclusion), ("consistency", consistency)] {
        times.sort();
        println!(
            "{what:<11} proof over HTTP, {n_log} Events   p50 {}  p99 {}  max {}",
            ms(percentile(&times, 0.5)),
            ms(percentile(&times, 0.99)),
            ms(percentile(&times, 1.0))
        );
    }

    // 3. Checkpoints while 64 appenders write.
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..64)
        .map(|_| {
            let (store, group, stop) = (store.clone(), appends.clone(), Arc::clone(&stop));
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    store
                        .delivery()
                        .append(
                            group.clone(),
                            "bench.tick",
                            serde_json::json!({"note": "load"}),
                        )
                        .await?;
                }
                Ok::<_, weft_storage::Error>(())
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut sizes = Vec::new();
    let mut ticks = tokio::time::interval(Duration::from_millis(100));
    for _ in 0..100 {
        ticks.tick().await;
        let (head, elapsed) = checkpoint("appends").await?;
        latencies.push(elapsed);
        sizes.push(head.size);
    }
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await??;
    }
    anyhow::ensure!(
        sizes.windows(2).all(|w| w[0] <= w[1]),
        "a checkpoint went backwards"
    );
    latencies.sort();
    println!(
        "signed checkpoint under 64 appenders  {} checkpoints in 10 s, tree {} → {}, latency p50 {}  p99 {}  max {}",
        latencies.len(),
        sizes[0],
        sizes[sizes.len() - 1],
        ms(percentile(&latencies, 0.5)),
        ms(percentile(&latencies, 0.99)),
        ms(percentile(&latencies, 1.0))
    );
    Ok(())
}
