//! The `manifests` table: one row per published manifest (the publication's index row,
//! written in the transaction that appends its `artifact.published`), and the only SQL that
//! names it, but the lead's `artifacts/reads.rs`, fsck's table count, and the bench and test
//! fixtures.
//!
//! Artifact ids are `weft_api::ArtifactId` (stored as their 32 bytes); the rest of a row is
//! read only as the projections its callers ask for, each a statement here.

use std::collections::BTreeSet;

use rusqlite::{Connection, OptionalExtension as _, params};
use weft_api::ArtifactId;

use crate::error::Error;
use crate::sql::Cached as _;

/// A manifest's row as its publication writes it.
pub(crate) struct New<'a> {
    pub(crate) manifest_id: &'a ArtifactId,
    pub(crate) blake3: &'a ArtifactId,
    pub(crate) group_id: &'a str,
    pub(crate) mission_id: &'a str,
    pub(crate) work_item_id: &'a str,
    pub(crate) producer: &'a str,
    pub(crate) media_type: &'a str,
    pub(crate) lease_id: &'a str,
    pub(crate) ownership_epoch: u64,
    pub(crate) classification: &'a str,
    /// The manifest's `createdAt`, RFC 3339 as it signed it.
    pub(crate) created_at: &'a str,
    /// The DSSE envelope as received (JSON).
    pub(crate) envelope: &'a str,
    /// Its `artifact.published` Event.
    pub(crate) sequence: u64,
}

/// Writes `row`; answers its rowid (the lineage index's cursor).
pub(crate) fn insert(conn: &Connection, row: &New<'_>) -> Result<i64, Error> {
    conn.run(
        "INSERT INTO manifests (manifest_id, blake3, group_id, mission_id, work_item_id, producer, media_type,
                                lease_id, ownership_epoch, classification, created_at, envelope, sequence)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        params![
            &row.manifest_id.0[..], &row.blake3.0[..], row.group_id, row.mission_id,
            row.work_item_id, row.producer, row.media_type,
            row.lease_id, row.ownership_epoch,
            row.classification, row.created_at, row.envelope, row.sequence
        ],
    )?;
    Ok(conn.last_insert_rowid())
}

/// The sequence of manifest `manifest_id`'s `artifact.published`, if it is published.
pub(crate) fn sequence_of(
    conn: &Connection,
    manifest_id: &ArtifactId,
) -> Result<Option<u64>, Error> {
    Ok(conn
        .row(
            "SELECT sequence FROM manifests WHERE manifest_id = ?1",
            [&manifest_id.0[..]],
            |row| row.get(0),
        )
        .optional()?)
}

/// The manifest id of the row at `rowid`, if there is one.
pub(crate) fn id_at(conn: &Connection, rowid: u64) -> Result<Option<Vec<u8>>, Error> {
    Ok(conn
        .row(
            "SELECT manifest_id FROM manifests WHERE rowid = ?1",
            [i64::try_from(rowid).unwrap_or(i64::MAX)],
            |row| row.get(0),
        )
        .optional()?)
}

/// Whether any manifest cites artifact `blake3`.
pub(crate) fn any_cites(conn: &Connection, blake3: &ArtifactId) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM manifests WHERE blake3 = ?1 LIMIT 1",
            [&blake3.0[..]],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// SQL condition that a manifest cites the blob digest in column `column` (for a condition
/// spanning the tables that cite blobs, `artifacts::upload::uncited`).
pub(crate) fn cites_column(column: &str) -> String {
    format!("EXISTS (SELECT 1 FROM manifests WHERE manifests.blake3 = {column})")
}

/// Whether artifact `blake3` is published in Group `group_id` for Mission `mission_id`.
pub(crate) fn published_in_mission(
    conn: &Connection,
    blake3: &ArtifactId,
    group_id: &str,
    mission_id: &str,
) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM manifests WHERE blake3 = ?1 AND group_id = ?2 AND mission_id = ?3 LIMIT 1",
            params![&blake3.0[..], group_id, mission_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// Whether artifact `blake3` is published in Group `group_id` for WorkItem `work_item_id` of
/// Mission `mission_id`.
pub(crate) fn published_for_work_item(
    conn: &Connection,
    blake3: &ArtifactId,
    group_id: &str,
    mission_id: &str,
    work_item_id: &str,
) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM manifests WHERE blake3 = ?1 AND group_id = ?2 AND mission_id = ?3 AND work_item_id = ?4 LIMIT 1",
            params![&blake3.0[..], group_id, mission_id, work_item_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// Whether `producer` published artifact `blake3` in Group `group_id`.
pub(crate) fn published_by(
    conn: &Connection,
    blake3: &ArtifactId,
    group_id: &str,
    producer: &str,
) -> Result<bool, Error> {
    Ok(conn.row(
        "SELECT EXISTS (SELECT 1 FROM manifests WHERE blake3 = ?1 AND group_id = ?2 AND producer = ?3)",
        params![&blake3.0[..], group_id, producer],
        |row| row.get(0),
    )?)
}

/// The Missions of Group `group_id` that published artifact `blake3`.
pub(crate) fn missions_of(
    conn: &Connection,
    group_id: &str,
    blake3: &ArtifactId,
) -> Result<BTreeSet<String>, Error> {
    let mut statement = conn.prepare_cached(
        "SELECT DISTINCT mission_id FROM manifests WHERE blake3 = ?1 AND group_id = ?2",
    )?;
    let missions = statement
        .query_map(params![&blake3.0[..], group_id], |row| row.get(0))?
        .collect::<Result<BTreeSet<String>, _>>()?;
    Ok(missions)
}

/// The Groups in which artifact `blake3` is published, in order.
pub(crate) fn groups_of(conn: &Connection, blake3: &ArtifactId) -> Result<Vec<String>, Error> {
    let groups = conn
        .prepare_cached(
            "SELECT DISTINCT group_id FROM manifests WHERE blake3 = ?1 ORDER BY group_id",
        )?
        .query_map([&blake3.0[..]], |row| row.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(groups)
}

/// The classifications artifact `blake3` was published under in Group `group_id`.
pub(crate) fn classifications(
    conn: &Connection,
    blake3: &ArtifactId,
    group_id: &str,
) -> Result<Vec<String>, Error> {
    let mut statement = conn.prepare_cached(
        "SELECT classification FROM manifests WHERE blake3 = ?1 AND group_id = ?2",
    )?;
    let found = statement
        .query_map(params![&blake3.0[..], group_id], |row| {
            row.get::<_, String>(0)
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(found)
}

/// The Missions (at most two) under which WorkItem `work_item_id` published in Group
/// `group_id`, only `mission_id` when one is named.
pub(crate) fn missions_of_work_item(
    conn: &Connection,
    work_item_id: &str,
    group_id: &str,
    mission_id: Option<&str>,
) -> Result<Vec<String>, Error> {
    let mut statement = conn.prepare_cached(
        "SELECT DISTINCT mission_id FROM manifests WHERE work_item_id = ?1 AND group_id = ?2
         AND (?3 IS NULL OR mission_id = ?3) LIMIT 2",
    )?;
    let missions = statement
        .query_map(params![work_item_id, group_id, mission_id], |row| {
            row.get::<_, String>(0)
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(missions)
}

/// A manifest as fsck re-checks it: (manifest id, artifact, envelope, producer).
pub(crate) type FsckRow = (Vec<u8>, Vec<u8>, String, String);

/// Every manifest as fsck re-checks it.
pub(crate) fn all_for_fsck(conn: &Connection) -> Result<Vec<FsckRow>, Error> {
    let mut statement =
        conn.prepare_cached("SELECT manifest_id, blake3, envelope, producer FROM manifests")?;
    let rows = statement
        .query_map([], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// One publication as the lineage index loads it: (artifact, its size, manifest id, Group,
/// Mission, WorkItem, producer, media type, sequence, rowid).
pub(crate) type PublicationRow = (
    Vec<u8>,
    u64,
    Vec<u8>,
    String,
    String,
    String,
    String,
    String,
    u64,
    u64,
);

/// The publications whose rowid is above `after`, oldest first, with their blob's size
/// (`CROSS JOIN` keeps SQLite on the rowid range of `manifests`, never a scan of `blobs`).
pub(crate) fn publications_after(
    conn: &Connection,
    after: u64,
) -> Result<Vec<PublicationRow>, Error> {
    let mut statement = conn.prepare_cached(
        "SELECT m.blake3, b.size, m.manifest_id, m.group_id, m.mission_id, m.work_item_id, m.producer, m.media_type, m.sequence, m.rowid
         FROM manifests m CROSS JOIN blobs b ON b.blake3 = m.blake3 WHERE m.rowid > ?1 ORDER BY m.rowid",
    )?;
    let rows = statement
        .query_map([i64::try_from(after).unwrap_or(i64::MAX)], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
                row.get(6)?,
                row.get(7)?,
                row.get(8)?,
                row.get(9)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// fsck's rows naming an Event: each manifest's `artifact.published`.
pub(crate) const PUBLISHED_EVENTS: &str = "SELECT group_id, sequence FROM manifests";
