//! Capability tokens (DESIGN §10, LSE-6/7): narrowed opaque bearer secrets (not signed
//! credentials, PD-20: a signature would only serve an offline verifier, and revocation must
//! take effect at once) bound to an Execution Lease, issued to the lease's owner session, rotated or revoked while the lease stays, and
//! accepted for blob uploads, publication and Evidence of the lease's WorkItem only.
//!
//! **Invariant:** a token acts only while, at the moment of use, it is unrevoked and unexpired,
//! its lease is an unreleased, unexpired Execution Lease whose WorkItem its Agent still owns
//! under the lease's ownership epoch, and the session the lease runs under is live. Nothing
//! here relies on a sweep: every use re-reads those rows ([`resolve`]).
//! **Invariant:** only the blake3 of a token is stored, as for sessions.
//!
//! Issuing, rotating and revoking tokens append no Event: tokens are credentials, like session
//! tokens, not Mission or WorkItem state. What a token did is in the log as the publication or
//! Evidence it carried, under its lease's Agent.
//!
//! This module does not know HTTP routes: the server decides which routes take a token, and
//! asks [`Grant::require`] for the scope each needs.

use base64::Engine as _;
use chrono::{DateTime, Utc};
use rusqlite::Connection;
use weft_api::evidence::Evidence;
use weft_api::views::{EvidenceRecorded, Published};
use weft_api::work::views::{TokenIssued, TokenRequest, TokenScope};
use weft_api::{Envelope, ErrorCode, Id, Manifest};

use crate::access::{AuthorityMay, Reader, Signed};
use crate::clock::format_instant;
use crate::engine::Engine;
use crate::error::{Error, reject};
use crate::rows::capability_tokens::{self, TokenRow};
use crate::rows::leases::{self, Lease, Refusal, WorkItemOf};
use crate::sessions::{Session, live_session};

/// Every capability token starts with this; a session token never does ('.' is not in the
/// base64url alphabet they are drawn from), so the server tells the two apart unread.
const PREFIX: &str = "cap.";

/// The longest `ttlSeconds` looked at: any more is clamped by the lease anyway, and this keeps
/// instants in the four-digit years their text form compares in.
const MAX_TTL_SECONDS: u64 = 10 * 365 * 86_400;

/// What a live capability token lets its bearer do, resolved at the moment of use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub token_id: String,
    pub lease_id: String,
    pub work_item_id: Id,
    pub mission_id: Id,
    pub scope: Vec<TokenScope>,
    pub expires_at: String,
    /// The owner's live session the lease runs under: the token acts as it, narrowed.
    session: Session,
    token_hash: [u8; 32],
}

impl Grant {
    /// Whether `bearer` is a capability token (rather than a session or admin token).
    pub fn looks_like(bearer: &str) -> bool {
        bearer.starts_with(PREFIX)
    }

    /// `forbidden` unless the token carries `scope`.
    pub fn require(&self, scope: TokenScope) -> Result<(), Error> {
        if self.scope.contains(&scope) {
            Ok(())
        } else {
            Err(reject(
                ErrorCode::Forbidden,
                format!(
                    "capability token {} does not carry the scope {}",
                    self.token_id,
                    scope.as_str()
                ),
            ))
        }
    }

    /// The lease owner's session the token stands in for (uploads count against its Agent).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// blake3 of the token: the row a write re-checks (`acting.rs`).
    pub(crate) fn token_hash(&self) -> [u8; 32] {
        self.token_hash
    }

    /// What the token reads as: its lease owner's session in the lease's Group.
    pub fn reader(&self) -> Reader {
        self.session.reader()
    }

    /// `forbidden` unless a publication or Evidence in `group`/`mission`/`work_item` concerns
    /// the token's lease's WorkItem.
    fn require_subject(&self, group: &Id, mission: &Id, work_item: &Id) -> Result<(), Error> {
        if *group == self.session.group_id
            && *mission == self.mission_id
            && *work_item == self.work_item_id
        {
            return Ok(());
        }
        Err(reject(
            ErrorCode::Forbidden,
            format!(
                "capability token {} acts for WorkItem {} of Mission {} in {} only",
                self.token_id, self.work_item_id, self.mission_id, self.session.group_id
            ),
        ))
    }
}

/// A lease with its WorkItem's Group, Mission and current owner.
struct LeaseRow {
    lease: Lease,
    work_item: WorkItemOf,
}

impl LeaseRow {
    /// Why the lease no longer lets anyone act at `now`, if it does not: the lease rule
    /// (`leases::Lease::admits`) for the lease's own Agent, acting for the WorkItem.
    fn dead_at(&self, now: DateTime<Utc>) -> Option<&'static str> {
        let claim = self.lease.own_claim(Some(self.work_item.ownership()));
        match self.lease.admits(&claim, now) {
            Ok(()) => None,
            Err(Refusal::Ended) => Some("the lease was released"),
            Err(Refusal::Expired) => Some("the lease has expired"),
            Err(Refusal::NotExecution) => Some("only an Execution Lease carries capability tokens"),
            Err(_) => {
                Some("the lease's Agent no longer owns its WorkItem under its ownership epoch")
            }
        }
    }
}

fn lease_row(conn: &Connection, lease_id: &str) -> Result<Option<LeaseRow>, Error> {
    Ok(leases::load_with_work_item(conn, lease_id)?
        .map(|(lease, work_item)| LeaseRow { lease, work_item }))
}

/// The lease `lease_id` as its owner `session` may manage its tokens: `not_found` outside the
/// session's Group or its Mission scope (CTX-5: answered as an unknown lease, issue #40),
/// `forbidden` for anyone but the owner under the lease's session.
fn owned_lease(conn: &Connection, lease_id: &str, session: &Session) -> Result<LeaseRow, Error> {
    let lease = lease_row(conn, lease_id)?
        .filter(|lease| {
            lease.work_item.group_id == session.group_id.as_str()
                && session.scope.covers(&lease.work_item.mission_id)
        })
        .ok_or_else(|| {
            reject(
                ErrorCode::NotFound,
                format!("no lease {lease_id} is visible to you"),
            )
        })?;
    if lease.lease.agent_id != session.agent_id
        || lease.lease.session_epoch != session.session_epoch
    {
        return Err(reject(
            ErrorCode::Forbidden,
            format!(
                "only the owner of lease {lease_id}, in the session it runs under, manages its tokens"
            ),
        ));
    }
    Ok(lease)
}

/// The live grant of the token hashing to `token_hash` at `now`, or why it is dead
/// (`unauthorized`, or the session's own `stale_session`/`stale_membership`).
/// [`resolve`], for a write's transaction (`acting.rs`): whether the token (and its owner's
/// session and lease) is still good at `now`.
pub(crate) fn still_live(conn: &Connection, token_hash: [u8; 32], now: &str) -> Result<(), Error> {
    resolve(conn, token_hash, now).map(|_| ())
}

/// `now` is a `format_instant` text: the session and token rows compare it as their own
/// instants are written; the lease rule compares it as time.
fn resolve(conn: &Connection, token_hash: [u8; 32], now: &str) -> Result<Grant, Error> {
    let dead = |why: &str| reject(ErrorCode::Unauthorized, format!("capability token: {why}"));
    let Some(token) = capability_tokens::by_hash(conn, &token_hash)? else {
        return Err(dead("unknown token"));
    };
    if token.revoked {
        return Err(dead("the token was revoked"));
    }
    let at = crate::rows::instant(now)?;
    if token.expired(at) {
        return Err(dead("the token has expired"));
    }
    let TokenRow {
        token_id,
        lease_id,
        scope,
        expires_at,
        ..
    } = token;
    let Some(lease) = lease_row(conn, &lease_id)? else {
        return Err(dead("its lease is unknown"));
    };
    if let Some(why) = lease.dead_at(at) {
        return Err(dead(why));
    }
    let session_hash = crate::rows::sessions::hash_of(
        conn,
        lease.lease.agent_id.as_str(),
        &lease.work_item.group_id,
        lease.lease.session_epoch,
    )?;
    let session_hash: [u8; 32] = session_hash
        .and_then(|hash| hash.try_into().ok())
        .ok_or_else(|| dead("the session its lease runs under is gone"))?;
    let session = live_session(conn, session_hash, now)?;
    Ok(Grant {
        token_id,
        lease_id,
        work_item_id: lease.lease.work_item_id,
        mission_id: Id::parse("missionId", &lease.work_item.mission_id)?,
        scope,
        expires_at: format_instant(expires_at),
        session,
        token_hash,
    })
}

impl Engine {
    /// Issues a token for lease `lease_id` to its owner `session` (LSE-6), expiring at the
    /// earlier of `ttlSeconds` from now and the lease's expiry (LSE-7); with `replaces`, the
    /// named token of the same lease is revoked in the same transaction (rotation).
    pub(crate) async fn issue_token(
        &self,
        lease_id: Id,
        request: TokenRequest,
        session: &Session,
    ) -> Result<TokenIssued, Error> {
        let mut scope = request.scope;
        scope.sort();
        scope.dedup();
        if scope.is_empty() {
            return Err(reject(
                ErrorCode::BadRequest,
                "scope names at least one of blob:write, artifact:publish, evidence:record",
            ));
        }
        if request.ttl_seconds == 0 {
            return Err(reject(
                ErrorCode::BadRequest,
                "ttlSeconds must be at least 1",
            ));
        }
        let now = self.clock.now();
        let ttl = request.ttl_seconds.min(MAX_TTL_SECONDS);
        // In range: MAX_TTL_SECONDS fits an i64 by far.
        let wanted = now + chrono::Duration::seconds(ttl as i64);
        let token_bytes: [u8; 32] = rand::random();
        let token = format!(
            "{PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token_bytes)
        );
        let token_hash = *blake3::hash(token.as_bytes()).as_bytes();
        let token_id = format!("tok-{}", uuid::Uuid::now_v7());
        let session = session.clone();
        let replaces = request.replaces;
        self.db
            .write(move |txn| {
                let lease = owned_lease(txn, lease_id.as_str(), &session)?;
                if let Some(why) = lease.dead_at(now) {
                    return Err(reject(
                        ErrorCode::StaleLease,
                        format!("lease {lease_id}: {why}"),
                    ));
                }
                if let Some(old) = &replaces {
                    let revoked = capability_tokens::revoke(txn, old, lease_id.as_str(), now)?;
                    if !revoked {
                        return Err(reject(
                            ErrorCode::NotFound,
                            format!("lease {lease_id} has no token {old} to replace"),
                        ));
                    }
                }
                // LSE-7: never past the lease.
                let expires = wanted.min(lease.lease.expires_at);
                capability_tokens::insert(
                    txn,
                    &capability_tokens::NewToken {
                        token_hash: &token_hash,
                        token_id: &token_id,
                        lease_id: lease_id.as_str(),
                        scope: &scope,
                        issued_at: now,
                        expires_at: expires,
                    },
                )?;
                let expires_at = format_instant(expires);
                Ok(TokenIssued {
                    token_id,
                    token,
                    scope,
                    expires_at,
                })
            })
            .await
    }

    /// Revokes token `token_id` of lease `lease_id` for its owner `session`; revoking it again
    /// is a no-op. Works on a dead lease too (its tokens are dead already).
    pub(crate) async fn revoke_token(
        &self,
        lease_id: Id,
        token_id: Id,
        session: &Session,
    ) -> Result<(), Error> {
        let now = self.clock.now();
        let session = session.clone();
        self.db
            .write(move |txn| {
                owned_lease(txn, lease_id.as_str(), &session)?;
                let exists =
                    capability_tokens::revoke_unrevoked(
                        txn,
                        token_id.as_str(),
                        lease_id.as_str(),
                        now,
                    )? || capability_tokens::exists(txn, token_id.as_str(), lease_id.as_str())?;
                if exists {
                    Ok(())
                } else {
                    Err(reject(
                        ErrorCode::NotFound,
                        format!("lease {lease_id} has no token {token_id}"),
                    ))
                }
            })
            .await
    }

    /// Resolves a capability token to its live [`Grant`], checking its lease now.
    pub(crate) async fn authorize_token(&self, token: &str) -> Result<Grant, Error> {
        let token_hash = *blake3::hash(token.as_bytes()).as_bytes();
        let now = format_instant(self.clock.now());
        self.db
            .read(move |conn| resolve(conn, token_hash, &now))
            .await
    }

    /// The grant again, right before it acts: it may have died since the request began.
    pub(crate) async fn recheck_grant(&self, grant: &Grant) -> Result<Grant, Error> {
        let token_hash = grant.token_hash;
        let now = format_instant(self.clock.now());
        self.db
            .read(move |conn| resolve(conn, token_hash, &now))
            .await
    }

    /// Publishes under a token: scope `artifact:publish`, a manifest of the lease's WorkItem
    /// naming the lease, then the publication as the lease owner's session would make it.
    // The grant is re-checked just before the publication's transaction; inside it, the
    // manifest's lease must still be the WorkItem's current Execution Lease
    // (`artifacts/binding.rs`), so a lease released in between publishes nothing.
    pub(crate) async fn publish_with_token(
        &self,
        envelope: Envelope,
        grant: &Grant,
    ) -> Result<(Published, bool), Error> {
        grant.require(TokenScope::ArtifactPublish)?;
        let (signed, grant) = self.grant_publishes(&envelope, grant).await?;
        let verified = self.may_publish(signed, &envelope, &grant.reader())?;
        self.publish_verified(verified).await
    }

    /// Publishes with its bytes under a token: scopes `blob:write` and `artifact:publish`, a
    /// manifest of the lease's WorkItem naming the lease, then as the lease owner's session.
    pub(crate) async fn publish_with_content_and_token<S>(
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
        Ok((signed, self.recheck_grant(grant).await?))
    }

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
