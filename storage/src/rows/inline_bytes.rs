//! The `inline_bytes` table: the bytes of small blobs kept in the index (issue #15), one row
//! per copy, named by its blob's row (`blobs.inline_id`), and the only SQL that names it,
//! but the reads in `blobs.rs` that join a blob to its copy.

use crate::sql::{Connection, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// Writes a copy of `bytes`; answers its id.
pub(crate) fn insert(conn: &Connection, bytes: &[u8]) -> Result<i64, Error> {
    Ok(conn.row(
        "INSERT INTO inline_bytes (bytes) VALUES (?1) RETURNING id",
        [bytes],
        |row| row.get(0),
    )?)
}

/// Replaces copy `id`'s bytes (a repair).
pub(crate) fn replace(conn: &Connection, id: i64, bytes: &[u8]) -> Result<(), Error> {
    conn.run(
        "UPDATE inline_bytes SET bytes = ?2 WHERE id = ?1",
        params![id, bytes],
    )?;
    Ok(())
}

/// Overwrites the copy blob `blake3`'s row names with `bytes`, behind the engine's back (tests
/// of a corrupted index, `bench_support::tamper`); answers how many copies changed.
#[cfg(feature = "bench-support")]
pub(crate) fn tamper_of_blob(
    conn: &Connection,
    blake3: &[u8],
    bytes: &[u8],
) -> Result<usize, Error> {
    Ok(conn.run(
        "UPDATE inline_bytes SET bytes = ?1 WHERE id = (SELECT inline_id FROM blobs WHERE blake3 = ?2)",
        params![bytes, blake3],
    )?)
}

/// Removes copy `id`.
pub(crate) fn delete(conn: &Connection, id: i64) -> Result<(), Error> {
    conn.run("DELETE FROM inline_bytes WHERE id = ?1", [id])?;
    Ok(())
}

/// Removes the copy blob `blake3`'s row names, if any (before the sweep removes that row).
pub(crate) fn delete_of_blob(conn: &Connection, blake3: &[u8]) -> Result<(), Error> {
    conn.run(
        "DELETE FROM inline_bytes WHERE id = (SELECT inline_id FROM blobs WHERE blake3 = ?1)",
        [blake3],
    )?;
    Ok(())
}

/// How many copies no blob row names (none should exist: a copy goes with its row).
pub(crate) fn count_unnamed(conn: &Connection) -> Result<u64, Error> {
    Ok(conn.row(
        "SELECT COUNT(*) FROM inline_bytes
                     WHERE id NOT IN (SELECT inline_id FROM blobs WHERE inline_id IS NOT NULL)",
        [],
        |row| row.get(0),
    )?)
}
