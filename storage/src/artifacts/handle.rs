//! [`Artifacts`], the handle to artifacts and their bytes (`store.artifacts()`): uploads (in
//! one request or resumable), publication (with or without its bytes, under a session or a
//! capability token), reads and verified content, re-hash records, reuse, and the sweep of
//! uncited uploads. Its methods are in this folder's files, one per step (`upload.rs`,
//! `resumable.rs`, `publish.rs`, `with_content.rs`, `with_token.rs`, `reads.rs`,
//! `verification.rs`, `reuse.rs`, `sweep.rs`); here only the figures and the open of verified
//! content (`content/`).

use std::sync::Arc;

use weft_api::Digest;

use crate::access::Reader;
use crate::content::Content;
use crate::engine::Engine;
use crate::engine::hot::HotStats;
use crate::engine::uploads::UploadCounters;
use crate::error::Error;

/// Artifacts and their bytes; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Artifacts<'s>(pub(crate) &'s Arc<Engine>);

impl Artifacts<'_> {
    /// Which path uploads took since the store opened (staged or hashed only), and the bytes
    /// they staged.
    pub fn upload_counters(&self) -> UploadCounters {
        self.0.upload_counters.snapshot()
    }

    /// Opens an artifact's bytes for reading, verified as they stream (ART-5). A caller that
    /// streams them to a client takes a download slot first ([`Content::admitted`]), after
    /// visibility was decided here, so a refusal says nothing of what the reader may not see.
    pub async fn open_content(&self, digest: Digest, reader: &Reader) -> Result<Content, Error> {
        self.0.open_content(digest, reader).await
    }

    /// What the small-artifact read cache (`engine/hot.rs`) holds and how many reads it answered.
    pub fn hot_stats(&self) -> HotStats {
        self.0.hot.stats()
    }

    /// Blob bytes read from the object store since the store opened (whole-blob streams and
    /// the chunk groups of verified ranges): tests show with it what a read cost.
    pub fn blob_bytes_read(&self) -> u64 {
        self.0.blobs.bytes_read()
    }
}
