//! The `missions` table: the only SQL that names it, and its row [`MissionRow`].
//!
//! The row is typed: ids as `Id`; its priority, budget, state and child-failure policy
//! parsed. A stored value that does not parse is a corrupt row.

use crate::sql::{Connection, OptionalExtension as _, params};
use weft_api::Id;
use weft_api::work::contract::{Budgets, ChildFailurePolicy, Level};
use weft_api::work::machine::MissionState;

use super::{from_json, id, name, parse_name, to_json};
use crate::error::Error;
use crate::sql::Cached as _;

/// A `missions` row.
#[derive(Clone, Debug)]
pub(crate) struct MissionRow {
    pub(crate) mission_id: Id,
    pub(crate) group_id: Id,
    pub(crate) title: String,
    pub(crate) priority_class: Level,
    pub(crate) budget: Budgets,
    pub(crate) state: MissionState,
    pub(crate) revision: u64,
    pub(crate) parent_work_item_id: Option<Id>,
    pub(crate) child_failure_policy: Option<ChildFailurePolicy>,
}

/// The Mission `id`, by its key, with no visibility filter (the writer's lookup).
const LOAD: &str = "SELECT mission_id, group_id, title, priority_class, budget, state, revision,
            parent_work_item_id, child_failure_policy
     FROM missions WHERE mission_id = ?1";

/// The Mission `id`, if there is one (the writer's lookup: no visibility filter).
pub(crate) fn load(conn: &Connection, id: &str) -> Result<Option<MissionRow>, Error> {
    load_by(conn, LOAD, params![id])
}

/// [`load`], sent ahead (`sql/ahead.rs`): a work Command sends it with its lookup of an
/// earlier answer when its connection knows the WorkItem's Mission (`work/command.rs`). The
/// row is parsed only once its reader has checked it is the one it wants ([`Unparsed`]).
pub(crate) fn load_ahead(
    conn: &Connection,
    id: &str,
) -> Result<crate::sql::Ahead<Option<Unparsed>>, Error> {
    let rows = conn.rows_ahead(LOAD, params![id], raw)?;
    Ok(rows.then(|rows: Vec<Raw>| Ok(rows.into_iter().next().map(Unparsed))))
}

/// A `missions` row read ahead, not yet parsed ([`load_ahead`]).
pub(crate) struct Unparsed(Raw);

impl Unparsed {
    /// The Mission's id, as stored.
    pub(crate) fn mission_id(&self) -> &str {
        &self.0.0
    }

    pub(crate) fn parse(self) -> Result<MissionRow, Error> {
        parse(self.0)
    }
}

/// The Mission `id` if `seer` may see it. As `work_items::load_seen`, visibility is decided
/// by the lookup itself (issue #40).
pub(crate) fn load_seen(
    conn: &Connection,
    id: &str,
    seer: &super::Seer<'_>,
) -> Result<Option<MissionRow>, Error> {
    let (group, missions) = seer.filter();
    load_by(
        conn,
        "SELECT mission_id, group_id, title, priority_class, budget, state, revision,
                parent_work_item_id, child_failure_policy
         FROM json_each(coalesce(?3, '[null]')) scope CROSS JOIN missions INDEXED BY missions_seen
         WHERE mission_id = ?1 AND (?2 IS NULL OR group_id = ?2)
         AND (?3 IS NULL OR mission_id = scope.value)",
        params![id, group, missions],
    )
}

fn load_by(
    conn: &Connection,
    sql: &str,
    params: impl crate::sql::Params,
) -> Result<Option<MissionRow>, Error> {
    conn.row(sql, params, raw)
        .optional()?
        .map(parse)
        .transpose()
}

/// A `missions` row as stored, before its values are parsed.
type Raw = (
    String,
    String,
    String,
    String,
    String,
    String,
    u64,
    Option<String>,
    Option<String>,
);

fn raw(row: &crate::sql::Row<'_>) -> crate::sql::Result<Raw> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
        row.get(8)?,
    ))
}

fn parse(raw: Raw) -> Result<MissionRow, Error> {
    let (mission_id, group_id, title, priority, budget, state, revision, parent, policy) = raw;
    Ok(MissionRow {
        mission_id: id("missionId", &mission_id)?,
        group_id: id("groupId", &group_id)?,
        title,
        priority_class: parse_name(&priority)?,
        budget: from_json(&budget)?,
        state: parse_name(&state)?,
        revision,
        parent_work_item_id: parent.map(|parent| id("workItemId", &parent)).transpose()?,
        child_failure_policy: policy.as_deref().map(parse_name).transpose()?,
    })
}

/// A new Mission; `created_sequence` orders the listing (newest first).
pub(crate) fn insert(
    conn: &Connection,
    row: &MissionRow,
    created_sequence: u64,
) -> Result<(), Error> {
    conn.run(
        "INSERT INTO missions (mission_id, group_id, title, priority_class, budget, state, revision,
                               parent_work_item_id, child_failure_policy, created_sequence)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            row.mission_id.as_str(),
            row.group_id.as_str(),
            row.title,
            name(&row.priority_class)?,
            to_json(&row.budget)?,
            name(&row.state)?,
            row.revision,
            row.parent_work_item_id.as_deref(),
            row.child_failure_policy.as_ref().map(name).transpose()?,
            created_sequence
        ],
    )?;
    Ok(())
}

/// Writes `row`'s state and revision (the only columns a Mission's Commands change); a
/// Mission that reaches a terminal state at `now` ends then (retention counts from it).
pub(crate) fn save_state(
    conn: &Connection,
    row: &MissionRow,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), Error> {
    let ended = row
        .state
        .is_terminal()
        .then(|| crate::clock::format_instant(now));
    conn.run(
        "UPDATE missions SET state = ?2, revision = ?3, ended_at = COALESCE(ended_at, ?4)
         WHERE mission_id = ?1",
        params![
            row.mission_id.as_str(),
            name(&row.state)?,
            row.revision,
            ended
        ],
    )?;
    Ok(())
}

/// Every Mission that ended: (Mission, Group, when it ended).
pub(crate) fn ended(
    conn: &Connection,
) -> Result<Vec<(Id, Id, chrono::DateTime<chrono::Utc>)>, Error> {
    conn.rows(
        "SELECT mission_id, group_id, ended_at FROM missions WHERE ended_at IS NOT NULL
         ORDER BY ended_at, mission_id",
        [],
        |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
            ))
        },
    )?
    .into_iter()
    .map(|(mission, group, ended)| {
        Ok((
            id("missionId", &mission)?,
            id("groupId", &group)?,
            super::instant(&ended)?,
        ))
    })
    .collect()
}

/// When Mission `id` ended: `Ok(None)` while it is live (or for no such Mission).
pub(crate) fn ended_at(
    conn: &Connection,
    id: &str,
) -> Result<Option<chrono::DateTime<chrono::Utc>>, Error> {
    let ended: Option<Option<String>> = conn
        .row(
            "SELECT ended_at FROM missions WHERE mission_id = ?1",
            [id],
            |row| row.get(0),
        )
        .optional()?;
    ended.flatten().as_deref().map(super::instant).transpose()
}

/// Whether a Mission `id` exists (ids are unique in the whole store, DESIGN §10).
pub(crate) fn exists(conn: &Connection, id: &str) -> Result<bool, Error> {
    Ok(conn
        .row("SELECT 1 FROM missions WHERE mission_id = ?1", [id], |_| {
            Ok(())
        })
        .optional()?
        .is_some())
}

/// The Group of Mission `id`, if it exists.
pub(crate) fn group_of(conn: &Connection, id: &str) -> Result<Option<String>, Error> {
    Ok(conn
        .row(
            "SELECT group_id FROM missions WHERE mission_id = ?1",
            [id],
            |row| row.get(0),
        )
        .optional()?)
}

/// A Group's Missions, newest first: a seek of `missions_group`.
pub(crate) const GROUP_NEWEST_FIRST: &str =
    "SELECT mission_id FROM missions WHERE group_id = ?1 ORDER BY created_sequence DESC";

/// The ids of Group `group`'s Missions (every Group's for `None`, the operator's), newest
/// first. Two statements: one `(?1 IS NULL OR group_id = ?1)` read and sorted every Group's
/// Missions for a member's console (stop 69).
pub(crate) fn ids_newest_first(
    conn: &Connection,
    group: Option<&str>,
) -> Result<Vec<String>, Error> {
    let id = |row: &crate::sql::Row<'_>| row.get::<_, String>(0);
    Ok(match group {
        Some(group) => conn.rows(GROUP_NEWEST_FIRST, [group], id)?,
        None => conn.rows(
            "SELECT mission_id FROM missions ORDER BY created_sequence DESC",
            [],
            id,
        )?,
    })
}

/// Each Mission of Group `group_id` with its state, by id (fsck).
pub(crate) fn states_of_group(
    conn: &Connection,
    group_id: &str,
) -> Result<Vec<(String, String)>, Error> {
    let missions = conn.rows(
        "SELECT mission_id, state FROM missions WHERE group_id = ?1 ORDER BY mission_id",
        [group_id],
        |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
    )?;
    Ok(missions)
}

/// What Mission `id` has spent so far.
pub(crate) fn spent(conn: &Connection, id: &str) -> Result<Budgets, Error> {
    let text: String = conn.row(
        "SELECT spent FROM missions WHERE mission_id = ?1",
        [id],
        |r| r.get(0),
    )?;
    from_json(&text)
}

/// Sets what Mission `id` has spent.
pub(crate) fn set_spent(conn: &Connection, id: &str, spent: &Budgets) -> Result<(), Error> {
    conn.run(
        "UPDATE missions SET spent = ?2 WHERE mission_id = ?1",
        params![id, to_json(spent)?],
    )?;
    Ok(())
}

/// Each Mission of Group `group_id` with what it has spent, by id (fsck).
pub(crate) fn spent_of_group(
    conn: &Connection,
    group_id: &str,
) -> Result<Vec<(String, Budgets)>, Error> {
    let rows = conn.rows(
        "SELECT mission_id, spent FROM missions WHERE group_id = ?1 ORDER BY 1",
        [group_id],
        |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
    )?;
    rows.into_iter()
        .map(|(id, spent)| Ok((id, from_json(&spent)?)))
        .collect()
}
