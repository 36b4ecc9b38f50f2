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

use std::collections::BTreeSet;

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
}
