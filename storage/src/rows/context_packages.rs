//! The `context_packages` table: one row per Context Package version indexed in a Group
//! (published there, or forwarded from another Group, CTX-7), with its chain link
//! (`previous`), Mission, Event range, artifacts, the envelope as received and its Event,
//! and the only SQL that names it.
//!
//! Ids go in as `weft_api` types; rows come back as the columns the callers decode (the
//! package itself is parsed from its envelope by `context::reads`).

use crate::sql::{Connection, OptionalExtension as _, params};
use weft_api::ArtifactId;

use crate::error::Error;
use crate::sql::Cached as _;

const COLUMNS: &str = "context_id, group_id, sequence, forwarded_from, envelope";

/// One version as a reader decodes it: id, Group, sequence, forwarded from, envelope.
pub(crate) type Row = (Vec<u8>, String, u64, Option<String>, String);

fn record(row: &crate::sql::Row<'_>) -> crate::sql::Result<Row> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
    ))
}

/// Version `version` (the latest when `None`) of `package_id` as indexed in `group_id`.
pub(crate) fn version(
    conn: &Connection,
    group_id: &str,
    package_id: &str,
    version: Option<u64>,
) -> Result<Option<Row>, Error> {
    Ok(match version {
        Some(version) => conn
            .row(
                &format!("SELECT {COLUMNS} FROM context_packages WHERE group_id = ?1 AND package_id = ?2 AND version = ?3"),
                params![group_id, package_id, version],
                record,
            )
            .optional()?,
        None => conn
            .row(
                &format!("SELECT {COLUMNS} FROM context_packages WHERE group_id = ?1 AND package_id = ?2 ORDER BY version DESC LIMIT 1"),
                params![group_id, package_id],
                record,
            )
            .optional()?,
    })
}

/// Every version of `package_id` indexed in `group_id`, oldest first.
pub(crate) fn versions(
    conn: &Connection,
    group_id: &str,
    package_id: &str,
) -> Result<Vec<Row>, Error> {
    Ok(conn.rows(
        &format!(
            "SELECT {COLUMNS} FROM context_packages WHERE group_id = ?1 AND package_id = ?2 ORDER BY version"
        ),
        params![group_id, package_id],
        record,
    )?)
}

/// The Mission of package `package_id` in `group_id`, if it is indexed there.
pub(crate) fn mission_of(
    conn: &Connection,
    group_id: &str,
    package_id: &str,
) -> Result<Option<String>, Error> {
    Ok(conn
        .row(
            "SELECT mission_id FROM context_packages WHERE group_id = ?1 AND package_id = ?2 LIMIT 1",
            params![group_id, package_id],
            |row| row.get(0),
        )
        .optional()?)
}

/// Where version `context_id` is indexed, in Group `own` when named, else the Group that
/// published it before any it was forwarded to: (Group, package id, version).
pub(crate) fn locate(
    conn: &Connection,
    context_id: &ArtifactId,
    own: Option<&str>,
) -> Result<Option<(String, String, u64)>, Error> {
    Ok(conn
        .row(
            "SELECT group_id, package_id, version FROM context_packages
             WHERE context_id = ?1 AND (?2 IS NULL OR group_id = ?2)
             ORDER BY forwarded_from IS NOT NULL, group_id LIMIT 1",
            params![&context_id.0[..], own],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()?)
}

/// The Group that published package `package_id` (before any it was forwarded to).
pub(crate) fn group_of(conn: &Connection, package_id: &str) -> Result<Option<String>, Error> {
    Ok(conn
        .row(
            "SELECT group_id FROM context_packages WHERE package_id = ?1
             ORDER BY forwarded_from IS NOT NULL, group_id LIMIT 1",
            [package_id],
            |row| row.get(0),
        )
        .optional()?)
}

/// A version with the id of its previous one.
pub(crate) type WithPrevious = (Row, Option<Vec<u8>>);

/// Every version with the id of its previous one, by Group, package and version (fsck).
pub(crate) fn all_with_previous(conn: &Connection) -> Result<Vec<WithPrevious>, Error> {
    let rows = conn.rows(&format!(
        "SELECT {COLUMNS}, previous FROM context_packages ORDER BY group_id, package_id, version"
    ), [], |row| {
            Ok((record(row)?, row.get::<_, Option<Vec<u8>>>(5)?))
        })?;
    Ok(rows)
}

/// The version number of version `context_id` in `group_id`, if it is indexed there.
pub(crate) fn version_of_id(
    conn: &Connection,
    group_id: &str,
    context_id: &[u8],
) -> Result<Option<u64>, Error> {
    Ok(conn
        .row(
            "SELECT version FROM context_packages WHERE group_id = ?1 AND context_id = ?2",
            params![group_id, context_id],
            |row| row.get(0),
        )
        .optional()?)
}

/// Version `context_id`'s (package id, version, Mission) in `group_id`, if indexed there.
pub(crate) fn link_by_id(
    conn: &Connection,
    group_id: &str,
    context_id: &ArtifactId,
) -> Result<Option<(String, u64, String)>, Error> {
    Ok(conn
        .row(
            "SELECT package_id, version, mission_id FROM context_packages
             WHERE group_id = ?1 AND context_id = ?2",
            params![group_id, &context_id.0[..]],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()?)
}

/// The latest version of `package_id` in `group_id` as (id, version, Mission), if any.
pub(crate) fn latest_link(
    conn: &Connection,
    group_id: &str,
    package_id: &str,
) -> Result<Option<(ArtifactId, u64, String)>, Error> {
    let row: Option<(Vec<u8>, u64, String)> = conn
        .row(
            "SELECT context_id, version, mission_id FROM context_packages
             WHERE group_id = ?1 AND package_id = ?2 ORDER BY version DESC LIMIT 1",
            params![group_id, package_id],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()?;
    row.map(|(id, version, mission)| Ok((super::artifact_id(id)?, version, mission)))
        .transpose()
}

/// The sequence of version `context_id`'s Event in `group_id`, if it is indexed there.
pub(crate) fn sequence_of(
    conn: &Connection,
    context_id: &ArtifactId,
    group_id: &str,
) -> Result<Option<u64>, Error> {
    Ok(conn
        .row(
            "SELECT sequence FROM context_packages WHERE context_id = ?1 AND group_id = ?2",
            params![&context_id.0[..], group_id],
            |row| row.get(0),
        )
        .optional()?)
}

/// Of the versions of `package_id` in `group_id`: whether one is version `version`, and
/// whether one is not a copy from `from_group_id` (published there, or forwarded from
/// elsewhere).
pub(crate) fn held_versions(
    conn: &Connection,
    group_id: &str,
    package_id: &str,
    version: u64,
    from_group_id: &str,
) -> Result<(bool, bool), Error> {
    Ok(conn.row(
        "SELECT coalesce(max(CASE WHEN version = ?3 THEN 1 ELSE 0 END), 0),
                coalesce(max(CASE WHEN forwarded_from IS NULL OR forwarded_from != ?4
                                  THEN 1 ELSE 0 END), 0)
         FROM context_packages WHERE group_id = ?1 AND package_id = ?2",
        params![group_id, package_id, version, from_group_id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?)
}

/// A version as it is indexed in a Group.
pub(crate) struct New<'a> {
    pub(crate) context_id: &'a ArtifactId,
    pub(crate) group_id: &'a str,
    pub(crate) package_id: &'a str,
    pub(crate) version: u64,
    pub(crate) previous: Option<&'a ArtifactId>,
    pub(crate) mission_id: &'a str,
    pub(crate) work_item_id: Option<&'a str>,
    pub(crate) events_from: u64,
    pub(crate) events_to: u64,
    /// The cited artifacts as a JSON array.
    pub(crate) artifacts: &'a str,
    pub(crate) generator: &'a str,
    /// The DSSE envelope (JSON).
    pub(crate) envelope: &'a str,
    pub(crate) sequence: u64,
    /// For a forwarded copy: the source Group and who forwarded it.
    pub(crate) forwarded: Option<(&'a str, &'a str)>,
}

/// Writes `row`, and a row for each artifact it cites (`context_package_artifacts.rs`;
/// `cited` says this version's are there, V41).
pub(crate) fn insert(conn: &Connection, row: &New<'_>) -> Result<(), Error> {
    conn.run(
        "INSERT INTO context_packages (context_id, group_id, package_id, version, previous, mission_id,
             work_item_id, events_from, events_to, artifacts, generator, envelope, sequence,
             forwarded_from, forwarded_by, cited)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, 1)",
        params![
            &row.context_id.0[..],
            row.group_id,
            row.package_id,
            row.version,
            row.previous.map(|id| id.0.to_vec()),
            row.mission_id,
            row.work_item_id,
            row.events_from,
            row.events_to,
            row.artifacts,
            row.generator,
            row.envelope,
            row.sequence,
            row.forwarded.map(|(from, _)| from),
            row.forwarded.map(|(_, by)| by),
        ],
    )?;
    let cited: Vec<ArtifactId> = super::from_json(row.artifacts)?;
    super::context_package_artifacts::insert(conn, row.context_id, &cited)
}

/// fsck's rows naming an Event: each version's `context.published` or `context.forwarded`.
pub(crate) const PUBLISHED_EVENTS: &str = "SELECT group_id, sequence FROM context_packages";

/// Whether any Context Package version (published or forwarded) cites artifact `blake3`.
pub(crate) fn any_cites(conn: &Connection, blake3: &ArtifactId) -> Result<bool, Error> {
    super::context_package_artifacts::any_cites(conn, blake3)
}
