//! The `cursors` table: the only SQL that names it. Each Agent's delivery cursor in a Group
//! (DLV-6): the sequence it has processed through, which only moves forward (the rule is the
//! caller's, `delivery.rs`).

use crate::sql::{Connection, OptionalExtension as _, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// Agent `agent_id`'s cursor in Group `group_id`, if it has one.
pub(crate) fn get(conn: &Connection, group_id: &str, agent_id: &str) -> Result<Option<u64>, Error> {
    Ok(conn
        .row(
            "SELECT sequence FROM cursors WHERE group_id = ?1 AND agent_id = ?2",
            params![group_id, agent_id],
            |row| row.get(0),
        )
        .optional()?)
}

/// Moves `agent_id`'s cursor in `group_id` to `sequence` if that is past where it is (or sets
/// it, the first time), at `updated_at`; whether it moved. Never backwards (DLV-6), even when
/// two servers take an ACK each at once: the row's own value decides, under its lock.
pub(crate) fn advance(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
    sequence: u64,
    updated_at: &str,
) -> Result<bool, Error> {
    let changed = conn.run(
        "INSERT INTO cursors (group_id, agent_id, sequence, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (group_id, agent_id) DO UPDATE SET sequence = excluded.sequence, updated_at = excluded.updated_at
         WHERE cursors.sequence < excluded.sequence",
        params![group_id, agent_id, sequence, updated_at],
    )?;
    Ok(changed > 0)
}

/// The cursors of Group `group_id` by Agent: every one with `all`, else `agent_id`'s only.
pub(crate) fn list(
    conn: &Connection,
    group_id: &str,
    all: bool,
    agent_id: &str,
) -> Result<Vec<(String, u64)>, Error> {
    Ok(conn.rows(
        "SELECT agent_id, sequence FROM cursors WHERE group_id = ?1 AND (?2 <> 0 OR agent_id = ?3) ORDER BY agent_id",
        params![group_id, all, agent_id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?)
}
