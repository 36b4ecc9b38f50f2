//! The `work_history` table: the only SQL that names it. Each row names one Event of a
//! WorkItem (`work_item_id`, `sequence`), so a WorkItem's own Events are found without
//! walking its Group's log; the queries that join those Events (`events`) to find the last
//! one of a type are here, since they are about this table's rows.

use crate::sql::{Ahead, Connection, OptionalExtension as _, params};
use chrono::{DateTime, Utc};

use super::instant;
use crate::error::Error;
use crate::sql::Cached as _;

/// fsck's rows naming an Event through a WorkItem's Group (as `group_id`, `sequence`, and
/// the type the entry says the Event is as `said`): each `work_history` entry.
pub(crate) const HISTORY_EVENTS: &str =
    "SELECT w.group_id AS group_id, h.sequence AS sequence, h.type AS said FROM work_history h
     JOIN work_items w ON w.work_item_id = h.work_item_id";

/// The WorkItem's last `work.failed`, through its own history: one entry of the
/// `(work_item_id, type, sequence)` index (V40), however many Events the WorkItem has.
/// `CROSS JOIN` fixes the loop order: left to the planner, SQLite walked every Event of the
/// Group looking for the type, and `work.start` slowed linearly with the Group's log (29 → 8
/// leases/s at 10,000 leases).
pub(crate) const LAST_FAILURE: &str = "SELECT e.appended_at FROM work_history h
     CROSS JOIN events e ON e.group_id = ?1 AND e.sequence = h.sequence
     WHERE h.work_item_id = ?2 AND h.type = 'work.failed'
     ORDER BY h.sequence DESC LIMIT 1";

/// The WorkItem's newest `work.started` or `work.failed`, with the ownership epoch the Event
/// left the WorkItem at: the newer of the newest of each type, two index entries (a list of
/// types in the key's middle would walk the WorkItem's range on PostgreSQL, as it did for
/// `commands`' lookup).
pub(crate) const LAST_START_OR_FAILURE: &str =
    "SELECT e.type, CAST(json_extract(e.payload, '$.ownershipEpoch') AS BIGINT)
     FROM (SELECT * FROM (SELECT h.sequence FROM work_history h
                          WHERE h.work_item_id = ?2 AND h.type = 'work.started'
                          ORDER BY h.sequence DESC LIMIT 1) started
           UNION ALL
           SELECT * FROM (SELECT h.sequence FROM work_history h
                          WHERE h.work_item_id = ?2 AND h.type = 'work.failed'
                          ORDER BY h.sequence DESC LIMIT 1) failed) newest
     CROSS JOIN events e ON e.group_id = ?1 AND e.sequence = newest.sequence
     ORDER BY newest.sequence DESC LIMIT 1";

/// The Event at `sequence`, of type `kind`, is WorkItem `work_item_id`'s.
pub(crate) fn insert(
    conn: &Connection,
    work_item_id: &str,
    sequence: u64,
    kind: &str,
) -> Result<(), Error> {
    conn.run_later(
        "INSERT INTO work_history (work_item_id, sequence, type) VALUES (?1, ?2, ?3)",
        params![work_item_id, sequence, kind],
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
    let at: Option<String> = conn
        .row(LAST_FAILURE, params![group_id, work_item_id], |r| r.get(0))
        .optional()?;
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

/// Rewrites the type WorkItem `work_item_id`'s history entry at `sequence` says its Event is
/// (`bench_support::tamper`).
#[cfg(feature = "bench-support")]
pub(crate) fn tamper_type(
    conn: &Connection,
    work_item_id: &str,
    sequence: u64,
    kind: &str,
) -> Result<usize, Error> {
    Ok(conn.run(
        "UPDATE work_history SET type = ?3 WHERE work_item_id = ?1 AND sequence = ?2",
        params![work_item_id, sequence, kind],
    )?)
}

/// The WorkItem's newest `work.submitted`: one entry of the type index, as [`LAST_FAILURE`].
pub(crate) const LAST_SUBMISSION: &str = "SELECT ev.sequence, ev.payload FROM work_history h
     CROSS JOIN events ev ON ev.group_id = ?1 AND ev.sequence = h.sequence
     WHERE h.work_item_id = ?2 AND h.type = 'work.submitted'
     ORDER BY h.sequence DESC LIMIT 1";

/// The sequence and payload of the WorkItem's newest `work.submitted`.
pub(crate) fn last_submission(
    conn: &Connection,
    group_id: &str,
    work_item_id: &str,
) -> Result<Option<(u64, String)>, Error> {
    Ok(conn
        .row(LAST_SUBMISSION, params![group_id, work_item_id], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?)
}

#[cfg(test)]
mod tests {
    use crate::db::{Db, Location};
    use crate::sql::Cached as _;

    /// `work.start`'s retry look-ups and the review's last submission read one WorkItem's
    /// history by type, never a Group's whole log nor the WorkItem's every Event (V40).
    #[test]
    fn the_last_of_a_type_is_found_without_walking_a_history() {
        let conn = crate::sql::Connection::open_in_memory().expect("open");
        crate::schema::migrate(&conn).expect("schema");
        let conn = conn.sqlite().expect("SQLite");
        for sql in [
            super::LAST_FAILURE,
            super::LAST_START_OR_FAILURE,
            super::LAST_SUBMISSION,
        ] {
            let mut plan = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .expect("plan");
            let steps: Vec<String> = plan
                .query_map(["g", "w"], |row| row.get(3))
                .expect("rows")
                .collect::<Result<_, _>>()
                .expect("steps");
            let history: Vec<&String> = steps.iter().filter(|step| step.contains(" h ")).collect();
            assert!(!history.is_empty(), "{sql}: {steps:?}");
            for step in history {
                assert!(
                    step.starts_with("SEARCH")
                        && step.contains("work_history_by_type (work_item_id=? AND type=?)"),
                    "{sql}: {steps:?}"
                );
            }
            assert!(
                steps
                    .iter()
                    .filter(|step| step.contains(" e ") || step.contains(" ev "))
                    .all(|step| step.starts_with("SEARCH") && step.contains("PRIMARY KEY")),
                "{sql}: {steps:?}"
            );
        }
    }

    /// On PostgreSQL, as on SQLite: a WorkItem's last start or failure and its last submission
    /// are found in a few pages of its history, however many progress reports came since
    /// (before V40, each walked them all).
    #[tokio::test]
    async fn a_last_start_is_found_in_a_few_pages_of_a_long_history() {
        let Some(url) = weft_testkit::postgres_database_or_skip() else {
            return;
        };
        let db = Db::open(&Location::Postgres(url)).expect("open");
        let (fetched, found) = db
            .write(move |tx| {
                tx.run("SET LOCAL session_replication_role = replica", [])?;
                // The WorkItem's Events in its Group's log, as they are appended.
                let mut appended = Vec::new();
                for sequence in 1..3003u64 {
                    let kind = match sequence {
                        1 => "work.started",
                        2 => "work.submitted",
                        _ => "work.progress",
                    };
                    appended.push((sequence, kind, format!("e-{sequence}")));
                }
                for (sequence, kind, event_id) in &appended {
                    crate::rows::events::insert(
                        tx,
                        &crate::rows::events::New {
                            event_id,
                            group_id: "g",
                            sequence: *sequence,
                            kind,
                            causation_command_id: None,
                            actor: None,
                            payload: "{\"ownershipEpoch\": 1}",
                            appended_at: "2026-12-06T00:00:00Z",
                            prev_hash: &[0; 32],
                            hash: &[0; 32],
                        },
                    )?;
                    super::insert(tx, "w", *sequence, kind)?;
                    super::insert(tx, "other", *sequence, "work.progress")?;
                }
                tx.run("SET LOCAL enable_seqscan = off", [])?;
                let (mut fetched, mut found_rows) = (Vec::new(), Vec::new());
                for sql in [
                    super::LAST_FAILURE,
                    super::LAST_START_OR_FAILURE,
                    super::LAST_SUBMISSION,
                ] {
                    let before = crate::rows::pages_fetched(tx, "work_history")?;
                    let found = tx.rows(sql, crate::sql::params!["g", "w"], |_| Ok(()))?;
                    found_rows.push(found.len());
                    fetched.push(crate::rows::pages_fetched(tx, "work_history")? - before);
                }
                Ok((fetched, found_rows))
            })
            .await
            .expect("read");
        // No failure; the start and the submission found.
        assert_eq!(found, [0, 1, 1]);
        for pages in &fetched {
            assert!(*pages <= 10, "fetched {fetched:?} pages");
        }
    }
}
