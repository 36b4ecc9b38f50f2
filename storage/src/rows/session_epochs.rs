//! The `session_epochs` table: the only SQL that names it. One row per (Agent, Group): the
//! epoch of its newest session; opening a session bumps it, which replaces the older one.

use crate::sql::{Ahead, Connection, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// The current session epoch of `agent_id` in `group_id`, if it ever opened one, sent ahead
/// (`sql/ahead.rs`).
pub(crate) fn current_ahead(
    conn: &Connection,
    agent_id: &str,
    group_id: &str,
) -> Result<Ahead<Option<u64>, Error>, Error> {
    let rows = conn.rows_ahead(
        "SELECT epoch FROM session_epochs WHERE agent_id = ?1 AND group_id = ?2",
        params![agent_id, group_id],
        |row| row.get::<_, u64>(0),
    )?;
    Ok(rows.then(|epochs: Vec<u64>| Ok(epochs.into_iter().next())))
}

/// Starts the next session epoch of `agent_id` in `group_id` (1 for its first) and answers it.
pub(crate) fn bump(conn: &Connection, agent_id: &str, group_id: &str) -> Result<u64, Error> {
    Ok(conn.row(
        "INSERT INTO session_epochs (agent_id, group_id, epoch) VALUES (?1, ?2, 1)
         ON CONFLICT (agent_id, group_id) DO UPDATE SET epoch = session_epochs.epoch + 1
         RETURNING epoch",
        params![agent_id, group_id],
        |row| row.get(0),
    )?)
}
