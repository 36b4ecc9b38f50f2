//! A capability token as every feature sees its bearer ([`Grant`]), and the one check that a
//! token still acts ([`resolve`]): unrevoked and unexpired, its lease a live Execution Lease
//! whose WorkItem its Agent still owns under the lease's ownership epoch, and the session the
//! lease runs under live, all re-read from the rows at the moment of use. Issuing, rotating
//! and revoking tokens are the work feature's (`work/tokens.rs`).

use crate::sql::Connection;
use chrono::{DateTime, Utc};
use weft_api::work::views::TokenScope;
use weft_api::{ErrorCode, Id};

use super::Reader;
use super::session::{Session, live_session};
use crate::clock::format_instant;
use crate::error::{Error, reject};
use crate::rows::capability_tokens::{self, TokenRow};
use crate::rows::leases::{self, Lease, Refusal, WorkItemOf};

/// Every capability token starts with this; a session token never does ('.' is not in the
/// base64url alphabet they are drawn from), so the server tells the two apart unread.
pub(crate) const PREFIX: &str = "cap.";

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
    pub(crate) fn require_subject(
        &self,
        group: &Id,
        mission: &Id,
        work_item: &Id,
    ) -> Result<(), Error> {
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
pub(crate) struct LeaseRow {
    pub(crate) lease: Lease,
    pub(crate) work_item: WorkItemOf,
}

impl LeaseRow {
    /// Why the lease no longer lets anyone act at `now`, if it does not: the lease rule
    /// (`leases::Lease::admits`) for the lease's own Agent, acting for the WorkItem.
    pub(crate) fn dead_at(&self, now: DateTime<Utc>) -> Option<&'static str> {
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

pub(crate) fn lease_row(conn: &Connection, lease_id: &str) -> Result<Option<LeaseRow>, Error> {
    Ok(leases::load_with_work_item(conn, lease_id)?
        .map(|(lease, work_item)| LeaseRow { lease, work_item }))
}

/// The live grant of the token hashing to `token_hash` at `now`, or why it is dead
/// (`unauthorized`, or the session's own `stale_session`/`stale_membership`).
/// [`resolve`], for a write's transaction (`acting.rs`): whether the token (and its owner's
/// session and lease) is still good at `now`.
/// The token is held against its revocation until the transaction ends
/// (`capability_tokens::hold`): a revocation answered before this write commits is seen here.
pub(crate) fn still_live(conn: &Connection, token_hash: [u8; 32], now: &str) -> Result<(), Error> {
    capability_tokens::hold(conn, &token_hash)?;
    resolve(conn, token_hash, now).map(|_| ())
}

/// `now` is a `format_instant` text: the session and token rows compare it as their own
/// instants are written; the lease rule compares it as time.
pub(crate) fn resolve(conn: &Connection, token_hash: [u8; 32], now: &str) -> Result<Grant, Error> {
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
        // Its own end, or its lease's, whichever comes first (LSE-7).
        expires_at: format_instant(expires_at.min(lease.lease.expires_at)),
        session,
        token_hash,
    })
}
