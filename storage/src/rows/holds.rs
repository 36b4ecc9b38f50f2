//! The `holds` table: legal holds (issue #46), placed and lifted by the operator or by a
//! Group's approver (then the hold is that Group's: `group_id`, `placed_by`), and the only
//! SQL that names it. A lifted hold keeps its row (`lifted_at`): `hold ls` shows it, and its
//! id is never reused.

use chrono::{DateTime, Utc};

use crate::sql::{Connection, OptionalExtension as _, params};
use weft_api::Id;
use weft_api::lifecycle::HoldTarget;

use super::{id, instant};
use crate::clock::format_instant;
use crate::error::Error;
use crate::sql::Cached as _;

/// A hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HoldRow {
    pub(crate) hold_id: Id,
    pub(crate) target: HoldTarget,
    pub(crate) reason: String,
    pub(crate) placed_at: DateTime<Utc>,
    pub(crate) lifted_at: Option<DateTime<Utc>>,
    /// The approver's Group and the approver, for a hold a Group's approver placed.
    pub(crate) placed_in: Option<(Id, Id)>,
}

const COLUMNS: &str =
    "SELECT hold_id, kind, target, reason, placed_at, lifted_at, group_id, placed_by FROM holds";

/// A new hold.
pub(crate) fn insert(conn: &Connection, row: &HoldRow) -> Result<(), Error> {
    let (kind, target) = row.target.parts();
    conn.run(
        "INSERT INTO holds (hold_id, kind, target, reason, placed_at, group_id, placed_by)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            row.hold_id.as_str(),
            kind,
            target,
            row.reason,
            format_instant(row.placed_at),
            row.placed_in.as_ref().map(|(group, _)| group.as_str()),
            row.placed_in.as_ref().map(|(_, agent)| agent.as_str())
        ],
    )?;
    Ok(())
}

/// Lifts hold `hold_id` at `now`; answers whether it was in force.
pub(crate) fn lift(conn: &Connection, hold_id: &str, now: DateTime<Utc>) -> Result<bool, Error> {
    let changed = conn.run(
        "UPDATE holds SET lifted_at = ?2 WHERE hold_id = ?1 AND lifted_at IS NULL",
        params![hold_id, format_instant(now)],
    )?;
    Ok(changed > 0)
}

/// Hold `hold_id`, lifted or not.
pub(crate) fn load(conn: &Connection, hold_id: &str) -> Result<Option<HoldRow>, Error> {
    let raw = conn
        .row(&format!("{COLUMNS} WHERE hold_id = ?1"), [hold_id], raw_row)
        .optional()?;
    raw.map(typed).transpose()
}

/// The holds in force.
pub(crate) fn in_force(conn: &Connection) -> Result<Vec<HoldRow>, Error> {
    conn.rows(
        &format!("{COLUMNS} WHERE lifted_at IS NULL ORDER BY hold_id"),
        [],
        raw_row,
    )?
    .into_iter()
    .map(typed)
    .collect()
}

/// How many holds in force Group `group_id`'s approvers placed.
pub(crate) fn in_force_of_group(conn: &Connection, group_id: &str) -> Result<u64, Error> {
    Ok(conn.row(
        "SELECT COUNT(*) FROM holds WHERE group_id = ?1 AND lifted_at IS NULL",
        [group_id],
        |row| row.get(0),
    )?)
}

/// How many holds Group `group_id`'s approvers placed after `since` (a `format_instant` text),
/// lifted or not.
pub(crate) fn placed_in_group_since(
    conn: &Connection,
    group_id: &str,
    since: &str,
) -> Result<u64, Error> {
    Ok(conn.row(
        "SELECT COUNT(*) FROM holds WHERE group_id = ?1 AND placed_at > ?2",
        params![group_id, since],
        |row| row.get(0),
    )?)
}

/// How many holds `agent_id` placed as an approver of Group `group_id` after `since`, lifted
/// or not (along the Group's placements of the day: at most `GROUP_HOLDS` rows).
pub(crate) fn placed_by_since(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
    since: &str,
) -> Result<u64, Error> {
    Ok(conn.row(
        "SELECT COUNT(*) FROM holds WHERE group_id = ?1 AND placed_at > ?2 AND placed_by = ?3",
        params![group_id, since, agent_id],
        |row| row.get(0),
    )?)
}

/// Up to `n` holds by id after `after`, in force or lifted; with `group_id`, only those its
/// approvers placed and the operator's.
pub(crate) fn page(
    conn: &Connection,
    group_id: Option<&str>,
    after: &str,
    n: u64,
) -> Result<Vec<HoldRow>, Error> {
    let rows = match group_id {
        Some(group) => conn.rows(
            &format!(
                "{COLUMNS} WHERE hold_id > ?1 AND (group_id = ?2 OR group_id IS NULL)
                 ORDER BY hold_id LIMIT ?3"
            ),
            params![after, group, n],
            raw_row,
        )?,
        None => conn.rows(
            &format!("{COLUMNS} WHERE hold_id > ?1 ORDER BY hold_id LIMIT ?2"),
            params![after, n],
            raw_row,
        )?,
    };
    rows.into_iter().map(typed).collect()
}

type Raw = (
    String,
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
);

fn raw_row(row: &crate::sql::Row<'_>) -> Result<Raw, crate::sql::SqlError> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
    ))
}

fn typed(
    (hold_id, kind, target, reason, placed_at, lifted_at, group_id, placed_by): Raw,
) -> Result<HoldRow, Error> {
    let placed_in = match (group_id, placed_by) {
        (Some(group), Some(agent)) => Some((id("groupId", &group)?, id("agentId", &agent)?)),
        _ => None,
    };
    Ok(HoldRow {
        hold_id: id("holdId", &hold_id)?,
        target: HoldTarget::from_parts(&kind, &target).map_err(Error::backend)?,
        reason,
        placed_at: instant(&placed_at)?,
        lifted_at: lifted_at.as_deref().map(instant).transpose()?,
        placed_in,
    })
}
