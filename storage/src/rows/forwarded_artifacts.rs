//! The `forwarded_artifacts` table: artifacts a Context Package forwarded into another Group
//! (CTX-7), with the Group they came from, and the only SQL that names it, but the
//! visibility lookup in `manifests.rs`, which follows a forwarded artifact to its source
//! Group's manifests in the same statement.

use crate::sql::{Connection, params};
use weft_api::ArtifactId;

use crate::error::Error;
use crate::sql::Cached as _;

/// Records that Context Package `context_id` forwarded `blake3` from `from_group_id` into
/// `group_id`, vouching for its manifests there up to row `up_to` (V51: the newest when the
/// forward commits; later ones were never weighed, CTX-7). Once: a second forwarding of the
/// same artifact by the same package adds nothing.
pub(crate) fn insert(
    conn: &Connection,
    group_id: &str,
    blake3: &ArtifactId,
    context_id: &ArtifactId,
    from_group_id: &str,
    up_to: u64,
) -> Result<(), Error> {
    conn.run(
        "INSERT OR IGNORE INTO forwarded_artifacts
             (group_id, blake3, context_id, from_group_id, up_to)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            group_id,
            &blake3.0[..],
            &context_id.0[..],
            from_group_id,
            up_to
        ],
    )?;
    Ok(())
}

/// The Groups `blake3` was forwarded from into `group_id`, each once (empty: not forwarded).
pub(crate) fn from_groups(
    conn: &Connection,
    group_id: &str,
    blake3: &ArtifactId,
) -> Result<Vec<String>, Error> {
    Ok(conn.rows(
        "SELECT DISTINCT from_group_id FROM forwarded_artifacts WHERE blake3 = ?1 AND group_id = ?2",
        params![&blake3.0[..], group_id],
        |row| row.get::<_, String>(0),
    )?)
}

/// Every artifact forwarded anywhere, each once.
pub(crate) fn all(conn: &Connection) -> Result<Vec<ArtifactId>, Error> {
    let rows = conn.rows(
        "SELECT DISTINCT blake3 FROM forwarded_artifacts",
        [],
        |row| row.get::<_, Vec<u8>>(0),
    )?;
    rows.into_iter().map(super::artifact_id).collect()
}
