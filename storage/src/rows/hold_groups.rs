//! The `hold_groups` table: the Groups an operator's hold was placed in (issue #46), and the
//! only SQL that names it. Its Events, its lifting and its listing go to these Groups: a Group
//! that published the held bytes after the hold was placed never hears of it. An approver's
//! hold is its own Group's (`holds.group_id`) and has no rows here; so have the operator's
//! holds placed before schema version 48 (`lifespan/holds.rs` judges those by their target).

use crate::sql::{Connection, params};
use weft_api::Id;

use crate::error::Error;
use crate::sql::Cached as _;

/// Records that hold `hold_id` was placed in `groups`.
pub(crate) fn insert(conn: &Connection, hold_id: &str, groups: &[Id]) -> Result<(), Error> {
    for group in groups {
        conn.run(
            "INSERT INTO hold_groups (hold_id, group_id) VALUES (?1, ?2)",
            params![hold_id, group.as_str()],
        )?;
    }
    Ok(())
}

/// The Groups hold `hold_id` was placed in, in order (none for an approver's hold, or an
/// operator's placed before they were kept).
pub(crate) fn of(conn: &Connection, hold_id: &str) -> Result<Vec<Id>, Error> {
    conn.rows(
        "SELECT group_id FROM hold_groups WHERE hold_id = ?1 ORDER BY group_id",
        params![hold_id],
        |row| row.get::<_, String>(0),
    )?
    .iter()
    .map(|group| super::id("groupId", group))
    .collect()
}
