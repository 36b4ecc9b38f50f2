//! The index and event log (SQLite, or PostgreSQL: `sql/`), behind a fence.
//! Long (about 710 lines) because the writer, its batches, the readers and the WAL's
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
use crate::sql::{Connection, STATEMENT_CACHE};

mod again;
mod follow;
mod writer;

use writer::{Job, Typed};

pub(crate) use again::write_again_if_raced;

use crate::unit::Tx;
pub(crate) use follow::Foreign;

/// Writers (each a connection and a thread) one server runs on PostgreSQL, so that Groups
/// are written in parallel (`db/writer.rs`); SQLite has one writer per database.
const POSTGRES_LANES: usize = 4;
/// Committed Events buffered for slow live subscribers before they must re-read the log.
const COMMITTED_BUFFER: usize = 16 * 1024;
/// Read-only connections kept open.
const MAX_IDLE_READERS: usize = 8;

/// The lane of Group `group` among `lanes` (a stable hash: the same in every run).
fn lane_of(group: &str, lanes: usize) -> usize {
    let digest = blake3::hash(group.as_bytes());
    let first = u64::from_le_bytes(digest.as_bytes()[..8].try_into().unwrap_or([0; 8]));
    (first % lanes.max(1) as u64) as usize
}

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
    /// The writers' lanes (one on SQLite): a Group's writes go to one of them (`write_in`).
    lanes: Arc<[mpsc::Sender<Job>]>,
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
    resyncs: follow::Resyncs,
    /// Held (never read) by every clone; the follower thread ends when the last is dropped.
    _alive: Arc<()>,
    /// When the follower's connection last proved it works (`None`: no follower).
    heard: Option<Arc<follow::Heard>>,
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
    let conn = Connection::from_sqlite(conn);
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
        let mut conn = Some(open_writer(location, &faults)?);
        let (committed, _) = tokio::sync::broadcast::channel(COMMITTED_BUFFER);
        let publish = committed.clone();
        let meter = Arc::new(crate::sql::WriteMeter::default());
        let writer_meter = Arc::clone(&meter);
        let reactions_owed = Arc::new(tokio::sync::Notify::new());
        let owed = Arc::clone(&reactions_owed);
        let (foreign, _) = tokio::sync::broadcast::channel(COMMITTED_BUFFER);
        let resyncs = follow::Resyncs::new(foreign.clone());
        let alive = Arc::new(());
        // Names this process in the commits it announces on a shared index.
        let origin: Arc<str> = uuid::Uuid::new_v4().to_string().into();
        let announce = matches!(location, Location::Postgres(_)).then(|| Arc::clone(&origin));
        let heard =
            matches!(location, Location::Postgres(_)).then(|| Arc::new(follow::Heard::new()));
        if let (Location::Postgres(url), Some(heard)) = (location, &heard) {
            let outlets = follow::Outlets {
                committed: committed.clone(),
                foreign: foreign.clone(),
                resyncs: resyncs.clone(),
                heard: Arc::clone(heard),
            };
            follow::start(url.clone(), origin, outlets, Arc::downgrade(&alive))
                .map_err(Error::backend)?;
        }
        // Dropped when the writer thread ends, which ends the checkpointer.
        let (written_tx, written) = std::sync::mpsc::sync_channel::<()>(1);
        if let Location::File(path) = location {
            let path = path.clone();
            std::thread::Builder::new()
                .name("weft-sqlite-checkpoint".into())
                .spawn(move || checkpointer(&path, vfs.as_deref(), &written))
                .map_err(Error::backend)?;
        }
        let lanes = if matches!(location, Location::Postgres(_)) {
            POSTGRES_LANES
        } else {
            1
        };
        let mut senders = Vec::with_capacity(lanes);
        for lane in 0..lanes {
            let (jobs, inbox) = mpsc::channel::<Job>(4096);
            senders.push(jobs);
            // The first lane's connection is the one that migrated the schema.
            let conn = match conn.take() {
                Some(conn) => conn,
                None => open_writer(location, &faults)?,
            };
            writer::spawn(
                lane,
                conn,
                inbox,
                writer::Outlets {
                    reconnect: match location {
                        Location::Postgres(url) => Some(url.clone()),
                        _ => None,
                    },
                    publish: publish.clone(),
                    meter: Arc::clone(&writer_meter),
                    owed: Arc::clone(&owed),
                    announce: announce.clone(),
                    resyncs: resyncs.clone(),
                    written: written_tx.clone(),
                },
            )?;
        }
        drop(written_tx);
        let read_from = match &location {
            Location::File(path) => Some(ReadFrom::Sqlite(path.clone())),
            Location::Memory => None,
            Location::Postgres(url) => Some(ReadFrom::Postgres(url.clone())),
        };
        let readers = read_from.as_ref().map(|_| Arc::new(Mutex::new(Vec::new())));
        Ok(Self {
            lanes: senders.into(),
            committed,
            readers,
            read_from,
            id: NEXT_DB.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            meter,
            reactions_owed,
            foreign,
            resyncs,
            _alive: alive,
            heard,
            read_permits: matches!(location, Location::Postgres(_))
                .then(|| Arc::new(tokio::sync::Semaphore::new(MAX_POSTGRES_READERS))),
        })
    }

    /// Changes whenever Events may have been missed (`follow::Resyncs`; never on SQLite).
    pub(crate) fn subscribe_resyncs(&self) -> tokio::sync::watch::Receiver<u64> {
        self.resyncs.subscribe()
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

    /// How long since the follower of a shared index last heard from it (`None`: no
    /// follower, nothing shared to follow).
    pub(crate) fn follower_silent_for(&self) -> Option<std::time::Duration> {
        self.heard.as_ref().map(|heard| heard.silent_for())
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
        self.write_routed(None, f).await
    }

    /// [`Db::write`] in the lane of `group`, if given (`write_in`): the request's claim is
    /// taken here, once, and its job runs in that lane with the check and the stored answer.
    async fn write_routed<T: Send + 'static>(
        &self,
        group: Option<&str>,
        f: impl FnOnce(&Tx<'_>) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let claim = crate::claim::armed_for::<T>();
        self.write_claimed(group, claim.as_ref(), f).await
    }

    /// Runs `f` in the lane of `group` (the first if none) with the request's claim, if one
    /// was taken: its key checked before `f`, its answer stored after, in one transaction.
    async fn write_claimed<T: Send + 'static>(
        &self,
        group: Option<&str>,
        claim: Option<&crate::claim::Armed>,
        f: impl FnOnce(&Tx<'_>) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let Some((claim, renderer)) = claim else {
            return self.write_in_lane(group, f).await;
        };
        let (claim_in, renderer) = (Arc::clone(claim), Arc::clone(renderer));
        let (value, stored) = self
            .queue(group, true, move |tx| {
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

    /// [`Db::write_in`] for a job that may learn only under its Group's lock that it must
    /// lock other Groups too (an upload of small bytes that repairs a quarantined blob
    /// appends `artifact.repaired` to every Group that published it). It runs with `false`
    /// in `group`'s lane; if it answers [`Error::InOrder`] (rolled back, nothing kept), it
    /// runs once more with `true` and no lane, so before any Group job of its batch takes a
    /// lock, where it takes every lock it needs in Group order (the order of every batch and
    /// of a quarantine): on PostgreSQL under several servers, taking another Group's lock
    /// after its own could wait in a circle with a quarantine and be rolled back (issue
    /// #43). The request's claim is taken once and goes with both runs.
    pub(crate) async fn write_in_or_in_order<T, F>(
        &self,
        group: Option<&str>,
        f: F,
    ) -> Result<T, Error>
    where
        T: Send + 'static,
        F: Fn(&Tx<'_>, bool) -> Result<T, Error> + Send + Sync + 'static,
    {
        let claim = crate::claim::armed_for::<T>();
        let f = Arc::new(f);
        let run = Arc::clone(&f);
        match self
            .write_claimed(group, claim.as_ref(), move |tx| run(tx, false))
            .await
        {
            Err(Error::InOrder) => {
                self.write_claimed(None, claim.as_ref(), move |tx| f(tx, true))
                    .await
            }
            outcome => outcome,
        }
    }

    /// [`Db::write`] without the idempotency wrapping (reads on an in-memory database), in
    /// the first lane.
    async fn write_plain<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Tx<'_>) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        self.write_in_lane(None, f).await
    }

    async fn write_in_lane<T: Send + 'static>(
        &self,
        group: Option<&str>,
        f: impl FnOnce(&Tx<'_>) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        self.queue(group, false, f).await
    }

    /// Queues `f` in the lane of `group` (the first if none); `claimed` when it takes an
    /// idempotency key's lock first (`db/writer.rs` runs it first in a transaction).
    async fn queue<T: Send + 'static>(
        &self,
        group: Option<&str>,
        claimed: bool,
        f: impl FnOnce(&Tx<'_>) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let (reply, answer) = oneshot::channel();
        let lane = group.map_or(0, |group| lane_of(group, self.lanes.len()));
        let group = group.map(Box::from);
        let job: Job = Box::new(Typed {
            body: f,
            reply,
            group,
            claimed,
        });
        let sender = &self.lanes[lane % self.lanes.len()];
        sender.send(job).await.map_err(|_| Error::ShuttingDown)?;
        answer.await.map_err(|_| Error::ShuttingDown)?
    }

    /// [`Db::write`] for a job that writes Group `group` (a Command, a publication, an
    /// Evidence record): on PostgreSQL it runs in the Group's lane (`db/writer.rs`), beside
    /// other Groups' jobs in other lanes; an idempotent request's claim goes with it.
    pub(crate) async fn write_in<T: Send + 'static>(
        &self,
        group: &str,
        f: impl FnOnce(&Tx<'_>) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        self.write_routed(Some(group), f).await
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
    Ok(Connection::from_sqlite(conn))
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

#[cfg(test)]
mod lock_order;
#[cfg(test)]
mod panics;
#[cfg(test)]
mod tests;
