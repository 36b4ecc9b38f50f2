//! The sweep of strays: blob objects (and outboards) no row names, left by a crash between a
//! promotion and its row, or by a compaction another server won. Start-up removes a local
//! directory's after a crash (`lifecycle.rs`), but no start lists a shared bucket, and a
//! server sharing its index cannot tell another's upload in flight from a leftover: so every
//! sweep round walks a page of the store ([`PAGE`] objects, `blobs/walk.rs`, before it takes
//! the sweep lock, so uploads do not wait on a listing) and disposes of those older than
//! [`STRAY_AGE`] that still have no row.
//!
//! Safe by construction, not by the age: the caller holds the sweep lock exclusively (no
//! upload of this process is between its promotion and its row), and on a shared index the
//! "no row" check and the batch naming the blobs are one transaction (`disposal.rs`), so an
//! upload on another server that found one of these objects present refuses to record its
//! row and is retried. The age only spares such uploads that refusal.
//!
//! Upload objects too: a resumable upload's bytes (`uploads/`, `blobs/resumable.rs`) whose
//! session row is gone (a crash between a cancel's, a finish's or the sweep's row deletion
//! and its object deletion). Start-up removes a local directory's; on a shared bucket each
//! round lists a page of `uploads/` and removes the objects an hour old whose session has no
//! row. Safe by construction: a session's row is written before any of its objects, and an
//! upload id is never used again, so an object whose row is gone is never needed again.

use std::collections::BTreeSet;

use object_store::path::Path;
use weft_api::ArtifactId;

use crate::artifacts::handle::Artifacts;
use crate::error::Error;

/// How long an object may have no row before it is a stray: far longer than an upload takes
/// from its promotion to its row, and than clocks disagree by.
pub(crate) const STRAY_AGE: chrono::Duration = chrono::Duration::hours(1);

/// Objects listed per round.
const PAGE: usize = 1000;

impl Artifacts<'_> {
    /// Walks the next page of the store: the blobs of its objects an hour old or more. Needs
    /// no lock: whether a row names them is decided under the sweep lock
    /// ([`Artifacts::sweep_strays`]).
    pub(super) async fn old_objects(&self) -> Result<Vec<ArtifactId>, Error> {
        let mut walk =
            std::mem::take(&mut *self.0.strays.lock().unwrap_or_else(|p| p.into_inner()));
        let listed = self.0.blobs.walk_page(&mut walk, PAGE).await;
        *self.0.strays.lock().unwrap_or_else(|p| p.into_inner()) = walk;
        let (listed, _) = listed?;
        let cutoff = self.0.clock.now() - STRAY_AGE;
        // A blob's object and its outboard are one stray.
        let old: BTreeSet<_> = listed
            .into_iter()
            .filter(|(_, written)| *written < cutoff)
            .map(|(id, _)| id)
            .collect();
        Ok(old.into_iter().collect())
    }

    /// Disposes of the blobs in `old` that no row names; answers how many went. The caller
    /// holds the sweep lock exclusively.
    pub(super) async fn sweep_strays(&self, old: Vec<ArtifactId>) -> Result<u64, Error> {
        let removed = self.dispose_rowless(old).await?;
        if removed > 0 {
            tracing::info!(removed, "removed blob objects no row names");
        }
        Ok(removed as u64)
    }

    /// Walks the next page of `uploads/`: the objects an hour old or more, with their
    /// session's id. Needs no lock.
    pub(super) async fn old_upload_objects(&self) -> Result<Vec<(String, Path)>, Error> {
        let after = self
            .0
            .upload_strays
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let (listed, next) = self.0.blobs.walk_uploads(after, PAGE).await?;
        *self
            .0
            .upload_strays
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = next;
        let cutoff = self.0.clock.now() - STRAY_AGE;
        Ok(listed
            .into_iter()
            .filter(|(_, _, written)| *written < cutoff)
            .map(|(id, key, _)| (id, key))
            .collect())
    }

    /// Removes the objects in `old` whose upload session has no row; answers how many went.
    pub(super) async fn sweep_upload_strays(&self, old: Vec<(String, Path)>) -> Result<u64, Error> {
        if old.is_empty() {
            return Ok(0);
        }
        let rowless = self
            .0
            .db
            .read(move |conn| {
                let mut rowless = Vec::new();
                let mut known: Option<(String, bool)> = None;
                for (id, key) in old {
                    // A session's chunks are listed together: its row is read once.
                    let has_row = match &known {
                        Some((of, has_row)) if *of == id => *has_row,
                        _ => {
                            let has_row = crate::rows::upload_sessions::exists(conn, &id)?;
                            known = Some((id, has_row));
                            has_row
                        }
                    };
                    if !has_row {
                        rowless.push(key);
                    }
                }
                Ok(rowless)
            })
            .await?;
        for key in &rowless {
            self.0.blobs.remove_upload_object(key).await?;
        }
        if !rowless.is_empty() {
            tracing::info!(
                removed = rowless.len(),
                "removed upload objects no session row names"
            );
        }
        Ok(rowless.len() as u64)
    }
}
