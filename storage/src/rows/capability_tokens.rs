//! The `capability_tokens` table: the only SQL that names it, and its row [`TokenRow`]. A
//! token is found by the hash of its bearer text (never the text itself); its deadline is an
//! instant compared as time.

use crate::sql::{Connection, Engine, OptionalExtension as _, params};
use chrono::{DateTime, Utc};
use weft_api::work::views::TokenScope;

use super::{from_json, instant, to_json};
use crate::clock::format_instant;
use crate::error::Error;
use crate::sql::Cached as _;

/// A `capability_tokens` row, as a bearer's look-up reads it.
#[derive(Clone, Debug)]
pub(crate) struct TokenRow {
    pub(crate) token_id: String,
    pub(crate) lease_id: String,
    pub(crate) scope: Vec<TokenScope>,
    pub(crate) expires_at: DateTime<Utc>,
    pub(crate) revoked: bool,
}

impl TokenRow {
    /// The token's deadline has passed at `now`.
    pub(crate) fn expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at <= now
    }
}

/// Holds the token whose bearer text hashes to `token_hash` against its revocation until the
/// transaction ends (`FOR SHARE`; PostgreSQL, where a revocation through another server
/// otherwise commits, and answers, between a use's read of the token and that use's commit).
/// A revocation's update waits for the use's commit; a use taken after a revocation's update
/// waits for it and then reads the token revoked. On SQLite the one writer already orders them.
pub(crate) fn hold(conn: &Connection, token_hash: &[u8; 32]) -> Result<(), Error> {
    if conn.engine() == Engine::Postgres {
        conn.rows(
            "SELECT 1 FROM capability_tokens WHERE token_hash = ?1 FOR SHARE",
            [&token_hash[..]],
            |row| row.get::<_, i64>(0),
        )?;
    }
    Ok(())
}

/// The token whose bearer text hashes to `token_hash`, if there is one.
pub(crate) fn by_hash(conn: &Connection, token_hash: &[u8; 32]) -> Result<Option<TokenRow>, Error> {
    let row: Option<(String, String, String, String, bool)> = conn
        .row(
            "SELECT token_id, lease_id, scope, expires_at, revoked_at IS NOT NULL
             FROM capability_tokens WHERE token_hash = ?1",
            [&token_hash[..]],
            |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                ))
            },
        )
        .optional()?;
    row.map(|(token_id, lease_id, scope, expires_at, revoked)| {
        Ok(TokenRow {
            token_id,
            lease_id,
            scope: from_json(&scope)?,
            expires_at: instant(&expires_at)?,
            revoked,
        })
    })
    .transpose()
}

/// A token to keep: its hash, id, lease, scope, and when it was issued and expires.
pub(crate) struct NewToken<'a> {
    pub(crate) token_hash: &'a [u8; 32],
    pub(crate) token_id: &'a str,
    pub(crate) lease_id: &'a str,
    pub(crate) scope: &'a [TokenScope],
    pub(crate) issued_at: DateTime<Utc>,
    pub(crate) expires_at: DateTime<Utc>,
}

pub(crate) fn insert(conn: &Connection, new: &NewToken<'_>) -> Result<(), Error> {
    conn.run(
        "INSERT INTO capability_tokens (token_hash, token_id, lease_id, scope, issued_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            &new.token_hash[..],
            new.token_id,
            new.lease_id,
            to_json(&new.scope)?,
            format_instant(new.issued_at),
            format_instant(new.expires_at)
        ],
    )?;
    Ok(())
}

/// Revokes token `token_id` of lease `lease_id` at `at` (a revoked one keeps its first
/// revocation); answers whether the token exists.
pub(crate) fn revoke(
    conn: &Connection,
    token_id: &str,
    lease_id: &str,
    at: DateTime<Utc>,
) -> Result<bool, Error> {
    let found = conn.run(
        "UPDATE capability_tokens SET revoked_at = COALESCE(revoked_at, ?3)
         WHERE token_id = ?1 AND lease_id = ?2",
        params![token_id, lease_id, format_instant(at)],
    )?;
    Ok(found > 0)
}

/// Revokes token `token_id` of lease `lease_id` at `at` unless it was revoked already;
/// answers whether it was revoked now.
pub(crate) fn revoke_unrevoked(
    conn: &Connection,
    token_id: &str,
    lease_id: &str,
    at: DateTime<Utc>,
) -> Result<bool, Error> {
    let found = conn.run(
        "UPDATE capability_tokens SET revoked_at = COALESCE(revoked_at, ?3)
         WHERE token_id = ?1 AND lease_id = ?2 AND revoked_at IS NULL",
        params![token_id, lease_id, format_instant(at)],
    )?;
    Ok(found > 0)
}

/// Whether lease `lease_id` has a token `token_id`.
pub(crate) fn exists(conn: &Connection, token_id: &str, lease_id: &str) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM capability_tokens WHERE token_id = ?1 AND lease_id = ?2",
            params![token_id, lease_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// Up to `limit` tokens that expired before `cutoff` (a `format_instant` text), by token hash
/// after `after`: `(token_hash, lease_id)`.
pub(crate) fn expired_before(
    conn: &Connection,
    cutoff: &str,
    after: &[u8],
    limit: u64,
) -> Result<Vec<(Vec<u8>, String)>, Error> {
    Ok(conn.rows(
        "SELECT token_hash, lease_id FROM capability_tokens
         WHERE expires_at < ?1 AND token_hash > ?2 ORDER BY token_hash LIMIT ?3",
        params![cutoff, after, limit],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?)
}

/// Forgets the token whose bearer text hashes to `token_hash` (issue #46: one that authorizes
/// nothing, of a lease that ended); a look-up of it answers as for an unknown token.
pub(crate) fn forget(conn: &Connection, token_hash: &[u8]) -> Result<u64, Error> {
    Ok(conn.run(
        "DELETE FROM capability_tokens WHERE token_hash = ?1",
        [token_hash],
    )? as u64)
}
