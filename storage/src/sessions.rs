//! Sessions: opening one from a signed request, resolving a bearer token to a live
//! [`Session`] (what makes one live is `access/session.rs`), re-checking a session a
//! long-lived stream was opened with, and the signal that tells such streams to re-check at
//! once.
//!
//! **Invariant:** a session acts in its own Group only, and is live only while its session
//! epoch is the newest of its (Agent, Group), its Membership is the one it was opened under
//! (same epoch, not removed), its Agent is active and it has not expired. Every change that can
//! end a session (a new session, a Membership set or removed, an Agent deactivated, a key
//! rotated) moves `Engine::auth_generation` after its commit, and so does an Agent's registration
//! (a new Agent or card version), which the key cache (`keys.rs`) follows.

mod cache;
pub(crate) mod handle;

pub(crate) use cache::SessionCache;

use base64::Engine as _;
use weft_api::kinds;
use weft_api::session::SessionGrant;
use weft_api::{Envelope, ErrorCode, EventPayload, SessionRequest};

use crate::access::session::live_session;
use crate::access::{Session, group_exists, membership};
use crate::clock::format_instant;
use crate::error::{Error, reject};
use crate::events;
use crate::sessions::handle::Sessions;
use crate::signatures::{AuthorityMay, Signed};

/// A session request as far as [`Sessions::checked_request`] checks it.
struct Checked {
    agent_id: weft_api::Id,
    keyid: weft_api::KeyId,
    request: SessionRequest,
    now: chrono::DateTime<chrono::Utc>,
}

/// First in a session's transaction: the Group's lock (the Membership and epochs read after
/// it are the ones a concurrent change through another server leaves), the Agent's row
/// shared against a rotation or deactivation (`rows::agents::share`), and `keyid` still the
/// current key of the active Agent `agent_id`. The key was checked before the transaction;
/// a rotation committed since (which ended the Agent's sessions) must not be followed by a
/// session its old key opened.
fn signed_by_current_key(
    txn: &crate::unit::Tx<'_>,
    group_id: &str,
    keyid: &weft_api::KeyId,
    agent_id: &weft_api::Id,
) -> Result<(), Error> {
    crate::rows::groups::lock(txn, group_id)?;
    crate::rows::agents::share(txn, agent_id.as_str())?;
    let holder = crate::rows::agents::active_id_by_keyid_ahead(txn, keyid.as_str())?;
    match holder.get(txn)? {
        Some(holder) if holder == agent_id.as_str() => Ok(()),
        // Refused as the door refuses it: a retired key, or a deactivated Agent.
        _ => Err(crate::access::key_refusal(txn, keyid)?),
    }
}

impl Sessions<'_> {
    /// A signed session request checked as far as needs no transaction: its signature (and
    /// so its Agent and the key it signed with), the login rate, and `issuedAt` within the
    /// allowed skew. The transaction checks the key again (`signed_by_current_key`): a key
    /// rotated, or an Agent deactivated, after this check opens or renews nothing.
    async fn checked_request(&self, envelope: &Envelope) -> Result<Checked, Error> {
        let Signed {
            signer: agent_id,
            keyid,
            value,
            ..
        } = self
            .engine
            .verify_signed::<SessionRequest>(envelope, AuthorityMay::NotSign)
            .await?;
        let request = value.into_inner();
        let now = self.engine.clock.now();
        // Rate-limited per Agent only now that its signature checked out (limits.rs).
        self.engine.limits.admit_login(agent_id.as_str(), now)?;
        // In milliseconds: whole seconds would let a request dated up to 0.999 s past the
        // window through, and outlive its nonce's keep (issue #40).
        let skew_ms = (now - request.issued_at.to_utc()).num_milliseconds().abs();
        if skew_ms > weft_api::session::MAX_CLOCK_SKEW_SECONDS * 1000 {
            return Err(reject(
                ErrorCode::ClockSkew,
                "issuedAt is more than 5 minutes from the server clock",
            ));
        }
        Ok(Checked {
            agent_id,
            keyid,
            request,
            now,
        })
    }

    /// Renews `session` (issue #48): a fresh signed session request by its own Agent for its
    /// own Group moves its expiry to a full lifetime from now. The token and both epochs stay,
    /// so its leases and streams go on (a new session would revoke the leases, LSE-9). The
    /// request's nonce is spent like a login's; a session that is no longer live (replaced,
    /// Membership changed, expired) cannot be renewed. No Event: the expiry of a bearer is
    /// the server's credential state, like the token itself, not a change the log orders.
    /// Answers the new expiry.
    pub async fn renew_session(
        &self,
        session: &Session,
        envelope: Envelope,
    ) -> Result<chrono::DateTime<chrono::Utc>, Error> {
        let Checked {
            agent_id,
            keyid,
            request,
            now: _,
        } = self.checked_request(&envelope).await?;
        if agent_id != session.agent_id || request.group_id != session.group_id {
            return Err(reject(
                ErrorCode::ProducerMismatch,
                "a session is renewed by a request of its own Agent for its own Group",
            ));
        }
        let token_hash = session.token_hash();
        let (clock, ttl) = (
            std::sync::Arc::clone(&self.engine.clock),
            self.engine.session_ttl,
        );
        let expires_at = self
            .engine
            .db
            .write(move |txn| {
                // Judged, and the new expiry counted, at the time the Group's lock is held
                // (a wait for another server's batch may be long).
                crate::rows::groups::lock(txn, request.group_id.as_str())?;
                let now = clock.now();
                live_session(txn, token_hash, &format_instant(now))?;
                signed_by_current_key(txn, request.group_id.as_str(), &keyid, &agent_id)?;
                spend_nonce(txn, agent_id.as_str(), &request.nonce, now)?;
                let expires_at = now + ttl;
                crate::rows::sessions::extend(txn, &token_hash, expires_at)?;
                Ok(expires_at)
            })
            .await?;
        // Cached look-ups hold the old expiry; they are read again.
        self.engine.auth_changed();
        Ok(expires_at)
    }

    /// Verifies a signed session request and opens a session (DESIGN §8.1).
    pub async fn open_session(&self, envelope: Envelope) -> Result<SessionGrant, Error> {
        let Checked {
            agent_id,
            keyid,
            request,
            now,
        } = self.checked_request(&envelope).await?;
        let token_bytes: [u8; 32] = rand::random();
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token_bytes);
        let token_hash = *blake3::hash(token.as_bytes()).as_bytes();
        let expires_at = now + self.engine.session_ttl;
        let deadlines = self.engine.deadlines.clone();
        let revoke = self.engine.on_session_replaced;
        let grant = self
            .engine
            .db
            .write(move |txn| {
                if !group_exists(txn, request.group_id.as_str())? {
                    return Err(reject(
                        ErrorCode::UnknownGroup,
                        format!("group {} does not exist", request.group_id),
                    ));
                }
                signed_by_current_key(txn, request.group_id.as_str(), &keyid, &agent_id)?;
                let Some((_, membership_epoch)) =
                    membership(txn, request.group_id.as_str(), agent_id.as_str())?
                else {
                    return Err(reject(
                        ErrorCode::NotAMember,
                        format!("{agent_id} is not a member of {}", request.group_id),
                    ));
                };
                spend_nonce(txn, agent_id.as_str(), &request.nonce, now)?;
                let session_epoch = crate::rows::session_epochs::bump(
                    txn,
                    agent_id.as_str(),
                    request.group_id.as_str(),
                )?;
                crate::rows::sessions::insert(
                    txn,
                    &crate::rows::sessions::NewSession {
                        token_hash: &token_hash,
                        agent_id: agent_id.as_str(),
                        group_id: request.group_id.as_str(),
                        session_epoch,
                        membership_epoch,
                        expires_at,
                    },
                )?;
                events::append(
                    txn,
                    &request.group_id,
                    &EventPayload::SessionOpened(kinds::SessionOpened {
                        agent_id: agent_id.clone(),
                        membership_epoch,
                        session_epoch,
                    }),
                    now,
                )?;
                // LSE-9 / GAP-1: the replaced session's Execution Leases end here, in the
                // transaction that opens the new one, so no new lease can start first.
                let touched = revoke(
                    txn,
                    request.group_id.as_str(),
                    agent_id.as_str(),
                    session_epoch,
                    now,
                )?;
                for (work_item_id, next) in touched {
                    if let Some(at) = next {
                        deadlines.note(&work_item_id, at);
                    }
                }
                Ok(SessionGrant {
                    token,
                    session_epoch,
                    membership_epoch,
                    expires_at,
                })
            })
            .await?;
        // The replaced session's streams end now, not at their next request.
        self.engine.auth_changed();
        Ok(grant)
    }

    /// Resolves a bearer token to a live session: from the cache while nothing that can end a
    /// session has committed since its entry was read, else from the index.
    pub async fn authenticate(&self, token: &str) -> Result<Session, Error> {
        let token_hash = *blake3::hash(token.as_bytes()).as_bytes();
        // The generation before the read: a change committed after it moves the generation,
        // so what this read saw is never served once that change has been answered.
        let generation = *self.engine.auth_generation.borrow();
        let now = self.engine.clock.now();
        // A shared index silent for a while may hide a revocation: the cache waits for it.
        if self.engine.contact.current()
            && let Some(session) = self.cache.get(&token_hash, generation, now)
        {
            return Ok(session);
        }
        let now = format_instant(now);
        let session = self
            .engine
            .db
            .read(move |conn| live_session(conn, token_hash, &now))
            .await?;
        self.cache.put(token_hash, generation, session.clone());
        Ok(session)
    }

    /// Whether `session` is still live (for a stream opened with it): the same answer its
    /// token would get on a new request now.
    pub async fn recheck(&self, session: &Session) -> Result<(), Error> {
        let token_hash = session.token_hash();
        let now = format_instant(self.engine.clock.now());
        self.engine
            .db
            .read(move |conn| live_session(conn, token_hash, &now).map(|_| ()))
            .await
    }

    /// Changes whenever some session may have ended (a new session, a Membership set or
    /// removed, an Agent deactivated, a key rotated): streams re-check theirs then.
    pub fn auth_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.engine.auth_generation.subscribe()
    }
}

/// Spends a session request's nonce in the transaction that acts on it: a second use of the
/// same request (to open or to renew) is `nonce_reused`.
fn spend_nonce(
    txn: &crate::sql::Connection,
    agent_id: &str,
    nonce: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), Error> {
    if crate::rows::session_nonces::insert_fresh(txn, agent_id, nonce, now)? {
        Ok(())
    } else {
        Err(reject(
            ErrorCode::NonceReused,
            "this session request was already used",
        ))
    }
}
