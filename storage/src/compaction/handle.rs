//! [`Compaction`], the handle to online-log retention (`store.compaction()`, DLV-9, DLV-10):
//! compacting old Events into signed snapshots, and reading those snapshots and their blobs.
//! Each method hands over to the engine (`compaction.rs`).

use std::sync::Arc;

use weft_api::views::SignedSnapshot;
use weft_api::{ArtifactId, Digests, Id};

use super::Retention;
use crate::access::Reader;
use crate::content::Content;
use crate::engine::Engine;
use crate::error::Error;

/// Online-log retention and its snapshots; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Compaction<'s>(pub(crate) &'s Arc<Engine>);

impl Compaction<'_> {
    /// Compacts every Group's online log down to what `retain` keeps (always at least the
    /// newest Event), archiving older Events and signing a snapshot reference for each.
    pub async fn compact(&self, retain: Retention) -> Result<Vec<(String, u64)>, Error> {
        self.0.compact(retain).await
    }

    /// The signed snapshot references of a Group, oldest first.
    pub async fn snapshots(
        &self,
        group_id: Id,
        reader: &Reader,
    ) -> Result<Vec<SignedSnapshot>, Error> {
        self.0.snapshots(group_id, reader).await
    }

    /// Opens a snapshot's state document or Event archive of a Group, verified as it streams.
    pub async fn open_snapshot_blob(
        &self,
        group_id: Id,
        blob: ArtifactId,
        reader: &Reader,
    ) -> Result<Content, Error> {
        self.0.open_snapshot_blob(group_id, blob, reader).await
    }

    /// The digests of a snapshot blob `reader` may read, without opening it (a HEAD).
    pub async fn snapshot_blob_digests(
        &self,
        group_id: Id,
        blob: ArtifactId,
        reader: &Reader,
    ) -> Result<Digests, Error> {
        self.0.snapshot_blob_digests(group_id, blob, reader).await
    }
}
