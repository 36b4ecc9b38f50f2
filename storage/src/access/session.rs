//! A live session as every feature sees its caller ([`Session`]), and the one check that a
//! session's bearer token still names a live session ([`live_session`]): by its rows, on the
//! caller's connection. Opening sessions and their cache are the sessions feature's
//! (`sessions.rs`).

use crate::sql::Connection;
use weft_api::{ErrorCode, Id};

use super::{MissionScope, Reader, scope_of};
use crate::error::{Error, reject};

/// A live session, resolved from its bearer token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    pub agent_id: Id,
    pub group_id: Id,
    pub session_epoch: u64,
    pub membership_epoch: u64,
    /// The Missions its Membership covers (CTX-5). A change of scope bumps the Membership's
    /// epoch, so a live session's scope is the one it was opened under.
    pub scope: MissionScope,
    /// The Membership's roles and the session's expiry, as read when the token was resolved
    /// (what `GET /v1/session` shows its holder).
    pub roles: Vec<weft_api::session::Role>,
    pub expires_at: String,
    /// blake3 of the bearer token: the row a stream re-checks.
    token_hash: [u8; 32],
}

impl Session {
    /// What this session may read: its own Group's publications, of the Missions its
    /// Membership covers, nothing of its Agent's other Groups.
    pub fn reader(&self) -> Reader {
        Reader::Agent {
            agent_id: self.agent_id.clone(),
            group_id: self.group_id.clone(),
            scope: self.scope.clone(),
        }
    }

    /// blake3 of its bearer token: the row a write re-checks (`acting.rs`).
    pub(crate) fn token_hash(&self) -> [u8; 32] {
        self.token_hash
    }
}

/// The session behind `token_hash`, if it is live at `now`.
pub(crate) fn live_session(
    conn: &Connection,
    token_hash: [u8; 32],
    now: &str,
) -> Result<Session, Error> {
    let Some(row) = crate::rows::sessions::by_hash(conn, &token_hash)? else {
        return Err(reject(ErrorCode::Unauthorized, "unknown or revoked token"));
    };
    if row.agent_deactivated {
        return Err(reject(ErrorCode::Unauthorized, "the agent was deactivated"));
    }
    if row.expired(crate::rows::instant(now)?)? {
        return Err(reject(ErrorCode::Unauthorized, "the session has expired"));
    }
    let crate::rows::sessions::SessionRow {
        agent_id,
        group_id,
        session_epoch,
        membership_epoch,
        expires_at,
        ..
    } = row;
    // The Membership (roles, epoch and Mission scope in one read) and the session epoch,
    // sent together: one round trip on PostgreSQL, not three.
    let membership =
        crate::rows::memberships::current_with_scope_ahead(conn, &group_id, &agent_id)?;
    let current_epoch = crate::rows::session_epochs::current_ahead(conn, &agent_id, &group_id)?;
    let (roles, missions) = match membership.get(conn)? {
        Some((roles, epoch, missions)) if epoch == membership_epoch => (roles, missions),
        Some(_) => {
            return Err(reject(
                ErrorCode::StaleMembership,
                "the membership changed since this session was opened",
            ));
        }
        None => {
            return Err(reject(
                ErrorCode::StaleMembership,
                "the membership this session was opened under was removed",
            ));
        }
    };
    let current_epoch = current_epoch
        .get(conn)?
        .ok_or_else(|| Error::from(crate::sql::SqlError::NoRows))?;
    if current_epoch != session_epoch {
        return Err(reject(
            ErrorCode::StaleSession,
            "a newer session replaced this one",
        ));
    }
    let scope = scope_of(missions)?;
    Ok(Session {
        agent_id: Id::parse("agentId", &agent_id)?,
        group_id: Id::parse("groupId", &group_id)?,
        session_epoch,
        membership_epoch,
        scope,
        roles,
        expires_at,
        token_hash,
    })
}
