//! The `derivations` table: a manifest's `derivedFrom` edges (artifact, source, manifest),
//! in the order its publication wrote them, and the only SQL that names it; with the
//! recursive walk of it that the benchmarks time against the lineage index
//! (`bench_support.rs`, feature `bench-support`), which reads the reached manifests.

use crate::sql::{Connection, params};
use weft_api::ArtifactId;

use super::artifact_id;
use crate::error::Error;
use crate::sql::Cached as _;

/// Takes, until the transaction ends, the one lock of the derivation graph (PostgreSQL;
/// SQLite's one writer already serialises publications). A publication checks that its
/// edges close no cycle (DESIGN §6) by walking the edges committed before it: under its own
/// Group's lock alone, two publications in two Groups, `x` from `y` and `y` from `x`, each
/// missed the other's edge and both committed. Locking only their edges' ends would not do:
/// with `s` from `b` and `t` from `a` already recorded, `a` from `s` and `b` from `t` close
/// `a → s → b → t → a` and share no end. So every publication with sources takes this one
/// lock, after its Group's, and the later one's walk sees the earlier one's edges.
pub(crate) fn lock_graph(conn: &Connection) -> Result<(), Error> {
    if conn.engine() == crate::sql::Engine::Postgres {
        // The two-key form: its keys never meet the one-key locks whose keys are hashes of
        // text a client chooses (an `Idempotency-Key`).
        conn.value::<i64, _>("SELECT 1 FROM pg_advisory_xact_lock(2003134068, 1)", [])?;
    }
    Ok(())
}

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

/// The sources Group `group_id`'s own manifests derive `artifact` from, each once: the
/// Group's provenance, all that a publication in it may learn anything of (its cycle check).
pub(crate) fn sources_in_group(
    conn: &Connection,
    artifact: &ArtifactId,
    group_id: &str,
) -> Result<Vec<ArtifactId>, Error> {
    let sources = conn.rows(
        "SELECT DISTINCT d.source FROM derivations d
         JOIN manifests m ON m.manifest_id = d.manifest_id
         WHERE d.artifact = ?1 AND m.group_id = ?2",
        params![&artifact.0[..], group_id],
        |row| row.get::<_, Vec<u8>>(0),
    )?;
    sources.into_iter().map(artifact_id).collect()
}

/// Every edge (manifest id, source), in the order they were written.
pub(crate) fn all(conn: &Connection) -> Result<Vec<(Vec<u8>, ArtifactId)>, Error> {
    let rows = conn
        .rows(
            "SELECT manifest_id, source FROM derivations ORDER BY rowid",
            [],
            |row| Ok((row.get::<_, Vec<u8>>(0)?, row.get::<_, Vec<u8>>(1)?)),
        )?
        .into_iter()
        .map(Ok::<_, crate::sql::SqlError>)
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

/// The ancestors (or, when `descendants`, the descendants) of `root` as a recursive CTE over
/// this table, to `depth` when bounded, at most `limit` nodes, with what the lineage index
/// answer carries (each reached artifact's depth and its manifests' key fields, of Group
/// `group` when named). Answers how many rows it produced.
#[cfg(feature = "bench-support")]
pub(crate) fn cte_lineage(
    conn: &Connection,
    root: &ArtifactId,
    descendants: bool,
    depth: Option<u32>,
    group: Option<&str>,
    limit: usize,
) -> Result<usize, Error> {
    let (from, to) = if descendants {
        ("source", "artifact")
    } else {
        ("artifact", "source")
    };
    let select = "SELECT r.node, r.depth, m.manifest_id, m.group_id, m.mission_id, m.work_item_id, m.producer,
                                 m.media_type, m.sequence
                          FROM reached r JOIN manifests m ON m.blake3 = r.node
                          WHERE ?3 IS NULL OR m.group_id = ?3";
    let sql = match depth {
                // Bounded: the walk carries each path's depth (UNION removes only repeated
                // (node, depth) pairs), and each node keeps its shortest.
                Some(_) => format!(
                    "WITH RECURSIVE walk(node, depth) AS (
                         SELECT ?1, 0
                         UNION
                         SELECT d.{to}, walk.depth + 1 FROM derivations d JOIN walk ON d.{from} = walk.node
                         WHERE walk.depth < ?2
                     ),
                     reached AS (SELECT node, MIN(depth) AS depth FROM walk GROUP BY node LIMIT ?4)
                     {select}"
                ),
                // Unbounded: the strongest form a recursive CTE has, each node once and the
                // recursion itself stopped at the limit (it reports no depth, so it does less
                // than the index answer).
                None => format!(
                    "WITH RECURSIVE walk(node) AS (
                         SELECT ?1
                         UNION
                         SELECT d.{to} FROM derivations d JOIN walk ON d.{from} = walk.node
                         LIMIT ?4
                     ),
                     reached AS (SELECT node, 0 AS depth FROM walk)
                     {select}"
                ),
            };
    let max_depth = depth.map_or(i64::MAX, i64::from);
    let rows = conn.rows(
        &sql,
        params![&root.0[..], max_depth, group, limit as i64],
        |row| {
            Ok((
                row.get::<_, Vec<u8>>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, Vec<u8>>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, String>(4)?,
                row.get::<_, String>(5)?,
                row.get::<_, String>(6)?,
                row.get::<_, String>(7)?,
                row.get::<_, i64>(8)?,
            ))
        },
    )?;
    Ok(rows.len())
}
