//! Saving the lineage index's snapshot (issue #15; what it holds and how it is read back at
//! open is `lineage_index/restart.rs`): the server does it at clean shutdown and periodically.

use std::sync::Arc;

use crate::engine::Engine;
use crate::error::Error;
use crate::lineage_index::{SnapshotSaved, load_publications_after};

impl Engine {
    /// Brings the lineage index up to every committed publication, then writes its snapshot
    /// (`None`: an in-memory database, nothing published yet, or nothing new since the
    /// snapshot on disk). The server calls this at clean shutdown and periodically.
    pub(crate) async fn save_lineage_snapshot(
        self: &Arc<Self>,
    ) -> Result<Option<SnapshotSaved>, Error> {
        let Some(path) = self.lineage_snapshot.clone() else {
            return Ok(None);
        };
        let through = self.lineage.covered_through();
        let (publications, last) = self
            .db
            .read(move |conn| load_publications_after(conn, through))
            .await?;
        self.lineage.catch_up(&publications, last);
        let caught_up = publications.len();
        drop(publications);
        let engine = Arc::clone(self);
        tokio::task::spawn_blocking(move || engine.lineage.write_snapshot(&path, caught_up))
            .await
            .map_err(Error::backend)?
    }
}
