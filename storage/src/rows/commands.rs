//! The `commands` table: the only SQL that names it. What each accepted work Command's answer
//! keeps for a retry of the same bytes (`work/answer.rs`: its id, Events and aggregate), and
//! its signed envelope, under its id (DESIGN §10).

use crate::sql::{Connection, OptionalExtension as _, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// The request hash and answer (JSON) stored for Command `command_id` of `agent_id` in
/// `group_id` (or of the Authority, agent `''`, whose rows predate per-Agent ids).
pub(crate) fn stored(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
    command_id: &str,
) -> Result<Option<(Vec<u8>, String)>, Error> {
    Ok(conn
        .row(
            "SELECT request_hash, answer FROM commands
             WHERE group_id = ?1 AND command_id = ?3 AND agent_id IN (?2, '')
             ORDER BY agent_id DESC LIMIT 1",
            params![group_id, agent_id, command_id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?)
}

/// Keeps the answer (JSON) of an accepted Command, and its signed envelope (JSON), answered
/// at `now`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn insert(
    conn: &Connection,
    command_id: &str,
    group_id: &str,
    agent_id: &str,
    request_hash: &[u8],
    answer: &str,
    envelope: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), Error> {
    conn.run_later(
        "INSERT INTO commands (command_id, group_id, agent_id, request_hash, answer, envelope,
                               recorded_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            command_id,
            group_id,
            agent_id,
            request_hash,
            answer,
            envelope,
            crate::clock::format_instant(now)
        ],
    )?;
    Ok(())
}

/// Trims the answers of Commands answered before `cutoff` (an instant as
/// `clock::format_instant` writes it), at most `limit`: the row keeps its id, request hash
/// and signed envelope, so a replay is answered `command_expired`, never executed again.
/// Answers how many were trimmed.
pub(crate) fn trim_before(conn: &Connection, cutoff: &str, limit: u64) -> Result<u64, Error> {
    let trimmed = conn.run(
        "UPDATE commands SET answer = ''
         WHERE (group_id, agent_id, command_id) IN (
             SELECT group_id, agent_id, command_id FROM commands
             WHERE recorded_at < ?1 AND answer <> '' LIMIT ?2)",
        params![cutoff, limit],
    )?;
    Ok(trimmed as u64)
}

/// The Agents and signed envelopes (JSON) of the Commands `command_id` in `group_id`, by Agent
/// (a Command id is its Agent's, so two Agents may have used one); at most `limit`. A Command
/// accepted before envelopes were kept has none.
pub(crate) fn envelopes(
    conn: &Connection,
    group_id: &str,
    command_id: &str,
    limit: u32,
) -> Result<Vec<(String, Option<String>)>, Error> {
    Ok(conn.rows(
        "SELECT agent_id, envelope FROM commands WHERE group_id = ?1 AND command_id = ?2
         ORDER BY agent_id LIMIT ?3",
        params![group_id, command_id, limit],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?)
}
