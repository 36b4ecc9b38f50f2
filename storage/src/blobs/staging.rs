//! A staged upload's file on the local backend, written while the upload is still being
//! hashed, with its writeback started as it goes.
//!
//! Why not object_store's multipart upload: it writes into the page cache and leaves every
//! byte to the one `fsync` at the end. The kernel starts writing dirty pages back only past
//! `dirty_background_ratio` (10 % of memory, 2.4 GB on a 24 GB machine), so a 1 GiB upload
//! hashed at SHA-256's rate then waited another 0.55–0.65 s for that fsync, with the disk
//! idle until then (bench/README, stop 36). Here a background `fdatasync` runs every
//! [`FLUSH_EVERY`] bytes while the writes go on, so the disk works while the bytes are
//! hashed and the last fsync finds little left to write.
//!
//! Durability is unchanged: nothing is acknowledged before [`StagingFile::finish`]'s
//! `sync_all` has returned; the earlier flushes only start the work sooner. Parts are
//! [`PART_SIZE`] bytes, written at their offsets by a few blocking tasks at once.
//!
//! A store (one per server process) runs at most [`PART_WRITES_IN_ALL`] part writes at once,
//! counting those a dropped upload (a client that disconnects) left running.
//!
//! With `--direct-writes` (off by default), past its first part, the file is written with
//! `O_DIRECT` where its file system takes it: each part is copied once into a buffer aligned
//! to [`ALIGN`] bytes and goes from there to the disk, not through the page cache. Writing a
//! GiB through the page cache cost about 550 ms of the blocking threads' CPU plus the
//! kernel's writeback; written directly, 130 ms plus 190 ms for the aligned copy, and the
//! machine as a whole spent 300–400 ms less per GiB (bench/README, stop 38), on two cores of
//! which SHA-256 already needs one. Direct writes wait for the disk, so more are in flight
//! ([`DIRECT_WRITES_IN_FLIGHT`]); an upload then holds at most five part buffers (the one
//! being filled and four being written), 10 MiB, whatever its size. The first part goes
//! through the page cache, so an upload under [`PART_SIZE`] bytes (most of those too large to
//! be inline) never allocates a part buffer it would fill only a little of. The last part is
//! padded with zeros to the alignment and the file cut back to its length before the final
//! sync. A file system that refuses `O_DIRECT` (tmpfs on older kernels, some network file
//! systems) gets page-cache writes, at most [`WRITES_IN_FLIGHT`] parts in flight, 6 MiB. One
//! that takes the flag and refuses the writes (EINVAL) has the flag cleared at the first
//! refusal and each part rewritten through the page cache; the writer keeps its direct
//! settings (aligned copies, four in flight, the padded last part cut back).
//!
//! Why it is off by default: bytes written directly are not in the page cache afterwards, so
//! the first read of a large upload comes from the disk. Here that halved the first verified
//! GET of a 1 GiB upload (about 1,000 MB/s against 2,000 from the cache), and the review after
//! a submission re-hashes what was usually just uploaded. For a server whose uploads are
//! mostly read much later, if at all, it saves CPU and keeps the page cache for what is read.
//!
//! Fault sites, as the wrapped object store had them (`faulty.rs`): the file's creation and
//! each part's write ask [`FaultSite::BlobWrite`], the final fsync and each background flush
//! [`FaultSite::BlobFsync`]. Every way out but `finish` (an error, a cancelled request)
//! removes the file. The file is created on the calling thread, as object_store did: created
//! on the blocking pool, a request cancelled meanwhile would leave it for the next start's
//! sweep.

use std::collections::VecDeque;
use std::os::unix::fs::FileExt as _;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::{Buf as _, Bytes};
use tokio::task::JoinHandle;

use crate::error::Error;
use crate::faults::{FaultSite, Faults};

/// Bytes per write: the object store's local part size before this writer.
pub(super) const PART_SIZE: usize = 2 * 1024 * 1024;
/// Parts being written at once through the page cache.
const WRITES_IN_FLIGHT: usize = 2;
/// Parts being written at once with `O_DIRECT`: each waits for the disk, so two left it idle
/// between writes (a 1 GiB file took 1.7 s with two, 0.9–1.2 s with four; bench/README).
const DIRECT_WRITES_IN_FLIGHT: usize = 4;
/// Part writes running at once in a store (one per server process), whichever uploads they
/// belong to. An upload waits for its own writes ([`WRITES_IN_FLIGHT`],
/// [`DIRECT_WRITES_IN_FLIGHT`]), but a dropped one (a client that disconnects) leaves its
/// writes running to their end after its upload slot is free; without a cap across uploads, a
/// client sending faster than the disk writes and disconnecting over and over would pile up
/// part buffers and blocking threads. 64 parts are 128 MiB. A dropped upload also leaves at
/// most one background flush and its file's removal running, which hold no buffer.
pub(super) const PART_WRITES_IN_ALL: usize = 64;
/// What an `O_DIRECT` write's buffer address, file offset and length are multiples of: the
/// largest logical block size in common use, so it suits 512-byte devices too.
const ALIGN: usize = 4096;
/// Bytes written between the starts of two background flushes. A flush still running when
/// the next is due is left to finish; the one after it covers both.
const FLUSH_EVERY: u64 = 16 * 1024 * 1024;

/// A write or a flush; a direct write gives its buffer back for the next part.
type Job = JoinHandle<std::io::Result<Option<Aligned>>>;

/// [`PART_SIZE`] bytes starting at an [`ALIGN`] boundary, inside a vector allocated a little
/// larger (safe code cannot ask the allocator for the alignment itself).
struct Aligned {
    bytes: Vec<u8>,
    start: usize,
}

impl Aligned {
    fn new() -> Result<Self, Error> {
        let bytes = vec![0; PART_SIZE + ALIGN];
        let start = bytes.as_ptr().align_offset(ALIGN);
        if start >= ALIGN {
            return Err(Error::backend(std::io::Error::other(
                "no aligned buffer for a direct write",
            )));
        }
        Ok(Self { bytes, start })
    }

    fn part(&self) -> &[u8] {
        &self.bytes[self.start..self.start + PART_SIZE]
    }

    fn part_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.start + PART_SIZE]
    }
}

/// A positioned write of a whole buffer.
type WriteAt = fn(&std::fs::File, &[u8], u64) -> std::io::Result<()>;

/// Where the next part's bytes are gathered.
enum Gather {
    /// Through the page cache: the body's own chunks, written as they are.
    Buffered(Vec<Bytes>),
    /// `O_DIRECT`: copied into an aligned buffer (taken when the first byte arrives), with
    /// the buffers finished writes gave back.
    Direct {
        filling: Option<Aligned>,
        spare: Vec<Aligned>,
    },
}

/// See the module docs.
pub(super) struct StagingFile {
    file: Arc<std::fs::File>,
    /// `Some` until [`StagingFile::finish`] succeeds: the file to remove on every other way
    /// out.
    path: Option<PathBuf>,
    /// Bytes for the next part.
    part: Gather,
    /// `O_DIRECT` is still to be asked for, at the second part ([`StagingFile::go_direct`]).
    try_direct: bool,
    /// One permit per part write running, from the process's [`PART_WRITES_IN_ALL`]: held by
    /// the write's task, so a dropped upload's writes count until they end.
    writes_in_all: Arc<tokio::sync::Semaphore>,
    /// A direct part's write: `write_all_at`, or in tests one that fails as a file system
    /// that takes the flag but refuses the writes would.
    write_direct: WriteAt,
    part_len: usize,
    /// Where the next part goes.
    offset: u64,
    writes: VecDeque<Job>,
    flush: Option<Job>,
    /// `offset` when the last flush started.
    flushed_to: u64,
    faults: Faults,
}

impl std::fmt::Debug for StagingFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagingFile")
            .field("path", &self.path)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

async fn joined(job: Job) -> Result<(), Error> {
    job.await.map_err(Error::backend)?.map_err(Error::backend)?;
    Ok(())
}

impl StagingFile {
    /// Creates `path` (owner-only, new); with `direct`, past its first part it is written
    /// with `O_DIRECT` if its file system takes it, and otherwise through the page cache.
    pub(super) fn create(
        path: PathBuf,
        faults: Faults,
        writes_in_all: Arc<tokio::sync::Semaphore>,
        direct: bool,
    ) -> Result<Self, Error> {
        faults.check(FaultSite::BlobWrite).map_err(Error::backend)?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&path).map_err(Error::backend)?;
        Ok(Self {
            file: Arc::new(file),
            path: Some(path),
            part: Gather::Buffered(Vec::new()),
            try_direct: direct,
            writes_in_all,
            write_direct: |file, bytes, at| file.write_all_at(bytes, at),
            part_len: 0,
            offset: 0,
            writes: VecDeque::new(),
            flush: None,
            flushed_to: 0,
            faults,
        })
    }

    /// Whether the file is written with `O_DIRECT`.
    fn is_direct(&self) -> bool {
        matches!(self.part, Gather::Direct { .. })
    }

    /// At the second part: once the page-cache writes of the first are done, asks for
    /// `O_DIRECT` on the open file. A file system that refuses it answers EINVAL and the file
    /// goes on through the page cache. Asked on the open file rather than at the open, where a
    /// refusal may come after the file was created.
    async fn go_direct(&mut self) -> Result<(), Error> {
        self.try_direct = false;
        while !self.writes.is_empty() {
            self.join_oldest().await?;
        }
        let file = &*self.file;
        if rustix::fs::fcntl_getfl(file)
            .and_then(|flags| rustix::fs::fcntl_setfl(file, flags | rustix::fs::OFlags::DIRECT))
            .is_ok()
        {
            self.part = Gather::Direct {
                filling: None,
                spare: Vec::new(),
            };
        }
        Ok(())
    }

    /// Adds `bytes` at the end; writes a part once one is full.
    pub(super) async fn put(&mut self, bytes: Bytes) -> Result<(), Error> {
        let mut bytes = bytes;
        while !bytes.is_empty() {
            if self.try_direct && self.offset > 0 {
                self.go_direct().await?;
            }
            let take = (PART_SIZE - self.part_len).min(bytes.len());
            match &mut self.part {
                Gather::Buffered(pieces) => pieces.push(bytes.split_to(take)),
                Gather::Direct { filling, spare } => {
                    let buffer = match filling {
                        Some(buffer) => buffer,
                        None => filling.insert(match spare.pop() {
                            Some(buffer) => buffer,
                            None => Aligned::new()?,
                        }),
                    };
                    buffer.part_mut()[self.part_len..self.part_len + take]
                        .copy_from_slice(&bytes[..take]);
                    bytes.advance(take);
                }
            }
            self.part_len += take;
            if self.part_len == PART_SIZE {
                self.write_part(true).await?;
            }
        }
        Ok(())
    }

    /// Waits for the oldest write; a direct one's buffer goes back to the spares.
    async fn join_oldest(&mut self) -> Result<(), Error> {
        if let Some(oldest) = self.writes.pop_front() {
            let buffer = oldest
                .await
                .map_err(Error::backend)?
                .map_err(Error::backend)?;
            if let (Some(buffer), Gather::Direct { spare, .. }) = (buffer, &mut self.part) {
                spare.push(buffer);
            }
        }
        Ok(())
    }

    /// Writes the gathered part; with `flush`, starts a background flush if one is due.
    async fn write_part(&mut self, flush: bool) -> Result<(), Error> {
        let in_flight = if self.is_direct() {
            DIRECT_WRITES_IN_FLIGHT
        } else {
            WRITES_IN_FLIGHT
        };
        while self.writes.len() >= in_flight {
            self.join_oldest().await?;
        }
        self.faults
            .check(FaultSite::BlobWrite)
            .map_err(Error::backend)?;
        let permit = Arc::clone(&self.writes_in_all)
            .acquire_owned()
            .await
            .map_err(|_| Error::backend(std::io::Error::other("part writes closed")))?;
        let file = Arc::clone(&self.file);
        let mut at = self.offset;
        let len = self.part_len;
        self.offset += len as u64;
        self.part_len = 0;
        let job = match &mut self.part {
            Gather::Buffered(pieces) => {
                let pieces = std::mem::take(pieces);
                tokio::task::spawn_blocking(move || {
                    let _permit = permit;
                    for piece in pieces {
                        file.write_all_at(&piece, at)?;
                        at += piece.len() as u64;
                    }
                    Ok(None)
                })
            }
            Gather::Direct { filling, .. } => {
                let Some(mut buffer) = filling.take() else {
                    return Err(Error::backend(std::io::Error::other("no part to write")));
                };
                // Only the last part is short: padded with zeros to the alignment here, and
                // the file is cut back to its length before the final sync.
                let padded = len.next_multiple_of(ALIGN);
                buffer.part_mut()[len..padded].fill(0);
                let write_direct = self.write_direct;
                tokio::task::spawn_blocking(move || {
                    let _permit = permit;
                    let bytes = &buffer.part()[..padded];
                    match write_direct(&file, bytes, at) {
                        // A file system can take the flag and still refuse these writes (a
                        // device whose logical blocks are larger than `ALIGN`, some stacked
                        // or FUSE file systems): the file goes on through the page cache,
                        // this part and every later one, whose writes then need no alignment.
                        Err(error)
                            if error.raw_os_error()
                                == Some(rustix::io::Errno::INVAL.raw_os_error()) =>
                        {
                            let flags = rustix::fs::fcntl_getfl(&*file)?;
                            rustix::fs::fcntl_setfl(&*file, flags - rustix::fs::OFlags::DIRECT)?;
                            file.write_all_at(bytes, at)?;
                        }
                        written => written?,
                    }
                    Ok(Some(buffer))
                })
            }
        };
        self.writes.push_back(job);
        if flush && self.offset - self.flushed_to >= FLUSH_EVERY {
            self.start_flush().await?;
        }
        Ok(())
    }

    /// Starts a background `fdatasync` unless one is still running.
    async fn start_flush(&mut self) -> Result<(), Error> {
        if let Some(running) = self.flush.take() {
            if !running.is_finished() {
                self.flush = Some(running);
                return Ok(());
            }
            joined(running).await?;
        }
        self.faults
            .check(FaultSite::BlobFsync)
            .map_err(Error::backend)?;
        let file = Arc::clone(&self.file);
        self.flush = Some(tokio::task::spawn_blocking(move || {
            file.sync_data()?;
            Ok(None)
        }));
        self.flushed_to = self.offset;
        Ok(())
    }

    /// Writes what is left, waits for every write and flush, and makes the file durable.
    /// Returns its size.
    pub(super) async fn finish(&mut self) -> Result<u64, Error> {
        if self.part_len > 0 {
            // No flush: the sync below writes everything anyway.
            self.write_part(false).await?;
        }
        while !self.writes.is_empty() {
            self.join_oldest().await?;
        }
        if let Some(running) = self.flush.take() {
            joined(running).await?;
        }
        self.faults
            .check(FaultSite::BlobFsync)
            .map_err(Error::backend)?;
        let file = Arc::clone(&self.file);
        // A direct file's last part was written padded to the alignment.
        let length =
            (self.is_direct() && !self.offset.is_multiple_of(ALIGN as u64)).then_some(self.offset);
        joined(tokio::task::spawn_blocking(move || {
            if let Some(length) = length {
                file.set_len(length)?;
            }
            file.sync_all()?;
            Ok(None)
        }))
        .await?;
        self.path = None;
        Ok(self.offset)
    }
}

impl Drop for StagingFile {
    fn drop(&mut self) {
        // Writes still running write into an unlinked file; the space goes with the last fd.
        if let Some(path) = self.path.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn_blocking(move || std::fs::remove_file(path))),
                Err(_) => drop(std::fs::remove_file(path)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::FaultKind;

    fn sample(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 % 251) as u8).collect()
    }

    fn writes() -> Arc<tokio::sync::Semaphore> {
        Arc::new(tokio::sync::Semaphore::new(PART_WRITES_IN_ALL))
    }

    /// Whether `dir`'s file system takes `O_DIRECT` on an open file.
    fn takes_o_direct(dir: &std::path::Path) -> bool {
        std::fs::File::create(dir.join("probe"))
            .is_ok_and(|file| rustix::fs::fcntl_setfl(&file, rustix::fs::OFlags::DIRECT).is_ok())
    }

    /// Every length around the alignment's, the parts' and the flushes' edges, fed in uneven
    /// pieces, reads back byte for byte, written directly (where the file system takes it:
    /// asserted, so this never tests the page cache twice unseen) and through the page cache.
    #[tokio::test]
    async fn what_is_put_is_what_the_file_holds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let takes_it = takes_o_direct(dir.path());
        for direct in [true, false] {
            for (i, len) in [
                0,
                1,
                ALIGN - 1,
                ALIGN + 1,
                PART_SIZE - 1,
                PART_SIZE,
                PART_SIZE + 1,
                FLUSH_EVERY as usize + PART_SIZE / 2 + 3,
                2 * FLUSH_EVERY as usize,
            ]
            .into_iter()
            .enumerate()
            {
                let path = dir.path().join(format!("f{i}-{direct}"));
                let mut file =
                    StagingFile::create(path.clone(), Faults::default(), writes(), direct)
                        .expect("create");
                let bytes = sample(len);
                for piece in bytes.chunks(700_001) {
                    file.put(Bytes::copy_from_slice(piece)).await.expect("put");
                }
                assert_eq!(
                    file.is_direct(),
                    direct && takes_it && len > PART_SIZE,
                    "length {len}"
                );
                assert_eq!(file.finish().await.expect("finish"), len as u64);
                drop(file);
                assert_eq!(
                    std::fs::read(&path).expect("kept"),
                    bytes,
                    "length {len}, direct {direct}"
                );
            }
        }
    }

    /// Where the file system takes `O_DIRECT` (the test's temp dir names one), a file is
    /// written with it from its second part on: the flag is on the open file, not only in
    /// the writer's state. A file of one part never asks for it.
    #[tokio::test]
    async fn a_file_system_that_takes_o_direct_gets_it_from_the_second_part() {
        let dir = tempfile::tempdir().expect("tempdir");
        let takes_it = takes_o_direct(dir.path());
        let path = dir.path().join("staged");
        let mut file =
            StagingFile::create(path.clone(), Faults::default(), writes(), true).expect("create");
        let direct = |file: &StagingFile| {
            let flags = rustix::fs::fcntl_getfl(&*file.file).expect("flags");
            assert_eq!(flags.contains(rustix::fs::OFlags::DIRECT), file.is_direct());
            file.is_direct()
        };
        file.put(Bytes::from(sample(PART_SIZE))).await.expect("put");
        assert!(!direct(&file), "the first part goes through the page cache");
        file.put(Bytes::from_static(b"more")).await.expect("put");
        assert_eq!(direct(&file), takes_it);
        file.finish().await.expect("finish");
        let mut expected = sample(PART_SIZE);
        expected.extend_from_slice(b"more");
        assert_eq!(std::fs::read(&path).expect("kept"), expected);
    }

    /// A file system can take `O_DIRECT` and still refuse the writes (EINVAL: a device with
    /// logical blocks larger than the alignment, some stacked or FUSE file systems). The first
    /// refused part clears the flag and goes through the page cache, and so does every later
    /// one: the file is whole, not a 503 for every upload past its first part.
    #[tokio::test]
    async fn a_direct_write_refused_with_einval_goes_on_through_the_page_cache() {
        let dir = tempfile::tempdir().expect("tempdir");
        if !takes_o_direct(dir.path()) {
            return; // Nothing to fall back from.
        }
        let path = dir.path().join("refused");
        let mut file =
            StagingFile::create(path.clone(), Faults::default(), writes(), true).expect("create");
        file.write_direct = |_, _, _| Err(rustix::io::Errno::INVAL.into());
        let bytes = sample(3 * PART_SIZE + 5);
        for piece in bytes.chunks(700_001) {
            file.put(Bytes::copy_from_slice(piece)).await.expect("put");
        }
        assert_eq!(file.finish().await.expect("finish"), bytes.len() as u64);
        let flags = rustix::fs::fcntl_getfl(&*file.file).expect("flags");
        assert!(
            !flags.contains(rustix::fs::OFlags::DIRECT),
            "the flag was cleared"
        );
        drop(file);
        assert_eq!(std::fs::read(&path).expect("kept"), bytes);
    }

    /// Held by the test while the writes below must not finish.
    static GATE: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// A dropped upload's part writes keep their permits of the process's cap until they end,
    /// so uploads cancelled over and over cannot pile up writes beyond it: with two permits in
    /// all and two direct writes held at the disk, a dropped file leaves none free; once the
    /// writes end, both come back.
    #[tokio::test]
    #[expect(
        clippy::await_holding_lock,
        reason = "the gate is held across the puts on purpose: the writes it holds run on the blocking pool, never on this thread"
    )]
    async fn a_dropped_uploads_writes_hold_the_process_cap_until_they_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        if !takes_o_direct(dir.path()) {
            return; // The held writes below are the direct ones.
        }
        let in_all = Arc::new(tokio::sync::Semaphore::new(2));
        let path = dir.path().join("dropped");
        let mut file = StagingFile::create(path, Faults::default(), Arc::clone(&in_all), true)
            .expect("create");
        file.write_direct = |file, bytes, at| {
            let _held = GATE
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            file.write_all_at(bytes, at)
        };
        let gate = GATE.lock().expect("gate");
        // The first part through the page cache (its permit comes back when it is written),
        // then two direct parts, each held at the gate with its permit.
        file.put(Bytes::from(sample(3 * PART_SIZE)))
            .await
            .expect("put");
        drop(file);
        assert_eq!(
            in_all.available_permits(),
            0,
            "the dropped upload's writes hold both"
        );
        drop(gate);
        let both = tokio::time::timeout(std::time::Duration::from_secs(30), in_all.acquire_many(2))
            .await
            .expect("both permits come back within 30 s")
            .expect("open");
        drop(both);
    }

    /// A failed write, a failed fsync and a dropped upload each leave no file behind, and
    /// the failures keep their codes (507 for a full disk, 503 for an I/O error).
    #[test]
    fn every_way_out_but_finish_removes_the_file() {
        every_way_out_removes_the_file(true);
        every_way_out_removes_the_file(false);
    }

    fn every_way_out_removes_the_file(direct: bool) {
        // One blocking thread runs the removals in order, so a no-op spawned after them
        // finishes after them: no sleeping, no polling.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .max_blocking_threads(1)
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let dir = tempfile::tempdir().expect("tempdir");
            let faults = Faults::default();
            let path = dir.path().join("write");
            let mut file = StagingFile::create(path.clone(), faults.clone(), writes(), direct)
                .expect("create");
            faults.fail_next(FaultSite::BlobWrite, FaultKind::NoSpace, 1);
            let error = file
                .put(Bytes::from(sample(PART_SIZE)))
                .await
                .expect_err("the write fails");
            assert_eq!(error.code(), weft_api::ErrorCode::InsufficientStorage);
            drop(file);

            let path_fsync = dir.path().join("fsync");
            let mut file =
                StagingFile::create(path_fsync.clone(), faults.clone(), writes(), direct)
                    .expect("create");
            file.put(Bytes::from(sample(3 * PART_SIZE)))
                .await
                .expect("put");
            faults.fail_next(FaultSite::BlobFsync, FaultKind::Io, 1);
            let error = file.finish().await.expect_err("the fsync fails");
            assert_eq!(error.code(), weft_api::ErrorCode::StorageUnavailable);
            drop(file);

            let path_dropped = dir.path().join("dropped");
            let mut file =
                StagingFile::create(path_dropped.clone(), faults.clone(), writes(), direct)
                    .expect("create");
            file.put(Bytes::from(sample(PART_SIZE + 5)))
                .await
                .expect("put");
            drop(file);

            tokio::task::spawn_blocking(|| ())
                .await
                .expect("after the removals");
            assert!(!path.exists(), "a failed write's file is removed");
            assert!(!path_fsync.exists(), "a failed fsync's file is removed");
            assert!(!path_dropped.exists(), "a dropped upload's file is removed");
        });
    }
}
