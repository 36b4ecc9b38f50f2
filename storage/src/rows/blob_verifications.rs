//! The `blob_verifications` table: the newest intact re-hash of each blob (when, and by whom:
//! a read, `verify-now`, fsck), and the only SQL that names it.

use crate::sql::{Connection, OptionalExtension as _, params};
use weft_api::ArtifactId;

use crate::error::Error;
use crate::sql::Cached as _;

/// A recorded re-hash: when (an instant as `clock::format_instant` wrote it) and by whom.
pub(crate) struct Verified {
    pub(crate) verified_at: String,
    pub(crate) verified_by: String,
}

/// Records that `blake3` was found intact at `verified_at` by `by`, replacing the last record.
pub(crate) fn record(
    conn: &Connection,
    blake3: &ArtifactId,
    verified_at: &str,
    by: &str,
) -> Result<(), Error> {
    conn.run(
        "INSERT INTO blob_verifications (blake3, verified_at, verified_by) VALUES (?1, ?2, ?3)
         ON CONFLICT (blake3) DO UPDATE SET verified_at = excluded.verified_at, verified_by = excluded.verified_by",
        params![&blake3.0[..], verified_at, by],
    )?;
    Ok(())
}

/// The newest record of `blake3`, if it was ever verified.
pub(crate) fn newest(conn: &Connection, blake3: &ArtifactId) -> Result<Option<Verified>, Error> {
    Ok(conn
        .row(
            "SELECT verified_at, verified_by FROM blob_verifications WHERE blake3 = ?1",
            [&blake3.0[..]],
            |row| {
                Ok(Verified {
                    verified_at: row.get(0)?,
                    verified_by: row.get(1)?,
                })
            },
        )
        .optional()?)
}

/// Removes `blake3`'s record (the sweep).
pub(crate) fn delete_of_blob(conn: &Connection, blake3: &[u8]) -> Result<(), Error> {
    conn.run("DELETE FROM blob_verifications WHERE blake3 = ?1", [blake3])?;
    Ok(())
}
