//! The `blob_dispositions` table: for each Group, the `artifact.disposed` Events of each blob
//! whose bytes a retention policy disposed of (issue #46), and the only SQL that names it. A
//! content read of a disposed blob answers 410 naming the reader's Group's latest.

use crate::sql::{Connection, OptionalExtension as _, params};
use chrono::{DateTime, Utc};
use weft_api::ArtifactId;

use crate::clock::format_instant;
use crate::error::Error;
use crate::sql::Cached as _;

/// Records that blob `blake3`'s disposition is Event `sequence` of Group `group_id`.
pub(crate) fn insert(
    conn: &Connection,
    group_id: &str,
    blake3: &ArtifactId,
    sequence: u64,
    at: DateTime<Utc>,
) -> Result<(), Error> {
    conn.run(
        "INSERT INTO blob_dispositions (group_id, blake3, sequence, disposed_at)
         VALUES (?1, ?2, ?3, ?4)",
        params![group_id, &blake3.0[..], sequence, format_instant(at)],
    )?;
    Ok(())
}

/// The latest disposition of blob `blake3`: in Group `group_id` when given, else in any
/// Group (the operator's read), as (Group, sequence).
pub(crate) fn latest(
    conn: &Connection,
    group_id: Option<&str>,
    blake3: &ArtifactId,
) -> Result<Option<(String, u64)>, Error> {
    Ok(conn
        .row(
            "SELECT group_id, sequence FROM blob_dispositions
             WHERE blake3 = ?1 AND (?2 IS NULL OR group_id = ?2)
             ORDER BY disposed_at DESC, sequence DESC LIMIT 1",
            params![&blake3.0[..], group_id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?)
}
