//! Uploads: a byte stream is hashed (BLAKE3 + SHA-256) while it is staged, promoted to its
//! digest path only when the digests check out, and only then recorded as a blob row.

use bytes::Bytes;
use futures::Stream;
use rusqlite::params;
use weft_api::{Digest, Digests, ErrorCode};

use super::blob_row;
use crate::access::{Reader, can_see_blob};
use crate::blobs::Staged;
use crate::clock::format_instant;
use crate::engine::Engine;
use crate::error::{Error, reject};

/// What an upload did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UploadOutcome {
    pub digests: Digests,
    /// `true` when the uploader could already see these bytes before this upload. Only then
    /// does the server say "already present": anything else would tell one Group what
    /// another holds.
    pub already_visible: bool,
}

impl Engine {
    pub(crate) async fn upload<S>(
        &self,
        body: S,
        expected: Option<Digest>,
        uploader: &Reader,
    ) -> Result<UploadOutcome, Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        // When the claimed bytes are already stored (and healthy), hash without writing.
        let known = match expected {
            Some(digest) => self.db.read(move |conn| blob_row(conn, &digest)).await?,
            None => None,
        };
        let (digests, staged) = match known {
            Some((_, false)) => (
                self.blobs.hash_only(body, self.max_upload_bytes).await?,
                None,
            ),
            _ => {
                let staged = self.blobs.stage(body, self.max_upload_bytes).await?;
                (staged.digests, Some(staged))
            }
        };
        if let Some(expected) = expected {
            let matches = match expected {
                Digest::Blake3(id) => id == digests.blake3,
                Digest::Sha256(sha) => sha == digests.sha256,
            };
            if !matches {
                // `staged` is dropped here, which deletes the staged bytes.
                return Err(reject(
                    ErrorCode::DigestMismatch,
                    format!(
                        "the body hashes to {} / {}, not {expected}",
                        digests.blake3, digests.sha256
                    ),
                ));
            }
        }
        self.record_blob(digests, staged, uploader).await
    }

    async fn record_blob(
        &self,
        digests: Digests,
        staged: Option<Staged>,
        uploader: &Reader,
    ) -> Result<UploadOutcome, Error> {
        let reader = uploader.clone();
        let before = self
            .db
            .read(move |conn| {
                let row = blob_row(conn, &Digest::Blake3(digests.blake3))?;
                let visible = can_see_blob(conn, &reader, &digests.blake3)?;
                Ok((row, visible))
            })
            .await?;
        let (row, already_visible) = before;
        let quarantined = matches!(row, Some((_, true)));
        if let Some(staged) = staged {
            // Blob first, index second. A quarantined blob is replaced by the good bytes.
            self.blobs.promote(staged, quarantined).await?;
        }
        let now = self.clock.now();
        let uploader = uploader.clone();
        self.db
            .write(move |txn| {
                txn.execute(
                    "INSERT INTO blobs (blake3, sha256, size, stored_at) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (blake3) DO NOTHING",
                    params![
                        &digests.blake3.0[..],
                        &digests.sha256.0[..],
                        digests.size,
                        format_instant(now)
                    ],
                )?;
                if quarantined {
                    let repaired = txn.execute(
                        "UPDATE blobs SET quarantined_at = NULL WHERE blake3 = ?1 AND quarantined_at IS NOT NULL",
                        [&digests.blake3.0[..]],
                    )?;
                    // Every Group that heard of the quarantine hears of the repair
                    // (issue #10 finding 9c).
                    if repaired > 0 {
                        append_repaired(txn, digests.blake3, now)?;
                    }
                }
                if let Reader::Agent(agent_id) = &uploader {
                    txn.execute(
                        "INSERT OR IGNORE INTO blob_uploaders (blake3, agent_id) VALUES (?1, ?2)",
                        params![&digests.blake3.0[..], agent_id.as_str()],
                    )?;
                }
                Ok(())
            })
            .await?;
        Ok(UploadOutcome {
            digests,
            already_visible,
        })
    }

    pub(crate) async fn visible_blob(
        &self,
        digest: Digest,
        reader: &Reader,
    ) -> Result<Option<Digests>, Error> {
        let reader = reader.clone();
        self.db
            .read(move |conn| {
                let Some((digests, _)) = blob_row(conn, &digest)? else {
                    return Ok(None);
                };
                Ok(can_see_blob(conn, &reader, &digests.blake3)?.then_some(digests))
            })
            .await
    }
}

/// Appends `artifact.repaired` to every Group that published `blake3` (the Groups that got
/// its `artifact.integrity_failure`).
fn append_repaired(
    txn: &crate::db::Tx<'_>,
    blake3: weft_api::ArtifactId,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), Error> {
    let groups = txn
        .prepare("SELECT DISTINCT group_id FROM manifests WHERE blake3 = ?1 ORDER BY group_id")?
        .query_map([&blake3.0[..]], |row| row.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    for group in groups {
        let group = weft_api::Id::parse("groupId", &group)?;
        let repaired = weft_api::kinds::ArtifactRepaired { artifact: blake3 };
        crate::events::append(
            txn,
            &group,
            &weft_api::kinds::EventPayload::ArtifactRepaired(repaired),
            now,
        )?;
    }
    Ok(())
}
