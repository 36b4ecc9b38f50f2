//! The `tlog_hashes` table: the only SQL that names it. Each Group's Merkle tree over its log
//! (issue #45, `tlog.rs`), as the hashes Go's sumdb/tlog stores: every node of every complete
//! subtree, at the index `tlog_tiles::stored_hash_index(level, n)` gives it. Rows are only
//! ever appended, in the transaction that appends their Event, and never change; compaction
//! leaves them (the tree still proves what left the online log).

use crate::sql::{Connection, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// The hashes of Group `group_id` at `indexes` (any order), in that order; `None` when one
/// is missing (a tree behind its log, or a corrupt index: the caller says which).
pub(crate) fn read(
    conn: &Connection,
    group_id: &str,
    indexes: &[u64],
) -> Result<Option<Vec<[u8; 32]>>, Error> {
    let (Some(&low), Some(&high)) = (indexes.iter().min(), indexes.iter().max()) else {
        return Ok(Some(Vec::new()));
    };
    // Nearby indexes (a tile's, a proof's lower levels) come in one range scan; scattered
    // ones one point lookup each.
    let dense = high - low < 4 * indexes.len() as u64 + 16;
    let found: std::collections::HashMap<u64, [u8; 32]> = if dense {
        conn.rows(
            "SELECT idx, hash FROM tlog_hashes WHERE group_id = ?1 AND idx >= ?2 AND idx <= ?3",
            params![group_id, low, high],
            |row| Ok((row.get::<_, u64>(0)?, row.get::<_, Vec<u8>>(1)?)),
        )?
        .into_iter()
        .map(|(index, hash)| Ok((index, super::bytes32(hash)?)))
        .collect::<Result<_, Error>>()?
    } else {
        let mut found = std::collections::HashMap::with_capacity(indexes.len());
        for &index in indexes {
            let hash: Option<Vec<u8>> = conn.value(
                "SELECT hash FROM tlog_hashes WHERE group_id = ?1 AND idx = ?2",
                params![group_id, index],
            )?;
            if let Some(hash) = hash {
                found.insert(index, super::bytes32(hash)?);
            }
        }
        found
    };
    Ok(indexes
        .iter()
        .map(|index| found.get(index).copied())
        .collect())
}

/// Group `group_id`'s stored hashes from index `from` up to (not including) `to`, in order.
pub(crate) fn range(
    conn: &Connection,
    group_id: &str,
    from: u64,
    to: u64,
) -> Result<Vec<(u64, [u8; 32])>, Error> {
    conn.rows(
        "SELECT idx, hash FROM tlog_hashes WHERE group_id = ?1 AND idx >= ?2 AND idx < ?3 ORDER BY idx",
        params![group_id, from, to],
        |row| Ok((row.get::<_, u64>(0)?, row.get::<_, Vec<u8>>(1)?)),
    )?
    .into_iter()
    .map(|(index, hash)| Ok((index, super::bytes32(hash)?)))
    .collect()
}

/// The highest stored index of Group `group_id`'s tree, `None` for an empty tree.
pub(crate) fn highest(conn: &Connection, group_id: &str) -> Result<Option<u64>, Error> {
    Ok(conn
        .value::<Option<u64>, _>(
            "SELECT max(idx) FROM tlog_hashes WHERE group_id = ?1",
            params![group_id],
        )?
        .flatten())
}

/// Rows per insert statement (so at most this many statements of different lengths are
/// prepared and cached).
const ROWS_PER_INSERT: usize = 32;

/// Appends `hashes` at `first`, `first + 1`, … to Group `group_id`'s tree, [`ROWS_PER_INSERT`]
/// rows per statement.
pub(crate) fn insert(
    conn: &Connection,
    group_id: &str,
    first: u64,
    hashes: &[[u8; 32]],
) -> Result<(), Error> {
    let mut start = first;
    for chunk in hashes.chunks(ROWS_PER_INSERT) {
        let mut sql = String::from("INSERT INTO tlog_hashes (group_id, idx, hash) VALUES ");
        let indexes: Vec<u64> = (start..).take(chunk.len()).collect();
        let mut values: Vec<&dyn crate::sql::ToValue> = vec![&group_id];
        for (i, (index, hash)) in indexes.iter().zip(chunk).enumerate() {
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!("(?1, ?{}, ?{})", 2 + 2 * i, 3 + 2 * i));
            values.push(index);
            values.push(hash);
        }
        conn.run_later(&sql, values.as_slice())?;
        start += chunk.len() as u64;
    }
    Ok(())
}

/// Removes every Group's tree behind the engine's back, as a store from before schema
/// version 31 has none (tests of the catch-up, `bench_support::tamper`).
#[cfg(feature = "bench-support")]
pub(crate) fn forget_all(conn: &Connection) -> Result<usize, Error> {
    Ok(conn.run("DELETE FROM tlog_hashes", [])?)
}

/// Flips one bit of Group `group_id`'s stored hash `index` behind the engine's back (tests:
/// fsck must notice); answers how many rows changed.
#[cfg(feature = "bench-support")]
pub(crate) fn tamper(conn: &Connection, group_id: &str, index: u64) -> Result<usize, Error> {
    let Some(mut hash) = conn.value::<Vec<u8>, _>(
        "SELECT hash FROM tlog_hashes WHERE group_id = ?1 AND idx = ?2",
        params![group_id, index],
    )?
    else {
        return Ok(0);
    };
    hash[0] ^= 1;
    Ok(conn.run(
        "UPDATE tlog_hashes SET hash = ?3 WHERE group_id = ?1 AND idx = ?2",
        params![group_id, index, hash],
    )?)
}
