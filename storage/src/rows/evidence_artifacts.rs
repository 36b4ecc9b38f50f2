//! The `evidence_artifacts` table: the artifacts each Evidence record cites, one row per
//! (record, artifact), and the only SQL that names it.

use crate::sql::{Connection, params};
use weft_api::ArtifactId;

use crate::error::Error;
use crate::sql::Cached as _;

/// Sub-query: the records citing the artifact of the parameter that follows it
/// (`evidence::list` closes the parenthesis).
pub(crate) const CITING: &str = "SELECT evidence_id FROM evidence_artifacts WHERE blake3 =";

/// Records that Evidence `evidence_id` cites `blake3`.
pub(crate) fn insert(
    conn: &Connection,
    evidence_id: &ArtifactId,
    blake3: &ArtifactId,
) -> Result<(), Error> {
    conn.run(
        "INSERT INTO evidence_artifacts (evidence_id, blake3) VALUES (?1, ?2)",
        params![&evidence_id.0[..], &blake3.0[..]],
    )?;
    Ok(())
}

/// SQL condition that some Evidence cites the blob digest in column `column` (for a
/// condition spanning the tables that cite blobs, `artifacts::upload::uncited`).
pub(crate) fn cites_column(column: &str) -> String {
    format!("EXISTS (SELECT 1 FROM evidence_artifacts WHERE evidence_artifacts.blake3 = {column})")
}

/// Sub-query: the artifacts the Evidence records of sub-query `evidence_sql` (one
/// `evidence_id` column) cite, each once.
pub(crate) fn cited_in(evidence_sql: &str) -> String {
    format!("SELECT DISTINCT blake3 FROM evidence_artifacts WHERE evidence_id IN ({evidence_sql})")
}

/// The artifacts Evidence `evidence_id` cites.
pub(crate) fn cited_by_record(
    conn: &Connection,
    evidence_id: &ArtifactId,
) -> Result<Vec<ArtifactId>, Error> {
    let rows = conn.rows(
        "SELECT blake3 FROM evidence_artifacts WHERE evidence_id = ?1",
        [&evidence_id.0[..]],
        |row| row.get::<_, Vec<u8>>(0),
    )?;
    rows.into_iter().map(super::artifact_id).collect()
}
