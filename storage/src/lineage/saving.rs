//! Saving the lineage index's snapshot (issue #15; what it holds and how it is read back at
//! open is `lineage_index/restart.rs`): the server does it at clean shutdown and periodically.

use std::sync::Arc;

use crate::error::Error;
use crate::lineage::handle::Lineage as Handle;
use crate::lineage_index::{SnapshotSaved, load_publications_after};

impl Handle<'_> {
    /// Brings the lineage index up to every committed publication and writes its snapshot
    /// beside the index database, so the next open reads it instead of rebuilding (issue #15;
    /// `None`: an in-memory database, or nothing published). Call at clean shutdown and
    /// periodically; a crash between two calls costs only a longer catch-up.
    pub async fn save_lineage_snapshot(&self) -> Result<Option<SnapshotSaved>, Error> {
        let Some(path) = self.0.lineage_snapshot.clone() else {
            return Ok(None);
        };
        let through = self.0.lineage.covered_through();
        let (publications, last) = self
            .0
            .db
            .read(move |conn| load_publications_after(conn, through))
            .await?;
        self.0.lineage.catch_up(&publications, last);
        let caught_up = publications.len();
        drop(publications);
        let engine = Arc::clone(self.0);
        tokio::task::spawn_blocking(move || engine.lineage.write_snapshot(&path, caught_up))
            .await
            .map_err(Error::backend)?
    }
}
