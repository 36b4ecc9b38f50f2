//! The `events` table: the only SQL that names it. Each Group's online log, one row per
//! Event with its hash chain (`events.rs` appends and hashes; `compaction.rs` moves old rows
//! into signed snapshots). Rows are handed back as stored: hashes as bytes, instants as text.

use crate::sql::{Connection, OptionalExtension as _, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// One Event as its row holds it.
pub(crate) struct Row {
    pub(crate) event_id: String,
    pub(crate) group_id: String,
    pub(crate) sequence: u64,
    pub(crate) kind: String,
    pub(crate) causation_command_id: Option<String>,
    pub(crate) payload: String,
    pub(crate) appended_at: String,
    pub(crate) prev_hash: Vec<u8>,
    pub(crate) hash: Vec<u8>,
}

impl Row {
    /// The Event as the log serves it (its payload's exact text, its hashes as digests).
    pub(crate) fn into_event(self) -> Result<weft_api::Event, Error> {
        Ok(weft_api::Event {
            event_id: self.event_id,
            group_id: self.group_id,
            sequence: self.sequence,
            kind: self.kind,
            causation_command_id: self.causation_command_id,
            payload: serde_json::value::RawValue::from_string(self.payload)
                .map_err(Error::backend)?,
            appended_at: self.appended_at,
            prev_hash: weft_api::event::EventHash(super::bytes32(self.prev_hash)?),
            hash: weft_api::event::EventHash(super::bytes32(self.hash)?),
        })
    }
}

/// A new Event row, borrowed from the Event being appended (nothing copied on the hot path).
pub(crate) struct New<'a> {
    pub(crate) event_id: &'a str,
    pub(crate) group_id: &'a str,
    pub(crate) sequence: u64,
    pub(crate) kind: &'a str,
    pub(crate) causation_command_id: Option<&'a str>,
    /// The Agent who acted (`EventPayload::actor`), the index of an Agent's Events.
    pub(crate) actor: Option<&'a str>,
    pub(crate) payload: &'a str,
    pub(crate) appended_at: &'a str,
    pub(crate) prev_hash: &'a [u8],
    pub(crate) hash: &'a [u8],
}

/// Appends one Event row.
pub(crate) fn insert(conn: &Connection, row: &New<'_>) -> Result<(), Error> {
    conn.run_later(
        "INSERT INTO events (group_id, sequence, event_id, type, causation_command_id, payload,
                             appended_at, prev_hash, hash, actor)
         VALUES (?1, ?2, ?3, ?4, ?9, ?5, ?6, ?7, ?8, ?10)",
        params![
            row.group_id,
            row.sequence,
            row.event_id,
            row.kind,
            row.payload,
            row.appended_at,
            row.prev_hash,
            row.hash,
            row.causation_command_id,
            row.actor
        ],
    )?;
    Ok(())
}

/// `(sequence, hash)` of the newest online Event of a Group.
pub(crate) fn newest(conn: &Connection, group_id: &str) -> Result<Option<(u64, Vec<u8>)>, Error> {
    Ok(conn
        .row(
            "SELECT sequence, hash FROM events WHERE group_id = ?1 ORDER BY sequence DESC LIMIT 1",
            [group_id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?)
}

/// The Events of `group_id` after `after`, at most `limit`, in order.
pub(crate) fn after(
    conn: &Connection,
    group_id: &str,
    after: u64,
    limit: u32,
) -> Result<Vec<Row>, Error> {
    Ok(conn.rows(
        "SELECT event_id, group_id, sequence, type, causation_command_id, payload, appended_at,
                prev_hash, hash
         FROM events WHERE group_id = ?1 AND sequence > ?2 ORDER BY sequence LIMIT ?3",
        params![group_id, after, limit],
        to_row,
    )?)
}

/// The Events of `group_id` whose actor is `agent_id` (`EventPayload::actor`), before
/// `before` (all when `None`), newest first, at most `limit`: one index range
/// (`events_by_actor`). With `missions` (a JSON array: a Mission-scoped reader's), only the
/// Events such a reader sees, decided here so that a page and its cursor say nothing of the
/// others: a session opened, reusable knowledge published, and what names one of those
/// Missions (never a copy to or from another Group). The rule is delivery's (`deliver`),
/// which checks every row again; the residual filter scans the Agent's other Events in the
/// Group (an index on the Mission would serve a scoped reader in O(page)).
pub(crate) fn by_actor(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
    before: Option<u64>,
    limit: u32,
    missions: Option<&str>,
) -> Result<Vec<Row>, Error> {
    Ok(conn.rows(
        "SELECT event_id, group_id, sequence, type, causation_command_id, payload, appended_at,
                prev_hash, hash
         FROM events WHERE group_id = ?1 AND actor = ?2 AND sequence < ?3
             AND (?5 IS NULL
                  OR type IN ('session.opened', 'artifact.reuse_published')
                  OR (type <> 'context.forwarded'
                      AND json_extract(payload, '$.missionId')
                          IN (SELECT value FROM json_each(?5))))
         ORDER BY sequence DESC LIMIT ?4",
        params![
            group_id,
            agent_id,
            before.unwrap_or(i64::MAX as u64),
            limit,
            missions
        ],
        to_row,
    )?)
}

/// The online Events of `group_id` at `sequences` (a JSON array), in order; one compacted
/// into an archive is not among them.
pub(crate) fn at(conn: &Connection, group_id: &str, sequences: &str) -> Result<Vec<Row>, Error> {
    Ok(conn.rows(
        "SELECT event_id, group_id, sequence, type, causation_command_id, payload, appended_at,
                prev_hash, hash
         FROM events WHERE group_id = ?1 AND sequence IN (SELECT CAST(value AS BIGINT) FROM json_each(?2))
         ORDER BY sequence",
        params![group_id, sequences],
        to_row,
    )?)
}

/// The stored actor of each Event of `group_id` after `after` (at most `limit`), by sequence:
/// fsck compares it with the one its payload names.
pub(crate) fn actors_after(
    conn: &Connection,
    group_id: &str,
    after: u64,
    limit: u32,
) -> Result<Vec<(u64, Option<String>)>, Error> {
    Ok(conn.rows(
        "SELECT sequence, actor FROM events WHERE group_id = ?1 AND sequence > ?2
         ORDER BY sequence LIMIT ?3",
        params![group_id, after, limit],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?)
}

fn to_row(row: &crate::sql::Row<'_>) -> crate::sql::Result<Row> {
    Ok(Row {
        event_id: row.get(0)?,
        group_id: row.get(1)?,
        sequence: row.get(2)?,
        kind: row.get(3)?,
        causation_command_id: row.get(4)?,
        payload: row.get(5)?,
        appended_at: row.get(6)?,
        prev_hash: row.get(7)?,
        hash: row.get(8)?,
    })
}

/// How many Events are online, all Groups together.
pub(crate) fn count(conn: &Connection) -> Result<u64, Error> {
    Ok(conn.row("SELECT COUNT(*) FROM events", [], |row| row.get(0))?)
}

/// The sequence of the newest online Event appended before `cutoff` (instants compare as
/// text: they are written in one format).
pub(crate) fn newest_before(
    conn: &Connection,
    group_id: &str,
    cutoff: &str,
) -> Result<Option<u64>, Error> {
    Ok(conn.row(
        "SELECT MAX(sequence) FROM events WHERE group_id = ?1 AND appended_at < ?2",
        params![group_id, cutoff],
        |row| row.get(0),
    )?)
}

/// The hash of the online Event at `sequence`, if the log holds it.
pub(crate) fn hash_at(
    conn: &Connection,
    group_id: &str,
    sequence: u64,
) -> Result<Option<Vec<u8>>, Error> {
    Ok(conn
        .row(
            "SELECT hash FROM events WHERE group_id = ?1 AND sequence = ?2",
            params![group_id, sequence],
            |row| row.get(0),
        )
        .optional()?)
}

/// Removes the newest `n` Events of the Group, behind the engine's back (tests of a truncated
/// log, `bench_support::tamper`); answers how many went and the head they went from.
#[cfg(feature = "bench-support")]
pub(crate) fn cut_tail(conn: &Connection, group_id: &str, n: u64) -> Result<(usize, u64), Error> {
    let head = newest(conn, group_id)?.map_or(0, |(sequence, _)| sequence);
    let cut = conn.run(
        "DELETE FROM events WHERE group_id = ?1 AND sequence > ?2",
        params![group_id, head.saturating_sub(n)],
    )?;
    Ok((cut, head))
}

/// Rewrites the payload of Event `sequence` of `group_id` behind the log's back (tests:
/// a chain check must notice); answers how many rows changed.
#[cfg(feature = "bench-support")]
pub(crate) fn tamper_payload(
    conn: &Connection,
    group_id: &str,
    sequence: u64,
    payload: &str,
) -> Result<usize, Error> {
    Ok(conn.run(
        "UPDATE events SET payload = ?3 WHERE group_id = ?1 AND sequence = ?2",
        params![group_id, sequence, payload],
    )?)
}

/// Rewrites the indexed actor of Event `sequence` of `group_id` (tests: fsck must notice).
#[cfg(feature = "bench-support")]
pub(crate) fn tamper_actor(
    conn: &Connection,
    group_id: &str,
    sequence: u64,
    actor: &str,
) -> Result<usize, Error> {
    Ok(conn.run(
        "UPDATE events SET actor = ?3 WHERE group_id = ?1 AND sequence = ?2",
        params![group_id, sequence, actor],
    )?)
}

/// Removes the online Events through `through` (compacted into a snapshot).
pub(crate) fn delete_through(conn: &Connection, group_id: &str, through: u64) -> Result<(), Error> {
    conn.run(
        "DELETE FROM events WHERE group_id = ?1 AND sequence <= ?2",
        params![group_id, through],
    )?;
    Ok(())
}

/// For the rows of `rows_sql` (a query yielding `group_id, sequence`): each with the type of
/// the Event it names, `None` when the online log does not hold it (fsck).
pub(crate) fn named_by(
    conn: &Connection,
    rows_sql: &str,
) -> Result<Vec<(String, u64, Option<String>)>, Error> {
    let sql = format!(
        "SELECT r.group_id, r.sequence, e.type
         FROM ({rows_sql}) AS r
         LEFT JOIN events e ON e.group_id = r.group_id AND e.sequence = r.sequence
         ORDER BY r.group_id, r.sequence"
    );
    let rows = conn.rows(&sql, [], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?;
    Ok(rows)
}
