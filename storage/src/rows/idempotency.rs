//! The `idempotency` table: the only SQL that names it. Each stored answer to an idempotent
//! request, by (scope, key), with the hash of the request it answered (the claim's rules are
//! `claim.rs`'s).

use crate::sql::{Connection, OptionalExtension as _, params};

use crate::clock::format_instant;
use crate::error::Error;
use crate::sql::Cached as _;

/// A stored answer to an idempotent request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredAnswer {
    pub request_hash: [u8; 32],
    pub status: u16,
    pub body: Vec<u8>,
}

/// The stored answer for `(scope, key)`, if any. On PostgreSQL the key's transaction lock is
/// taken first: a request retried on another server while the first still runs waits for its
/// commit here, then finds its answer, and never does the work twice (nothing on SQLite,
/// whose one writer already serialises the two).
pub(crate) fn lookup(
    conn: &Connection,
    scope: &str,
    key: &str,
) -> Result<Option<StoredAnswer>, Error> {
    if conn.engine() == crate::sql::Engine::Postgres {
        conn.value::<i64, _>(
            "SELECT 1 FROM pg_advisory_xact_lock(hashtextextended(?1, 0))",
            [format!("idempotency {scope} {key}")],
        )?;
    }
    let row: Option<(Vec<u8>, u16, Vec<u8>)> = conn
        .row(
            "SELECT request_hash, status, body FROM idempotency WHERE scope = ?1 AND key = ?2",
            params![scope, key],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()?;
    row.map(|(hash, status, body)| {
        let request_hash = <[u8; 32]>::try_from(hash.as_slice()).map_err(|_| {
            Error::backend(std::io::Error::other(
                "a stored request hash is not 32 bytes",
            ))
        })?;
        Ok(StoredAnswer {
            request_hash,
            status,
            body,
        })
    })
    .transpose()
}

pub(crate) fn insert(
    conn: &Connection,
    scope: &str,
    key: &str,
    answer: &StoredAnswer,
    now: chrono::DateTime<chrono::Utc>,
    or_ignore: bool,
) -> Result<(), Error> {
    let verb = if or_ignore {
        "INSERT OR IGNORE"
    } else {
        "INSERT"
    };
    conn.run(
        &format!(
            "{verb} INTO idempotency (scope, key, request_hash, status, body, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        ),
        params![
            scope,
            key,
            &answer.request_hash[..],
            answer.status,
            answer.body,
            format_instant(now)
        ],
    )?;
    Ok(())
}

/// Trims the answers stored before `cutoff` (an instant as `clock::format_instant` writes
/// it), at most `limit`: the key and request hash stay with status 0, so a retry is answered
/// `command_expired`, never done again. Answers how many were trimmed.
pub(crate) fn trim_before(conn: &Connection, cutoff: &str, limit: u64) -> Result<u64, Error> {
    let trimmed = conn.run(
        "UPDATE idempotency SET status = 0, body = ?3
         WHERE (scope, key) IN (
             SELECT scope, key FROM idempotency WHERE created_at < ?1 AND status <> 0 LIMIT ?2)",
        params![cutoff, limit, Vec::<u8>::new()],
    )?;
    Ok(trimmed as u64)
}
