//! Test hooks that make writes fail: a reconciliation step (OFL-10/11), and ENOSPC or EIO at
//! each write site of the object store and the database (issue #15, fault injection); and one
//! that holds the reactions after commit (`reactions.rs`), so a test can stop the process
//! between a commit and its reaction; and one that holds uploads between placing their
//! bytes and their row, so a test can run another server's sweep there.
//!
//! [`Faults`] is carried in `Options::faults`; it is off by default and no server
//! configuration turns it on. A disarmed write site pays one relaxed atomic load
//! ([`Faults::check`]); only an armed one takes the lock that says which sites fail, how, and
//! for how many more operations.
//!
//! Where the hooks sit: the object store is wrapped in `blobs/faulty.rs` (puts, multipart
//! parts and completes, renames and copies), the direct file writes and fsyncs call
//! [`Faults::check`] themselves (a local upload's staged file, spilled outboards, resumable
//! chunks, directory fsyncs), and the database's own writes go through SQLite's VFS: a store
//! opened with [`Faults::with_database`] opens its writer and checkpointer connections
//! through the `weft-sqlite-vfs` VFS, which asks these hooks before every write, fsync and
//! truncation of the WAL and the database file, so a failed commit or checkpoint is SQLite's
//! own error path, not a simulation of it. An in-memory database writes no file and has no
//! such site.
//!
//! This module knows nothing about what a failed write should leave behind: the callers undo
//! their own work, and the tests (`src/http/tests/faults.rs`) prove it.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// Fault injection, shared by clones (cheap to clone). See the module docs.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    reconcile_fail_after: Arc<AtomicU8>,
    writes: Arc<Writes>,
    /// The VFS the database opens through, when these faults reach it.
    vfs: Option<Arc<str>>,
    /// Whether owed reactions wait instead of running (`true`: held).
    reactions_held: Arc<tokio::sync::watch::Sender<bool>>,
    /// Uploads of a file (and compactions) between placing their bytes and their row.
    promoted: Hold,
    /// Publications and Evidence records between their checks before the writer and their
    /// transaction.
    publications: Hold,
    /// Quarantines between their read's judgment and their transaction.
    quarantines: Hold,
    /// The idle-upload sweep between listing idle sessions and removing them.
    upload_sweeps: Hold,
}

/// The steps of one reconciliation, in OFL-11's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ReconcileStep {
    /// `resource_usage_recorded` is appended.
    UsageRecorded = 1,
    /// The WorkItem's and every enclosing budget's spend is updated.
    LineageCharged = 2,
    /// The buffered Command is applied (its Event appended).
    CommandApplied = 3,
}

/// A place where the engine writes to the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultSite {
    /// Bytes written to an object: a staged upload's parts, a one-shot put of a blob.
    BlobWrite,
    /// The fsync that makes a staged upload durable (the local staged file's `sync_all` and
    /// its background flushes, or another store's multipart completion).
    BlobFsync,
    /// The rename (or copy) that promotes staged bytes to their digest's path.
    Promote,
    /// A BLAKE3 outboard: its spill file's writes and fsync, its rename into place and the
    /// directory fsync after it, or its put on the object store.
    Outboard,
    /// A resumable upload's chunk: its write, its fsync, the directory fsync of a new object.
    UploadChunk,
    /// A write (or truncation) of the WAL: a commit's frames, the header of a rewound WAL.
    DbWalWrite,
    /// The WAL's fsync: the point where a commit becomes durable; also the open's fsync of a
    /// WAL a killed process left (`db.rs`, `sync_leftover_wal`).
    DbWalSync,
    /// A checkpoint's writes and fsync of the database file (the WAL keeps every frame until
    /// one succeeds).
    DbCheckpoint,
}

const N_SITES: usize = 8;

impl FaultSite {
    fn index(self) -> usize {
        self as usize
    }
}

/// How an armed write fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The disk is full: `ENOSPC` (SQLite: `SQLITE_FULL`).
    NoSpace,
    /// The disk failed: `EIO` (SQLite: `SQLITE_IOERR`).
    Io,
}

const ENOSPC: i32 = 28;
const EIO: i32 = 5;

impl FaultKind {
    /// The error the operating system would have given.
    pub(crate) fn io_error(self) -> std::io::Error {
        std::io::Error::from_raw_os_error(match self {
            Self::NoSpace => ENOSPC,
            Self::Io => EIO,
        })
    }
}

/// One armed site: how it fails, how many operations pass first (so a test reaches a later
/// step of one write, such as the fsync after a write), and how many fail then (`None`:
/// every one until cleared).
#[derive(Clone, Copy, Debug)]
struct Armed {
    kind: FaultKind,
    skip: u32,
    remaining: Option<u32>,
}

#[derive(Debug, Default)]
struct Writes {
    /// Whether any site is armed: the only thing a disarmed write looks at.
    armed: AtomicBool,
    // A std Mutex: each critical section is a few array operations, with no `.await` inside.
    sites: Mutex<[Option<Armed>; N_SITES]>,
}

impl Writes {
    fn lock(&self) -> std::sync::MutexGuard<'_, [Option<Armed>; N_SITES]> {
        self.sites.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn arm(&self, site: FaultSite, armed: Option<Armed>) {
        let mut sites = self.lock();
        sites[site.index()] = armed;
        self.armed
            .store(sites.iter().any(Option::is_some), Ordering::SeqCst);
    }

    /// The kind `site` fails with now, counting this operation.
    fn hit(&self, site: FaultSite) -> Option<FaultKind> {
        let mut sites = self.lock();
        let slot = &mut sites[site.index()];
        let armed = (*slot)?;
        if armed.skip > 0 {
            *slot = Some(Armed {
                skip: armed.skip - 1,
                ..armed
            });
            return None;
        }
        match armed.remaining {
            Some(n) if n <= 1 => *slot = None,
            Some(n) => {
                *slot = Some(Armed {
                    remaining: Some(n - 1),
                    ..armed
                })
            }
            None => {}
        }
        self.armed
            .store(sites.iter().any(Option::is_some), Ordering::SeqCst);
        Some(armed.kind)
    }
}

impl Faults {
    /// Every reconciliation from now on fails right after `step` (`None`: never).
    pub fn fail_reconciliation_after(&self, step: Option<ReconcileStep>) {
        self.reconcile_fail_after
            .store(step.map_or(0, |s| s as u8), Ordering::SeqCst);
    }

    /// Fails if a test asked for a failure right after `step`.
    pub(crate) fn after(&self, step: ReconcileStep) -> Result<(), crate::error::Error> {
        if self.reconcile_fail_after.load(Ordering::SeqCst) == step as u8 {
            return Err(crate::error::Error::backend(std::io::Error::other(
                format!("injected fault after reconciliation step {step:?}"),
            )));
        }
        Ok(())
    }

    /// Every write at `site` fails with `kind` until [`Faults::clear`].
    pub fn fail_writes(&self, site: FaultSite, kind: FaultKind) {
        self.fail_writes_after(site, kind, 0);
    }

    /// The next `skip` writes at `site` succeed, then every one fails with `kind` until
    /// [`Faults::clear`]: one write's later steps (a spilled outboard's fsync after its write,
    /// a chunk's fsync) fail this way.
    pub fn fail_writes_after(&self, site: FaultSite, kind: FaultKind, skip: u32) {
        self.writes.arm(
            site,
            Some(Armed {
                kind,
                skip,
                remaining: None,
            }),
        );
    }

    /// The next `n` writes at `site` fail with `kind`; later ones succeed again.
    pub fn fail_next(&self, site: FaultSite, kind: FaultKind, n: u32) {
        let armed = (n > 0).then_some(Armed {
            kind,
            skip: 0,
            remaining: Some(n),
        });
        self.writes.arm(site, armed);
    }

    /// Disarms every write site (the reconciliation hook is left as it is).
    pub fn clear(&self) {
        let mut sites = self.writes.lock();
        *sites = [None; N_SITES];
        self.writes.armed.store(false, Ordering::SeqCst);
    }

    /// Fails with the operating system's error if a test armed `site`. Disarmed: one relaxed
    /// atomic load.
    pub(crate) fn check(&self, site: FaultSite) -> std::io::Result<()> {
        if !self.writes.armed.load(Ordering::Relaxed) {
            return Ok(());
        }
        match self.writes.hit(site) {
            Some(kind) => {
                tracing::warn!(?site, ?kind, "injected write fault");
                Err(kind.io_error())
            }
            None => Ok(()),
        }
    }

    /// Faults that also reach the database's own writes: [`Faults`] whose store opens its
    /// writer and checkpointer connections through a VFS (`weft-sqlite-vfs`) that asks them
    /// before every write, fsync and truncation of the WAL and the database file. Registering
    /// the VFS leaks a few hundred bytes that SQLite keeps pointing at: tests only.
    ///
    /// # Errors
    /// SQLite refused to register the VFS.
    pub fn with_database() -> Result<Self, crate::error::Error> {
        let mut faults = Self::default();
        let hook = DatabaseHook(faults.writes.clone());
        let name = weft_sqlite_vfs::register(Some(Arc::new(hook))).map_err(|code| {
            crate::error::Error::backend(std::io::Error::other(format!(
                "SQLite did not register the fault-injection VFS (code {code})"
            )))
        })?;
        faults.vfs = Some(name.into());
        Ok(faults)
    }

    /// The VFS the database's writing connections open through, if these faults reach it.
    pub(crate) fn vfs(&self) -> Option<&str> {
        self.vfs.as_deref()
    }

    /// Holds every owed reaction (`true`) until released (`false`): their rows stay in the
    /// queue, as after a crash between a commit and its reaction. A reaction already running
    /// finishes.
    pub fn hold_reactions(&self, held: bool) {
        self.reactions_held.send_replace(held);
    }

    /// Returns once reactions are not held (at once when no test holds them).
    pub(crate) async fn reactions_released(&self) {
        let mut held = self.reactions_held.subscribe();
        // `wait_for` fails only if the sender is gone, and `self` holds it.
        let _ = held.wait_for(|held| !*held).await;
    }

    /// Every upload of a file (and every compaction), after its bytes are placed (or found
    /// present) and before its row's transaction: a test interleaves another server's sweep or
    /// compaction there (`artifacts/disposal.rs`), or drops the held upload as a crash would.
    pub fn promoted(&self) -> &Hold {
        &self.promoted
    }

    /// Every publication of a manifest whose bytes are stored already, and every Evidence
    /// record, after the checks made before the writer and before its transaction: a test
    /// revokes the capability token it acts under there.
    pub fn publications(&self) -> &Hold {
        &self.publications
    }

    /// Every quarantine, after its read judged the bytes bad and before its transaction: a
    /// test repairs the blob through another server there.
    pub fn quarantines(&self) -> &Hold {
        &self.quarantines
    }

    /// Every idle-upload sweep, after it listed the idle sessions and before it removes them:
    /// a test sends a chunk through another server there.
    pub fn upload_sweeps(&self) -> &Hold {
        &self.upload_sweeps
    }

    /// Whether a test holds the reactions now.
    pub(crate) fn reactions_held(&self) -> bool {
        *self.reactions_held.borrow()
    }
}

/// A place where a test holds requests ([`Hold::set`]) and waits until some are there
/// ([`Hold::waiting`]); off (passed at once) in every server.
#[derive(Clone, Debug, Default)]
pub struct Hold {
    held: Arc<tokio::sync::watch::Sender<bool>>,
    waiting: Arc<tokio::sync::watch::Sender<usize>>,
}

impl Hold {
    /// Holds every request that reaches it (`true`) until released (`false`).
    pub fn set(&self, held: bool) {
        self.held.send_replace(held);
    }

    /// Returns once `n` requests wait here.
    pub async fn waiting(&self, n: usize) {
        let mut waiting = self.waiting.subscribe();
        let _ = waiting.wait_for(|waiting| *waiting >= n).await;
    }

    /// Waits while held, counted as waiting until it leaves: at once when not held.
    pub(crate) async fn pass(&self) {
        if !*self.held.borrow() {
            return;
        }
        /// Counts a held one out however it leaves the hold: released, or dropped.
        struct Waiting<'a>(&'a tokio::sync::watch::Sender<usize>);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.send_modify(|waiting| *waiting -= 1);
            }
        }
        self.waiting.send_modify(|waiting| *waiting += 1);
        let _waiting = Waiting(&self.waiting);
        let mut held = self.held.subscribe();
        let _ = held.wait_for(|held| !*held).await;
    }
}

/// What the database's VFS asks before each write: the site of that file and operation.
struct DatabaseHook(Arc<Writes>);

impl weft_sqlite_vfs::Hook for DatabaseHook {
    fn before(
        &self,
        file: weft_sqlite_vfs::File,
        op: weft_sqlite_vfs::Op,
    ) -> Option<weft_sqlite_vfs::Failure> {
        use weft_sqlite_vfs::{Failure, File, Op};
        if !self.0.armed.load(Ordering::Relaxed) {
            return None;
        }
        let site = match (file, op) {
            (File::Wal, Op::Sync) => FaultSite::DbWalSync,
            (File::Wal, Op::Write | Op::Truncate) => FaultSite::DbWalWrite,
            (File::Main, _) => FaultSite::DbCheckpoint,
        };
        let kind = self.0.hit(site)?;
        tracing::warn!(?site, ?op, ?kind, "injected database write fault");
        Some(match kind {
            FaultKind::NoSpace => Failure::Full,
            FaultKind::Io => Failure::Io,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fail_next` counts down and disarms itself; `clear` disarms everything; a site that is
    /// not armed never fails while another one is.
    #[test]
    fn sites_fail_as_armed_and_recover() {
        let faults = Faults::default();
        assert!(faults.check(FaultSite::BlobWrite).is_ok(), "off by default");
        faults.fail_next(FaultSite::BlobWrite, FaultKind::NoSpace, 2);
        assert!(faults.check(FaultSite::Promote).is_ok(), "another site");
        for _ in 0..2 {
            let error = faults.check(FaultSite::BlobWrite).expect_err("armed");
            assert_eq!(error.kind(), std::io::ErrorKind::StorageFull);
            assert_eq!(error.raw_os_error(), Some(ENOSPC));
        }
        assert!(faults.check(FaultSite::BlobWrite).is_ok(), "used up");
        assert!(!faults.writes.armed.load(Ordering::Relaxed), "disarmed");
        faults.fail_writes(FaultSite::DbWalSync, FaultKind::Io);
        for _ in 0..3 {
            let error = faults
                .check(FaultSite::DbWalSync)
                .expect_err("until cleared");
            assert_eq!(error.raw_os_error(), Some(EIO));
        }
        faults.clear();
        assert!(faults.check(FaultSite::DbWalSync).is_ok());
        faults.fail_writes_after(FaultSite::Outboard, FaultKind::Io, 2);
        assert!(faults.check(FaultSite::Outboard).is_ok(), "1st passes");
        assert!(faults.check(FaultSite::Outboard).is_ok(), "2nd passes");
        let error = faults.check(FaultSite::Outboard).expect_err("3rd fails");
        assert_eq!(error.raw_os_error(), Some(EIO));
        assert!(
            faults.check(FaultSite::Outboard).is_err(),
            "and every later one"
        );
        faults.clear();
        assert!(faults.check(FaultSite::Outboard).is_ok());
    }
}
