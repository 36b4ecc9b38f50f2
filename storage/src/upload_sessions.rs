//! The façade's resumable-upload group (`Store::start_upload` … `Store::cancel_upload`), kept
//! out of `lib.rs` for size only: one short method per operation, as there; the work is in
//! `artifacts/resumable.rs`.

use bytes::Bytes;
use futures::Stream;
use weft_api::Digest;
use weft_api::views::UploadSession;

use crate::{Error, Store, UploadOutcome, Uploader};

impl Store {
    /// Starts a resumable upload for the uploader's Agent in its Group (and, for a capability
    /// token, its lease), at offset 0. The operator is refused (`forbidden`).
    pub async fn start_upload(&self, uploader: Uploader<'_>) -> Result<UploadSession, Error> {
        self.inner.start_upload(uploader).await
    }

    /// The durable offset of an upload session the uploader reaches: its Agent's, and for a
    /// capability token only its lease's (`not_found` for any other).
    pub async fn upload_offset(
        &self,
        id: &str,
        uploader: Uploader<'_>,
    ) -> Result<UploadSession, Error> {
        self.inner.upload_offset(id, uploader).await
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
        self.inner.append_upload(id, start, body, uploader).await
    }

    /// Appends an optional last chunk, verifies the upload against `expected` and stores it
    /// as a blob, as [`Store::upload`] would; on a mismatch the session is discarded.
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
        self.inner
            .finish_upload(upload_id, expected, last_chunk, uploader)
            .await
    }

    /// Cancels an upload session, removing its bytes.
    pub async fn cancel_upload(
        &self,
        upload_id: &str,
        uploader: Uploader<'_>,
    ) -> Result<(), Error> {
        self.inner.cancel_upload(upload_id, uploader).await
    }
}
