//! Read timing across Groups (issue #40; not a test; `cargo bench --bench side_channel`):
//! from a session of Group `other`, how long `GET /v1/artifacts/{d}` and its `/content` take
//! (through the Store, without HTTP's noise) for digests Group `bench` holds against digests
//! nobody holds, interleaved, and how well a threshold between the two medians tells them
//! apart (50 % is a coin toss). The outside review classified 24 of 24 digests over HTTP
//! before reads decided visibility in their first lookup (`storage/src/artifacts/visible.rs`).
//!
//! `WEFT_BENCH_SAMPLES=2000` sets the samples per kind and route.

use std::time::{Duration, Instant};

use weft_api::{ArtifactId, Digest, Id};
use weft_storage::bench_support::load_synthetic_dag;
use weft_storage::{MissionScope, Options, Reader, Store};

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// The share of samples a threshold halfway between the medians classifies correctly.
fn accuracy(held: &[Duration], absent: &[Duration]) -> f64 {
    let (mut held_sorted, mut absent_sorted) = (held.to_vec(), absent.to_vec());
    let (h, a) = (median(&mut held_sorted), median(&mut absent_sorted));
    let threshold = (h + a) / 2;
    let held_above = h >= a;
    let right = held
        .iter()
        .filter(|d| (**d >= threshold) == held_above)
        .count()
        + absent
            .iter()
            .filter(|d| (**d >= threshold) != held_above)
            .count();
    right as f64 / (held.len() + absent.len()) as f64
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let samples: usize = std::env::var("WEFT_BENCH_SAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let dir = tempfile::tempdir()?;
    let store = Store::open(Options::on_disk(dir.path())).await?;
    let dag = load_synthetic_dag(&store, 10_000, 7).await?;
    let other = Id::parse("groupId", "other")?;
    store.directory().create_group(other.clone()).await?;
    let reader = Reader::Agent {
        agent_id: Id::parse("agentId", "reader")?,
        group_id: other,
        scope: MissionScope::Group,
    };
    println!("read timing from another Group, {samples} samples per kind, interleaved");
    for route in ["artifact", "content"] {
        let (mut held, mut absent) = (Vec::new(), Vec::new());
        for i in 0..samples * 2 {
            let digest = if i % 2 == 0 {
                Digest::Blake3(dag.ids[(i / 2 * 7919) % dag.ids.len()])
            } else {
                Digest::Blake3(ArtifactId(
                    *blake3::hash(&(i as u64).to_be_bytes()).as_bytes(),
                ))
            };
            let start = Instant::now();
            let found = match route {
                "artifact" => store.artifacts().artifact(digest, &reader).await.is_ok(),
                _ => store
                    .artifacts()
                    .open_content(digest, &reader)
                    .await
                    .is_ok(),
            };
            let took = start.elapsed();
            assert!(!found, "another Group's artifact must not be visible");
            if i % 2 == 0 {
                held.push(took)
            } else {
                absent.push(took)
            }
        }
        let accuracy = accuracy(&held, &absent);
        let (h, a) = (median(&mut held), median(&mut absent));
        println!(
            "{route:>8}: held by another Group p50 {h:?}, absent p50 {a:?}, ratio {:.3}, a threshold between them classifies {:.1} %",
            h.as_secs_f64() / a.as_secs_f64(),
            accuracy * 100.0
        );
    }
    Ok(())
}
