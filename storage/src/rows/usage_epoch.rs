//! The `usage_epoch` table: the only SQL that names it. At most one row (id 0): a counter that
//! moves each time bytes a retention policy disposed of come back (an upload repairs them):
//! they count again for every Group citing them, so a Group's quota bound counted before the
//! move is no bound any more (`artifacts/quota.rs`). A repair moves it without touching any
//! Group's row. No row until the first move, so `weft migrate` copies it as any other row.

use crate::error::Error;
use crate::sql::Cached as _;
use crate::sql::{Connection, OptionalExtension as _};

/// The counter now (0 before the first move).
pub(crate) fn current(conn: &Connection) -> Result<u64, Error> {
    Ok(conn
        .row("SELECT epoch FROM usage_epoch WHERE id = 0", [], |row| {
            row.get(0)
        })
        .optional()?
        .unwrap_or(0))
}

/// Moves the counter on.
pub(crate) fn advance(conn: &Connection) -> Result<(), Error> {
    conn.run(
        "INSERT INTO usage_epoch (id, epoch) VALUES (0, 1)
         ON CONFLICT (id) DO UPDATE SET epoch = usage_epoch.epoch + 1",
        [],
    )?;
    Ok(())
}
