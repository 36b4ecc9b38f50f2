//! An A/B of two server builds inside one run (`WEFT_BENCH_BASELINE=/path/to/weft`): this
//! machine's noise moves one build's figures 15–40 % between runs, more than most changes
//! left to make, so two runs of one build each cannot tell them apart. Here both servers run
//! side by side, each with its own data and Worker, and each kind of write is sent to them in
//! alternating slices (this build, the baseline, then the baseline, this build, …), so a noisy
//! moment falls on both. The CPU is each server's threads' time on a CPU in nanoseconds
//! (`/proc/<pid>/task/*/schedstat`), not clock ticks: a slice is a tenth of a second. A
//! thread that ends during a slice loses its time (the servers' threads live as long as the
//! load). It prints µs per write for each build and their ratio, with the spread of the
//! slices' ratios.

use std::path::Path;

use super::{Request, evidence, json_request, publications, renewals};
use crate::weft;

/// Slices per kind of write and server.
const SLICES: usize = 8;

/// The nanoseconds `pid`'s live threads have run.
fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// One server under comparison: its process, address, Worker and pre-signed writes.
struct Side {
    _process: weft::Process,
    pid: u32,
    url: String,
    worker: weft::Worker,
}

impl Side {
    fn start(binary: &str, dir: &Path) -> Self {
        let (process, url) =
            weft::start_binary_with(binary, dir, &["--commands-per-minute", "0"], &[]);
        let worker = weft::enrol(dir, &url);
        let pid = process.0.id();
        Self {
            _process: process,
            pid,
            url,
            worker,
        }
    }

    /// The four kinds of write, `count` of each, for this server's Worker; renewals numbered
    /// from `first` (their `commandId`s).
    fn writes(
        &self,
        first: usize,
        count: usize,
    ) -> [(&'static str, reqwest::Method, Vec<Request>); 4] {
        let progress = weft::progress_commands(&self.worker, count)
            .into_iter()
            .map(|body| json_request("/v1/groups/g1/commands", body))
            .collect();
        [
            (
                "lease.renew",
                reqwest::Method::POST,
                renewals(&self.worker, first, count),
            ),
            ("work.progress", reqwest::Method::POST, progress),
            (
                "4 KiB publication",
                reqwest::Method::PUT,
                publications(&self.worker, count),
            ),
            (
                "Evidence record",
                reqwest::Method::POST,
                evidence(&self.worker, count),
            ),
        ]
    }
}

/// Sends `requests` to `side` on the bench's connections; answers the ns its server ran.
async fn slice(
    client: &reqwest::Client,
    side: &Side,
    method: &reqwest::Method,
    requests: &[Request],
) -> u64 {
    let before = cpu_ns(side.pid);
    super::send_all(
        client,
        &side.url,
        &side.worker.token,
        method,
        requests.to_vec(),
    )
    .await;
    cpu_ns(side.pid) - before
}

/// Runs the comparison of this build against `baseline`, `count` writes of each kind each.
pub(crate) fn run(
    client: &reqwest::Client,
    runtime: &tokio::runtime::Runtime,
    baseline: &str,
    count: usize,
) {
    let (dir_this, dir_base) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let this = Side::start(&weft::this_binary(), dir_this.path());
    let base = Side::start(baseline, dir_base.path());
    let per_slice = (count / SLICES).max(1);
    println!(
        "A/B in one run: this build against {baseline}, {per_slice} writes a slice, {SLICES} alternated slices each"
    );
    let (writes_this, writes_base) = (this.writes(0, count), base.writes(0, count));
    for ((name, method, ours), (_, _, theirs)) in writes_this.into_iter().zip(writes_base) {
        eprintln!("phase: compare {name}");
        let (mut ns_this, mut ns_base, mut ratios) = (0u64, 0u64, Vec::new());
        for (n, (a, b)) in ours
            .chunks(per_slice)
            .zip(theirs.chunks(per_slice))
            .take(SLICES)
            .enumerate()
        {
            let (x, y) = runtime.block_on(async {
                if n % 2 == 0 {
                    let x = slice(client, &this, &method, a).await;
                    (x, slice(client, &base, &method, b).await)
                } else {
                    let y = slice(client, &base, &method, b).await;
                    (slice(client, &this, &method, a).await, y)
                }
            });
            ns_this += x;
            ns_base += y;
            ratios.push(x as f64 / y.max(1) as f64);
        }
        let sent = (per_slice * ratios.len()) as f64;
        let (us_this, us_base) = (ns_this as f64 / sent / 1e3, ns_base as f64 / sent / 1e3);
        ratios.sort_by(f64::total_cmp);
        println!(
            "  {name:<20} this {us_this:>6.0} µs  baseline {us_base:>6.0} µs  this/baseline {:.3} (slices {:.2}–{:.2})",
            us_this / us_base,
            ratios[0],
            ratios[ratios.len() - 1]
        );
    }
}
