//! Lineage benchmark (not a test; `cargo bench --bench lineage`): a synthetic DAG of
//! 1,000,000 artifacts (each derived from 0–3 earlier ones) written into the real tables by a
//! bulk loader, then ancestors and descendants queries at depth 10 and unbounded (limit 1000)
//! through the in-memory index (`Store::lineage`, what the HTTP route calls), next to the
//! same queries as SQLite recursive CTEs over the same tables. Prints p50/p99, the ratios and
//! the memory the index takes. `WEFT_BENCH_ARTIFACTS=100000` for a quick run.

use std::time::{Duration, Instant};

use weft_api::{Digest, Id};
use weft_storage::bench_support::{cte_lineage, load_synthetic_dag};
use weft_storage::{Direction, LineageQuery, Reader};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::var("WEFT_BENCH_ARTIFACTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    // For profiling the index alone: `WEFT_BENCH_INDEX_ONLY=1` skips the CTE side.
    let index_only = std::env::var_os("WEFT_BENCH_INDEX_ONLY").is_some();
    let queries: usize = std::env::var("WEFT_BENCH_QUERIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let dir = tempfile::tempdir()?;
    let store = weft_storage::Store::open(weft_storage::Options::on_disk(dir.path())).await?;
    eprintln!("loading {n} artifacts …");
    let started = Instant::now();
    let dag = load_synthetic_dag(&store, n, 7).await?;
    let ids = dag.ids;
    eprintln!("loaded in {:.1} s", started.elapsed().as_secs_f64());
    // A member of the Group, so both sides pay for access checks.
    let agent = Id::parse("agentId", "bench-agent")?;
    store
        .directory()
        .set_membership(
            Id::parse("groupId", "bench")?,
            agent.clone(),
            vec![weft_api::session::Role::Auditor],
        )
        .await?;
    let reader = Reader::Agent {
        agent_id: agent,
        group_id: Id::parse("groupId", "bench")?,
        scope: weft_storage::MissionScope::Group,
    };

    println!("artifacts                          {n}");
    println!("derivation edges                   {}", dag.edges);
    println!(
        "index rebuild from the tables      {:.1} s (what a restart pays)",
        dag.index_rebuild.as_secs_f64()
    );
    println!(
        "lineage index memory               {:.0} MiB counted, {} measured (RSS growth while built)",
        store.lineage().lineage_index_bytes() as f64 / (1024.0 * 1024.0),
        dag.index_rss_bytes.map_or("n/a".to_owned(), |b| format!(
            "{:.0} MiB",
            b as f64 / (1024.0 * 1024.0)
        ))
    );
    for (label, descendants, depth) in [
        ("ancestors, depth 10", false, Some(10)),
        ("descendants, depth 10", true, Some(10)),
        ("ancestors, unbounded", false, None),
        ("descendants, unbounded", true, None),
    ] {
        let mut index_times = Vec::with_capacity(queries);
        let mut cte_times = Vec::with_capacity(queries);
        let mut sizes = Vec::with_capacity(queries);
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..queries {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Ancestors from late nodes and descendants from early ones: the deep, wide cases.
            let position = if descendants {
                (state % (n as u64 / 10).max(1)) as usize
            } else {
                n - 1 - (state % (n as u64 / 10).max(1)) as usize
            };
            let root = ids[position];
            let query = LineageQuery {
                direction: if descendants {
                    Direction::Descendants
                } else {
                    Direction::Ancestors
                },
                depth,
                limit: 1000,
                skip: 0,
                budget: Duration::from_secs(5),
                edges: None,
                as_of: None,
                mission: None,
            };
            let started = Instant::now();
            let answer = store
                .lineage()
                .lineage(Digest::Blake3(root), query, &reader)
                .await?;
            index_times.push(started.elapsed());
            let started = Instant::now();
            let reached = if index_only {
                0
            } else {
                cte_lineage(&store, root, descendants, depth, 1001, &reader).await?
            };
            cte_times.push(started.elapsed());
            sizes.push((answer.artifacts.len(), answer.edges.len(), reached));
        }
        // Median answer sizes: artifacts and typed edges in the index answer, rows of the CTE.
        let median = |mut v: Vec<usize>| {
            v.sort_unstable();
            v.get(v.len() / 2).copied().unwrap_or(0)
        };
        let (artifacts, edges, rows) = (
            median(sizes.iter().map(|s| s.0).collect()),
            median(sizes.iter().map(|s| s.1).collect()),
            median(sizes.iter().map(|s| s.2).collect()),
        );
        index_times.sort();
        cte_times.sort();
        let (i50, i99, c50, c99) = (
            percentile(&index_times, 0.5),
            percentile(&index_times, 0.99),
            percentile(&cte_times, 0.5),
            percentile(&cte_times, 0.99),
        );
        println!(
            "{label:<24} index p50 {:7.3} ms p99 {:7.3} ms | recursive CTE p50 {:8.3} ms p99 {:8.3} ms | CTE/index p50 {:6.1}x p99 {:6.1}x | median answer {artifacts} artifacts, {edges} edges; CTE {rows} rows",
            ms(i50),
            ms(i99),
            ms(c50),
            ms(c99),
            c50.as_secs_f64() / i50.as_secs_f64(),
            c99.as_secs_f64() / i99.as_secs_f64()
        );
    }
    Ok(())
}
