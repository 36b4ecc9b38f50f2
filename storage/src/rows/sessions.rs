//! The `sessions` table: the only SQL that names it. A session is found by the hash of its
//! bearer token (never the token itself); the look-up joins its Agent (`agents`) to know
//! whether the Agent was deactivated. Its deadline is kept as the text callers show, and
//! compared as time ([`SessionRow::expired`]).

use crate::sql::{Connection, OptionalExtension as _, params};
use chrono::{DateTime, Utc};

use super::instant;
use crate::clock::format_instant;
use crate::error::Error;
use crate::sql::Cached as _;

/// A `sessions` row as a bearer's look-up reads it.
pub(crate) struct SessionRow {
    pub(crate) agent_id: String,
    pub(crate) group_id: String,
    pub(crate) session_epoch: u64,
    pub(crate) membership_epoch: u64,
    pub(crate) expires_at: String,
    /// Its Agent was deactivated.
    pub(crate) agent_deactivated: bool,
}

impl SessionRow {
    /// The session's deadline has passed at `now`.
    pub(crate) fn expired(&self, now: DateTime<Utc>) -> Result<bool, Error> {
        Ok(instant(&self.expires_at)? <= now)
    }
}

/// The session whose token hashes to `token_hash`, if there is one.
pub(crate) fn by_hash(
    conn: &Connection,
    token_hash: &[u8; 32],
) -> Result<Option<SessionRow>, Error> {
    Ok(conn
        .row(
            "SELECT s.agent_id, s.group_id, s.session_epoch, s.membership_epoch, s.expires_at,
                    a.deactivated_at IS NOT NULL
             FROM sessions s JOIN agents a ON a.agent_id = s.agent_id
             WHERE s.token_hash = ?1",
            [&token_hash[..]],
            |row| {
                Ok(SessionRow {
                    agent_id: row.get(0)?,
                    group_id: row.get(1)?,
                    session_epoch: row.get(2)?,
                    membership_epoch: row.get(3)?,
                    expires_at: row.get(4)?,
                    agent_deactivated: row.get(5)?,
                })
            },
        )
        .optional()?)
}

/// The token hash of `agent_id`'s session of epoch `session_epoch` in `group_id`.
pub(crate) fn hash_of(
    conn: &Connection,
    agent_id: &str,
    group_id: &str,
    session_epoch: u64,
) -> Result<Option<Vec<u8>>, Error> {
    Ok(conn
        .row(
            "SELECT token_hash FROM sessions WHERE agent_id = ?1 AND group_id = ?2 AND session_epoch = ?3",
            params![agent_id, group_id, session_epoch],
            |row| row.get(0),
        )
        .optional()?)
}

/// A new session.
pub(crate) struct NewSession<'a> {
    pub(crate) token_hash: &'a [u8; 32],
    pub(crate) agent_id: &'a str,
    pub(crate) group_id: &'a str,
    pub(crate) session_epoch: u64,
    pub(crate) membership_epoch: u64,
    pub(crate) expires_at: DateTime<Utc>,
}

pub(crate) fn insert(conn: &Connection, new: &NewSession<'_>) -> Result<(), Error> {
    conn.run(
        "INSERT INTO sessions (token_hash, agent_id, group_id, session_epoch, membership_epoch, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            &new.token_hash[..],
            new.agent_id,
            new.group_id,
            new.session_epoch,
            new.membership_epoch,
            format_instant(new.expires_at)
        ],
    )?;
    Ok(())
}

/// Moves the expiry of the session `token_hash` (a renewal: same token, same epochs).
pub(crate) fn extend(
    conn: &Connection,
    token_hash: &[u8; 32],
    expires_at: DateTime<Utc>,
) -> Result<(), Error> {
    conn.run(
        "UPDATE sessions SET expires_at = ?2 WHERE token_hash = ?1",
        params![&token_hash[..], format_instant(expires_at)],
    )?;
    Ok(())
}

/// Ends every session of Agent `agent_id`.
pub(crate) fn delete_of_agent(conn: &Connection, agent_id: &str) -> Result<(), Error> {
    conn.run("DELETE FROM sessions WHERE agent_id = ?1", [agent_id])?;
    Ok(())
}

/// Forgets sessions that expired before `cutoff` (an instant as `format_instant` writes it),
/// at most `limit`: their tokens authenticate nothing (issue #46). Answers how many.
pub(crate) fn forget_expired_before(
    conn: &Connection,
    cutoff: &str,
    limit: u64,
) -> Result<u64, Error> {
    let removed = conn.run(
        "DELETE FROM sessions WHERE token_hash IN (
             SELECT token_hash FROM sessions WHERE expires_at < ?1 LIMIT ?2)",
        params![cutoff, limit],
    )?;
    Ok(removed as u64)
}

/// How many sessions there are.
pub(crate) fn count(conn: &Connection) -> Result<u64, Error> {
    Ok(conn.row("SELECT COUNT(*) FROM sessions", [], |row| row.get(0))?)
}
