//! The client side of resumable uploads (`POST /v1/uploads`, `HEAD`, `PATCH`, `PUT` and
//! `DELETE /v1/uploads/{id}`). Chunks are sent as given: the caller bounds their size, so
//! memory stays at one chunk whatever the file's size.

use bytes::Bytes;
use reqwest::{Method, StatusCode};

use super::{Client, Error, decode};
use crate::Digest;
use crate::views::{UploadReceipt, UploadSession};

impl Client {
    /// Starts a resumable upload in this session's Group.
    pub async fn start_upload(&self) -> Result<UploadSession, Error> {
        let response = self.request(Method::POST, "/v1/uploads").send().await?;
        Ok(decode(response).await?.1)
    }

    /// The durable offset of an upload session, or `None` when the server no longer knows it
    /// (finished, cancelled, swept, or another Agent's).
    pub async fn upload_offset(&self, upload_id: &str) -> Result<Option<u64>, Error> {
        let path = format!("/v1/uploads/{upload_id}");
        let response = self.request(Method::HEAD, &path).send().await?;
        match response.status() {
            StatusCode::NOT_FOUND => Ok(None),
            status if status.is_success() => response
                .headers()
                .get("upload-offset")
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.parse().ok())
                .map(Some)
                .ok_or_else(|| Error::Protocol("HEAD answered no Upload-Offset".into())),
            // A HEAD answer has no body to decode; the status is all there is.
            status => Err(Error::Protocol(format!("HEAD {path}: {status}"))),
        }
    }

    /// Appends `chunk` at `start` (which must be the durable offset); the new offset.
    pub async fn append_chunk(
        &self,
        upload_id: &str,
        start: u64,
        chunk: Bytes,
    ) -> Result<UploadSession, Error> {
        let mut request = self
            .request(Method::PATCH, &format!("/v1/uploads/{upload_id}"))
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream");
        request = match chunk.len() as u64 {
            0 => request.header("upload-offset", start),
            length => request.header(
                reqwest::header::CONTENT_RANGE,
                format!("{start}-{}", start + length - 1),
            ),
        };
        let response = request.body(chunk).send().await?;
        Ok(decode(response).await?.1)
    }

    /// Finishes an upload: the server verifies the whole of it against `digest` and stores
    /// it as a blob (on a mismatch the session is discarded).
    pub async fn finish_upload(
        &self,
        upload_id: &str,
        digest: &Digest,
    ) -> Result<UploadReceipt, Error> {
        let response = self
            .request(Method::PUT, &format!("/v1/uploads/{upload_id}"))
            .query(&[("digest", digest.to_string())])
            .header(reqwest::header::CONTENT_LENGTH, 0)
            .send()
            .await?;
        Ok(decode(response).await?.1)
    }

    /// Cancels an upload session.
    pub async fn cancel_upload(&self, upload_id: &str) -> Result<(), Error> {
        let response = self
            .request(Method::DELETE, &format!("/v1/uploads/{upload_id}"))
            .send()
            .await?;
        if response.status().is_success() {
            return Ok(());
        }
        Err(decode::<serde_json::Value>(response)
            .await
            .err()
            .unwrap_or_else(|| Error::Protocol("unexpected success".into())))
    }
}
