//! The `work_history` table: the only SQL that names it. Each row names one Event of a
//! WorkItem (`work_item_id`, `sequence`), so a WorkItem's own Events are found without
//! walking its Group's log; the queries that join those Events (`events`) to find the last
//! one of a type are here, since they are about this table's rows.

use crate::sql::{Ahead, Connection, OptionalExtension as _, params};
use chrono::{DateTime, Utc};

use super::instant;
use crate::error::Error;
use crate::sql::Cached as _;

/// fsck's rows naming an Event through a WorkItem's Group (as `group_id`, `sequence`): each
/// `work_history` entry.
pub(crate) const HISTORY_EVENTS: &str =
    "SELECT w.group_id AS group_id, h.sequence AS sequence FROM work_history h
     JOIN work_items w ON w.work_item_id = h.work_item_id";

/// The WorkItem's last `work.failed`, through its own history. `CROSS JOIN` fixes the loop
/// order: left to the planner, SQLite walked every Event of the Group looking for the type,
/// and `work.start` slowed linearly with the Group's log (29 → 8 leases/s at 10,000 leases).
const LAST_FAILURE: &str = "SELECT max(e.appended_at) FROM work_history h
     CROSS JOIN events e ON e.group_id = ?1 AND e.sequence = h.sequence
     WHERE h.work_item_id = ?2 AND e.type = 'work.failed'";

/// The WorkItem's newest `work.started` or `work.failed`, through its own history, newest
/// first (`CROSS JOIN` for the same reason as [`LAST_FAILURE`]), with the ownership epoch the
/// Event left the WorkItem at.
const LAST_START_OR_FAILURE: &str =
    "SELECT e.type, CAST(json_extract(e.payload, '$.ownershipEpoch') AS BIGINT)
     FROM work_history h
     CROSS JOIN events e ON e.group_id = ?1 AND e.sequence = h.sequence
     WHERE h.work_item_id = ?2 AND e.type IN ('work.started', 'work.failed')
     ORDER BY h.sequence DESC LIMIT 1";

/// The Event at `sequence` is WorkItem `work_item_id`'s.
pub(crate) fn insert(conn: &Connection, work_item_id: &str, sequence: u64) -> Result<(), Error> {
    conn.run_later(
        "INSERT INTO work_history (work_item_id, sequence) VALUES (?1, ?2)",
        params![work_item_id, sequence],
    )?;
    Ok(())
}

/// The newest `limit` sequences of WorkItem `work_item_id`'s Events, newest first. Sent ahead of its use
/// (`sql/ahead.rs`): read with `get`.
pub(crate) fn newest(
    conn: &Connection,
    work_item_id: &str,
    limit: u64,
) -> Result<Ahead<Vec<u64>, Error>, Error> {
    let history = conn.rows_ahead(
        "SELECT sequence FROM work_history WHERE work_item_id = ?1
         ORDER BY sequence DESC LIMIT ?2",
        params![work_item_id, limit],
        |r| r.get::<_, u64>(0),
    )?;
    Ok(history.then(Ok))
}

/// When the WorkItem's last `work.failed` was appended, if it ever failed.
pub(crate) fn last_failure(
    conn: &Connection,
    group_id: &str,
    work_item_id: &str,
) -> Result<Option<DateTime<Utc>>, Error> {
    let at: Option<String> =
        conn.row(LAST_FAILURE, params![group_id, work_item_id], |r| r.get(0))?;
    at.as_deref().map(instant).transpose()
}

/// The type of the WorkItem's newest `work.started` or `work.failed`, with the ownership
/// epoch it left the WorkItem at.
pub(crate) fn last_start_or_failure(
    conn: &Connection,
    group_id: &str,
    work_item_id: &str,
) -> Result<Option<(String, Option<u64>)>, Error> {
    Ok(conn
        .row(
            LAST_START_OR_FAILURE,
            params![group_id, work_item_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?)
}

/// The sequence and payload of the WorkItem's newest `work.submitted`.
pub(crate) fn last_submission(
    conn: &Connection,
    group_id: &str,
    work_item_id: &str,
) -> Result<Option<(u64, String)>, Error> {
    Ok(conn
        .row(
            "SELECT ev.sequence, ev.payload FROM work_history h
             CROSS JOIN events ev ON ev.group_id = ?1 AND ev.sequence = h.sequence
             WHERE h.work_item_id = ?2 AND ev.type = 'work.submitted'
             ORDER BY h.sequence DESC LIMIT 1",
            params![group_id, work_item_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?)
}

#[cfg(test)]
mod tests {
    /// `work.start`'s retry look-up reads one WorkItem's history, never a Group's whole log.
    #[test]
    fn the_last_failure_is_found_without_scanning_the_log() {
        let conn = crate::sql::Connection::open_in_memory().expect("open");
        crate::schema::migrate(&conn).expect("schema");
        let conn = conn.sqlite().expect("SQLite");
        let mut plan = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", super::LAST_FAILURE))
            .expect("plan");
        let steps: Vec<String> = plan
            .query_map(["g", "w"], |row| row.get(3))
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("steps");
        assert!(
            steps.iter().all(|step| step.starts_with("SEARCH")),
            "{steps:?}"
        );
        assert!(
            steps[0].contains(" h "),
            "the history drives the loop: {steps:?}"
        );
    }
}
