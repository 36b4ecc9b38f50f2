//! The writer threads (`db.rs`): each owns one read-write connection and runs every job
//! waiting in its lane in one transaction, each job in its own savepoint, and answers the
//! callers only after the commit.
//!
//! SQLite has one lane: one writer per database file. On PostgreSQL a server runs
//! `POSTGRES_LANES` (`db.rs`) lanes, each with its own connection, and a Group's Commands,
//! publications and Evidence always go to the same lane (`Db::write_in`): Groups are written
//! in parallel, as by several servers, while each Group's writes stay serial in the database
//! (its row lock) and in one lane. Other jobs go to the first lane.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::follow;
use crate::error::Error;
use crate::sql::{Cached as _, Connection};
use crate::unit::Tx;

pub(super) type Finisher = Box<dyn FnOnce(Result<(), Error>) + Send>;
pub(super) type Job = Box<dyn Work>;

/// One caller's unit of work: run it inside the batch transaction, or tell the caller it
/// could not run.
pub(super) trait Work: Send {
    /// Runs the job; `true` if it succeeded (its savepoint is kept). The finisher delivers
    /// the job's answer once the commit's outcome is known.
    fn run(self: Box<Self>, tx: &Tx<'_>) -> (bool, Finisher);
    fn fail(self: Box<Self>, error: Error);
    /// The Group it writes, when its caller said (`Db::write_in`).
    fn group(&self) -> Option<&str>;
    /// Whether it takes an idempotency key's lock before anything else (`claim.rs`).
    fn claimed(&self) -> bool;
}

pub(super) struct Typed<T, F> {
    pub(super) body: F,
    pub(super) reply: oneshot::Sender<Result<T, Error>>,
    pub(super) group: Option<Box<str>>,
    pub(super) claimed: bool,
}

impl<T, F> Work for Typed<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Tx<'_>) -> Result<T, Error> + Send + 'static,
{
    fn run(self: Box<Self>, tx: &Tx<'_>) -> (bool, Finisher) {
        // The changes the job sent ahead (PostgreSQL, `sql/pipeline.rs`) are answered before
        // its outcome is decided: a failed one fails the job.
        let body = (self.body)(tx);
        let result = Tx::outcome(body, tx.settle());
        let ok = result.is_ok();
        let reply = self.reply;
        let finish: Finisher = Box::new(move |commit| {
            // The caller may have gone away; its answer is then simply dropped.
            let _ = reply.send(commit.and(result));
        });
        (ok, finish)
    }

    fn fail(self: Box<Self>, error: Error) {
        let _ = self.reply.send(Err(error));
    }

    fn group(&self) -> Option<&str> {
        self.group.as_deref()
    }

    fn claimed(&self) -> bool {
        self.claimed
    }
}

/// Most jobs committed together.
const MAX_BATCH: usize = 512;

/// Where a writer sends what it committed, and what it needs to connect again.
pub(super) struct Outlets {
    /// The PostgreSQL server to connect to again after it went away (none on SQLite).
    pub(super) reconnect: Option<String>,
    pub(super) publish: tokio::sync::broadcast::Sender<weft_api::Event>,
    pub(super) meter: Arc<crate::sql::WriteMeter>,
    pub(super) owed: Arc<tokio::sync::Notify>,
    /// This process's name in the commits it announces on a shared index.
    pub(super) announce: Option<Arc<str>>,
    /// Told when a commit on a shared index fails with its outcome unknown.
    pub(super) resyncs: super::follow::Resyncs,
    /// Nudges the checkpointer (SQLite) after a batch.
    pub(super) written: std::sync::mpsc::SyncSender<()>,
}

/// Starts lane `lane`'s writer thread over `conn`, taking jobs from `inbox` until every
/// sender is gone.
pub(super) fn spawn(
    lane: usize,
    mut conn: Connection,
    mut inbox: mpsc::Receiver<Job>,
    out: Outlets,
) -> Result<(), Error> {
    std::thread::Builder::new()
        .name(format!("weft-writer-{lane}"))
        .spawn(move || {
            // Whether SQLite's trace hook is on for the meter (`sql::trace`).
            let mut traced = false;
            while let Some(first) = inbox.blocking_recv() {
                if let (Connection::Postgres(pg), Some(url)) = (&conn, &out.reconnect)
                    && pg.is_closed()
                {
                    // The server went away (a restart, a partition): connect again for this
                    // batch; if that fails too, the batch fails and the next tries.
                    match crate::sql::postgres::Pg::connect(url) {
                        Ok(fresh) => conn = Connection::Postgres(Box::new(fresh)),
                        Err(error) => {
                            let error = Error::from(error);
                            first.fail(error.clone());
                            while let Ok(job) = inbox.try_recv() {
                                job.fail(error.clone());
                            }
                            std::thread::sleep(std::time::Duration::from_millis(100));
                            continue;
                        }
                    }
                }
                let mut batch = vec![first];
                while batch.len() < MAX_BATCH {
                    match inbox.try_recv() {
                        Ok(job) => batch.push(job),
                        Err(_) => break,
                    }
                }
                // Groups' locks taken in one order by every batch of every lane and server
                // (a stable sort: one Group's jobs keep theirs), so two batches of Group jobs
                // never wait on each other's locks in a circle. Jobs that named no Group
                // come first, as they came, each ending its transaction if it locked one.
                batch.sort_by(|a, b| a.group().cmp(&b.group()));
                if out.meter.armed() != traced {
                    traced = !traced;
                    conn.trace(traced);
                }
                // A batch is cut after a job that locked a Group it did not name (below):
                // what is left runs in the next transaction.
                while !batch.is_empty() {
                    // A job's own panic is caught inside (its savepoint rolled back); one
                    // outside a job (the tree's growth, a finisher dropping an answer nobody
                    // awaits) is caught here, so the lane, and every Group routed to it, keeps
                    // its writer: the batch's transaction is rolled back if still open, and
                    // the callers whose answers were lost hear `ShuttingDown`, as after a crash.
                    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        run_batch(
                            &mut conn,
                            batch,
                            &out.publish,
                            &out.meter,
                            out.announce.as_deref(),
                            &out.resyncs,
                        )
                    }));
                    let (owes, rest) = match ran {
                        Ok(ran) => ran,
                        Err(_) => {
                            tracing::error!(lane, "a writer batch panicked outside its jobs; its transaction was rolled back if still open");
                            let _ = conn.settle();
                            let _ = conn.execute_batch("ROLLBACK");
                            conn.forget_lasting();
                            (true, Vec::new())
                        }
                    };
                    if owes {
                        out.owed.notify_one();
                    }
                    batch = rest;
                }
                // Something may be in the WAL now; a full channel already says so.
                let _ = out.written.try_send(());
            }
        })
        .map_err(Error::backend)?;
    Ok(())
}

/// Runs one batch in one transaction; whether it committed a reaction's row, and the jobs it
/// left for the next transaction.
///
/// On PostgreSQL the batch is cut after a job that locked a Group it did not name (one sent
/// with `Db::write`, such as the expiry timer, a hold, a forwarded Context Package): the
/// locks it took, in its own order, are released at the commit before the Group jobs
/// behind it take theirs in the batch's order, so no two transactions wait on each other in
/// a circle. A job that locks no Group, or only its own, shares the transaction.
fn run_batch(
    conn: &mut Connection,
    batch: Vec<Job>,
    publish: &tokio::sync::broadcast::Sender<weft_api::Event>,
    meter: &crate::sql::WriteMeter,
    announce: Option<&str>,
    resyncs: &super::follow::Resyncs,
) -> (bool, Vec<Job>) {
    let cuts = conn.engine() == crate::sql::Engine::Postgres;
    let txn: &Connection = conn;
    match txn.begin() {
        Ok(()) => {}
        Err(error) => {
            let error = Error::from(error);
            for job in batch {
                // Without a transaction no job may run; each caller hears why.
                job.fail(error.clone());
            }
            return (false, Vec::new());
        }
    };
    let mut finishers = Vec::with_capacity(batch.len());
    let mut appended = Vec::new();
    let mut leaves = Vec::new();
    let mut owes_reaction = false;
    let mut broken: Option<Error> = None;
    let mut rest = Vec::new();
    // The Group locks the transaction holds (PostgreSQL): taken by a job whose savepoint was
    // released, they last until the commit, so the batch's later jobs of those Groups do not
    // take them again (a round trip each). A rolled-back job's locks are not counted: its
    // savepoint's rollback let them go.
    let mut held: Vec<String> = Vec::new();
    // Whether a job kept a lock in the transaction (kept even when `held` is forgotten).
    let mut under_locks = false;
    // Each Group's newest Event as the released jobs left it (`rows/events.rs`): a later
    // job appends after it without reading it again. A refused job forgets them all.
    let mut heads: Vec<(String, crate::rows::events::Newest)> = Vec::new();
    let mut jobs = batch.into_iter();
    while let Some(job) = jobs.next() {
        if let Some(error) = &broken {
            job.fail(error.clone());
            continue;
        }
        // A job under an `Idempotency-Key` takes the key's lock first (`claim.rs`), as a
        // retry of the key through another server does before that one's Group locks: it
        // never waits for the key while this transaction holds a Group's lock an earlier job
        // took, or the two could wait on each other in a circle. It starts the next
        // transaction instead.
        if cuts && job.claimed() && under_locks {
            rest = std::iter::once(job).chain(jobs).collect();
            break;
        }
        let named = cuts.then(|| job.group().map(Box::<str>::from));
        let claimed = job.claimed();
        // Sent ahead on PostgreSQL: read with the job's first statement.
        if let Err(error) = txn.control_later("SAVEPOINT job") {
            let error = Error::from(error);
            job.fail(error.clone());
            broken = Some(error);
            continue;
        }
        let tx = Tx::new(txn);
        for group in &held {
            tx.loaded().lock_held(group);
        }
        for (group, newest) in &heads {
            crate::rows::events::hand_over(&tx, group, newest);
        }
        // A panicking job must not take the writer thread (and every later write) with it:
        // its savepoint is rolled back and its caller hears `ShuttingDown` from the dropped
        // reply channel.
        let run = || meter.run(|| job.run(&tx));
        let Ok((ok, finish)) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) else {
            tracing::error!("a storage job panicked; its changes were rolled back");
            // What it sent ahead is read first: its errors are the panicking job's.
            let _ = txn.settle();
            if let Err(error) = txn.execute_batch("ROLLBACK TO job; RELEASE job") {
                broken = Some(error.into());
            }
            continue;
        };
        let cut = named.is_some_and(|named| tx.loaded().locked_other_than(named.as_deref()));
        match ok {
            true if cuts => {
                let locked = tx.loaded().locked();
                // A claimed job keeps its key's lock to the commit too: a second key is not
                // waited for under it (another server may take the two the other way round).
                under_locks |= claimed || !locked.is_empty();
                held.extend(locked);
            }
            // A refused job's rollback goes to its own savepoint, unless a savepoint statement
            // sent ahead failed (then the batch rolls back whole): held no longer, to be sure.
            false => {
                held.clear();
                heads.clear();
            }
            true => {}
        }
        if ok {
            for (group, newest) in crate::rows::events::newest_known(&tx) {
                match heads.iter_mut().find(|(known, _)| *known == group) {
                    Some(known) => known.1 = newest,
                    None => heads.push((group, newest)),
                }
            }
        }
        let end = if ok {
            let (events, hashes, owes) = tx.into_appended();
            appended.extend(events);
            leaves.extend(hashes);
            owes_reaction |= owes;
            // Sent ahead on PostgreSQL: read with the next job's first statement, or the
            // commit's.
            txn.control_later("RELEASE job")
        } else {
            // A refused job's path: parsed each time, as rare as refusals.
            txn.execute_batch("ROLLBACK TO job; RELEASE job")
        };
        if let Err(error) = end {
            broken = Some(error.into());
        }
        finishers.push(finish);
        if ok && cut && broken.is_none() {
            rest = jobs.collect();
            break;
        }
    }
    // Each Group's Merkle tree grows by the batch's Events at once (`tlog::grow`): one read
    // and a few inserts per Group, not per Event; a failure fails the batch.
    if broken.is_none()
        && !appended.is_empty()
        && let Err(error) = meter.run(|| crate::tlog::grow(txn, &appended, &leaves))
    {
        broken = Some(error);
    }
    // A savepoint statement sent ahead that failed (PostgreSQL, `sql/pipeline.rs`) may have
    // been read by a later job's statement, and that job's rollback then went to the wrong
    // savepoint: the batch's job boundaries are unknown, so none of it commits.
    if broken.is_none() {
        match txn.settle() {
            Err(error) => broken = Some(error.into()),
            Ok(()) if txn.take_control_failure() => {
                // Retry later (503): nothing of the batch is kept.
                broken = Some(Error::backend(std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "a savepoint statement of the writer's batch failed; the batch is rolled back",
                )));
            }
            Ok(()) => {}
        }
    }
    // On a shared index, the commit announces itself to the other processes (`db/follow.rs`);
    // the notification is delivered only if the transaction commits.
    if let (None, Some(origin)) = (&broken, announce) {
        for payload in follow::payloads(origin, &appended) {
            if let Err(error) = txn.run("SELECT pg_notify('weft_commits', ?1)", [payload]) {
                broken = Some(error.into());
                break;
            }
        }
    }
    let commit = match broken {
        Some(error) => {
            if let Err(rollback) = txn.execute_batch("ROLLBACK") {
                tracing::error!(%rollback, "the writer could not roll back a broken batch");
            }
            Err(error)
        }
        // A commit that cannot write or fsync the WAL (a full disk, an I/O error) fails
        // and is rolled back (rusqlite rolls back a transaction whose COMMIT failed, if
        // SQLite has not already): nothing of it is visible, and every job of the batch hears
        // why.
        None => txn.control("COMMIT").map_err(Error::from),
    };
    if commit.is_err() {
        // What the batch's jobs read may never have been (`sql/lasting.rs`).
        conn.forget_lasting();
        if announce.is_some() {
            // On a shared index a COMMIT that failed (a connection lost) may have been
            // applied: its Events were published to no one here, and the follower skips this
            // process's own announcements. Everything that follows the log reads it again.
            resyncs.send();
        }
    }
    if commit.is_err() && !conn.is_autocommit() {
        // The rollback on drop failed too: without this the writer could never begin again.
        if let Err(error) = conn.execute_batch("ROLLBACK") {
            tracing::error!(%error, "the writer could not roll back a failed commit");
        }
    }
    if commit.is_ok() {
        // Durable first, then visible to subscribers; a send fails only with no subscriber.
        for event in appended {
            let _ = publish.send(event);
        }
    }
    // The next batch starts with no failure of this one's (its ROLLBACK read them too).
    let _ = conn.take_control_failure();
    let committed = commit.is_ok();
    for finish in finishers {
        finish(commit.clone());
    }
    (committed && owes_reaction, rest)
}
