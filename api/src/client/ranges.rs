//! The client side of verified ranges: fetch a range's proof and verify it against the
//! digest here (`crate::bao`), so a client trusts no byte the server did not prove.

use reqwest::Method;

use super::{Client, Error, decode};

impl Client {
    /// Fetches the proof of `range` of the artifact `digest` (a `blake3:` digest: the proof's
    /// root) and verifies it here: returns exactly the bytes of `range`, or
    /// [`Error::Integrity`] if the proof does not verify against the digest. The proof is
    /// held in memory (a little more than the range): ask for ranges you can hold.
    pub async fn verified_range(
        &self,
        digest: &crate::ArtifactId,
        range: std::ops::Range<u64>,
    ) -> Result<Vec<u8>, Error> {
        if range.is_empty() {
            return Err(Error::Protocol("an empty range has no proof".into()));
        }
        let response = self
            .request(Method::GET, &format!("/v1/artifacts/{digest}/content"))
            .header(reqwest::header::ACCEPT, crate::bao::MEDIA_TYPE)
            .header(
                reqwest::header::RANGE,
                format!("bytes={}-{}", range.start, range.end - 1),
            )
            .send()
            .await?;
        if !response.status().is_success() {
            return Err(decode::<serde_json::Value>(response)
                .await
                .err()
                .unwrap_or_else(|| Error::Protocol("unexpected success".into())));
        }
        // `bytes a-b/size`: the size fixes the tree's shape (`Content-Range` from a server
        // older than issue #40).
        let size = response
            .headers()
            .get(crate::bao::PROOF_RANGE_HEADER)
            .or_else(|| response.headers().get(reqwest::header::CONTENT_RANGE))
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.rsplit_once('/'))
            .and_then(|(_, size)| size.parse::<u64>().ok())
            .ok_or_else(|| Error::Protocol("a proof without Weft-Proof-Range".into()))?;
        let encoded = response.bytes().await?;
        crate::bao::verify_range(digest, size, range, &encoded).map_err(|error| Error::Integrity {
            expected: digest.to_string(),
            actual: error.to_string(),
        })
    }
}
