//! Recording Evidence under a capability token (LSE-6/7): the token's scope, Evidence of its
//! lease's WorkItem, recorded as the lease owner's session would record it. The token itself
//! is checked in `access/grant.rs`.

use weft_api::Envelope;
use weft_api::evidence::Evidence;
use weft_api::views::EvidenceRecorded;
use weft_api::work::views::TokenScope;

use crate::access::Grant;
use crate::engine::Engine;
use crate::error::Error;
use crate::signatures::{AuthorityMay, Signed};

impl Engine {
    /// Records Evidence under a token: scope `evidence:record`, Evidence of the lease's
    /// WorkItem, recorded as the lease owner's session would record it.
    pub(crate) async fn record_evidence_with_token(
        &self,
        envelope: Envelope,
        grant: &Grant,
    ) -> Result<(EvidenceRecorded, bool), Error> {
        grant.require(TokenScope::EvidenceRecord)?;
        let Signed { value, .. } = self
            .verify_signed::<Evidence>(&envelope, AuthorityMay::NotSign)
            .await?;
        let evidence = value.into_inner();
        grant.require_subject(
            &evidence.group_id,
            &evidence.mission_id,
            &evidence.work_item_id,
        )?;
        let grant = self.recheck_grant(grant).await?;
        self.record_evidence(envelope, &grant.reader()).await
    }
}
