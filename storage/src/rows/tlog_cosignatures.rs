//! The `tlog_cosignatures` table: the only SQL that names it. Per Group and witness, the newest
//! checkpoint size the witness cosigned and its signature line (issue #45): the server serves
//! the checkpoint of the newest cosigned size with those lines appended. A line is stored only
//! after it verified against the witness's key (`delivery/tlog.rs`), and only ever moves to a
//! larger size.

use crate::sql::{Connection, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// Records witness `witness`'s cosignature `line` of Group `group_id`'s tree at `size`,
/// unless it already holds one of a larger size.
pub(crate) fn record(
    conn: &Connection,
    group_id: &str,
    witness: &str,
    size: u64,
    line: &str,
) -> Result<(), Error> {
    conn.run(
        "INSERT INTO tlog_cosignatures (group_id, witness, size, line) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (group_id, witness) DO UPDATE SET size = excluded.size, line = excluded.line
         WHERE excluded.size >= tlog_cosignatures.size",
        params![group_id, witness, size, line],
    )?;
    Ok(())
}

/// Group `group_id`'s cosignatures: (witness, size, line), by witness.
pub(crate) fn of_group(
    conn: &Connection,
    group_id: &str,
) -> Result<Vec<(String, u64, String)>, Error> {
    Ok(conn.rows(
        "SELECT witness, size, line FROM tlog_cosignatures WHERE group_id = ?1 ORDER BY witness",
        params![group_id],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )?)
}
