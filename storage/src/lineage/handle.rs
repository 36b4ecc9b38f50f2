//! [`Lineage`], the handle to provenance queries (`store.lineage()`, DESIGN §6): ancestors and
//! descendants of an artifact or of everything a WorkItem or Mission published, a path
//! between two artifacts, and the index's snapshot and figures. Each method hands over to the
//! engine: queries in `query.rs`, the snapshot in `saving.rs`.

use std::sync::Arc;

use weft_api::{ArtifactId, Digest, Id};

use crate::access::Reader;
use crate::engine::Engine;
use crate::error::Error;
use crate::lineage_index::{LineageStart, Query, Scope, SnapshotSaved};

/// Provenance queries; borrowed from a [`Store`](crate::Store). What they answer is a
/// [`crate::Lineage`].
#[derive(Clone, Copy, Debug)]
pub struct Lineage<'s>(pub(crate) &'s Arc<Engine>);

impl Lineage<'_> {
    /// Ancestors and/or descendants of an artifact, bounded by depth, limit and a time budget,
    /// from the in-memory lineage index. `not_found` if the artifact is not visible.
    pub async fn lineage(
        &self,
        digest: Digest,
        query: Query,
        reader: &Reader,
    ) -> Result<crate::lineage_index::Lineage, Error> {
        self.0.lineage(digest, query, reader).await
    }

    /// Everything published inside a WorkItem or Mission and what it was derived from.
    pub async fn lineage_scope(
        &self,
        scope: Scope,
        name: Id,
        query: Query,
        reader: &Reader,
    ) -> Result<crate::lineage_index::Lineage, Error> {
        self.0.lineage_scope(scope, name, query, reader).await
    }

    /// One shortest derivation path between two artifacts, or `no_path`.
    pub async fn lineage_path(
        &self,
        from: Digest,
        to: Digest,
        max_depth: u32,
        reader: &Reader,
    ) -> Result<Vec<ArtifactId>, Error> {
        self.0.lineage_path(from, to, max_depth, reader).await
    }

    /// Brings the lineage index up to every committed publication and writes its snapshot
    /// beside the index database, so the next open reads it instead of rebuilding (issue #15;
    /// `None`: an in-memory database, or nothing published). Call at clean shutdown and
    /// periodically; a crash between two calls costs only a longer catch-up.
    pub async fn save_lineage_snapshot(&self) -> Result<Option<SnapshotSaved>, Error> {
        self.0.save_lineage_snapshot().await
    }

    /// How the lineage index was made ready when this store was opened.
    pub fn lineage_start(&self) -> LineageStart {
        self.0.lineage_start
    }

    /// Approximate memory the in-memory lineage index takes, in bytes.
    pub fn lineage_index_bytes(&self) -> usize {
        self.0.lineage.approximate_bytes()
    }
}
