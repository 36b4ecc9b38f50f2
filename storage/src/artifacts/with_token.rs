//! Publishing under a capability token (LSE-6/7): the token's scope, a manifest of its
//! lease's WorkItem naming its lease, then the publication as the lease owner's session
//! would make it. The token itself is checked in `access/grant.rs`.

use weft_api::views::Published;
use weft_api::work::views::TokenScope;
use weft_api::{Envelope, ErrorCode, Manifest};

use crate::access::Grant;
use crate::artifacts::handle::Artifacts;
use crate::error::{Error, reject};
use crate::signatures::{AuthorityMay, Signed};

impl Artifacts<'_> {
    /// Publishes under a token: scope `artifact:publish`, a manifest of the lease's WorkItem
    /// naming the lease, then the publication as the lease owner's session would make it.
    // The grant is re-checked just before the publication's transaction, and again inside it
    // once it holds its Group's lock (a token revoked or expired in between publishes
    // nothing); there, the manifest's lease
    // must still be the WorkItem's current Execution Lease (`artifacts/binding.rs`).
    /// [`Artifacts::publish`] under a capability token (`work/tokens.rs`): scope
    /// `artifact:publish`, and a manifest of the token's lease and WorkItem only (`forbidden`
    /// otherwise).
    pub async fn publish_with_token(
        &self,
        envelope: Envelope,
        grant: &Grant,
    ) -> Result<(Published, bool), Error> {
        grant.require(TokenScope::ArtifactPublish)?;
        let (signed, grant) = self.grant_publishes(&envelope, grant).await?;
        let verified = self.may_publish(signed, &envelope, &grant.reader())?;
        self.publish_verified_as(verified, Some(crate::acting::Acting::token(&grant)))
            .await
    }

    /// Publishes with its bytes under a token: scopes `blob:write` and `artifact:publish`, a
    /// manifest of the lease's WorkItem naming the lease, then as the lease owner's session.
    pub async fn publish_with_content_and_token<S>(
        &self,
        envelope: Envelope,
        expected: weft_api::Digest,
        body: S,
        grant: &Grant,
    ) -> Result<(Published, bool), Error>
    where
        S: futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send,
    {
        grant.require(TokenScope::BlobWrite)?;
        grant.require(TokenScope::ArtifactPublish)?;
        let (signed, grant) = self.grant_publishes(&envelope, grant).await?;
        let verified = self.may_publish(signed, &envelope, &grant.reader())?;
        self.publish_verified_with_content(verified, expected, body, grant.session(), Some(&grant))
            .await
    }

    /// The signature of `envelope` checked (once for the whole publication), `forbidden`
    /// unless it is a manifest of `grant`'s lease and WorkItem; then the grant as it stands
    /// now (`unauthorized` once its token, lease or session ended).
    async fn grant_publishes(
        &self,
        envelope: &Envelope,
        grant: &Grant,
    ) -> Result<(Signed<Manifest>, Grant), Error> {
        let signed = self
            .0
            .verify_signed::<Manifest>(envelope, AuthorityMay::NotSign)
            .await?;
        let manifest = signed.value.value();
        grant.require_subject(
            &manifest.group_id,
            &manifest.mission_id,
            &manifest.work_item_id,
        )?;
        if manifest.execution.lease_id.as_str() != grant.lease_id {
            return Err(reject(
                ErrorCode::Forbidden,
                format!(
                    "capability token {} publishes under lease {} only",
                    grant.token_id, grant.lease_id
                ),
            ));
        }
        Ok((signed, self.0.recheck_grant(grant).await?))
    }
}
