//! Verified Range reads (issue #15; not a test; `cargo bench --bench range`): a 1 GiB blob
//! stored through the Store (local backend, fsync on), then 64 KiB ranges at random offsets
//! read and verified through the blob's outboard, against the full re-hash range read of
//! before (the baseline) in the same run. Prints p50/p99 per range and the ratio. Then a
//! proof of the whole blob, streamed window by window, against the verified GET of the whole
//! blob in the same run (both read every byte; the proof also re-reads hash pairs and writes
//! them out).
//!
//! `WEFT_BENCH_RANGE_MIB=256` scales the blob down; `WEFT_BENCH_RANGES=1000` sets the count.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt as _;
use weft_api::Digest;
use weft_storage::{Options, Reader, Store, Uploader};

const RANGE: u64 = 64 * 1024;
const BASELINE_READS: usize = 5;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn drain(
    mut body: futures::stream::BoxStream<'static, Result<Bytes, weft_storage::Error>>,
) -> Result<Vec<u8>, weft_storage::Error> {
    let mut out = Vec::with_capacity(RANGE as usize);
    while let Some(chunk) = body.next().await {
        out.extend_from_slice(&chunk?);
    }
    Ok(out)
}

/// Bytes a body yields, not kept: a whole-blob read stays flat in memory.
async fn count(
    mut body: futures::stream::BoxStream<'static, Result<Bytes, weft_storage::Error>>,
) -> Result<u64, weft_storage::Error> {
    let mut n = 0;
    while let Some(chunk) = body.next().await {
        n += chunk?.len() as u64;
    }
    Ok(n)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let size = env("WEFT_BENCH_RANGE_MIB", 1024) * 1024 * 1024;
    let n_ranges = env("WEFT_BENCH_RANGES", 1000) as usize;
    let dir = tempfile::tempdir()?;
    let store = Store::open(Options::on_disk(dir.path())).await?;

    // The blob: pseudo-random 1 MiB pieces, streamed through the upload path.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut piece = move || {
        let mut bytes = vec![0u8; 1024 * 1024];
        for word in bytes.chunks_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            word.copy_from_slice(&state.to_le_bytes());
        }
        Bytes::from(bytes)
    };
    let pieces: Vec<Result<Bytes, std::io::Error>> =
        (0..size / (1024 * 1024)).map(|_| Ok(piece())).collect();
    let started = Instant::now();
    let outcome = store
        .artifacts()
        .upload(futures::stream::iter(pieces), None, Uploader::Admin)
        .await?;
    let upload = started.elapsed();
    let id = outcome.digests.blake3;
    weft_storage::bench_support::cite_blob(&store, id).await?;

    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut offsets = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % (size - RANGE)
    };
    // Warm-up: one verified range so the first sample pays no one-time costs.
    let content = store
        .artifacts()
        .open_content(Digest::Blake3(id), &Reader::Admin)
        .await?;
    drain(content.into_body(Some(0..RANGE))).await?;

    let mut verified = Vec::with_capacity(n_ranges);
    let mut verified_only = Vec::with_capacity(n_ranges);
    for _ in 0..n_ranges {
        let start = offsets();
        let range = start..start + RANGE;
        let started = Instant::now();
        let content = store
            .artifacts()
            .open_content(Digest::Blake3(id), &Reader::Admin)
            .await?;
        let opened = started.elapsed();
        let bytes = drain(content.into_body(Some(range.clone()))).await?;
        let total = started.elapsed();
        assert_eq!(bytes.len() as u64, RANGE);
        verified.push(total);
        verified_only.push(total - opened);
    }
    verified.sort();
    verified_only.sort();

    let mut baseline = Vec::with_capacity(BASELINE_READS);
    for _ in 0..BASELINE_READS {
        let start = offsets();
        let range = start..start + RANGE;
        let started = Instant::now();
        let content = store
            .artifacts()
            .open_content(Digest::Blake3(id), &Reader::Admin)
            .await?;
        let body = weft_storage::bench_support::full_rehash_range(content, range.clone());
        let bytes = drain(body).await?;
        baseline.push(started.elapsed());
        // Both paths serve the same bytes.
        let content = store
            .artifacts()
            .open_content(Digest::Blake3(id), &Reader::Admin)
            .await?;
        assert_eq!(bytes, drain(content.into_body(Some(range))).await?);
    }
    baseline.sort();

    // A proof of the whole blob against the verified GET of it, twice each, interleaved.
    let (mut proof_times, mut get_times, mut encoded) = (Vec::new(), Vec::new(), 0);
    for _ in 0..2 {
        let started = Instant::now();
        let content = store
            .artifacts()
            .open_content(Digest::Blake3(id), &Reader::Admin)
            .await?;
        encoded = count(content.proof(None).await?).await?;
        proof_times.push(started.elapsed());
        let started = Instant::now();
        let content = store
            .artifacts()
            .open_content(Digest::Blake3(id), &Reader::Admin)
            .await?;
        assert_eq!(count(content.into_body(None)).await?, size);
        get_times.push(started.elapsed());
    }
    let (proof_time, get_time) = (
        proof_times.iter().min().copied().unwrap_or_default(),
        get_times.iter().min().copied().unwrap_or_default(),
    );

    let outboard = std::fs::metadata(dir.path().join("outboards").join(id.hex()))?.len();
    println!(
        "blob: {} MiB uploaded in {:.2?} ({:.0} MB/s, outboard {} KiB)",
        size >> 20,
        upload,
        size as f64 / upload.as_secs_f64() / 1e6,
        outboard / 1024
    );
    println!(
        "verified 64 KiB range, {n_ranges} random offsets (open_content + read + verify): p50 {:.3?}  p99 {:.3?}",
        percentile(&verified, 0.5),
        percentile(&verified, 0.99)
    );
    println!(
        "  of which the read and verification alone: p50 {:.3?}  p99 {:.3?}",
        percentile(&verified_only, 0.5),
        percentile(&verified_only, 0.99)
    );
    println!(
        "baseline (full re-hash per range), {BASELINE_READS} reads: p50 {:.3?}  p99 {:.3?}",
        percentile(&baseline, 0.5),
        percentile(&baseline, 0.99)
    );
    println!(
        "ratio baseline p50 / verified p50: {:.0}x",
        percentile(&baseline, 0.5).as_secs_f64() / percentile(&verified, 0.5).as_secs_f64()
    );
    println!(
        "proof of the whole blob, streamed ({} MiB of encoding, best of 2): {:.0} MB/s of blob; verified GET of the whole blob: {:.0} MB/s; proof / GET {:.2}x",
        encoded >> 20,
        size as f64 / proof_time.as_secs_f64() / 1e6,
        size as f64 / get_time.as_secs_f64() / 1e6,
        get_time.as_secs_f64() / proof_time.as_secs_f64()
    );
    Ok(())
}
