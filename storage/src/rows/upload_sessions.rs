//! The `upload_sessions` table: one row per open resumable upload (its Agent, Group and
//! lease, where its bytes are staged, how many are durable, when it last moved), and the only
//! SQL that names it. Instants stay the text `clock::format_instant` wrote (the idle sweep
//! compares them in SQL, as it did).

use crate::sql::{Connection, OptionalExtension as _, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// A session as its owner reads it: where its bytes are staged and how many are durable.
pub(crate) struct Open {
    pub(crate) staging_path: String,
    pub(crate) received: u64,
    /// The name of its last committed chunk object, on a store that cannot append
    /// (`blobs/chunks.rs`; none before its first chunk, on a local file, or before V43).
    pub(crate) last_chunk: Option<String>,
    /// How many chunks it took (every committed one, whatever the store).
    pub(crate) chunks: u64,
    /// When it last moved, as `clock::format_instant` wrote it.
    pub(crate) updated_at: String,
}

/// Session `upload_id` if it is `agent_id`'s in `group_id`, and `lease_id`'s when one is named.
pub(crate) fn owned(
    conn: &Connection,
    upload_id: &str,
    agent_id: &str,
    group_id: &str,
    lease_id: Option<&str>,
) -> Result<Option<Open>, Error> {
    Ok(conn
        .row(
            "SELECT staging_path, received, last_chunk, chunks, updated_at FROM upload_sessions
             WHERE upload_id = ?1 AND agent_id = ?2 AND group_id = ?3
               AND (?4 IS NULL OR lease_id = ?4)",
            params![upload_id, agent_id, group_id, lease_id],
            |row| {
                Ok(Open {
                    staging_path: row.get(0)?,
                    received: row.get(1)?,
                    last_chunk: row.get(2)?,
                    chunks: row.get(3)?,
                    updated_at: row.get(4)?,
                })
            },
        )
        .optional()?)
}

/// How many sessions `agent_id` holds open.
pub(crate) fn count_of_agent(conn: &Connection, agent_id: &str) -> Result<u64, Error> {
    Ok(conn.row(
        "SELECT COUNT(*) FROM upload_sessions WHERE agent_id = ?1",
        [agent_id],
        |row| row.get(0),
    )?)
}

/// How many sessions `agent_id` holds open under lease `lease_id`.
pub(crate) fn count_of_lease(
    conn: &Connection,
    agent_id: &str,
    lease_id: &str,
) -> Result<u64, Error> {
    Ok(conn.row(
        "SELECT COUNT(*) FROM upload_sessions WHERE agent_id = ?1 AND lease_id = ?2",
        params![agent_id, lease_id],
        |row| row.get(0),
    )?)
}

/// The bytes in `agent_id`'s open sessions, and what `other` (a sub-query of one number, on
/// the Agent `?1`) answers, in one statement: one snapshot, so a session that ended in the
/// transaction that changed `other`'s answer is seen on both sides of it or on neither.
pub(crate) fn held_with(
    conn: &Connection,
    agent_id: &str,
    other: &str,
) -> Result<(u64, u64), Error> {
    let sql = format!(
        "SELECT (SELECT COALESCE(SUM(received), 0) FROM upload_sessions WHERE agent_id = ?1),
                ({other})"
    );
    Ok(conn.row(&sql, [agent_id], |row| {
        Ok((row.get::<_, u64>(0)?, row.get::<_, u64>(1)?))
    })?)
}

/// A session as it starts: nothing received, started and updated at `now`.
pub(crate) struct New<'a> {
    pub(crate) upload_id: &'a str,
    pub(crate) agent_id: &'a str,
    pub(crate) group_id: &'a str,
    pub(crate) lease_id: Option<&'a str>,
    pub(crate) staging_path: &'a str,
    /// An instant as `clock::format_instant` writes it.
    pub(crate) now: &'a str,
}

/// Writes a new session's row.
pub(crate) fn insert(conn: &Connection, row: &New<'_>) -> Result<(), Error> {
    conn.run(
        "INSERT INTO upload_sessions
         (upload_id, agent_id, group_id, lease_id, staging_path, received,
          started_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?6)",
        params![
            row.upload_id,
            row.agent_id,
            row.group_id,
            row.lease_id,
            row.staging_path,
            row.now
        ],
    )?;
    Ok(())
}

/// Adds `appended` bytes to session `upload_id` at `now` if it still holds `before`; answers
/// whether it did.
pub(crate) fn advance(
    conn: &Connection,
    upload_id: &str,
    before: u64,
    appended: u64,
    chunk: Option<&str>,
    now: &str,
) -> Result<bool, Error> {
    let moved = conn.run(
        "UPDATE upload_sessions SET received = received + ?1, updated_at = ?2,
                last_chunk = COALESCE(?5, last_chunk), chunks = chunks + 1
         WHERE upload_id = ?3 AND received = ?4",
        params![appended, now, upload_id, before, chunk],
    )?;
    Ok(moved == 1)
}

/// How many bytes of session `upload_id` are durable, if it is still open.
pub(crate) fn received(conn: &Connection, upload_id: &str) -> Result<Option<u64>, Error> {
    Ok(conn
        .row(
            "SELECT received FROM upload_sessions WHERE upload_id = ?1",
            [upload_id],
            |row| row.get(0),
        )
        .optional()?)
}

/// Removes session `upload_id`'s row.
pub(crate) fn delete(conn: &Connection, upload_id: &str) -> Result<(), Error> {
    conn.run(
        "DELETE FROM upload_sessions WHERE upload_id = ?1",
        [upload_id],
    )?;
    Ok(())
}

/// Removes session `upload_id` if it is still idle since before `cutoff`; answers whether it
/// did. A session that moved, or was marked live ([`touch`]), since the sweep listed it
/// through another server stays.
pub(crate) fn delete_idle(conn: &Connection, upload_id: &str, cutoff: &str) -> Result<bool, Error> {
    let removed = conn.run(
        "DELETE FROM upload_sessions WHERE upload_id = ?1 AND updated_at < ?2",
        params![upload_id, cutoff],
    )?;
    Ok(removed > 0)
}

/// Marks session `upload_id` live at `now` if it is still at `received`; answers whether it
/// was.
pub(crate) fn touch(
    conn: &Connection,
    upload_id: &str,
    received: u64,
    now: &str,
) -> Result<bool, Error> {
    let touched = conn.run(
        "UPDATE upload_sessions SET updated_at = ?3 WHERE upload_id = ?1 AND received = ?2",
        params![upload_id, received, now],
    )?;
    Ok(touched > 0)
}

/// Sets session `upload_id`'s idle clock back to `previous` if [`touch`] set it to `at` and
/// nothing moved it since.
pub(crate) fn untouch(
    conn: &Connection,
    upload_id: &str,
    at: &str,
    previous: &str,
) -> Result<(), Error> {
    conn.run(
        "UPDATE upload_sessions SET updated_at = ?3 WHERE upload_id = ?1 AND updated_at = ?2",
        params![upload_id, at, previous],
    )?;
    Ok(())
}

/// The sessions (id, staging path) idle since before `cutoff`, an instant as
/// `clock::format_instant` writes it.
pub(crate) fn idle_since(conn: &Connection, cutoff: &str) -> Result<Vec<(String, String)>, Error> {
    Ok(conn.rows(
        "SELECT upload_id, staging_path FROM upload_sessions WHERE updated_at < ?1",
        [cutoff],
        |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)),
    )?)
}

/// Whether session `upload_id` has a row.
pub(crate) fn exists(conn: &Connection, upload_id: &str) -> Result<bool, Error> {
    Ok(conn
        .value::<i64, _>(
            "SELECT 1 FROM upload_sessions WHERE upload_id = ?1",
            [upload_id],
        )?
        .is_some())
}
