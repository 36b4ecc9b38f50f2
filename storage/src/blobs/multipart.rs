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
        let outcome = async {
            if self.pending_len > 0 || self.next_part == 0 {
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
    let mut n_removed = 0;
    for path in found {
        if let Some(staged) = path.as_ref().strip_suffix(MARKER_SUFFIX) {
            let id = match store.get(&path).await {
                Ok(result) => result.bytes().await?,
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(error) => return Err(error.into()),
            };
            let id = String::from_utf8_lossy(&id).into_owned();
            match multipart.abort_multipart(&Path::from(staged), &id).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        match store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => n_removed += 1,
            Err(error) => return Err(error.into()),
        }
    }
    Ok(n_removed)
}
