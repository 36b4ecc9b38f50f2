//! Recording Evidence under a capability token (LSE-6/7): the token's scope, Evidence of its
//! lease's WorkItem, recorded as the lease owner's session would record it. The token itself
//! is checked in `access/grant.rs`.

use weft_api::Envelope;
use weft_api::evidence::Evidence;
use weft_api::views::EvidenceRecorded;
use weft_api::work::views::TokenScope;

use crate::access::Grant;
use crate::error::Error;
use crate::evidence::handle::Evidence as Handle;
use crate::signatures::{AuthorityMay, Signed};

impl Handle<'_> {
    /// [`Evidence::record_evidence`] under a capability token: scope `evidence:record`, and
    /// Evidence of the token's WorkItem only (`forbidden` otherwise).
    pub async fn record_evidence_with_token(
        &self,
        envelope: Envelope,
        grant: &Grant,
    ) -> Result<(EvidenceRecorded, bool), Error> {
        grant.require(TokenScope::EvidenceRecord)?;
        let Signed { value, .. } = self
            .0
            .verify_signed::<Evidence>(&envelope, AuthorityMay::NotSign)
            .await?;
        let evidence = value.into_inner();
        grant.require_subject(
            &evidence.group_id,
            &evidence.mission_id,
            &evidence.work_item_id,
        )?;
        let grant = self.0.recheck_grant(grant).await?;
        let acting = Some(crate::acting::Acting::token(&grant));
        self.record_evidence_as(envelope, &grant.reader(), acting)
            .await
    }
}
