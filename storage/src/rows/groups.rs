//! The `groups` table: the only SQL that names it. A Group exists once created; its policy
//! (the Mission priority ceiling, SCH-6) is a typed column.

use crate::sql::{Ahead, Connection, Engine, OptionalExtension as _, params};
use chrono::{DateTime, Utc};
use weft_api::work::contract::Level;

use super::{name, parse_name};
use crate::clock::format_instant;
use crate::error::Error;
use crate::sql::Cached as _;
use crate::unit::Conn;

/// Holds Group `group_id`'s row lock until the transaction ends (`FOR NO KEY UPDATE`: it
/// excludes the other writers of the Group, but not the key-share lock a foreign key check
/// of a row naming the Group takes, so two jobs that inserted such rows before appending
/// cannot deadlock on upgrading it). On PostgreSQL this is what
/// serialises the Group's writers across processes (issue #43): a second server's append
/// waits here for the first's commit, then reads its head, so sequences stay contiguous and
/// the chain unforked, and a Command's checks read what the Group's last commit left. On
/// SQLite the one writer already serialises everything, and this does nothing.
/// Taken once per writer transaction: a job remembers it holds the lock, and the writer tells
/// the batch's later jobs which locks the transaction holds (`db/writer.rs`).
pub(crate) fn lock(conn: &impl Conn, group_id: &str) -> Result<(), Error> {
    let take = || -> Result<(), Error> {
        conn.conn().value::<i64, _>(
            "SELECT 1 FROM groups WHERE group_id = ?1 FOR NO KEY UPDATE",
            [group_id],
        )?;
        Ok(())
    };
    if conn.conn().engine() != Engine::Postgres {
        return Ok(());
    }
    match conn.memo() {
        Some(memo) => memo.load("groups.lock", group_id, || {
            take()?;
            memo.note_lock(group_id);
            Ok(())
        }),
        None => take(),
    }
}

/// Whether Group `group_id` exists.
pub(crate) fn exists(conn: &Connection, group_id: &str) -> Result<bool, Error> {
    exists_ahead(conn, group_id)?.get(conn)
}

/// [`exists`], sent ahead (`sql/ahead.rs`).
pub(crate) fn exists_ahead(conn: &Connection, group_id: &str) -> Result<Ahead<bool, Error>, Error> {
    let rows = conn.rows_ahead(
        "SELECT 1 FROM groups WHERE group_id = ?1",
        [group_id],
        |_| Ok(()),
    )?;
    Ok(rows.then(|rows: Vec<()>| Ok::<_, Error>(!rows.is_empty())))
}

/// A new Group, created at `at`.
/// Whether it was new (`false`: the Group exists, nothing changed).
pub(crate) fn insert(conn: &Connection, group_id: &str, at: DateTime<Utc>) -> Result<bool, Error> {
    let inserted = conn.run(
        "INSERT INTO groups (group_id, created_at) VALUES (?1, ?2)
         ON CONFLICT (group_id) DO NOTHING",
        params![group_id, format_instant(at)],
    )?;
    Ok(inserted == 1)
}

/// Every Group's id, in order.
pub(crate) fn ids(conn: &Connection) -> Result<Vec<String>, Error> {
    Ok(
        conn.rows("SELECT group_id FROM groups ORDER BY group_id", [], |row| {
            row.get(0)
        })?,
    )
}

/// How many Groups there are.
pub(crate) fn count(conn: &Connection) -> Result<u64, Error> {
    Ok(conn.row("SELECT COUNT(*) FROM groups", [], |row| row.get(0))?)
}

/// The Group's Mission priority ceiling (SCH-6), if the Group exists.
pub(crate) fn priority_ceiling(conn: &Connection, group_id: &str) -> Result<Option<Level>, Error> {
    let ceiling: Option<String> = conn
        .row(
            "SELECT mission_priority_ceiling FROM groups WHERE group_id = ?1",
            [group_id],
            |r| r.get(0),
        )
        .optional()?;
    ceiling.as_deref().map(parse_name).transpose()
}

/// Sets the Group's Mission priority ceiling; answers whether the Group exists.
pub(crate) fn set_priority_ceiling(
    conn: &Connection,
    group_id: &str,
    ceiling: Level,
) -> Result<bool, Error> {
    let changed = conn.run(
        "UPDATE groups SET mission_priority_ceiling = ?2 WHERE group_id = ?1",
        params![group_id, name(&ceiling)?],
    )?;
    Ok(changed > 0)
}

/// The Group's quota (issue #46), if the Group exists.
pub(crate) fn quota(
    conn: &Connection,
    group_id: &str,
) -> Result<Option<weft_api::lifecycle::views::Quota>, Error> {
    quota_ahead(conn, group_id)?.get(conn)
}

/// [`quota`], sent ahead (`sql/ahead.rs`): an upload's job sends it before its caller's
/// liveness check, so both travel in one round trip (`artifacts/quota.rs`).
pub(crate) fn quota_ahead(
    conn: &Connection,
    group_id: &str,
) -> Result<Ahead<Option<weft_api::lifecycle::views::Quota>, Error>, Error> {
    let rows = conn.rows_ahead(
        "SELECT quota_bytes, quota_artifacts FROM groups WHERE group_id = ?1",
        [group_id],
        |r| {
            Ok(weft_api::lifecycle::views::Quota {
                bytes: r.get(0)?,
                artifacts: r.get(1)?,
            })
        },
    )?;
    Ok(rows.then(|rows: Vec<weft_api::lifecycle::views::Quota>| {
        Ok::<_, Error>(rows.into_iter().next())
    }))
}

/// Sets the Group's quota; answers whether the Group exists.
pub(crate) fn set_quota(
    conn: &Connection,
    group_id: &str,
    quota: &weft_api::lifecycle::views::Quota,
) -> Result<bool, Error> {
    let changed = conn.run(
        "UPDATE groups SET quota_bytes = ?2, quota_artifacts = ?3 WHERE group_id = ?1",
        params![group_id, quota.bytes, quota.artifacts],
    )?;
    Ok(changed > 0)
}

/// The blobs Group `group_id` holds (a parameter: its manifests' and its uploads'), as SQL.
fn blobs_of(group: &str) -> String {
    format!(
        "{} UNION {}",
        super::manifests::blobs_of_group(group),
        super::blob_uploaders::blobs_of_group(group)
    )
}

/// Group `group_id`'s usage: (artifacts, bytes) of the distinct blobs its manifests cite or
/// its members uploaded, disposed ones left out.
pub(crate) fn usage(conn: &Connection, group_id: &str) -> Result<(u64, u64), Error> {
    let sql = super::blobs::usage_of(&blobs_of("?1"));
    Ok(conn.row(&sql, [group_id], |row| Ok((row.get(0)?, row.get(1)?)))?)
}

/// Whether blob `blake3` counts in Group `group_id`'s usage already (a manifest of the Group
/// cites it, or a member uploaded it there): two look-ups along `blake3`'s indexes, never a
/// walk of the Group's blobs.
pub(crate) fn counts(
    conn: &Connection,
    group_id: &str,
    blake3: &weft_api::ArtifactId,
) -> Result<bool, Error> {
    Ok(super::manifests::cited_in_group(conn, blake3, group_id)?
        || super::blob_uploaders::uploaded_in_group(conn, blake3, group_id)?)
}

/// The upper bound of Group `group_id`'s usage its quota check keeps, `(artifacts, bytes)`,
/// and the `usage_epoch` it was counted in; `None` until counted, or after something may have
/// grown the usage outside an upload.
pub(crate) fn usage_bound(
    conn: &Connection,
    group_id: &str,
) -> Result<Option<(u64, u64, u64)>, Error> {
    Ok(conn
        .row(
            "SELECT usage_artifacts_bound, usage_bytes_bound, usage_bound_epoch
             FROM groups WHERE group_id = ?1",
            [group_id],
            |r| {
                Ok((
                    r.get::<_, Option<u64>>(0)?,
                    r.get::<_, Option<u64>>(1)?,
                    r.get::<_, Option<u64>>(2)?,
                ))
            },
        )
        .optional()?
        .and_then(|(artifacts, bytes, epoch)| Some((artifacts?, bytes?, epoch?))))
}

/// Sets Group `group_id`'s usage bound (`None`: not known).
pub(crate) fn set_usage_bound(
    conn: &Connection,
    group_id: &str,
    bound: Option<(u64, u64, u64)>,
) -> Result<(), Error> {
    conn.run(
        "UPDATE groups SET usage_artifacts_bound = ?2, usage_bytes_bound = ?3, usage_bound_epoch = ?4
         WHERE group_id = ?1",
        params![
            group_id,
            bound.map(|b| b.0),
            bound.map(|b| b.1),
            bound.map(|b| b.2)
        ],
    )?;
    Ok(())
}
