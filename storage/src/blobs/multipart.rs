//! Staged uploads to a store other than the local disk (S3, and the memory store of the
//! tests), written as one multipart upload each: parts of [`part_size`] bytes, at most
//! [`PARTS_IN_FLIGHT`] of them sent at once, so an upload holds about three parts in memory
//! whatever its size (15 MiB under 10 GiB, 24 MiB past it).
//!
//! A multipart upload that is never completed or aborted is invisible to a listing but kept
//! (and billed) by the store. So before its first part, an upload writes a marker,
//! `staging/<uuid>.multipart`, holding its upload id; the marker goes after the upload is
//! completed or aborted. A crash leaves the marker, and the start-up sweep ([`sweep`]) aborts
//! the upload it names, then removes everything under `staging/`. A dropped writer (a request
//! cancelled mid-body) aborts its upload in the background.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::TryStreamExt as _;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{MultipartId, ObjectStore, ObjectStoreExt as _, PutPayload};
use tokio::task::JoinSet;

use crate::error::Error;

/// The smallest part S3 takes (but for the last).
const MIN_PART: usize = 5 * 1024 * 1024;
/// Parts of [`MIN_PART`] bytes an upload starts with (about 10 GiB).
const SMALL_PARTS: usize = 2_000;
/// The part size after them.
const LARGE_PART: usize = 8 * 1024 * 1024;

/// Bytes of part `index` (from 0). S3 takes at most 10,000 parts: 2,000 of 5 MiB then 8,000
/// of 8 MiB carry 72 GiB, past the largest upload weft accepts (64 GiB), while an upload under
/// 10 GiB holds parts of 5 MiB only (the memory an upload costs is about three parts).
pub(super) fn part_size(index: usize) -> usize {
    if index < SMALL_PARTS {
        MIN_PART
    } else {
        LARGE_PART
    }
}
/// Parts sent at once per upload.
pub(super) const PARTS_IN_FLIGHT: usize = 2;

const MARKER_SUFFIX: &str = ".multipart";

/// A part's index, what the store answered, and its bytes (whose buffer is used again).
type PartResult = (usize, Result<PartId, object_store::Error>, Bytes);

/// One staged upload's multipart upload.
pub(super) struct Writer {
    store: Arc<dyn ObjectStore>,
    multipart: Arc<dyn MultipartStore>,
    path: Path,
    marker: Path,
    id: MultipartId,
    /// The part being filled: bytes not yet sent, copied out of the request's chunks so
    /// that those are freed at once and the part's buffer is used again for a later part.
    filling: BytesMut,
    /// Buffers of parts that landed, for the next parts: an upload allocates about three
    /// part buffers whatever its size, and never returns them to the allocator midway
    /// (freed and reallocated 8 MiB at a time, they stayed resident anyway).
    spare: Vec<BytesMut>,
    next_part: usize,
    parts: Vec<Option<PartId>>,
    in_flight: JoinSet<PartResult>,
    /// Completed or aborted: nothing left for `Drop`.
    settled: bool,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("path", &self.path)
            .field("next_part", &self.next_part)
            .finish_non_exhaustive()
    }
}

/// A store's multipart calls.
#[derive(Clone)]
pub(super) struct Parts(pub(super) Arc<dyn MultipartStore>);

impl std::fmt::Debug for Parts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Parts")
    }
}

fn marker_path(path: &Path) -> Path {
    Path::from(format!("{path}{MARKER_SUFFIX}"))
}

impl Writer {
    /// Starts the multipart upload of `path` and records its marker.
    pub(super) async fn start(
        store: Arc<dyn ObjectStore>,
        multipart: Arc<dyn MultipartStore>,
        path: Path,
    ) -> Result<Self, Error> {
        let id = multipart.create_multipart(&path).await?;
        let marker = marker_path(&path);
        let writer = Self {
            store,
            multipart,
            path,
            marker,
            id,
            filling: BytesMut::new(),
            spare: Vec::new(),
            next_part: 0,
            parts: Vec::new(),
            in_flight: JoinSet::new(),
            settled: false,
        };
        let recorded = writer
            .store
            .put(&writer.marker, PutPayload::from(writer.id.clone()))
            .await;
        if let Err(error) = recorded {
            writer.abort().await;
            return Err(error.into());
        }
        Ok(writer)
    }

    /// Takes `bytes`, sending every full part (waiting while [`PARTS_IN_FLIGHT`] are out).
    pub(super) async fn put(&mut self, mut bytes: Bytes) -> Result<(), Error> {
        while !bytes.is_empty() {
            let part = part_size(self.next_part);
            if self.filling.capacity() < part {
                let mut buffer = self.spare.pop().unwrap_or_default();
                buffer.reserve(part);
                buffer.extend_from_slice(&self.filling);
                self.filling = buffer;
            }
            let take = (part - self.filling.len()).min(bytes.len());
            self.filling.extend_from_slice(&bytes.split_to(take));
            if self.filling.len() == part {
                self.send_pending().await?;
            }
        }
        Ok(())
    }

    async fn send_pending(&mut self) -> Result<(), Error> {
        while self.in_flight.len() >= PARTS_IN_FLIGHT {
            self.collect_one().await?;
        }
        let part = std::mem::take(&mut self.filling).freeze();
        let index = self.next_part;
        self.next_part += 1;
        self.parts.push(None);
        let multipart = Arc::clone(&self.multipart);
        let (path, id) = (self.path.clone(), self.id.clone());
        self.in_flight.spawn(async move {
            let sent = multipart
                .put_part(&path, &id, index, PutPayload::from(part.clone()))
                .await;
            (index, sent, part)
        });
        Ok(())
    }

    async fn collect_one(&mut self) -> Result<(), Error> {
        match self.in_flight.join_next().await {
            Some(Ok((index, Ok(part), buffer))) => {
                self.parts[index] = Some(part);
                // The store let go of the part's bytes: the buffer serves a later part.
                if let Ok(mut buffer) = buffer.try_into_mut() {
                    buffer.clear();
                    self.spare.push(buffer);
                }
                Ok(())
            }
            Some(Ok((_, Err(error), _))) => Err(error.into()),
            Some(Err(join)) => Err(Error::backend(join)),
            None => Ok(()),
        }
    }

    /// Sends the last part, waits for every part, completes the upload (the object exists
    /// from here) and removes the marker.
    pub(super) async fn finish(mut self) -> Result<(), Error> {
        if self.next_part == 0 && self.filling.is_empty() {
            return self.finish_empty().await;
        }
        let outcome = async {
            if !self.filling.is_empty() {
                self.send_pending().await?;
            }
            while !self.in_flight.is_empty() {
                self.collect_one().await?;
            }
            let parts: Vec<PartId> = std::mem::take(&mut self.parts)
                .into_iter()
                .map(|part| {
                    part.ok_or_else(|| {
                        Error::backend(std::io::Error::other("a part never answered"))
                    })
                })
                .collect::<Result<_, _>>()?;
            self.multipart
                .complete_multipart(&self.path, &self.id, parts)
                .await?;
            Ok::<_, Error>(())
        }
        .await;
        if let Err(error) = outcome {
            self.abort().await;
            return Err(error);
        }
        self.settled = true;
        if let Err(error) = self.store.delete(&self.marker).await {
            // Harmless: the sweep aborts an upload that is gone already and removes it.
            tracing::warn!(marker = %self.marker, %error, "could not remove a multipart marker");
        }
        Ok(())
    }

    /// An empty body: S3 (Garage) refuses an empty part, so the upload is aborted and the
    /// empty object put whole.
    async fn finish_empty(mut self) -> Result<(), Error> {
        self.settled = true;
        abort_upload(
            &*self.store,
            &*self.multipart,
            &self.path,
            &self.id,
            &self.marker,
        )
        .await;
        self.store.put(&self.path, PutPayload::default()).await?;
        Ok(())
    }

    /// Stops the parts in flight, aborts the upload and removes its marker. Failures are
    /// logged: the marker stays for the start-up sweep.
    pub(super) async fn abort(mut self) {
        self.settled = true;
        self.in_flight.abort_all();
        abort_upload(
            &*self.store,
            &*self.multipart,
            &self.path,
            &self.id,
            &self.marker,
        )
        .await;
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        self.in_flight.abort_all();
        let (store, multipart) = (Arc::clone(&self.store), Arc::clone(&self.multipart));
        let (path, id, marker) = (self.path.clone(), self.id.clone(), self.marker.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                abort_upload(&*store, &*multipart, &path, &id, &marker).await;
            });
        }
    }
}

async fn abort_upload(
    store: &dyn ObjectStore,
    multipart: &dyn MultipartStore,
    path: &Path,
    id: &MultipartId,
    marker: &Path,
) {
    match multipart.abort_multipart(path, id).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => {
            if let Err(error) = store.delete(marker).await {
                tracing::warn!(%marker, %error, "could not remove a multipart marker");
            }
        }
        Err(error) => {
            tracing::warn!(%path, %error, "could not abort a multipart upload; the start-up sweep will");
        }
    }
}

/// Aborts the multipart upload of every marker under `staging/` and removes everything there
/// (`before`: only what was written before it). Without `before`, only safe while no upload
/// is running (at start). Returns how many objects it removed.
pub(super) async fn sweep(
    store: &Arc<dyn ObjectStore>,
    multipart: &Arc<dyn MultipartStore>,
    before: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<usize, Error> {
    let found: Vec<Path> = store
        .list(Some(&Path::from("staging")))
        .try_filter(|meta| futures::future::ready(before.is_none_or(|at| meta.last_modified < at)))
        .map_ok(|meta| meta.location)
        .try_collect()
        .await?;
    // Markers first: whether an upload completed is read from its object, removed after.
    for marker in &found {
        let Some(staged) = marker.as_ref().strip_suffix(MARKER_SUFFIX) else {
            continue;
        };
        let id = match store.get(marker).await {
            Ok(result) => result.bytes().await?,
            Err(object_store::Error::NotFound { .. }) => continue,
            Err(error) => return Err(error.into()),
        };
        let id = String::from_utf8_lossy(&id).into_owned();
        let staged = Path::from(staged);
        match multipart.abort_multipart(&staged, &id).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            // A crash between an upload's completion and its marker's removal: the upload
            // is gone because its object exists (removed below with the rest).
            Err(_) if store.head(&staged).await.is_ok() => {}
            Err(error) => return Err(error.into()),
        }
    }
    let mut n_removed = 0;
    for path in found {
        match store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => n_removed += 1,
            Err(error) => return Err(error.into()),
        }
    }
    Ok(n_removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStore;

    /// The marker names an upload that completed (a crash between the completion and the
    /// marker's removal), one that never did (a crash mid-body), and the staged object is
    /// there too: the sweep aborts what is open, takes the rest, and a later start finds
    /// nothing. On Garage when one runs, and on the memory store.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_sweep_aborts_open_uploads_and_takes_every_leftover() {
        type Backend = (&'static str, Arc<dyn ObjectStore>, Arc<dyn MultipartStore>);
        let mut stores: Vec<Backend> = Vec::new();
        let memory = Arc::new(object_store::memory::InMemory::new());
        stores.push(("memory", memory.clone(), memory));
        let garage = tokio::task::spawn_blocking(weft_testkit::shared_garage)
            .await
            .expect("joined");
        if let Some(garage) = garage {
            let prefix = format!("sweep-{}", uuid::Uuid::new_v4());
            let mut location: super::super::S3Location =
                garage.location(0, &prefix).parse().expect("location");
            location.credentials_file = Some(garage.credentials_file().to_path_buf());
            let s3 = super::super::s3::open(&location).expect("opens");
            stores.push(("garage", s3.clone(), s3));
        } else {
            assert!(!weft_testkit::garage_required(), "WEFT_GARAGE is set");
        }
        for (backend, store, multipart) in stores {
            // Completed, marker left behind.
            let done = Writer::start(
                Arc::clone(&store),
                Arc::clone(&multipart),
                Path::from("staging/done"),
            )
            .await
            .expect("starts");
            let done_id = done.id.clone();
            let mut done = done;
            done.put(Bytes::from_static(b"done")).await.expect("taken");
            done.finish().await.expect("finishes");
            // An empty body is an object too.
            let empty = Writer::start(
                Arc::clone(&store),
                Arc::clone(&multipart),
                Path::from("staging/empty"),
            )
            .await
            .expect("starts");
            empty.finish().await.expect("an empty body finishes");
            assert_eq!(
                store
                    .head(&Path::from("staging/empty"))
                    .await
                    .expect("stored")
                    .size,
                0
            );
            store
                .put(
                    &marker_path(&Path::from("staging/done")),
                    PutPayload::from(done_id),
                )
                .await
                .expect("marker back");
            // Cut mid-body: never settled, never dropped (as a crash leaves it).
            let mut cut = Writer::start(
                Arc::clone(&store),
                Arc::clone(&multipart),
                Path::from("staging/cut"),
            )
            .await
            .expect("starts");
            cut.put(Bytes::from(vec![7u8; part_size(0) + 1]))
                .await
                .expect("a part goes");
            while !cut.in_flight.is_empty() {
                cut.collect_one().await.expect("the part lands");
            }
            cut.settled = true;
            std::mem::forget(cut);
            // A sweep of what is older than an hour ago (a running server's) keeps them all.
            let hour_ago = chrono::Utc::now() - chrono::Duration::hours(1);
            let n = sweep(&store, &multipart, Some(hour_ago))
                .await
                .unwrap_or_else(|e| panic!("{backend}: {e}"));
            assert_eq!(n, 0, "{backend}: all younger");
            let n = sweep(&store, &multipart, None)
                .await
                .unwrap_or_else(|e| panic!("{backend}: {e}"));
            assert_eq!(n, 4, "{backend}: both staged objects and both markers");
            assert_eq!(
                sweep(&store, &multipart, None).await.expect("again"),
                0,
                "{backend}"
            );
        }
    }

    /// S3's limits hold for every upload weft accepts: parts of at least 5 MiB, at most
    /// 10,000 of them for 64 GiB.
    #[test]
    fn the_part_schedule_fits_s3() {
        let largest: u64 = 64 << 30;
        let mut carried = 0u64;
        let mut parts = 0;
        while carried < largest {
            assert!(part_size(parts) >= 5 << 20);
            carried += part_size(parts) as u64;
            parts += 1;
        }
        assert!(parts <= 10_000, "{parts} parts");
        assert_eq!(part_size(0), 5 << 20, "small uploads hold small parts");
    }

    /// An upload of many parts allocates a few part buffers and uses them again: once the
    /// store has a part, its buffer fills a later one (flat memory, issue #42). On Garage:
    /// the memory store keeps the parts' bytes, so their buffers are never free.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn part_buffers_are_used_again() {
        let garage = tokio::task::spawn_blocking(weft_testkit::shared_garage)
            .await
            .expect("joined");
        let Some(garage) = garage else {
            assert!(!weft_testkit::garage_required(), "WEFT_GARAGE is set");
            return;
        };
        let prefix = format!("reuse-{}", uuid::Uuid::new_v4());
        let mut location: super::super::S3Location =
            garage.location(0, &prefix).parse().expect("location");
        location.credentials_file = Some(garage.credentials_file().to_path_buf());
        let s3 = super::super::s3::open(&location).expect("opens");
        let path = Path::from("staging/reused");
        let mut writer = Writer::start(s3.clone(), s3.clone(), path.clone())
            .await
            .expect("starts");
        let chunk = Bytes::from(vec![3u8; 256 * 1024]);
        let n_parts = 6;
        let mut allocated = std::collections::BTreeSet::new();
        for _ in 0..(n_parts * part_size(0) / chunk.len()) {
            writer.put(chunk.clone()).await.expect("put");
            allocated.insert(writer.filling.as_ptr() as usize);
        }
        writer.finish().await.expect("finishes");
        let stored = s3.head(&path).await.expect("stored");
        assert_eq!(stored.size, (n_parts * part_size(0)) as u64);
        assert!(
            allocated.len() <= PARTS_IN_FLIGHT + 2,
            "{} part buffers for {n_parts} parts",
            allocated.len()
        );
    }
}
