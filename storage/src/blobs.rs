//! Content-addressed blob storage on `object_store`: a local directory (the default), S3
//! (`blobs/s3.rs`: Garage, MinIO, AWS), or memory (tests). (Long, about 650 lines: the object
//! store surface, staging, inline bodies and reads, in one place; placing a blob at its key
//! is `blobs/placing.rs`, the outboards' part `blobs/outboards.rs`, multipart staging
//! `blobs/multipart.rs`.)
//!
//! A blob is written once, at `blobs/blake3/<first two hex>/<64 hex>`. Uploads stream into
//! `staging/<uuid>` and are promoted with a create-if-absent rename only after their digests
//! check out, so a reader never sees a partial blob and two concurrent uploads of the same bytes
//! leave exactly one object. On S3 there is no rename: a staged upload is a multipart upload
//! under `staging/`, placed at its digest's key by a server-side copy after a HEAD found the
//! key free (`blobs/s3.rs`). On the local backend `LocalFileSystem` runs with fsync on, so a
//! promoted blob and its directory entry are durable before `promote` returns.
//!
//! A blob of at least 1 MiB also gets its BLAKE3 outboard (`outboard.rs`) at
//! `outboards/<64 hex>`, written (and fsynced) before the blob is promoted, so every
//! acknowledged large upload has one; it is removed with its blob. A blob without one (stored
//! before outboards existed, or whose outboard failed verification) is read with the full
//! re-hash, and its outboard is rebuilt.
//!
//! This module knows nothing about the index: the caller records the blob after `promote`.
//!
//! Crash story: a crash leaves at most files under `staging/` (a local upload's staged
//! file, `blobs/staging.rs`, or an older version's object_store `<key>#<n>` part file), and,
//! if it struck between a promotion and the index row that records it, a blob file with no
//! row (an "orphan": no upload was acknowledged for it), or an outboard whose blob's rename
//! never came (the outboard goes first).
//! [`Blobs::sweep_staging`] removes the first at start and the engine's start-up
//! reconciliation (`lifecycle.rs`) the others, with [`Blobs::local_blob_files`] and
//! [`Blobs::local_outboard_files`]; on a shared bucket, which no start lists, the sweep walks
//! the store a page at a time (`blobs/walk.rs`, `artifacts/strays.rs`).
//!
//! Modes: on the local backend the data directory, every directory under it and every blob
//! file are owner-only (0700 / 0600); [`Blobs::open`] also fixes the modes of what an older
//! version left world-readable.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt as _, TryStreamExt as _};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{GetResultPayload, ObjectStore, ObjectStoreExt as _};
use weft_api::{ArtifactId, Digests, ErrorCode};

use crate::error::Error;
use crate::hashing::{BATCH, DualHasher, Root};

mod chunks;
mod faulty;
mod files;
mod multipart;
mod outboards;
mod placing;
mod reading;
mod resumable;
mod s3;
mod staging;
mod walk;

pub(crate) use walk::Walk;

pub use s3::S3Location;

pub(crate) use files::{SpillGuard, owner_only_dir, owner_only_file};
use files::{owner_only_tree, remove_all_in};
pub(crate) use resumable::upload_path;

use crate::faults::Faults;

/// Where [`Blobs::stage`] writes a staged upload's bytes.
enum Sink {
    /// The local backend: a file written at the hashing's pace, its writeback started early.
    File(staging::StagingFile),
    /// Any other store: its multipart upload (`blobs/multipart.rs`).
    Store(multipart::Writer),
}

impl Sink {
    async fn put(&mut self, bytes: Bytes) -> Result<(), Error> {
        match self {
            Self::File(file) => file.put(bytes).await,
            Self::Store(writer) => writer.put(bytes).await,
        }
    }

    /// Makes everything put durable (the staged object exists from here). On failure what
    /// was written goes with the dropped writer.
    async fn finish(self) -> Result<(), Error> {
        match self {
            Self::File(mut file) => file.finish().await.map(drop),
            Self::Store(writer) => writer.finish().await,
        }
    }

    /// Removes what was written (a file removes itself when dropped).
    async fn abort(self) {
        if let Self::Store(writer) = self {
            writer.abort().await;
        }
    }
}

/// Where blobs live.
#[derive(Clone, Debug)]
pub enum Backend {
    /// A directory on the local filesystem, with fsync.
    Local(PathBuf),
    /// Process memory, for tests.
    Memory,
    /// A bucket on an S3-compatible store (Garage, MinIO, AWS S3).
    S3(S3Location),
}

#[derive(Clone, Debug)]
pub(crate) struct Blobs {
    /// Every write goes through this: the real store wrapped in `faulty.rs`.
    store: Arc<dyn ObjectStore>,
    /// The real store itself, for the reads: a content GET pays nothing for the test hooks.
    reads: Arc<dyn ObjectStore>,
    local_root: Option<PathBuf>,
    /// Where a large upload's outboard is spilled as it is built (`<dir>/staging/`): the data
    /// directory, on the local backend and (beside the index) on S3; none in memory.
    spill_root: Option<PathBuf>,
    /// The multipart calls of a store other than the local one, for staged uploads
    /// (`blobs/multipart.rs`).
    multipart: Option<multipart::Parts>,
    /// The store has no create-if-absent copy (S3): a blob is placed by a plain copy after a
    /// HEAD found its key free (`promote`).
    plain_copy: bool,
    /// Blob bytes read (whole-blob streams and ranges), for tests to show what a read cost.
    bytes_read: Arc<std::sync::atomic::AtomicU64>,
    /// Write faults for the direct file writes and fsyncs (the store is wrapped in
    /// `faulty.rs` for the rest); off outside tests.
    faults: Faults,
    /// The process's cap on staged part writes running at once (`staging.rs`).
    part_writes: Arc<tokio::sync::Semaphore>,
    /// Staged files are written with `O_DIRECT` past their first part (`staging.rs`).
    direct_writes: bool,
}

/// Bytes that were staged and hashed but are not yet visible. Dropping it deletes the staged
/// object, so every early return and every cancelled request cleans up after itself.
#[derive(Debug)]
pub(crate) struct Staged {
    path: Option<Path>,
    store: Arc<dyn ObjectStore>,
    pub(crate) digests: Digests,
    /// A body no larger than the inline threshold, held in memory instead of a staged file:
    /// the caller writes it into the index in the transaction of its row.
    pub(crate) inline: Option<Bytes>,
    /// The BLAKE3 outboard, for a body of at least [`BATCH`] bytes: in memory, or (a local
    /// upload) in the file it was written to as it was built, beside the staged bytes.
    outboard: Option<crate::outboard::Built>,
    /// The staged object is a resumable upload session's (`resumable.rs`): its row owns it,
    /// so a failed finish keeps it for the retry instead of deleting it.
    session_owned: bool,
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(crate::outboard::Built::Spilled(path)) = self.outboard.take() {
            let _ = std::fs::remove_file(path);
        }
        if let Some(path) = self.path.take()
            && !self.session_owned
        {
            let store = Arc::clone(&self.store);
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    if let Err(error) = store.delete(&path).await {
                        tracing::warn!(%path, %error, "could not delete staged upload");
                    }
                });
            }
        }
    }
}

pub(crate) fn blob_path(id: &ArtifactId) -> Path {
    let hex = id.hex();
    Path::from(format!("blobs/blake3/{}/{}", &hex[..2], hex))
}

pub(crate) fn outboard_path(id: &ArtifactId) -> Path {
    Path::from(format!("outboards/{}", id.hex()))
}

/// Maps a failed body read to the error callers see.
fn body_error(error: std::io::Error) -> Error {
    if let Some(refusal) = crate::limits::quota_from_io(&error) {
        return refusal;
    }
    if error.kind() == std::io::ErrorKind::TimedOut {
        Error::reject(ErrorCode::Timeout, "the request body stalled")
    } else if error.kind() == std::io::ErrorKind::InvalidData {
        // A body whose framing is wrong (a multipart body with a part after its content).
        Error::reject(ErrorCode::BadRequest, error.to_string())
    } else {
        Error::Body(error.to_string())
    }
}

fn too_large(limit: u64) -> Error {
    Error::reject(
        ErrorCode::BodyTooLarge,
        format!("uploads are limited to {limit} bytes"),
    )
}

impl Blobs {
    /// Opens the store; `faults` may fail its writes (tests only, see `faults.rs`);
    /// `direct_writes`: see [`crate::Options::direct_writes`].
    /// `scratch`: a local directory (the index's) for the outboards of uploads to S3.
    pub(crate) fn open(
        backend: &Backend,
        faults: Faults,
        direct_writes: bool,
        scratch: Option<&std::path::Path>,
    ) -> Result<Self, Error> {
        match backend {
            Backend::Local(root) => {
                std::fs::create_dir_all(root.join("blobs")).map_err(Error::backend)?;
                std::fs::create_dir_all(root.join("staging")).map_err(Error::backend)?;
                std::fs::create_dir_all(root.join("uploads")).map_err(Error::backend)?;
                std::fs::create_dir_all(root.join("outboards")).map_err(Error::backend)?;
                owner_only_dir(root)?;
                for sub in ["blobs", "staging", "uploads", "outboards"] {
                    owner_only_tree(&root.join(sub))?;
                }
                let store: Arc<dyn ObjectStore> =
                    Arc::new(LocalFileSystem::new_with_prefix(root)?.with_fsync(true));
                Ok(Self {
                    store: Arc::new(faulty::FaultyStore::new(Arc::clone(&store), faults.clone())),
                    reads: store,
                    local_root: Some(root.clone()),
                    spill_root: Some(root.clone()),
                    multipart: None,
                    plain_copy: false,
                    bytes_read: Arc::default(),
                    faults,
                    part_writes: Arc::new(tokio::sync::Semaphore::new(staging::PART_WRITES_IN_ALL)),
                    direct_writes,
                })
            }
            Backend::Memory => {
                let memory = Arc::new(InMemory::new());
                let store: Arc<dyn ObjectStore> = Arc::clone(&memory) as _;
                Ok(Self {
                    store: Arc::new(faulty::FaultyStore::new(Arc::clone(&store), faults.clone())),
                    reads: store,
                    local_root: None,
                    spill_root: None,
                    multipart: Some(multipart::Parts(Arc::new(faulty::FaultyParts::new(
                        memory,
                        faults.clone(),
                    )))),
                    plain_copy: false,
                    bytes_read: Arc::default(),
                    faults,
                    part_writes: Arc::new(tokio::sync::Semaphore::new(staging::PART_WRITES_IN_ALL)),
                    direct_writes,
                })
            }
            Backend::S3(location) => {
                let s3 = s3::open(location)?;
                let spill_root = match scratch {
                    Some(dir) => {
                        std::fs::create_dir_all(dir.join("staging")).map_err(Error::backend)?;
                        owner_only_tree(&dir.join("staging"))?;
                        Some(dir.to_path_buf())
                    }
                    None => None,
                };
                let store: Arc<dyn ObjectStore> = Arc::clone(&s3) as _;
                Ok(Self {
                    store: Arc::new(faulty::FaultyStore::new(Arc::clone(&store), faults.clone())),
                    reads: store,
                    local_root: None,
                    spill_root,
                    multipart: Some(multipart::Parts(Arc::new(faulty::FaultyParts::new(
                        s3,
                        faults.clone(),
                    )))),
                    plain_copy: true,
                    bytes_read: Arc::default(),
                    faults,
                    part_writes: Arc::new(tokio::sync::Semaphore::new(staging::PART_WRITES_IN_ALL)),
                    direct_writes,
                })
            }
        }
    }

    /// Whether the store answers (`blobs/s3.rs`; the local and memory stores always do).
    pub(crate) async fn check_reachable(&self) -> Result<(), Error> {
        match self.plain_copy {
            true => s3::check_reachable(&*self.reads).await,
            false => Ok(()),
        }
    }

    /// Whether blobs live in a store shared beyond this process (S3), where start-up does not
    /// list every key for orphans: a blob object with no row holds the bytes its digest names,
    /// so it is harmless, and fsck reports it.
    pub(crate) fn is_remote(&self) -> bool {
        self.plain_copy
    }

    /// Removes everything a crashed or cancelled upload left in `staging/`: files on the local
    /// backend; elsewhere staged objects, and the multipart uploads their markers name
    /// (`blobs/multipart.rs`), which a store keeps (and bills) until they are aborted.
    /// Only safe while no upload is running: it is called once, at start.
    pub(crate) async fn sweep_staging(&self) -> Result<usize, Error> {
        self.sweep_staging_before(None).await
    }

    /// What [`Blobs::sweep_staging`] removes, only what was written before `before` (all of
    /// it when `None`): a staged upload a day old was left by a crash, on a store that servers
    /// share too, where no start removes what another server may be writing.
    pub(crate) async fn sweep_staging_before(
        &self,
        before: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<usize, Error> {
        let in_dir = |dir: &std::path::Path| match before {
            Some(at) => files::remove_older_in(dir, at.into()),
            None => remove_all_in(dir),
        };
        let Some(root) = &self.local_root else {
            let n_spilled = match &self.spill_root {
                Some(dir) => in_dir(&dir.join("staging"))?,
                None => 0,
            };
            return match &self.multipart {
                Some(parts) => {
                    Ok(n_spilled + multipart::sweep(&self.store, &parts.0, before).await?)
                }
                None => Ok(n_spilled),
            };
        };
        in_dir(&root.join("staging"))
    }

    /// Every file under `blobs/blake3/` of the local backend whose name is a blob digest,
    /// with that digest (empty for the memory backend, which a crash empties anyway).
    /// Files with other names are left for fsck to report.
    /// The data directory of the local backend (`None` in memory).
    pub(crate) fn local_root(&self) -> Option<&std::path::Path> {
        self.local_root.as_deref()
    }

    pub(crate) fn local_blob_files(&self) -> Result<Vec<(PathBuf, ArtifactId)>, Error> {
        let Some(root) = &self.local_root else {
            return Ok(Vec::new());
        };
        let mut files = Vec::new();
        let top = root.join("blobs").join("blake3");
        if !top.is_dir() {
            return Ok(files);
        }
        for shard in std::fs::read_dir(&top).map_err(Error::backend)? {
            let shard = shard.map_err(Error::backend)?.path();
            if !shard.is_dir() {
                continue;
            }
            named_files(&shard, &mut files)?;
        }
        Ok(files)
    }

    /// Every outboard file of the local backend, with the blob it is named for (none
    /// elsewhere). A crash between an outboard's placing and its blob's rename leaves one that
    /// no blob has.
    pub(crate) fn local_outboard_files(&self) -> Result<Vec<(PathBuf, ArtifactId)>, Error> {
        let Some(root) = &self.local_root else {
            return Ok(Vec::new());
        };
        let dir = root.join("outboards");
        if !dir.is_dir() {
            return Ok(Vec::new());
        }
        let mut files = Vec::new();
        named_files(&dir, &mut files)?;
        Ok(files)
    }

    /// The names of what is under `staging/` (uploads in flight, or leftovers when no server
    /// runs), for fsck.
    pub(crate) async fn staging_entries(&self) -> Result<Vec<String>, Error> {
        match &self.local_root {
            Some(root) => std::fs::read_dir(root.join("staging"))
                .map_err(Error::backend)?
                .map(|entry| {
                    let entry = entry.map_err(Error::backend)?;
                    Ok(entry.file_name().to_string_lossy().into_owned())
                })
                .collect(),
            None => {
                self.store
                    .list(Some(&Path::from("staging")))
                    .map_ok(|meta| meta.location.to_string())
                    .map_err(Error::from)
                    .try_collect()
                    .await
            }
        }
    }

    /// Streams `body` into staging while hashing it, refusing it past `limit` bytes. A body
    /// that ends within `inline_limit` bytes is kept in memory instead ([`Staged::inline`]):
    /// no file, no rename, no fsync of its own. Memory stays bounded by `inline_limit`
    /// whatever the body's size: the buffered prefix goes to staging once it outgrows it.
    pub(crate) async fn stage<S>(
        &self,
        body: S,
        limit: u64,
        inline_limit: u64,
    ) -> Result<Staged, Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        if inline_limit == 0 {
            return self.stage_file(body, limit).await;
        }
        let mut body = Box::pin(body);
        let mut prefix = bytes::BytesMut::new();
        let mut outgrown = None;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(body_error)?;
            if (prefix.len() + chunk.len()) as u64 > inline_limit.min(limit) {
                outgrown = Some(chunk);
                break;
            }
            prefix.extend_from_slice(&chunk);
        }
        let Some(next) = outgrown else {
            let inline = prefix.freeze();
            let digests = weft_api::digest::Hasher::digest(&inline);
            return Ok(Staged {
                path: None,
                store: Arc::clone(&self.store),
                digests,
                inline: Some(inline),
                // Below 1 MiB: no outboard (a small blob is re-hashed whole).
                outboard: None,
                session_owned: false,
            });
        };
        let head = futures::stream::iter([Ok(prefix.freeze()), Ok(next)]);
        self.stage_file(head.chain(body), limit).await
    }

    /// [`Blobs::stage`] into a staged file, whatever the size.
    async fn stage_file<S>(&self, body: S, limit: u64) -> Result<Staged, Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        let path = Path::from(format!("staging/{}", uuid::Uuid::new_v4()));
        let mut writer = match &self.local_root {
            Some(root) => Sink::File(staging::StagingFile::create(
                root.join(path.as_ref()),
                self.faults.clone(),
                Arc::clone(&self.part_writes),
                self.direct_writes,
            )?),
            None => {
                let Some(parts) = &self.multipart else {
                    return Err(Error::backend(std::io::Error::other(
                        "a store with neither a local root nor multipart uploads",
                    )));
                };
                Sink::Store(
                    multipart::Writer::start(
                        Arc::clone(&self.store),
                        Arc::clone(&parts.0),
                        path.clone(),
                    )
                    .await?,
                )
            }
        };
        // A large body's outboard goes to a file beside the staged bytes (on S3: under the data
        // directory) as it is built (flat memory); the start-up sweep removes a crash's.
        let spill = self
            .spill_root
            .as_ref()
            .map(|root| root.join(format!("{}.outboard", path.as_ref())));
        // Removes the spill file on every way out but success (an error, a dropped request).
        let mut spill_guard = SpillGuard(spill.clone());
        let outcome = async {
            let mut hasher = match spill {
                Some(spill) => DualHasher::spilling_to(spill, self.faults.clone()),
                None => DualHasher::default(),
            };
            let mut body = std::pin::pin!(body);
            let mut size = 0u64;
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(body_error)?;
                size += chunk.len() as u64;
                if size > limit {
                    return Err(too_large(limit));
                }
                for piece in hasher.update(chunk).await? {
                    writer.put(piece).await?;
                }
            }
            let (digests, tail, outboard) = hasher.finish_with_outboard().await?;
            for piece in tail {
                writer.put(piece).await?;
            }
            Ok((digests, outboard))
        }
        .await;
        match outcome {
            Ok((digests, outboard)) => {
                writer.finish().await?;
                // From here the Staged value owns the spill file (its Drop removes it).
                spill_guard.0 = None;
                Ok(Staged {
                    path: Some(path),
                    store: Arc::clone(&self.store),
                    digests,
                    inline: None,
                    outboard,
                    session_owned: false,
                })
            }
            Err(error) => {
                writer.abort().await;
                Err(error)
            }
        }
    }

    /// Hashes `body` without keeping it: used when the claimed digest is already stored, so
    /// re-uploading existing bytes costs no disk writes.
    pub(crate) async fn hash_only<S>(&self, body: S, limit: u64) -> Result<Digests, Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        let mut hasher = DualHasher::default();
        let mut body = std::pin::pin!(body);
        let mut size = 0u64;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(body_error)?;
            size += chunk.len() as u64;
            if size > limit {
                return Err(too_large(limit));
            }
            hasher.update(chunk).await?;
        }
        Ok(hasher.finish().await?.0)
    }

    /// The raw, unverified bytes of `range` of a blob (the caller verifies).
    pub(crate) async fn read_range(
        &self,
        id: &ArtifactId,
        range: std::ops::Range<u64>,
    ) -> Result<Bytes, Error> {
        let bytes = self.reads.get_range(&blob_path(id), range).await?;
        self.bytes_read
            .fetch_add(bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(bytes)
    }

    /// The stored size of a blob, or `None` if its object is missing.
    pub(crate) async fn stored_size(&self, id: &ArtifactId) -> Result<Option<u64>, Error> {
        match self.reads.head(&blob_path(id)).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// The raw, unverified bytes of a blob in chunks of about [`BATCH`] bytes.
    /// The caller verifies (see `Store::open_content`).
    pub(crate) async fn read(
        &self,
        id: &ArtifactId,
    ) -> Result<BoxStream<'static, Result<Bytes, Error>>, Error> {
        Ok(self.open_blob(id, false).await?.0)
    }

    /// The raw bytes of a blob, and, on the local backend, their BLAKE3 root as the reading
    /// thread computed it (`blobs/reading.rs`); the caller compares it with the address.
    /// Elsewhere the root is `None` and the caller hashes the bytes itself.
    pub(crate) async fn read_hashed(
        &self,
        id: &ArtifactId,
    ) -> Result<(BoxStream<'static, Result<Bytes, Error>>, Option<Root>), Error> {
        self.open_blob(id, true).await
    }

    async fn open_blob(
        &self,
        id: &ArtifactId,
        hashed: bool,
    ) -> Result<(BoxStream<'static, Result<Bytes, Error>>, Option<Root>), Error> {
        let result = self.reads.get(&blob_path(id)).await?;
        let (stream, root) = match result.payload {
            GetResultPayload::File(file, _) if hashed => {
                reading::read_file(file, reading::HASHED_WINDOW, true)
            }
            GetResultPayload::File(file, _) => reading::read_file(file, BATCH, false),
            GetResultPayload::Stream(stream) => (stream.map_err(Error::from).boxed(), None),
        };
        let counter = Arc::clone(&self.bytes_read);
        let stream = stream
            .inspect_ok(move |chunk| {
                counter.fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed);
            })
            .boxed();
        Ok((stream, root))
    }

    /// Blob bytes read since the store opened.
    pub(crate) fn bytes_read(&self) -> u64 {
        self.bytes_read.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many objects are under `blobs/` and under `staging/`. On the local backend the
    /// staging count reads the directory itself, so every file there counts, whichever writer
    /// left it (a staged file, a spilled outboard, an older version's `#<n>` part file).
    pub(crate) async fn count_objects(&self) -> Result<(u64, u64), Error> {
        let n_blobs = self
            .list()
            .try_fold(0u64, |n, _| async move { Ok(n + 1) })
            .await?;
        let n_staging = match &self.local_root {
            Some(root) => std::fs::read_dir(root.join("staging"))
                .map_err(Error::backend)?
                .count() as u64,
            None => {
                self.store
                    .list(Some(&Path::from("staging")))
                    .try_fold(0u64, |n, _| async move { Ok(n + 1) })
                    .await?
            }
        };
        Ok((n_blobs, n_staging))
    }

    /// Every blob the backend holds, for fsck.
    pub(crate) fn list(&self) -> BoxStream<'static, Result<(Path, u64), Error>> {
        self.list_with_age()
            .map_ok(|(path, size, _)| (path, size))
            .boxed()
    }

    /// Every blob the backend holds, with when it was last written (the store's own clock).
    pub(crate) fn list_with_age(&self) -> BoxStream<'static, Result<Listed, Error>> {
        self.store
            .list(Some(&Path::from("blobs/blake3")))
            .map_ok(|meta| (meta.location, meta.size, meta.last_modified))
            .map_err(Error::from)
            .boxed()
    }
}

/// Adds the files in `dir` named by a BLAKE3 digest's hex (blob files, outboards) to `files`.
fn named_files(dir: &std::path::Path, files: &mut Vec<(PathBuf, ArtifactId)>) -> Result<(), Error> {
    for entry in std::fs::read_dir(dir).map_err(Error::backend)? {
        let path = entry.map_err(Error::backend)?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if let Ok(id) = ArtifactId::parse(&format!("blake3:{name}"))
            && path.is_file()
        {
            files.push((path, id));
        }
    }
    Ok(())
}

#[cfg(feature = "bench-support")]
impl Blobs {
    /// Writes `bytes` as blob `id`'s object in one put (the collection benchmark's loader,
    /// `bench_support::load_expired`; never the server).
    pub(crate) async fn put_whole(&self, id: &ArtifactId, bytes: Bytes) -> Result<(), Error> {
        self.store.put(&blob_path(id), bytes.into()).await?;
        Ok(())
    }
}

/// A listed blob object: its path, size and when it was last written.
pub(crate) type Listed = (Path, u64, chrono::DateTime<chrono::Utc>);
