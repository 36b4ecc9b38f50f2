//! The `manifests` table: one row per published manifest (the publication's index row,
//! written in the transaction that appends its `artifact.published`), and the only SQL that
//! names it, but test fixtures. The listing and the visibility lookup (issue #40)
//! join a manifest's blob, and whether its artifact is reusable or forwarded, in one statement.
//!
//! Artifact ids are `weft_api::ArtifactId` (stored as their 32 bytes); the rest of a row is
//! read only as the projections its callers ask for, each a statement here: that is why the
//! file is long (every read of the table's rows lives in its one owner).

use std::collections::BTreeSet;

use crate::sql::{Ahead, Connection, OptionalExtension as _, params};
use weft_api::{ArtifactId, Digest, Digests, Id};

use super::Seer;
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
    /// Its file name (`Manifest::file_name`), searched by the console.
    pub(crate) name: Option<&'a str>,
}

/// Writes `row`; answers its rowid (the lineage index's cursor).
pub(crate) fn insert(conn: &Connection, row: &New<'_>) -> Result<i64, Error> {
    Ok(conn.row(
        "INSERT INTO manifests (manifest_id, blake3, group_id, mission_id, work_item_id, producer, media_type,
                                lease_id, ownership_epoch, classification, created_at, envelope, sequence,
                                name)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
         RETURNING rowid",
        params![
            &row.manifest_id.0[..], &row.blake3.0[..], row.group_id, row.mission_id,
            row.work_item_id, row.producer, row.media_type,
            row.lease_id, row.ownership_epoch,
            row.classification, row.created_at, row.envelope, row.sequence,
            row.name.unwrap_or_default()
        ],
        |returned| returned.get(0),
    )?)
}

/// A published manifest's `artifact.published` sequence, and its `records.disposed` one if
/// its record went.
pub(crate) type PublishedAt = (u64, Option<u64>);

/// The sequence of manifest `manifest_id`'s `artifact.published`, if it is published, and
/// of its `records.disposed` if its record went, sent ahead (PostgreSQL: answered with the next statement that needs an answer, `sql/ahead.rs`).
pub(crate) fn sequence_of_ahead(
    conn: &Connection,
    manifest_id: &ArtifactId,
) -> Result<Ahead<Option<PublishedAt>, Error>, Error> {
    let rows = conn.rows_ahead(
        "SELECT sequence, records_disposed FROM manifests WHERE manifest_id = ?1",
        [&manifest_id.0[..]],
        |row| Ok((row.get::<_, u64>(0)?, row.get::<_, Option<u64>>(1)?)),
    )?;
    Ok(rows.then(|rows: Vec<(u64, Option<u64>)>| Ok::<_, Error>(rows.into_iter().next())))
}

/// The newest row among `blake3`'s manifests in Group `group_id` (0: none): how far a
/// forward of it vouches (`rows/forwarded_artifacts.rs`).
pub(crate) fn newest_row_in_group(
    conn: &Connection,
    blake3: &ArtifactId,
    group_id: &str,
) -> Result<u64, Error> {
    Ok(conn.row(
        "SELECT coalesce(max(rowid), 0) FROM manifests WHERE blake3 = ?1 AND group_id = ?2",
        params![&blake3.0[..], group_id],
        |row| row.get::<_, i64>(0),
    )? as u64)
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

/// Every manifest citing artifact `blake3`: (Group, Mission, WorkItem, classification), each
/// once.
pub(crate) fn citations(
    conn: &Connection,
    blake3: &ArtifactId,
) -> Result<Vec<(Id, Id, Id, weft_api::manifest::Classification)>, Error> {
    let rows = conn.rows(
        "SELECT DISTINCT group_id, mission_id, work_item_id, classification FROM manifests
         WHERE blake3 = ?1 ORDER BY group_id, mission_id, work_item_id, classification",
        [&blake3.0[..]],
        |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
            ))
        },
    )?;
    rows.into_iter()
        .map(|(g, m, w, c)| {
            Ok((
                super::id("groupId", &g)?,
                super::id("missionId", &m)?,
                super::id("workItemId", &w)?,
                super::parse_name(&c)?,
            ))
        })
        .collect()
}

/// Up to `limit` of the artifacts Mission `mission_id` published whose bytes are not disposed
/// of, each once, in digest order after `after` (what collection looks at, a page at a time,
/// once the Mission's policy lets its bytes go; index `manifests_mission_blake3`).
pub(crate) fn kept_of_mission(
    conn: &Connection,
    mission_id: &str,
    after: Option<ArtifactId>,
    limit: u64,
) -> Result<Vec<ArtifactId>, Error> {
    let after = after.map_or_else(Vec::new, |after| after.0.to_vec());
    let rows = conn.rows(
        "SELECT DISTINCT m.blake3 FROM manifests m JOIN blobs b ON b.blake3 = m.blake3
         WHERE m.mission_id = ?1 AND m.blake3 > ?2 AND b.disposed_at IS NULL
         ORDER BY m.blake3 LIMIT ?3",
        params![mission_id, after, limit],
        |row| row.get::<_, Vec<u8>>(0),
    )?;
    rows.into_iter().map(super::artifact_id).collect()
}

/// The artifacts Mission `mission_id` (or only its WorkItem `work_item_id`) published, each
/// once, disposed or not.
pub(crate) fn blobs_of(
    conn: &Connection,
    mission_id: &str,
    work_item_id: Option<&str>,
) -> Result<Vec<ArtifactId>, Error> {
    let rows = conn.rows(
        "SELECT DISTINCT blake3 FROM manifests WHERE mission_id = ?1 AND (?2 IS NULL OR work_item_id = ?2)",
        params![mission_id, work_item_id],
        |row| row.get::<_, Vec<u8>>(0),
    )?;
    rows.into_iter().map(super::artifact_id).collect()
}

/// Sub-query: the blobs Group `group` (a parameter) published.
pub(crate) fn blobs_of_group(group: &str) -> String {
    format!("SELECT blake3 FROM manifests WHERE group_id = {group}")
}

/// Whether a manifest of Group `group_id` cites blob `blake3` (along `manifests_blake3_group`).
pub(crate) fn cited_in_group(
    conn: &Connection,
    blake3: &ArtifactId,
    group_id: &str,
) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM manifests WHERE blake3 = ?1 AND group_id = ?2 LIMIT 1",
            params![&blake3.0[..], group_id],
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
    let missions = conn
        .rows(
            "SELECT DISTINCT mission_id FROM manifests WHERE blake3 = ?1 AND group_id = ?2",
            params![&blake3.0[..], group_id],
            |row| row.get(0),
        )?
        .into_iter()
        .map(Ok::<_, crate::sql::SqlError>)
        .collect::<Result<BTreeSet<String>, _>>()?;
    Ok(missions)
}

/// The Groups in which artifact `blake3` is published, in order.
pub(crate) fn groups_of(conn: &Connection, blake3: &ArtifactId) -> Result<Vec<String>, Error> {
    let groups = conn.rows(
        "SELECT DISTINCT group_id FROM manifests WHERE blake3 = ?1 ORDER BY group_id",
        [&blake3.0[..]],
        |row| row.get::<_, String>(0),
    )?;
    Ok(groups)
}

/// The classifications artifact `blake3` was published under in Group `group_id`.
pub(crate) fn classifications(
    conn: &Connection,
    blake3: &ArtifactId,
    group_id: &str,
) -> Result<Vec<String>, Error> {
    let found = conn.rows(
        "SELECT classification FROM manifests WHERE blake3 = ?1 AND group_id = ?2",
        params![&blake3.0[..], group_id],
        |row| row.get::<_, String>(0),
    )?;
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
    let missions = conn.rows(
        "SELECT DISTINCT mission_id FROM manifests WHERE work_item_id = ?1 AND group_id = ?2
         AND (?3 IS NULL OR mission_id = ?3) LIMIT 2",
        params![work_item_id, group_id, mission_id],
        |row| row.get::<_, String>(0),
    )?;
    Ok(missions)
}

/// A manifest as fsck re-checks it: (manifest id, artifact, envelope, producer, the sequence
/// of its `records.disposed` Event when its record went by policy).
pub(crate) type FsckRow = (Vec<u8>, Vec<u8>, String, String, Option<u64>);

/// Every manifest as fsck re-checks it.
pub(crate) fn all_for_fsck(conn: &Connection) -> Result<Vec<FsckRow>, Error> {
    let rows = conn.rows(
        "SELECT manifest_id, blake3, envelope, producer, records_disposed FROM manifests",
        [],
        |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
            ))
        },
    )?;
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
    Ok(conn.rows(
        &format!("{PUBLICATION} WHERE m.rowid > ?1 ORDER BY m.rowid"),
        [i64::try_from(after).unwrap_or(i64::MAX)],
        publication,
    )?)
}

/// The publication of manifest `manifest_id`, as [`publications_after`] reads each (another
/// server's publication, which the lineage index adds when its Event arrives).
pub(crate) fn publication_of(
    conn: &Connection,
    manifest_id: &[u8],
) -> Result<Option<PublicationRow>, Error> {
    Ok(conn
        .row(
            &format!("{PUBLICATION} WHERE m.manifest_id = ?1"),
            [manifest_id],
            publication,
        )
        .optional()?)
}

/// What a [`PublicationRow`] is read from: a manifest joined with its blob's size.
const PUBLICATION: &str = "SELECT m.blake3, b.size, m.manifest_id, m.group_id, m.mission_id, m.work_item_id, m.producer, m.media_type, m.sequence, m.rowid
     FROM manifests m CROSS JOIN blobs b ON b.blake3 = m.blake3";

/// One row of [`PUBLICATION`].
fn publication(row: &crate::sql::Row<'_>) -> crate::sql::Result<PublicationRow> {
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
}

/// How many manifests are published.
pub(crate) fn count(conn: &Connection) -> Result<u64, Error> {
    Ok(conn.row("SELECT COUNT(*) FROM manifests", [], |row| row.get(0))?)
}

/// fsck's rows naming an Event: each manifest's `artifact.published`.
pub(crate) const PUBLISHED_EVENTS: &str = "SELECT group_id, sequence FROM manifests";

/// What a listing of manifests filters on (`GET /v1/artifacts`): each `Some` is a condition.
pub(crate) struct ListQuery<'a> {
    /// Only rows whose rowid is above this cursor.
    pub(crate) after: u64,
    pub(crate) mission_id: Option<&'a str>,
    pub(crate) work_item_id: Option<&'a str>,
    pub(crate) producer: Option<&'a str>,
    pub(crate) media_type: Option<&'a str>,
    /// Only manifests whose file name (`Manifest::file_name`) starts with this.
    pub(crate) name_prefix: Option<&'a str>,
    /// An Agent's Group (`None`: the operator, every Group).
    pub(crate) group_id: Option<&'a str>,
    /// A scoped member's Missions as a JSON array: their manifests, and the Group's reusable
    /// knowledge (CTX-5, CTX-6).
    pub(crate) missions_json: Option<String>,
    /// Rows wanted; one more is returned when there are more.
    pub(crate) limit: u32,
}

/// One listed manifest, with its blob's size.
pub(crate) struct Listed {
    pub(crate) rowid: u64,
    pub(crate) artifact: ArtifactId,
    pub(crate) manifest_id: ArtifactId,
    pub(crate) size: u64,
    pub(crate) media_type: String,
    pub(crate) group_id: String,
    pub(crate) mission_id: String,
    pub(crate) work_item_id: String,
    pub(crate) producer: String,
    pub(crate) created_at: String,
    pub(crate) sequence: u64,
    /// `''` for none.
    pub(crate) name: String,
}

/// The manifests `query` selects, by rowid, at most `query.limit + 1` of them.
///
/// Paging by rowid skips nothing within one Group on either engine: a publication draws its
/// rowid after it took its Group's lock (`artifacts/publish.rs`), which it holds to its
/// commit, so a Group's rowids commit in order, and an Agent's listing is of its one Group.
/// The operator's listing across Groups is a listing, not a change feed (the Group logs
/// are): on PostgreSQL a row of another Group may commit after a higher rowid was listed.
pub(crate) fn list(conn: &Connection, query: &ListQuery<'_>) -> Result<Vec<Listed>, Error> {
    let mut sql = String::from(
        "SELECT m.rowid, m.blake3, m.manifest_id, b.size, m.media_type, m.group_id, m.mission_id,
                m.work_item_id, m.producer, m.created_at, m.sequence, m.name
         FROM manifests m JOIN blobs b ON b.blake3 = m.blake3 WHERE m.rowid > ?1",
    );
    let mut args: Vec<Box<dyn crate::sql::ToValue>> = vec![Box::new(query.after)];
    let mut add = |clause: &str, value: Option<&str>| {
        if let Some(value) = value {
            args.push(Box::new(value.to_owned()));
            sql.push_str(&format!(" AND {clause} = ?{}", args.len()));
        }
    };
    add("m.mission_id", query.mission_id);
    add("m.work_item_id", query.work_item_id);
    add("m.producer", query.producer);
    add("m.media_type", query.media_type);
    add("m.group_id", query.group_id);
    if let Some(prefix) = query.name_prefix {
        // A range on the name (`manifests_by_name`): the prefix, and everything after it
        // that still starts with it.
        args.push(Box::new(prefix.to_owned()));
        args.push(Box::new(format!("{prefix}\u{10FFFF}")));
        sql.push_str(&format!(
            " AND m.name >= ?{} AND m.name < ?{}",
            args.len() - 1,
            args.len()
        ));
    }
    if let Some(missions) = &query.missions_json {
        args.push(Box::new(missions.clone()));
        sql.push_str(&format!(
            " AND (m.mission_id IN (SELECT value FROM json_each(?{})) OR EXISTS
               (SELECT 1 FROM reusable_artifacts r WHERE r.group_id = m.group_id AND r.blake3 = m.blake3))",
            args.len()
        ));
    }
    args.push(Box::new(query.limit + 1));
    sql.push_str(&format!(" ORDER BY m.rowid LIMIT ?{}", args.len()));
    let params: Vec<&dyn crate::sql::ToValue> = args.iter().map(|arg| arg.as_ref()).collect();
    let rows = conn.rows(&sql, params.as_slice(), |row| {
        Ok((
            (
                row.get::<_, u64>(0)?,
                row.get::<_, Vec<u8>>(1)?,
                row.get::<_, Vec<u8>>(2)?,
                row.get::<_, u64>(3)?,
            ),
            (
                row.get::<_, String>(4)?,
                row.get::<_, String>(5)?,
                row.get::<_, String>(6)?,
                row.get::<_, String>(7)?,
                row.get::<_, String>(8)?,
                row.get::<_, String>(9)?,
                row.get::<_, u64>(10)?,
                row.get::<_, String>(11)?,
            ),
        ))
    })?;
    rows.into_iter()
        .map(
            |(
                (rowid, blake3, manifest_id, size),
                (
                    media_type,
                    group_id,
                    mission_id,
                    work_item_id,
                    producer,
                    created_at,
                    sequence,
                    name,
                ),
            )| {
                Ok(Listed {
                    rowid,
                    artifact: super::artifact_id(blake3)?,
                    manifest_id: super::artifact_id(manifest_id)?,
                    size,
                    media_type,
                    group_id,
                    mission_id,
                    work_item_id,
                    producer,
                    created_at,
                    sequence,
                    name,
                })
            },
        )
        .collect()
}

// The visibility lookup, the first lookup of every artifact read: the blob and the manifests of it that a reader
// may see, decided in one SQL statement (issue #40's read-timing finding).
//
// A read used to find the blob's row first and ask about visibility after, so a digest held
// only by another Group (or another Mission, for a scoped member) ran more queries than an
// absent one and a client could tell the two apart by timing. Here every index seek is keyed
// by the reader's own Group (and, for a scoped member, its Missions) before any row of the
// blob or of another Group's manifest is visited: absent and invisible take the same path
// (the same statement, the same seeks, no row), and only a visible manifest reaches the
// `blobs` row. `visible_tests.rs` pins it by counting SQLite's virtual-machine steps.
//
// The rules are those of `access.rs` (CTX-5, CTX-6, CTX-7): a manifest of the reader's Group
// for a Mission its Membership covers; every manifest of its Group when the artifact was
// published there as reusable knowledge; for a Group-wide reader, the source Group's
// manifests of an artifact forwarded with a Context Package. The operator sees every one.

/// One manifest the reader may see, with its blob.
pub(crate) struct Visible {
    pub digests: Digests,
    pub quarantined: bool,
    pub manifest_id: Vec<u8>,
    pub media_type: String,
    pub sequence: u64,
    /// The DSSE envelope as accepted, when asked for.
    pub envelope: Option<String>,
}

/// The manifests `reader` may see of the artifact `digest` names, newest first, with the
/// envelopes when `envelopes` (an empty list: absent, or not visible, which answer alike).
pub(crate) fn visible_manifests(
    conn: &Connection,
    reader: Seer<'_>,
    digest: &Digest,
    envelopes: bool,
) -> Result<Vec<Visible>, Error> {
    let key: Vec<u8> = match digest {
        Digest::Blake3(id) => id.0.to_vec(),
        Digest::Sha256(sha) => conn.row(BY_SHA256, [&sha.0[..]], |row| row.get(0))?,
    };
    let columns = |row: &crate::sql::Row<'_>| {
        Ok((
            (
                row.get::<_, Vec<u8>>(0)?,
                row.get::<_, Vec<u8>>(1)?,
                row.get::<_, u64>(2)?,
                row.get::<_, Option<String>>(3)?,
            ),
            (
                row.get::<_, Vec<u8>>(4)?,
                row.get::<_, String>(5)?,
                row.get::<_, u64>(6)?,
                row.get::<_, Option<String>>(7)?,
            ),
        ))
    };
    let rows = match reader {
        Seer::Operator => conn.rows(ADMIN, params![key, envelopes], columns)?,
        Seer::Agent {
            group_id,
            missions_json,
        } => conn.rows(
            AGENT,
            params![key, group_id, missions_json, envelopes],
            columns,
        )?,
    };
    rows.into_iter()
        .map(
            |(
                (blake3, sha256, size, quarantined),
                (manifest_id, media_type, sequence, envelope),
            )| {
                Ok(Visible {
                    digests: super::blobs::digests_of(blake3, sha256, size)?,
                    quarantined: quarantined.is_some(),
                    manifest_id,
                    media_type,
                    sequence,
                    envelope,
                })
            },
        )
        .collect()
}

/// The key every seek below starts from: the digest itself, or the BLAKE3 digest of the blob
/// whose SHA-256 it is (a digest no blob has becomes 32 zero bytes, so the seeks that follow
/// run as they would for a blob another Group holds).
/// An Agent's read: `?1` the BLAKE3 key, `?2` its Group, `?3` its Missions as a JSON array
/// (`NULL`: the whole Group), `?4` whether to return envelopes. Each branch seeks by (digest,
/// the reader's Group) first, on index `manifests_blake3_group`; the scoped branch adds each
/// of its Missions to the seek, so another Mission's manifest is never visited. `INDEXED BY`
/// and `CROSS JOIN` (SQLite keeps the left table outer) fix the plan: without them the
/// planner may walk the whole Group's manifests (index `manifests_group`), which costs more
/// the more the Group holds and differs between hidden and absent.
const AGENT: &str = "WITH seen(id) AS (
        SELECT m.rowid FROM manifests m INDEXED BY manifests_blake3_group WHERE ?3 IS NULL AND m.blake3 = ?1 AND m.group_id = ?2
        UNION
        SELECT m.rowid FROM json_each(?3) j CROSS JOIN manifests m INDEXED BY manifests_blake3_group
         WHERE m.blake3 = ?1 AND m.group_id = ?2 AND m.mission_id = j.value
        UNION
        SELECT m.rowid FROM reusable_artifacts r CROSS JOIN manifests m INDEXED BY manifests_blake3_group
         WHERE r.group_id = ?2 AND r.blake3 = ?1 AND m.blake3 = ?1 AND m.group_id = ?2
        UNION
        SELECT m.rowid FROM forwarded_artifacts f CROSS JOIN manifests m INDEXED BY manifests_blake3_group
         WHERE ?3 IS NULL AND f.group_id = ?2 AND f.blake3 = ?1
           AND m.blake3 = ?1 AND m.group_id = f.from_group_id AND m.rowid <= f.up_to)
    SELECT b.blake3, b.sha256, b.size, b.quarantined_at,
           m.manifest_id, m.media_type, m.sequence, CASE WHEN ?4 <> 0 THEN m.envelope END
    FROM seen CROSS JOIN manifests m CROSS JOIN blobs b
    WHERE m.rowid = seen.id AND b.blake3 = m.blake3
    ORDER BY m.rowid DESC";

/// The operator's read: every manifest of the blob (`?1` the BLAKE3 key, `?2` envelopes).
const ADMIN: &str = "SELECT b.blake3, b.sha256, b.size, b.quarantined_at,
           m.manifest_id, m.media_type, m.sequence, CASE WHEN ?2 <> 0 THEN m.envelope END
    FROM manifests m CROSS JOIN blobs b WHERE m.blake3 = ?1 AND b.blake3 = m.blake3
    ORDER BY m.rowid DESC";

/// The BLAKE3 key of the blob whose SHA-256 digest is `?1`, or 32 zero bytes when no blob
/// has it: one row either way, so the seeks that follow run as they would for a blob another
/// Group holds.
const BY_SHA256: &str =
    "SELECT coalesce((SELECT blake3 FROM blobs WHERE sha256 = ?1), zeroblob(32))";

/// One manifest of a Mission whose record is still kept, as records disposal weighs it.
pub(crate) struct KeptRecord {
    pub rowid: u64,
    pub manifest_id: ArtifactId,
    pub artifact: ArtifactId,
    pub work_item_id: String,
    pub classification: weft_api::manifest::Classification,
}

/// Up to `limit` manifests of Mission `mission_id` after row `after` whose records are still
/// kept, oldest first (issue #46, `artifacts/records.rs`).
pub(crate) fn records_kept_of_mission(
    conn: &Connection,
    mission_id: &str,
    after: u64,
    limit: u64,
) -> Result<Vec<KeptRecord>, Error> {
    let rows = conn.rows(
        "SELECT rowid, manifest_id, blake3, work_item_id, classification FROM manifests
         WHERE mission_id = ?1 AND records_disposed IS NULL AND rowid > ?2
         ORDER BY rowid LIMIT ?3",
        params![mission_id, after, limit],
        |row| {
            Ok((
                row.get::<_, u64>(0)?,
                row.get::<_, Vec<u8>>(1)?,
                row.get::<_, Vec<u8>>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, String>(4)?,
            ))
        },
    )?;
    rows.into_iter()
        .map(|(rowid, manifest, blob, work_item_id, class)| {
            Ok(KeptRecord {
                rowid,
                manifest_id: super::artifact_id(manifest)?,
                artifact: super::artifact_id(blob)?,
                work_item_id,
                classification: super::parse_name(&class)?,
            })
        })
        .collect()
}

/// Disposes of manifest `manifest_id`'s record: its signed envelope (and the file name read
/// from it) is deleted and the row stays as a tombstone naming its `records.disposed` Event (`sequence`). `false` when it
/// was disposed of already.
pub(crate) fn dispose_record(
    conn: &Connection,
    manifest_id: &ArtifactId,
    sequence: u64,
) -> Result<bool, Error> {
    let changed = conn.run(
        "UPDATE manifests SET envelope = '', name = '', records_disposed = ?2
         WHERE manifest_id = ?1 AND records_disposed IS NULL",
        params![&manifest_id.0[..], sequence],
    )?;
    Ok(changed == 1)
}

/// A tombstone as a read names it: its Group, Mission, classification and the sequence of
/// its `records.disposed` Event.
pub(crate) struct Tombstone {
    pub group_id: String,
    pub mission_id: String,
    pub classification: weft_api::manifest::Classification,
    pub disposed: u64,
}

/// Manifest `manifest_id`'s tombstone (`None`: its record is kept, or there is no such
/// manifest).
pub(crate) fn record_disposed(
    conn: &Connection,
    manifest_id: &[u8],
) -> Result<Option<Tombstone>, Error> {
    let row = conn
        .row(
            "SELECT group_id, mission_id, classification, records_disposed FROM manifests
             WHERE manifest_id = ?1 AND records_disposed IS NOT NULL",
            [manifest_id],
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, u64>(3)?,
                ))
            },
        )
        .optional()?;
    row.map(|(group_id, mission_id, class, disposed)| {
        Ok(Tombstone {
            group_id,
            mission_id,
            classification: super::parse_name(&class)?,
            disposed,
        })
    })
    .transpose()
}

/// Whether Group `group_id` keeps the record of some manifest of `blake3` (reusable knowledge
/// is published only from a kept one).
pub(crate) fn kept_in_group(
    conn: &Connection,
    blake3: &ArtifactId,
    group_id: &str,
) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM manifests WHERE blake3 = ?1 AND group_id = ?2
             AND records_disposed IS NULL LIMIT 1",
            params![&blake3.0[..], group_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// fsck's rows naming an Event: each disposed record's `records.disposed`.
pub(crate) const DISPOSED_EVENTS: &str = "SELECT group_id, records_disposed AS sequence FROM manifests WHERE records_disposed IS NOT NULL";
