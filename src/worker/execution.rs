//! One WorkItem's run in one slot, from `work.start` to `work.submit` (or a checkpoint, or
//! `work.fail`): the Execution Lease, its renewals, the executor (`executor.rs`), outputs
//! published as Artifacts bound to the lease, Evidence for every criterion, and the usage the
//! run cost.
//!
//! **Leases.** `work.start` answers the lease; it is renewed every third of
//! `executionSeconds`. A renewal the Authority refuses (`stale_lease`: the WorkItem was
//! reassigned or the session replaced) stops the executor at once: the run's results would be
//! inert (OFL-2), and its effects are keyed by the ownership epoch (DLV-11) anyway.
//!
//! **Offline grace** (OFL-3…5). When a renewal or a progress report gets no answer, the run
//! goes on, bounded by its lease's expiry plus the contract's grace (and the Worker's
//! `offline_grace_seconds`); progress is buffered in the Group's journal, signed with the
//! bounded-offline binding. At the bound the executor is asked to checkpoint. A run that ends
//! while the Authority is away buffers a `work.checkpoint` (its outputs are not published:
//! nothing externally visible happens offline) and the WorkItem runs again after the journal
//! is reconciled, which the runtime does before anything else on reconnect.
//!
//! **Retries.** A failed run ends its attempt with `work.fail` (`worker_error`, or
//! `retries_exhausted` on the last attempt `retryPolicy.maxAttempts` allows): another attempt
//! is a new offer, bounded by the Authority's retry policy (PRG-8). A resume after a
//! checkpoint, a preemption or a replaced session is the same attempt with the same attempt
//! key (PRG-9), so effects keyed on it happen once. A run past its wall-clock limit is stopped
//! and failed `budget`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use chrono::Utc;
use serde_json::json;
use tokio::sync::{Mutex, watch};
use weft_api::journal::{Journal, OfflineLease, Rebase};
use weft_api::work::CommandType;
use weft_api::work::contract::Budgets;
use weft_api::work::views::{TokenRequest, TokenScope, WorkItemView};
use weft_api::{Digest, Id};

use super::config::ExecutorConfig;
use super::executor::{self, Ending, Launch, Line, RunDir, Signal};
use super::link::{Link, unreachable};
use super::results::{self, Run};

/// What the runtime gives a run.
pub(super) struct Job {
    pub(super) link: Link,
    pub(super) work_item: Id,
    pub(super) executor: ExecutorConfig,
    pub(super) slot_dir: PathBuf,
    pub(super) uid: Option<u32>,
    /// The checkpoint an earlier attempt left, kept in the Worker's own files.
    pub(super) checkpoint: Option<PathBuf>,
    pub(super) card_version: String,
    pub(super) preempt: watch::Receiver<bool>,
    pub(super) journal: Arc<Mutex<Journal>>,
    pub(super) offline_grace: Duration,
}

/// How a run ended, for the runtime.
#[derive(Debug)]
pub(super) enum Outcome {
    Submitted,
    /// Back to `queued`; run again with this checkpoint.
    Checkpointed {
        checkpoint: Option<PathBuf>,
    },
    Failed(String),
    /// The Authority refused to start it or took the lease away.
    Lost(String),
    /// It ended while the Authority was away; a checkpoint is in the journal.
    Offline {
        checkpoint: Option<PathBuf>,
    },
}

/// A run's lease, as `work.start` answered it.
struct Leased {
    view: WorkItemView,
    lease: Id,
    epoch: u64,
    expires_at: chrono::DateTime<Utc>,
}

fn lease_of(view: WorkItemView) -> anyhow::Result<Leased> {
    let lease = view.lease.clone().context("work.start answered no lease")?;
    let expires_at = chrono::DateTime::parse_from_rfc3339(&lease.expires_at)?.to_utc();
    Ok(Leased {
        lease: Id::parse("leaseId", &lease.lease_id)?,
        epoch: lease.ownership_epoch,
        expires_at,
        view,
    })
}

fn run_of<'a>(job: &'a Job, leased: &'a Leased) -> Run<'a> {
    Run {
        link: &job.link,
        work_item: &job.work_item,
        card_version: &job.card_version,
        executor: &job.executor,
        lease: &leased.lease,
        epoch: leased.epoch,
        view: &leased.view,
    }
}

/// Runs `job` to its end.
pub(super) async fn run(mut job: Job) -> Outcome {
    let start = job.link.send(
        CommandType::WorkStart,
        json!({"workItemId": job.work_item}),
        None,
    );
    let accepted = match tokio::time::timeout(Duration::from_secs(120), start).await {
        Ok(Ok(accepted)) => accepted,
        Ok(Err(error)) => return Outcome::Lost(format!("work.start: {error}")),
        Err(_) => return Outcome::Lost("work.start: no answer within 120 s".into()),
    };
    let leased = match serde_json::from_value::<WorkItemView>(accepted.state)
        .map_err(anyhow::Error::from)
        .and_then(lease_of)
    {
        Ok(leased) => leased,
        Err(error) => return Outcome::Lost(format!("work.start's answer: {error}")),
    };
    match execute(&mut job, leased).await {
        Ok(outcome) => outcome,
        Err(error) => Outcome::Failed(format!("{error:#}")),
    }
}

async fn execute(job: &mut Job, mut leased: Leased) -> anyhow::Result<Outcome> {
    let contract = leased.view.contract.clone();
    let mission = Id::parse("missionId", &leased.view.mission_id)?;
    let link = &job.link;
    let token = link
        .api
        .issue_token(
            &leased.lease,
            &TokenRequest {
                scope: vec![
                    TokenScope::BlobWrite,
                    TokenScope::ArtifactPublish,
                    TokenScope::EvidenceRecord,
                ],
                ttl_seconds: contract.budgets.wall_clock_seconds.max(1),
                replaces: None,
            },
        )
        .await
        .context("a capability token for the lease")?;
    // Nothing an earlier run left in this slot may reach this one (SCH-12).
    executor::clear_slot(job.uid).await?;
    let dir = RunDir::prepare(&job.slot_dir.join("run"), job.checkpoint.as_deref())?;
    std::fs::write(
        dir.root.join("contract.json"),
        serde_json::to_vec_pretty(&contract)?,
    )?;
    executor::private(&dir.root.join("contract.json"), None)?;
    for input in &contract.inputs {
        let path = dir.inputs().join(input.hex());
        let mut file = tokio::fs::File::create(&path).await?;
        link.api
            .download(&Digest::Blake3(*input), &mut file, |_, _| {})
            .await
            .with_context(|| format!("input {input}"))?;
        executor::private(&path, None)?;
    }
    dir.hand_over(job.uid)?;
    let effect_key =
        weft_api::idempotency::operation_key(&mission, &job.work_item, leased.epoch, "effects");
    let attempt_key = leased.view.attempt_key.clone().unwrap_or_default();
    let stdin = serde_json::to_vec(&json!({
        "workItemId": job.work_item, "missionId": mission, "groupId": link.group,
        "leaseId": leased.lease, "authority": link.api.base(), "token": token.token,
        "contract": contract,
    }))?;
    let wall_clock = Duration::from_secs(contract.budgets.wall_clock_seconds.max(1));
    let began = Instant::now();
    let mut running = executor::start(Launch {
        executor: &job.executor,
        dir: &dir,
        env: vec![
            ("WEFT_WORK_ITEM".into(), job.work_item.to_string()),
            ("WEFT_MISSION".into(), mission.to_string()),
            ("WEFT_GROUP".into(), link.group.to_string()),
            ("WEFT_ATTEMPT_KEY".into(), attempt_key),
            ("WEFT_EFFECT_KEY".into(), effect_key),
        ],
        stdin,
        uid: job.uid,
        wall_clock,
        cpu_seconds: contract.budgets.compute_seconds.max(1),
    })?;
    let renew_every = Duration::from_secs((contract.leases.execution_seconds / 3).max(1));
    let mut renew =
        tokio::time::interval_at(tokio::time::Instant::now() + renew_every, renew_every);
    let mut evidence_lines = Vec::new();
    let mut offline_since: Option<chrono::DateTime<Utc>> = None;
    let mut last_progress = Instant::now() - Duration::from_secs(60);
    let mut asked_to_checkpoint = false;
    let grace = Duration::from_secs(contract.leases.grace_seconds).min(job.offline_grace);
    let ending = loop {
        tokio::select! {
            ended = &mut running.ended => break ended.unwrap_or_else(|e| Ending::Failed(e.to_string())),
            Some(line) = running.lines.recv() => match line {
                Line::Evidence(e) => evidence_lines.push(e),
                Line::Progress(p) => {
                    // At most one report a second: the log is not the executor's diary.
                    if last_progress.elapsed() < Duration::from_secs(1) {
                        continue;
                    }
                    last_progress = Instant::now();
                    let payload = json!({
                        "workItemId": job.work_item, "phase": p.phase,
                        "milestonesDone": p.milestones_done, "nextCheckpoint": p.next_checkpoint,
                        "blockers": [], "evidence": [],
                        "estimate": {"completionAt": p.completion_at, "confidence": p.confidence.unwrap_or(0.5).clamp(0.0, 1.0)},
                        "percent": p.percent,
                    });
                    report(job, &leased, &mut offline_since, CommandType::WorkProgress, payload).await?;
                }
            },
            changed = job.preempt.changed() => {
                if changed.is_ok() && *job.preempt.borrow() && !asked_to_checkpoint {
                    asked_to_checkpoint = true;
                    executor::signal(running.pid, Signal::Checkpoint);
                }
            }
            _ = renew.tick() => {
                match job.link.send(CommandType::LeaseRenew, json!({"workItemId": job.work_item}), Some(&leased.lease)).await {
                    Ok(accepted) => {
                        // OFL-5: what was buffered while the Authority was away goes before
                        // anything this run sends from now on (a progress report, its
                        // submission); until it has, later reports are buffered behind it.
                        if offline_since.is_some() && reconcile_first(job).await {
                            offline_since = None;
                        }
                        if let Ok(view) = serde_json::from_value::<WorkItemView>(accepted.state)
                            && let Ok(renewed) = lease_of(view)
                        {
                            leased = renewed;
                        }
                    }
                    Err(error) if unreachable(&error) => {
                        let since = *offline_since.get_or_insert_with(Utc::now);
                        let bound = leased.expires_at + chrono::Duration::from_std(grace).unwrap_or_default();
                        tracing::warn!("the Authority is unreachable since {since}; running on until {bound}");
                        if Utc::now() >= bound && !asked_to_checkpoint {
                            asked_to_checkpoint = true;
                            executor::signal(running.pid, Signal::Checkpoint);
                        }
                    }
                    Err(error) => {
                        // The lease is gone (reassigned, revoked): stop; results would be inert.
                        executor::signal(running.pid, Signal::Term);
                        let _ = (&mut running.ended).await;
                        return Ok(Outcome::Lost(format!("lease.renew: {error}")));
                    }
                }
            }
        }
    };
    // Lines the executor wrote just before it ended may still be in the channel: take them
    // (bounded: a descendant that keeps stdout open must not hold the run).
    let drain = tokio::time::Instant::now() + Duration::from_secs(1);
    while let Ok(Some(line)) = tokio::time::timeout_at(drain, running.lines.recv()).await {
        if let Line::Evidence(e) = line {
            evidence_lines.push(e);
        }
    }
    let elapsed = began.elapsed().as_secs().max(1);
    let usage = Budgets {
        compute_seconds: elapsed,
        wall_clock_seconds: elapsed,
        ..Budgets::default()
    };
    // Nothing of the run changes its files while the Worker reads them: sealed first, then
    // every process of the slot's uid stopped (with the files it held open).
    executor::seal_run(&dir, job.uid)?;
    executor::clear_slot(job.uid).await?;
    let checkpoint = executor::take_file(&dir.checkpoint(), &kept_checkpoint(job));
    if offline_since.is_some() {
        let note = match &ending {
            Ending::Done => "completed while the Authority was away; runs again".to_owned(),
            other => format!("{other:?} while the Authority was away"),
        };
        buffer(
            job,
            &leased,
            offline_since,
            CommandType::WorkCheckpoint,
            json!({"workItemId": job.work_item, "checkpoint": {"note": note}}),
            usage,
        )
        .await?;
        return Ok(Outcome::Offline { checkpoint });
    }
    // Results go to the Authority within a bound: a request that never answers must not
    // hold the slot (the lease then lapses, and the log says what the WorkItem is). The
    // lease is renewed meanwhile: outputs larger than one lease period take longer to upload
    // than the lease lasts, and a lapsed lease makes every publication `stale_lease`.
    let bound = Duration::from_secs(
        (leased.view.contract.leases.execution_seconds)
            .max(contract.budgets.wall_clock_seconds)
            .max(60),
    );
    let ending_view = EndingParts {
        ending,
        evidence_lines,
        usage,
        checkpoint,
        wall_clock,
    };
    // Aborted when dropped: also when this run's own task is aborted meanwhile.
    let renewing = AbortOnDrop(tokio::spawn(keep_renewing(
        job.link.clone(),
        job.work_item.clone(),
        leased.lease.clone(),
        renew_every,
    )));
    let concluded = tokio::time::timeout(bound, conclude(job, &leased, &dir, ending_view)).await;
    drop(renewing);
    match concluded {
        Ok(outcome) => outcome,
        Err(_) => Ok(Outcome::Lost(format!(
            "the results did not reach the Authority within {} s",
            bound.as_secs()
        ))),
    }
}

/// A task that ends with its handle.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Renews `lease` every `every` until aborted, or until a renewal is refused (the lease is
/// gone: what is being sent then fails on its own with `stale_lease`).
async fn keep_renewing(link: Link, work_item: Id, lease: Id, every: Duration) {
    let mut renew = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        renew.tick().await;
        let renewed = link
            .send(
                CommandType::LeaseRenew,
                json!({"workItemId": work_item}),
                Some(&lease),
            )
            .await;
        match renewed {
            Ok(_) => {}
            Err(error) if unreachable(&error) => {}
            Err(error) => {
                tracing::warn!("lease.renew while sending the results: {error}");
                return;
            }
        }
    }
}

/// How the executor ended, and what it left.
struct EndingParts {
    ending: Ending,
    evidence_lines: Vec<executor::EvidenceLine>,
    usage: Budgets,
    checkpoint: Option<PathBuf>,
    wall_clock: Duration,
}

/// Where the Worker keeps this run's WorkItem's checkpoint between attempts
/// (`executor::kept_checkpoint`; the slot's directory is `state_dir/slots/<n>`).
fn kept_checkpoint(job: &Job) -> PathBuf {
    let state_dir = job
        .slot_dir
        .parent()
        .and_then(Path::parent)
        .unwrap_or(&job.slot_dir);
    executor::kept_checkpoint(state_dir, job.link.group.as_str(), job.work_item.as_str())
}

/// Tells the Authority how the run ended: submit, checkpoint or fail.
async fn conclude(
    job: &Job,
    leased: &Leased,
    dir: &RunDir,
    parts: EndingParts,
) -> anyhow::Result<Outcome> {
    let EndingParts {
        ending,
        evidence_lines,
        usage,
        checkpoint,
        wall_clock,
    } = parts;
    let contract = &leased.view.contract;
    match ending {
        Ending::Done => Ok(
            match results::submit(&run_of(job, leased), dir, evidence_lines, usage).await? {
                results::Submitted::Done => Outcome::Submitted,
                results::Submitted::Failed(why) => Outcome::Failed(why),
                // The log decides what the WorkItem is now.
                results::Submitted::Unknown(why) => Outcome::Lost(why),
            },
        ),
        Ending::Checkpointed => {
            let artifact = match &checkpoint {
                Some(kept) => {
                    Some(results::publish(&run_of(job, leased), kept, "checkpoint").await?)
                }
                None => None,
            };
            let mut body = json!({"note": "checkpointed at the executor's safe point"});
            if let Some(artifact) = artifact {
                body["artifact"] = json!(artifact);
            }
            job.link
                .send(
                    CommandType::WorkCheckpoint,
                    json!({"workItemId": job.work_item, "checkpoint": body, "usage": usage}),
                    Some(&leased.lease),
                )
                .await?;
            Ok(Outcome::Checkpointed { checkpoint })
        }
        Ending::TimedOut => {
            let detail = format!(
                "the executor ran past its wall-clock limit of {} s",
                wall_clock.as_secs()
            );
            let evidence = results::failure_evidence(&run_of(job, leased), &detail).await?;
            job.link
                .send(
                    CommandType::WorkFail,
                    json!({"workItemId": job.work_item, "evidence": [evidence], "reason": "budget",
                        "detail": detail}),
                    Some(&leased.lease),
                )
                .await?;
            Ok(Outcome::Failed("wall-clock limit".into()))
        }
        Ending::Failed(why) => {
            // PRG-8/10: the attempt ends in work.fail; whether another attempt follows is the
            // retry policy's, applied by the Authority when the Coordinator offers it again.
            let attempts = leased.view.attempts;
            let max = contract.retry_policy.max_attempts.max(1);
            let reason = if attempts >= max {
                "retries_exhausted"
            } else {
                "worker_error"
            };
            // T13 needs Evidence, and `work.fail` carries no usage (its payload refuses
            // unknown fields): a fail the Authority refused left the WorkItem to lapse back
            // to the queue and run again, side effects and all.
            let detail = format!("attempt {attempts} of {max}: the executor failed: {why}");
            let evidence = results::failure_evidence(&run_of(job, leased), &detail).await?;
            charge(job, leased, usage).await;
            job.link
                .send(
                    CommandType::WorkFail,
                    json!({"workItemId": job.work_item, "evidence": [evidence], "reason": reason,
                        "detail": detail}),
                    Some(&leased.lease),
                )
                .await?;
            Ok(Outcome::Failed(why))
        }
    }
}

/// Charges a run that ends in `work.fail` with what it used: `work.fail` carries no usage, so
/// a last progress report does (any owner Command's `usage` is a delta charged to the
/// budgets). Refused (a budget it would overflow), the failure still follows.
async fn charge(job: &Job, leased: &Leased, usage: Budgets) {
    let payload = json!({
        "workItemId": job.work_item, "phase": "ended", "milestonesDone": [],
        "nextCheckpoint": null, "blockers": [], "evidence": [],
        "estimate": {"completionAt": null, "confidence": 1.0}, "usage": usage,
    });
    let sent = job
        .link
        .send(CommandType::WorkProgress, payload, Some(&leased.lease))
        .await;
    if let Err(error) = sent {
        tracing::warn!("the run's usage was not charged: {error}");
    }
}

/// Sends what the Group's journal holds (OFL-5): `true` once nothing of it is pending. A
/// journal stopped at a refusal is discarded, as the runtime does on reconnect.
async fn reconcile_first(job: &Job) -> bool {
    let mut journal = job.journal.lock().await;
    let rebase = Rebase {
        key: &job.link.key,
        session_epoch: job.link.session_epoch,
        membership_epoch: job.link.membership_epoch,
        issued_at: Utc::now().fixed_offset(),
    };
    match journal.reconcile(&job.link.api, rebase).await {
        Ok(done) if done.refused.is_some() => {
            tracing::warn!("the journal stopped at a refusal: {:?}", done.refused);
            journal.discard().is_ok()
        }
        Ok(_) => journal.pending().next().is_none(),
        Err(error) => {
            tracing::warn!("reconciling the journal: {error}");
            false
        }
    }
}

/// Sends an owner Command, or buffers it in the journal while the Authority is away.
async fn report(
    job: &Job,
    leased: &Leased,
    offline_since: &mut Option<chrono::DateTime<Utc>>,
    kind: CommandType,
    payload: serde_json::Value,
) -> anyhow::Result<()> {
    if offline_since.is_none() {
        match job
            .link
            .send(kind, payload.clone(), Some(&leased.lease))
            .await
        {
            Ok(_) => return Ok(()),
            Err(error) if unreachable(&error) => *offline_since = Some(Utc::now()),
            // A refused progress report is not worth stopping the run for.
            Err(error) => {
                tracing::warn!("{kind:?} refused: {error}");
                return Ok(());
            }
        }
    }
    buffer(
        job,
        leased,
        *offline_since,
        kind,
        payload,
        Budgets::default(),
    )
    .await
}

async fn buffer(
    job: &Job,
    leased: &Leased,
    offline_since: Option<chrono::DateTime<Utc>>,
    kind: CommandType,
    mut payload: serde_json::Value,
    usage: Budgets,
) -> anyhow::Result<()> {
    if let Some(object) = payload.as_object_mut() {
        object.remove("usage");
    }
    let lease = OfflineLease {
        agent_id: job.link.agent.clone(),
        group_id: job.link.group.clone(),
        work_item_id: job.work_item.clone(),
        lease_id: leased.lease.clone(),
        session_epoch: job.link.session_epoch,
        membership_epoch: job.link.membership_epoch,
        ownership_epoch: leased.epoch,
        lease_expires_at: leased.expires_at.fixed_offset(),
        grace_seconds: leased.view.contract.leases.grace_seconds,
    };
    let disconnected = offline_since.unwrap_or_else(Utc::now).fixed_offset();
    let mut journal = job.journal.lock().await;
    journal
        .buffer(
            &lease,
            disconnected,
            kind,
            payload,
            usage,
            Utc::now().fixed_offset(),
        )
        .map_err(|e| anyhow::anyhow!("buffering {kind:?}: {e}"))?;
    Ok(())
}
