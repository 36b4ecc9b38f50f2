//! The `schemas` table: schema URIs the operator registered, each naming the published
//! artifact that holds the schema (the reviewer validates against it), and the only SQL that
//! names it.

use crate::sql::{Connection, OptionalExtension as _, params};
use weft_api::ArtifactId;

use crate::error::Error;
use crate::sql::Cached as _;

/// Registers `uri` as naming `blake3`, replacing an earlier registration.
pub(crate) fn register(conn: &Connection, uri: &str, blake3: &ArtifactId) -> Result<(), Error> {
    conn.run(
        "INSERT INTO schemas (uri, blake3) VALUES (?1, ?2) ON CONFLICT (uri) DO UPDATE SET blake3 = excluded.blake3",
        params![uri, &blake3.0[..]],
    )?;
    Ok(())
}

/// The artifact registered as `uri`, if any.
pub(crate) fn by_uri(conn: &Connection, uri: &str) -> Result<Option<ArtifactId>, Error> {
    let row: Option<Vec<u8>> = conn
        .row("SELECT blake3 FROM schemas WHERE uri = ?1", [uri], |row| {
            row.get(0)
        })
        .optional()?;
    row.map(super::artifact_id).transpose()
}

/// SQL condition that some registered schema is the blob digest in column `column` (for a
/// condition spanning the tables that cite blobs, `artifacts::upload::uncited`).
pub(crate) fn cites_column(column: &str) -> String {
    format!("EXISTS (SELECT 1 FROM schemas WHERE schemas.blake3 = {column})")
}
