//! The crash campaign (issue #15, "a crash during any of it loses nothing acknowledged"):
//! the real `weft serve` on one data directory kept across kills, a burst of mixed load for a
//! random 20–400 ms, SIGKILL while requests are in flight, restart, and an oracle that
//! re-reads what was acknowledged. Shared by `bench/crash.rs` (1,000 kills) and
//! `tests/e2e/crash.rs` (a few kills, so the harness itself is tested), both through `#[path]`.
//!
//! Acknowledged means a 2xx whose whole body arrived and parsed: only that goes into the
//! record (`record.rs`). A write cut by the kill may or may not be there after the restart;
//! either is fine. A loss is anything acknowledged that the oracle (`oracle.rs`) cannot find
//! or finds changed, a chain that does not verify, or `weft fsck` reporting damage (exit 1;
//! exit 2 is crash leftovers only, which the next start removes).

mod load;
mod oracle;
mod record;
mod server;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};

use record::{Blob, BlobKind, Record};
use server::Server;

/// How a campaign runs.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) kills: usize,
    pub(crate) seed: u64,
    /// The oracle runs after every this many restarts, and after the last.
    pub(crate) check_every: usize,
    /// `weft fsck` runs on the killed directory before every this many restarts, and at the end.
    pub(crate) fsck_every: usize,
    /// Burst length bounds in milliseconds (each burst draws in between).
    pub(crate) burst_ms: (u64, u64),
    /// How many already checked items of each kind an oracle run reads again.
    pub(crate) sample: usize,
    /// The campaign's directory (the data directory and the server log go below it).
    pub(crate) dir: PathBuf,
    /// Records one acknowledged blob that was never uploaded and one acknowledged charge that
    /// was never sent, so the oracle must report two losses (the e2e test's proof that the
    /// oracle is not blind).
    pub(crate) phantom: bool,
    /// Prints a line per oracle run to stderr.
    pub(crate) verbose: bool,
}

/// What a campaign did and found.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) kills: usize,
    pub(crate) seed: u64,
    /// Acknowledged writes by kind, with their labels.
    pub(crate) acknowledged: Vec<(&'static str, u64)>,
    pub(crate) oracle_runs: u64,
    pub(crate) checks: u64,
    pub(crate) losses: Vec<String>,
    /// (kill, exit code) of every `weft fsck` run; the last is after a clean shutdown.
    pub(crate) fsck: Vec<(usize, i32)>,
    /// Requests cut by the kills, and refusals by status and code (not losses).
    pub(crate) cut: u64,
    /// Resumable uploads resumed after a kill (HEAD answered their durable offset), and those
    /// found finished (the finish committed, its answer cut).
    pub(crate) resumed: (u64, u64),
    pub(crate) refusals: Vec<(String, u64)>,
    /// Time from spawning `weft serve` to its `listening on` line, per restart.
    pub(crate) restarts: Vec<Duration>,
    pub(crate) elapsed: Duration,
}

impl Report {
    /// The report as the bench prints it.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        let mut line = |text: String| {
            out.push_str(&text);
            out.push('\n');
        };
        line(format!("seed                          {}", self.seed));
        line(format!("kills (SIGKILL under load)    {}", self.kills));
        for (label, count) in &self.acknowledged {
            line(format!("acknowledged {label:<34} {count}"));
        }
        line(format!(
            "uploads resumed after a kill  {} (and {} found finished: the answer was cut)",
            self.resumed.0, self.resumed.1
        ));
        line(format!("requests cut by the kills     {}", self.cut));
        for (code, count) in &self.refusals {
            line(format!("refused {code:<39} {count}"));
        }
        line(format!(
            "oracle runs / checks          {} / {}",
            self.oracle_runs, self.checks
        ));
        let mut codes = [0usize; 3];
        for (_, code) in &self.fsck {
            if let Ok(code @ 0..=2) = usize::try_from(*code) {
                codes[code] += 1;
            }
        }
        line(format!(
            "fsck runs                     {} (exit 0 clean: {}, exit 2 leftovers only: {}, exit 1 damage: {}, other: {})",
            self.fsck.len(),
            codes[0],
            codes[2],
            codes[1],
            self.fsck.len() - codes.iter().sum::<usize>()
        ));
        let mut restarts = self.restarts.clone();
        restarts.sort();
        if let (Some(first), Some(last)) = (restarts.first(), restarts.last()) {
            let median = restarts[restarts.len() / 2];
            line(format!(
                "restart to listening          median {:.0} ms, min {:.0} ms, max {:.0} ms",
                median.as_secs_f64() * 1e3,
                first.as_secs_f64() * 1e3,
                last.as_secs_f64() * 1e3
            ));
        }
        line(format!(
            "total time                    {:.1} s",
            self.elapsed.as_secs_f64()
        ));
        line(format!(
            "LOST                          {}",
            self.losses.len()
        ));
        for loss in &self.losses {
            line(format!("  {loss}"));
        }
        out
    }
}

/// Runs a campaign; a setup failure is an `Err`, everything after it lands in the report.
pub(crate) async fn run(settings: Settings) -> Result<Report, String> {
    let started = Instant::now();
    let data = settings.dir.join("data");
    let log = settings.dir.join("server.log");
    let mut rng = StdRng::seed_from_u64(settings.seed);
    let mut report = Report {
        seed: settings.seed,
        ..Report::default()
    };
    let (mut server, _) = Server::start(&data, &log).await?;
    let world = Arc::new(server::setup(&server, &data).await?);
    let record = Arc::new(Mutex::new(Record::default()));
    if settings.phantom {
        let phantom = Blob {
            digest: weft_api::ArtifactId::of(b"never uploaded"),
            size: 14,
            kind: BlobKind::Inline,
            kill: 0,
        };
        lock(&record).blobs.push(phantom);
        // And one acknowledged charge that was never sent: the spend must come up short.
        let never = weft_api::Envelope::sign(&world.key, weft_api::work::COMMAND_TYPE, b"{}");
        lock(&record).charges.push(record::Charge {
            envelope: never,
            answer: record::Answer::Acked,
            kill: 0,
        });
    }
    for kill in 1..=settings.kills {
        let load = load::start(
            world.clone(),
            &server.url,
            record.clone(),
            settings.seed,
            kill,
        );
        let burst = rng.random_range(settings.burst_ms.0..=settings.burst_ms.1);
        tokio::time::sleep(Duration::from_millis(burst)).await;
        server.kill();
        load.finish().await;
        report.kills = kill;
        if kill % settings.fsck_every == 0 {
            fsck(&data, kill, &mut report).await;
        }
        let (restarted, took) = match Server::start(&data, &log).await {
            Ok(started) => started,
            Err(e) => {
                report
                    .losses
                    .push(format!("restart after kill {kill}: {e}"));
                return Ok(finish(report, &record, started));
            }
        };
        server = restarted;
        report.restarts.push(took);
        let losses = load::resend_charges(&server.url, &world, &record, kill).await;
        report.losses.extend(losses);
        let last = kill == settings.kills;
        if kill % settings.check_every == 0 || last {
            let outcome = oracle::check(
                &server.url,
                &world,
                &record,
                kill,
                settings.sample,
                last,
                &mut rng,
            )
            .await;
            report.oracle_runs += 1;
            report.checks += outcome.checks;
            if settings.verbose {
                let record = lock(&record);
                eprintln!(
                    "kill {kill}/{}: {} blobs, {} manifests, {} Evidence, {} Commands, cursor {}; oracle {} checks, {} lost; {:.0} s",
                    settings.kills,
                    record.blobs.len(),
                    record.publications.len(),
                    record.evidence.len(),
                    record.commands.len(),
                    record.acked_cursor,
                    outcome.checks,
                    outcome.losses.len(),
                    started.elapsed().as_secs_f64()
                );
                for loss in &outcome.losses {
                    eprintln!("  LOST {loss}");
                }
            }
            report.losses.extend(outcome.losses);
        }
    }
    // The end: a clean shutdown, then fsck, which must find nothing at all.
    server.interrupt();
    fsck(&data, report.kills, &mut report).await;

    Ok(finish(report, &record, started))
}

/// The report's totals from the record.
fn finish(mut report: Report, record: &Mutex<Record>, started: Instant) -> Report {
    let mut record = lock(record);
    report.losses.append(&mut record.losses);
    for kind in BlobKind::ALL {
        let count = record.blobs.iter().filter(|blob| blob.kind == kind).count();
        report.acknowledged.push((kind.label(), count as u64));
    }
    report.acknowledged.extend([
        (
            "manifests (signed publications)",
            record.publications.len() as u64,
        ),
        (
            "  of which bytes + manifest in one request",
            record.with_content,
        ),
        ("Evidence records", record.evidence.len() as u64),
        (
            "Commands (lease.renew, work.progress)",
            record.commands.len() as u64,
        ),
        (
            "  of them charges re-sent after a kill",
            record.charges_resent,
        ),
        ("ACKs (cursor moves answered)", record.acks),
        (
            "Events received by the subscriber",
            record.seen.len() as u64,
        ),
    ]);
    report.cut = record.cut;
    report.resumed = (record.resumed, record.finished_unacked);
    report.refusals = record
        .refusals
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    report.elapsed = started.elapsed();
    report
}

fn lock(record: &Mutex<Record>) -> std::sync::MutexGuard<'_, Record> {
    record.lock().unwrap_or_else(|e| e.into_inner())
}

async fn fsck(data: &std::path::Path, kill: usize, report: &mut Report) {
    let (code, problems) = server::fsck(data).await;
    report.fsck.push((kill, code));
    if code == 1 || code < 0 {
        report
            .losses
            .push(format!("fsck after kill {kill}: exit {code}"));
        for problem in problems {
            report
                .losses
                .push(format!("fsck after kill {kill}: {problem}"));
        }
    }
}
