//! Collection benchmark (issue #46; not a test; `cargo bench --bench lifecycle`). Loads
//! `WEFT_BENCH_GC_SMALL` small artifacts (default 100,000 of 200 bytes, inline in the index)
//! and `WEFT_BENCH_GC_LARGE` large ones (default 1,000 of `WEFT_BENCH_GC_LARGE_BYTES`, 1 MiB,
//! as blob files) published in a Mission that ended 30 days ago, in a Group whose policy keeps
//! bytes one day (`bench_support::load_expired`); then starts the release `weft serve` on that
//! data directory (fsync on, timed collection off) with a Worker enrolled in another Group.
//!
//! 1. Without collection: the Worker publishes 4 KiB artifacts (one signed request each, 16
//!    connections) for `WEFT_BENCH_PUBLISH_SECONDS` (default 10), before the collection and
//!    again after it (every publication grows the index): publications per second.
//! 2. With collection: `POST /v1/admin/gc` until it disposes of nothing more, while the Worker
//!    keeps publishing the same way: blobs disposed of per second, and publications per second
//!    during the collection as a ratio to the mean of phase 1's two windows (goal ≥ 0.8×).
//!    With `WEFT_BENCH_GC_DURING_SECONDS=N` the Worker publishes only during the collection's
//!    first N seconds (the sizes collect for about an hour; publishing all that time
//!    would fill this machine's disk), and the ratio is of that window.
//!    With `WEFT_BENCH_GC_RECORDS=1` the policy keeps records two days too: the same run
//!    also disposes of every manifest's record (`records.disposed`), counted.
//! 3. Space: the bytes of blob files before and after against the large artifacts' bytes
//!    (goal: all of them), and the inline copies deleted from the index against the small
//!    artifacts' bytes (SQLite keeps the pages for its next writes; `VACUUM` would return them).

#[path = "common/weft.rs"]
#[allow(dead_code)] // the other benches' helpers
mod weft;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use weft_api::digest::Hasher;

const CONNECTIONS: usize = 16;

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Bytes of the files under `path`, recursively.
fn tree_bytes(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => tree_bytes(&entry.path()),
            Ok(meta) => meta.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Publishes 4 KiB artifacts from [`CONNECTIONS`] tasks until `stop`; answers how many.
async fn publish_until(
    client: &reqwest::Client,
    worker: &Arc<weft::Worker>,
    next: &Arc<AtomicU64>,
    stop: &Arc<AtomicBool>,
) -> u64 {
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CONNECTIONS {
        let (client, worker, next, stop, done) = (
            client.clone(),
            worker.clone(),
            next.clone(),
            stop.clone(),
            done.clone(),
        );
        tasks.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let mut bytes = vec![0u8; 4096];
                bytes[..8].copy_from_slice(&n.to_le_bytes());
                bytes[8..16].copy_from_slice(&0x0047_4342_454e_4348_u64.to_le_bytes());
                let digests = Hasher::digest(&bytes);
                let envelope = weft::manifest(&worker, &digests);
                weft::send_ok(
                    &client,
                    reqwest::Method::PUT,
                    &format!("{}/v1/artifacts/{}", worker.url, digests.blake3),
                    &worker.token,
                    &format!("multipart/form-data; boundary={}", weft::BOUNDARY),
                    weft::multipart(&envelope, &bytes),
                )
                .await;
                done.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    while let Some(task) = tasks.join_next().await {
        task.expect("publisher");
    }
    done.load(Ordering::Relaxed)
}

/// Runs `POST /v1/admin/gc` until a call disposes of nothing; answers (blobs, bytes,
/// records).
async fn collect_all(client: &reqwest::Client, url: &str, admin: &str) -> (u64, u64, u64) {
    let (mut blobs, mut bytes, mut records) = (0, 0, 0);
    for call in 1.. {
        let started = std::time::Instant::now();
        let answer = client
            .post(format!("{url}/v1/admin/gc?limit=10000"))
            .bearer_auth(admin)
            .send()
            .await
            .expect("an answer");
        let status = answer.status();
        assert!(
            status.is_success(),
            "gc call {call}: {status} after {:.1} s: {}",
            started.elapsed().as_secs_f64(),
            answer.text().await.unwrap_or_default()
        );
        let report: serde_json::Value = answer.json().await.expect("json");
        let round = report["blobs"].as_u64().expect("blobs");
        blobs += round;
        bytes += report["bytes"].as_u64().expect("bytes");
        let went: u64 = report["records"]
            .as_array()
            .expect("records")
            .iter()
            .map(|r| r["manifests"].as_u64().unwrap_or(0) + r["evidence"].as_u64().unwrap_or(0))
            .sum();
        records += went;
        eprintln!(
            "gc call {call}: {round} blobs, {went} records in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        if round == 0 && went == 0 {
            return (blobs, bytes, records);
        }
    }
    unreachable!("calls are counted without end")
}

/// The inline copies in the index and their bytes (read while the server runs, read-only).
fn inline_copies(index: &Path) -> (u64, u64) {
    let conn = rusqlite::Connection::open_with_flags(
        index,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .expect("index");
    conn.query_row(
        "SELECT COUNT(*), COALESCE(SUM(length(bytes)), 0) FROM inline_bytes",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .expect("inline copies")
}

fn main() -> anyhow::Result<()> {
    let n_small = setting("WEFT_BENCH_GC_SMALL", 100_000);
    let n_large = setting("WEFT_BENCH_GC_LARGE", 1_000);
    let large_size = setting("WEFT_BENCH_GC_LARGE_BYTES", 1 << 20) as usize;
    let seconds = setting("WEFT_BENCH_PUBLISH_SECONDS", 10);
    let pause = setting("WEFT_BENCH_GC_PAUSE_RATIO", 8).to_string();
    // With records: the policy keeps records two days too, so the collection also disposes
    // of every manifest's signed envelope (issue #46, `artifacts/records.rs`).
    let with_records = setting("WEFT_BENCH_GC_RECORDS", 0) == 1;
    let during_for = setting("WEFT_BENCH_GC_DURING_SECONDS", 0);
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    let runtime = tokio::runtime::Runtime::new()?;

    eprintln!("loading {n_small} small and {n_large} large expired artifacts");
    let loading = Instant::now();
    let expired = runtime.block_on(async {
        let config = server::config::Config::with_data_dir(data.clone());
        let store = weft_storage::Store::open(config.storage_options()).await?;
        let expired = weft_storage::bench_support::load_expired(
            &store,
            n_small,
            200,
            n_large,
            large_size,
            with_records.then_some(2 * 86_400),
        )
        .await?;
        drop(store);
        anyhow::Ok(expired)
    })?;
    eprintln!("loaded in {:.1} s", loading.elapsed().as_secs_f64());
    let files_before = tree_bytes(&data.join("blobs"));
    let inline_before = inline_copies(&data.join("index.sqlite"));

    let (_server, url) = weft::start_weft_with(
        dir.path(),
        &[
            "--commands-per-minute",
            "0",
            "--gc-interval-secs",
            "0",
            "--gc-pause-ratio",
            &pause,
        ],
        &[],
    );
    let worker = Arc::new(weft::enrol(dir.path(), &url));
    let admin = std::fs::read_to_string(data.join("admin.token"))?
        .trim()
        .to_owned();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(CONNECTIONS + 1)
        .build()?;
    let next = Arc::new(AtomicU64::new(0));

    // 1. Publications alone, for `seconds` (again after the collection: the index grows by
    // every publication, so the baseline is measured on both sides of it).
    let alone_for = |seconds: u64| {
        let stop = Arc::new(AtomicBool::new(false));
        runtime.block_on(async {
            let timer = {
                let stop = stop.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs(seconds)).await;
                    stop.store(true, Ordering::Relaxed);
                })
            };
            let started = Instant::now();
            let n = publish_until(&client, &worker, &next, &stop).await;
            timer.await.expect("timer");
            n as f64 / started.elapsed().as_secs_f64()
        })
    };
    let before = alone_for(seconds);

    // 2. Collection while publishing.
    let stop = Arc::new(AtomicBool::new(false));
    let (during, collected, took) = runtime.block_on(async {
        let publishing = {
            let (client, worker, next, stop) =
                (client.clone(), worker.clone(), next.clone(), stop.clone());
            tokio::spawn(async move {
                let started = Instant::now();
                let n = publish_until(&client, &worker, &next, &stop).await;
                (n, started.elapsed())
            })
        };
        // Publishing stops after `during_for` seconds, if set: at the sizes the
        // collection takes about an hour, and 4 KiB publications from 16 connections for
        // that long would write more than this machine's free disk.
        if during_for > 0 {
            let stop = stop.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(during_for)).await;
                stop.store(true, Ordering::Relaxed);
            });
        }
        let started = Instant::now();
        let collected = collect_all(&client, &url, &admin).await;
        let took = started.elapsed();
        stop.store(true, Ordering::Relaxed);
        let (n, published_for) = publishing.await.expect("publishers");
        (n as f64 / published_for.as_secs_f64(), collected, took)
    });
    let after = alone_for(seconds);
    let alone = (before + after) / 2.0;
    let files_after = tree_bytes(&data.join("blobs"));
    let inline_after = inline_copies(&data.join("index.sqlite"));

    let named = expired.small + expired.large;
    println!(
        "collection of {} small ({} B each, inline) and {} large ({} B each, files) expired artifacts, while a Worker publishes 4 KiB artifacts from {CONNECTIONS} connections (--gc-pause-ratio {pause})",
        expired.small, 200, expired.large, large_size
    );
    println!(
        "  disposed of: {} of {named} blobs, {} bytes, in {:.1} s: {:.0} blobs/s",
        collected.0,
        collected.1,
        took.as_secs_f64(),
        collected.0 as f64 / took.as_secs_f64()
    );
    if with_records {
        println!(
            "  records (manifests' signed envelopes, keepRecords 2d) disposed of: {} of {named}",
            collected.2
        );
    }
    let window = if during_for > 0 && during_for < took.as_secs() {
        format!(
            " (its first {during_for} s; the rest of the collection ran with nobody publishing)"
        )
    } else {
        String::new()
    };
    println!(
        "  publications: {before:.0}/s alone before, {after:.0}/s alone after, {during:.0}/s during collection{window}: {:.2}× their mean (goal ≥ 0.8×)",
        during / alone
    );
    let returned = files_before.saturating_sub(files_after);
    println!(
        "  blob files: {returned} of the {} bytes the policy names returned: {:.3} (goal 1)",
        expired.large_bytes,
        returned as f64 / expired.large_bytes.max(1) as f64
    );
    // The Worker's own 4 KiB publications are inline too: count only what went.
    let inline_returned = inline_before.1.saturating_sub(
        inline_after
            .1
            .saturating_sub((next.load(Ordering::Relaxed)) * 4096),
    );
    println!(
        "  index: inline copies {} before, {} after ({} of them the Worker's 4 KiB publications); {inline_returned} of the {} inline bytes the policy names deleted: {:.3} (goal 1; SQLite keeps the pages for its next writes)",
        inline_before.0,
        inline_after.0,
        next.load(Ordering::Relaxed),
        expired.small_bytes,
        inline_returned as f64 / expired.small_bytes.max(1) as f64
    );
    Ok(())
}
