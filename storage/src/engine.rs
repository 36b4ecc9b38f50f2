//! The engine's shared state: the database, the blob store, the clock, the authority key, the
//! lineage index and the membership projection. Nothing else lives here: every operation is
//! in the feature file that owns its tables (see `lib.rs` for the map).

use std::sync::Arc;

use crate::blobs::Blobs;
use crate::clock::Clock;
use crate::db::Db;

use crate::error::Error;
use crate::lineage::load_publications;
use crate::options::Options;

pub(crate) struct Engine {
    pub(crate) db: Db,
    pub(crate) blobs: Blobs,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) authority: Arc<ed25519_dalek::SigningKey>,
    /// The provenance graph in memory, in step with the `manifests`/`derivations` tables.
    pub(crate) lineage: crate::lineage::Index,
    /// Bumped after every commit that can end a session (`sessions.rs`), so open streams
    /// re-check theirs at once.
    pub(crate) auth_generation: tokio::sync::watch::Sender<u64>,
    pub(crate) max_upload_bytes: u64,
    pub(crate) session_ttl: chrono::Duration,
    pub(crate) lineage_inline_budget: Option<std::time::Duration>,
    /// Admission limits on uploads and logins (in memory).
    pub(crate) limits: crate::limits::Limits,
    /// How long an uncited upload is kept.
    pub(crate) unpublished_blob_ttl: chrono::Duration,
    /// Shared by uploads (promotion to row) and compaction, exclusive for the sweep.
    pub(crate) sweep_lock: tokio::sync::RwLock<()>,
    pub(crate) upload_counters: crate::artifacts::Counters,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("db", &self.db)
            .field("blobs", &self.blobs)
            .finish()
    }
}

impl Engine {
    pub(crate) async fn open(options: Options) -> Result<Self, Error> {
        if let crate::db::Location::File(path) = &options.index
            && let Some(parent) = path.parent()
        {
            std::fs::create_dir_all(parent).map_err(Error::backend)?;
        }
        let db = Db::open(&options.index)?;
        let blobs = Blobs::open(&options.blobs)?;
        let n_swept = if options.sweep_staging {
            blobs.sweep_staging()?
        } else {
            0
        };
        if n_swept > 0 {
            tracing::info!(n_swept, "removed stale staging files");
        }
        let lineage = crate::lineage::Index::default();
        lineage.add_all(&db.read(load_publications).await?);
        Ok(Self {
            db,
            blobs,
            lineage,
            clock: options.clock,
            authority: options.authority,
            auth_generation: tokio::sync::watch::Sender::new(0),
            max_upload_bytes: options.max_upload_bytes,
            session_ttl: options.session_ttl,
            lineage_inline_budget: options.lineage_inline_budget,
            limits: crate::limits::Limits::new(crate::limits::Settings {
                max_uploads_per_agent: options.quotas.max_uploads_per_agent,
                max_open_uploads: options.quotas.max_open_uploads,
                max_unpublished_bytes: options.quotas.max_unpublished_bytes,
                logins_per_minute: options.quotas.logins_per_minute,
            }),
            unpublished_blob_ttl: options.quotas.unpublished_blob_ttl,
            sweep_lock: tokio::sync::RwLock::new(()),
            upload_counters: crate::artifacts::Counters::default(),
        })
    }
}
