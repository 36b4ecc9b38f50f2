//! One executor run in one slot (SCH-12): the protocol any language can implement.
//!
//! **What it gets.** A fresh working directory `slots/<n>/run` (mode 0700; owned by the
//! slot's uid when the Worker runs as root with `slot_uid_base`), holding `contract.json`,
//! `inputs/<blake3 hex>` (each verified on download) and an empty `outputs/`; the checkpoint
//! of an earlier attempt, if any, at `checkpoint`. Its environment is cleared: `PATH`, `HOME`
//! (the run directory), `WEFT_WORK_ITEM`, `WEFT_MISSION`, `WEFT_GROUP`, `WEFT_ATTEMPT_KEY`
//! (PRG-9: this attempt), `WEFT_EFFECT_KEY` (DLV-11: stable across attempts, for
//! deduplicating external effects), `WEFT_CHECKPOINT`, `WEFT_INPUTS`, `WEFT_OUTPUTS`, and the
//! executor's own `env` from `worker.toml`. On stdin, one JSON object, then end of file:
//! `{workItemId, missionId, groupId, leaseId, authority, token, contract}`: `token` is a
//! capability token scoped to this lease (LSE-6, dies with it), never written to disk or
//! put in the environment, so no other slot can find it.
//!
//! **What it writes.** Files in `outputs/` (each becomes an Artifact bound to the lease);
//! lines on stdout that are JSON objects `{"progress": {phase, percent?, milestonesDone?,
//! nextCheckpoint?, completionAt?, confidence?}}` or `{"evidence": {criterion, method, name,
//! version, outcome, summary, metrics?}}` (other lines are its log); then its exit status:
//! 0 done, 75 checkpointed (it wrote `checkpoint` and stopped at a safe point), anything else
//! failed.
//!
//! **Preemption** (LSE-11/12). The Worker sends SIGUSR1; the executor writes `checkpoint` at
//! its next safe point and exits 75. The Worker never kills it for preemption. **Limits.**
//! At the wall-clock limit the Worker sends SIGTERM, then SIGKILL 5 s later; CPU seconds (the
//! contract's `computeSeconds`, or the executor's `cpu_seconds` if smaller) and address space
//! are set with `prlimit` right after the spawn.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::sync::mpsc;

use super::config::ExecutorConfig;

/// Exit status of an executor that checkpointed.
pub(super) const CHECKPOINTED: i32 = 75;

/// What the executor said on stdout.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum Line {
    Progress(ProgressLine),
    Evidence(EvidenceLine),
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ProgressLine {
    pub(super) phase: String,
    #[serde(default)]
    pub(super) percent: Option<f64>,
    #[serde(default)]
    pub(super) milestones_done: Vec<String>,
    #[serde(default)]
    pub(super) next_checkpoint: Option<String>,
    #[serde(default)]
    pub(super) completion_at: Option<chrono::DateTime<chrono::FixedOffset>>,
    #[serde(default)]
    pub(super) confidence: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct EvidenceLine {
    pub(super) criterion: String,
    pub(super) method: weft_api::evidence::MethodKind,
    pub(super) name: String,
    pub(super) version: String,
    pub(super) outcome: weft_api::evidence::Outcome,
    pub(super) summary: String,
    #[serde(default)]
    pub(super) metrics: std::collections::BTreeMap<String, weft_api::evidence::Metric>,
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Ending {
    Done,
    Checkpointed,
    Failed(String),
    /// It ran past its wall-clock limit and was stopped.
    TimedOut,
}

/// Where one run lives.
#[derive(Clone, Debug)]
pub(super) struct RunDir {
    pub(super) root: PathBuf,
}

impl RunDir {
    pub(super) fn inputs(&self) -> PathBuf {
        self.root.join("inputs")
    }
    pub(super) fn outputs(&self) -> PathBuf {
        self.root.join("outputs")
    }
    pub(super) fn checkpoint(&self) -> PathBuf {
        self.root.join("checkpoint")
    }

    /// A fresh run directory at `root` (an earlier run's is removed; the checkpoint kept from
    /// an earlier attempt, if any, is copied to `checkpoint`), the Worker's own (0700) until
    /// [`RunDir::hand_over`]: nothing of the slot's uid can plant a symlink where the Worker
    /// (maybe root) writes the contract, the inputs and the checkpoint.
    pub(super) fn prepare(root: &Path, checkpoint: Option<&Path>) -> anyhow::Result<Self> {
        if root.exists() {
            std::fs::remove_dir_all(root)
                .with_context(|| format!("clearing {}", root.display()))?;
        }
        let dir = Self {
            root: root.to_owned(),
        };
        for path in [dir.root.clone(), dir.inputs(), dir.outputs()] {
            std::fs::create_dir_all(&path)?;
            private(&path, None)?;
        }
        if let Some(kept) = checkpoint {
            std::fs::copy(kept, dir.checkpoint())
                .with_context(|| format!("the checkpoint {}", kept.display()))?;
            private(&dir.checkpoint(), None)?;
        }
        Ok(dir)
    }

    /// Gives the filled run directory to the slot's uid: everything in it first, the
    /// directory itself last, so no process of that uid reaches any of it before it is whole.
    pub(super) fn hand_over(&self, uid: Option<u32>) -> anyhow::Result<()> {
        if uid.is_none() {
            return Ok(());
        }
        let mut paths: Vec<PathBuf> = std::fs::read_dir(self.inputs())?
            .flatten()
            .map(|entry| entry.path())
            .collect();
        paths.push(self.inputs());
        paths.push(self.outputs());
        for name in ["contract.json", "checkpoint"] {
            let path = self.root.join(name);
            if std::fs::symlink_metadata(&path).is_ok() {
                paths.push(path);
            }
        }
        paths.push(self.root.clone());
        for path in &paths {
            private(path, uid)?;
        }
        Ok(())
    }
}

/// Mode 0700 (directories) or 0600 (files), owned by `uid` when given.
pub(super) fn private(path: &Path, uid: Option<u32>) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = if path.is_dir() { 0o700 } else { 0o600 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
        if let Some(uid) = uid {
            std::os::unix::fs::chown(path, Some(uid), Some(uid))?;
        }
    }
    Ok(())
}

/// What a run is given.
pub(super) struct Launch<'a> {
    pub(super) executor: &'a ExecutorConfig,
    pub(super) dir: &'a RunDir,
    pub(super) env: Vec<(String, String)>,
    pub(super) stdin: Vec<u8>,
    pub(super) uid: Option<u32>,
    pub(super) wall_clock: Duration,
    /// The contract's `computeSeconds` (RLIMIT_CPU, with the executor's own if smaller).
    pub(super) cpu_seconds: u64,
}

/// A running executor: its pid (for preemption) and the channel of its stdout lines.
pub(super) struct Running {
    pub(super) pid: u32,
    pub(super) lines: mpsc::Receiver<Line>,
    pub(super) ended: tokio::task::JoinHandle<Ending>,
}

/// A run given up (its task aborted: the runtime starts again) stops its executor and what
/// it started; one that ended finds nothing left to stop.
impl Drop for Running {
    fn drop(&mut self) {
        if !self.ended.is_finished() {
            self.ended.abort();
            signal(self.pid, Signal::Kill);
        }
    }
}

/// Starts the executor; its lines arrive on `lines`, its ending on `ended`.
pub(super) fn start(launch: Launch<'_>) -> anyhow::Result<Running> {
    let (program, args) = launch
        .executor
        .command
        .split_first()
        .context("the executor's command is empty")?;
    // Resolved here, so that setting the executor's PATH does not make the spawn fall back
    // from posix_spawn to a fork of the whole Worker (std does, to search the new PATH).
    let mut command = tokio::process::Command::new(resolve(program));
    command
        .args(args)
        .current_dir(&launch.dir.root)
        .env_clear()
        .env(
            "PATH",
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
        )
        .env("HOME", &launch.dir.root)
        .env("WEFT_INPUTS", launch.dir.inputs())
        .env("WEFT_OUTPUTS", launch.dir.outputs())
        .env("WEFT_CHECKPOINT", launch.dir.checkpoint())
        .envs(launch.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .envs(&launch.executor.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .kill_on_drop(true);
    #[cfg(unix)]
    if let Some(uid) = launch.uid {
        command.uid(uid).gid(uid);
    }
    let mut child = command
        .spawn()
        .with_context(|| format!("starting {program}"))?;
    let pid = child.id().context("the executor exited at once")?;
    limit(pid, launch.executor, launch.cpu_seconds);
    // A Worker killed now leaves this file; the next start stops the orphan (`reap`).
    let pid_file = launch.dir.root.with_file_name("executor.pid");
    std::fs::write(
        &pid_file,
        format!("{pid} {}", start_time(pid).unwrap_or_default()),
    )?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    let input = launch.stdin;
    tokio::spawn(async move {
        // An executor that never reads its stdin must not hold up the Worker.
        let _ = stdin.write_all(&input).await;
        let _ = stdin.shutdown().await;
    });
    let stdout = child.stdout.take().context("no stdout")?;
    let (sender, lines) = mpsc::channel(64);
    tokio::spawn(async move {
        let mut reader = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            if let Ok(parsed) = serde_json::from_str::<Line>(&line) {
                if sender.send(parsed).await.is_err() {
                    break;
                }
            } else if !line.is_empty() {
                tracing::info!(target: "weft::worker::executor", "{line}");
            }
        }
    });
    let wall_clock = launch.wall_clock;
    let ended = tokio::spawn(async move {
        let ending = wait(child, pid, wall_clock).await;
        let _ = std::fs::remove_file(&pid_file);
        ending
    });
    Ok(Running { pid, lines, ended })
}

async fn wait(mut child: tokio::process::Child, pid: u32, wall_clock: Duration) -> Ending {
    {
        match tokio::time::timeout(wall_clock, child.wait()).await {
            Ok(Ok(status)) => {
                // What it started and left behind in its group ends with it: nothing acts
                // after the run, without a lease.
                signal(pid, Signal::Kill);
                match status.code() {
                    Some(0) => Ending::Done,
                    Some(CHECKPOINTED) => Ending::Checkpointed,
                    Some(code) => Ending::Failed(format!("exit status {code}")),
                    None => Ending::Failed(format!("ended by {status}")),
                }
            }
            Ok(Err(error)) => {
                signal(pid, Signal::Kill);
                Ending::Failed(format!("waiting for it: {error}"))
            }
            Err(_) => {
                signal(pid, Signal::Term);
                if tokio::time::timeout(Duration::from_secs(5), child.wait())
                    .await
                    .is_err()
                {
                    signal(pid, Signal::Kill);
                    let _ = child.kill().await;
                }
                // A descendant that ignored SIGTERM outlives the leader's exit.
                signal(pid, Signal::Kill);
                Ending::TimedOut
            }
        }
    }
}

/// Stops every process of slot uid `uid` (SCH-12): what a run left, even out of its process
/// group (`setsid`), must not read or plant files in the slot's next run, which may be
/// another Group's. Run before a slot is prepared and when a run ends, before its outputs are
/// read, so that no file of the run changes while the Worker reads it. `kill(-1)` as that uid
/// reaches exactly its processes (and not the caller).
/// Fails closed: a slot whose processes could not be stopped runs nothing.
pub(super) async fn clear_slot(uid: Option<u32>) -> anyhow::Result<()> {
    #[cfg(unix)]
    if let Some(uid) = uid {
        let status = tokio::process::Command::new("/bin/sh")
            .args(["-c", "kill -KILL -1 2>/dev/null; exit 0"])
            .env_clear()
            .uid(uid)
            .gid(uid)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await
            .with_context(|| format!("stopping slot uid {uid}'s processes"))?;
        anyhow::ensure!(
            status.success(),
            "stopping slot uid {uid}'s processes: {status}"
        );
    }
    Ok(())
}

/// After a run, with per-slot uids: its directory and `outputs/` become the Worker's (mode
/// 0700), so nothing of the slot's uid, not even a process started after [`clear_slot`]
/// (cron, `at`), can add, remove or swap an entry while the Worker reads them.
pub(super) fn seal_run(dir: &RunDir, uid: Option<u32>) -> anyhow::Result<()> {
    #[cfg(unix)]
    if uid.is_some() {
        use std::os::unix::fs::PermissionsExt as _;
        let (own, group) = (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
        );
        for path in [dir.root.clone(), dir.outputs()] {
            let meta = std::fs::symlink_metadata(&path)?;
            anyhow::ensure!(
                meta.file_type().is_dir(),
                "{} is not a directory",
                path.display()
            );
            std::os::unix::fs::chown(&path, Some(own), Some(group))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    Ok(())
}

/// A regular file the run left at `path` (never a symlink, a directory or a device),
/// moved to `kept` (a path of the Worker's own, outside the run directory): `Some(kept)`.
/// Moved, not read: a checkpoint may be larger than the Worker's memory, and once moved
/// nothing of the run can swap it. Run after [`clear_slot`].
/// Where the Worker keeps the checkpoints of its WorkItems between attempts: its own files,
/// outside every slot (emptied at every start).
pub(super) fn kept_checkpoints(state_dir: &Path) -> PathBuf {
    state_dir.join("checkpoints")
}

/// Where the Worker keeps WorkItem `work_item`'s (of Group `group`) checkpoint.
pub(super) fn kept_checkpoint(state_dir: &Path, group: &str, work_item: &str) -> PathBuf {
    kept_checkpoints(state_dir).join(group).join(work_item)
}

/// The file becomes the Worker's own (mode 0600, in directories of mode 0700): a later run
/// of the slot's uid, maybe another Group's, can neither read nor rewrite it.
pub(super) fn take_file(path: &Path, kept: &Path) -> Option<PathBuf> {
    if !regular(path) {
        return None;
    }
    let taken = (|| -> std::io::Result<()> {
        if let Some(parent) = kept.parent() {
            std::fs::create_dir_all(parent)?;
            #[cfg(unix)]
            for dir in [parent, parent.parent().unwrap_or(parent)] {
                use std::os::unix::fs::PermissionsExt as _;
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
            }
        }
        std::fs::rename(path, kept)?;
        if !regular(kept) {
            return Err(std::io::Error::other("not a regular file of one link"));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::os::unix::fs::chown(
                kept,
                Some(rustix::process::geteuid().as_raw()),
                Some(rustix::process::getegid().as_raw()),
            )?;
            std::fs::set_permissions(kept, std::fs::Permissions::from_mode(0o600))?;
        }
        Ok(())
    })();
    match taken {
        Ok(()) => Some(kept.to_owned()),
        Err(error) => {
            tracing::warn!("keeping {}: {error}", path.display());
            let _ = std::fs::remove_file(kept);
            None
        }
    }
}

/// A regular file (not a symlink, a directory or a device) with one link: a hard link to a
/// file of someone else's would otherwise pass.
fn regular(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| {
        #[cfg(unix)]
        let one_link = std::os::unix::fs::MetadataExt::nlink(&m) == 1;
        #[cfg(not(unix))]
        let one_link = true;
        m.file_type().is_file() && one_link
    })
}

/// The regular files of one link directly in `dir`, sorted; symlinks, hard links,
/// directories and devices are skipped (a symlink to the Worker's key would otherwise be
/// published). `dir` itself must
/// be a directory, not a symlink to one.
pub(super) fn regular_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let meta = std::fs::symlink_metadata(dir).with_context(|| dir.display().to_string())?;
    anyhow::ensure!(
        meta.file_type().is_dir(),
        "{} is not a directory",
        dir.display()
    );
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            let kept = regular(path);
            if !kept {
                // Said, not silent: an executor that hard-linked an input as a cheap copy
                // learns why its output is missing.
                tracing::warn!(
                    "not published: {} is not a regular file of one link",
                    path.display()
                );
            }
            kept
        })
        .collect();
    files.sort();
    Ok(files)
}

/// The kernel's start time of process `pid` (field 22 of `/proc/<pid>/stat`), so a recorded
/// pid is never mistaken for a later process that reused it.
fn start_time(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after its `)` are plain.
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(19).map(str::to_owned)
}

/// Stops executors a killed Worker left running (their `executor.pid` under `slots/`): their
/// leases were revoked by the new session, so their results would be inert anyway.
pub(super) fn reap(slots: &Path) {
    let Ok(entries) = std::fs::read_dir(slots) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.path().join("executor.pid");
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let mut parts = text.split_whitespace();
        let (Some(pid), started) = (
            parts.next().and_then(|p| p.parse::<u32>().ok()),
            parts.next(),
        ) else {
            continue;
        };
        if start_time(pid).as_deref() == started {
            tracing::warn!("stopping executor {pid}, left running by a Worker that was killed");
            signal(pid, Signal::Kill);
        }
        let _ = std::fs::remove_file(&file);
    }
}

/// `program` as a path: itself when it names a directory, else the first executable of that
/// name on the Worker's `PATH` (the executor gets the same `PATH`).
fn resolve(program: &str) -> std::path::PathBuf {
    if program.contains('/') {
        return program.into();
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(program);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            if candidate
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            {
                return candidate;
            }
        }
    }
    program.into()
}

/// The signals the Worker sends.
#[derive(Clone, Copy, Debug)]
pub(super) enum Signal {
    /// Preemption: checkpoint at the next safe point.
    Checkpoint,
    Term,
    Kill,
}

/// Sends `signal` to the executor's process group.
pub(super) fn signal(pid: u32, signal: Signal) {
    #[cfg(unix)]
    {
        use rustix::process::{Pid, Signal as S, kill_process_group};
        let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
            return;
        };
        let sig = match signal {
            Signal::Checkpoint => S::USR1,
            Signal::Term => S::TERM,
            Signal::Kill => S::KILL,
        };
        if let Err(error) = kill_process_group(pid, sig) {
            tracing::debug!("signal to {pid:?}: {error}");
        }
    }
}

/// CPU seconds and address space from the executor's config, set on the running child.
/// The CPU limit is the smaller of the executor's and the contract's `computeSeconds`.
fn limit(pid: u32, executor: &ExecutorConfig, contract_cpu: u64) {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{Pid, Resource, Rlimit, prlimit};
        let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
            return;
        };
        for (resource, value) in [
            (
                Resource::Cpu,
                Some(
                    executor
                        .cpu_seconds
                        .map_or(contract_cpu, |c| c.min(contract_cpu)),
                ),
            ),
            (Resource::As, executor.memory_bytes),
        ] {
            if let Some(value) = value {
                let rlimit = Rlimit {
                    current: Some(value),
                    maximum: Some(value),
                };
                if let Err(error) = prlimit(Some(pid), resource, rlimit) {
                    tracing::warn!("limiting the executor ({resource:?}): {error}");
                }
            }
        }
    }
}
