//! The `usage_epoch` table: the only SQL that names it. One row, a counter that moves each
//! time bytes a retention policy disposed of come back (an upload repairs them): they count
//! again for every Group citing them, so a Group's quota bound counted before the move is no
//! bound any more (`artifacts/quota.rs`). A repair moves it without touching any Group's row.

use crate::error::Error;
use crate::sql::Cached as _;
use crate::sql::Connection;

/// The counter now.
pub(crate) fn current(conn: &Connection) -> Result<u64, Error> {
    Ok(
        conn.row("SELECT epoch FROM usage_epoch WHERE id = 0", [], |row| {
            row.get(0)
        })?,
    )
}

/// Moves the counter on.
pub(crate) fn advance(conn: &Connection) -> Result<(), Error> {
    conn.run("UPDATE usage_epoch SET epoch = epoch + 1 WHERE id = 0", [])?;
    Ok(())
}
