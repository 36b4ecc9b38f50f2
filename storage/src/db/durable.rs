//! Pipelined durability for an on-disk database (issue #15): the writer thread commits a
//! batch without waiting for the disk, and the sync thread (`weft-sqlite-sync`) makes it
//! durable and only then answers it.
//!
//! The writer's connection runs WAL with `synchronous = NORMAL`, so a commit writes its
//! frames to the WAL and returns; SQLite syncs the WAL itself only before a checkpoint copies
//! it back. After each commit the writer hands the batch's [`Round`] (its answers and the
//! Events it appended) to the sync thread and starts the next batch at once. The sync thread
//! takes every round handed over so far, runs one `fdatasync` of the WAL for all of them,
//! and then, in commit order, marks them durable, publishes their Events to live subscribers
//! and answers their callers. So the disk's wait overlaps the next batch's work instead of
//! stalling the only writer, and no caller hears "done", and no subscriber sees an Event,
//! before its rows are on disk.
//!
//! **Readers.** A reader can see a commit as soon as SQLite made it visible, before it is
//! durable. Every commit is numbered before it is made visible ([`Durability::begin`]); a
//! read takes the newest number after it has read ([`Durability::horizon`]) and waits until
//! that commit is durable ([`Durability::settled`]) before it answers. Nothing a read returns
//! can vanish in a crash; with no write in flight the wait is one atomic load.
//!
//! **A failed sync** (`EIO`, `ENOSPC`) means the commits since the last good sync may not be
//! on disk, although SQLite shows them. Retrying `fsync` cannot tell (Linux may already have
//! dropped the failed pages), so the database refuses: the rounds of that sync, every later
//! write, and every read that may have seen one of those commits (in practice every read)
//! answer the sync's error (503, or 507 for a full disk) until the server restarts and
//! SQLite recovers from what is on disk. Nothing unsynced is ever answered as done.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::Finisher;
use crate::error::Error;
use crate::faults::{FaultSite, Faults};

/// One committed (or refused) batch on its way to its callers.
pub(super) struct Round {
    /// The number [`Durability::begin`] gave its commit.
    pub(super) number: u64,
    /// Whether the commit changed rows (and so wrote WAL frames that need the sync).
    pub(super) wrote: bool,
    /// The commit's own outcome: an error here is the answer whatever the sync does.
    pub(super) outcome: Result<(), Error>,
    pub(super) finishers: Vec<Finisher>,
    pub(super) appended: Vec<weft_api::Event>,
}

impl Round {
    /// Answers the round's callers with `outcome` (the commit's, or the sync's error), and on
    /// success publishes its Events first, so an answered caller's subscribers have them.
    pub(super) fn deliver(
        self,
        outcome: Result<(), Error>,
        publish: &tokio::sync::broadcast::Sender<weft_api::Event>,
    ) {
        let outcome = self.outcome.and(outcome);
        if outcome.is_ok() {
            // A send fails only when nobody subscribes.
            for event in self.appended {
                let _ = publish.send(event);
            }
        }
        for finish in self.finishers {
            finish(outcome.clone());
        }
    }
}

/// Which commits may be visible and which are durable; shared by the writer, the sync thread
/// and every reader of one database.
#[derive(Debug)]
pub(super) struct Durability {
    /// The number of the newest commit begun: bumped before SQLite makes a commit visible.
    begun: AtomicU64,
    /// Every commit numbered up to this is durable (mirrors `progress` for the fast path).
    durable: AtomicU64,
    /// Durable progress and, once a sync has failed, its error; readers wait on this.
    progress: tokio::sync::watch::Sender<Progress>,
    /// The failed sync's error, for the writer's check before each batch.
    failure: Mutex<Option<Error>>,
}

#[derive(Clone, Debug, Default)]
struct Progress {
    durable: u64,
    failed: Option<Error>,
}

impl Durability {
    pub(super) fn new() -> Self {
        Self {
            begun: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            progress: tokio::sync::watch::Sender::new(Progress::default()),
            failure: Mutex::new(None),
        }
    }

    /// Numbers the commit about to be made; call it before the commit, so that any reader
    /// that can see the commit's rows finds a horizon at least this high.
    pub(super) fn begin(&self) -> u64 {
        self.begun.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// What a read that has just finished may have seen: the newest commit begun.
    pub(super) fn horizon(&self) -> u64 {
        self.begun.load(Ordering::SeqCst)
    }

    /// The failed sync's error, if a sync has failed.
    pub(super) fn failure(&self) -> Option<Error> {
        self.failure
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Waits until every commit up to `horizon` is durable; fails if a sync failed first.
    pub(super) async fn settled(&self, horizon: u64) -> Result<(), Error> {
        if self.durable.load(Ordering::SeqCst) >= horizon {
            return Ok(());
        }
        let mut progress = self.progress.subscribe();
        let reached = progress
            .wait_for(|p| p.durable >= horizon || p.failed.is_some())
            .await
            // The sender lives as long as `self`.
            .map_err(|_| Error::ShuttingDown)?;
        if reached.durable >= horizon {
            Ok(())
        } else {
            Err(reached.failed.clone().unwrap_or(Error::ShuttingDown))
        }
    }

    fn durable_through(&self, number: u64) {
        self.durable.fetch_max(number, Ordering::SeqCst);
        self.progress
            .send_modify(|p| p.durable = p.durable.max(number));
    }

    fn fail(&self, error: &Error) {
        let mut failure = self
            .failure
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if failure.is_none() {
            tracing::error!(%error, "the WAL could not be synced: the database refuses work until restart");
            *failure = Some(error.clone());
            self.progress
                .send_modify(|p| p.failed = Some(error.clone()));
        }
    }
}

/// The sync thread's end of the pipeline: rounds in commit order.
pub(super) type Rounds = std::sync::mpsc::Receiver<Round>;

/// Rounds the writer may hand over before it waits for the disk: enough to keep the disk's
/// wait off the writer, few enough that readers never wait behind a long queue of syncs.
pub(super) const ROUNDS_IN_FLIGHT: usize = 64;

/// The sync thread's loop: ends when the writer drops its sender.
pub(super) fn sync_thread(
    rounds: &Rounds,
    wal: &Path,
    durability: &Durability,
    publish: &tokio::sync::broadcast::Sender<weft_api::Event>,
    faults: &Faults,
) {
    let mut wal_file = WalFile::new(wal.to_path_buf());
    while let Ok(first) = rounds.recv() {
        let mut taken = vec![first];
        while let Ok(more) = rounds.try_recv() {
            taken.push(more);
        }
        let through = taken.iter().map(|round| round.number).max().unwrap_or(0);
        let synced = match durability.failure() {
            Some(error) => Err(error),
            None if taken.iter().any(|r| r.wrote && r.outcome.is_ok()) => wal_file.sync(faults),
            // Nothing new to sync (reads, refusals): every earlier round is durable already.
            None => Ok(()),
        };
        match &synced {
            Ok(()) => durability.durable_through(through),
            Err(error) => durability.fail(error),
        }
        for round in taken {
            round.deliver(synced.clone(), publish);
        }
    }
}

/// The WAL, opened for syncing on first use.
struct WalFile {
    path: PathBuf,
    file: Option<std::fs::File>,
}

impl WalFile {
    fn new(path: PathBuf) -> Self {
        Self { path, file: None }
    }

    /// `fdatasync`s the WAL; the first time, also its directory, since this process may have
    /// created the file (SQLite syncs a new WAL's directory at its own first sync, which
    /// `synchronous = NORMAL` leaves to the checkpoint).
    fn sync(&mut self, faults: &Faults) -> Result<(), Error> {
        faults.wait_while_syncs_held();
        faults.check(FaultSite::DbSync).map_err(Error::backend)?;
        let file = match &self.file {
            Some(file) => file,
            None => {
                let file = std::fs::File::open(&self.path).map_err(Error::backend)?;
                if let Some(dir) = self.path.parent() {
                    std::fs::File::open(dir)
                        .and_then(|dir| dir.sync_all())
                        .map_err(Error::backend)?;
                }
                self.file.insert(file)
            }
        };
        file.sync_data().map_err(Error::backend)
    }
}

/// The WAL's path for the database at `path` (SQLite appends `-wal`).
pub(super) fn wal_path(path: &Path) -> PathBuf {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

/// A shared handle, for the `Db` and both threads.
pub(super) type Shared = Arc<Durability>;
