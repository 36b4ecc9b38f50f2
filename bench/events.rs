//! Event-log benchmark (not a test; `cargo bench --bench events`):
//!  * durable appends per second: many concurrent appenders on one on-disk store; the writer
//!    group-commits, and each append is answered only after its batch's commit is synced;
//!  * replay throughput: one SSE subscriber over loopback reading a Group of 1,000,000 Events
//!    from `after=0` through the real HTTP server.
//!
//! `WEFT_BENCH_EVENTS=100000` scales the log down for a quick run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use weft_api::Id;

const APPENDERS: usize = 256;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n_events: u64 = std::env::var("WEFT_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir()?;
    let mut config = server::config::Config::with_data_dir(dir.path().to_path_buf());
    // The bench measures throughput: the per-Agent Command rate (issue #40) would cap it.
    config.commands_per_minute = 0;
    let store = weft_storage::Store::open(config.storage_options()).await?;
    let group = Id::parse("g", "bench")?;
    store.directory().create_group(group.clone()).await?;

    eprintln!("appending {n_events} events with {APPENDERS} concurrent appenders …");
    let started = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let appenders: Vec<_> = (0..APPENDERS)
        .map(|_| {
            let (store, group, next) = (store.clone(), group.clone(), Arc::clone(&next));
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if n >= n_events - 1 {
                        return Ok::<_, weft_storage::Error>(());
                    }
                    store
                        .delivery()
                        .append(
                            group.clone(),
                            "bench.tick",
                            serde_json::json!({"n": n, "note": "a small payload"}),
                        )
                        .await?;
                }
            })
        })
        .collect();
    for appender in appenders {
        appender.await??;
    }
    let append_time = started.elapsed();

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
    let http = reqwest::Client::new();
    eprintln!("replaying over SSE …");
    let started = Instant::now();
    let response = http
        .get(format!("{base}/v1/groups/bench/events/stream?after=0"))
        .bearer_auth("bench-admin")
        .send()
        .await?
        .error_for_status()?;
    let mut body = response.bytes_stream();
    let mut received = 0u64;
    let mut carry = 0usize; // bytes of a frame boundary split across chunks
    let mut last = [0u8; 1];
    while received < n_events {
        let Some(chunk) = body.next().await else {
            break;
        };
        let chunk = chunk?;
        // Frames end with a blank line; count "\n\n" occurrences, including across chunks.
        let mut previous = last[0];
        for &byte in chunk.iter() {
            if byte == b'\n' && previous == b'\n' {
                received += 1;
            }
            previous = byte;
        }
        last[0] = previous;
        carry += chunk.len();
    }
    let replay_time = started.elapsed();
    anyhow::ensure!(
        received >= n_events,
        "received only {received} of {n_events} events"
    );

    println!("events in the log                  {n_events}");
    println!(
        "durable appends                    {:.0} events/s ({APPENDERS} concurrent appenders, group commit, {:.1} s)",
        n_events as f64 / append_time.as_secs_f64(),
        append_time.as_secs_f64()
    );
    println!(
        "SSE replay over loopback           {:.0} events/s ({:.1} s, {:.0} MB)",
        n_events as f64 / replay_time.as_secs_f64(),
        replay_time.as_secs_f64(),
        carry as f64 / 1e6
    );
    Ok(())
}
