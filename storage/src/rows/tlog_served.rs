//! The `tlog_served` table: per Group, the size of the transparency-log tree its checkpoint
//! route serves once witnesses cosign it (issue #45), and the only SQL that names it. It only
//! grows ([`advance`]), whichever server's witness pusher moves it, so a client that saw a
//! checkpoint is never shown a smaller one (which it would take for a fork). Which size is
//! worth serving is `weft_api::tlog::witness::served`'s rule.

use crate::sql::{Connection, OptionalExtension as _, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// Serves Group `group_id`'s tree at `size` from now on, unless a larger one is served.
pub(crate) fn advance(conn: &Connection, group_id: &str, size: u64) -> Result<(), Error> {
    conn.run(
        "INSERT INTO tlog_served (group_id, size) VALUES (?1, ?2)
         ON CONFLICT (group_id) DO UPDATE SET size = excluded.size
         WHERE tlog_served.size < excluded.size",
        params![group_id, size],
    )?;
    Ok(())
}

/// The size served for Group `group_id`, if witnesses cosigned one.
pub(crate) fn size(conn: &Connection, group_id: &str) -> Result<Option<u64>, Error> {
    Ok(conn
        .row(
            "SELECT size FROM tlog_served WHERE group_id = ?1",
            params![group_id],
            |row| row.get(0),
        )
        .optional()?)
}
