//! The `reusable_artifacts` table: artifacts a Group published as reusable knowledge (CTX-6),
//! with the approval that let them and the `artifact.reuse_published` Event, and the only SQL
//! that names it, but the listing and the visibility lookup in `manifests.rs`, which ask in
//! the same statement whether a manifest's artifact is reusable.

use crate::sql::{Connection, OptionalExtension as _, params};
use weft_api::ArtifactId;

use super::artifact_id;
use crate::error::Error;
use crate::sql::Cached as _;

/// A reuse record as it is written and read back.
pub(crate) struct Row {
    /// The classification's wire name.
    pub(crate) classification: String,
    /// The approving Evidence.
    pub(crate) evidence_id: ArtifactId,
    pub(crate) approved_by: String,
    pub(crate) mission_id: String,
    pub(crate) published_by: String,
    /// Its `artifact.reuse_published` Event.
    pub(crate) sequence: u64,
    /// An instant as `clock::format_instant` wrote it.
    pub(crate) published_at: String,
}

/// Writes `row`: `blake3` is reusable in `group_id`.
pub(crate) fn insert(
    conn: &Connection,
    group_id: &str,
    blake3: &ArtifactId,
    row: &Row,
) -> Result<(), Error> {
    conn.run(
        "INSERT INTO reusable_artifacts (group_id, blake3, classification, evidence_id, approved_by, mission_id,
                                         published_by, sequence, published_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            group_id,
            &blake3.0[..],
            row.classification,
            &row.evidence_id.0[..],
            row.approved_by,
            row.mission_id,
            row.published_by,
            row.sequence,
            row.published_at
        ],
    )?;
    Ok(())
}

/// The reuse record of `blake3` in `group_id`, if it was published as reusable there.
pub(crate) fn get(
    conn: &Connection,
    group_id: &str,
    blake3: &ArtifactId,
) -> Result<Option<Row>, Error> {
    type Columns = (String, Vec<u8>, String, String, String, u64, String);
    let row: Option<Columns> = conn
        .row(
            "SELECT classification, evidence_id, approved_by, mission_id, published_by, sequence, published_at
             FROM reusable_artifacts WHERE group_id = ?1 AND blake3 = ?2",
            params![group_id, &blake3.0[..]],
            |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                    row.get(6)?,
                ))
            },
        )
        .optional()?;
    row.map(
        |(
            classification,
            evidence_id,
            approved_by,
            mission_id,
            published_by,
            sequence,
            published_at,
        )| {
            Ok(Row {
                classification,
                evidence_id: artifact_id(evidence_id)?,
                approved_by,
                mission_id,
                published_by,
                sequence,
                published_at,
            })
        },
    )
    .transpose()
}

/// Whether `blake3` was published as reusable knowledge in `group_id`.
pub(crate) fn is_reusable(
    conn: &Connection,
    group_id: &str,
    blake3: &ArtifactId,
) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM reusable_artifacts WHERE group_id = ?1 AND blake3 = ?2",
            params![group_id, &blake3.0[..]],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// Every artifact reusable in `group_id`.
pub(crate) fn of_group(conn: &Connection, group_id: &str) -> Result<Vec<ArtifactId>, Error> {
    let rows = conn.rows(
        "SELECT blake3 FROM reusable_artifacts WHERE group_id = ?1",
        [group_id],
        |row| row.get::<_, Vec<u8>>(0),
    )?;
    rows.into_iter().map(artifact_id).collect()
}

/// fsck's rows naming an Event: each reuse record's `artifact.reuse_published`.
pub(crate) const PUBLISHED_EVENTS: &str = "SELECT group_id, sequence FROM reusable_artifacts";

/// Whether Evidence `evidence_id` is the signed approval of reusable knowledge in any Group
/// (its record is then kept: the reuse record cites it).
pub(crate) fn approves(conn: &Connection, evidence_id: &ArtifactId) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM reusable_artifacts WHERE evidence_id = ?1 LIMIT 1",
            [&evidence_id.0[..]],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// Whether `blake3` is reusable knowledge in any Group (kept for every Mission to cite).
pub(crate) fn anywhere(conn: &Connection, blake3: &ArtifactId) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM reusable_artifacts WHERE blake3 = ?1 LIMIT 1",
            [&blake3.0[..]],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}
