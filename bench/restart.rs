//! Restart benchmark (not a test; `cargo bench --bench restart`, issue #15): the time from
//! `Store::open` to a store whose lineage index is ready, at 1,000,000 artifacts, from the
//! index's snapshot and, in the same run and on the same database, by the full rebuild from
//! the tables that the snapshot replaces (the baseline). Rounds alternate the two; each checks
//! how the index was made ready and that both answer a sample of queries identically. Prints
//! the medians and their ratio. `WEFT_BENCH_ARTIFACTS=100000` for a quick run.

use std::path::Path;
use std::time::{Duration, Instant};

use weft_api::{ArtifactId, Digest};
use weft_storage::bench_support::load_synthetic_dag;
use weft_storage::{Direction, LineageQuery, LineageStart, Options, Reader, Store};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The lineage of `id` as the admin sees it, `depth` steps in `direction`, at most `limit`.
async fn lineage(
    store: &Store,
    id: &ArtifactId,
    direction: Direction,
    depth: u32,
    limit: usize,
) -> anyhow::Result<weft_storage::Lineage> {
    let query = LineageQuery {
        direction,
        depth: Some(depth),
        limit,
        skip: 0,
        budget: Duration::from_secs(5),
        edges: None,
        as_of: None,
        mission: None,
    };
    Ok(store
        .lineage()
        .lineage(Digest::Blake3(*id), query, &Reader::Admin)
        .await?)
}

/// Ancestors and descendants of a spread of artifacts, as the admin sees them.
async fn sample_answers(store: &Store, ids: &[ArtifactId]) -> anyhow::Result<Vec<String>> {
    let mut answers = Vec::new();
    for id in ids.iter().step_by((ids.len() / 50).max(1)) {
        for direction in [Direction::Ancestors, Direction::Descendants] {
            let answer = lineage(store, id, direction, 10, 1000).await?;
            answers.push(serde_json::to_string(&answer)?);
        }
    }
    Ok(answers)
}

/// Mean time of a depth-0 lineage query (the root's lookup by id, its visibility and its
/// answer) over `n` artifacts spread through `ids`: a snapshot-loaded index finds ids in its
/// sorted run (a bucket table, then bisection), a rebuilt one by hashing.
async fn root_lookup(store: &Store, ids: &[ArtifactId], n: usize) -> anyhow::Result<Duration> {
    let step = (ids.len() / n.max(1)).max(1);
    let started = Instant::now();
    let mut queries = 0u32;
    for id in ids.iter().step_by(step) {
        std::hint::black_box(lineage(store, id, Direction::Ancestors, 0, 1).await?);
        queries += 1;
    }
    Ok(started.elapsed() / queries.max(1))
}

/// Opens the store in `dir`, timing `Store::open` (the server answers as soon as it returns).
async fn open_timed(dir: &Path) -> anyhow::Result<(Store, Duration)> {
    let started = Instant::now();
    let store = Store::open(Options::on_disk(dir)).await?;
    Ok((store, started.elapsed()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n = env("WEFT_BENCH_ARTIFACTS", 1_000_000);
    let rounds = env("WEFT_BENCH_ROUNDS", 3).max(1);
    let dir = tempfile::tempdir()?;
    let store = Store::open(Options::on_disk(dir.path())).await?;
    eprintln!("loading {n} artifacts …");
    let dag = load_synthetic_dag(&store, n, 7).await?;
    let started = Instant::now();
    let saved = store
        .lineage()
        .save_lineage_snapshot()
        .await?
        .ok_or_else(|| anyhow::anyhow!("no snapshot written"))?;
    let save_time = started.elapsed();
    drop(store);
    let snapshot = dir.path().join("index.sqlite-lineage");
    let aside = dir.path().join("lineage-snapshot-aside");

    println!("artifacts                         {n}");
    println!("derivation edges                  {}", dag.edges);
    println!(
        "snapshot                          {:.0} MiB, written in {:.2} s (catch-up, encode, write, fsync, rename)",
        saved.bytes as f64 / (1024.0 * 1024.0),
        save_time.as_secs_f64()
    );
    let (mut from_snapshot, mut rebuilt) = (Vec::new(), Vec::new());
    let (mut lookup_snapshot, mut lookup_rebuilt) = (Vec::new(), Vec::new());
    let lookups = env("WEFT_BENCH_LOOKUPS", 100_000);
    for round in 0..rounds {
        let (store, took) = open_timed(dir.path()).await?;
        anyhow::ensure!(
            store.lineage().lineage_start() == LineageStart::FromSnapshot { caught_up: 0 },
            "round {round}: {:?}",
            store.lineage().lineage_start()
        );
        let with_snapshot = sample_answers(&store, &dag.ids).await?;
        lookup_snapshot.push(root_lookup(&store, &dag.ids, lookups).await?);
        drop(store);
        from_snapshot.push(took);

        std::fs::rename(&snapshot, &aside)?;
        let (store, took) = open_timed(dir.path()).await?;
        anyhow::ensure!(
            matches!(
                store.lineage().lineage_start(),
                LineageStart::Rebuilt { .. }
            ),
            "round {round}: {:?}",
            store.lineage().lineage_start()
        );
        anyhow::ensure!(
            sample_answers(&store, &dag.ids).await? == with_snapshot,
            "round {round}: the snapshot and the rebuild answer differently"
        );
        lookup_rebuilt.push(root_lookup(&store, &dag.ids, lookups).await?);
        drop(store);
        std::fs::rename(&aside, &snapshot)?;
        rebuilt.push(took);
        eprintln!(
            "round {round}: snapshot {:.3} s, rebuild {:.3} s",
            from_snapshot[round].as_secs_f64(),
            rebuilt[round].as_secs_f64()
        );
    }
    let (snapshot_median, rebuild_median) = (median(from_snapshot), median(rebuilt));
    println!(
        "ready after open, from the snapshot  {:.3} s (median of {rounds})",
        snapshot_median.as_secs_f64()
    );
    println!(
        "ready after open, full rebuild       {:.3} s (median of {rounds}; the baseline)",
        rebuild_median.as_secs_f64()
    );
    println!(
        "rebuild / snapshot                   {:.1}x",
        rebuild_median.as_secs_f64() / snapshot_median.as_secs_f64()
    );
    let (lookup_snapshot, lookup_rebuilt) = (median(lookup_snapshot), median(lookup_rebuilt));
    println!(
        "depth-0 query, snapshot's index      {:.2} us (ids by bucket and bisection; median of {rounds} means of {lookups})",
        lookup_snapshot.as_secs_f64() * 1e6
    );
    println!(
        "depth-0 query, rebuilt index         {:.2} us (ids hashed; the baseline)",
        lookup_rebuilt.as_secs_f64() * 1e6
    );
    println!(
        "snapshot's / rebuilt                 {:.2}x",
        lookup_snapshot.as_secs_f64() / lookup_rebuilt.as_secs_f64()
    );
    Ok(())
}
