//! `blob_disposals`: the batches of blob files deleted after their rows (the sweep of uncited
//! uploads, the undoing of a failed upload's promotion), on an index several servers share.
//!
//! A blob's file and its row cannot change in one transaction. In one process a lock keeps
//! an upload between its promotion (which may find the file present and keep it) and its row
//! apart from a deletion between a row and its file (`Engine::sweep_lock`). Across servers
//! the database orders them instead:
//! - a disposal takes the exclusive transaction advisory lock [`LOCK`], deletes its rows and
//!   inserts its batch here (a new `generation`, `deleting_until` its lease) in one
//!   transaction; only after the commit does it delete the files, stopping at its lease, and
//!   then clears `deleting_until` ([`finish`]);
//! - an upload reads [`seen`] before promoting its bytes, and its row's transaction takes
//!   [`LOCK`] shared and asks [`disposed_since`]: if a batch after what it saw names its blob,
//!   the file it found may be gone, and the upload fails as retryable (nothing recorded).
//!
//! A batch still deleting when read counts as not yet seen, so an upload that found the file
//! during it is refused. Rows older than a day are pruned, the latest always kept. On SQLite
//! nothing here runs: every function is a no-op answering "nothing disposed".

use crate::error::Error;
use crate::sql::{Cached as _, Connection, Engine, OptionalExtension as _, SqlError, params};
use crate::unit::Conn;

/// An arbitrary, fixed key for the transaction advisory lock (the bytes of "weftdisp").
const LOCK: i64 = 0x7765_6674_6469_7370;

/// How long rows are kept: far longer than an upload's promotion takes to reach its row.
const KEEP: chrono::Duration = chrono::Duration::days(1);

/// The generation an upload has seen before promoting its bytes: the latest batch, or the one
/// before it while the latest is still deleting files (`now` before its `deleting_until`).
pub(crate) fn seen(conn: &Connection, now: &str) -> Result<i64, Error> {
    if conn.engine() != Engine::Postgres {
        return Ok(0);
    }
    let latest = conn
        .row(
            "SELECT generation, deleting_until FROM blob_disposals
             ORDER BY generation DESC LIMIT 1",
            [],
            |row| Ok((row.get::<_, i64>(0)?, row.get::<_, Option<String>>(1)?)),
        )
        .optional()?;
    Ok(match latest {
        None => 0,
        Some((generation, Some(until))) if until.as_str() > now => generation - 1,
        Some((generation, _)) => generation,
    })
}

/// Takes the shared lock in the writer's transaction: a disposal's transaction is then either
/// committed (its rows gone, its batch readable) or not begun. An upload that placed no file
/// (its bytes only hashed, the row found before) takes it before it looks for the row again.
/// Sent ahead: the reads after it run after it in the server, so it travels with the first
/// of them (no round trip of its own), and a lock not granted fails that read or the job.
pub(crate) fn fence(conn: &Connection) -> Result<(), Error> {
    if conn.engine() == Engine::Postgres {
        conn.run_later("SELECT 1 FROM pg_advisory_xact_lock_shared(?1)", [LOCK])?;
    }
    Ok(())
}

/// Whether a batch after generation `seen` names blob `blake3`, asked in the transaction that
/// records the blob's row, under the shared lock (which waits out a disposal's transaction).
pub(crate) fn disposed_since(
    conn: &impl Conn,
    seen: i64,
    blake3: &[u8; 32],
) -> Result<bool, Error> {
    let conn = conn.conn();
    if conn.engine() != Engine::Postgres {
        return Ok(false);
    }
    fence(conn)?;
    let mut named = false;
    conn.each(
        "SELECT digests FROM blob_disposals WHERE generation > ?1",
        [seen],
        |row| {
            let blobs: Vec<u8> = row.get(0)?;
            named |= blobs
                .chunks_exact(32)
                .any(|digest| digest == blake3.as_slice());
            Ok::<_, SqlError>(())
        },
    )?;
    Ok(named)
}

/// How long the rest of a disposal job waits for a lock (PostgreSQL; nothing on SQLite):
/// briefly (`true`) while a collection appends its Events, because it takes Group locks while
/// holding the exclusive disposal lock, and a Group's writer may hold its Group's lock while
/// waiting for that one (shared): the collection then gives way within half a second
/// (`storage_unavailable`, its next round) instead of joining a circle PostgreSQL breaks
/// only after a second (`deadlock_timeout`), perhaps by failing the writer's batch. A Group's
/// lock is otherwise held for one batch of its lane, milliseconds. `false` restores the writer's
/// wait before the job ends, for the jobs after it in the batch.
pub(crate) fn wait_briefly(conn: &Connection, brief: bool) -> Result<(), Error> {
    if conn.engine() != Engine::Postgres {
        return Ok(());
    }
    conn.execute_batch(match brief {
        true => "SET LOCAL lock_timeout = '500ms'",
        false => "SET LOCAL lock_timeout = '10s'",
    })?;
    Ok(())
}

/// Takes the exclusive lock for a job that deletes no files but must not commit between a
/// fenced writer's check and its commit (a records batch, `artifacts/records.rs`: a hold
/// takes the lock shared before it is placed), waiting at most a tenth of a second, like
/// [`begin`] (a timeout fails the job as `storage_unavailable`: its next round). Group jobs
/// take their Group's lock before the shared one, the opposite order: these short waits end
/// such a circle before PostgreSQL's `deadlock_timeout` (one second by default; keep it above
/// 600 ms) would pick a victim.
pub(crate) fn exclude(c: &impl Conn) -> Result<(), Error> {
    if c.conn().engine() != Engine::Postgres {
        return Ok(());
    }
    take_exclusive(c)
}

/// The exclusive lock, waiting at most a tenth of a second, noted for the writer: it ends
/// its batch after the job (`Memo::note_row_lock`), so no later job of the batch takes a
/// Group's lock while the transaction holds this one. Group jobs take their Group's lock
/// before the shared one; a later job waiting for a Group under this lock could wait in a
/// circle with another server's upload waiting for the shared side, until PostgreSQL rolled
/// one back.
fn take_exclusive(c: &impl Conn) -> Result<(), Error> {
    let conn = c.conn();
    if let Some(memo) = c.memo() {
        memo.note_row_lock("blob_disposals");
    }
    conn.execute_batch("SET LOCAL lock_timeout = '100ms'")?;
    conn.value::<i64, _>("SELECT 1 FROM pg_advisory_xact_lock(?1)", [LOCK])?;
    conn.execute_batch("SET LOCAL lock_timeout = '10s'")?;
    Ok(())
}

/// Begins a disposal in the writer's transaction: takes the exclusive lock, waiting at most a
/// tenth of a second so that it never joins a deadlock with other servers' writers (a
/// timeout fails the job as `storage_unavailable`: the sweep tries again on its next round),
/// and answers the next generation, or `None` while another disposal is deleting files.
pub(crate) fn begin(c: &impl Conn, now: &str) -> Result<Option<i64>, Error> {
    let conn = c.conn();
    if conn.engine() != Engine::Postgres {
        return Ok(None);
    }
    take_exclusive(c)?;
    let latest = conn
        .row(
            "SELECT generation, deleting_until FROM blob_disposals
             ORDER BY generation DESC LIMIT 1",
            [],
            |row| Ok((row.get::<_, i64>(0)?, row.get::<_, Option<String>>(1)?)),
        )
        .optional()?;
    Ok(match latest {
        Some((_, Some(until))) if until.as_str() > now => None,
        Some((generation, _)) => Some(generation + 1),
        None => Some(1),
    })
}

/// Records batch `generation` (its digests, deleting files until `until`) and prunes rows
/// older than [`KEEP`], the latest kept.
pub(crate) fn record(
    conn: &Connection,
    generation: i64,
    blobs: &[[u8; 32]],
    now: chrono::DateTime<chrono::Utc>,
    until: &str,
) -> Result<(), Error> {
    let concatenated: Vec<u8> = blobs.concat();
    conn.run(
        "INSERT INTO blob_disposals (generation, disposed_at, deleting_until, digests)
         VALUES (?1, ?2, ?3, ?4)",
        params![
            generation,
            crate::clock::format_instant(now),
            until,
            concatenated
        ],
    )?;
    conn.run(
        "DELETE FROM blob_disposals WHERE disposed_at < ?1 AND generation < ?2",
        params![crate::clock::format_instant(now - KEEP), generation],
    )?;
    Ok(())
}

/// Ends batch `generation`: its files are deleted (or left, past its lease, as files no row
/// names).
pub(crate) fn finish(conn: &Connection, generation: i64) -> Result<(), Error> {
    conn.run(
        "UPDATE blob_disposals SET deleting_until = NULL WHERE generation = ?1",
        [generation],
    )?;
    Ok(())
}
