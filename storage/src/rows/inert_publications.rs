//! The `inert_publications` table: the only SQL that names it. A manifest a fenced owner
//! sent after it lost its WorkItem (OFL-2) is kept here for audit, never as a manifest;
//! `artifacts::binding` decides what is kept, `work::inert` what a view shows.

use crate::sql::{Ahead, Connection, params};
use weft_api::work::views::InertPublication;
use weft_api::{ArtifactId, Manifest};

use crate::error::Error;
use crate::sql::Cached as _;

/// How many inert records `producer` has kept for WorkItem `work_item_id`.
pub(crate) fn count_by(
    conn: &Connection,
    work_item_id: &str,
    producer: &str,
) -> Result<u64, Error> {
    Ok(conn.row(
        "SELECT COUNT(*) FROM inert_publications WHERE work_item_id = ?1 AND producer = ?2",
        params![work_item_id, producer],
        |row| row.get(0),
    )?)
}

/// A refused manifest to keep.
pub(crate) struct NewInert<'a> {
    pub(crate) manifest_id: &'a ArtifactId,
    pub(crate) manifest: &'a Manifest,
    pub(crate) producer: &'a str,
    pub(crate) envelope_json: &'a str,
    pub(crate) received_at: &'a str,
    pub(crate) reason: &'a str,
}

/// Keeps `new` unless its manifest is kept already.
pub(crate) fn insert(conn: &Connection, new: &NewInert<'_>) -> Result<(), Error> {
    let manifest = new.manifest;
    conn.run(
        "INSERT OR IGNORE INTO inert_publications (manifest_id, group_id, work_item_id, producer,
                 lease_id, ownership_epoch, envelope, received_at, reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            &new.manifest_id.0[..],
            manifest.group_id.as_str(),
            manifest.work_item_id.as_str(),
            new.producer,
            manifest.execution.lease_id.as_str(),
            manifest.execution.ownership_epoch,
            new.envelope_json,
            new.received_at,
            new.reason,
        ],
    )?;
    Ok(())
}

/// A WorkItem's newest inert records, newest first ([`newest`]): from the end of the index
/// of its records by arrival (V50), nothing sorted.
pub(crate) const NEWEST: &str =
    "SELECT manifest_id, producer, lease_id, ownership_epoch, received_at
     FROM inert_publications WHERE work_item_id = ?1
     ORDER BY received_at DESC, manifest_id DESC LIMIT ?2";

/// The newest `limit` inert records of `work_item_id`, newest first. Sent ahead of its use
/// (`sql/ahead.rs`): read with `get`.
pub(crate) fn newest(
    conn: &Connection,
    work_item_id: &str,
    limit: u64,
) -> Result<Ahead<Vec<InertPublication>, Error>, Error> {
    let rows = conn.rows_ahead(NEWEST, params![work_item_id, limit], |r| {
        Ok((
            r.get::<_, Vec<u8>>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, u64>(3)?,
            r.get::<_, String>(4)?,
        ))
    })?;
    Ok(
        rows.then(|rows: Vec<(Vec<u8>, String, String, u64, String)>| {
            rows.into_iter()
                .map(
                    |(manifest_id, producer, lease_id, ownership_epoch, received_at)| {
                        Ok(InertPublication {
                            manifest_id: ArtifactId(to32(manifest_id)?),
                            producer,
                            lease_id,
                            ownership_epoch,
                            received_at,
                        })
                    },
                )
                .collect()
        }),
    )
}

fn to32(bytes: Vec<u8>) -> Result<[u8; 32], Error> {
    bytes.try_into().map_err(|bytes: Vec<u8>| {
        Error::backend(std::io::Error::other(format!(
            "expected a 32-byte value in the index, found {} bytes",
            bytes.len()
        )))
    })
}
