//! Staged uploads to a store other than the local disk (S3, and the memory store of the
//! tests), written as one multipart upload each: parts of [`PART_SIZE`] bytes, at most
//! [`PARTS_IN_FLIGHT`] of them sent at once, so an upload holds about three parts in memory
//! whatever its size.
//!
//! A multipart upload that is never completed or aborted is invisible to a listing but kept
//! (and billed) by the store. So before its first part, an upload writes a marker,
//! `staging/<uuid>.multipart`, holding its upload id; the marker goes after the upload is
//! completed or aborted. A crash leaves the marker, and the start-up sweep ([`sweep`]) aborts
//! the upload it names, then removes everything under `staging/`. A dropped writer (a request
//! cancelled mid-body) aborts its upload in the background.

use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt as _;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{MultipartId, ObjectStore, ObjectStoreExt as _, PutPayload};
use tokio::task::JoinSet;

use crate::error::Error;

/// Bytes per part: S3 takes at least 5 MiB (but for the last) and at most 10,000 parts, so
/// 8 MiB parts carry up to 78 GiB, past the largest upload weft accepts (64 GiB).
pub(super) const PART_SIZE: usize = 8 * 1024 * 1024;
/// Parts sent at once per upload.
pub(super) const PARTS_IN_FLIGHT: usize = 2;

const MARKER_SUFFIX: &str = ".multipart";

type PartResult = (usize, Result<PartId, object_store::Error>);

/// One staged upload's multipart upload.
pub(super) struct Writer {
    store: Arc<dyn ObjectStore>,
    multipart: Arc<dyn MultipartStore>,
    path: Path,
    marker: Path,
    id: MultipartId,
    /// Bytes not yet sent, as received (a part is a list of them: no copy).
    pending: Vec<Bytes>,
    pending_len: usize,
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
            pending: Vec::new(),
            pending_len: 0,
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
        while self.pending_len + bytes.len() >= PART_SIZE {
            let head = bytes.split_to(PART_SIZE - self.pending_len);
            self.pending.push(head);
            self.pending_len = PART_SIZE;
            self.send_pending().await?;
        }
        if !bytes.is_empty() {
            self.pending_len += bytes.len();
            self.pending.push(bytes);
        }
        Ok(())
    }

    async fn send_pending(&mut self) -> Result<(), Error> {
        while self.in_flight.len() >= PARTS_IN_FLIGHT {
            self.collect_one().await?;
        }
        let payload: PutPayload = std::mem::take(&mut self.pending).into_iter().collect();
        self.pending_len = 0;
        let index = self.next_part;
        self.next_part += 1;
        self.parts.push(None);
        let multipart = Arc::clone(&self.multipart);
        let (path, id) = (self.path.clone(), self.id.clone());
        self.in_flight.spawn(async move {
            let part = multipart.put_part(&path, &id, index, payload).await;
            (index, part)
        });
        Ok(())
    }

    async fn collect_one(&mut self) -> Result<(), Error> {
        match self.in_flight.join_next().await {
            Some(Ok((index, Ok(part)))) => {
                self.parts[index] = Some(part);
                Ok(())
            }
            Some(Ok((_, Err(error)))) => Err(error.into()),
            Some(Err(join)) => Err(Error::backend(join)),
            None => Ok(()),
        }
    }

    /// Sends the last part, waits for every part, completes the upload (the object exists
    /// from here) and removes the marker.
    pub(super) async fn finish(mut self) -> Result<(), Error> {
        if self.next_part == 0 && self.pending_len == 0 {
            return self.finish_empty().await;
        }
        let outcome = async {
            if self.pending_len > 0 {
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

/// Aborts the multipart upload of every marker under `staging/` and removes everything there.
/// Only safe while no upload is running (at start). Returns how many objects it removed.
pub(super) async fn sweep(
    store: &Arc<dyn ObjectStore>,
    multipart: &Arc<dyn MultipartStore>,
) -> Result<usize, Error> {
    let found: Vec<Path> = store
        .list(Some(&Path::from("staging")))
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
            cut.put(Bytes::from(vec![7u8; PART_SIZE + 1]))
                .await
                .expect("a part goes");
            while !cut.in_flight.is_empty() {
                cut.collect_one().await.expect("the part lands");
            }
            cut.settled = true;
            std::mem::forget(cut);
            let n = sweep(&store, &multipart)
                .await
                .unwrap_or_else(|e| panic!("{backend}: {e}"));
            assert_eq!(n, 4, "{backend}: both staged objects and both markers");
            assert_eq!(
                sweep(&store, &multipart).await.expect("again"),
                0,
                "{backend}"
            );
        }
    }
}
