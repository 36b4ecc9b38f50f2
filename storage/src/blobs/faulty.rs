//! An `ObjectStore` that fails writes when a test arms [`Faults`], over the real store.
//!
//! Every write the blob layer sends through `object_store` passes here: a put (a blob, an
//! outboard, a multipart marker), a multipart upload's parts and its completion
//! ([`FaultyParts`]: a staged upload on a backend other than the local one, which writes its
//! staged file itself, `blobs/staging.rs`, asking the same sites), a rename or copy (a
//! promotion, or a resumable upload's chunk placed under `uploads/`), and a delete. The site
//! a put or a delete is counted under follows its path (`outboards/` → outboard, `uploads/` →
//! upload chunk, anything else → blob write). An
//! injected failure happens before the inner store is touched, as a full disk or a failed
//! fsync would stop it: the inner store then aborts or removes what it began, exactly as on a
//! real error.
//!
//! Reads and listings pass through untouched: reads must keep working while writes fail. The
//! blob layer's own reads (content, ranges, outboards) do not come here at all: they use the
//! real store, so a GET pays nothing.
//!
//! Disarmed, each write costs one relaxed atomic load ([`Faults::check`]).

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartId, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

use crate::faults::{FaultSite, Faults};

/// The real store, with write faults a test controls.
#[derive(Debug)]
pub(crate) struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    faults: Faults,
}

impl FaultyStore {
    pub(crate) fn new(inner: Arc<dyn ObjectStore>, faults: Faults) -> Self {
        Self { inner, faults }
    }
}

impl std::fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Faulty({})", self.inner)
    }
}

/// The write site a put to, or a delete of, `location` belongs to.
fn site_of(location: &Path) -> FaultSite {
    let path = location.as_ref();
    if path.starts_with("outboards/") {
        FaultSite::Outboard
    } else if path.starts_with("uploads/") {
        FaultSite::UploadChunk
    } else {
        FaultSite::BlobWrite
    }
}

/// An injected failure as object_store reports an I/O error (the `io::Error` stays in the
/// source chain, where `error.rs` finds ENOSPC or EIO).
fn injected(error: std::io::Error) -> object_store::Error {
    object_store::Error::Generic {
        store: "faulty",
        source: Box::new(error),
    }
}

fn check(faults: &Faults, site: FaultSite) -> Result<()> {
    faults.check(site).map_err(injected)
}

#[async_trait::async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        check(&self.faults, site_of(location))?;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        // Unused by the blob layer, which sends staged uploads through [`FaultyParts`].
        check(&self.faults, site_of(location))?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        // A failed delete is an error item of the stream, which the inner store passes on.
        let faults = self.faults.clone();
        let checked = locations
            .map(move |location| {
                let location = location?;
                check(&faults, site_of(&location))?;
                Ok(location)
            })
            .boxed();
        self.inner.delete_stream(checked)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        // A resumable upload's chunk, and an outboard spilled on the way to S3, are written
        // by a copy into `uploads/` or `outboards/` (`chunks.rs`, `outboards.rs`).
        let site = match site_of(to) {
            FaultSite::BlobWrite => FaultSite::Promote,
            site => site,
        };
        check(&self.faults, site)?;
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        check(&self.faults, FaultSite::Promote)?;
        self.inner.rename_opts(from, to, options).await
    }
}

/// The multipart calls of a store other than the local one, failing as [`FaultyStore`]
/// does: a part at its put's site, the completion at [`FaultSite::BlobFsync`] (before the
/// inner completion, as a failed fsync stops it: the caller then aborts the upload).
pub(crate) struct FaultyParts {
    inner: Arc<dyn MultipartStore>,
    faults: Faults,
}

impl FaultyParts {
    pub(crate) fn new(inner: Arc<dyn MultipartStore>, faults: Faults) -> Self {
        Self { inner, faults }
    }
}

#[async_trait::async_trait]
impl MultipartStore for FaultyParts {
    async fn create_multipart(&self, path: &Path) -> Result<MultipartId> {
        check(&self.faults, site_of(path))?;
        self.inner.create_multipart(path).await
    }

    async fn put_part(
        &self,
        path: &Path,
        id: &MultipartId,
        part_idx: usize,
        data: PutPayload,
    ) -> Result<PartId> {
        check(&self.faults, site_of(path))?;
        self.inner.put_part(path, id, part_idx, data).await
    }

    async fn complete_multipart(
        &self,
        path: &Path,
        id: &MultipartId,
        parts: Vec<PartId>,
    ) -> Result<PutResult> {
        check(&self.faults, FaultSite::BlobFsync)?;
        self.inner.complete_multipart(path, id, parts).await
    }

    async fn abort_multipart(&self, path: &Path, id: &MultipartId) -> Result<()> {
        self.inner.abort_multipart(path, id).await
    }
}
