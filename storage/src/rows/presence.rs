//! The `presence` table: the only SQL that names it. Each member's last Presence report per
//! Group (SCH-11): free slots, capacity state and when it came. Not authoritative: nothing
//! the Authority decides reads it; `directory/cards.rs` writes and reads it.

use crate::sql::{Connection, OptionalExtension as _, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// When Agent `agent_id` last reported in Group `group_id` (Unix milliseconds), if ever.
pub(crate) fn reported_ms(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
) -> Result<Option<i64>, Error> {
    Ok(conn
        .row(
            "SELECT reported_ms FROM presence WHERE group_id = ?1 AND agent_id = ?2",
            params![group_id, agent_id],
            |row| row.get(0),
        )
        .optional()?)
}

/// A report to store.
pub(crate) struct Stored<'a> {
    pub(crate) free_slots: u32,
    pub(crate) capacity_state: &'a str,
    pub(crate) reported_ms: i64,
    pub(crate) reported_at: &'a str,
    /// JSON.
    pub(crate) schedules: &'a str,
}

/// Stores `report` as `agent_id`'s Presence in `group_id`, unless the stored one was reported
/// after `not_after_ms` (the rate's window): whether it was stored. The row decides, so two
/// reports through two servers at once are not both taken inside one window.
pub(crate) fn set(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
    report: &Stored<'_>,
    not_after_ms: i64,
) -> Result<bool, Error> {
    let Stored {
        free_slots,
        capacity_state,
        reported_ms,
        reported_at,
        schedules,
    } = *report;
    let changed = conn.run(
        "INSERT INTO presence (group_id, agent_id, free_slots, capacity_state, reported_ms, reported_at, schedules)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (group_id, agent_id) DO UPDATE SET free_slots = excluded.free_slots,
             capacity_state = excluded.capacity_state, reported_ms = excluded.reported_ms,
             reported_at = excluded.reported_at, schedules = excluded.schedules
         WHERE presence.reported_ms <= ?8",
        params![group_id, agent_id, free_slots, capacity_state, reported_ms, reported_at, schedules, not_after_ms],
    )?;
    Ok(changed > 0)
}

/// One report as stored: (agent, free slots, capacity state, reported at, schedules JSON).
pub(crate) type Report = (String, u32, String, String, String);

/// Every report of Group `group_id`, by agent.
pub(crate) fn of_group(conn: &Connection, group_id: &str) -> Result<Vec<Report>, Error> {
    Ok(conn.rows(
        "SELECT agent_id, free_slots, capacity_state, reported_at, schedules FROM presence
         WHERE group_id = ?1 ORDER BY agent_id",
        [group_id],
        |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
            ))
        },
    )?)
}

/// Forgets Agent `agent_id`'s report in Group `group_id` (its Membership ended).
pub(crate) fn forget(conn: &Connection, group_id: &str, agent_id: &str) -> Result<(), Error> {
    conn.run(
        "DELETE FROM presence WHERE group_id = ?1 AND agent_id = ?2",
        params![group_id, agent_id],
    )?;
    Ok(())
}

/// Forgets every report of Agent `agent_id` (it was deactivated).
pub(crate) fn forget_agent(conn: &Connection, agent_id: &str) -> Result<(), Error> {
    conn.run("DELETE FROM presence WHERE agent_id = ?1", [agent_id])?;
    Ok(())
}
