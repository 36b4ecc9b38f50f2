//! BLAKE3 and SHA-256 over one stream of bytes, one hash per core.
//!
//! Measured here (shared/DEPENDENCIES.md): both digests on one thread run at about 0.96 GB/s,
//! one per core at about 1.45 GB/s. Small bodies are hashed inline, because starting two
//! blocking tasks costs more than hashing a few hundred KiB. Large bodies are gathered into
//! batches of at least [`BATCH`] bytes and each batch is sent to both hasher tasks over bounded
//! channels, so whatever the body's size at most `DEPTH` batches wait per hasher, one is
//! hashed by each, and one is being gathered.
//!
//! A chunk of [`SMALL`] bytes or more goes into its batch as it is, not copied: copying every
//! chunk into one growing buffer (and that buffer's reallocations) was a tenth of a 1 GiB
//! upload's server CPU (bench/README, stop 36). Shorter chunks are copied into a buffer of a
//! whole batch, allocated once and never grown. The threshold is what keeps memory honest: a
//! chunk is a slice of hyper's read buffer, which it keeps alive, and that buffer is at most
//! about 408 KiB; a client sending 16 KiB chunks padded out with chunk-size zeros would
//! otherwise pin 25 times the bytes it is counted for.
//!
//! The BLAKE3 task hashes by 16 KiB chunk groups ([`crate::outboard::Builder`]), so a large
//! body's digest comes with its outboard (the hash tree that verified Range reads use) for
//! the cost of merging the group hashes; small bodies, hashed inline, get none.

use bytes::{Bytes, BytesMut};
use sha2::Digest as _;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use weft_api::{ArtifactId, Digests, Sha256Digest};

use crate::error::Error;

/// Bytes per hand-off to the hasher tasks.
pub(crate) const BATCH: usize = 1024 * 1024;
/// Batches queued per hasher before the producer waits.
const DEPTH: usize = 2;
/// Chunks shorter than this are copied into a shared buffer; longer ones are passed on as
/// they are (see the module docs for why it is this large).
const SMALL: usize = 256 * 1024;

/// Bytes gathered for the hashers: a body's chunks, in order.
pub(crate) type Batch = Vec<Bytes>;

/// The BLAKE3 task's answer: the root, and the outboard unless it was spilled to a file.
type Blake3Out = ([u8; 32], Option<Vec<u8>>);

struct Pipeline {
    to_blake3: mpsc::Sender<Batch>,
    to_sha256: mpsc::Sender<Batch>,
    blake3: JoinHandle<std::io::Result<Blake3Out>>,
    sha256: JoinHandle<[u8; 32]>,
}

impl Pipeline {
    /// Starts both hasher tasks; with `spill`, the outboard is written to that file as it is
    /// built instead of kept in memory.
    fn start(spill: Option<(std::fs::File, crate::faults::Faults, bool)>) -> Self {
        let (to_blake3, mut blake3_rx) = mpsc::channel::<Batch>(DEPTH);
        let (to_sha256, mut sha256_rx) = mpsc::channel::<Batch>(DEPTH);
        let blake3 = tokio::task::spawn_blocking(move || {
            let mut builder = match spill {
                Some((file, faults, false)) => crate::outboard::Builder::spilling(file, faults),
                Some((file, faults, true)) => {
                    crate::outboard::Builder::spilling(file, faults).unsynced()
                }
                None => crate::outboard::Builder::default(),
            };
            while let Some(batch) = blake3_rx.blocking_recv() {
                for piece in &batch {
                    builder.update(piece);
                }
            }
            builder.finish_spilled()
        });
        let sha256 = tokio::task::spawn_blocking(move || {
            let mut hasher = sha2::Sha256::new();
            while let Some(batch) = sha256_rx.blocking_recv() {
                for piece in &batch {
                    hasher.update(piece);
                }
            }
            hasher.finalize().into()
        });
        Self {
            to_blake3,
            to_sha256,
            blake3,
            sha256,
        }
    }
}

/// Accumulates a stream into batches and hashes them; see the module docs.
#[derive(Default)]
pub(crate) struct DualHasher {
    /// The next batch's chunks, and their length.
    pending: Batch,
    pending_len: usize,
    /// Chunks under [`SMALL`] bytes, copied together; the next piece of `pending`.
    small: BytesMut,
    pipeline: Option<Pipeline>,
    size: u64,
    /// Where a large body's outboard is written as it is built (local uploads), and the
    /// write faults of that file (tests only).
    spill_to: Option<std::path::PathBuf>,
    /// The spill file is left unsynced ([`DualHasher::spilling_unsynced_to`]).
    spill_unsynced: bool,
    faults: crate::faults::Faults,
}

impl std::fmt::Debug for DualHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DualHasher")
            .field("size", &self.size)
            .finish()
    }
}

fn stopped() -> Error {
    Error::backend(std::io::Error::other("hasher task stopped"))
}

impl DualHasher {
    /// A hasher whose outboard (for a body of at least [`BATCH`] bytes) is written to `path`
    /// as it is built, so memory stays flat whatever the body's size.
    pub(crate) fn spilling_to(path: std::path::PathBuf, faults: crate::faults::Faults) -> Self {
        Self {
            spill_to: Some(path),
            faults,
            ..Self::default()
        }
    }

    /// [`DualHasher::spilling_to`], but the file is not fsynced at the end: for an outboard
    /// computed to be compared and usually thrown away (fsck), which its user syncs if kept.
    pub(crate) fn spilling_unsynced_to(
        path: std::path::PathBuf,
        faults: crate::faults::Faults,
    ) -> Self {
        Self {
            spill_unsynced: true,
            ..Self::spilling_to(path, faults)
        }
    }

    /// Adds `chunk`; returns the bytes of a batch that is now complete (empty if none), for
    /// the caller to write onwards in order (they are the same bytes, cheaply cloned).
    pub(crate) async fn update(&mut self, chunk: Bytes) -> Result<Batch, Error> {
        self.size += chunk.len() as u64;
        self.pending_len += chunk.len();
        if chunk.len() < SMALL {
            if self.small.capacity() - self.small.len() < chunk.len() {
                self.take_small();
                // After `take_small` nothing is left in it, so this allocates without copying.
                self.small.reserve(BATCH);
            }
            self.small.extend_from_slice(&chunk);
        } else {
            self.take_small();
            self.pending.push(chunk);
        }
        if self.pending_len < BATCH {
            return Ok(Batch::new());
        }
        self.take_small();
        self.pending_len = 0;
        let batch = std::mem::take(&mut self.pending);
        self.dispatch(batch.clone()).await?;
        Ok(batch)
    }

    /// Ends the run of small chunks: it becomes the next piece of the batch.
    fn take_small(&mut self) {
        if !self.small.is_empty() {
            self.pending.push(self.small.split().freeze());
        }
    }

    async fn dispatch(&mut self, batch: Batch) -> Result<(), Error> {
        if self.pipeline.is_none() {
            let spill = match &self.spill_to {
                Some(path) => {
                    self.faults
                        .check(crate::faults::FaultSite::Outboard)
                        .map_err(Error::backend)?;
                    let file = std::fs::File::create(path).map_err(Error::backend)?;
                    Some((file, self.faults.clone(), self.spill_unsynced))
                }
                None => None,
            };
            self.pipeline = Some(Pipeline::start(spill));
        }
        let Some(pipeline) = self.pipeline.as_mut() else {
            return Err(stopped());
        };
        pipeline
            .to_blake3
            .send(batch.clone())
            .await
            .map_err(|_| stopped())?;
        pipeline
            .to_sha256
            .send(batch)
            .await
            .map_err(|_| stopped())?;
        Ok(())
    }

    /// Hashes what is left and returns the digests together with the final partial batch
    /// (possibly empty), which the caller still has to write.
    pub(crate) async fn finish(self) -> Result<(Digests, Batch), Error> {
        let (digests, tail, _) = self.finish_with_outboard().await?;
        Ok((digests, tail))
    }

    /// [`DualHasher::finish`], with the outboard of a body large enough to have gone through
    /// the hasher tasks (at least [`BATCH`] bytes; `None` below).
    pub(crate) async fn finish_with_outboard(
        mut self,
    ) -> Result<(Digests, Batch, Option<crate::outboard::Built>), Error> {
        self.take_small();
        let tail = std::mem::take(&mut self.pending);
        let (blake3, sha256, outboard) = match self.pipeline.take() {
            None => {
                let mut blake3 = blake3::Hasher::new();
                let mut sha256 = sha2::Sha256::new();
                for piece in &tail {
                    blake3.update(piece);
                    sha256.update(piece);
                }
                (
                    *blake3.finalize().as_bytes(),
                    sha256.finalize().into(),
                    None,
                )
            }
            Some(pipeline) => {
                if !tail.is_empty() {
                    pipeline
                        .to_blake3
                        .send(tail.clone())
                        .await
                        .map_err(|_| stopped())?;
                    pipeline
                        .to_sha256
                        .send(tail.clone())
                        .await
                        .map_err(|_| stopped())?;
                }
                drop(pipeline.to_blake3);
                drop(pipeline.to_sha256);
                let (blake3, outboard) = pipeline
                    .blake3
                    .await
                    .map_err(Error::backend)?
                    .map_err(Error::backend)?;
                let sha256 = pipeline.sha256.await.map_err(Error::backend)?;
                let outboard = match (outboard, self.spill_to.take()) {
                    (Some(bytes), _) => crate::outboard::Built::Memory(bytes),
                    (None, Some(path)) => crate::outboard::Built::Spilled(path),
                    (None, None) => return Err(stopped()),
                };
                (blake3, sha256, Some(outboard))
            }
        };
        let digests = Digests {
            blake3: ArtifactId(blake3),
            sha256: Sha256Digest(sha256),
            size: self.size,
        };
        Ok((digests, tail, outboard))
    }
}

/// The BLAKE3 root of every byte a hashed read yielded (`blobs/reading.rs`), sent after the
/// last one.
pub(crate) type Root = tokio::sync::oneshot::Receiver<[u8; 32]>;

/// BLAKE3 alone over bytes being served: what a read checks them against, the address
/// (ART-5). SHA-256 was computed from the same bytes at upload and is implied by the address
/// (finding other bytes with the same BLAKE3 digest would break BLAKE3), so a read does not
/// pay for it again; fsck still checks both. Bodies of [`BATCH`] bytes or more are hashed on
/// a blocking thread while the caller sends them, smaller ones at the end, on this thread;
/// bytes a local blob's reader already hashed as it read them ([`AddressHasher::hashed_by`])
/// are only counted.
#[derive(Debug, Default)]
pub(crate) struct AddressHasher {
    pending: Vec<Bytes>,
    pending_len: usize,
    task: Option<(mpsc::Sender<Bytes>, JoinHandle<[u8; 32]>)>,
    /// The root from the thread that read and hashed the bytes (`blobs/reading.rs`).
    hashed_by_reader: Option<Root>,
    size: u64,
}

impl AddressHasher {
    /// For bytes whose reader hashes them as it reads them and sends `root` after the last:
    /// [`AddressHasher::update`] only counts them, and [`AddressHasher::finish`] answers that
    /// root (an error if the reader never sent it).
    pub(crate) fn hashed_by(root: Root) -> Self {
        Self {
            hashed_by_reader: Some(root),
            ..Self::default()
        }
    }

    /// Adds `chunk` (a cheap clone of it is handed to the hashing thread).
    pub(crate) async fn update(&mut self, chunk: &Bytes) -> Result<(), Error> {
        self.size += chunk.len() as u64;
        if self.hashed_by_reader.is_some() {
            return Ok(());
        }
        if self.task.is_none() {
            self.pending.push(chunk.clone());
            self.pending_len += chunk.len();
            if self.pending_len < BATCH {
                return Ok(());
            }
            let (to_task, mut from_caller) = mpsc::channel::<Bytes>(DEPTH * 8);
            let task = tokio::task::spawn_blocking(move || {
                let mut hasher = blake3::Hasher::new();
                while let Some(bytes) = from_caller.blocking_recv() {
                    hasher.update(&bytes);
                }
                *hasher.finalize().as_bytes()
            });
            self.task = Some((to_task, task));
            self.pending_len = 0;
            for bytes in std::mem::take(&mut self.pending) {
                self.send(bytes).await?;
            }
            return Ok(());
        }
        self.send(chunk.clone()).await
    }

    async fn send(&mut self, bytes: Bytes) -> Result<(), Error> {
        let Some((to_task, _)) = &self.task else {
            return Err(stopped());
        };
        to_task.send(bytes).await.map_err(|_| stopped())
    }

    /// The BLAKE3 digest of everything added, and its length.
    pub(crate) async fn finish(self) -> Result<(ArtifactId, u64), Error> {
        if let Some(root) = self.hashed_by_reader {
            let root = root.await.map_err(|_| stopped())?;
            return Ok((ArtifactId(root), self.size));
        }
        let root = match self.task {
            None => {
                let mut hasher = blake3::Hasher::new();
                for bytes in &self.pending {
                    hasher.update(bytes);
                }
                *hasher.finalize().as_bytes()
            }
            Some((to_task, task)) => {
                drop(to_task);
                task.await.map_err(Error::backend)?
            }
        };
        Ok((ArtifactId(root), self.size))
    }
}

/// SHA-256 alone over bytes as they pass, on a blocking thread while the caller goes on: the
/// second digest of the reviewer's integrity check (`evidence/reviewer.rs`), over the same
/// bytes the read verified against the address. Chunks are sent as they are (a read's are at
/// most 256 KiB), at most [`DEPTH`] waiting.
pub(crate) struct Sha256Task {
    to: mpsc::Sender<Bytes>,
    task: JoinHandle<([u8; 32], u64)>,
}

impl Sha256Task {
    pub(crate) fn start() -> Self {
        let (to, mut from) = mpsc::channel::<Bytes>(DEPTH);
        let task = tokio::task::spawn_blocking(move || {
            let (mut hasher, mut size) = (sha2::Sha256::new(), 0u64);
            while let Some(chunk) = from.blocking_recv() {
                hasher.update(&chunk);
                size += chunk.len() as u64;
            }
            (hasher.finalize().into(), size)
        });
        Self { to, task }
    }

    pub(crate) async fn update(&self, chunk: Bytes) -> Result<(), Error> {
        self.to.send(chunk).await.map_err(|_| stopped())
    }

    /// The digest and the count of every byte sent.
    pub(crate) async fn finish(self) -> Result<(Sha256Digest, u64), Error> {
        drop(self.to);
        let (digest, size) = self.task.await.map_err(Error::backend)?;
        Ok((Sha256Digest(digest), size))
    }
}

#[cfg(test)]
mod tests {
    /// A read checks exactly the address, whether the body was hashed at the end on this
    /// thread or on the hashing thread while it was sent, in chunks of any size.
    #[tokio::test]
    async fn the_address_hasher_answers_the_blake3_digest_of_any_body() {
        for size in [0, 1, 4096, BATCH - 1, BATCH, 3 * BATCH + 17] {
            let body: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let mut hasher = AddressHasher::default();
            for chunk in body.chunks(64 * 1024 + 3) {
                hasher
                    .update(&Bytes::copy_from_slice(chunk))
                    .await
                    .expect("update");
            }
            let (root, length) = hasher.finish().await.expect("finish");
            assert_eq!(root.0, *blake3::hash(&body).as_bytes(), "{size}");
            assert_eq!(length, size as u64);
        }
    }

    use super::*;

    /// Sizes that matter: empty, one byte, one below / at / above a batch, several batches.
    #[tokio::test]
    async fn agrees_with_the_one_thread_hasher_at_every_boundary() {
        for size in [0, 1, BATCH - 1, BATCH, BATCH + 1, 3 * BATCH + 17] {
            let data: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
            let mut hasher = DualHasher::default();
            let mut written = Vec::new();
            // Feed in uneven chunks, as a network would: runs of small ones (copied together)
            // between large ones (passed on as they are).
            let mut rest = &data[..];
            for step in (0..).map(|i| [7919, 100, 70_001, 1, 16 * 1024, 16 * 1024 - 1][i % 6]) {
                if rest.is_empty() {
                    break;
                }
                let (chunk, after) = rest.split_at(step.min(rest.len()));
                rest = after;
                for piece in hasher
                    .update(Bytes::copy_from_slice(chunk))
                    .await
                    .expect("hashing")
                {
                    written.extend_from_slice(&piece);
                }
            }
            let (digests, tail, outboard) = hasher.finish_with_outboard().await.expect("hashing");
            for piece in tail {
                written.extend_from_slice(&piece);
            }
            // The outboard comes with every body that went through the hasher tasks.
            assert_eq!(outboard.is_some(), size >= BATCH, "size {size}");
            if let Some(outboard) = outboard {
                let crate::outboard::Built::Memory(outboard) = outboard else {
                    panic!("a default hasher keeps the outboard in memory");
                };
                let tree = weft_api::bao::tree(size as u64);
                assert_eq!(outboard.len() as u64, tree.outboard_size(), "size {size}");
            }
            assert_eq!(written, data, "size {size}");
            assert_eq!(
                digests,
                weft_api::digest::Hasher::digest(&data),
                "size {size}"
            );
        }
    }

    /// Issue #15, flat memory: a chunk under [`SMALL`] bytes is copied, so it does not keep
    /// alive the read buffer it is a slice of (a client padding out 16 KiB chunks would pin
    /// 25 times its counted bytes); a chunk of `SMALL` bytes or more is passed on as it is.
    #[tokio::test]
    async fn short_chunks_are_copied_and_long_ones_passed_on() {
        let read_buffer = Bytes::from(vec![5u8; 4 * BATCH]);
        let inside = |piece: &Bytes| {
            let start = read_buffer.as_ptr() as usize;
            (start..start + read_buffer.len()).contains(&(piece.as_ptr() as usize))
        };
        let mut hasher = DualHasher::default();
        let mut pieces = Vec::new();
        for i in 0..(2 * BATCH / (16 * 1024)) {
            let chunk = read_buffer.slice(i * 16 * 1024..(i + 1) * 16 * 1024);
            pieces.extend(hasher.update(chunk).await.expect("hashing"));
        }
        let long = read_buffer.slice(2 * BATCH..2 * BATCH + SMALL);
        pieces.extend(hasher.update(long).await.expect("hashing"));
        let (digests, tail, _) = hasher.finish_with_outboard().await.expect("hashing");
        pieces.extend(tail);
        assert_eq!(digests.size, (2 * BATCH + SMALL) as u64);
        let (kept, copied): (Vec<_>, Vec<_>) = pieces.iter().partition(|p| inside(p));
        assert_eq!(
            copied.iter().map(|p| p.len()).sum::<usize>(),
            2 * BATCH,
            "every 16 KiB chunk was copied"
        );
        assert_eq!(kept.len(), 1, "the long chunk is passed on as it is");
        assert_eq!(kept[0].len(), SMALL);
    }

    /// Issue #15, flat memory: a spilling hasher writes a large body's outboard to its file as
    /// it goes, and the file holds exactly the outboard the in-memory builder makes.
    #[tokio::test]
    async fn a_spilled_outboard_equals_the_one_built_in_memory() {
        let dir = tempfile::tempdir().expect("dir");
        let size = 20 * BATCH + 12_345; // an 80 KiB outboard: more than one spill buffer
        let data: Vec<u8> = (0..size).map(|i| (i % 241) as u8).collect();
        let path = dir.path().join("x.outboard");
        let mut spilling = DualHasher::spilling_to(path.clone(), crate::faults::Faults::default());
        let mut in_memory = DualHasher::default();
        for chunk in data.chunks(300_000) {
            let chunk = Bytes::copy_from_slice(chunk);
            spilling.update(chunk.clone()).await.expect("hashing");
            in_memory.update(chunk).await.expect("hashing");
        }
        let (spilled_digests, _, spilled) = spilling.finish_with_outboard().await.expect("hashing");
        let (digests, _, kept) = in_memory.finish_with_outboard().await.expect("hashing");
        assert_eq!(spilled_digests, digests);
        let Some(crate::outboard::Built::Spilled(file)) = spilled else {
            panic!("spilled: {spilled:?}");
        };
        assert_eq!(file, path);
        let Some(crate::outboard::Built::Memory(kept)) = kept else {
            panic!("kept: {kept:?}");
        };
        assert!(kept.len() > 64 * 1024, "more than one spill buffer");
        assert_eq!(std::fs::read(&path).expect("spill file"), kept);
    }
}
