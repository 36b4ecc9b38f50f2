//! The `evidence` table: one row per recorded Evidence (its scope, criterion, outcome, method,
//! producer, the record it supersedes, the envelope as received, its `evidence.recorded`
//! Event and the producer's standing when it was recorded), and the only SQL that names it.
//!
//! Ids are `weft_api::ArtifactId` on the way in; the columns come back as the text the row
//! holds (outcomes, methods and standings as their wire names), which the callers parse as
//! they did: retyping them would touch every weighing in `standing.rs` and
//! `work::checks`.

use crate::sql::{Connection, OptionalExtension as _, params};
use weft_api::ArtifactId;

use super::Seer;
use crate::error::Error;
use crate::sql::Cached as _;

/// A record as it is written.
pub(crate) struct New<'a> {
    pub(crate) evidence_id: &'a ArtifactId,
    pub(crate) group_id: &'a str,
    pub(crate) mission_id: &'a str,
    pub(crate) work_item_id: &'a str,
    pub(crate) criterion: &'a str,
    pub(crate) outcome: &'a str,
    pub(crate) method_kind: &'a str,
    pub(crate) producer: &'a str,
    /// The Evidence's own `timestamp`, RFC 3339.
    pub(crate) timestamp: &'a str,
    pub(crate) supersedes: Option<&'a ArtifactId>,
    /// The DSSE envelope as received (JSON).
    pub(crate) envelope: &'a str,
    /// Its `evidence.recorded` Event.
    pub(crate) sequence: u64,
    pub(crate) standing: &'a str,
}

/// Writes `row`.
pub(crate) fn insert(conn: &Connection, row: &New<'_>) -> Result<(), Error> {
    conn.run_later(
        "INSERT INTO evidence (evidence_id, group_id, mission_id, work_item_id, criterion, outcome, method_kind,
                               producer, timestamp, supersedes, envelope, sequence, standing)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        params![
            &row.evidence_id.0[..], row.group_id, row.mission_id, row.work_item_id,
            row.criterion, row.outcome, row.method_kind,
            row.producer, row.timestamp, row.supersedes.map(|id| id.0.to_vec()),
            row.envelope, row.sequence, row.standing
        ],
    )?;
    Ok(())
}

/// The sequence of Evidence `evidence_id`'s `evidence.recorded`, if it is recorded, and of
/// its `records.disposed` if its envelope went by a retention policy (issue #46).
pub(crate) fn sequence_of(
    conn: &Connection,
    evidence_id: &ArtifactId,
) -> Result<Option<(u64, Option<u64>)>, Error> {
    Ok(conn
        .row(
            "SELECT sequence, records_disposed FROM evidence WHERE evidence_id = ?1",
            [&evidence_id.0[..]],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?)
}

/// The SQL fragment and parameters restricting Evidence rows `e` to `seer`'s Group and, for a
/// Mission-scoped member, to its Missions (CTX-5): every Evidence read goes through it.
fn visible_clause(seer: &Seer<'_>, args: &mut Vec<Box<dyn crate::sql::ToValue>>) -> String {
    match seer {
        Seer::Operator => String::new(),
        Seer::Agent {
            group_id,
            missions_json,
        } => {
            args.push(Box::new(group_id.to_string()));
            let mut clause = format!(" AND e.group_id = ?{}", args.len());
            if let Some(missions) = missions_json {
                args.push(Box::new(missions.clone()));
                clause.push_str(&format!(
                    " AND e.mission_id IN (SELECT value FROM json_each(?{}))",
                    args.len()
                ));
            }
            clause
        }
    }
}

/// What a listing of Evidence filters on (`GET /v1/evidence`): each `Some` is a condition.
pub(crate) struct ListQuery<'a> {
    pub(crate) work_item_id: Option<String>,
    pub(crate) criterion: Option<&'a str>,
    pub(crate) outcome: Option<&'static str>,
    pub(crate) method_kind: Option<&'static str>,
    pub(crate) producer: Option<String>,
    pub(crate) mission_id: Option<String>,
    /// Only records that cite this artifact.
    pub(crate) artifact: Option<ArtifactId>,
    /// Only records that supersede this one (through `evidence_supersedes`).
    pub(crate) supersedes: Option<ArtifactId>,
    /// Only records older than this rowid.
    pub(crate) before: Option<u64>,
    /// Rows wanted; one more is returned when there are more.
    pub(crate) limit: u32,
}

/// One listed record: (rowid, Evidence id, Group, sequence, envelope).
pub(crate) type Listed = (u64, Vec<u8>, String, u64, String);

/// The records `query` selects that `seer` may see, newest first, at most `limit + 1`.
pub(crate) fn list(
    conn: &Connection,
    query: &ListQuery<'_>,
    seer: &Seer<'_>,
) -> Result<Vec<Listed>, Error> {
    let mut args: Vec<Box<dyn crate::sql::ToValue>> = Vec::new();
    let mut sql = String::from(
        "SELECT e.rowid, e.evidence_id, e.group_id, e.sequence, e.envelope FROM evidence e
         WHERE e.records_disposed IS NULL",
    );
    let mut add = |clause: &str,
                   value: Box<dyn crate::sql::ToValue>,
                   args: &mut Vec<Box<dyn crate::sql::ToValue>>| {
        args.push(value);
        sql.push_str(&format!(" AND {clause} ?{}", args.len()));
    };
    if let Some(v) = &query.work_item_id {
        add("e.work_item_id =", Box::new(v.clone()), &mut args);
    }
    if let Some(v) = query.criterion {
        add("e.criterion =", Box::new(v.to_owned()), &mut args);
    }
    if let Some(v) = query.outcome {
        add("e.outcome =", Box::new(v), &mut args);
    }
    if let Some(v) = query.method_kind {
        add("e.method_kind =", Box::new(v), &mut args);
    }
    if let Some(v) = &query.producer {
        add("e.producer =", Box::new(v.clone()), &mut args);
    }
    if let Some(v) = &query.mission_id {
        add("e.mission_id =", Box::new(v.clone()), &mut args);
    }
    if let Some(v) = query.before {
        add("e.rowid <", Box::new(v), &mut args);
    }
    if let Some(v) = query.supersedes {
        add("e.supersedes =", Box::new(v.0.to_vec()), &mut args);
    }
    if let Some(artifact) = query.artifact {
        add(
            &format!("e.evidence_id IN ({}", super::evidence_artifacts::CITING),
            Box::new(artifact.0.to_vec()),
            &mut args,
        );
        sql.push(')');
    }
    sql.push_str(&visible_clause(seer, &mut args));
    args.push(Box::new(query.limit + 1));
    sql.push_str(&format!(" ORDER BY e.rowid DESC LIMIT ?{}", args.len()));
    let params: Vec<&dyn crate::sql::ToValue> = args.iter().map(|arg| arg.as_ref()).collect();
    let rows = conn.rows(&sql, params.as_slice(), |row| {
        Ok((
            row.get::<_, u64>(0)?,
            row.get::<_, Vec<u8>>(1)?,
            row.get::<_, String>(2)?,
            row.get::<_, u64>(3)?,
            row.get::<_, String>(4)?,
        ))
    })?;
    Ok(rows)
}

/// One record as read: (Group, sequence, envelope, and the sequence of its `records.disposed`
/// Event when its record went by policy: the envelope is then `''`).
pub(crate) type One = (String, u64, String, Option<u64>);

/// Record `evidence_id` if `seer` may see it.
pub(crate) fn visible_one(
    conn: &Connection,
    evidence_id: &ArtifactId,
    seer: &Seer<'_>,
) -> Result<Option<One>, Error> {
    let mut args: Vec<Box<dyn crate::sql::ToValue>> = vec![Box::new(evidence_id.0.to_vec())];
    let sql = format!(
        "SELECT e.group_id, e.sequence, e.envelope, e.records_disposed FROM evidence e
         WHERE e.evidence_id = ?1{}",
        visible_clause(seer, &mut args)
    );
    let params: Vec<&dyn crate::sql::ToValue> = args.iter().map(|arg| arg.as_ref()).collect();
    Ok(conn
        .row(&sql, params.as_slice(), |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, u64>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, Option<u64>>(3)?,
            ))
        })
        .optional()?)
}

/// A record as a WorkItem's criteria weigh it: (Evidence id, criterion, outcome, method,
/// producer, timestamp, sequence, standing), and its (Group, Mission).
pub(crate) type CriterionRow = (
    (Vec<u8>, String, String, String, String, String, u64, String),
    (String, String),
);

/// The records of WorkItem `work_item_id` (of Mission `mission_id` when named) that `seer`
/// may see, oldest first.
pub(crate) fn of_work_item(
    conn: &Connection,
    work_item_id: &str,
    mission_id: Option<&str>,
    seer: &Seer<'_>,
) -> Result<Vec<CriterionRow>, Error> {
    let mut args: Vec<Box<dyn crate::sql::ToValue>> = vec![Box::new(work_item_id.to_owned())];
    let mut mission_clause = String::new();
    if let Some(mission) = mission_id {
        args.push(Box::new(mission.to_owned()));
        mission_clause = format!(" AND e.mission_id = ?{}", args.len());
    }
    let sql = format!(
        "SELECT e.evidence_id, e.criterion, e.outcome, e.method_kind, e.producer, e.timestamp, e.sequence,
                e.standing,
                e.group_id, e.mission_id
         FROM evidence e WHERE e.work_item_id = ?1{mission_clause}{} ORDER BY e.rowid",
        visible_clause(seer, &mut args)
    );
    let params: Vec<&dyn crate::sql::ToValue> = args.iter().map(|arg| arg.as_ref()).collect();
    let rows = conn.rows(&sql, params.as_slice(), |row| {
        Ok((
            (
                row.get::<_, Vec<u8>>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, String>(4)?,
                row.get::<_, String>(5)?,
                row.get::<_, u64>(6)?,
                row.get::<_, String>(7)?,
            ),
            (row.get::<_, String>(8)?, row.get::<_, String>(9)?),
        ))
    })?;
    Ok(rows)
}

/// A correction of WorkItem `work_item`'s records with the record it supersedes:
/// (superseded id, corrector, its standing, the superseded record's producer, its method,
/// the correction's method, the superseded record's standing).
pub(crate) type Correction = (Vec<u8>, String, String, String, String, String, String);

/// Every correction among WorkItem `work_item`'s records.
pub(crate) fn corrections(conn: &Connection, work_item: &str) -> Result<Vec<Correction>, Error> {
    Ok(conn.rows(
        "SELECT s.supersedes, s.producer, s.standing, e.producer, e.method_kind, s.method_kind, e.standing
         FROM evidence s JOIN evidence e ON e.evidence_id = s.supersedes
         WHERE s.work_item_id = ?1 AND s.supersedes IS NOT NULL",
        [work_item],
        |row| {
            Ok((
                row.get::<_, Vec<u8>>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, String>(4)?,
                row.get::<_, String>(5)?,
                row.get::<_, String>(6)?,
            ))
        },
    )?)
}

/// A record as a correction checks it: (Group, Mission, WorkItem, criterion, producer,
/// method, standing).
pub(crate) type Target = (String, String, String, String, String, String, String);

/// Record `evidence_id` as a correction of it checks it, if it is recorded.
pub(crate) fn target(conn: &Connection, evidence_id: &ArtifactId) -> Result<Option<Target>, Error> {
    Ok(conn
        .row(
            "SELECT group_id, mission_id, work_item_id, criterion, producer, method_kind, standing
             FROM evidence WHERE evidence_id = ?1",
            [&evidence_id.0[..]],
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
        .optional()?)
}

/// Record `evidence_id` of Group `group_id` as a reuse approval is checked: (producer,
/// Mission, standing, envelope).
pub(crate) fn approval(
    conn: &Connection,
    evidence_id: &ArtifactId,
    group_id: &str,
) -> Result<Option<(String, String, String, String)>, Error> {
    Ok(conn
        .row(
            "SELECT producer, mission_id, standing, envelope FROM evidence
             WHERE evidence_id = ?1 AND group_id = ?2 AND records_disposed IS NULL",
            params![&evidence_id.0[..], group_id],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )
        .optional()?)
}

/// The newest record of `producer` with `method_kind` on `criterion` of WorkItem
/// `work_item_id` of Mission `mission_id` in Group `group_id` that no record supersedes: what
/// the built-in reviewer's next run of that check supersedes.
pub(crate) fn newest_in_force_of(
    conn: &Connection,
    (group_id, mission_id, work_item_id): (&str, &str, &str),
    criterion: &str,
    method_kind: &str,
    producer: &str,
) -> Result<Option<Vec<u8>>, Error> {
    Ok(conn
        .row(
            "SELECT e.evidence_id FROM evidence e
             WHERE e.work_item_id = ?1 AND e.criterion = ?2 AND e.mission_id = ?3
               AND e.group_id = ?4 AND e.method_kind = ?5 AND e.producer = ?6
               AND NOT EXISTS (SELECT 1 FROM evidence s WHERE s.supersedes = e.evidence_id)
             ORDER BY e.rowid DESC LIMIT 1",
            params![
                work_item_id,
                criterion,
                mission_id,
                group_id,
                method_kind,
                producer
            ],
            |row| row.get(0),
        )
        .optional()?)
}

/// Whether any record supersedes `evidence_id`.
pub(crate) fn is_superseded(conn: &Connection, evidence_id: &ArtifactId) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM evidence WHERE supersedes = ?1",
            [&evidence_id.0[..]],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// A record as a completion weighs it: (outcome, method, standing, producer, sequence).
pub(crate) type Verdict = (String, String, String, String, u64);

/// Record `evidence_id` for `criterion` as a completion weighs it.
pub(crate) fn verdict(
    conn: &Connection,
    evidence_id: &ArtifactId,
    criterion: &str,
) -> Result<Option<Verdict>, Error> {
    Ok(conn
        .row(
            "SELECT e.outcome, e.method_kind, e.standing, e.producer, e.sequence
             FROM evidence e WHERE e.evidence_id = ?1 AND e.criterion = ?2",
            params![&evidence_id.0[..], criterion],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .optional()?)
}

/// The criterion of record `evidence_id` if it is about WorkItem `work_item_id` of Mission
/// `mission_id` in Group `group_id`.
pub(crate) fn criterion_in(
    conn: &Connection,
    evidence_id: &ArtifactId,
    group_id: &str,
    mission_id: &str,
    work_item_id: &str,
) -> Result<Option<String>, Error> {
    Ok(conn
        .row(
            "SELECT criterion FROM evidence WHERE evidence_id = ?1 AND group_id = ?2 AND mission_id = ?3 AND work_item_id = ?4",
            params![&evidence_id.0[..], group_id, mission_id, work_item_id],
            |r| r.get(0),
        )
        .optional()?)
}

/// How many records there are.
pub(crate) fn count(conn: &Connection) -> Result<u64, Error> {
    Ok(conn.row("SELECT COUNT(*) FROM evidence", [], |row| row.get(0))?)
}

/// fsck's rows naming an Event: each record's `evidence.recorded`.
pub(crate) const RECORDED_EVENTS: &str = "SELECT group_id, sequence FROM evidence";

/// Every Evidence record citing artifact `blake3`: (Group, Mission, WorkItem), each once.
pub(crate) fn citations(
    conn: &Connection,
    blake3: &ArtifactId,
) -> Result<Vec<(weft_api::Id, weft_api::Id, weft_api::Id)>, Error> {
    let sql = format!(
        "SELECT DISTINCT group_id, mission_id, work_item_id FROM evidence
         WHERE evidence_id IN ({} ?1) ORDER BY group_id, mission_id, work_item_id",
        super::evidence_artifacts::CITING
    );
    let rows = conn.rows(&sql, [&blake3.0[..]], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, String>(2)?,
        ))
    })?;
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
    let sql = super::evidence_artifacts::cited_in(
        "SELECT evidence_id FROM evidence WHERE mission_id = ?1 AND (?2 IS NULL OR work_item_id = ?2)",
    );
    let rows = conn.rows(&sql, params![mission_id, work_item_id], |row| {
        row.get::<_, Vec<u8>>(0)
    })?;
    rows.into_iter().map(super::artifact_id).collect()
}

/// Up to `limit` Evidence records of Mission `mission_id` after row `after` that are still
/// kept, oldest first: (rowid, Evidence id, WorkItem) (issue #46, `artifacts/records.rs`).
pub(crate) fn records_kept_of_mission(
    conn: &Connection,
    mission_id: &str,
    after: u64,
    limit: u64,
) -> Result<Vec<(u64, ArtifactId, String)>, Error> {
    let rows = conn.rows(
        "SELECT rowid, evidence_id, work_item_id FROM evidence
         WHERE mission_id = ?1 AND records_disposed IS NULL AND rowid > ?2
         ORDER BY rowid LIMIT ?3",
        params![mission_id, after, limit],
        |row| {
            Ok((
                row.get::<_, u64>(0)?,
                row.get::<_, Vec<u8>>(1)?,
                row.get::<_, String>(2)?,
            ))
        },
    )?;
    rows.into_iter()
        .map(|(rowid, id, work_item)| Ok((rowid, super::artifact_id(id)?, work_item)))
        .collect()
}

/// Disposes of record `evidence_id`: its signed envelope is deleted and the row stays as a
/// tombstone naming its `records.disposed` Event (`sequence`); its verdict columns stay, so a
/// WorkItem's criteria still weigh it. `false` when it was disposed of already.
pub(crate) fn dispose_record(
    conn: &Connection,
    evidence_id: &ArtifactId,
    sequence: u64,
) -> Result<bool, Error> {
    let changed = conn.run(
        "UPDATE evidence SET envelope = '', records_disposed = ?2
         WHERE evidence_id = ?1 AND records_disposed IS NULL",
        params![&evidence_id.0[..], sequence],
    )?;
    Ok(changed == 1)
}

/// fsck's rows naming an Event: each disposed record's `records.disposed`.
pub(crate) const DISPOSED_EVENTS: &str = "SELECT group_id, records_disposed AS sequence FROM evidence WHERE records_disposed IS NOT NULL";
