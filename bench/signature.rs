//! The signature check of every publication (issue #15; not a test; `cargo bench --bench
//! signature`): a DSSE envelope of a typical manifest-sized payload verified as the server
//! verifies a manifest (`Envelope::verify`: payload type, keyid, base64, PAE, `verify_strict`),
//! against signing the same payload, the baseline, in the same run. Signing multiplies by the
//! base point through curve25519-dalek's precomputed table, the same code on every backend;
//! verifying runs the variable-base double multiplication that the backend chosen at build
//! time and at run time (portable, AVX2 or AVX-512 IFMA) decides. The ratio shows which one
//! this build and CPU use without trusting the clock of a shared machine.
//!
//! `WEFT_BENCH_SIGNATURES=20000` sets the count. Compare backends by rebuilding with
//! `RUSTFLAGS='--cfg curve25519_dalek_backend="simd"'` (AVX2 at most), which replaces the
//! `.cargo/config.toml` flags that also let it pick IFMA.

use std::hint::black_box;
use std::time::{Duration, Instant};

use ed25519_dalek::SigningKey;
use weft_api::Envelope;
use weft_api::dsse::MANIFEST_TYPE;

fn per_call(count: u32, mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..count {
        f();
    }
    start.elapsed() / count
}

fn main() {
    let count: u32 = std::env::var("WEFT_BENCH_SIGNATURES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let key = SigningKey::from_bytes(&[7; 32]);
    let public = key.verifying_key();
    // About the size of the side-by-side bench's manifests.
    let payload = vec![b'x'; 900];
    let envelope = Envelope::sign(&key, MANIFEST_TYPE, &payload);
    envelope
        .verify(MANIFEST_TYPE, &public)
        .expect("a fresh signature verifies");

    println!("Ed25519 over a 900-byte DSSE payload, {count} calls per round, 3 rounds");
    let mut ratios = Vec::new();
    for round in 1..=3 {
        let sign = per_call(count, || {
            black_box(Envelope::sign(&key, MANIFEST_TYPE, black_box(&payload)));
        });
        let verify = per_call(count, || {
            black_box(
                black_box(&envelope)
                    .verify(MANIFEST_TYPE, &public)
                    .expect("verifies"),
            );
        });
        let ratio = verify.as_secs_f64() / sign.as_secs_f64();
        println!(
            "  round {round}: sign {:.1} µs, verify (the server's check) {:.1} µs, verify / sign {ratio:.2}",
            sign.as_secs_f64() * 1e6,
            verify.as_secs_f64() * 1e6,
        );
        ratios.push(ratio);
    }
    ratios.sort_by(f64::total_cmp);
    println!("verify / sign, median of the rounds: {:.2}", ratios[1]);
}
