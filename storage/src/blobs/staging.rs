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
//! [`PART_SIZE`] bytes, written at their offsets by at most [`WRITES_IN_FLIGHT`] blocking
//! tasks, so an upload holds at most three parts here (the one being gathered and two being
//! written), 6 MiB, whatever its size.
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

use bytes::Bytes;
use tokio::task::JoinHandle;

use crate::error::Error;
use crate::faults::{FaultSite, Faults};

/// Bytes per write: the object store's local part size before this writer.
pub(super) const PART_SIZE: usize = 2 * 1024 * 1024;
/// Parts being written at once.
const WRITES_IN_FLIGHT: usize = 2;
/// Bytes written between the starts of two background flushes. A flush still running when
/// the next is due is left to finish; the one after it covers both.
const FLUSH_EVERY: u64 = 16 * 1024 * 1024;

type Job = JoinHandle<std::io::Result<()>>;

/// See the module docs.
pub(super) struct StagingFile {
    file: Arc<std::fs::File>,
    /// `Some` until [`StagingFile::finish`] succeeds: the file to remove on every other way
    /// out.
    path: Option<PathBuf>,
    /// Bytes for the next part.
    part: Vec<Bytes>,
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
    job.await.map_err(Error::backend)?.map_err(Error::backend)
}

impl StagingFile {
    /// Creates `path` (owner-only, new).
    pub(super) fn create(path: PathBuf, faults: Faults) -> Result<Self, Error> {
        faults.check(FaultSite::BlobWrite).map_err(Error::backend)?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&path).map_err(Error::backend)?;
        Ok(Self {
            file: Arc::new(file),
            path: Some(path),
            part: Vec::new(),
            part_len: 0,
            offset: 0,
            writes: VecDeque::new(),
            flush: None,
            flushed_to: 0,
            faults,
        })
    }

    /// Adds `bytes` at the end; writes a part once one is full.
    pub(super) async fn put(&mut self, bytes: Bytes) -> Result<(), Error> {
        let mut bytes = bytes;
        while !bytes.is_empty() {
            let take = (PART_SIZE - self.part_len).min(bytes.len());
            self.part_len += take;
            self.part.push(bytes.split_to(take));
            if self.part_len == PART_SIZE {
                self.write_part(true).await?;
            }
        }
        Ok(())
    }

    /// Writes the gathered part; with `flush`, starts a background flush if one is due.
    async fn write_part(&mut self, flush: bool) -> Result<(), Error> {
        while self.writes.len() >= WRITES_IN_FLIGHT {
            if let Some(oldest) = self.writes.pop_front() {
                joined(oldest).await?;
            }
        }
        self.faults
            .check(FaultSite::BlobWrite)
            .map_err(Error::backend)?;
        let part = std::mem::take(&mut self.part);
        let file = Arc::clone(&self.file);
        let mut at = self.offset;
        self.offset += self.part_len as u64;
        self.part_len = 0;
        self.writes.push_back(tokio::task::spawn_blocking(move || {
            for piece in part {
                file.write_all_at(&piece, at)?;
                at += piece.len() as u64;
            }
            Ok(())
        }));
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
        self.flush = Some(tokio::task::spawn_blocking(move || file.sync_data()));
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
        while let Some(oldest) = self.writes.pop_front() {
            joined(oldest).await?;
        }
        if let Some(running) = self.flush.take() {
            joined(running).await?;
        }
        self.faults
            .check(FaultSite::BlobFsync)
            .map_err(Error::backend)?;
        let file = Arc::clone(&self.file);
        joined(tokio::task::spawn_blocking(move || file.sync_all())).await?;
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

    /// Every length around the parts' and flushes' edges, fed in uneven pieces, reads back
    /// byte for byte.
    #[tokio::test]
    async fn what_is_put_is_what_the_file_holds() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (i, len) in [
            0,
            1,
            PART_SIZE - 1,
            PART_SIZE,
            PART_SIZE + 1,
            FLUSH_EVERY as usize + PART_SIZE / 2 + 3,
            2 * FLUSH_EVERY as usize,
        ]
        .into_iter()
        .enumerate()
        {
            let path = dir.path().join(format!("f{i}"));
            let mut file = StagingFile::create(path.clone(), Faults::default()).expect("create");
            let bytes = sample(len);
            for piece in bytes.chunks(700_001) {
                file.put(Bytes::copy_from_slice(piece)).await.expect("put");
            }
            assert_eq!(file.finish().await.expect("finish"), len as u64);
            drop(file);
            assert_eq!(std::fs::read(&path).expect("kept"), bytes, "length {len}");
        }
    }

    /// A failed write, a failed fsync and a dropped upload each leave no file behind, and
    /// the failures keep their codes (507 for a full disk, 503 for an I/O error).
    #[test]
    fn every_way_out_but_finish_removes_the_file() {
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
            let mut file = StagingFile::create(path.clone(), faults.clone()).expect("create");
            faults.fail_next(FaultSite::BlobWrite, FaultKind::NoSpace, 1);
            let error = file
                .put(Bytes::from(sample(PART_SIZE)))
                .await
                .expect_err("the write fails");
            assert_eq!(error.code(), weft_api::ErrorCode::InsufficientStorage);
            drop(file);

            let path_fsync = dir.path().join("fsync");
            let mut file = StagingFile::create(path_fsync.clone(), faults.clone()).expect("create");
            file.put(Bytes::from(sample(3 * PART_SIZE)))
                .await
                .expect("put");
            faults.fail_next(FaultSite::BlobFsync, FaultKind::Io, 1);
            let error = file.finish().await.expect_err("the fsync fails");
            assert_eq!(error.code(), weft_api::ErrorCode::StorageUnavailable);
            drop(file);

            let path_dropped = dir.path().join("dropped");
            let mut file =
                StagingFile::create(path_dropped.clone(), faults.clone()).expect("create");
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
