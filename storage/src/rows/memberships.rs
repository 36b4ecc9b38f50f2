//! The `memberships` table: the only SQL that names it. A Membership's roles, epoch and
//! Mission scope (CTX-5); a removed one keeps its row (and its epoch keeps counting), marked
//! `removed_at`. (Its `missions` column is a Membership's scope, not the `missions` table:
//! the tidy table check reads the word as the table, so this file is listed for it.)

use crate::sql::{Ahead, Connection, OptionalExtension as _, params};
use weft_api::session::Role;

use super::from_json;
use crate::error::Error;
use crate::sql::Cached as _;

/// Roles and epoch of a current Membership (`None` once removed).
pub(crate) fn current(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
) -> Result<Option<(Vec<Role>, u64)>, Error> {
    Ok(current_with_scope(conn, group_id, agent_id)?.map(|(roles, epoch, _)| (roles, epoch)))
}

/// A current Membership as a Command checks it: roles, epoch, and Mission scope (a JSON
/// list; `None`: the whole Group).
pub(crate) type Current = (Vec<Role>, u64, Option<String>);

/// A current Membership's roles, epoch and Mission scope in one read: what a Command checks
/// (issue #41, one load per row).
pub(crate) fn current_with_scope(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
) -> Result<Option<Current>, Error> {
    current_with_scope_ahead(conn, group_id, agent_id)?.get(conn)
}

/// [`current_with_scope`], sent ahead (`sql/ahead.rs`).
pub(crate) fn current_with_scope_ahead(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
) -> Result<Ahead<Option<Current>, Error>, Error> {
    type Raw = (String, u64, Option<String>);
    let rows = conn.rows_ahead(
        "SELECT roles, epoch, missions FROM memberships
         WHERE group_id = ?1 AND agent_id = ?2 AND removed_at IS NULL",
        params![group_id, agent_id],
        |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, u64>(1)?,
                row.get::<_, Option<String>>(2)?,
            ))
        },
    )?;
    Ok(rows.then(|rows: Vec<Raw>| {
        rows.into_iter()
            .next()
            .map(|(roles, epoch, missions)| Ok((from_json(&roles)?, epoch, missions)))
            .transpose()
    }))
}

/// The Mission scope (a JSON list; `None`: the whole Group) of a current Membership, if
/// there is one.
pub(crate) fn scope(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
) -> Result<Option<Option<String>>, Error> {
    Ok(conn
        .row(
            "SELECT missions FROM memberships
             WHERE group_id = ?1 AND agent_id = ?2 AND removed_at IS NULL",
            params![group_id, agent_id],
            |row| row.get(0),
        )
        .optional()?)
}

/// The epoch of a Membership, removed or not.
pub(crate) fn any_epoch(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
) -> Result<Option<u64>, Error> {
    Ok(conn
        .row(
            "SELECT epoch FROM memberships WHERE group_id = ?1 AND agent_id = ?2",
            params![group_id, agent_id],
            |row| row.get(0),
        )
        .optional()?)
}

/// Sets (or restores) a Membership: its roles and scope as JSON, at `epoch`.
pub(crate) fn upsert(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
    roles_json: &str,
    epoch: u64,
    missions_json: Option<&str>,
) -> Result<(), Error> {
    conn.run(
        "INSERT INTO memberships (group_id, agent_id, roles, epoch, missions) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (group_id, agent_id)
         DO UPDATE SET roles = excluded.roles, epoch = excluded.epoch, missions = excluded.missions,
                       removed_at = NULL",
        params![group_id, agent_id, roles_json, epoch, missions_json],
    )?;
    Ok(())
}

/// Ends a Membership at `at`, at epoch `epoch`.
pub(crate) fn remove(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
    epoch: u64,
    at: &str,
) -> Result<(), Error> {
    conn.run(
        "UPDATE memberships SET epoch = ?3, removed_at = ?4 WHERE group_id = ?1 AND agent_id = ?2",
        params![group_id, agent_id, epoch, at],
    )?;
    Ok(())
}

/// The Groups Agent `agent_id` is a current member of, in id order.
pub(crate) fn current_groups(conn: &Connection, agent_id: &str) -> Result<Vec<String>, Error> {
    let groups = conn.rows("SELECT group_id FROM memberships WHERE agent_id = ?1 AND removed_at IS NULL ORDER BY group_id", [agent_id], |row| row.get::<_, String>(0))?;
    Ok(groups)
}

/// One live Membership: Group, Agent, roles (JSON), epoch, scope (JSON).
pub(crate) type LiveRow = (String, String, String, u64, Option<String>);

fn live(conn: &Connection, sql: &str, value: &str) -> Result<Vec<LiveRow>, Error> {
    let rows = conn.rows(sql, params![value], |row| {
        Ok((
            row.get(0)?,
            row.get(1)?,
            row.get(2)?,
            row.get(3)?,
            row.get(4)?,
        ))
    })?;
    Ok(rows)
}

/// Group `group_id`'s live Memberships, by Agent.
pub(crate) fn live_of_group(conn: &Connection, group_id: &str) -> Result<Vec<LiveRow>, Error> {
    live(
        conn,
        "SELECT group_id, agent_id, roles, epoch, missions FROM memberships
         WHERE group_id = ?1 AND removed_at IS NULL ORDER BY group_id, agent_id",
        group_id,
    )
}

/// Agent `agent_id`'s live Memberships, by Group.
pub(crate) fn live_of_agent(conn: &Connection, agent_id: &str) -> Result<Vec<LiveRow>, Error> {
    live(
        conn,
        "SELECT group_id, agent_id, roles, epoch, missions FROM memberships
         WHERE agent_id = ?1 AND removed_at IS NULL ORDER BY group_id, agent_id",
        agent_id,
    )
}

/// How many Memberships there are, removed or not.
pub(crate) fn count(conn: &Connection) -> Result<u64, Error> {
    Ok(conn.row("SELECT COUNT(*) FROM memberships", [], |row| row.get(0))?)
}
