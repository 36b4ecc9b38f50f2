//! The `tlog_cosignatures` table: the only SQL that names it. Per Group and witness, the newest
//! [`KEPT`] checkpoint sizes the witness cosigned and their signature lines (issue #45): the
//! server serves the checkpoint of the size most of its witnesses cosigned, with their lines
//! appended. A line is stored only after it verified against the witness's key
//! (`delivery/tlog.rs`).

use crate::sql::{Connection, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// Sizes kept per Group and witness: enough that witnesses a few rounds apart still share one.
const KEPT: u64 = 8;

/// Records witness `witness`'s cosignature `line` of Group `group_id`'s tree at `size`, and
/// forgets its lines older than its newest [`KEPT`].
pub(crate) fn record(
    conn: &Connection,
    group_id: &str,
    witness: &str,
    size: u64,
    line: &str,
) -> Result<(), Error> {
    conn.run(
        "INSERT INTO tlog_cosignatures (group_id, witness, size, line) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (group_id, witness, size) DO NOTHING",
        params![group_id, witness, size, line],
    )?;
    conn.run(
        "DELETE FROM tlog_cosignatures WHERE group_id = ?1 AND witness = ?2 AND size <
            (SELECT min(size) FROM (SELECT size FROM tlog_cosignatures
                                    WHERE group_id = ?1 AND witness = ?2
                                    ORDER BY size DESC LIMIT ?3) AS newest)",
        params![group_id, witness, KEPT],
    )?;
    Ok(())
}

/// Group `group_id`'s cosignatures: (witness, size, line), by witness and size.
pub(crate) fn of_group(
    conn: &Connection,
    group_id: &str,
) -> Result<Vec<(String, u64, String)>, Error> {
    Ok(conn.rows(
        "SELECT witness, size, line FROM tlog_cosignatures WHERE group_id = ?1 ORDER BY witness, size",
        params![group_id],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )?)
}
