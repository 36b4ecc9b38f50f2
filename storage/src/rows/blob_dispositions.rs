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

/// A Group's latest disposition of a blob: a seek of the key's (Group, blob) prefix.
pub(crate) const LATEST_IN_GROUP: &str = "SELECT group_id, sequence FROM blob_dispositions
     WHERE group_id = ?2 AND blake3 = ?1 ORDER BY disposed_at DESC, sequence DESC LIMIT 1";

/// The latest disposition of blob `blake3`: in Group `group_id` when given, else in any
/// Group (the operator's read, which reads the table), as (Group, sequence). Two statements:
/// one `(?2 IS NULL OR group_id = ?2)` hid the key's first column from both engines'
/// planners, so every member's read of a disposed blob read every disposition ever kept
/// (stop 69).
pub(crate) fn latest(
    conn: &Connection,
    group_id: Option<&str>,
    blake3: &ArtifactId,
) -> Result<Option<(String, u64)>, Error> {
    let read = |row: &crate::sql::Row<'_>| Ok((row.get(0)?, row.get(1)?));
    Ok(match group_id {
        Some(group_id) => conn
            .row(LATEST_IN_GROUP, params![&blake3.0[..], group_id], read)
            .optional()?,
        None => conn
            .row(
                "SELECT group_id, sequence FROM blob_dispositions WHERE blake3 = ?1
                 ORDER BY disposed_at DESC, sequence DESC LIMIT 1",
                params![&blake3.0[..]],
                read,
            )
            .optional()?,
    })
}
