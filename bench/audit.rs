//! Audit-bundle benchmark (issue #45; not a test; `cargo bench --bench audit`): a Mission of
//! `WEFT_BENCH_AUDIT_EVENTS` Events (default 10,000: signed `work.progress` Commands through
//! the real server, 16 at a time) is exported with `weft audit export` (every Event with its
//! inclusion proof) and checked with `weft audit verify` with the server stopped; prints each
//! one's wall time and the bundle's size. Goal: each under 5 s at 10,000 Events.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

#[path = "common/weft.rs"]
#[allow(dead_code)] // `start_weft`, `manifest`, `multipart`: other benches' parts
mod weft;

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("WEFT_BENCH_AUDIT_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, url) = weft::start_weft_with(dir.path(), &["--commands-per-minute", "0"], &[]);
    let worker = weft::enrol(dir.path(), &url);
    eprintln!("appending {n} work.progress Events to Mission m1 …");
    let commands = Arc::new(weft::progress_commands(&worker, n));
    let next = Arc::new(AtomicUsize::new(0));
    let client = reqwest::Client::new();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let (client, commands, next) = (client.clone(), commands.clone(), next.clone());
        let (url, token) = (format!("{url}/v1/groups/g1/commands"), worker.token.clone());
        tasks.spawn(async move {
            while let Some(body) = commands.get(next.fetch_add(1, Ordering::Relaxed)) {
                weft::send_ok(
                    &client,
                    reqwest::Method::POST,
                    &url,
                    &token,
                    "application/json",
                    body.clone(),
                )
                .await;
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("task");
    }
    let bundle = dir.path().join("m1.audit.tar");
    let bundle_arg = bundle.to_str().expect("utf-8");
    let started = Instant::now();
    let exported = weft::cli(
        &worker.home,
        &url,
        &["audit", "export", "--mission", "m1", "-o", bundle_arg],
    );
    let export_time = started.elapsed();
    drop(server);
    let started = Instant::now();
    let pin = {
        let secret =
            std::fs::read_to_string(dir.path().join("data/authority.key")).expect("authority.key");
        let secret: [u8; 32] = base64::Engine::decode(&weft_api::dsse::BASE64, secret.trim())
            .expect("base64")
            .try_into()
            .expect("32 bytes");
        base64::Engine::encode(
            &weft_api::dsse::BASE64,
            ed25519_dalek::SigningKey::from_bytes(&secret)
                .verifying_key()
                .as_bytes(),
        )
    };
    let verified = weft::cli(
        &worker.home,
        "http://127.0.0.1:9",
        &["audit", "verify", bundle_arg, "--authority-key", &pin],
    );
    let verify_time = started.elapsed();
    assert!(verified.starts_with("ok:"), "{verified}");
    let size = std::fs::metadata(&bundle).expect("bundle").len();
    println!("{}", exported.trim());
    println!(
        "audit bundle of Mission m1          export {:.2} s, verify (no server) {:.2} s, {:.1} MB",
        export_time.as_secs_f64(),
        verify_time.as_secs_f64(),
        size as f64 / 1e6
    );
}
