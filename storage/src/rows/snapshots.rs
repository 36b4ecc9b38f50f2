//! The `snapshots` table: the only SQL that names it. Each signed snapshot of a Group's log
//! (DLV-9/10): the sequence it covers through, where its archive starts, its state and
//! archive blobs, the chain hash it ends at and its signed envelope (`compaction.rs` writes
//! them; reads restore from them).

use crate::sql::{Connection, OptionalExtension as _, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// A snapshot's sequence, chain hash and state blob's BLAKE3, as stored.
pub(crate) type Head = (u64, Vec<u8>, Vec<u8>);

/// The newest snapshot of a Group.
pub(crate) fn newest(conn: &Connection, group_id: &str) -> Result<Option<Head>, Error> {
    Ok(conn
        .row(
            "SELECT sequence, event_chain_hash, state_blake3 FROM snapshots WHERE group_id = ?1 ORDER BY sequence DESC LIMIT 1",
            [group_id],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()?)
}

/// Every snapshot of a Group, oldest first: its envelope (JSON), archive BLAKE3 and first
/// archived sequence.
pub(crate) fn all(conn: &Connection, group_id: &str) -> Result<Vec<(String, Vec<u8>, u64)>, Error> {
    Ok(conn.rows(
        "SELECT envelope, archive_blake3, from_sequence FROM snapshots WHERE group_id = ?1 ORDER BY sequence",
        [group_id],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )?)
}

/// One new snapshot row.
#[allow(clippy::too_many_arguments)] // one column each, in the table's order
pub(crate) fn insert(
    conn: &Connection,
    group_id: &str,
    sequence: u64,
    from_sequence: u64,
    state_blake3: &[u8],
    archive_blake3: &[u8],
    event_chain_hash: &[u8],
    envelope: &str,
) -> Result<(), Error> {
    conn.run(
        "INSERT INTO snapshots (group_id, sequence, from_sequence, state_blake3, archive_blake3, event_chain_hash, envelope)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![group_id, sequence, from_sequence, state_blake3, archive_blake3, event_chain_hash, envelope],
    )?;
    Ok(())
}

/// The sequence each Group's newest snapshot covers through (Groups without one are absent).
pub(crate) fn newest_sequences(
    conn: &Connection,
) -> Result<std::collections::HashMap<String, u64>, Error> {
    Ok(conn
        .rows(
            "SELECT group_id, MAX(sequence) FROM snapshots GROUP BY group_id",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?
        .into_iter()
        .collect())
}

/// Every Group with a snapshot, in order.
pub(crate) fn groups(conn: &Connection) -> Result<Vec<String>, Error> {
    Ok(conn.rows(
        "SELECT DISTINCT group_id FROM snapshots ORDER BY group_id",
        [],
        |row| row.get(0),
    )?)
}

/// SQL condition that a snapshot cites the blob digest in `column` (as its state or its
/// archive), for the queries that find uncited blobs.
pub(crate) fn cites_column(column: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM snapshots
                 WHERE snapshots.state_blake3 = {column} OR snapshots.archive_blake3 = {column})"
    )
}
