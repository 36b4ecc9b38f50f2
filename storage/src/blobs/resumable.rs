//! The bytes of resumable upload sessions: one object per session at `uploads/<upload id>`,
//! appended to chunk by chunk, re-hashed once at the end and then promoted like a staged
//! one-shot upload (a rename, no copy).
//!
//! Why `uploads/` and not `staging/`: `staging/` is emptied at every start, and a session must
//! survive a restart. Leftovers here are removed at start only when no session row names them
//! (`lifecycle.rs`).
//!
//! Crash story (local backend): a chunk is written, then the file is fsynced, then the caller
//! commits the new durable length. A crash in between leaves the file longer than the length
//! the row records; the next chunk truncates it back first, so the object always starts with
//! exactly the acknowledged bytes. Stores that cannot append (S3, memory) keep one object per
//! chunk under `uploads/<upload id>/` (`blobs/chunks.rs`).
//!
//! This module knows nothing about the `upload_sessions` table or who may upload.

use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use object_store::path::Path;
use object_store::{GetResultPayload, ObjectStoreExt as _, PutPayload};
use weft_api::Digests;

use super::{Blobs, Staged, body_error, too_large};
use crate::error::Error;
use crate::hashing::{BATCH, DualHasher};

/// Where the bytes of upload session `upload_id` are staged.
pub(crate) fn upload_path(upload_id: &str) -> Path {
    Path::from(format!("uploads/{upload_id}"))
}

impl Blobs {
    /// Appends `body` at `received`, the object's durable length, and makes it durable (file
    /// and, for a new file, its directory fsynced). Refuses past `room` bytes. Returns how many
    /// bytes were appended, and on a store that cannot append the new chunk's name, which the
    /// session commits as its `last_chunk` (`last`: the one committed before, `chunks.rs`).
    /// On any failure the object is cut back to `received`.
    pub(crate) async fn append_upload<S>(
        &self,
        path: &Path,
        received: u64,
        last: Option<&str>,
        body: S,
        room: u64,
    ) -> Result<(u64, Option<String>), Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        match &self.local_root {
            Some(root) => {
                let file = root.join(path.as_ref());
                let appended = append_local(&file, received, body, room, &self.faults).await?;
                Ok((appended, None))
            }
            None => self.append_chunk(path, received, last, body, room).await,
        }
    }

    /// Undoes a chunk written whose new length could not be committed: a file is cut back to
    /// `received` bytes, its durable length (removed at 0: the first chunk made it); on a
    /// store that cannot append, the chunk `written` is removed, and nothing else (another
    /// server's chunk at the same offset may be the one committed). One already gone is not
    /// an error.
    pub(crate) async fn cut_upload(
        &self,
        path: &Path,
        received: u64,
        written: Option<&str>,
    ) -> Result<(), Error> {
        match (&self.local_root, written) {
            (Some(_), _) if received == 0 => self.remove_upload(path).await,
            (Some(root), _) => truncate_local(&root.join(path.as_ref()), received).await,
            (None, Some(name)) => self.drop_chunk(path, name).await,
            (None, None) => Ok(()),
        }
    }

    /// Deletes an upload session's object; one already gone is not an error.
    pub(crate) async fn remove_upload(&self, path: &Path) -> Result<(), Error> {
        if self.local_root.is_none() {
            self.remove_chunks(path).await?;
        }
        match self.store.delete(path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Deletes one object under `uploads/` (a stray, `artifacts/strays.rs`); gone already is
    /// fine.
    pub(crate) async fn remove_upload_object(&self, key: &Path) -> Result<(), Error> {
        match self.store.delete(key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Re-hashes the first `received` bytes of an upload session's object, streaming (memory
    /// stays at a few batches whatever the size), and hands it back as staged bytes ready to
    /// promote. Dropping the result deletes the object.
    /// Whether `body` is exactly the bytes `start..end` of the upload object at `path`: the
    /// last chunk of a finish re-sent after that chunk was made durable but the finish was cut
    /// off (issue #40). Both sides are streamed and compared as they come, so memory stays
    /// bounded by one chunk of each whatever the range.
    pub(crate) async fn upload_holds<S>(
        &self,
        path: &Path,
        start: u64,
        end: u64,
        last: Option<&str>,
        body: S,
    ) -> Result<bool, Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        let mut stored = if self.local_root.is_none() {
            self.read_chunks(path, start, end, last).await?
        } else if start < end {
            let options = object_store::GetOptions {
                range: Some(object_store::GetRange::Bounded(start..end)),
                ..Default::default()
            };
            self.reads
                .get_opts(path, options)
                .await?
                .into_stream()
                .map(|chunk| chunk.map_err(Error::from))
                .boxed()
        } else {
            futures::stream::empty().boxed()
        };
        let mut body = std::pin::pin!(body);
        let (mut sent, mut kept) = (Bytes::new(), Bytes::new());
        let (mut sent_done, mut kept_done) = (false, false);
        loop {
            while sent.is_empty() && !sent_done {
                match body.next().await {
                    Some(chunk) => sent = chunk.map_err(body_error)?,
                    None => sent_done = true,
                }
            }
            while kept.is_empty() && !kept_done {
                match stored.next().await {
                    Some(chunk) => kept = chunk?,
                    None => kept_done = true,
                }
            }
            match (sent.is_empty(), kept.is_empty()) {
                (true, true) => return Ok(true),
                (false, false) => {}
                _ => return Ok(false),
            }
            let n = sent.len().min(kept.len());
            if sent[..n] != kept[..n] {
                return Ok(false);
            }
            sent = sent.slice(n..);
            kept = kept.slice(n..);
        }
    }

    pub(crate) async fn hash_upload(
        &self,
        path: &Path,
        received: u64,
        last: Option<&str>,
    ) -> Result<Staged, Error> {
        if self.local_root.is_none() {
            return self.hash_chunks(path, received, last).await;
        }
        if received == 0 {
            // Nothing was ever appended, so there may be no object: stage an empty one.
            self.store.put(path, PutPayload::default()).await?;
        }
        let result = self.reads.get(path).await?;
        let mut stream = match result.payload {
            GetResultPayload::File(file, _) => super::reading::read_file(file, BATCH, false).0,
            GetResultPayload::Stream(stream) => stream.map(|c| c.map_err(Error::from)).boxed(),
        };
        // The outboard is built by the same pass (written to a file as it goes on the local
        // backend, so memory stays flat), as for a one-shot upload.
        let spill = self
            .local_root
            .as_ref()
            .map(|root| root.join(format!("{}.outboard", path.as_ref())));
        let mut spill_guard = super::SpillGuard(spill.clone());
        let mut hasher = match spill {
            Some(spill) => DualHasher::spilling_to(spill, self.faults.clone()),
            None => DualHasher::default(),
        };
        let mut hashed = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            let keep = usize::try_from((received - hashed).min(chunk.len() as u64))
                .map_err(Error::backend)?;
            hasher.update(chunk.slice(..keep)).await?;
            hashed += keep as u64;
        }
        let (digests, _tail, outboard) = hasher.finish_with_outboard().await?;
        if digests.size != received {
            return Err(Error::backend(std::io::Error::other(format!(
                "upload object {path} holds {} bytes, its session recorded {received}",
                digests.size
            ))));
        }
        if self.local_root.is_some() && received > 0 {
            // A tail past `received` (a crash mid-chunk) must not be promoted with the blob.
            let file = self
                .local_root
                .as_ref()
                .map(|root| root.join(path.as_ref()));
            if let Some(file) = file {
                truncate_local(&file, received).await?;
            }
        }
        // From here the Staged value owns the spill file (its Drop removes it).
        spill_guard.0 = None;
        Ok(self.staged(path.clone(), digests, outboard))
    }

    fn staged(
        &self,
        path: Path,
        digests: Digests,
        outboard: Option<crate::outboard::Built>,
    ) -> Staged {
        // A resumed upload is a file whatever its size: its bytes already are one.
        Staged {
            path: Some(path),
            store: std::sync::Arc::clone(&self.store),
            digests,
            inline: None,
            outboard,
            session_owned: true,
        }
    }

    /// Every object under `prefix` (`uploads`, `outboards`) with its size, for the
    /// fingerprint.
    pub(crate) async fn listing(&self, prefix: &str) -> Result<Vec<(String, u64)>, Error> {
        use futures::TryStreamExt as _;
        self.store
            .list(Some(&Path::from(prefix)))
            .map_ok(|meta| (meta.location.to_string(), meta.size))
            .map_err(Error::from)
            .try_collect()
            .await
    }

    /// The names under `uploads/` of the local backend (empty for memory), for the start-up
    /// removal of objects no session row names.
    pub(crate) fn local_upload_files(&self) -> Result<Vec<(std::path::PathBuf, String)>, Error> {
        let Some(root) = &self.local_root else {
            return Ok(Vec::new());
        };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(root.join("uploads")).map_err(Error::backend)? {
            let path = entry.map_err(Error::backend)?.path();
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            files.push((path, name));
        }
        Ok(files)
    }
}

async fn truncate_local(file: &std::path::Path, length: u64) -> Result<(), Error> {
    let handle = tokio::fs::OpenOptions::new()
        .write(true)
        .open(file)
        .await
        .map_err(Error::backend)?;
    if handle.metadata().await.map_err(Error::backend)?.len() != length {
        handle.set_len(length).await.map_err(Error::backend)?;
        handle.sync_all().await.map_err(Error::backend)?;
    }
    Ok(())
}

async fn append_local<S>(
    file: &std::path::Path,
    received: u64,
    body: S,
    room: u64,
    faults: &crate::faults::Faults,
) -> Result<u64, Error>
where
    S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
{
    use crate::faults::FaultSite;
    use tokio::io::{AsyncSeekExt as _, AsyncWriteExt as _};
    let is_new = !tokio::fs::try_exists(file).await.map_err(Error::backend)?;
    let mut open = tokio::fs::OpenOptions::new();
    open.create(true).write(true);
    #[cfg(unix)]
    open.mode(0o600);
    let mut handle = open.open(file).await.map_err(Error::backend)?;
    // Drop whatever a crash or a failed chunk left past the durable length.
    handle.set_len(received).await.map_err(Error::backend)?;
    handle
        .seek(std::io::SeekFrom::Start(received))
        .await
        .map_err(Error::backend)?;
    let outcome = async {
        let mut body = std::pin::pin!(body);
        let mut appended = 0u64;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(body_error)?;
            appended += chunk.len() as u64;
            if appended > room {
                return Err(too_large(received.saturating_add(room)));
            }
            faults
                .check(FaultSite::UploadChunk)
                .map_err(Error::backend)?;
            handle.write_all(&chunk).await.map_err(Error::backend)?;
        }
        handle.flush().await.map_err(Error::backend)?;
        faults
            .check(FaultSite::UploadChunk)
            .map_err(Error::backend)?;
        handle.sync_all().await.map_err(Error::backend)?;
        if is_new && let Some(dir) = file.parent() {
            faults
                .check(FaultSite::UploadChunk)
                .map_err(Error::backend)?;
            let dir = dir.to_path_buf();
            tokio::task::spawn_blocking(move || std::fs::File::open(dir)?.sync_all())
                .await
                .map_err(Error::backend)?
                .map_err(Error::backend)?;
        }
        Ok(appended)
    }
    .await;
    match outcome {
        Ok(appended) => Ok(appended),
        Err(error) => {
            // tokio's `File` writes on the blocking pool: a write handed over before the error
            // may still be running. Dropping the handle would let it land after the cut below
            // and leave bytes past the durable length (a refusal test once saw its object
            // listing change); `into_std` waits for it first.
            drop(handle.into_std().await);
            let undone = if is_new {
                // A refused first chunk leaves no object at all, as before it.
                tokio::fs::remove_file(file).await
            } else {
                truncate_local(file, received)
                    .await
                    .map_err(std::io::Error::other)
            };
            if let Err(trim_error) = undone {
                tracing::warn!(file = %file.display(), %trim_error, "could not cut a failed chunk back");
            }
            Err(error)
        }
    }
}
