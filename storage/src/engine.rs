//! The engine's shared state: the database, the blob store, the clock, the authority key, the
//! lineage index, and what the features keep in memory (their types are this folder's files,
//! so the engine knows no feature). Nothing else lives here: every operation is in the feature
//! file that owns its tables (see `lib.rs` for the map), opening and closing in `lifecycle.rs`.

pub(crate) mod contact;
pub(crate) mod deadlines;
pub(crate) mod hot;
pub(crate) mod rebuilds;
pub(crate) mod repairs;
pub(crate) mod uploads;

use std::sync::Arc;

use weft_api::KeyId;

use crate::blobs::Blobs;
use crate::clock::Clock;
use crate::db::Db;

pub(crate) struct Engine {
    pub(crate) db: Db,
    pub(crate) blobs: Blobs,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) authority: Arc<ed25519_dalek::SigningKey>,
    /// The provenance graph in memory, in step with the `manifests`/`derivations` tables.
    pub(crate) lineage: crate::lineage_index::Index,
    /// How `lineage` was made ready at open (for the log and the restart benchmark).
    pub(crate) lineage_start: crate::lineage_index::LineageStart,
    /// Where `lineage`'s snapshot is written (`None`: an in-memory database).
    pub(crate) lineage_snapshot: Option<std::path::PathBuf>,
    /// Bumped after every commit that can end a session (`sessions.rs`), so open streams
    /// re-check theirs at once.
    pub(crate) auth_generation: tokio::sync::watch::Sender<u64>,
    /// Signing keys by keyid, valid while `auth_generation` is unchanged (`keys.rs`).
    pub(crate) keys: crate::keys::KeyCache,
    pub(crate) max_upload_bytes: u64,
    pub(crate) inline_blob_bytes: u64,
    /// Small blobs in memory for reads, and what the fast read must leave to the index.
    pub(crate) hot: Arc<hot::Hot>,
    pub(crate) session_ttl: chrono::Duration,
    pub(crate) lineage_inline_budget: Option<std::time::Duration>,
    /// Admission limits on uploads and logins (in memory).
    pub(crate) limits: crate::limits::Limits,
    /// How long an uncited upload is kept.
    pub(crate) unpublished_blob_ttl: chrono::Duration,
    /// How long Command and idempotent answers are kept (`lifespan/answers.rs`).
    pub(crate) answer_horizon: chrono::Duration,
    /// Collection's pause after each batch, as a multiple of its time (`artifacts/collection.rs`).
    pub(crate) collection_pause_ratio: u32,
    /// Shared by uploads (promotion to row), compaction and an outboard rebuild's placing,
    /// exclusive for the sweep.
    pub(crate) sweep_lock: tokio::sync::RwLock<()>,
    /// Where the sweep of objects no row names goes on from (`artifacts/strays.rs`).
    pub(crate) strays: std::sync::Mutex<crate::blobs::Walk>,
    /// Where `Lifespan::forget_spent_until`'s walks stand between calls.
    pub(crate) spent_walk: std::sync::Mutex<SpentWalk>,
    /// Where the sweep of uncited blobs goes on from (`artifacts/sweep.rs`): the last digest
    /// its previous round examined (a random one at start, empty after a walk reached the
    /// last blob); and how many blobs a round examines.
    pub(crate) sweep_walk: std::sync::Mutex<(Vec<u8>, u64)>,
    /// Where the sweep of upload objects no session row names goes on from (`strays.rs`).
    pub(crate) upload_strays: std::sync::Mutex<Option<object_store::path::Path>>,
    pub(crate) upload_counters: uploads::Counters,
    /// Resumable upload sessions a request is working on (`artifacts/resumable.rs`).
    pub(crate) upload_claims: uploads::Claims,
    /// Outboard rebuilds under way (`content/rebuild.rs`): one per blob, shared.
    pub(crate) rebuilds: rebuilds::Rebuilds,
    /// Blobs repaired since a read began (`engine/repairs.rs`): a stale read's quarantine
    /// of a repaired blob is skipped.
    pub(crate) repairs: Arc<repairs::Repairs>,
    /// Lease and ownership deadlines by instant (`work/expiry.rs`), loaded at open and noted
    /// by every Command, so the expiry timer never scans every lease.
    pub(crate) deadlines: Arc<deadlines::Deadlines>,
    /// Test hooks (`Options::faults`): off in every server.
    pub(crate) faults: crate::faults::Faults,
    /// The reactions after commit (`reactions.rs`): their task's progress and stop signal.
    pub(crate) reactions: crate::reactions::Reactions,
    /// What a new session does, in its own transaction, to the leases of the session it
    /// replaces (LSE-9): `work::expiry::revoke_for_new_session`, set where the Engine is put
    /// together (`lifecycle.rs`), so that sessions and work do not import each other.
    pub(crate) on_session_replaced: OnSessionReplaced,
    /// When a shared index last answered (`contact.rs`).
    pub(crate) contact: contact::Contact,
}

/// See [`Engine::on_session_replaced`]: in the session's transaction, for Group, Agent and the
/// new session epoch at an instant, the WorkItems touched and each one's next deadline.
pub(crate) type OnSessionReplaced =
    fn(
        &crate::unit::Tx<'_>,
        &str,
        &str,
        u64,
        chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<(String, Option<deadlines::Deadline>)>, crate::error::Error>;

impl Engine {
    /// The server's signing key as `(keyid, public key)`.
    pub(crate) fn authority_key(&self) -> (KeyId, ed25519_dalek::VerifyingKey) {
        let public = self.authority.verifying_key();
        (KeyId::of(&public), public)
    }

    /// Called after the commit of anything that can end a session (agents and sessions), so
    /// cached sessions and open streams check theirs again (`auth_generation`).
    pub(crate) fn auth_changed(&self) {
        self.auth_generation
            .send_modify(|generation| *generation += 1);
    }

    /// See `reactions::settled`.
    pub(crate) async fn reactions_settled(&self) {
        crate::reactions::settled(&self.db, &self.faults, &self.reactions).await;
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("db", &self.db)
            .field("blobs", &self.blobs)
            .finish()
    }
}

/// Where each walk of `Lifespan::forget_spent_until` stands between calls (in this
/// process): a call that meets its deadline leaves its place here, so the next call goes on
/// from it instead of walking the same first leases again; a walk that reaches the end starts
/// over at the next call.
#[derive(Debug, Default)]
pub(crate) struct SpentWalk {
    pub(crate) leases: String,
    pub(crate) offers: String,
    pub(crate) tokens: Vec<u8>,
}
