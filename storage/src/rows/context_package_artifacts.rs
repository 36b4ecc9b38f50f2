//! The `context_package_artifacts` table: one row per artifact a Context Package version
//! cites, the only SQL that names it. Written with the version (`context_packages::insert`),
//! never changed; collection asks it whether any version cites a blob, along the key (V41:
//! before, a `LIKE` over every version's JSON for each blob it decided on). The sweep need not
//! ask: a version cites only bytes a manifest of its Group (or of a forwarding Group) cites.

use crate::sql::{Connection, OptionalExtension as _, params};
use weft_api::ArtifactId;

use crate::error::Error;
use crate::sql::Cached as _;

/// Version `context_id` cites each of `artifacts` (a digest cited twice is one row).
pub(crate) fn insert(
    conn: &Connection,
    context_id: &ArtifactId,
    artifacts: &[ArtifactId],
) -> Result<(), Error> {
    for artifact in artifacts {
        conn.run_later(
            "INSERT INTO context_package_artifacts (blake3, context_id) VALUES (?1, ?2)
             ON CONFLICT (blake3, context_id) DO NOTHING",
            params![&artifact.0[..], &context_id.0[..]],
        )?;
    }
    Ok(())
}

/// SQL for the statement that a version cites `blake3`.
pub(crate) const ANY_CITES: &str =
    "SELECT 1 FROM context_package_artifacts WHERE blake3 = ?1 LIMIT 1";

/// Whether any Context Package version (published or forwarded) cites artifact `blake3`.
pub(crate) fn any_cites(conn: &Connection, blake3: &ArtifactId) -> Result<bool, Error> {
    Ok(conn
        .row(ANY_CITES, [&blake3.0[..]], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Whether version `context_id` has its row citing `blake3` (fsck: every artifact its signed
/// payload cites must have one, or collection would not see the citation).
pub(crate) fn cites(
    conn: &Connection,
    context_id: &ArtifactId,
    blake3: &ArtifactId,
) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM context_package_artifacts WHERE blake3 = ?1 AND context_id = ?2",
            params![&blake3.0[..], &context_id.0[..]],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}
