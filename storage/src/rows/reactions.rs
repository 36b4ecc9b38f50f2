//! The `reactions` table: the only SQL that names it. One row per reaction owed after the
//! commit of the Event it follows (Group, sequence, kind, subject), deleted in the
//! transaction of the reaction's own work (`reactions.rs` has the rules).

use crate::sql::{Connection, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// One owed reaction, as its row says.
#[derive(Debug)]
pub(crate) struct Owed {
    pub(crate) group_id: String,
    /// The sequence of the Event reacted to.
    pub(crate) sequence: u64,
    pub(crate) kind: String,
    /// What the reaction is about (the WorkItem of a `work.submitted`).
    pub(crate) subject: String,
}

/// Notes a reaction owed to the Event at `sequence` of `group_id`.
pub(crate) fn insert(
    conn: &Connection,
    group_id: &str,
    sequence: u64,
    kind: &str,
    subject: &str,
) -> Result<(), Error> {
    conn.run(
        "INSERT INTO reactions (group_id, sequence, kind, subject) VALUES (?1, ?2, ?3, ?4)",
        params![group_id, sequence, kind, subject],
    )?;
    Ok(())
}

/// The owed rows after `after` (Group, sequence), in that order, at most `limit`.
pub(crate) fn after(
    conn: &Connection,
    after: Option<(&str, u64)>,
    limit: u32,
) -> Result<Vec<Owed>, Error> {
    let (group, sequence) = after.unwrap_or(("", 0));
    Ok(conn.rows(
        "SELECT group_id, sequence, kind, subject FROM reactions
         WHERE group_id > ?1 OR (group_id = ?1 AND sequence > ?2)
         ORDER BY group_id, sequence LIMIT ?3",
        params![group, sequence, limit],
        |row| {
            Ok(Owed {
                group_id: row.get(0)?,
                sequence: row.get(1)?,
                kind: row.get(2)?,
                subject: row.get(3)?,
            })
        },
    )?)
}

/// Deletes the reaction owed to the Event at `sequence` of `group_id`: whether it was there.
pub(crate) fn delete(conn: &Connection, group_id: &str, sequence: u64) -> Result<bool, Error> {
    let deleted = conn.run(
        "DELETE FROM reactions WHERE group_id = ?1 AND sequence = ?2",
        params![group_id, sequence],
    )?;
    Ok(deleted == 1)
}
