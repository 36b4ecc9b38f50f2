//! The `evidence_artifacts` table: the artifacts each Evidence record cites, one row per
//! (record, artifact), and the only SQL that names it.

use crate::sql::{Connection, params};
use weft_api::{ArtifactId, Id};

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

/// Every Evidence record citing artifact `blake3`: (Group, Mission, WorkItem), each once.
pub(crate) fn citations(
    conn: &Connection,
    blake3: &ArtifactId,
) -> Result<Vec<(Id, Id, Id)>, Error> {
    let rows = conn.rows(
        "SELECT DISTINCT e.group_id, e.mission_id, e.work_item_id
         FROM evidence_artifacts a JOIN evidence e ON e.evidence_id = a.evidence_id
         WHERE a.blake3 = ?1 ORDER BY e.group_id, e.mission_id, e.work_item_id",
        [&blake3.0[..]],
        |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
            ))
        },
    )?;
    rows.into_iter()
        .map(|(g, m, w)| {
            Ok((
                super::id("groupId", &g)?,
                super::id("missionId", &m)?,
                super::id("workItemId", &w)?,
            ))
        })
        .collect()
}

/// The artifacts the Evidence records of WorkItem `work_item_id` (or, with `None`, of
/// Mission `mission_id`) cite, each once.
pub(crate) fn cited_by(
    conn: &Connection,
    mission_id: &str,
    work_item_id: Option<&str>,
) -> Result<Vec<ArtifactId>, Error> {
    let rows = conn.rows(
        "SELECT DISTINCT a.blake3 FROM evidence_artifacts a JOIN evidence e ON e.evidence_id = a.evidence_id
         WHERE e.mission_id = ?1 AND (?2 IS NULL OR e.work_item_id = ?2)",
        params![mission_id, work_item_id],
        |row| row.get::<_, Vec<u8>>(0),
    )?;
    rows.into_iter().map(super::artifact_id).collect()
}
