//! The `retention_policies` table: the retention policy of each Group (`mission_id` and
//! `classification` ''), of single Missions and of one classification of a Group's artifacts
//! (issue #46), and the only SQL that names it. Durations are seconds; NULL
//! keeps that kind of thing forever. The rule that reads them is `weft_api::lifecycle`.

use crate::sql::{Connection, params};
use weft_api::Id;
use weft_api::lifecycle::Retention;
use weft_api::manifest::Classification;

use super::id;
use crate::error::Error;
use crate::sql::Cached as _;

/// One policy: the Mission it is for (`None`: the Group's), its durations, its Event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PolicyRow {
    pub(crate) group_id: Id,
    pub(crate) mission_id: Option<Id>,
    /// The classification (`public` … `restricted`) it is for, if any.
    pub(crate) classification: Option<Classification>,
    pub(crate) retention: Retention,
    pub(crate) sequence: u64,
}

/// Sets (or replaces) the policy of `row.group_id` / `row.mission_id`.
pub(crate) fn set(conn: &Connection, row: &PolicyRow) -> Result<(), Error> {
    conn.run(
        "INSERT INTO retention_policies (group_id, mission_id, classification, keep_bytes,
                                         keep_records, sequence)
         VALUES (?1, ?2, ?6, ?3, ?4, ?5)
         ON CONFLICT (group_id, mission_id, classification) DO UPDATE SET
             keep_bytes = excluded.keep_bytes, keep_records = excluded.keep_records,
             sequence = excluded.sequence",
        params![
            row.group_id.as_str(),
            row.mission_id.as_ref().map_or("", Id::as_str),
            row.retention.keep_bytes_seconds,
            row.retention.keep_records_seconds,
            row.sequence,
            row.classification.map_or("", Classification::as_str)
        ],
    )?;
    Ok(())
}

/// Group `group_id`'s policies: its own first, then its Missions' by id.
pub(crate) fn of_group(conn: &Connection, group_id: &str) -> Result<Vec<PolicyRow>, Error> {
    load(
        conn,
        "SELECT group_id, mission_id, keep_bytes, keep_records, sequence, classification
         FROM retention_policies WHERE group_id = ?1 ORDER BY mission_id, classification",
        params![group_id],
    )
}

/// Every policy of every Group.
pub(crate) fn all(conn: &Connection) -> Result<Vec<PolicyRow>, Error> {
    load(
        conn,
        "SELECT group_id, mission_id, keep_bytes, keep_records, sequence, classification
         FROM retention_policies ORDER BY group_id, mission_id, classification",
        params![],
    )
}

fn load(
    conn: &Connection,
    sql: &str,
    params: impl crate::sql::Params,
) -> Result<Vec<PolicyRow>, Error> {
    let raw = conn.rows(sql, params, |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, Option<u64>>(2)?,
            row.get::<_, Option<u64>>(3)?,
            row.get::<_, u64>(4)?,
            row.get::<_, String>(5)?,
        ))
    })?;
    raw.into_iter()
        .map(
            |(group, mission, keep_bytes, keep_records, sequence, classification)| {
                Ok(PolicyRow {
                    group_id: id("groupId", &group)?,
                    mission_id: (!mission.is_empty())
                        .then(|| id("missionId", &mission))
                        .transpose()?,
                    classification: (!classification.is_empty())
                        .then(|| super::parse_name(&classification))
                        .transpose()?,
                    retention: Retention {
                        keep_bytes_seconds: keep_bytes,
                        keep_records_seconds: keep_records,
                    },
                    sequence,
                })
            },
        )
        .collect()
}
