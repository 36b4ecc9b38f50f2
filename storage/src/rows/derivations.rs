//! The `derivations` table: a manifest's `derivedFrom` edges (artifact, source, manifest),
//! in the order its publication wrote them, and the only SQL that names it, but the bench
//! fixtures (`bench_support.rs`, which also times a recursive walk of it).

use rusqlite::{Connection, params};
use weft_api::ArtifactId;

use super::artifact_id;
use crate::error::Error;
use crate::sql::Cached as _;

/// Records that manifest `manifest_id` derives `artifact` from `source`.
pub(crate) fn insert(
    conn: &Connection,
    artifact: &ArtifactId,
    source: &ArtifactId,
    manifest_id: &ArtifactId,
) -> Result<(), Error> {
    conn.run(
        "INSERT INTO derivations (artifact, source, manifest_id) VALUES (?1, ?2, ?3)",
        params![&artifact.0[..], &source.0[..], &manifest_id.0[..]],
    )?;
    Ok(())
}

/// The sources any manifest derives `artifact` from, each once.
pub(crate) fn sources_of(
    conn: &Connection,
    artifact: &ArtifactId,
) -> Result<Vec<ArtifactId>, Error> {
    let sources = conn.rows(
        "SELECT DISTINCT source FROM derivations WHERE artifact = ?1",
        [&artifact.0[..]],
        |row| row.get::<_, Vec<u8>>(0),
    )?;
    sources.into_iter().map(artifact_id).collect()
}

/// Every edge (manifest id, source), in the order they were written.
pub(crate) fn all(conn: &Connection) -> Result<Vec<(Vec<u8>, ArtifactId)>, Error> {
    let mut statement =
        conn.prepare_cached("SELECT manifest_id, source FROM derivations ORDER BY rowid")?;
    let rows = statement
        .query_map([], |row| {
            Ok((row.get::<_, Vec<u8>>(0)?, row.get::<_, Vec<u8>>(1)?))
        })?
        .map(|row| {
            let (manifest_id, source) = row?;
            Ok((manifest_id, artifact_id(source)?))
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(rows)
}

/// The sources manifest `manifest_id` derives `artifact` from, in the order it named them.
pub(crate) fn sources_in(
    conn: &Connection,
    artifact: &[u8],
    manifest_id: &[u8],
) -> Result<Vec<ArtifactId>, Error> {
    let sources = conn.rows(
        "SELECT source FROM derivations WHERE artifact = ?1 AND manifest_id = ?2 ORDER BY rowid",
        params![artifact, manifest_id],
        |row| row.get::<_, Vec<u8>>(0),
    )?;
    sources.into_iter().map(artifact_id).collect()
}

/// How many edges there are.
pub(crate) fn count(conn: &Connection) -> Result<u64, Error> {
    Ok(conn.row("SELECT COUNT(*) FROM derivations", [], |row| row.get(0))?)
}
