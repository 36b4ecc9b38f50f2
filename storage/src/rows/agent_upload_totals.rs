//! The `agent_upload_totals` table: every byte each Agent uploaded uncited, by Group, a sum
//! that only grows; the only SQL that names it. Citations and the sweep lower an Agent's
//! uncited bytes and never this sum, so an exact uncited sum read after the sum was `t`
//! plus what the sum grew since `t` bounds the uncited bytes from above, whichever server
//! took the uploads (`limits.rs`, `artifacts/upload.rs`). An upload adds to its Group's row
//! only, under that Group's lock: no two Groups' writers wait for one row.

use crate::error::Error;
use crate::sql::{Connection, params};

/// Adds `bytes` to what `agent_id` uploaded uncited in `group_id`.
pub(crate) fn add(
    conn: &Connection,
    agent_id: &str,
    group_id: &str,
    bytes: u64,
) -> Result<(), Error> {
    conn.run_later(
        "INSERT INTO agent_upload_totals (agent_id, group_id, bytes) VALUES (?1, ?2, ?3)
         ON CONFLICT (agent_id, group_id)
         DO UPDATE SET bytes = agent_upload_totals.bytes + excluded.bytes",
        params![agent_id, group_id, bytes],
    )?;
    Ok(())
}

/// Sub-query: every byte Agent `?1` uploaded uncited, in all its Groups (0 before its first),
/// read in one statement with its open sessions' bytes (`upload_sessions::held_with`).
pub(crate) const OF_AGENT: &str =
    "SELECT COALESCE(SUM(bytes), 0) FROM agent_upload_totals WHERE agent_id = ?1";
