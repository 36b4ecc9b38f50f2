//! The `blobs` table: one row per stored blob (its two digests, its size, when it was stored,
//! whether it is quarantined, and the id of its inline copy in `inline_bytes` when small),
//! and the only SQL that names it, but the bench fixtures and the statements of two other
//! rows files that reach a blob's row from their own table's: `manifests.rs` (the listing,
//! the visibility lookup and the lineage load read a manifest's blob in the same statement)
//! and `inline_bytes.rs` (a copy no blob row names, the copy of a blob being swept).
//!
//! A blob's row is about its bytes: the reads that join its inline copy live here too
//! (`inline_bytes.rs` holds the copies' own writes). Digests are `weft_api` types; the
//! instants stay the text `clock::format_instant` wrote, as the callers (and the sweep's SQL)
//! compare them.

use crate::sql::{Ahead, Connection, OptionalExtension as _, params};
use chrono::{DateTime, Utc};
use weft_api::{ArtifactId, Digest, Digests, Sha256Digest};

use super::bytes32;
use crate::clock::format_instant;
use crate::error::Error;
use crate::sql::Cached as _;

/// A blob row (digests, quarantined) with its inline bytes: `None` for a file blob, or a
/// quarantined one.
pub(crate) type WithInline = (Digests, bool, Option<Vec<u8>>);

/// A blob row: digests and whether it is quarantined.
pub(crate) fn row(conn: &Connection, digest: &Digest) -> Result<Option<(Digests, bool)>, Error> {
    let (sql, key) = match digest {
        Digest::Blake3(id) => (
            "SELECT blake3, sha256, size, quarantined_at FROM blobs WHERE blake3 = ?1",
            id.0,
        ),
        Digest::Sha256(sha) => (
            "SELECT blake3, sha256, size, quarantined_at FROM blobs WHERE sha256 = ?1",
            sha.0,
        ),
    };
    conn.row(sql, [&key[..]], |row| {
        Ok((
            row.get::<_, Vec<u8>>(0)?,
            row.get::<_, Vec<u8>>(1)?,
            row.get::<_, u64>(2)?,
            row.get::<_, Option<String>>(3)?,
        ))
    })
    .optional()?
    .map(|(blake3, sha256, size, quarantined)| {
        Ok((digests_of(blake3, sha256, size)?, quarantined.is_some()))
    })
    .transpose()
}

/// A blob row with its inline bytes in one statement, so from one read transaction and one
/// snapshot: the whole read of a small GET whose visibility was decided from memory.
pub(crate) fn with_inline(conn: &Connection, id: &ArtifactId) -> Result<Option<WithInline>, Error> {
    conn.row(
        "SELECT b.blake3, b.sha256, b.size, b.quarantined_at, i.bytes FROM blobs b
         LEFT JOIN inline_bytes i ON i.id = b.inline_id AND b.quarantined_at IS NULL
         WHERE b.blake3 = ?1",
        [&id.0[..]],
        |row| {
            Ok((
                row.get::<_, Vec<u8>>(0)?,
                row.get::<_, Vec<u8>>(1)?,
                row.get::<_, u64>(2)?,
                row.get::<_, Option<String>>(3)?,
                row.get::<_, Option<Vec<u8>>>(4)?,
            ))
        },
    )
    .optional()?
    .map(|(blake3, sha256, size, quarantined, inline)| {
        Ok((
            digests_of(blake3, sha256, size)?,
            quarantined.is_some(),
            inline,
        ))
    })
    .transpose()
}

/// A row's digests from its columns.
pub(crate) fn digests_of(blake3: Vec<u8>, sha256: Vec<u8>, size: u64) -> Result<Digests, Error> {
    Ok(Digests {
        blake3: ArtifactId(bytes32(blake3)?),
        sha256: Sha256Digest(bytes32(sha256)?),
        size,
    })
}

/// The inline copy of a small blob (issue #15), if it has one.
pub(crate) fn inline_bytes(
    conn: &Connection,
    blake3: &ArtifactId,
) -> Result<Option<Vec<u8>>, Error> {
    Ok(conn
        .row(
            "SELECT i.bytes FROM blobs b JOIN inline_bytes i ON i.id = b.inline_id
             WHERE b.blake3 = ?1",
            [&blake3.0[..]],
            |row| row.get::<_, Vec<u8>>(0),
        )
        .optional()?)
}

/// Whether blob `blake3` has a row.
pub(crate) fn exists(conn: &Connection, blake3: &ArtifactId) -> Result<bool, Error> {
    Ok(conn
        .value::<i64, _>("SELECT 1 FROM blobs WHERE blake3 = ?1", [&blake3.0[..]])?
        .is_some())
}

/// Blob `blake3`'s row, if any, as the id of its inline copy (`None` inside: stored as a
/// file).
pub(crate) fn inline_id(
    conn: &Connection,
    blake3: &ArtifactId,
) -> Result<Option<Option<i64>>, Error> {
    inline_id_ahead(conn, blake3)?.get(conn)
}

/// [`inline_id`], sent ahead (`sql/ahead.rs`): an upload's job sends it with its other reads
/// of the blob, before it writes anything (`artifacts/upload.rs`).
pub(crate) fn inline_id_ahead(
    conn: &Connection,
    blake3: &ArtifactId,
) -> Result<Ahead<Option<Option<i64>>, Error>, Error> {
    let rows = conn.rows_ahead(
        "SELECT inline_id FROM blobs WHERE blake3 = ?1",
        [&blake3.0[..]],
        |row| row.get::<_, Option<i64>>(0),
    )?;
    Ok(rows.then(|rows: Vec<Option<i64>>| Ok::<_, Error>(rows.into_iter().next())))
}

/// Writes a new blob's row, stored at `now`, with the id of its inline copy if it has one.
pub(crate) fn insert(
    conn: &Connection,
    digests: &Digests,
    now: DateTime<Utc>,
    inline_id: Option<i64>,
) -> Result<(), Error> {
    conn.run(
        "INSERT INTO blobs (blake3, sha256, size, stored_at, inline_id) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            &digests.blake3.0[..],
            &digests.sha256.0[..],
            digests.size,
            format_instant(now),
            inline_id
        ],
    )?;
    Ok(())
}

/// Overwrites the SHA-256 the row of blob `blake3` records, behind the engine's back (tests of
/// a corrupted index, `bench_support::tamper`); answers how many rows changed.
#[cfg(feature = "bench-support")]
pub(crate) fn tamper_sha256(
    conn: &Connection,
    blake3: &[u8],
    sha256: &[u8],
) -> Result<usize, Error> {
    Ok(conn.run(
        "UPDATE blobs SET sha256 = ?1 WHERE blake3 = ?2",
        params![sha256, blake3],
    )?)
}

/// Writes a row for blob `digests` stored at `now` (as a file), unless it has one.
pub(crate) fn insert_if_absent(
    conn: &Connection,
    digests: &Digests,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    conn.run(
        "INSERT INTO blobs (blake3, sha256, size, stored_at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (blake3) DO NOTHING",
        params![
            &digests.blake3.0[..],
            &digests.sha256.0[..],
            digests.size,
            format_instant(now)
        ],
    )?;
    Ok(())
}

/// Points blob `blake3`'s row at inline copy `inline_id`.
pub(crate) fn set_inline(
    conn: &Connection,
    blake3: &ArtifactId,
    inline_id: i64,
) -> Result<(), Error> {
    conn.run(
        "UPDATE blobs SET inline_id = ?2 WHERE blake3 = ?1",
        params![&blake3.0[..], inline_id],
    )?;
    Ok(())
}

/// Blob `blake3`'s row names no inline copy any more (its bytes are in a file).
pub(crate) fn clear_inline(conn: &Connection, blake3: &ArtifactId) -> Result<(), Error> {
    conn.run(
        "UPDATE blobs SET inline_id = NULL WHERE blake3 = ?1",
        [&blake3.0[..]],
    )?;
    Ok(())
}

/// Quarantines blob `blake3` at `now`; answers whether it was not quarantined already.
pub(crate) fn quarantine(
    conn: &Connection,
    blake3: &ArtifactId,
    now: DateTime<Utc>,
    read_began: Option<DateTime<Utc>>,
) -> Result<bool, Error> {
    // A repair recorded after the read began, by any server whose clock is within the skew
    // the protocol allows, replaced the bytes the read judged (`engine/repairs.rs`).
    let repaired_since = read_began.map(|began| {
        format_instant(began - chrono::Duration::seconds(weft_api::session::MAX_CLOCK_SKEW_SECONDS))
    });
    let changed = conn.run(
        "UPDATE blobs SET quarantined_at = ?2
         WHERE blake3 = ?1 AND quarantined_at IS NULL
           AND (repaired_at IS NULL OR ?3 IS NULL OR repaired_at < ?3)",
        params![&blake3.0[..], format_instant(now), repaired_since],
    )?;
    Ok(changed > 0)
}

/// Lifts blob `blake3`'s quarantine, and its disposal (its bytes were uploaded again), and
/// records when (`now`); answers whether it was quarantined.
pub(crate) fn repair(
    conn: &Connection,
    blake3: &ArtifactId,
    now: DateTime<Utc>,
) -> Result<bool, Error> {
    let changed = conn.run(
        "UPDATE blobs SET quarantined_at = NULL, disposed_at = NULL, disposal_pending = NULL,
                          repaired_at = ?2
         WHERE blake3 = ?1 AND quarantined_at IS NOT NULL",
        params![&blake3.0[..], format_instant(now)],
    )?;
    Ok(changed > 0)
}

/// The bytes of the blobs `agent_id` uploaded that satisfy `uncited`, an SQL condition on
/// the column `blobs.blake3` (`artifacts::upload::uncited`): each blob once, however many of
/// the Agent's Groups it was uploaded in.
pub(crate) fn uploaded_bytes_where(
    conn: &Connection,
    agent_id: &str,
    uncited: &str,
) -> Result<u64, Error> {
    let sql = format!(
        "SELECT COALESCE(SUM(blobs.size), 0) FROM blobs
         WHERE blobs.blake3 IN ({}) AND {uncited}",
        super::blob_uploaders::BY_AGENT
    );
    Ok(conn.row(&sql, [agent_id], |row| row.get::<_, u64>(0))?)
}

/// The most blobs one sweep round takes on an index several servers share (locked with SKIP
/// LOCKED, so it never waits on a writer citing one).
pub(crate) const SHARED_STALE_BATCH: usize = 1000;

/// The digest `n` blobs after `after` in digest order (the empty digest is before every
/// one), or `None` when fewer remain: the end of a sweep round's window.
pub(crate) fn window_end(
    conn: &Connection,
    after: &[u8],
    n: u64,
) -> Result<Option<Vec<u8>>, Error> {
    Ok(conn
        .row(
            "SELECT blake3 FROM blobs WHERE blake3 > ?1 ORDER BY blake3 LIMIT 1 OFFSET ?2",
            params![after, n.saturating_sub(1)],
            |row| row.get(0),
        )
        .optional()?)
}

/// The blobs (digest, size) after `after` and up to `through` (to the last when `None`) in
/// digest order, last uploaded, or stored when no uploader row remains, before `cutoff` (an
/// instant as `clock::format_instant` writes it), and that satisfy `uncited`, an SQL
/// condition on the column `blobs.blake3`: what the sweep removes, in digest order. On a
/// shared index at most [`SHARED_STALE_BATCH`].
pub(crate) fn stale_where(
    conn: &Connection,
    cutoff: &str,
    uncited: &str,
    after: &[u8],
    through: Option<&[u8]>,
) -> Result<Vec<(Vec<u8>, u64)>, Error> {
    let batch = match conn.engine() {
        crate::sql::Engine::Postgres => {
            format!(" LIMIT {SHARED_STALE_BATCH} FOR UPDATE OF blobs SKIP LOCKED")
        }
        crate::sql::Engine::Sqlite => String::new(),
    };
    let window = match through {
        Some(_) => "blobs.blake3 > ?2 AND blobs.blake3 <= ?3",
        None => "blobs.blake3 > ?2",
    };
    let sql = format!(
        "SELECT blake3, size FROM blobs
         WHERE {window} AND COALESCE(({}), stored_at) < ?1
           AND {uncited} ORDER BY blake3{batch}",
        super::blob_uploaders::last_upload_of("blobs.blake3")
    );
    let read = |row: &crate::sql::Row<'_>| Ok((row.get::<_, Vec<u8>>(0)?, row.get::<_, u64>(1)?));
    Ok(match through {
        Some(through) => conn.rows(&sql, params![cutoff, after, through], read)?,
        None => conn.rows(&sql, params![cutoff, after], read)?,
    })
}

/// Removes blob `blake3`'s row.
pub(crate) fn delete(conn: &Connection, blake3: &[u8]) -> Result<(), Error> {
    conn.run("DELETE FROM blobs WHERE blake3 = ?1", [blake3])?;
    Ok(())
}

/// How many blobs have a row.
pub(crate) fn count(conn: &Connection) -> Result<u64, Error> {
    Ok(conn.row("SELECT COUNT(*) FROM blobs", [], |row| row.get(0))?)
}

/// How many blobs are quarantined (their bytes failed a check; not those disposed of).
pub(crate) fn count_quarantined(conn: &Connection) -> Result<u64, Error> {
    Ok(conn.row(
        "SELECT COUNT(*) FROM blobs WHERE quarantined_at IS NOT NULL AND disposed_at IS NULL",
        [],
        |row| row.get(0),
    )?)
}

/// How many blobs are stored inline in the index.
pub(crate) fn count_inline(conn: &Connection) -> Result<u64, Error> {
    Ok(conn.row(
        "SELECT COUNT(*) FROM blobs WHERE inline_id IS NOT NULL",
        [],
        |row| row.get(0),
    )?)
}

/// Every blob stored inline in the index.
pub(crate) fn all_inline(conn: &Connection) -> Result<Vec<ArtifactId>, Error> {
    let ids = conn
        .rows(
            "SELECT blake3 FROM blobs WHERE inline_id IS NOT NULL",
            [],
            |row| row.get::<_, Vec<u8>>(0),
        )?
        .into_iter()
        .map(super::artifact_id)
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(ids)
}

/// Every blob with a row.
pub(crate) fn all(conn: &Connection) -> Result<Vec<ArtifactId>, Error> {
    let ids = conn
        .rows("SELECT blake3 FROM blobs", [], |row| {
            row.get::<_, Vec<u8>>(0)
        })?
        .into_iter()
        .map(super::artifact_id)
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(ids)
}

/// A blob's row as collection decides on it (issue #46), locked against a publication citing
/// it until the deciding transaction ends (on a shared index; a row another writer holds is
/// skipped: `None`, as for no row).
#[derive(Clone, Debug)]
pub(crate) struct Collectable {
    pub(crate) sha256: Sha256Digest,
    pub(crate) size: u64,
    /// Disposed of already, or quarantined: not collectable now.
    pub(crate) unreadable: bool,
    /// Its latest upload, or when it was stored.
    pub(crate) last_upload: DateTime<Utc>,
}

/// Blob `blake3`'s [`Collectable`] row, locked on a shared index.
pub(crate) fn collectable(
    conn: &Connection,
    blake3: &ArtifactId,
) -> Result<Option<Collectable>, Error> {
    let lock = match conn.engine() {
        crate::sql::Engine::Postgres => " FOR UPDATE OF blobs SKIP LOCKED",
        crate::sql::Engine::Sqlite => "",
    };
    let sql = format!(
        "SELECT sha256, size, quarantined_at, COALESCE(({}), stored_at) FROM blobs
         WHERE blake3 = ?1{lock}",
        super::blob_uploaders::last_upload_of("blobs.blake3")
    );
    let raw = conn
        .row(&sql, [&blake3.0[..]], |row| {
            Ok((
                row.get::<_, Vec<u8>>(0)?,
                row.get::<_, u64>(1)?,
                row.get::<_, Option<String>>(2)?,
                row.get::<_, String>(3)?,
            ))
        })
        .optional()?;
    raw.map(|(sha256, size, quarantined, last)| {
        Ok(Collectable {
            sha256: Sha256Digest(super::bytes32(sha256)?),
            size,
            unreadable: quarantined.is_some(),
            last_upload: super::instant(&last)?,
        })
    })
    .transpose()
}

/// Marks blob `blake3` disposed of at `now` (and unreadable, as a quarantined one is: every
/// path that refuses quarantined bytes refuses these); its inline copy must be gone first
/// (`inline_bytes::delete_of_blob`). Answers whether it changed.
pub(crate) fn dispose(
    conn: &Connection,
    blake3: &ArtifactId,
    now: DateTime<Utc>,
) -> Result<bool, Error> {
    let changed = conn.run(
        "UPDATE blobs SET disposed_at = ?2, quarantined_at = ?2, inline_id = NULL,
                          disposal_pending = 1
         WHERE blake3 = ?1 AND disposed_at IS NULL AND quarantined_at IS NULL",
        params![&blake3.0[..], format_instant(now)],
    )?;
    Ok(changed > 0)
}

/// Whether blob `blake3` was disposed of (and not uploaded again since).
pub(crate) fn is_disposed(conn: &Connection, blake3: &ArtifactId) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM blobs WHERE blake3 = ?1 AND disposed_at IS NOT NULL",
            [&blake3.0[..]],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// How many blobs are disposed of.
pub(crate) fn count_disposed(conn: &Connection) -> Result<u64, Error> {
    Ok(conn.row(
        "SELECT COUNT(*) FROM blobs WHERE disposed_at IS NOT NULL",
        [],
        |row| row.get(0),
    )?)
}

/// Whether a schema or a snapshot cites blob `blake3`: the store's own records, never
/// collected.
pub(crate) fn cited_by_the_store(conn: &Connection, blake3: &ArtifactId) -> Result<bool, Error> {
    Ok(conn.row(&cited_by_the_store_sql(), [&blake3.0[..]], |row| {
        row.get::<_, i64>(0)
    })? == 1)
}

/// The statement of [`cited_by_the_store`]: two look-ups along the schemas' and snapshots'
/// blob indexes (V41).
pub(crate) fn cited_by_the_store_sql() -> String {
    format!(
        "SELECT CASE WHEN {} OR {} THEN 1 ELSE 0 END",
        super::schemas::cites_column("?1"),
        super::snapshots::cites_column("?1")
    )
}

/// SQL: (count, total size) of the blobs, not disposed of, that sub-query `blobs_sql` names
/// (one `blake3` column): what a Group's usage counts (`groups::usage`).
pub(crate) fn usage_of(blobs_sql: &str) -> String {
    format!(
        "SELECT COUNT(*), COALESCE(SUM(b.size), 0) FROM blobs b
         JOIN ({blobs_sql}) g ON g.blake3 = b.blake3
         WHERE b.disposed_at IS NULL"
    )
}

/// Disposed blobs whose files may still exist (a collection stopped between its commit and
/// its deletions), at most `limit`.
pub(crate) fn disposal_pending(conn: &Connection, limit: u64) -> Result<Vec<ArtifactId>, Error> {
    conn.rows(
        "SELECT blake3 FROM blobs WHERE disposal_pending IS NOT NULL LIMIT ?1",
        [limit],
        |row| row.get::<_, Vec<u8>>(0),
    )?
    .into_iter()
    .map(super::artifact_id)
    .collect()
}

/// Records that the files of disposed blobs `ids` are deleted.
pub(crate) fn disposal_done(conn: &Connection, ids: &[ArtifactId]) -> Result<(), Error> {
    for id in ids {
        conn.run(
            "UPDATE blobs SET disposal_pending = NULL WHERE blake3 = ?1 AND disposed_at IS NOT NULL",
            [&id.0[..]],
        )?;
    }
    Ok(())
}
