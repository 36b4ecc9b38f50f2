//! The weft engine: blobs on `object_store`, the index and the per-Group event log on SQLite,
//! and the enforcement of the protocol rules in one transaction per accepted change.
//!
//! Used through one façade, [`Store`], which hands out one handle per feature
//! (`store.work()`, `store.artifacts()`, …; see [`handles`]), each defined in its feature's
//! folder. It never sees HTTP: callers hand it byte streams, envelopes and ids, and get back
//! values or an [`Error`] with a stable code.
//!
//! **Invariant:** a blob exists before its index row (stage → hash → promote → record).
//! **Invariant:** every accepted change commits its rows and its Event in one transaction;
//! a rejected change commits nothing.
//! **Invariant:** no Event is rewritten, and none leaves the online log except into an archive
//! artifact behind a signed snapshot (compaction); an ACK never removes one (DLV-7).

mod access;
mod acting;
mod artifacts;
#[cfg(feature = "bench-support")]
pub mod bench_support;
mod blobs;
mod claim;
mod clock;
mod compaction;
mod compose;
mod content;
mod context;
mod db;
mod delivery;
mod directory;
mod downloads;
mod engine;
mod error;
mod events;
mod evidence;
mod faults;
mod fingerprint;
mod fsck;
mod fsck_log;
mod hashing;
mod idempotency;
mod keys;
mod lifecycle;
mod lifespan;
mod limits;
mod lineage;
mod lineage_index;
mod migrate;
mod options;
mod outboard;
mod policy;
mod rates;
mod reactions;
mod rows;
mod schema;
mod sessions;
mod signatures;
mod sql;
mod standing;
mod tlog;
mod unit;
mod weighing;
mod work;

use std::sync::Arc;

use bytes::Bytes;
use futures::Stream;

pub use access::{Grant, MissionScope, Reader, Session};
pub use artifacts::{ListFilter, SweepReport, UploadOutcome, Uploader, Verification};
pub use blobs::{Backend, S3Location};
pub use claim::{Claimed, IdempotentRequest, StoredAnswer, answer_with, with_idempotency};
pub use clock::{Clock, ManualClock, SystemClock};
pub use compaction::Retention;
pub use content::Content;
pub use db::Location;
pub use delivery::tlog::{TlogCheckpoint, TlogTile};
pub use engine::hot::HotStats;
pub use engine::uploads::UploadCounters;
pub use error::{BackendError, Error};
pub use evidence::EvidenceFilter;
pub use faults::{FaultKind, FaultSite, Faults, Hold, ReconcileStep};
pub use fingerprint::Fingerprint;
pub use fsck::{FsckReport, Stats};
pub use lifespan::{APPROVER_HOLDS, GROUP_HOLDS, HoldBy};
pub use lineage_index::{
    ArtifactNode, ContextNode, Direction, Edge, Lineage, LineageStart, ManifestSummary, Name,
    NodeRef, Query as LineageQuery, Scope, SnapshotSaved,
};
pub use migrate::MigrationReport;
pub use options::{Options, Quotas, defaults};
pub use sql::Work as SqlWork;
pub use weft_api::GroupState;
pub use work::answer::Accepted;

use weft_api::{Digests, Envelope, KeyId};

/// The handles [`Store`] hands out, one per feature (`store.work()`, `store.artifacts()`, …),
/// as iroh-blobs does: each borrows the engine, is defined in its feature's folder
/// (`<feature>/handle.rs`) and offers that feature's operations.
pub mod handles {
    pub use crate::artifacts::handle::Artifacts;
    pub use crate::compaction::handle::Compaction;
    pub use crate::context::handle::Context;
    pub use crate::delivery::handle::Delivery;
    pub use crate::directory::handle::Directory;
    pub use crate::evidence::handle::Evidence;
    pub use crate::lifespan::handle::Lifespan;
    pub use crate::lineage::handle::Lineage;
    pub use crate::sessions::handle::Sessions;
    pub use crate::work::handle::Work;
}

/// On a shared index (PostgreSQL), another server's commit can end a session or retire a key
/// that this one caches: after each such Event (and after a gap, when any may have been
/// missed) the auth generation moves, so cached sessions and open streams check theirs
/// again, as after a commit of this process's own.
fn follow_other_servers(engine: &Arc<engine::Engine>) {
    if !engine.db.is_shared() {
        return;
    }
    let mut foreign = engine.db.subscribe_foreign();
    let weak = Arc::downgrade(engine);
    tokio::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        // What other servers committed between this server's loading of its projections and
        // this subscription was heard by no one here (the follower's first resync usually
        // goes out before it): caught up once, now that everything later is heard.
        if let Some(engine) = weak.upgrade() {
            engine.auth_changed();
            engine.hot.forget_all();
            follow_publications(&engine).await;
        }
        loop {
            let received = foreign.recv().await;
            let Some(engine) = weak.upgrade() else {
                return;
            };
            match received {
                Ok(db::Foreign::Event(event)) => {
                    if ["session.", "membership.", "agent."]
                        .iter()
                        .any(|prefix| event.kind.starts_with(prefix))
                    {
                        engine.auth_changed();
                    }
                    if event.kind == "artifact.published"
                        && let Ok(published) = serde_json::from_str::<
                            weft_api::kinds::ArtifactPublished,
                        >(event.payload.get())
                    {
                        follow_publication(&engine, published.manifest_id).await;
                    }
                    follow_unreadable(&engine, &event.kind, event.payload.get());
                }
                Ok(db::Foreign::Resync) | Err(RecvError::Lagged(_)) => {
                    engine.auth_changed();
                    // Any disposal, quarantine or forward may have been missed.
                    engine.hot.forget_all();
                    follow_publications(&engine).await;
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
}

/// Another server disposed of bytes, quarantined them or forwarded them with a Context
/// Package: this server's memory of small artifacts (`engine/hot.rs`) must not answer them
/// any more (it served disposed bytes until they aged out), and a forwarded one takes the
/// ordinary read, which sees the other Group's manifests. A payload that does not parse
/// forgets everything.
fn follow_unreadable(engine: &engine::Engine, kind: &str, payload: &str) {
    use weft_api::kinds::{ContextForwarded, IntegrityFailure};
    use weft_api::lifecycle::ArtifactDisposed;
    let parsed = match kind {
        "artifact.disposed" => serde_json::from_str::<ArtifactDisposed>(payload).map(|disposed| {
            disposed
                .artifacts
                .iter()
                .for_each(|a| engine.hot.forget(&a.artifact))
        }),
        "artifact.integrity_failure" => serde_json::from_str::<IntegrityFailure>(payload)
            .map(|failed| engine.hot.forget(&failed.artifact)),
        "context.forwarded" => serde_json::from_str::<ContextForwarded>(payload).map(|forwarded| {
            for artifact in forwarded.artifacts {
                engine.hot.note_forwarded(artifact);
                engine.hot.forget(&artifact);
            }
        }),
        _ => Ok(()),
    };
    if parsed.is_err() {
        engine.hot.forget_all();
    }
}

/// On a shared index, reads `SELECT 1` every second, one probe at a time, and notes each
/// answer while the follower hears from the index too (`engine/contact.rs`); ends with the
/// engine.
fn probe_the_index(engine: &Arc<engine::Engine>) {
    if !engine.db.is_shared() {
        return;
    }
    engine.contact.answered(); // it answered while the store opened
    let weak = Arc::downgrade(engine);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(engine::contact::PROBE);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            let Some(engine) = weak.upgrade() else {
                return;
            };
            if !engine.contact.begin_probe() {
                continue;
            }
            tokio::spawn(async move {
                let answered = engine
                    .db
                    .read(|conn| Ok(sql::Cached::value::<i64, _>(conn, "SELECT 1", [])?))
                    .await;
                // The follower too: while it has not heard from the index, another server's
                // end of a session may be unknown here, so the index is not taken as current.
                let following = engine
                    .db
                    .follower_silent_for()
                    .is_none_or(|silent| silent <= engine::contact::STALE_AFTER);
                if answered.is_ok() && following {
                    engine.contact.answered();
                }
                engine.contact.end_probe();
            });
        }
    });
}

/// Adds another server's publication to this one's lineage index, read from the tables (the
/// Event arrives after its commit).
async fn follow_publication(engine: &engine::Engine, manifest_id: weft_api::ArtifactId) {
    let read = engine
        .db
        .read(move |conn| lineage_index::load_publication(conn, &manifest_id))
        .await;
    match read {
        Ok(Some(publication)) => engine.lineage.add(&publication),
        Ok(None) => {}
        Err(error) => {
            tracing::warn!(%error, "could not follow another server's publication");
            follow_publications(engine).await;
        }
    }
}

/// After a gap in what this server heard (a (re)connection of its follower, a lagging
/// receiver): when the tables hold more manifests than the lineage index, every publication is
/// read again and the missing ones added (rowids are not in commit order across servers, so no
/// cursor can say which are missing).
async fn follow_publications(engine: &engine::Engine) {
    let held = engine.lineage.manifests();
    let read = engine
        .db
        .read(move |conn| {
            if rows::manifests::count(conn)? <= held {
                return Ok(None);
            }
            lineage_index::load_publications_after(conn, 0).map(Some)
        })
        .await;
    match read {
        Ok(Some((publications, last))) => engine.lineage.catch_up(&publications, last),
        Ok(None) => {}
        Err(error) => tracing::warn!(%error, "could not catch the lineage index up"),
    }
}

/// The engine. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<engine::Engine>,
    /// Sessions resolved at an auth generation: a token seen again answers without a read.
    sessions: Arc<sessions::SessionCache>,
}

impl Store {
    // ── lifecycle.rs: opening and closing the store ─────────────────────────

    /// Opens (creating if needed) the index and the blob backend, and sweeps stale staging.
    pub async fn open(options: Options) -> Result<Self, Error> {
        let build_trees = options.build_trees;
        let inner = Arc::new(engine::Engine::open(options).await?);
        if build_trees {
            lifecycle::trees::catch_up(&inner).await;
        }
        reactions::start(&inner);
        follow_other_servers(&inner);
        probe_the_index(&inner);
        Ok(Self {
            inner,
            sessions: Arc::default(),
        })
    }

    /// Marks a clean shutdown, so the next open skips the scan for orphan blob files: call
    /// last, once every request has finished. From then on this process promotes no blob.
    pub async fn mark_clean_shutdown(&self) -> Result<(), Error> {
        self.inner.mark_clean_shutdown().await
    }

    /// Copies a stopped single node's SQLite index (`from`) to a new file (`to`) without
    /// writing the source (`weft migrate` opens the copy).
    pub fn copy_sqlite_index(from: &std::path::Path, to: &std::path::Path) -> Result<(), Error> {
        db::Db::copy_sqlite(from, to)
    }

    /// How long a shared index has not answered, when that is longer than this process may
    /// serve from what it keeps in memory (`None`: the index is current, or not shared).
    pub fn index_cut_off_for(&self) -> Option<std::time::Duration> {
        let contact = &self.inner.contact;
        if contact.current() {
            return None;
        }
        contact.silent_for()
    }

    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.inner.clock.now()
    }

    // ── the handles: one per feature, each in `<feature>/handle.rs` ─────────

    /// Missions, WorkItems, their Commands and capability tokens (`work/`).
    pub fn work(&self) -> handles::Work<'_> {
        handles::Work(&self.inner)
    }

    /// Uploads, publication, reads and verified content of artifacts (`artifacts/`).
    pub fn artifacts(&self) -> handles::Artifacts<'_> {
        handles::Artifacts(&self.inner)
    }

    /// Evidence and the built-in reviewer (`evidence/`).
    pub fn evidence(&self) -> handles::Evidence<'_> {
        handles::Evidence(&self.inner)
    }

    /// Provenance queries over the in-memory lineage index (`lineage/`).
    pub fn lineage(&self) -> handles::Lineage<'_> {
        handles::Lineage(&self.inner)
    }

    /// Context Packages (`context/`).
    pub fn context(&self) -> handles::Context<'_> {
        handles::Context(&self.inner)
    }

    /// Sessions and their liveness (`sessions.rs`).
    pub fn sessions(&self) -> handles::Sessions<'_> {
        handles::Sessions {
            engine: &self.inner,
            cache: &self.sessions,
        }
    }

    /// Groups, Agents and their keys, Memberships, the Group policy (`directory/`).
    pub fn directory(&self) -> handles::Directory<'_> {
        handles::Directory(&self.inner)
    }

    /// A Group's log for its readers: replay, follow, ACKs, checkpoints (`delivery.rs`).
    pub fn delivery(&self) -> handles::Delivery<'_> {
        handles::Delivery(&self.inner)
    }

    /// Retention policies, legal holds, usage and quotas (`lifespan/`, issue #46).
    pub fn lifespan(&self) -> handles::Lifespan<'_> {
        handles::Lifespan(&self.inner)
    }

    /// Online-log retention and its signed snapshots (`compaction.rs`).
    pub fn compaction(&self) -> handles::Compaction<'_> {
        handles::Compaction(&self.inner)
    }

    // ── shared by every feature ─────────────────────────────────────────────
    // `stats`, `fingerprint` and `fsck` are in fsck.rs.

    /// Starts counting the SQL work of the writer's jobs (tests: statements per Command).
    pub fn start_metering_writes(&self) {
        self.inner.db.meter().start();
    }

    /// The writer's SQL work since [`Store::start_metering_writes`], and stops counting.
    pub fn stop_metering_writes(&self) -> SqlWork {
        self.inner.db.meter().stop()
    }

    /// Returns once every reaction owed by a commit answered before the call has run (the
    /// review after a submission, EVD-3; `reactions.rs`): a pass over the owed reactions that
    /// began after the call has finished. For tests; at once while `Faults::hold_reactions`
    /// holds them.
    pub async fn reactions_settled(&self) {
        self.inner.reactions_settled().await;
    }

    /// How many reactions (reviews after a submission) this process began to run: on an
    /// index several servers share, each owed reaction is claimed by one of them.
    pub fn reactions_ran(&self) -> u64 {
        self.inner.reactions.ran()
    }

    /// Signs `payload` as `payload_type` with the server's authority key (for exports such as
    /// in-toto attestations; the key never leaves the engine; `access.rs`).
    pub fn sign_as_authority(&self, payload_type: &str, payload: &[u8]) -> Envelope {
        Envelope::sign(&self.inner.authority, payload_type, payload)
    }

    /// The server's own public signing keys.
    pub fn authority_keys(&self) -> Vec<(KeyId, ed25519_dalek_key::VerifyingKey)> {
        vec![self.inner.authority_key()]
    }

    /// The stored answer of an idempotent request, by caller scope and key (`idempotency.rs`).
    pub async fn idempotent_answer(
        &self,
        scope: String,
        key: String,
    ) -> Result<Option<StoredAnswer>, Error> {
        self.inner.idempotent_answer(scope, key).await
    }

    /// Stores the answer of an idempotent request (the first one wins).
    pub async fn store_idempotent_answer(
        &self,
        scope: String,
        key: String,
        answer: StoredAnswer,
    ) -> Result<(), Error> {
        self.inner.store_idempotent_answer(scope, key, answer).await
    }
}

/// BLAKE3 and SHA-256 of a byte stream with the server's two-core pipeline (used by the
/// throughput benchmark as the baseline "how fast can we hash").
pub async fn digest_stream<S>(body: S) -> Result<Digests, Error>
where
    S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
{
    use futures::StreamExt as _;
    let mut hasher = hashing::DualHasher::default();
    let mut body = std::pin::pin!(body);
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| Error::Body(e.to_string()))?;
        hasher.update(chunk).await?;
    }
    Ok(hasher.finish().await?.0)
}

/// Re-exported so callers name the key type without depending on ed25519-dalek's version.
pub mod ed25519_dalek_key {
    pub use ed25519_dalek::VerifyingKey;
}
