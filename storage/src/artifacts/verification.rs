//! When an artifact's stored bytes were last re-hashed and found intact, and by what (schema
//! V15, `blob_verifications`): an explicit `verify_now` from the auditor console, or fsck.
//! Ordinary reads re-hash every byte too but record nothing (a write per GET would put a
//! commit on the read path); the verified read records it (`stored.rs`). A mismatch never
//! lands here: the read path quarantines the blob instead (ART-5).
//!
//! Also the producer-key lookup the console's signature check needs: keys are looked up by
//! keyid among every key an Agent ever had, so what a retired key signed stays checkable.

use futures::StreamExt as _;
use weft_api::{Digest, ErrorCode};

use crate::access::Reader;
use crate::artifacts::handle::Artifacts;
use crate::error::{Error, reject};

/// The newest intact re-hash of a blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verification {
    /// RFC 3339 UTC.
    pub verified_at: String,
    /// `verify-now by <agent>`, or `fsck`.
    pub verified_by: String,
}

impl Artifacts<'_> {
    /// The newest intact re-hash of an artifact `reader` may read (`None`: never yet).
    pub async fn verification(
        &self,
        digest: Digest,
        reader: &Reader,
    ) -> Result<Option<Verification>, Error> {
        let reader = reader.clone();
        self.0
            .db
            .read(move |conn| {
                let not_found = || {
                    reject(
                        ErrorCode::NotFound,
                        format!("no artifact {digest} is visible to you"),
                    )
                };
                // Visibility decided in the first lookup (`rows/manifests.rs`, issue #40).
                let visible =
                    crate::rows::manifests::visible_manifests(conn, reader.seer(), &digest, false)?;
                let Some(digests) = visible.first().map(|visible| visible.digests) else {
                    return Err(not_found());
                };
                Ok(
                    crate::rows::blob_verifications::newest(conn, &digests.blake3)?.map(|row| {
                        Verification {
                            verified_at: row.verified_at,
                            verified_by: row.verified_by,
                        }
                    }),
                )
            })
            .await
    }

    /// Re-hashes an artifact's stored bytes now, through the read path (quarantine on
    /// mismatch, `Error::Corrupt` then), and records who asked.
    pub async fn verify_now(&self, digest: Digest, reader: &Reader) -> Result<Verification, Error> {
        let by = match reader.agent() {
            Some(agent) => format!("verify-now by {agent}"),
            None => "verify-now by the operator".to_owned(),
        };
        let content = self.0.open_stored_content(digest, reader, None).await?;
        // A whole re-hash holds a file and its windows while it runs: it takes a download
        // slot of the reader like a GET (the request's own end drops it with the body).
        let content = content.admitted(reader)?;
        let blake3 = content.digests.blake3;
        let mut body = content.verified_by(by.clone()).into_body(None);
        while let Some(chunk) = body.next().await {
            chunk?;
        }
        drop(body);
        self.verification(Digest::Blake3(blake3), reader)
            .await?
            .ok_or_else(|| reject(ErrorCode::Internal, "the verification was not recorded"))
    }
}
