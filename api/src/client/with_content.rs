//! The client side of a publication with its bytes in one request
//! (`PUT /v1/artifacts/{digest}`, `multipart/form-data`: the part `manifest`, then the part
//! `content`), for bytes held in memory (`weft put` sends files up to 64 KiB this way).

use ed25519_dalek::SigningKey;
use reqwest::Method;

use super::{Client, Error, decode};
use crate::dsse::MANIFEST_TYPE;
use crate::views::Published;
use crate::{Envelope, Manifest};

impl Client {
    /// Signs `manifest` with `key` and publishes it with its bytes in one request
    /// (`PUT /v1/artifacts/{digest}`): the server stores the bytes and the manifest in one
    /// transaction, or neither. For bytes in memory (small artifacts); `manifest.content`
    /// must already name them.
    pub async fn publish_with_content(
        &self,
        key: &SigningKey,
        manifest: &Manifest,
        bytes: &[u8],
    ) -> Result<Published, Error> {
        let payload = serde_json::to_vec(manifest).map_err(|e| Error::Protocol(e.to_string()))?;
        let envelope = Envelope::sign(key, MANIFEST_TYPE, &payload);
        let envelope = serde_json::to_vec(&envelope).map_err(|e| Error::Protocol(e.to_string()))?;
        // A boundary that cannot occur in the parts: random, and checked.
        let boundary = loop {
            let candidate = format!("weft-{}", hex::encode(rand::random::<[u8; 16]>()));
            let inside = |haystack: &[u8]| {
                haystack
                    .windows(candidate.len())
                    .any(|window| window == candidate.as_bytes())
            };
            if !inside(&envelope) && !inside(bytes) {
                break candidate;
            }
        };
        let mut body = Vec::with_capacity(envelope.len() + bytes.len() + 512);
        for (name, media_type, part) in [
            ("manifest", "application/json", &envelope[..]),
            ("content", "application/octet-stream", bytes),
        ] {
            body.extend_from_slice(
                format!(
                    "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\nContent-Type: {media_type}\r\n\r\n"
                )
                .as_bytes(),
            );
            body.extend_from_slice(part);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        let response = self
            .request(
                Method::PUT,
                &format!("/v1/artifacts/{}", manifest.content.blake3),
            )
            .header(
                reqwest::header::CONTENT_TYPE,
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(body)
            .send()
            .await?;
        Ok(decode(response).await?.1)
    }
}
