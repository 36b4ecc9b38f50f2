//! [`Artifacts`], the handle to artifacts and their bytes (`store.artifacts()`): uploads (in
//! one request or resumable), publication (with or without its bytes, under a session or a
//! capability token), reads and verified content, re-hash records, reuse, and the sweep of
//! uncited uploads. Each method hands over to the engine, in the file of this folder named
//! beside it; the resumable sessions' rows are in `upload_sessions.rs`.

use std::sync::Arc;

use bytes::Bytes;
use futures::Stream;
use weft_api::views::{
    ArtifactPage, ArtifactView, Published, ReuseRecord, ReuseRequest, UploadSession,
};
use weft_api::{ArtifactId, Digest, Digests, Envelope};

use super::reads::ListFilter;
use super::sweep::SweepReport;
use super::upload::{UploadOutcome, Uploader};
use super::verification::Verification;
use crate::access::Grant;
use crate::access::Reader;
use crate::access::Session;
use crate::content::Content;
use crate::engine::Engine;
use crate::engine::hot::HotStats;
use crate::engine::uploads::UploadCounters;
use crate::error::Error;

/// Artifacts and their bytes; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Artifacts<'s>(pub(crate) &'s Arc<Engine>);

impl Artifacts<'_> {
    // ── upload.rs: uploads in one request ───────────────────────────────────

    /// Streams `body` into the store. With `expected`, the computed digest must match it.
    /// Only producing roles may upload, within the admission limits of `Options::quotas`.
    pub async fn upload<S>(
        &self,
        body: S,
        expected: Option<Digest>,
        uploader: Uploader<'_>,
    ) -> Result<UploadOutcome, Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        self.0.upload(body, expected, uploader).await
    }

    /// Which path uploads took since the store opened (staged or hashed only), and the bytes
    /// they staged.
    pub fn upload_counters(&self) -> UploadCounters {
        self.0.upload_counters.snapshot()
    }

    // ── resumable.rs: resumable upload sessions ─────────────────────────────

    /// Starts a resumable upload for the uploader's Agent in its Group (and, for a capability
    /// token, its lease), at offset 0. The operator is refused (`forbidden`).
    pub async fn start_upload(&self, uploader: Uploader<'_>) -> Result<UploadSession, Error> {
        self.0.start_upload(uploader).await
    }

    /// The durable offset of an upload session the uploader reaches: its Agent's, and for a
    /// capability token only its lease's (`not_found` for any other).
    pub async fn upload_offset(
        &self,
        id: &str,
        uploader: Uploader<'_>,
    ) -> Result<UploadSession, Error> {
        self.0.upload_offset(id, uploader).await
    }

    /// Appends a chunk starting at `start`, which must be the durable offset
    /// (`upload_offset_mismatch` otherwise); the chunk is durable when this returns.
    pub async fn append_upload(
        &self,
        id: &str,
        start: u64,
        body: impl Stream<Item = Result<Bytes, std::io::Error>> + Send,
        uploader: Uploader<'_>,
    ) -> Result<UploadSession, Error> {
        self.0.append_upload(id, start, body, uploader).await
    }

    /// Appends an optional last chunk, verifies the upload against `expected` and stores it
    /// as a blob, as [`Artifacts::upload`] would; on a mismatch the session is discarded.
    pub async fn finish_upload<S>(
        &self,
        upload_id: &str,
        expected: Digest,
        last_chunk: Option<(u64, S)>,
        uploader: Uploader<'_>,
    ) -> Result<UploadOutcome, Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        self.0
            .finish_upload(upload_id, expected, last_chunk, uploader)
            .await
    }

    /// Cancels an upload session, removing its bytes.
    pub async fn cancel_upload(
        &self,
        upload_id: &str,
        uploader: Uploader<'_>,
    ) -> Result<(), Error> {
        self.0.cancel_upload(upload_id, uploader).await
    }

    // ── sweep.rs: uncited uploads, spent nonces ─────────────────────────────

    /// Removes uploads nothing cites whose latest upload is older than the TTL (rows, then
    /// files), and session nonces too old to be replayed. The server runs it on an interval.
    pub async fn sweep(&self) -> Result<SweepReport, Error> {
        self.0.sweep().await
    }

    /// The digests of a blob if `reader` may know it exists (it uploaded it, or it is
    /// published in one of the reader's Groups).
    pub async fn blob(&self, digest: Digest, reader: &Reader) -> Result<Option<Digests>, Error> {
        self.0.visible_blob(digest, reader).await
    }

    // ── publish.rs, with_content.rs: publication ────────────────────────────

    /// Verifies and records a signed artifact manifest, appending `artifact.published`.
    pub async fn publish(
        &self,
        envelope: Envelope,
        caller: &Reader,
    ) -> Result<(Published, bool), Error> {
        self.0.publish(envelope, caller).await
    }

    /// [`Artifacts::publish`] under a capability token (`work/tokens.rs`): scope
    /// `artifact:publish`, and a manifest of the token's lease and WorkItem only (`forbidden`
    /// otherwise).
    pub async fn publish_with_token(
        &self,
        envelope: Envelope,
        grant: &Grant,
    ) -> Result<(Published, bool), Error> {
        self.0.publish_with_token(envelope, grant).await
    }

    /// Publishes a signed manifest with its bytes in one transaction: the bytes are hashed
    /// as they stream and must be the ones the manifest and `expected` name.
    pub async fn publish_with_content<S>(
        &self,
        envelope: Envelope,
        expected: Digest,
        body: S,
        session: &Session,
    ) -> Result<(Published, bool), Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        self.0
            .publish_with_content(envelope, expected, body, session)
            .await
    }

    /// [`Artifacts::publish_with_content`] under a capability token: scopes `blob:write`
    /// and `artifact:publish`, and a manifest of the token's lease and WorkItem only.
    pub async fn publish_with_content_and_token<S>(
        &self,
        envelope: Envelope,
        expected: Digest,
        body: S,
        grant: &Grant,
    ) -> Result<(Published, bool), Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        self.0
            .publish_with_content_and_token(envelope, expected, body, grant)
            .await
    }

    /// Publishes an Artifact as reusable knowledge in the session's Group (CTX-6, `reuse.rs`):
    /// an approver, citing its approval Evidence; `true` when new.
    pub async fn publish_reusable(
        &self,
        artifact: ArtifactId,
        request: ReuseRequest,
        session: &Session,
    ) -> Result<(ReuseRecord, bool), Error> {
        self.0.publish_reusable(artifact, request, session).await
    }

    // ── reads.rs: views, listings, verified content ─────────────────────────

    pub async fn artifact(&self, digest: Digest, reader: &Reader) -> Result<ArtifactView, Error> {
        self.0.artifact(digest, reader).await
    }

    pub async fn list_artifacts(
        &self,
        filter: ListFilter,
        reader: &Reader,
    ) -> Result<ArtifactPage, Error> {
        self.0.list_artifacts(filter, reader).await
    }

    /// Opens an artifact's bytes for reading, verified as they stream (ART-5). A caller that
    /// streams them to a client takes a download slot first ([`Content::admitted`]), after
    /// visibility was decided here, so a refusal says nothing of what the reader may not see.
    pub async fn open_content(&self, digest: Digest, reader: &Reader) -> Result<Content, Error> {
        self.0.open_content(digest, reader).await
    }

    /// What the small-artifact read cache (`hot.rs`) holds and how many reads it answered.
    pub fn hot_stats(&self) -> HotStats {
        self.0.hot.stats()
    }

    /// Blob bytes read from the object store since the store opened (whole-blob streams and
    /// the chunk groups of verified ranges): tests show with it what a read cost.
    pub fn blob_bytes_read(&self) -> u64 {
        self.0.blobs.bytes_read()
    }

    // ── verification.rs: re-hash records ────────────────────────────────────

    /// When `reader`'s artifact was last re-hashed and found intact, and by what.
    pub async fn verification(
        &self,
        digest: Digest,
        reader: &Reader,
    ) -> Result<Option<Verification>, Error> {
        self.0.verification(digest, reader).await
    }

    /// Re-hashes the stored bytes now through the read path (quarantined and `Corrupt` on a
    /// mismatch) and records it; answers the new record.
    pub async fn verify_now(&self, digest: Digest, reader: &Reader) -> Result<Verification, Error> {
        self.0.verify_now(digest, reader).await
    }
}
