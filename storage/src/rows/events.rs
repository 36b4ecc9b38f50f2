//! The `events` table: the only SQL that names it. Each Group's online log, one row per
//! Event with its hash chain (`events.rs` appends and hashes; `compaction.rs` moves old rows
//! into signed snapshots). Rows are handed back as stored: hashes as bytes, instants as text.

use crate::sql::{Connection, OptionalExtension as _, params};
use crate::unit::{Conn, Tx};

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

/// What a writer job's memo remembers of a Group's newest online Event ([`newest`]): kept
/// current by [`insert`], and handed by the writer from one job to the next of its
/// transaction ([`newest_known`], [`hand_over`]), so only a transaction's first append to a
/// Group reads its head (a round trip each on PostgreSQL, stop 69). Remembered only while
/// the Group's log can grow through this transaction's jobs alone ([`settled`]).
const NEWEST: &str = "events.newest";

/// Whether Group `group_id`'s log can change now only through this transaction: on
/// PostgreSQL once the job holds the Group's row lock (held to the commit; a head read
/// without it, as an ACK's, may be overtaken by another lane or server); on SQLite always
/// (the writer is the only one).
fn settled(c: &(impl Conn + ?Sized), memo: &crate::unit::Memo, group_id: &str) -> bool {
    c.conn().engine() != crate::sql::Engine::Postgres || memo.holds_lock(group_id)
}

/// A Group's newest online Event: `(sequence, hash, appended_at)`.
pub(crate) type Newest = Option<(u64, Vec<u8>, String)>;

/// Appends one Event row.
pub(crate) fn insert(c: &(impl Conn + ?Sized), row: &New<'_>) -> Result<(), Error> {
    c.conn().run_later(
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
    if let Some(memo) = c.memo() {
        if settled(c, memo, row.group_id) {
            let newest: Newest =
                Some((row.sequence, row.hash.to_vec(), row.appended_at.to_owned()));
            memo.remember(NEWEST, row.group_id, newest);
        } else {
            memo.forget(NEWEST, row.group_id);
        }
    }
    Ok(())
}

/// `(sequence, hash, appended_at)` of the newest online Event of a Group.
pub(crate) fn newest(c: &(impl Conn + ?Sized), group_id: &str) -> Result<Newest, Error> {
    let read = || -> Result<Newest, Error> {
        Ok(c.conn()
            .row(
                "SELECT sequence, hash, appended_at FROM events WHERE group_id = ?1
                 ORDER BY sequence DESC LIMIT 1",
                [group_id],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()?)
    };
    match c.memo() {
        Some(memo) if settled(c, memo, group_id) => memo.load(NEWEST, group_id, read),
        _ => read(),
    }
}

/// The newest Events a job's memo knows at its end, by Group: what the writer hands to the
/// transaction's later jobs once the job's savepoint is released.
pub(crate) fn newest_known(tx: &Tx<'_>) -> Vec<(String, Newest)> {
    tx.loaded().all(NEWEST)
}

/// An earlier job of this transaction, released, left Group `group_id`'s newest Event at
/// `newest`.
pub(crate) fn hand_over(tx: &Tx<'_>, group_id: &str, newest: &Newest) {
    tx.loaded().remember(NEWEST, group_id, newest.clone());
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
/// text: they are written in one format), by bisection over the Group's online sequences,
/// some 2 × log2(n) point reads whatever the online window holds. `appended_at` does not go
/// back along the sequence while servers' clocks agree within five minutes (`events.rs`
/// stamps an Event no earlier than its predecessor); where it does (a wrong clock, rows
/// stamped before that rule), the bisection still answers an Event before the cutoff, so
/// never later than the `MAX` would, and compaction never goes further than it did. The one `MAX(sequence) … AND
/// appended_at < ?2` it replaces (stop 69) read the Group's whole online window at every
/// round of compaction. A gap in the sequences (which fsck reports as damage) falls back to
/// that query.
pub(crate) fn newest_before(
    conn: &Connection,
    group_id: &str,
    cutoff: &str,
) -> Result<Option<u64>, Error> {
    let (first, last): (Option<u64>, Option<u64>) = conn.row(
        "SELECT (SELECT MIN(sequence) FROM events WHERE group_id = ?1),
                (SELECT MAX(sequence) FROM events WHERE group_id = ?1)",
        [group_id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    let (Some(mut low), Some(mut high)) = (first, last) else {
        return Ok(None);
    };
    let mut found = None;
    while low <= high {
        let middle = low + (high - low) / 2;
        let appended: Option<String> = conn
            .row(
                "SELECT appended_at FROM events WHERE group_id = ?1 AND sequence = ?2",
                params![group_id, middle],
                |row| row.get(0),
            )
            .optional()?;
        match appended {
            None => {
                return Ok(conn.row(
                    "SELECT MAX(sequence) FROM events WHERE group_id = ?1 AND appended_at < ?2",
                    params![group_id, cutoff],
                    |row| row.get(0),
                )?);
            }
            Some(at) if at.as_str() < cutoff => {
                found = Some(middle);
                low = middle + 1;
            }
            Some(_) if middle == 0 => break,
            Some(_) => high = middle - 1,
        }
    }
    Ok(found)
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
    let head = newest(conn, group_id)?.map_or(0, |(sequence, _, _)| sequence);
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

/// Relinks Event `sequence` of `group_id` to `prev_hash` and rehashes it, so the row is whole
/// but no longer chained to the one before (tests: the tree is never built over it).
#[cfg(feature = "bench-support")]
pub(crate) fn tamper_link(
    conn: &Connection,
    group_id: &str,
    sequence: u64,
    prev_hash: [u8; 32],
) -> Result<usize, Error> {
    let Some(row) = conn
        .row(
            "SELECT event_id, group_id, sequence, type, causation_command_id, payload, appended_at,
                    prev_hash, hash
             FROM events WHERE group_id = ?1 AND sequence = ?2",
            params![group_id, sequence],
            to_row,
        )
        .optional()?
    else {
        return Ok(0);
    };
    let mut event = row.into_event()?;
    event.prev_hash = weft_api::event::EventHash(prev_hash);
    let hash = event.computed_hash();
    Ok(conn.run(
        "UPDATE events SET prev_hash = ?3, hash = ?4 WHERE group_id = ?1 AND sequence = ?2",
        params![group_id, sequence, &prev_hash[..], &hash.0[..]],
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

/// What fsck reads of a row naming an Event ([`named_by`]): its Group, the sequence it names,
/// the type of the Event there (`None` when the online log does not hold it), and the type
/// the row itself says the Event is, when it says one.
pub(crate) type NamedRow = (String, u64, Option<String>, Option<String>);

/// For the rows of `rows_sql` (a query yielding `group_id, sequence`, and `said` when `said`
/// is set): each with the type of the Event it names (fsck).
pub(crate) fn named_by(
    conn: &Connection,
    rows_sql: &str,
    said: bool,
) -> Result<Vec<NamedRow>, Error> {
    let said = if said { "r.said" } else { "NULL" };
    let sql = format!(
        "SELECT r.group_id, r.sequence, e.type, {said}
         FROM ({rows_sql}) AS r
         LEFT JOIN events e ON e.group_id = r.group_id AND e.sequence = r.sequence
         ORDER BY r.group_id, r.sequence"
    );
    let rows = conn.rows(&sql, [], |row| {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
    })?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use crate::db::{Db, Location};
    use crate::sql::Cached as _;

    /// Events 1…3000 of Group g1 (and as many of g0 and g2 around it), appended three to a
    /// second from `2026-01-01T00:00:00Z`, so some share an instant; then Events 1…1000 of g1
    /// compacted away.
    async fn a_log(location: Location) -> Db {
        let db = Db::open(&location).expect("open");
        db.write(|tx| {
            let start = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
                .expect("instant")
                .to_utc();
            for group_id in ["g0", "g1", "g2"] {
                crate::rows::groups::insert(tx, group_id, start)?;
            }
            for sequence in 1..=3000u64 {
                let at = start + chrono::Duration::seconds((sequence / 3) as i64);
                let appended_at = crate::clock::format_instant(at);
                for group_id in ["g0", "g1", "g2"] {
                    let event_id = format!("{group_id}-{sequence}");
                    super::insert(
                        tx,
                        &super::New {
                            event_id: &event_id,
                            group_id,
                            sequence,
                            kind: "bench.tick",
                            causation_command_id: None,
                            actor: None,
                            payload: "{}",
                            appended_at: &appended_at,
                            prev_hash: &[0; 32],
                            hash: &[0; 32],
                        },
                    )?;
                }
            }
            super::delete_through(tx, "g1", 1000)
        })
        .await
        .expect("appended");
        db
    }

    /// The cutoffs asked about, and the answer: the newest online Event of g1 before each.
    const ASKED: [(&str, Option<u64>); 7] = [
        ("2025-12-31T00:00:00.000000Z", None),
        ("2026-01-01T00:05:00.000000Z", None), // Events 900…902, compacted
        ("2026-01-01T00:05:34.000000Z", Some(1001)), // 1002 is the first of 00:05:34
        ("2026-01-01T00:05:34.500000Z", Some(1004)),
        ("2026-01-01T00:10:00.000000Z", Some(1799)),
        ("2026-01-01T00:16:40.000000Z", Some(2999)), // 3000 is the only one of 00:16:40
        ("2027-01-01T00:00:00.000000Z", Some(3000)),
    ];

    async fn asked(db: &Db) -> Vec<Option<u64>> {
        db.read(|conn| {
            ASKED
                .iter()
                .map(|(cutoff, _)| super::newest_before(conn, "g1", cutoff))
                .collect()
        })
        .await
        .expect("asked")
    }

    /// The newest Event before an instant, on SQLite: every edge (before the first online
    /// Event, between two of one instant, after the last) as the whole window's `MAX` said.
    #[tokio::test]
    async fn the_newest_event_before_an_instant_is_found_by_bisection() {
        let db = a_log(Location::Memory).await;
        let expected: Vec<Option<u64>> = ASKED.iter().map(|(_, answer)| *answer).collect();
        assert_eq!(asked(&db).await, expected);
    }

    /// On PostgreSQL: the same answers, for a few pages each, whatever the window holds (49
    /// here, where the `MAX` over the window read 154 for a cutoff before it).
    #[tokio::test]
    async fn the_newest_event_before_an_instant_reads_a_few_pages() {
        let Some(url) = weft_testkit::postgres_database_or_skip() else {
            return;
        };
        let db = a_log(Location::Postgres(url)).await;
        let expected: Vec<Option<u64>> = ASKED.iter().map(|(_, answer)| *answer).collect();
        assert_eq!(asked(&db).await, expected);
        let fetched = db
            .write(|tx| {
                tx.run("SET LOCAL enable_seqscan = off", [])?;
                let before = crate::rows::pages_fetched(tx, "events")?;
                super::newest_before(tx, "g1", ASKED[1].0)?;
                Ok(crate::rows::pages_fetched(tx, "events")? - before)
            })
            .await
            .expect("asked");
        assert!(fetched <= 70, "fetched {fetched} pages");
    }
}
