//! The weft engine: blobs on `object_store`, the index and the per-Group event log on SQLite,
//! and the enforcement of the protocol rules in one transaction per accepted change.
//!
//! Used through one façade, [`Store`]. It never sees HTTP: callers hand it byte streams,
//! envelopes and ids, and get back values or an [`Error`] with a stable code.
//!
//! **Invariant:** a blob exists before its index row (stage → hash → promote → record).
//! **Invariant:** every accepted change commits its rows and its Event in one transaction;
//! a rejected change commits nothing.
//! **Invariant:** no Event is rewritten, and none leaves the online log except into an archive
//! artifact behind a signed snapshot (compaction); an ACK never removes one (DLV-7).

#[cfg(feature = "bench-support")]
pub mod bench_support;
mod blobs;
mod clock;
mod compaction;
mod db;
mod delivery;
mod error;
mod events;
mod evidence;
mod fingerprint;
mod hashing;
mod lineage;
mod options;
mod records;
mod schema;

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::Stream;
use futures::stream::BoxStream;

pub use blobs::Backend;
pub use clock::{Clock, ManualClock, SystemClock};
pub use compaction::{GroupState, Retention};
pub use db::Location;
pub use delivery::StoredAnswer;
pub use error::{BackendError, Error};
pub use evidence::EvidenceFilter;
pub use fingerprint::Fingerprint;
pub use lineage::{
    ArtifactNode, Direction, Edge, Lineage, ManifestSummary, Name, NodeRef, Query as LineageQuery,
    Scope,
};
pub use options::{Options, defaults};
pub use records::{FsckReport, ListFilter, Reader, Session, Stats, UploadOutcome};

use weft_api::session::{Membership, Role, SessionGrant};
use weft_api::views::{
    ArtifactPage, ArtifactView, CriterionSummary, Cursor, EvidencePage, EvidenceRecord,
    EvidenceRecorded, Published, ReviewRequest, SignedCheckpoint,
};
use weft_api::{ArtifactId, Digest, Digests, Envelope, Event, Id, KeyId};

/// An artifact opened for reading: its digests and media type, and its bytes not yet read.
pub struct Content {
    pub digests: Digests,
    pub media_type: String,
    raw: BoxStream<'static, Result<Bytes, Error>>,
    inner: Arc<records::Inner>,
}

impl Content {
    pub(crate) fn new(
        digests: Digests,
        media_type: String,
        raw: BoxStream<'static, Result<Bytes, Error>>,
        inner: Arc<records::Inner>,
    ) -> Self {
        Self {
            digests,
            media_type,
            raw,
            inner,
        }
    }

    /// The bytes in `range` (all of them by default). Every stored byte is re-hashed while
    /// this is polled, including those outside the range; if the stored bytes do not match
    /// their address the stream ends with an error (never cleanly) and the blob is
    /// quarantined (ART-5).
    pub fn into_body(self, range: Option<Range<u64>>) -> BoxStream<'static, Result<Bytes, Error>> {
        let range = range.unwrap_or(0..self.digests.size);
        records::verified_stream(self.inner, self.raw, self.digests, range)
    }
}

impl std::fmt::Debug for Content {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Content")
            .field("digests", &self.digests)
            .field("media_type", &self.media_type)
            .finish_non_exhaustive()
    }
}

/// The engine. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<records::Inner>,
}

impl Store {
    /// Opens (creating if needed) the index and the blob backend, and sweeps stale staging.
    pub async fn open(options: Options) -> Result<Self, Error> {
        let inner = records::Inner::open(options).await?;
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.inner.clock.now()
    }

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
        self.inner.set_membership(group_id, agent_id, roles).await
    }

    /// Verifies a signed session request and opens a session (DESIGN §8.1).
    pub async fn open_session(&self, envelope: Envelope) -> Result<SessionGrant, Error> {
        self.inner.open_session(envelope).await
    }

    /// Resolves a bearer token to a live session.
    pub async fn authenticate(&self, token: &str) -> Result<Session, Error> {
        self.inner.authenticate(token).await
    }

    /// Streams `body` into the store. With `expected`, the computed digest must match it.
    pub async fn upload<S>(
        &self,
        body: S,
        expected: Option<Digest>,
        uploader: &Reader,
    ) -> Result<UploadOutcome, Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        self.inner.upload(body, expected, uploader).await
    }

    /// The digests of a blob if `reader` may know it exists (it uploaded it, or it is
    /// published in one of the reader's Groups).
    pub async fn blob(&self, digest: Digest, reader: &Reader) -> Result<Option<Digests>, Error> {
        self.inner.visible_blob(digest, reader).await
    }

    /// Verifies and records a signed artifact manifest, appending `artifact.published`.
    pub async fn publish(
        &self,
        envelope: Envelope,
        caller: &Reader,
    ) -> Result<(Published, bool), Error> {
        self.inner.publish(envelope, caller).await
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

    /// Opens an artifact's bytes for reading, verified as they stream (ART-5).
    pub async fn open_content(&self, digest: Digest, reader: &Reader) -> Result<Content, Error> {
        records::Inner::open_content(&self.inner, digest, reader).await
    }

    pub async fn events(
        &self,
        group_id: Id,
        after: u64,
        limit: u32,
        reader: &Reader,
    ) -> Result<Vec<Event>, Error> {
        self.inner.events(group_id, after, limit, reader).await
    }

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

    /// For every criterion of a WorkItem with Evidence: the latest verdict in force, counts
    /// by outcome, producers, and whether the records in force disagree.
    pub async fn criteria(
        &self,
        work_item_id: Id,
        reader: &Reader,
    ) -> Result<Vec<CriterionSummary>, Error> {
        self.inner.criteria(work_item_id, reader).await
    }

    /// Runs the built-in deterministic reviewer for a session's Group (EVD-3 steps 1, 2, 5).
    pub async fn review(
        &self,
        work_item_id: Id,
        request: ReviewRequest,
        session: &Session,
    ) -> Result<Vec<EvidenceRecord>, Error> {
        records::Inner::review(&self.inner, work_item_id, request, session).await
    }

    /// Registers a schema URI as naming a published schema artifact, for the reviewer.
    pub async fn register_schema(&self, uri: String, artifact: ArtifactId) -> Result<(), Error> {
        self.inner.register_schema(uri, artifact).await
    }

    /// Signs `payload` as `payload_type` with the server's authority key (for exports such as
    /// in-toto attestations; the key never leaves the engine).
    pub fn sign_as_authority(&self, payload_type: &str, payload: &[u8]) -> Envelope {
        Envelope::sign(&self.inner.authority, payload_type, payload)
    }

    /// The server's own public signing keys.
    pub fn authority_keys(&self) -> Vec<(KeyId, ed25519_dalek_key::VerifyingKey)> {
        vec![self.inner.authority_key()]
    }

    /// A Group's Events after `after`, then live ones as they commit: in order, no gaps.
    /// `after` past the head is refused (`cursor_ahead`).
    pub async fn follow(
        &self,
        group_id: Id,
        after: u64,
        reader: &Reader,
    ) -> Result<impl Stream<Item = Result<Event, Error>> + Send + use<>, Error> {
        self.inner.follow(group_id, after, reader).await
    }

    /// Appends an authority-generated Event (one the Group Authority itself decides, such as
    /// GAP-1's session-replacement transition) and returns its sequence once it is durable.
    /// Not reachable over HTTP; Agents change state only through signed requests.
    pub async fn append(
        &self,
        group_id: Id,
        kind: &'static str,
        payload: serde_json::Value,
    ) -> Result<u64, Error> {
        let now = self.now();
        self.inner
            .db
            .write(move |txn| {
                if !records::group_exists(txn, group_id.as_str())? {
                    return Err(Error::reject(
                        weft_api::ErrorCode::UnknownGroup,
                        format!("group {group_id} does not exist"),
                    ));
                }
                events::append(txn, &group_id, kind, &payload, now)
            })
            .await
    }

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
        let snapshots = self.inner.snapshots(group_id, reader).await?;
        if !snapshots
            .iter()
            .any(|s| s.archive == blob || s.reference.state_digest == blob)
        {
            return Err(Error::reject(
                weft_api::ErrorCode::NotFound,
                format!("{blob} is not a snapshot blob of this group"),
            ));
        }
        self.inner.open_group_blob(blob).await
    }

    /// Records an Agent's ACK for a Group; never moves a cursor back (DLV-6, DLV-7).
    pub async fn ack(&self, group_id: Id, agent_id: Id, sequence: u64) -> Result<Cursor, Error> {
        self.inner.ack(group_id, agent_id, sequence).await
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

    /// Ancestors and/or descendants of an artifact, bounded by depth, limit and a time budget,
    /// from the in-memory lineage index (DESIGN §6). `None` if the artifact is not visible.
    pub async fn lineage(
        &self,
        digest: Digest,
        query: LineageQuery,
        reader: &Reader,
    ) -> Result<Lineage, Error> {
        let (id, groups) = self.inner.resolve_for_lineage(digest, reader).await?;
        self.walk_lineage(query, move |index, query| {
            index.traverse(&id, query, groups.as_deref())
        })
        .await?
        .ok_or_else(|| {
            Error::reject(
                weft_api::ErrorCode::NotFound,
                format!("no artifact {digest} is visible to you"),
            )
        })
    }

    /// Runs a lineage walk on this thread within the inline budget, and again on the blocking
    /// pool with the query's whole budget if that was not enough (see
    /// `Options::lineage_inline_budget`). A walk cut by time returns fewer artifacts than its
    /// limit; one cut by the limit returns exactly the limit.
    async fn walk_lineage(
        &self,
        query: LineageQuery,
        walk: impl Fn(&lineage::Index, &LineageQuery) -> Option<Lineage> + Send + 'static,
    ) -> Result<Option<Lineage>, Error> {
        if let Some(inline_budget) = self.inner.lineage_inline_budget {
            let inline = LineageQuery {
                budget: query.budget.min(inline_budget),
                ..query.clone()
            };
            let answer = walk(&self.inner.lineage, &inline);
            let cut_by_time = answer
                .as_ref()
                .is_some_and(|a| a.truncated && a.artifacts.len() < query.limit);
            if !cut_by_time || query.budget <= inline_budget {
                return Ok(answer);
            }
        }
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || walk(&inner.lineage, &query))
            .await
            .map_err(Error::backend)
    }

    /// Everything published inside a WorkItem or Mission and what it was derived from.
    pub async fn lineage_scope(
        &self,
        scope: Scope,
        name: Id,
        query: LineageQuery,
        reader: &Reader,
    ) -> Result<Lineage, Error> {
        let groups = self.inner.reader_groups(reader);
        let scope_name = name.clone();
        self.walk_lineage(query, move |index, query| {
            index.scope(scope, scope_name.as_str(), query, groups.as_deref())
        })
        .await?
        .ok_or_else(|| {
            Error::reject(
                weft_api::ErrorCode::NotFound,
                format!("nothing published in {name} is visible to you"),
            )
        })
    }

    /// One shortest derivation path between two artifacts, or `no_path`.
    pub async fn lineage_path(
        &self,
        from: Digest,
        to: Digest,
        max_depth: u32,
        reader: &Reader,
    ) -> Result<Vec<ArtifactId>, Error> {
        let (from_digest, to_digest) = (from, to);
        let (from, groups) = self.inner.resolve_for_lineage(from, reader).await?;
        let (to, _) = self.inner.resolve_for_lineage(to, reader).await?;
        for (id, digest) in [(&from, from_digest), (&to, to_digest)] {
            if !self.inner.lineage.sees(id, groups.as_deref()) {
                return Err(Error::reject(
                    weft_api::ErrorCode::NotFound,
                    format!("no artifact {digest} is visible to you"),
                ));
            }
        }
        // A path search has no node limit (only `max_depth`) and may cover a large part of the
        // graph, so it always runs on the blocking pool.
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            inner.lineage.path(&from, &to, max_depth, groups.as_deref())
        })
        .await
        .map_err(Error::backend)?
        .ok_or_else(|| {
            Error::reject(
                weft_api::ErrorCode::NoPath,
                format!("no derivation path of at most {max_depth} steps joins {from} and {to}"),
            )
        })
    }

    /// Approximate memory the in-memory lineage index takes, in bytes.
    pub fn lineage_index_bytes(&self) -> usize {
        self.inner.lineage.approximate_bytes()
    }

    /// Row and object counts: for `/metrics`, and for tests asserting that a refused request
    /// changed nothing.
    pub async fn stats(&self) -> Result<Stats, Error> {
        self.inner.stats().await
    }

    /// Every table's rows hashed, and the object counts: for tests asserting that a refused
    /// request changed nothing, not even one column of one row.
    pub async fn fingerprint(&self) -> Result<Fingerprint, Error> {
        let mut fingerprint = self.inner.db.read(fingerprint::of_tables).await?;
        let stats = self.stats().await?;
        fingerprint.blob_objects = stats.blob_objects;
        fingerprint.staging_objects = stats.staging_objects;
        Ok(fingerprint)
    }

    /// Re-hashes every blob and re-checks every row, signature and chain.
    pub async fn fsck(&self) -> Result<FsckReport, Error> {
        self.inner.fsck().await
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
        hasher.update(&chunk).await?;
    }
    Ok(hasher.finish().await?.0)
}

/// Re-exported so callers name the key type without depending on ed25519-dalek's version.
pub mod ed25519_dalek_key {
    pub use ed25519_dalek::VerifyingKey;
}
