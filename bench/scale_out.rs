//! Scale-out benchmark for issue #43 (not a test; `cargo bench --bench scale_out`): in one
//! run, one `weft serve` on SQLite + local disk (the baseline), then one, two and three
//! `weft serve` over one PostgreSQL database and one Garage bucket, each measured with the
//! same two loads from 64 concurrent connections, request `i` sent to server `i % n`:
//! - signed `work.progress` Commands (pre-signed before the clock: the load generator shares
//!   the machine's cores, so only the server's work is timed), each durable before its 201;
//! - one-request 4 KiB publications (`PUT /v1/artifacts/{digest}`, manifest and bytes in one
//!   multipart body, signed before the clock), inline in the index on both engines.
//!
//! Then three Groups on one server and on three, Group `g` routed to server `g` (as a load
//! balancer routing by Group would): a Group's writes are serial in the database (its row
//! lock, held by a writer's batch to its commit), so more servers add writers only across
//! Groups.
//!
//! Prints requests per second and p50/p99 latency per configuration, and the ratios the
//! issue sets goals on: three PostgreSQL servers against one, one PostgreSQL server against
//! SQLite, and three servers against one with three Groups. PostgreSQL runs from the distribution's binaries in a throwaway cluster
//! (`weft_testkit`, fsync on), Garage likewise; without them the bench says so and measures
//! SQLite only. Last, one server on one Group again, reaching PostgreSQL through its Unix
//! socket (as a PostgreSQL on the same machine is by default) instead of TCP on loopback.
//! Knobs: `WEFT_BENCH_REQUESTS` (per load and configuration, default 2000) and
//! `WEFT_BENCH_WORK_ITEMS` (WorkItems each Group's progress reports are spread over, each
//! under its own lease: default 1; 32 measured the same on PostgreSQL at stop 71, so one hot
//! row is not what bounds it).

#[path = "common/weft.rs"]
#[allow(dead_code)]
// `start_weft`, `command`: every server here takes flags, every Command is progress
mod weft;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const CONNECTIONS: usize = 64;
/// Round trips a `work.progress` takes on PostgreSQL when it is alone in its transaction: 22
/// statements, the changes and the reads sent ahead (`src/http/tests/statements.rs` holds it
/// under a ceiling; in a batch of the writer's, the transaction's own are shared by its jobs).
const PROGRESS_ROUND_TRIPS: u32 = 7;
const SMALL: usize = 4096;

/// No per-Agent Command rate: the bench's one worker sends thousands a second.
const UNLIMITED: &[&str] = &["--commands-per-minute", "0"];

/// What one load measured.
#[derive(Clone, Copy, Debug)]
struct Measured {
    per_second: f64,
    p50: Duration,
    p99: Duration,
}

/// One pre-signed request: method, URL, content type, body, and the session it goes with.
type Request = (reqwest::Method, String, String, bytes::Bytes, String);

/// Sends `requests` in order on [`CONNECTIONS`] tasks; every answer must be a success.
async fn measure(client: &reqwest::Client, requests: Vec<Request>) -> Measured {
    let requests = Arc::new(requests);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CONNECTIONS {
        let (client, requests, next) = (client.clone(), Arc::clone(&requests), Arc::clone(&next));
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((method, url, content_type, body, token)) = requests.get(i) else {
                    return latencies;
                };
                let sent = Instant::now();
                weft::send_ok(
                    &client,
                    method.clone(),
                    url,
                    token,
                    content_type,
                    body.clone(),
                )
                .await;
                latencies.push(sent.elapsed());
            }
        });
    }
    let mut latencies = Vec::new();
    while let Some(done) = tasks.join_next().await {
        latencies.extend(done.expect("task"));
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let at = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize];
    Measured {
        per_second: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: at(0.5),
        p99: at(0.99),
    }
}

/// Runs both loads against `urls` (the first one enrolled the workers in `dir`): with one
/// Group, request `i` goes to server `i % n`; with `groups` = `n` Groups, request `i` is of
/// Group `i % n` and goes to that Group's server (a load balancer routing by Group).
fn run_loads(
    runtime: &tokio::runtime::Runtime,
    dir: &Path,
    urls: &[String],
    count: usize,
    groups: usize,
) -> (Measured, Measured) {
    let workers: Vec<_> = (1..=groups)
        .map(|n| weft::enrol_in(dir, &urls[0], n))
        .collect();
    let client = reqwest::Client::new();
    let per_worker: Vec<Vec<bytes::Bytes>> = workers
        .iter()
        .map(|worker| {
            let items = weft::start_more(dir, worker, work_items() - 1);
            weft::progress_commands_over(worker, &items, count.div_ceil(groups))
        })
        .collect();
    let route = |i: usize| -> (&weft::Worker, &String) {
        let worker = &workers[i % groups];
        let url = match groups {
            1 => &urls[i % urls.len()],
            _ => &urls[(i % groups) % urls.len()],
        };
        (worker, url)
    };
    let commands: Vec<Request> = (0..count)
        .map(|i| {
            let (worker, url) = route(i);
            (
                reqwest::Method::POST,
                format!("{url}/v1/groups/{}/commands", worker.group),
                "application/json".to_owned(),
                per_worker[i % groups][i / groups].clone(),
                worker.token.clone(),
            )
        })
        .collect();
    let publications: Vec<Request> = (0..count)
        .map(|i| {
            let (worker, url) = route(i);
            let bytes: Vec<u8> = (0..SMALL).map(|_| rand::random::<u8>()).collect();
            let digests = weft_api::digest::Hasher::digest(&bytes);
            let envelope = weft::manifest(worker, &digests);
            (
                reqwest::Method::PUT,
                format!("{url}/v1/artifacts/{}", digests.blake3),
                format!("multipart/form-data; boundary={}", weft::BOUNDARY),
                weft::multipart(&envelope, &bytes),
                worker.token.clone(),
            )
        })
        .collect();
    runtime.block_on(async {
        let commands = measure(&client, commands).await;
        let publications = measure(&client, publications).await;
        (commands, publications)
    })
}

/// `n` servers over database `index` and `garage`; server 0's data dir is `dir/data` (where
/// `weft::enrol` looks for the operator's token), the others share its keys.
fn postgres_servers(
    dir: &Path,
    index: &str,
    garage: &weft_testkit::Garage,
    n: usize,
) -> (Vec<weft::Process>, Vec<String>) {
    let blobs = garage.location(0, &format!("bench-{n}"));
    let credentials = garage
        .credentials_file()
        .to_str()
        .expect("utf-8")
        .to_owned();
    let flags = [
        &[
            "--index",
            index,
            "--blobs",
            blobs.as_str(),
            "--s3-credentials-file",
            credentials.as_str(),
        ][..],
        UNLIMITED,
    ]
    .concat();
    let mut processes = Vec::new();
    let mut urls = Vec::new();
    for i in 0..n {
        let server_dir = if i == 0 {
            dir.to_path_buf()
        } else {
            let other = dir.join(format!("server-{i}"));
            std::fs::create_dir_all(other.join("data")).expect("dir");
            for file in ["authority.key", "admin.token"] {
                std::fs::copy(dir.join("data").join(file), other.join("data").join(file))
                    .expect("shared secret");
            }
            other
        };
        let (process, url) = weft::start_weft_with(&server_dir, &flags, &[]);
        processes.push(process);
        urls.push(url);
    }
    (processes, urls)
}

/// A round trip to PostgreSQL on an idle connection: `SELECT $1`, 2,000 times, over `tcp`
/// (loopback) and over `socket` (the cluster's Unix socket).
fn round_trips(tcp: &str, socket: &str) -> (Duration, Duration) {
    let time = |url: &str| {
        let mut client = postgres::Client::connect(url, postgres::NoTls).expect("connects");
        let statement = client.prepare("SELECT $1::BIGINT").expect("prepares");
        let started = Instant::now();
        for i in 0..2000i64 {
            client.query_one(&statement, &[&i]).expect("answers");
        }
        started.elapsed() / 2000
    };
    (time(tcp), time(socket))
}

/// WorkItems each Group's progress reports are spread over (`WEFT_BENCH_WORK_ITEMS`).
fn work_items() -> usize {
    std::env::var("WEFT_BENCH_WORK_ITEMS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(1)
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn main() {
    let count: usize = std::env::var("WEFT_BENCH_REQUESTS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(2000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut rows: Vec<(String, Measured, Measured)> = Vec::new();
    let mut round_trip = None;
    {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_server, url) = weft::start_weft_with(dir.path(), UNLIMITED, &[]);
        let (commands, publications) = run_loads(&runtime, dir.path(), &[url], count, 1);
        rows.push(("1 server, SQLite".into(), commands, publications));
    }
    let engines = weft_testkit::Postgres::new().zip(weft_testkit::Garage::start(1));
    match &engines {
        None => eprintln!("no PostgreSQL or Garage binaries: SQLite only"),
        Some((cluster, garage)) => {
            let tcp = cluster.create_database("bench_rtt");
            let (tcp, socket) = round_trips(&tcp, &cluster.socket_url("bench_rtt"));
            round_trip = Some((tcp, socket));
            // One Group on one to three servers, three Groups on one and on three, then one
            // Group on one server reaching PostgreSQL through its Unix socket.
            let configurations = [(1, 1, false), (2, 1, false), (3, 1, false)];
            let configurations =
                configurations
                    .into_iter()
                    .chain([(1, 3, false), (3, 3, false), (1, 1, true)]);
            for (n, groups, socket) in configurations {
                let dir = tempfile::tempdir().expect("tempdir");
                let database = format!("bench_{n}_{groups}_{socket}");
                let tcp = cluster.create_database(&database);
                let index = match socket {
                    true => cluster.socket_url(&database),
                    false => tcp,
                };
                let (_servers, urls) = postgres_servers(dir.path(), &index, garage, n);
                let (commands, publications) =
                    run_loads(&runtime, dir.path(), &urls, count, groups);
                let name = match (groups, socket) {
                    (_, true) => "1 server, PG Unix socket".to_owned(),
                    (1, false) => format!("{n} server(s), PostgreSQL"),
                    _ => format!("{n} server(s), {groups} Groups"),
                };
                rows.push((name, commands, publications));
            }
        }
    }
    println!(
        "scale-out, {count} requests per load, {CONNECTIONS} connections, request i to server i % n"
    );
    println!(
        "{:<24} {:>12} {:>9} {:>9} {:>12} {:>9} {:>9}",
        "configuration", "commands/s", "p50 ms", "p99 ms", "4KiB pubs/s", "p50 ms", "p99 ms"
    );
    for (name, commands, publications) in &rows {
        println!(
            "{name:<24} {:>12.0} {:>9.1} {:>9.1} {:>12.0} {:>9.1} {:>9.1}",
            commands.per_second,
            ms(commands.p50),
            ms(commands.p99),
            publications.per_second,
            ms(publications.p50),
            ms(publications.p99)
        );
    }
    if rows.len() == 7 {
        let ratio = |a: usize, b: usize, pick: fn(&(String, Measured, Measured)) -> f64| {
            pick(&rows[a]) / pick(&rows[b])
        };
        let commands = |row: &(String, Measured, Measured)| row.1.per_second;
        let publications = |row: &(String, Measured, Measured)| row.2.per_second;
        println!(
            "3 PostgreSQL servers / 1 PostgreSQL server: commands {:.2}x, publications {:.2}x (goal 2x)",
            ratio(3, 1, commands),
            ratio(3, 1, publications)
        );
        println!(
            "1 PostgreSQL server / 1 SQLite server:      commands {:.2}x, publications {:.2}x (goal 0.5x)",
            ratio(1, 0, commands),
            ratio(1, 0, publications)
        );
        println!(
            "1 PostgreSQL server over its Unix socket / 1 SQLite server: commands {:.2}x, publications {:.2}x",
            ratio(6, 0, commands),
            ratio(6, 0, publications)
        );
        if let Some((tcp, socket)) = round_trip {
            let per_command = tcp * PROGRESS_ROUND_TRIPS;
            println!(
                "PostgreSQL round trip, idle (SELECT $1): {:.0} µs over TCP, {:.0} µs over its Unix socket; \
                 {PROGRESS_ROUND_TRIPS} per work.progress = {:.2} ms in its Group's lock: at most {:.0} Commands/s per Group",
                tcp.as_secs_f64() * 1e6,
                socket.as_secs_f64() * 1e6,
                ms(per_command),
                1.0 / per_command.as_secs_f64()
            );
        }
        println!(
            "3 Groups: 3 servers / 1 server:             commands {:.2}x, publications {:.2}x (each Group's writes are serial in the database: several servers add writers only across Groups)",
            ratio(5, 4, commands),
            ratio(5, 4, publications)
        );
    }
}
