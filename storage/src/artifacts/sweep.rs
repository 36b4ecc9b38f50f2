//! The sweep: uploads nothing cites (no manifest, Evidence, schema or snapshot) whose latest
//! upload is older than the TTL are removed, rows first, then files. A round examines a
//! window of blobs in digest order from where the last one stopped ([`SWEEP_WINDOW`]), so its
//! work does not grow with the store; session nonces too old
//! to be replayed are pruned in the same transaction. Then staged uploads a day old, which
//! only a crash leaves, and a page of objects no row names, blobs' and upload sessions'
//! (`strays.rs`).
//!
//! Crash story: rows and files cannot go in one transaction, so the rows go first (an index
//! row never points at a missing blob); a crash before the files are deleted leaves files with
//! no row, which start-up reconciliation and fsck treat as harmless leftovers. A running
//! upload holds the sweep lock shared from promotion to its row, and the sweep holds it
//! exclusively, so it never deletes a file an upload has just found present. On an index
//! several servers share, the batch is also recorded with its rows (`disposal.rs`), and at
//! most a thousand blobs go per round, locked with SKIP LOCKED so no writer waits on it.

use weft_api::ArtifactId;

use super::disposal::Begun;
use super::upload::uncited;
use crate::artifacts::handle::Artifacts;
use crate::clock::format_instant;
use crate::error::Error;
use crate::events::to32;
use crate::rows;

/// What one sweep removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Uncited blobs removed (rows and files).
    pub blobs_removed: u64,
    /// Their bytes.
    pub bytes_removed: u64,
    /// Session nonces pruned.
    pub nonces_removed: u64,
    /// Resumable upload sessions idle past the TTL, removed with their bytes.
    pub upload_sessions_removed: u64,
    /// Blob objects no row names, an hour old or more (`strays.rs`).
    pub strays_removed: u64,
    /// Staged uploads (and their multipart uploads) a day old or more.
    pub staging_removed: u64,
    /// Objects of resumable uploads whose session row is gone, an hour old or more
    /// (`strays.rs`).
    pub upload_strays_removed: u64,
}

/// Blobs one sweep round examines, in digest order from where the last round stopped: a
/// round's work in the writer (where uploads wait on the sweep's lock) is this many blobs'
/// checks, whatever the store holds; a store of a million blobs is walked in a hundred rounds
/// (100 minutes at the server's interval). Before stop 69 every round examined every blob.
pub(crate) const SWEEP_WINDOW: u64 = 10_000;

/// How old a staged upload is before the sweep takes it for a crash's: a body streams for no
/// longer than this.
const STAGED_AGE: chrono::Duration = chrono::Duration::days(1);

/// A session nonce can only be replayed while a request carrying it could still pass the
/// `issuedAt` check: at most the skew window after it was seen, plus the skew window again
/// (issued up to 5 minutes in the future), and a minute of margin so the edge never depends on
/// how the two comparisons round (issue #40). Older nonces are dead weight.
const NONCE_KEEP_SECONDS: i64 = 2 * weft_api::session::MAX_CLOCK_SKEW_SECONDS + 60;

/// A stale uncited blob: its digest and size.
type Stale = (Vec<u8>, u64);

/// Stale uncited blobs of the window of `window` blobs after `after`, and
/// where the next round goes on from. A full batch (a shared index's) stops at its last row.
/// A window that reaches the last blob goes on from the first, up to where it began or
/// another window, so a store smaller than a window is examined whole in every round
/// wherever its walk stands (a server starts it at a random digest).
fn stale_window(
    txn: &crate::unit::Tx<'_>,
    cutoff: &str,
    after: &[u8],
    window: u64,
) -> Result<(Vec<Stale>, Vec<u8>), Error> {
    let uncited = uncited("blobs.blake3");
    let full = |rows: &[Stale]| rows.len() >= rows::blobs::SHARED_STALE_BATCH;
    let through = rows::blobs::window_end(txn, after, window)?;
    let mut found = rows::blobs::stale_where(txn, cutoff, &uncited, after, through.as_deref())?;
    if full(&found) {
        let last = found
            .last()
            .map(|(last, _)| last.clone())
            .unwrap_or_default();
        return Ok((found, last));
    }
    let Some(through) = through else {
        if after.is_empty() {
            return Ok((found, Vec::new()));
        }
        let wrapped = rows::blobs::window_end(txn, &[], window)?;
        let bound = match wrapped {
            Some(end) if end.as_slice() < after => end,
            _ => after.to_vec(),
        };
        let more = rows::blobs::stale_where(txn, cutoff, &uncited, &[], Some(&bound))?;
        let next = match more.last() {
            Some((last, _)) if full(&more) => last.clone(),
            _ => bound,
        };
        found.extend(more);
        return Ok((found, next));
    };
    Ok((found, through))
}

impl Artifacts<'_> {
    /// Runs `f` on where the sweep of uncited blobs stands and its window.
    fn sweep_walk<T>(&self, f: impl FnOnce(&mut (Vec<u8>, u64)) -> T) -> T {
        f(&mut self.0.sweep_walk.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Removes uploads nothing cites whose latest upload is older than the TTL (rows, then
    /// files), and session nonces too old to be replayed. The server runs it on an interval.
    pub async fn sweep(&self) -> Result<SweepReport, Error> {
        // Listed before the lock: uploads never wait on a listing of the store.
        let old_objects = self.old_objects().await.unwrap_or_else(|error| {
            tracing::warn!(%error, "could not list the store for objects no row names");
            Vec::new()
        });
        let old_uploads = self.old_upload_objects().await.unwrap_or_else(|error| {
            tracing::warn!(%error, "could not list the store's upload objects");
            Vec::new()
        });
        let exclusive = self.0.sweep_lock.write().await;
        let now = self.0.clock.now();
        let blob_cutoff = format_instant(now - self.0.unpublished_blob_ttl);
        let upload_sessions_removed = self.sweep_upload_sessions(blob_cutoff.clone()).await?;
        let nonce_cutoff = format_instant(now - chrono::Duration::seconds(NONCE_KEEP_SECONDS));
        let (after, window) = self.sweep_walk(|walk| walk.clone());
        let swept = self
            .0
            .db
            .write(move |txn| {
                let begun = Begun::begin(txn, now)?;
                let mut removed = Vec::new();
                let mut next = None;
                if !matches!(begun, Begun::Busy) {
                    let (rows, stopped) = stale_window(txn, &blob_cutoff, &after, window)?;
                    next = Some(stopped);
                    removed.reserve(rows.len());
                    for (blake3, size) in rows {
                        rows::blob_uploaders::delete_of_blob(txn, &blake3)?;
                        rows::blob_verifications::delete_of_blob(txn, &blake3)?;
                        rows::inline_bytes::delete_of_blob(txn, &blake3)?;
                        rows::blobs::delete(txn, &blake3)?;
                        removed.push((ArtifactId(to32(blake3)?), size));
                    }
                    // Uploaders' usage shrank (`quota.rs`).
                    if !removed.is_empty() {
                        rows::usage_epoch::advance(txn)?;
                    }
                    let digests: Vec<[u8; 32]> = removed.iter().map(|(id, _)| id.0).collect();
                    begun.record(txn, now, &digests)?;
                }
                let nonces_removed =
                    crate::rows::session_nonces::forget_before(txn, &nonce_cutoff)?;
                Ok((begun, removed, nonces_removed, next))
            })
            .await;
        let (begun, removed, nonces_removed) = match swept {
            Ok((begun, removed, nonces_removed, next)) => {
                if let Some(next) = next {
                    self.sweep_walk(|walk| walk.0 = next);
                }
                (begun, removed, nonces_removed)
            }
            // Another server's writers held the disposal lock past its wait: next round.
            Err(error) if error.code() == weft_api::ErrorCode::StorageUnavailable => {
                tracing::debug!(%error, "the sweep waits for its next round");
                return Ok(SweepReport {
                    upload_sessions_removed,
                    ..SweepReport::default()
                });
            }
            Err(error) => return Err(error),
        };
        let mut report = SweepReport {
            nonces_removed,
            upload_sessions_removed,
            ..SweepReport::default()
        };
        let files: Vec<ArtifactId> = removed.iter().map(|(id, _)| *id).collect();
        let (deleted, failed) = self.delete_disposed(begun, &files).await?;
        if let Some(error) = failed {
            return Err(error);
        }
        for (_, size) in removed.iter().take(deleted.len()) {
            report.blobs_removed += 1;
            report.bytes_removed += size;
        }
        // A staged upload a day old was left by a crash (on a store servers share, no start
        // removes what another server may be writing).
        report.staging_removed = self
            .0
            .blobs
            .sweep_staging_before(Some(now - STAGED_AGE))
            .await
            .unwrap_or_else(|error| {
                tracing::warn!(%error, "could not sweep old staged uploads");
                0
            }) as u64;
        report.strays_removed = match self.sweep_strays(old_objects).await {
            Ok(n) => n,
            Err(error) if error.code() == weft_api::ErrorCode::StorageUnavailable => {
                tracing::debug!(%error, "the sweep of strays waits for its next round");
                0
            }
            Err(error) => return Err(error),
        };
        // Needs no lock (a session's objects are never needed once its row is gone): uploads
        // do not wait on these deletions.
        drop(exclusive);
        report.upload_strays_removed =
            self.sweep_upload_strays(old_uploads)
                .await
                .unwrap_or_else(|error| {
                    tracing::warn!(%error, "could not remove upload objects no session row names");
                    0
                });
        if report.blobs_removed > 0
            || report.upload_strays_removed > 0
            || report.nonces_removed > 0
            || upload_sessions_removed > 0
            || report.strays_removed > 0
            || report.staging_removed > 0
        {
            tracing::info!(?report, "swept uncited uploads and spent nonces");
        }
        Ok(report)
    }
}
