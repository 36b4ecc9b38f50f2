//! [`Lineage`], the handle to provenance queries (`store.lineage()`, DESIGN §6): ancestors and
//! descendants of an artifact or of everything a WorkItem or Mission published, a path
//! between two artifacts, and the index's snapshot and figures. Its methods are in this
//! folder's files: queries in `query.rs`, the snapshot in `saving.rs`.

use std::sync::Arc;

use crate::engine::Engine;
use crate::lineage_index::LineageStart;

/// Provenance queries; borrowed from a [`Store`](crate::Store). What they answer is a
/// [`crate::Lineage`].
#[derive(Clone, Copy, Debug)]
pub struct Lineage<'s>(pub(crate) &'s Arc<Engine>);

impl Lineage<'_> {
    /// How the lineage index was made ready when this store was opened.
    pub fn lineage_start(&self) -> LineageStart {
        self.0.lineage_start
    }

    /// Approximate memory the in-memory lineage index takes, in bytes.
    pub fn lineage_index_bytes(&self) -> usize {
        self.0.lineage.approximate_bytes()
    }
}
