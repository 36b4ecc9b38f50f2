//! The index and event log (SQLite, or PostgreSQL: `sql/`), behind a fence.
//! Long (about 620 lines) because the writer, its batches, the readers and the WAL's
//! checkpointer share one connection story and are told in one place.
//!
//! One dedicated thread (`weft-sqlite-writer`) owns this process's only read-write
//! connection. Async
//! callers send it jobs; it runs every job that is waiting in one transaction, each job inside
//! its own SAVEPOINT (a failed job rolls back alone), commits once, and only then answers the
//! callers. That is group commit: one fsync covers a batch, and no caller hears "done" before
//! its rows are durable (WAL with `synchronous=FULL`).
//!
//! Reads on an on-disk database use a small pool of read-only connections on the blocking
//! pool; an in-memory database has only the writer's connection, so reads go through it too.
//! No connection is ever held across an `.await`. A job sees its transaction as a
//! [`Tx`] (`unit.rs`: the unit of work, its appended Events and the rows it loaded).
//!
//! On PostgreSQL the same writer runs the same jobs over one connection; reads use a small
//! pool of connections of their own (a read is one statement's snapshot). A lost connection
//! fails the batch it was running (nothing of it committed, every caller hears why) and the
//! writer connects again before the next one.
//!
//! Crash story: a transaction is all or nothing; on restart SQLite replays or discards the
//! WAL; PostgreSQL's own recovery does the same for its log.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rusqlite::OpenFlags;
use tokio::sync::{mpsc, oneshot};

use crate::error::Error;
use crate::schema;
use crate::sql::{Cached as _, Connection, STATEMENT_CACHE};

mod again;
mod follow;

pub(crate) use again::write_again_if_raced;

use crate::unit::Tx;
pub(crate) use follow::Foreign;

type Finisher = Box<dyn FnOnce(Result<(), Error>) + Send>;
type Job = Box<dyn Work>;

/// One caller's unit of work: run it inside the batch transaction, or tell the caller it
/// could not run.
trait Work: Send {
    /// Runs the job; `true` if it succeeded (its savepoint is kept). The finisher delivers
    /// the job's answer once the commit's outcome is known.
    fn run(self: Box<Self>, tx: &Tx<'_>) -> (bool, Finisher);
    fn fail(self: Box<Self>, error: Error);
}

struct Typed<T, F> {
    body: F,
    reply: oneshot::Sender<Result<T, Error>>,
}

impl<T, F> Work for Typed<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Tx<'_>) -> Result<T, Error> + Send + 'static,
{
    fn run(self: Box<Self>, tx: &Tx<'_>) -> (bool, Finisher) {
        // The changes the job sent ahead (PostgreSQL, `sql/pipeline.rs`) are answered before
        // its outcome is decided: a failed one fails the job.
        let result = match ((self.body)(tx), tx.settle()) {
            (Ok(value), Ok(())) => Ok(value),
            (Ok(_), Err(error)) => Err(error.into()),
            (Err(error), _) => Err(error),
        };
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
}

/// Most jobs committed together.
const MAX_BATCH: usize = 512;
/// Committed Events buffered for slow live subscribers before they must re-read the log.
const COMMITTED_BUFFER: usize = 16 * 1024;
/// Read-only connections kept open.
const MAX_IDLE_READERS: usize = 8;

/// Where the database lives.
#[derive(Clone)]
pub enum Location {
    /// A SQLite database file.
    File(PathBuf),
    /// A private SQLite database in memory.
    Memory,
    /// A PostgreSQL database: `postgres://user@host:port/database`.
    Postgres(String),
}

impl std::fmt::Debug for Location {
    /// A PostgreSQL URL without its password (logs never show it).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            Self::Memory => f.write_str("Memory"),
            Self::Postgres(url) => f.debug_tuple("Postgres").field(&redacted(url)).finish(),
        }
    }
}

/// `url` with the password of its user part, if any, replaced by `***`.
fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "***".to_owned();
    };
    let Some((user, host)) = rest.split_once('@') else {
        return url.to_owned();
    };
    match user.split_once(':') {
        Some((name, _)) => format!("{scheme}://{name}:***@{host}"),
        None => url.to_owned(),
    }
}

/// Where read-only connections come from.
#[derive(Clone)]
enum ReadFrom {
    Sqlite(PathBuf),
    Postgres(String),
}

#[derive(Clone)]
pub(crate) struct Db {
    jobs: mpsc::Sender<Job>,
    /// Every committed Event, in commit order, for live subscribers.
    committed: tokio::sync::broadcast::Sender<weft_api::Event>,
    readers: Option<Arc<Mutex<Vec<Connection>>>>,
    /// Where readers connect (`None`: an in-memory database, read through the writer).
    read_from: Option<ReadFrom>,
    /// Names this database among those a thread keeps a connection to (`read_here`).
    id: u64,
    /// Counts the writer's SQL work while armed (tests).
    meter: Arc<crate::sql::WriteMeter>,
    /// Notified after a commit that owes a reaction (`reactions.rs` waits on it).
    reactions_owed: Arc<tokio::sync::Notify>,
    /// Events other processes committed to a shared index (`db/follow.rs`).
    foreign: tokio::sync::broadcast::Sender<Foreign>,
    /// Held (never read) by every clone; the follower thread ends when the last is dropped.
    _alive: Arc<()>,
    /// Reads on PostgreSQL at once (each holds a connection of the server's): past it a read
    /// waits for one to end, so no client can open connections without bound.
    read_permits: Option<Arc<tokio::sync::Semaphore>>,
}

/// Reads on one PostgreSQL index at once (`Db::read_permits`).
const MAX_POSTGRES_READERS: usize = 16;

/// Gives every opened database its own `Db::id`.
static NEXT_DB: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Databases a thread keeps a read-only connection to for `Db::read_here` (a server has one;
/// tests open many, so the oldest is closed past this many).
const NEAR_PER_THREAD: usize = 4;

thread_local! {
    /// This thread's read-only connections for `Db::read_here`, by `Db::id`, newest last.
    static NEAR: RefCell<Vec<(u64, Connection)>> = const { RefCell::new(Vec::new()) };
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let engine = match &self.read_from {
            None => "sqlite in memory",
            Some(ReadFrom::Sqlite(_)) => "sqlite",
            Some(ReadFrom::Postgres(_)) => "postgres",
        };
        f.debug_struct("Db").field("engine", &engine).finish()
    }
}

/// The writer's connection. `temp_store = MEMORY` keeps the statement sub-journal of every
/// job's savepoint (and a batch's per-Command savepoints) in memory rather than a temp file:
/// it only ever serves a rollback inside the open transaction, never recovery.
fn open_writer(location: &Location, faults: &crate::faults::Faults) -> Result<Connection, Error> {
    let conn = match location {
        Location::File(path) => {
            sync_leftover_wal(path, faults)?;
            open_writing(path, faults.vfs().or(gathering_vfs()))?
        }
        Location::Memory => rusqlite::Connection::open_in_memory()?,
        Location::Postgres(url) => {
            return crate::sql::postgres::off_runtime(|| {
                let conn = Connection::Postgres(Box::new(crate::sql::postgres::Pg::connect(url)?));
                schema::migrate(&conn)?;
                Ok(conn)
            });
        }
    };
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;
         PRAGMA foreign_keys = ON;
         PRAGMA busy_timeout = 5000;
         PRAGMA temp_store = MEMORY;",
    )?;
    if matches!(location, Location::File(_)) {
        // The WAL's writes are gathered (`weft-sqlite-vfs`); that is safe only under the
        // settings above and a main file with powersafe overwrite. Checked, not assumed.
        weft_sqlite_vfs::check_gathering(&conn).map_err(|why| {
            Error::backend(std::io::Error::other(format!(
                "the writer cannot gather WAL writes: {why}"
            )))
        })?;
        // The checkpointer thread copies the WAL back (`checkpointer` below); the writer
        // checkpoints itself only if that falls far behind.
        conn.pragma_update(None, "wal_autocheckpoint", WRITER_CHECKPOINT_PAGES)?;
    }
    keep_plans(&conn)?;
    let conn = Connection::Sqlite(conn);
    schema::migrate(&conn)?;
    Ok(conn)
}

/// Every SQLite connection caches its prepared statements and keeps their plans: with the
/// query planner stability guarantee (QPSG) on, binding a parameter the planner looked at
/// (a `LIMIT ?`) no longer expires the statement, which SQLite otherwise re-prepares (parses
/// and plans again) at every run. The WorkItem view's four `newest` queries did that on
/// every Command: 11 % of the writer thread's time in a renewal profile (issue #44).
fn keep_plans(conn: &rusqlite::Connection) -> Result<(), Error> {
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(())
}

/// The process's `weft-sqlite-vfs` VFS without a hook, which the writer opens through in
/// every server: it gathers each commit's WAL writes into as few `pwrite`s as the unix VFS
/// takes, one for a small commit (that crate's `gather.rs`), where the default VFS makes two
/// per page. Registered once; if SQLite refuses, the writer opens through the default VFS,
/// which is slower and as safe.
fn gathering_vfs<'a>() -> Option<&'a str> {
    static VFS: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    VFS.get_or_init(|| match weft_sqlite_vfs::register(None) {
        Ok(name) => Some(name),
        Err(code) => {
            tracing::warn!(
                code,
                "SQLite did not register weft's VFS; the default VFS writes"
            );
            None
        }
    })
    .as_deref()
}

/// A read-write connection to the database at `path`, through `vfs` (weft's own,
/// `gathering_vfs`, or the fault-injection VFS of a test, `faults.rs`) when given.
fn open_writing(
    path: &std::path::Path,
    vfs: Option<&str>,
) -> rusqlite::Result<rusqlite::Connection> {
    match vfs {
        Some(vfs) => rusqlite::Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs),
        None => rusqlite::Connection::open(path),
    }
}

/// A process killed inside a commit's fsync leaves WAL frames that were written but maybe not
/// synced: SQLite's recovery reads them back (from the page cache) and shows them, though a
/// power loss could still take them. Their commit was never answered, but a read after the
/// restart could return their rows; syncing the WAL and its directory before the first read
/// makes everything the database shows at open durable. No WAL (a clean stop removes it):
/// nothing to do.
fn sync_leftover_wal(path: &std::path::Path, faults: &crate::faults::Faults) -> Result<(), Error> {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let wal = std::path::PathBuf::from(wal);
    let unsynced = |source| {
        Error::backend(Unsynced {
            path: wal.clone(),
            source,
        })
    };
    let file = match std::fs::File::open(&wal) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(unsynced(error)),
    };
    faults
        .check(crate::faults::FaultSite::DbWalSync)
        .and_then(|()| file.sync_all())
        .map_err(unsynced)?;
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::File::open(dir)
            .and_then(|dir| dir.sync_all())
            .map_err(|source| {
                Error::backend(Unsynced {
                    path: dir.to_path_buf(),
                    source,
                })
            })?;
    }
    Ok(())
}

/// What `sync_leftover_wal` could not sync, and why (the I/O error stays the source, so a
/// full or failing disk is still reported as one).
#[derive(Debug, thiserror::Error)]
#[error("cannot make the WAL a stopped process left durable: syncing {path} failed")]
struct Unsynced {
    path: std::path::PathBuf,
    #[source]
    source: std::io::Error,
}

impl Db {
    #[cfg(test)]
    pub(crate) fn open(location: &Location) -> Result<Self, Error> {
        Self::open_with(location, crate::faults::Faults::default())
    }

    /// Opens the database; with `faults` made by [`crate::Faults::with_database`], the writer
    /// and the checkpointer write through the VFS that injects them (tests only).
    pub(crate) fn open_with(
        location: &Location,
        faults: crate::faults::Faults,
    ) -> Result<Self, Error> {
        let vfs: Option<String> = faults.vfs().map(str::to_owned);
        let mut conn = open_writer(location, &faults)?;
        let (jobs, mut inbox) = mpsc::channel::<Job>(4096);
        let (committed, _) = tokio::sync::broadcast::channel(COMMITTED_BUFFER);
        let publish = committed.clone();
        let meter = Arc::new(crate::sql::WriteMeter::default());
        let writer_meter = Arc::clone(&meter);
        let reactions_owed = Arc::new(tokio::sync::Notify::new());
        let owed = Arc::clone(&reactions_owed);
        let (foreign, _) = tokio::sync::broadcast::channel(COMMITTED_BUFFER);
        let alive = Arc::new(());
        // Names this process in the commits it announces on a shared index.
        let origin: Arc<str> = uuid::Uuid::new_v4().to_string().into();
        let announce = matches!(location, Location::Postgres(_)).then(|| Arc::clone(&origin));
        if let Location::Postgres(url) = location {
            let outlets = follow::Outlets {
                committed: committed.clone(),
                foreign: foreign.clone(),
            };
            follow::start(url.clone(), origin, outlets, Arc::downgrade(&alive))
                .map_err(Error::backend)?;
        }
        // Dropped when the writer thread ends, which ends the checkpointer.
        let (writing, written) = std::sync::mpsc::sync_channel::<()>(1);
        if let Location::File(path) = location {
            let path = path.clone();
            std::thread::Builder::new()
                .name("weft-sqlite-checkpoint".into())
                .spawn(move || checkpointer(&path, vfs.as_deref(), &written))
                .map_err(Error::backend)?;
        }
        let reconnect = location.clone();
        std::thread::Builder::new()
            .name("weft-sqlite-writer".into())
            .spawn(move || {
                // Whether SQLite's trace hook is on for the meter (`sql::trace`).
                let mut traced = false;
                while let Some(first) = inbox.blocking_recv() {
                    if let (Connection::Postgres(pg), Location::Postgres(url)) = (&conn, &reconnect)
                        && pg.is_closed()
                    {
                        // The server went away (a restart, a partition): connect again for
                        // this batch; if that fails too, the batch fails and the next tries.
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
                    if writer_meter.armed() != traced {
                        traced = !traced;
                        conn.trace(traced);
                    }
                    if run_batch(
                        &mut conn,
                        batch,
                        &publish,
                        &writer_meter,
                        announce.as_deref(),
                    ) {
                        owed.notify_one();
                    }
                    // Something may be in the WAL now; a full channel already says so.
                    let _ = writing.try_send(());
                }
            })
            .map_err(Error::backend)?;
        let read_from = match &location {
            Location::File(path) => Some(ReadFrom::Sqlite(path.clone())),
            Location::Memory => None,
            Location::Postgres(url) => Some(ReadFrom::Postgres(url.clone())),
        };
        let readers = read_from.as_ref().map(|_| Arc::new(Mutex::new(Vec::new())));
        Ok(Self {
            jobs,
            committed,
            readers,
            read_from,
            id: NEXT_DB.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            meter,
            reactions_owed,
            foreign,
            _alive: alive,
            read_permits: matches!(location, Location::Postgres(_))
                .then(|| Arc::new(tokio::sync::Semaphore::new(MAX_POSTGRES_READERS))),
        })
    }

    /// Events other processes commit to a shared index, from now on (nothing on SQLite).
    pub(crate) fn subscribe_foreign(&self) -> tokio::sync::broadcast::Receiver<Foreign> {
        self.foreign.subscribe()
    }

    /// Copies the SQLite index at `from` to `to` (a new file) through a read-only connection
    /// (`VACUUM INTO`): the source is not written, not even checkpointed (`weft migrate`
    /// reads a copy, so that no timer or reaction of the store it opens writes the source).
    pub(crate) fn copy_sqlite(from: &std::path::Path, to: &std::path::Path) -> Result<(), Error> {
        // A read-only connection to a WAL database may create an empty `-wal` beside it and,
        // being read-only, never remove it: the source must be left exactly as it was.
        let mut wal = from.as_os_str().to_owned();
        wal.push("-wal");
        let wal = std::path::PathBuf::from(wal);
        let had_wal = wal.exists();
        let copied = Self::vacuum_into(from, to);
        if !had_wal && std::fs::metadata(&wal).is_ok_and(|m| m.len() == 0) {
            let _ = std::fs::remove_file(&wal);
        }
        copied
    }

    fn vacuum_into(from: &std::path::Path, to: &std::path::Path) -> Result<(), Error> {
        let conn = rusqlite::Connection::open_with_flags(
            from,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(crate::sql::SqlError::from)?;
        let to = to
            .to_str()
            .ok_or_else(|| Error::Config(format!("{} is not UTF-8", to.display())))?;
        conn.execute("VACUUM INTO ?1", [to])
            .map_err(crate::sql::SqlError::from)?;
        Ok(())
    }

    /// Whether other processes share this index (PostgreSQL): what a process keeps in memory
    /// from the index must be read again, not only kept by its own commits.
    pub(crate) fn is_shared(&self) -> bool {
        matches!(self.read_from, Some(ReadFrom::Postgres(_)))
    }

    /// The meter of the writer's SQL work (tests; see [`crate::sql::WriteMeter`]).
    pub(crate) fn meter(&self) -> &crate::sql::WriteMeter {
        &self.meter
    }

    /// Notified after every commit that wrote a reaction's row (a permit is kept while no one
    /// waits, so no commit's wake is lost).
    pub(crate) fn reactions_owed(&self) -> Arc<tokio::sync::Notify> {
        Arc::clone(&self.reactions_owed)
    }

    /// Committed Events from now on, in commit order (and so in sequence order per Group).
    /// A receiver that falls more than the buffer behind gets `Lagged` and must re-read.
    pub(crate) fn subscribe(&self) -> tokio::sync::broadcast::Receiver<weft_api::Event> {
        self.committed.subscribe()
    }

    /// Runs `f` in the writer's transaction; the answer arrives after the commit is durable.
    ///
    /// Inside an idempotent request whose handler armed a claim for result type `T`, the job
    /// first checks the key and, after `f`, stores the request's answer in the same
    /// transaction (see `idempotency.rs`).
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Tx<'_>) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let Some((claim, renderer)) = crate::claim::armed_for::<T>() else {
            return self.write_plain(f).await;
        };
        let claim_in = Arc::clone(&claim);
        let (value, stored) = self
            .write_plain(move |tx| {
                claim_in.check(tx)?;
                let value = f(tx)?;
                let stored = claim_in.store(tx, &renderer, &value)?;
                Ok((value, stored))
            })
            .await?;
        if let Some(answer) = stored {
            claim.committed(answer);
        }
        Ok(value)
    }

    /// [`Db::write`] without the idempotency wrapping (reads on an in-memory database).
    async fn write_plain<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Tx<'_>) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(Typed { body: f, reply });
        self.jobs.send(job).await.map_err(|_| Error::ShuttingDown)?;
        answer.await.map_err(|_| Error::ShuttingDown)?
    }

    /// Runs a read-only `f` on a pooled connection (or on the writer for in-memory databases).
    pub(crate) async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let (Some(readers), Some(from)) = (self.readers.clone(), self.read_from.clone()) else {
            return self.write_plain(move |txn| f(txn)).await;
        };
        let permit = match &self.read_permits {
            Some(permits) => Some(
                Arc::clone(permits)
                    .acquire_owned()
                    .await
                    .map_err(|_| Error::ShuttingDown)?,
            ),
            None => None,
        };
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            // Short critical sections: take or return one connection, nothing else.
            let pooled = readers.lock().unwrap_or_else(|p| p.into_inner()).pop();
            let conn = match pooled {
                Some(conn) => conn,
                None => open_reader(&from)?,
            };
            let result = f(&conn);
            // A read sent ahead and never read (`sql/ahead.rs`: `f` returned early) is read
            // now, so its answer is never taken for the next read's on this connection.
            let unread = conn.settle().is_err();
            let broken = unread || matches!(&conn, Connection::Postgres(pg) if pg.is_closed());
            let mut idle = readers.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < MAX_IDLE_READERS && !broken {
                idle.push(conn);
            }
            result
        })
        .await
        .map_err(Error::backend)?
    }
}

impl Db {
    /// Runs a read of a few indexed rows (`f`) right here, on a read-only connection this
    /// thread keeps open, instead of hopping to the blocking pool and back: for a small
    /// artifact's content GET that misses the memory cache, the hop (a futex wake and two
    /// context switches) cost more than the read itself (issue #15's profile). Only for point
    /// lookups that take microseconds, like hashing a chunk inline; anything that scans goes
    /// through [`Db::read`]. WAL readers never wait for the writer or the checkpointer. An
    /// in-memory database has no readers: its reads go through the writer as ever.
    pub(crate) async fn read_here<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let Some(ReadFrom::Sqlite(path)) = &self.read_from else {
            return self.read(f).await;
        };
        NEAR.with(|near| {
            let mut near = near.borrow_mut();
            let index = match near.iter().position(|(id, _)| *id == self.id) {
                Some(index) => index,
                None => {
                    let conn = open_reader(&ReadFrom::Sqlite(path.clone()))?;
                    if near.len() >= NEAR_PER_THREAD {
                        near.remove(0);
                    }
                    near.push((self.id, conn));
                    near.len() - 1
                }
            };
            f(&near[index].1)
        })
    }
}

/// A read-only connection to the database at `from`, with the writer's statement cache size
/// (on PostgreSQL a plain connection: reads run outside any transaction of the writer's).
fn open_reader(from: &ReadFrom) -> Result<Connection, Error> {
    let path = match from {
        ReadFrom::Sqlite(path) => path,
        ReadFrom::Postgres(url) => {
            let pg = crate::sql::postgres::Pg::connect(url)?;
            return Ok(Connection::Postgres(Box::new(pg)));
        }
    };
    let conn = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    keep_plans(&conn)?;
    Ok(Connection::Sqlite(conn))
}

/// WAL pages after which the writer checkpoints by itself (SQLite's own auto-checkpoint,
/// 64 MiB of 4 KiB pages): only when the checkpointer thread has fallen this far behind.
const WRITER_CHECKPOINT_PAGES: i64 = 16_384;

/// How often the checkpointer looks for new commits.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Copies committed WAL frames back into the database file on a connection of its own, so
/// the writer thread (every durable change's one path) does not: a checkpoint reads the WAL,
/// writes the database file and fsyncs it, which was about a quarter of the writer's time
/// under small publications (issue #15's profile). PASSIVE: it never waits for, or blocks,
/// the writer or a reader; the writer rewinds the WAL once a checkpoint has caught up.
/// Durability does not depend on it: a commit is durable when its WAL frames are fsynced.
/// Ends when the writer thread does (`written` disconnects).
fn checkpointer(
    path: &std::path::Path,
    vfs: Option<&str>,
    written: &std::sync::mpsc::Receiver<()>,
) {
    let conn = match open_writing(path, vfs) {
        Ok(conn) => conn,
        Err(error) => {
            tracing::warn!(%error, "no checkpointer connection; the writer checkpoints alone");
            return;
        }
    };
    loop {
        match written.recv() {
            Ok(()) => {}
            Err(_) => return,
        }
        std::thread::sleep(CHECKPOINT_EVERY);
        // Commits during the sleep are covered by this checkpoint; their nudge is not needed.
        let _ = written.try_recv();
        let outcome = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            row.get::<_, i64>(0)
        });
        if let Err(error) = outcome {
            // Harmless: the frames stay in the WAL and the next checkpoint copies them.
            tracing::warn!(%error, "WAL checkpoint failed; retried after the next commit");
        }
    }
}

/// Runs one batch in one transaction; whether it committed a reaction's row.
fn run_batch(
    conn: &mut Connection,
    batch: Vec<Job>,
    publish: &tokio::sync::broadcast::Sender<weft_api::Event>,
    meter: &crate::sql::WriteMeter,
    announce: Option<&str>,
) -> bool {
    let txn: &Connection = conn;
    match txn.begin() {
        Ok(()) => {}
        Err(error) => {
            let error = Error::from(error);
            for job in batch {
                // Without a transaction no job may run; each caller hears why.
                job.fail(error.clone());
            }
            return false;
        }
    };
    let mut finishers = Vec::with_capacity(batch.len());
    let mut appended = Vec::new();
    let mut leaves = Vec::new();
    let mut owes_reaction = false;
    let mut broken: Option<Error> = None;
    for job in batch {
        if let Some(error) = &broken {
            job.fail(error.clone());
            continue;
        }
        // Sent ahead on PostgreSQL: read with the job's first statement.
        if let Err(error) = txn.control_later("SAVEPOINT job") {
            let error = Error::from(error);
            job.fail(error.clone());
            broken = Some(error);
            continue;
        }
        let tx = Tx::new(txn);
        // A panicking job must not take the writer thread (and every later write) with it:
        // its savepoint is rolled back and its caller hears `ShuttingDown` from the dropped
        // reply channel.
        let run = || meter.run(|| job.run(&tx));
        let Ok((ok, finish)) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) else {
            tracing::error!("a storage job panicked; its changes were rolled back");
            if let Err(error) = txn.execute_batch("ROLLBACK TO job; RELEASE job") {
                broken = Some(error.into());
            }
            continue;
        };
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
                broken = Some(Error::backend(std::io::Error::other(
                    "a savepoint statement of the writer's batch failed; the batch is rolled back",
                )));
            }
            Ok(()) => {}
        }
    }
    // The next batch starts with no failure of this one's.
    let _ = txn.take_control_failure();
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
    let committed = commit.is_ok();
    for finish in finishers {
        finish(commit.clone());
    }
    committed && owes_reaction
}

#[cfg(test)]
mod tests;
