//! The `blob_uploaders` table: who uploaded a blob, in which Group, and when last (the
//! uploader sees its uncited bytes, which count against its cap until the sweep), and the
//! only SQL that names it.

use crate::sql::{Connection, OptionalExtension as _, params};
use chrono::{DateTime, Utc};
use weft_api::ArtifactId;

use crate::clock::format_instant;
use crate::error::Error;
use crate::sql::Cached as _;

/// The blobs Agent `?1` uploaded, as a sub-query (`blobs::uploaded_bytes_where`).
pub(crate) const BY_AGENT: &str = "SELECT blake3 FROM blob_uploaders WHERE agent_id = ?1";

/// SQL expression: the last upload of the blob whose digest is in column `column`, `NULL`
/// when no uploader row remains (`blobs::stale_where`).
pub(crate) fn last_upload_of(column: &str) -> String {
    format!(
        "SELECT MAX(uploaded_at) FROM blob_uploaders
                                     WHERE blob_uploaders.blake3 = {column}"
    )
}

/// Sub-query: the blobs uploaded in Group `group` (a parameter).
pub(crate) fn blobs_of_group(group: &str) -> String {
    format!("SELECT blake3 FROM blob_uploaders WHERE group_id = {group}")
}

/// Records that `agent_id` uploaded `blake3` in `group_id` at `now`: `uploaded_at` moves with
/// every upload, so the sweep keeps a blob someone uploaded recently, however old its first
/// copy is.
pub(crate) fn record(
    conn: &Connection,
    blake3: &ArtifactId,
    agent_id: &str,
    group_id: &str,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    conn.run_later(
        "INSERT INTO blob_uploaders (blake3, agent_id, group_id, uploaded_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (blake3, agent_id, group_id) DO UPDATE SET uploaded_at = excluded.uploaded_at",
        params![&blake3.0[..], agent_id, group_id, format_instant(now)],
    )?;
    Ok(())
}

/// Whether a member uploaded `blake3` in `group_id` (along the key, which starts with `blake3`).
pub(crate) fn uploaded_in_group(
    conn: &Connection,
    blake3: &ArtifactId,
    group_id: &str,
) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM blob_uploaders WHERE blake3 = ?1 AND group_id = ?2 LIMIT 1",
            params![&blake3.0[..], group_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// Whether `agent_id` uploaded `blake3` in `group_id`.
pub(crate) fn uploaded(
    conn: &Connection,
    blake3: &ArtifactId,
    agent_id: &str,
    group_id: &str,
) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM blob_uploaders WHERE blake3 = ?1 AND agent_id = ?2 AND group_id = ?3",
            params![&blake3.0[..], agent_id, group_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// Removes every uploader row of `blake3` (the sweep).
pub(crate) fn delete_of_blob(conn: &Connection, blake3: &[u8]) -> Result<(), Error> {
    conn.run("DELETE FROM blob_uploaders WHERE blake3 = ?1", [blake3])?;
    Ok(())
}

/// How many uploader rows there are.
pub(crate) fn count(conn: &Connection) -> Result<u64, Error> {
    Ok(conn.row("SELECT COUNT(*) FROM blob_uploaders", [], |row| row.get(0))?)
}
