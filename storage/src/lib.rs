//! The weft engine: blobs on `object_store`, the index and the per-Group event log on SQLite,
//! and the enforcement of the protocol rules in one transaction per accepted change.
//!
//! Used through one façade, [`Store`]. It never sees HTTP: callers hand it byte streams,
//! envelopes and ids, and get back values or an [`Error`] with a stable code. The file is
//! long (about 730 lines) because it is the façade only: one short method per operation,
//! grouped under headers naming the file behind each group.
//!
//! **Invariant:** a blob exists before its index row (stage → hash → promote → record).
//! **Invariant:** every accepted change commits its rows and its Event in one transaction;
//! a rejected change commits nothing.
//! **Invariant:** no Event is rewritten, and none leaves the online log except into an archive
//! artifact behind a signed snapshot (compaction); an ACK never removes one (DLV-7).

mod access;
mod acting;
mod agents;
mod artifacts;
#[cfg(feature = "bench-support")]
pub mod bench_support;
mod blobs;
mod claim;
mod clock;
mod compaction;
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
mod limits;
mod lineage;
mod options;
mod outboard;
mod policy;
mod rates;
mod reactions;
mod rows;
mod schema;
mod sessions;
mod sql;
mod upload_sessions;
mod work;

use std::sync::Arc;

use bytes::Bytes;
use futures::Stream;

pub use access::{MissionScope, Reader};
pub use artifacts::{
    Content, HotStats, ListFilter, SweepReport, UploadCounters, UploadOutcome, Uploader,
    Verification,
};
pub use blobs::Backend;
pub use claim::{Claimed, IdempotentRequest, StoredAnswer, answer_with, with_idempotency};
pub use clock::{Clock, ManualClock, SystemClock};
pub use compaction::Retention;
pub use db::Location;
pub use error::{BackendError, Error};
pub use evidence::EvidenceFilter;
pub use faults::{FaultKind, FaultSite, Faults, ReconcileStep};
pub use fingerprint::Fingerprint;
pub use fsck::{FsckReport, Stats};
pub use lineage::{
    ArtifactNode, ContextNode, Direction, Edge, Lineage, LineageStart, ManifestSummary, Name,
    NodeRef, Query as LineageQuery, Scope, SnapshotSaved,
};
pub use options::{Options, Quotas, defaults};
pub use sessions::Session;
pub use sql::Work as SqlWork;
pub use weft_api::GroupState;
pub use work::Grant;

use weft_api::session::{Membership, Role, SessionGrant};
use weft_api::views::{
    ArtifactPage, ArtifactView, CriteriaView, Cursor, EvidencePage, EvidenceRecord,
    EvidenceRecorded, Published, ReviewRequest, SignedCheckpoint,
};
use weft_api::{ArtifactId, Digest, Digests, Envelope, Id, KeyId};

/// The engine. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<engine::Engine>,
    /// Sessions resolved at an auth generation: a token seen again answers without a read.
    sessions: Arc<sessions::SessionCache>,
}

impl Store {
    // ── engine.rs: opening the store ────────────────────────────────────────

    /// Opens (creating if needed) the index and the blob backend, and sweeps stale staging.
    pub async fn open(options: Options) -> Result<Self, Error> {
        let inner = Arc::new(engine::Engine::open(options).await?);
        reactions::start(&inner);
        Ok(Self {
            inner,
            sessions: Arc::default(),
        })
    }

    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.inner.clock.now()
    }

    // ── agents.rs: Groups, Agents, Memberships ──────────────────────────────

    pub async fn create_group(&self, group_id: Id) -> Result<bool, Error> {
        self.inner.create_group(group_id).await
    }

    /// Registers an Agent's key. `Ok((keyid, true))` if new, `(keyid, false)` if it was already
    /// registered with this key; another key for the same Agent is a conflict.
    pub async fn register_agent(
        &self,
        agent_id: Id,
        public_key: ed25519_dalek_key::VerifyingKey,
        agent_card_version: String,
    ) -> Result<(KeyId, bool), Error> {
        self.inner
            .register_agent(agent_id, public_key, agent_card_version)
            .await
    }

    pub async fn set_membership(
        &self,
        group_id: Id,
        agent_id: Id,
        roles: Vec<Role>,
    ) -> Result<Membership, Error> {
        self.inner
            .set_membership(group_id, agent_id, roles, None)
            .await
    }

    /// Sets a Membership that covers only `missions` of its Group (CTX-5; `None`: the whole
    /// Group). A scope for a coordinator or auditor, or an empty one, is refused `bad_request`.
    pub async fn set_scoped_membership(
        &self,
        group_id: Id,
        agent_id: Id,
        roles: Vec<Role>,
        missions: Option<Vec<Id>>,
    ) -> Result<Membership, Error> {
        self.inner
            .set_membership(group_id, agent_id, roles, missions)
            .await
    }

    /// Sets the Group's policy (SCH-6, SCH-7): the highest `priorityClass` a `mission.create`
    /// may ask for (`group.policy_set`); `unknown_group` for a Group that does not exist.
    pub async fn set_group_policy(
        &self,
        group_id: Id,
        mission_priority_ceiling: weft_api::work::contract::Level,
    ) -> Result<weft_api::kinds::GroupPolicySet, Error> {
        self.inner
            .set_group_policy(group_id, mission_priority_ceiling)
            .await
    }

    /// Ends a Membership (`membership.removed`); answers its new epoch.
    pub async fn remove_membership(&self, group_id: Id, agent_id: Id) -> Result<u64, Error> {
        self.inner.remove_membership(group_id, agent_id).await
    }

    /// Deactivates an Agent everywhere; answers the Groups that were told
    /// (`agent.deactivated`), none if it was deactivated already.
    pub async fn deactivate_agent(&self, agent_id: Id) -> Result<Vec<Id>, Error> {
        self.inner.deactivate_agent(agent_id).await
    }

    // directory.rs: `list_members` and `agent_record`, the operator's reads (there for size).

    /// Replaces an Agent's key (`agent.key_rotated`); answers the new keyid.
    pub async fn rotate_key(
        &self,
        agent_id: Id,
        public_key: ed25519_dalek_key::VerifyingKey,
    ) -> Result<KeyId, Error> {
        self.inner.rotate_key(agent_id, public_key).await
    }

    // ── work/: Missions, WorkItems, Commands ─────────────────────────────────

    /// Commands of one session applied in order in one transaction, each in a savepoint of
    /// its own; stops at the first refusal (its index and error).
    pub async fn execute_commands(
        &self,
        group_id: Id,
        envelopes: Vec<Envelope>,
        session: &Session,
    ) -> Result<
        (
            Vec<weft_api::work::views::CommandAccepted>,
            Option<(usize, Error)>,
        ),
        Error,
    > {
        self.inner
            .execute_commands(group_id, envelopes, session)
            .await
    }

    /// Runs one signed Command in `group_id` for the caller's `session` (DESIGN §10): its
    /// Events and the aggregate's view after it, or a refusal that changed nothing.
    pub async fn execute_command(
        &self,
        group_id: Id,
        envelope: Envelope,
        session: &Session,
    ) -> Result<weft_api::work::views::CommandAccepted, Error> {
        self.inner
            .execute_command(group_id, envelope, session)
            .await
    }

    /// Appends the lease and ownership expiry Events due at `now` (`lease.expired`,
    /// `ownership.expired`) in one writer transaction; answers how many. Finds them in an
    /// in-memory set of deadlines, never by scanning every lease; the server calls it on a
    /// timer, and every Command also expires its own WorkItem first.
    pub async fn expire_due(&self, now: chrono::DateTime<chrono::Utc>) -> Result<usize, Error> {
        self.inner.expire_due(now).await
    }

    pub async fn work_item(
        &self,
        id: Id,
        reader: &Reader,
    ) -> Result<weft_api::work::views::WorkItemView, Error> {
        self.inner.work_item(id, reader).await
    }

    pub async fn mission(
        &self,
        id: Id,
        reader: &Reader,
    ) -> Result<weft_api::work::views::MissionView, Error> {
        self.inner.mission(id, reader).await
    }

    /// The Missions `reader` may see, newest first (at most `limit`).
    pub async fn missions(
        &self,
        reader: &Reader,
        limit: u32,
    ) -> Result<Vec<weft_api::work::views::MissionView>, Error> {
        self.inner.visible_missions(reader, limit).await
    }

    pub async fn mission_graph(
        &self,
        id: Id,
        reader: &Reader,
    ) -> Result<weft_api::work::views::WorkGraph, Error> {
        self.inner.mission_graph(id, reader).await
    }

    // ── work/tokens.rs: capability tokens (LSE-6/7) ──────────────────────────

    /// Issues a capability token for lease `lease_id` to its owner `session`, expiring no
    /// later than the lease; `replaces` revokes a previous token of the lease in the same step.
    pub async fn issue_token(
        &self,
        lease_id: Id,
        request: weft_api::work::views::TokenRequest,
        session: &Session,
    ) -> Result<weft_api::work::views::TokenIssued, Error> {
        self.inner.issue_token(lease_id, request, session).await
    }

    /// Revokes token `token_id` of lease `lease_id` (its owner `session` only).
    pub async fn revoke_token(
        &self,
        lease_id: Id,
        token_id: Id,
        session: &Session,
    ) -> Result<(), Error> {
        self.inner.revoke_token(lease_id, token_id, session).await
    }

    /// Resolves a capability token to what it may do now: its token, lease and lease owner's
    /// session are re-read at each call (`unauthorized` once any of them ended).
    pub async fn authorize_token(&self, token: &str) -> Result<Grant, Error> {
        self.inner.authorize_token(token).await
    }

    /// [`Store::publish`] under a capability token: scope `artifact:publish`, and a manifest
    /// of the token's lease and WorkItem only (`forbidden` otherwise).
    pub async fn publish_with_token(
        &self,
        envelope: Envelope,
        grant: &Grant,
    ) -> Result<(Published, bool), Error> {
        self.inner.publish_with_token(envelope, grant).await
    }

    /// [`Store::record_evidence`] under a capability token: scope `evidence:record`, and
    /// Evidence of the token's WorkItem only (`forbidden` otherwise).
    pub async fn record_evidence_with_token(
        &self,
        envelope: Envelope,
        grant: &Grant,
    ) -> Result<(EvidenceRecorded, bool), Error> {
        self.inner.record_evidence_with_token(envelope, grant).await
    }

    // ── sessions.rs: sessions and their liveness ────────────────────────────

    /// Verifies a signed session request and opens a session (DESIGN §8.1).
    pub async fn open_session(&self, envelope: Envelope) -> Result<SessionGrant, Error> {
        self.inner.open_session(envelope).await
    }

    /// Resolves a bearer token to a live session.
    pub async fn authenticate(&self, token: &str) -> Result<Session, Error> {
        self.sessions.authenticate(&self.inner, token).await
    }

    /// Whether a session a stream was opened with is still live now.
    pub async fn recheck(&self, session: &Session) -> Result<(), Error> {
        self.inner.recheck(session).await
    }

    /// Changes whenever some session may have ended (a new session, a Membership set or
    /// removed, an Agent deactivated, a key rotated): streams re-check theirs then.
    pub fn auth_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.auth_changes()
    }

    // ── artifacts/upload.rs: uploads ────────────────────────────────────────

    /// Streams `body` into the store. With `expected`, the computed digest must match it.
    /// Only producing roles may upload, within the admission limits of `Options::quotas`.
    pub async fn upload<S>(
        &self,
        body: S,
        expected: Option<Digest>,
        uploader: Uploader<'_>,
    ) -> Result<UploadOutcome, Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        self.inner.upload(body, expected, uploader).await
    }

    /// Which path uploads took since the store opened (staged or hashed only), and the bytes
    /// they staged.
    pub fn upload_counters(&self) -> UploadCounters {
        self.inner.upload_counters.snapshot()
    }

    /// What the small-artifact read cache holds and how many reads it answered.
    pub fn hot_stats(&self) -> HotStats {
        self.inner.hot.stats()
    }

    /// Starts counting the SQL work of the writer's jobs (tests: statements per Command).
    pub fn start_metering_writes(&self) {
        self.inner.db.meter().start();
    }

    /// The writer's SQL work since [`Store::start_metering_writes`], and stops counting.
    pub fn stop_metering_writes(&self) -> SqlWork {
        self.inner.db.meter().stop()
    }

    // ── artifacts/resumable.rs: resumable upload sessions, in `upload_sessions.rs` ──
    /// Blob bytes read from the object store since the store opened (whole-blob streams and
    /// the chunk groups of verified ranges): tests show with it what a read cost.
    pub fn blob_bytes_read(&self) -> u64 {
        self.inner.blobs.bytes_read()
    }

    // ── artifacts/sweep.rs: uncited uploads, spent nonces ───────────────────

    /// Removes uploads nothing cites whose latest upload is older than the TTL (rows, then
    /// files), and session nonces too old to be replayed. The server runs it on an interval.
    pub async fn sweep(&self) -> Result<SweepReport, Error> {
        self.inner.sweep().await
    }

    /// The digests of a blob if `reader` may know it exists (it uploaded it, or it is
    /// published in one of the reader's Groups).
    pub async fn blob(&self, digest: Digest, reader: &Reader) -> Result<Option<Digests>, Error> {
        self.inner.visible_blob(digest, reader).await
    }

    // ── artifacts/publish.rs: publication ───────────────────────────────────

    /// Verifies and records a signed artifact manifest, appending `artifact.published`.
    pub async fn publish(
        &self,
        envelope: Envelope,
        caller: &Reader,
    ) -> Result<(Published, bool), Error> {
        self.inner.publish(envelope, caller).await
    }

    // artifacts/with_content.rs: `publish_with_content` and `..._and_token` (there for size).

    // ── artifacts/reads.rs: reads (views, listings, verified content) ───────

    /// Publishes an Artifact as reusable knowledge in the session's Group (CTX-6): an
    /// approver, citing its approval Evidence; `true` when new.
    pub async fn publish_reusable(
        &self,
        artifact: ArtifactId,
        request: weft_api::views::ReuseRequest,
        session: &Session,
    ) -> Result<(weft_api::views::ReuseRecord, bool), Error> {
        self.inner
            .publish_reusable(artifact, request, session)
            .await
    }

    pub async fn artifact(&self, digest: Digest, reader: &Reader) -> Result<ArtifactView, Error> {
        self.inner.artifact(digest, reader).await
    }

    pub async fn list_artifacts(
        &self,
        filter: ListFilter,
        reader: &Reader,
    ) -> Result<ArtifactPage, Error> {
        self.inner.list_artifacts(filter, reader).await
    }

    /// Opens an artifact's bytes for reading, verified as they stream (ART-5). A caller that
    /// streams them to a client takes a download slot first ([`Content::admitted`]), after
    /// visibility was decided here, so a refusal says nothing of what the reader may not see.
    pub async fn open_content(&self, digest: Digest, reader: &Reader) -> Result<Content, Error> {
        self.inner.open_content(digest, reader).await
    }

    // ── artifacts/verification.rs: `verification`, `verify_now`, `recorded_key` (there) ──

    // ── evidence/: Evidence and the built-in reviewer (evidence/reviewer.rs) ───

    /// Verifies and records a signed Evidence payload, appending `evidence.recorded`.
    pub async fn record_evidence(
        &self,
        envelope: Envelope,
        caller: &Reader,
    ) -> Result<(EvidenceRecorded, bool), Error> {
        self.inner.record_evidence(envelope, caller).await
    }

    /// Evidence matching `filter`, newest first, visible to `reader`.
    pub async fn list_evidence(
        &self,
        filter: EvidenceFilter,
        reader: &Reader,
    ) -> Result<EvidencePage, Error> {
        self.inner.list_evidence(filter, reader).await
    }

    pub async fn evidence(
        &self,
        evidence_id: ArtifactId,
        reader: &Reader,
    ) -> Result<EvidenceRecord, Error> {
        self.inner.evidence(evidence_id, reader).await
    }

    /// For every criterion of a WorkItem of one Mission with Evidence: the verdict in force (a
    /// review outranks a Worker's claim, EVD-1), counts by outcome, producers, and whether
    /// the records in force of the verdict's rank disagree. `mission_id` is required when
    /// the WorkItem id has Evidence under more than one Mission the reader can see.
    pub async fn criteria(
        &self,
        work_item_id: Id,
        mission_id: Option<Id>,
        reader: &Reader,
    ) -> Result<CriteriaView, Error> {
        self.inner.criteria(work_item_id, mission_id, reader).await
    }

    /// Runs the built-in deterministic reviewer for a session's Group (EVD-3 steps 1, 2, 5).
    pub async fn review(
        &self,
        work_item_id: Id,
        request: ReviewRequest,
        session: &Session,
    ) -> Result<Vec<EvidenceRecord>, Error> {
        self.inner.review(work_item_id, request, session).await
    }

    // EVD-3's review after a submission is a reaction after its commit (reactions.rs).

    /// Returns once every reaction owed by a commit answered before the call has run (the
    /// review after a submission, EVD-3): a pass over the owed reactions that began after
    /// the call has finished. For tests; at once while `Faults::hold_reactions` holds them.
    pub async fn reactions_settled(&self) {
        self.inner.reactions_settled().await;
    }

    /// Registers a schema URI as naming a published schema artifact, for the reviewer.
    pub async fn register_schema(&self, uri: String, artifact: ArtifactId) -> Result<(), Error> {
        self.inner.register_schema(uri, artifact).await
    }

    // ── access.rs: the authority key ────────────────────────────────────────

    /// Signs `payload` as `payload_type` with the server's authority key (for exports such as
    /// in-toto attestations; the key never leaves the engine).
    pub fn sign_as_authority(&self, payload_type: &str, payload: &[u8]) -> Envelope {
        Envelope::sign(&self.inner.authority, payload_type, payload)
    }

    /// The server's own public signing keys.
    pub fn authority_keys(&self) -> Vec<(KeyId, ed25519_dalek_key::VerifyingKey)> {
        vec![self.inner.authority_key()]
    }

    // context/store.rs: the Context Package operations (DESIGN §11; there for size).

    // ── delivery.rs: replay and live follow ─────────────────────────────────

    /// A page of a Group's log after `after` (replay); a Mission-scoped reader gets `withheld`
    /// placeholders for other Missions' Events (CTX-5).
    pub async fn events(
        &self,
        group_id: Id,
        after: u64,
        limit: u32,
        reader: &Reader,
    ) -> Result<Vec<weft_api::event::Delivered>, Error> {
        self.inner.events(group_id, after, limit, reader).await
    }

    /// A Group's Events after `after`, then live ones as they commit: in order, no gaps.
    /// `after` past the head is refused (`cursor_ahead`).
    pub async fn follow(
        &self,
        group_id: Id,
        after: u64,
        reader: &Reader,
    ) -> Result<impl Stream<Item = Result<weft_api::event::Delivered, Error>> + Send + use<>, Error>
    {
        self.inner.follow(group_id, after, reader).await
    }

    /// Appends a filler Event of any type (the events benchmark's load) and returns its
    /// sequence once it is durable. Only with feature `bench-support`: the server appends
    /// typed Events only, each with the change it describes.
    #[cfg(feature = "bench-support")]
    pub async fn append(
        &self,
        group_id: Id,
        kind: &'static str,
        payload: serde_json::Value,
    ) -> Result<u64, Error> {
        self.inner.append_filler(group_id, kind, payload).await
    }

    // ── compaction.rs: retention, snapshots ─────────────────────────────────

    /// Compacts every Group's online log down to what `retain` keeps (always at least the
    /// newest Event), archiving older Events and signing a snapshot reference for each.
    pub async fn compact(&self, retain: Retention) -> Result<Vec<(String, u64)>, Error> {
        self.inner.compact(retain).await
    }

    /// The signed snapshot references of a Group, oldest first.
    pub async fn snapshots(
        &self,
        group_id: Id,
        reader: &Reader,
    ) -> Result<Vec<weft_api::views::SignedSnapshot>, Error> {
        self.inner.snapshots(group_id, reader).await
    }

    /// Opens a snapshot's state document or Event archive of a Group, verified as it streams.
    pub async fn open_snapshot_blob(
        &self,
        group_id: Id,
        blob: ArtifactId,
        reader: &Reader,
    ) -> Result<Content, Error> {
        self.inner.open_snapshot_blob(group_id, blob, reader).await
    }

    /// The digests of a snapshot blob `reader` may read, without opening it (a HEAD).
    pub async fn snapshot_blob_digests(
        &self,
        group_id: Id,
        blob: ArtifactId,
        reader: &Reader,
    ) -> Result<Digests, Error> {
        self.inner
            .snapshot_blob_digests(group_id, blob, reader)
            .await
    }

    // ── delivery.rs: ACK cursors and checkpoints ────────────────────────────

    /// Records an Agent's ACK for a Group; never moves a cursor back (DLV-6, DLV-7).
    pub async fn ack(
        &self,
        group_id: Id,
        session: &Session,
        sequence: u64,
    ) -> Result<Cursor, Error> {
        self.inner.ack(group_id, session, sequence).await
    }

    pub async fn cursors(
        &self,
        group_id: Id,
        reader: &Reader,
        all: bool,
    ) -> Result<Vec<Cursor>, Error> {
        self.inner.cursors(group_id, reader, all).await
    }

    /// The Group's head `{groupId, sequence, hash}` signed by the authority key.
    pub async fn checkpoint(
        &self,
        group_id: Id,
        reader: &Reader,
    ) -> Result<SignedCheckpoint, Error> {
        self.inner.checkpoint(group_id, reader).await
    }

    // ── idempotency.rs: stored answers ──────────────────────────────────────

    /// The stored answer of an idempotent request, by caller scope and key.
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

    // ── lineage/: provenance queries (lineage/query.rs) ─────────────────────

    /// Ancestors and/or descendants of an artifact, bounded by depth, limit and a time budget,
    /// from the in-memory lineage index (DESIGN §6). `not_found` if the artifact is not visible.
    pub async fn lineage(
        &self,
        digest: Digest,
        query: LineageQuery,
        reader: &Reader,
    ) -> Result<Lineage, Error> {
        self.inner.lineage(digest, query, reader).await
    }

    /// Everything published inside a WorkItem or Mission and what it was derived from.
    pub async fn lineage_scope(
        &self,
        scope: Scope,
        name: Id,
        query: LineageQuery,
        reader: &Reader,
    ) -> Result<Lineage, Error> {
        self.inner.lineage_scope(scope, name, query, reader).await
    }

    /// One shortest derivation path between two artifacts, or `no_path`.
    pub async fn lineage_path(
        &self,
        from: Digest,
        to: Digest,
        max_depth: u32,
        reader: &Reader,
    ) -> Result<Vec<ArtifactId>, Error> {
        self.inner.lineage_path(from, to, max_depth, reader).await
    }

    /// Brings the lineage index up to every committed publication and writes its snapshot
    /// beside the index database, so the next open reads it instead of rebuilding (issue #15;
    /// `None`: an in-memory database, or nothing published). Call at clean shutdown and
    /// periodically; a crash between two calls costs only a longer catch-up.
    pub async fn save_lineage_snapshot(&self) -> Result<Option<SnapshotSaved>, Error> {
        self.inner.save_lineage_snapshot().await
    }

    /// Marks a clean shutdown, so the next open skips the scan for orphan blob files: call
    /// last, once every request has finished. From then on this process promotes no blob.
    pub async fn mark_clean_shutdown(&self) -> Result<(), Error> {
        self.inner.mark_clean_shutdown().await
    }

    /// How the lineage index was made ready when this store was opened.
    pub fn lineage_start(&self) -> LineageStart {
        self.inner.lineage_start
    }

    /// Approximate memory the in-memory lineage index takes, in bytes.
    pub fn lineage_index_bytes(&self) -> usize {
        self.inner.lineage.approximate_bytes()
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
