//! Capability tokens (DESIGN §10, LSE-6/7): narrowed opaque bearer secrets (not signed
//! credentials, PD-20: a signature would only serve an offline verifier, and revocation must
//! take effect at once) bound to an Execution Lease, issued to the lease's owner session, rotated or revoked while the lease stays, and
//! accepted for blob uploads, publication and Evidence of the lease's WorkItem only.
//!
//! **Invariant:** a token acts only while, at the moment of use, it is unrevoked and unexpired,
//! its lease is an unreleased, unexpired Execution Lease whose WorkItem its Agent still owns
//! under the lease's ownership epoch, and the session the lease runs under is live. Nothing
//! relies on a sweep: every use re-reads those rows (`access/grant.rs`, which every feature
//! a token acts in asks; publishing and recording Evidence under one are
//! `artifacts/with_token.rs` and `evidence/with_token.rs`).
//! **Invariant:** only the blake3 of a token is stored, as for sessions.
//!
//! Issuing, rotating and revoking tokens append no Event: tokens are credentials, like session
//! tokens, not Mission or WorkItem state. What a token did is in the log as the publication or
//! Evidence it carried, under its lease's Agent.
//!
//! This module does not know HTTP routes: the server decides which routes take a token, and
//! asks `Grant::require` for the scope each needs.

use crate::sql::Connection;
use base64::Engine as _;
use weft_api::work::views::{TokenIssued, TokenRequest};
use weft_api::{ErrorCode, Id};

use crate::access::Session;
use crate::access::grant::{Grant, LeaseRow, PREFIX, lease_row, resolve};
use crate::clock::format_instant;
use crate::error::{Error, reject};
use crate::rows::capability_tokens;
use crate::work::handle::Work;

/// The longest `ttlSeconds` looked at: a week. Every use also ends a token at its lease's end;
/// the row keeps the token's own end, so a token of a lease renewed for longer is rotated
/// (`replaces`), and a token's row is forgotten at most this long after its lease ended
/// (`lifespan/spent.rs`).
const MAX_TTL_SECONDS: u64 = 7 * 86_400;

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

impl Work<'_> {
    /// Issues a token for lease `lease_id` to its owner `session` (LSE-6), expiring at the
    /// earlier of `ttlSeconds` from now and the lease's expiry (LSE-7); with `replaces`, the
    /// named token of the same lease is revoked in the same transaction (rotation).
    pub async fn issue_token(
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
        let clock = std::sync::Arc::clone(&self.0.clock);
        let ttl = request.ttl_seconds.min(MAX_TTL_SECONDS);
        let token_bytes: [u8; 32] = rand::random();
        let token = format!(
            "{PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token_bytes)
        );
        let token_hash = *blake3::hash(token.as_bytes()).as_bytes();
        let token_id = format!("tok-{}", uuid::Uuid::now_v7());
        let session = session.clone();
        let replaces = request.replaces;
        self.0
            .db
            .write(move |txn| {
                // The lease is judged, and the token dated, when the job runs.
                let now = clock.now();
                // In range: MAX_TTL_SECONDS fits an i64 by far.
                let wanted = now + chrono::Duration::seconds(ttl as i64);
                let lease = owned_lease(txn, lease_id.as_str(), &session)?;
                if let Some(why) = lease.dead_at(now) {
                    return Err(reject(
                        ErrorCode::StaleLease,
                        format!("lease {lease_id}: {why}"),
                    ));
                }
                if let Some(old) = &replaces {
                    let revoked = capability_tokens::revoke(txn, old, lease_id.as_str(), now)?;
                    // Its row is locked now: no later job of the batch takes a Group's lock
                    // under it (a use holds a Group's lock, then shares this row).
                    txn.loaded().note_row_lock("token");
                    if !revoked {
                        return Err(reject(
                            ErrorCode::NotFound,
                            format!("lease {lease_id} has no token {old} to replace"),
                        ));
                    }
                }
                // LSE-7: never past the lease. The row keeps the token's own end; every use
                // also ends it at its lease's end (`access/grant.rs`), however often the lease
                // is renewed: a token clamped for good to the expiry its lease had at issue died
                // one lease period into every longer run (the lease renewed, its token not).
                // The answer names the end as it stands now.
                let expires = wanted.min(lease.lease.expires_at);
                capability_tokens::insert(
                    txn,
                    &capability_tokens::NewToken {
                        token_hash: &token_hash,
                        token_id: &token_id,
                        lease_id: lease_id.as_str(),
                        scope: &scope,
                        issued_at: now,
                        expires_at: wanted,
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
    pub async fn revoke_token(
        &self,
        lease_id: Id,
        token_id: Id,
        session: &Session,
    ) -> Result<(), Error> {
        let now = self.0.clock.now();
        let session = session.clone();
        self.0
            .db
            .write(move |txn| {
                owned_lease(txn, lease_id.as_str(), &session)?;
                // The token's row is locked by the update: no later job of the batch takes a
                // Group's lock under it (a use holds a Group's lock, then shares this row).
                txn.loaded().note_row_lock("token");
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

    /// Resolves a capability token to what it may do now: its token, lease and lease owner's
    /// session are re-read at each call (`unauthorized` once any of them ended).
    pub async fn authorize_token(&self, token: &str) -> Result<Grant, Error> {
        let token_hash = *blake3::hash(token.as_bytes()).as_bytes();
        let now = format_instant(self.0.clock.now());
        self.0
            .db
            .read(move |conn| resolve(conn, token_hash, &now))
            .await
    }
}
