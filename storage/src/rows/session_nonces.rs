//! The `session_nonces` table: the only SQL that names it. Each session request's nonce is
//! kept for a while, so a replayed request is refused (`nonce_reused`).

use crate::sql::{Connection, params};
use chrono::{DateTime, Utc};

use crate::clock::format_instant;
use crate::error::Error;
use crate::sql::Cached as _;

/// Keeps `nonce` of `agent_id`, seen at `at`; answers whether it is new.
pub(crate) fn insert_fresh(
    conn: &Connection,
    agent_id: &str,
    nonce: &str,
    at: DateTime<Utc>,
) -> Result<bool, Error> {
    let fresh = conn.run(
        "INSERT OR IGNORE INTO session_nonces (agent_id, nonce, seen_at) VALUES (?1, ?2, ?3)",
        params![agent_id, nonce, format_instant(at)],
    )?;
    Ok(fresh > 0)
}

/// Forgets the nonces seen before `cutoff` (a `format_instant` text); answers how many.
pub(crate) fn forget_before(conn: &Connection, cutoff: &str) -> Result<u64, Error> {
    Ok(conn.run(
        "DELETE FROM session_nonces WHERE seen_at < ?1",
        params![cutoff],
    )? as u64)
}
