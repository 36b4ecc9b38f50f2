//! [`Evidence`], the handle to Evidence and the built-in reviewer (`store.evidence()`): recording
//! signed records (under a session or a capability token), reading them and the verdicts per
//! criterion, and running the deterministic review (EVD-3). Each method hands over to the
//! engine: records in `mod.rs`, the review in `reviewer.rs`, token checks in `work/tokens.rs`.

use std::sync::Arc;

use weft_api::views::{
    CriteriaView, EvidencePage, EvidenceRecord, EvidenceRecorded, ReviewRequest,
};
use weft_api::{ArtifactId, Envelope, Id};

use super::EvidenceFilter;
use crate::access::Grant;
use crate::access::Reader;
use crate::access::Session;
use crate::engine::Engine;
use crate::error::Error;

/// Evidence and the built-in reviewer; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Evidence<'s>(pub(crate) &'s Arc<Engine>);

impl Evidence<'_> {
    /// Verifies and records a signed Evidence payload, appending `evidence.recorded`.
    pub async fn record_evidence(
        &self,
        envelope: Envelope,
        caller: &Reader,
    ) -> Result<(EvidenceRecorded, bool), Error> {
        self.0.record_evidence(envelope, caller).await
    }

    /// [`Evidence::record_evidence`] under a capability token: scope `evidence:record`, and
    /// Evidence of the token's WorkItem only (`forbidden` otherwise).
    pub async fn record_evidence_with_token(
        &self,
        envelope: Envelope,
        grant: &Grant,
    ) -> Result<(EvidenceRecorded, bool), Error> {
        self.0.record_evidence_with_token(envelope, grant).await
    }

    /// Evidence matching `filter`, newest first, visible to `reader`.
    pub async fn list_evidence(
        &self,
        filter: EvidenceFilter,
        reader: &Reader,
    ) -> Result<EvidencePage, Error> {
        self.0.list_evidence(filter, reader).await
    }

    pub async fn evidence(
        &self,
        evidence_id: ArtifactId,
        reader: &Reader,
    ) -> Result<EvidenceRecord, Error> {
        self.0.evidence(evidence_id, reader).await
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
        self.0.criteria(work_item_id, mission_id, reader).await
    }

    /// Runs the built-in deterministic reviewer for a session's Group (EVD-3 steps 1, 2, 5).
    /// The review after a submission is a reaction after its commit (`reactions.rs`).
    pub async fn review(
        &self,
        work_item_id: Id,
        request: ReviewRequest,
        session: &Session,
    ) -> Result<Vec<EvidenceRecord>, Error> {
        self.0.review(work_item_id, request, session).await
    }

    /// Registers a schema URI as naming a published schema artifact, for the reviewer.
    pub async fn register_schema(&self, uri: String, artifact: ArtifactId) -> Result<(), Error> {
        self.0.register_schema(uri, artifact).await
    }
}
