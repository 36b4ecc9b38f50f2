//! The `work_items` table: the only SQL that names it, and its row [`WorkRow`].
//!
//! The row is typed: ids as `Id`, the ownership deadline as an instant compared as time,
//! its state and contract parsed; a stored value that does not parse is a corrupt row.
//!
//! Queries over the WorkItems of a Mission that join their dependency edges (`work_deps`) are
//! here too, since they are about WorkItems; `work::deps` keeps the dependency rule (DEP-3)
//! and the edges' own rows. Long (about 620 lines) because every read of the row is here, in
//! each form its readers need (by id, seen by a reader, sent ahead, listed, by deadline).

use crate::sql::{Ahead, Connection, OptionalExtension as _, params};
use chrono::{DateTime, Utc};
use weft_api::Id;
use weft_api::work::contract::Budgets;
use weft_api::work::machine::WorkState;

use super::work_contract::Contract;
use super::{from_json, id, instant, name, parse_name, to_json};
use crate::clock::format_instant;
use crate::error::Error;
use crate::sql::Cached as _;
use crate::unit::Conn;
use crate::unit::Tx;

/// A `work_items` row.
#[derive(Clone, Debug)]
pub(crate) struct WorkRow {
    pub(crate) work_item_id: Id,
    pub(crate) group_id: Id,
    pub(crate) mission_id: Id,
    pub(crate) state: WorkState,
    pub(crate) revision: u64,
    pub(crate) contract_revision: u64,
    pub(crate) contract: Contract,
    pub(crate) owner: Option<Id>,
    pub(crate) ownership_epoch: u64,
    /// Until when the owner holds it (SM-6), compared as an instant.
    pub(crate) ownership_expires_at: Option<DateTime<Utc>>,
    pub(crate) approval_granted: bool,
    pub(crate) child_mission_id: Option<Id>,
    pub(crate) attempts: u32,
}

impl WorkRow {
    /// An owner holds an unexpired ownership at `now` (SM-6).
    pub(crate) fn live_owner(&self, now: DateTime<Utc>) -> bool {
        self.owner.is_some() && self.ownership_expires_at.is_some_and(|at| at > now)
    }
}

/// Holds the lock of WorkItem `id`'s Group (`groups::lock`), before its row is loaded: on
/// PostgreSQL, where another server may change it at the same time (nothing on SQLite). Its
/// Group never changes: read once per job ([`in_group_order`] reads several at once).
pub(crate) fn lock_group(conn: &impl Conn, id: &str) -> Result<(), Error> {
    if conn.conn().engine() != crate::sql::Engine::Postgres {
        return Ok(());
    }
    let read = || -> Result<Option<String>, Error> { group_of(conn.conn(), id)?.get(conn.conn()) };
    let group = match conn.memo() {
        Some(memo) => memo.load("work_items.group", id, read)?,
        None => read()?,
    };
    match group {
        Some(group) => super::groups::lock(conn, &group),
        None => Ok(()),
    }
}

/// WorkItem `id`'s Group, sent ahead (`sql/ahead.rs`).
fn group_of(conn: &Connection, id: &str) -> Result<Ahead<Option<String>, Error>, Error> {
    let rows = conn.rows_ahead(
        "SELECT group_id FROM work_items WHERE work_item_id = ?1",
        [id],
        |row| row.get::<_, String>(0),
    )?;
    Ok(rows.then(|rows: Vec<String>| Ok::<_, Error>(rows.into_iter().next())))
}

/// `ids` in the order of their Groups' locks (PostgreSQL; as given on SQLite), for a job that
/// locks the Groups of several WorkItems: every writer takes Group locks in one order
/// (`db/writer.rs`), so none waits on another in a circle. An unknown id goes last. Their
/// Groups are read together (one round trip) and remembered for [`lock_group`].
pub(crate) fn in_group_order(conn: &impl Conn, ids: Vec<String>) -> Result<Vec<String>, Error> {
    if conn.conn().engine() != crate::sql::Engine::Postgres {
        return Ok(ids);
    }
    let sent = ids
        .iter()
        .map(|id| group_of(conn.conn(), id))
        .collect::<Result<Vec<_>, Error>>()?;
    let mut placed = Vec::with_capacity(ids.len());
    for (id, group) in ids.into_iter().zip(sent) {
        let group = group.get(conn.conn())?;
        if let Some(memo) = conn.memo() {
            memo.remember("work_items.group", &id, group.clone());
        }
        placed.push((group.is_none(), group, id));
    }
    placed.sort();
    Ok(placed.into_iter().map(|(_, _, id)| id).collect())
}

/// A WorkItem's row by its id, in [`Raw`]'s order.
const LOAD: &str = "SELECT work_item_id, group_id, mission_id, state, revision, contract_revision,
        contract, owner, ownership_epoch, ownership_expires_at, approval_granted,
        child_mission_id, attempts FROM work_items WHERE work_item_id = ?1";

/// The WorkItem `id`, if there is one.
pub(crate) fn load(conn: &Connection, id: &str) -> Result<Option<WorkRow>, Error> {
    load_by(conn, LOAD, params![id])
}

/// [`load`], sent ahead (`sql/ahead.rs`), as a Command does with its lookup (`command.rs`).
pub(crate) fn load_ahead(
    conn: &Connection,
    id: &str,
) -> Result<Ahead<Option<WorkRow>, Error>, Error> {
    let rows = conn.rows_ahead(LOAD, params![id], raw)?;
    Ok(rows.then(|rows: Vec<Raw>| rows.into_iter().next().map(parse).transpose()))
}

/// What a connection remembers of each WorkItem's Mission (`Connection::learn`): a WorkItem
/// never changes Mission, and is never deleted.
const MISSION_OF: &str = "work_items.mission";

/// The Mission of WorkItem `id`, if this connection read the WorkItem before: a guess its
/// reader checks against the row (`work/command.rs`). Never on SQLite, where a read costs no
/// round trip: the Mission is read where it is used.
pub(crate) fn mission_known(conn: &Connection, id: &str) -> Option<String> {
    if conn.engine() == crate::sql::Engine::Sqlite {
        return None;
    }
    conn.known(MISSION_OF, id)
}

/// This connection read WorkItem `id` of Mission `mission_id`: its Mission is known from now
/// on ([`mission_known`]).
pub(crate) fn learn_mission(conn: &Connection, id: &str, mission_id: &str) {
    conn.learn(MISSION_OF, id, mission_id);
}

/// The WorkItem `id` if a reader of Group `group` (and, for a scoped member, of the Missions
/// in the JSON array `missions`) may see it; `None` for both means the operator. Visibility
/// is decided by the lookup itself (issue #40), so another Group's or another Mission's row
/// is never decoded (nor its contract parsed) and costs what an absent one costs: the
/// scope's Missions drive the lookup (`json_each … CROSS JOIN`, one seek per Mission whether
/// the id exists or not) rather than an `IN` list SQLite would build only once a row was
/// found, and each seek filters on the index entry (`INDEXED BY`, schema V25) before the row
/// is read.
pub(crate) fn load_seen(
    conn: &Connection,
    id: &str,
    seer: &super::Seer<'_>,
) -> Result<Option<WorkRow>, Error> {
    let (group, missions) = seer.filter();
    load_by(
        conn,
        "SELECT work_item_id, group_id, mission_id, state, revision, contract_revision, contract,
                owner, ownership_epoch, ownership_expires_at, approval_granted, child_mission_id, attempts
         FROM json_each(coalesce(?3, '[null]')) scope CROSS JOIN work_items INDEXED BY work_items_seen
         WHERE work_item_id = ?1 AND (?2 IS NULL OR group_id = ?2)
         AND (?3 IS NULL OR mission_id = scope.value)",
        params![id, group, missions],
    )
}

fn load_by(
    conn: &Connection,
    sql: &str,
    params: impl crate::sql::Params,
) -> Result<Option<WorkRow>, Error> {
    conn.row(sql, params, raw)
        .optional()?
        .map(parse)
        .transpose()
}

type Raw = (
    (String, String, String),
    (String, u64, u64, String),
    (Option<String>, u64, Option<String>),
    (bool, Option<String>, u32),
);

fn raw(row: &crate::sql::Row<'_>) -> crate::sql::Result<Raw> {
    Ok((
        (
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, String>(2)?,
        ),
        (
            row.get::<_, String>(3)?,
            row.get::<_, u64>(4)?,
            row.get::<_, u64>(5)?,
            row.get::<_, String>(6)?,
        ),
        (
            row.get::<_, Option<String>>(7)?,
            row.get::<_, u64>(8)?,
            row.get::<_, Option<String>>(9)?,
        ),
        (
            row.get::<_, bool>(10)?,
            row.get::<_, Option<String>>(11)?,
            row.get::<_, u32>(12)?,
        ),
    ))
}

fn parse(
    (
        (work_item_id, group_id, mission_id),
        (state, revision, contract_revision, contract),
        (owner, ownership_epoch, ownership_expires_at),
        (approval_granted, child_mission_id, attempts),
    ): Raw,
) -> Result<WorkRow, Error> {
    let contract = Contract::read(&work_item_id, contract)?;
    Ok(WorkRow {
        work_item_id: id("workItemId", &work_item_id)?,
        group_id: id("groupId", &group_id)?,
        mission_id: id("missionId", &mission_id)?,
        state: parse_name(&state)?,
        revision,
        contract_revision,
        contract,
        owner: owner.map(|owner| id("agentId", &owner)).transpose()?,
        ownership_epoch,
        ownership_expires_at: ownership_expires_at.map(|at| instant(&at)).transpose()?,
        approval_granted,
        child_mission_id: child_mission_id
            .map(|child| id("missionId", &child))
            .transpose()?,
        attempts,
    })
}

/// A new WorkItem as `work.authorize` makes it (T2: `open`, no owner, nothing spent).
pub(crate) fn insert(conn: &Connection, row: &WorkRow) -> Result<(), Error> {
    conn.run(
        "INSERT INTO work_items (work_item_id, group_id, mission_id, state, revision, contract_revision, contract,
                                 ownership_epoch, approval_granted, attempts)
         VALUES (?1, ?2, ?3, 'open', 0, 1, ?4, 0, 0, 0)",
        params![
            row.work_item_id.as_str(),
            row.group_id.as_str(),
            row.mission_id.as_str(),
            &*row.contract.text()?
        ],
    )?;
    Ok(())
}

/// Writes `row` as it is, in any state (tests seed WorkItems this way, without the Commands
/// that would bring them there).
#[cfg(test)]
pub(crate) fn seed(conn: &Connection, row: &WorkRow) -> Result<(), Error> {
    insert(conn, row)?;
    save(&crate::unit::Tx::over(conn), row)
}

/// A valid contract for tests, whose objective is `objective` (its length is the contract's).
#[cfg(test)]
pub(crate) fn sample_contract(objective: &str) -> weft_api::work::contract::WorkContract {
    serde_json::from_value(serde_json::json!({
        "objective": objective, "deliverables": [], "acceptanceCriteria": [],
        "inputs": [], "dependsOn": [], "permissions": {"tools": [], "data": [], "operations": []},
        "requiredCapabilities": [], "deadline": "2099-12-31T00:00:00Z", "urgency": "normal",
        "businessImpact": "medium",
        "budgets": {"financial": 1.0, "tokens": 1, "toolCalls": 1, "computeSeconds": 1,
                    "wallClockSeconds": 1, "sideEffects": 1},
        "retryPolicy": {"maxAttempts": 1, "backoffSeconds": 1, "deadline": null, "maxCost": 1.0},
        "risk": "low", "approvalRequired": false,
        "leases": {"offerSeconds": 1, "ownershipSeconds": 1, "executionSeconds": 1,
                   "blockedSeconds": 1, "graceSeconds": 1},
        "childFailurePolicy": "block"
    }))
    .expect("a valid contract")
}

/// A WorkItem row for tests to [`seed`]: `state`, no owner, revision 1, under `contract`.
#[cfg(test)]
pub(crate) fn sample(
    work_item_id: &str,
    group_id: &str,
    mission_id: &str,
    state: WorkState,
    contract: weft_api::work::contract::WorkContract,
) -> WorkRow {
    let id = |what: &str, text: &str| Id::parse(what, text).expect("a valid id");
    WorkRow {
        work_item_id: id("workItemId", work_item_id),
        group_id: id("groupId", group_id),
        mission_id: id("missionId", mission_id),
        state,
        revision: 1,
        contract_revision: 1,
        contract: Contract::new(contract),
        owner: None,
        ownership_epoch: 0,
        ownership_expires_at: None,
        approval_granted: false,
        child_mission_id: None,
        attempts: 0,
    }
}

/// Writes every mutable column of `row`.
pub(crate) fn save(tx: &Tx<'_>, row: &WorkRow) -> Result<(), Error> {
    tx.run_later(
        "UPDATE work_items SET state = ?2, revision = ?3, contract_revision = ?4, contract = ?5, owner = ?6,
                ownership_epoch = ?7, ownership_expires_at = ?8, approval_granted = ?9, child_mission_id = ?10,
                attempts = ?11
         WHERE work_item_id = ?1",
        params![
            row.work_item_id.as_str(),
            name(&row.state)?,
            row.revision,
            row.contract_revision,
            &*row.contract.text()?,
            row.owner.as_deref(),
            row.ownership_epoch,
            row.ownership_expires_at.map(format_instant),
            row.approval_granted,
            row.child_mission_id.as_deref(),
            row.attempts
        ],
    )?;
    // Its dependents see its new state in what the job remembers.
    tx.loaded()
        .update::<Vec<(String, Option<WorkState>)>>(DEPENDENCY_STATES, |states| {
            for (id, state) in states.iter_mut() {
                if row.work_item_id == *id {
                    *state = Some(row.state);
                }
            }
        });
    Ok(())
}

/// Whether a WorkItem `id` exists.
pub(crate) fn exists(conn: &Connection, id: &str) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM work_items WHERE work_item_id = ?1",
            [id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// Where WorkItem `id` lives (Group, Mission), without parsing its contract: every
/// publication asks.
pub(crate) fn place(conn: &Connection, id: &str) -> Result<Option<(String, String)>, Error> {
    Ok(conn
        .row(
            "SELECT group_id, mission_id FROM work_items WHERE work_item_id = ?1",
            [id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?)
}

/// Where WorkItem `id` lives (Group, Mission) and who owns it under which epoch, in one
/// read: a publication's and an Evidence record's checks (`access::require_work_item`).
pub(crate) type Placed = (String, String, Option<String>, u64);

pub(crate) fn place_and_ownership(conn: &Connection, id: &str) -> Result<Option<Placed>, Error> {
    Ok(conn
        .row(PLACE, [id], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .optional()?)
}

const PLACE: &str =
    "SELECT group_id, mission_id, owner, ownership_epoch FROM work_items WHERE work_item_id = ?1";

/// [`place_and_ownership`], sent ahead (`sql/ahead.rs`): a publication sends it with its
/// first reads (`artifacts/publish.rs`).
pub(crate) fn place_and_ownership_ahead(
    conn: &Connection,
    id: &str,
) -> Result<Ahead<Option<Placed>, Error>, Error> {
    let rows = conn.rows_ahead(PLACE, [id], |row| {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
    })?;
    Ok(rows.then(|rows: Vec<Placed>| Ok::<_, Error>(rows.into_iter().next())))
}

/// The owner of WorkItem `id` in Group `group_id`, if it exists there and has one.
pub(crate) fn owner_in(
    conn: &Connection,
    id: &str,
    group_id: &str,
) -> Result<Option<String>, Error> {
    Ok(conn
        .row(
            "SELECT owner FROM work_items WHERE work_item_id = ?1 AND group_id = ?2",
            [id, group_id],
            |row| row.get(0),
        )
        .optional()?
        .flatten())
}

/// What WorkItem `id` has spent so far.
pub(crate) fn spent(conn: &Connection, id: &str) -> Result<Budgets, Error> {
    spent_ahead(conn, id)?.get(conn)
}

/// [`spent`], sent ahead of its use (`sql/ahead.rs`).
pub(crate) fn spent_ahead(conn: &Connection, id: &str) -> Result<Ahead<Budgets, Error>, Error> {
    let text = conn.rows_ahead(
        "SELECT spent FROM work_items WHERE work_item_id = ?1",
        [id],
        |r| r.get::<_, String>(0),
    )?;
    Ok(text.then(|texts: Vec<String>| match texts.first() {
        Some(text) => from_json(text),
        None => Err(crate::sql::SqlError::NoRows.into()),
    }))
}

/// Sets what WorkItem `id` has spent.
pub(crate) fn set_spent(conn: &Connection, id: &str, spent: &Budgets) -> Result<(), Error> {
    conn.run(
        "UPDATE work_items SET spent = ?2 WHERE work_item_id = ?1",
        params![id, to_json(spent)?],
    )?;
    Ok(())
}

/// Each WorkItem of Group `group_id` with what it has spent, by id (fsck).
pub(crate) fn spent_of_group(
    conn: &Connection,
    group_id: &str,
) -> Result<Vec<(String, Budgets)>, Error> {
    let rows = conn.rows(
        "SELECT work_item_id, spent FROM work_items WHERE group_id = ?1 ORDER BY 1",
        [group_id],
        |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
    )?;
    rows.into_iter()
        .map(|(id, spent)| Ok((id, from_json(&spent)?)))
        .collect()
}

fn ids(conn: &Connection, sql: &str, key: &str) -> Result<Vec<String>, Error> {
    let ids = conn.rows(sql, [key], |r| r.get::<_, String>(0))?;
    Ok(ids)
}

/// The ids of Group `group_id`'s WorkItems, in order.
pub(crate) fn ids_of_group(conn: &Connection, group_id: &str) -> Result<Vec<String>, Error> {
    ids(
        conn,
        "SELECT work_item_id FROM work_items WHERE group_id = ?1 ORDER BY work_item_id",
        group_id,
    )
}

/// The ids of Mission `mission_id`'s WorkItems, in order.
pub(crate) fn ids_of_mission(conn: &Connection, mission_id: &str) -> Result<Vec<String>, Error> {
    ids(
        conn,
        "SELECT work_item_id FROM work_items WHERE mission_id = ?1 ORDER BY work_item_id",
        mission_id,
    )
}

/// The Mission's WorkItems that are still live (at most ten, in id order).
pub(crate) fn live_of_mission(conn: &Connection, mission_id: &str) -> Result<Vec<String>, Error> {
    ids(
        conn,
        "SELECT work_item_id FROM work_items
         WHERE mission_id = ?1 AND state IN ('open', 'offered', 'queued', 'active', 'blocked', 'submitted')
         ORDER BY work_item_id LIMIT 10",
        mission_id,
    )
}

/// The Mission's `verified` WorkItems (at most 100, in id order).
pub(crate) fn verified_of_mission(
    conn: &Connection,
    mission_id: &str,
) -> Result<Vec<String>, Error> {
    ids(
        conn,
        "SELECT work_item_id FROM work_items WHERE mission_id = ?1 AND state = 'verified'
         ORDER BY work_item_id LIMIT 100",
        mission_id,
    )
}

/// The ownership deadline and id of every owned `queued` or `blocked` WorkItem (the
/// deadlines loaded at open).
pub(crate) fn ownership_deadlines(
    conn: &Connection,
) -> Result<Vec<(DateTime<Utc>, String)>, Error> {
    let found = conn.rows(
        "SELECT ownership_expires_at, work_item_id FROM work_items
         WHERE owner IS NOT NULL AND ownership_expires_at IS NOT NULL
               AND state IN ('queued', 'blocked')",
        [],
        |r| Ok((r.get::<_, String>(0)?, r.get(1)?)),
    )?;
    found
        .into_iter()
        .map(|(at, work_item_id)| Ok((instant(&at)?, work_item_id)))
        .collect()
}

/// What the job's memo remembers a WorkItem's dependencies under.
const DEPENDENCY_STATES: &str = "work_items.dependency_states";

/// `work_item_id`'s dependency edges, by the id they name, each with that WorkItem's state
/// (`None`: an edge naming no WorkItem), in one read loaded once per writer job (`unit.rs`):
/// a saved WorkItem updates what is remembered of it, and new edges (`work_deps::set`)
/// forget it. A WorkItem's view lists the ids and its eligibility reads the states.
pub(crate) fn dependencies(
    c: &(impl Conn + ?Sized),
    work_item_id: &str,
) -> Result<Vec<(String, Option<WorkState>)>, Error> {
    match c.memo() {
        Some(memo) => memo.load(DEPENDENCY_STATES, work_item_id, || {
            read_dependencies(c.conn(), work_item_id)
        }),
        None => read_dependencies(c.conn(), work_item_id),
    }
}

/// The states of the WorkItems `work_item_id` depends on (an edge naming none is skipped).
pub(crate) fn dependency_states(
    c: &(impl Conn + ?Sized),
    work_item_id: &str,
) -> Result<Vec<WorkState>, Error> {
    Ok(dependencies(c, work_item_id)?
        .into_iter()
        .filter_map(|(_, state)| state)
        .collect())
}

/// Forgets what the job remembers of `work_item_id`'s dependencies (its edges changed).
pub(crate) fn forget_dependencies(tx: &Tx<'_>, work_item_id: &str) {
    tx.loaded().forget(DEPENDENCY_STATES, work_item_id);
}

fn read_dependencies(
    conn: &Connection,
    work_item_id: &str,
) -> Result<Vec<(String, Option<WorkState>)>, Error> {
    let states = conn.rows(
        "SELECT d.depends_on, w.state FROM work_deps d
         LEFT JOIN work_items w ON w.work_item_id = d.depends_on
         WHERE d.work_item_id = ?1 ORDER BY d.depends_on",
        [work_item_id],
        |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?)),
    )?;
    states
        .into_iter()
        .map(|(id, state)| Ok((id, state.as_deref().map(parse_name).transpose()?)))
        .collect()
}

/// The dependency edges `(from, to)` of Mission `mission_id`'s WorkItems, in order.
pub(crate) fn mission_edges(
    conn: &Connection,
    mission_id: &str,
) -> Result<Vec<(String, String)>, Error> {
    let edges = conn.rows(
        "SELECT d.work_item_id, d.depends_on FROM work_deps d
         JOIN work_items w ON w.work_item_id = d.work_item_id
         WHERE w.mission_id = ?1 ORDER BY d.work_item_id, d.depends_on",
        [mission_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(edges)
}

/// The dependency edges of Mission `mission_id`'s WorkItems but `except`'s, unordered.
pub(crate) fn other_edges(
    conn: &Connection,
    mission_id: &str,
    except: &str,
) -> Result<Vec<(String, String)>, Error> {
    let edges = conn.rows(
        "SELECT d.work_item_id, d.depends_on FROM work_deps d
         JOIN work_items w ON w.work_item_id = d.work_item_id
         WHERE w.mission_id = ?1 AND d.work_item_id != ?2",
        params![mission_id, except],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(edges)
}

/// One row of [`mission_nodes`], borrowed from the statement: a WorkItem, its state, its
/// contract's `dependencyPolicy` (absent: the default), and the state of one of its
/// dependencies (none: no dependency).
pub(crate) struct NodeRow<'r> {
    pub(crate) work_item_id: &'r str,
    pub(crate) state: &'r str,
    pub(crate) policy: Option<&'r str>,
    pub(crate) dependency: Option<&'r str>,
}

/// Every WorkItem of a Mission joined with its dependencies' states, by id, in ONE query
/// (the policy read by SQLite, `json_extract`, instead of parsing every contract; DEP-3's
/// rule over it is `work::deps::mission_nodes`). The rows of one WorkItem are adjacent; each
/// is handed to `each` as the statement steps, nothing copied (a Mission of 1,001 WorkItems
/// is a read on the graph benchmark's hot path).
pub(crate) fn mission_nodes(
    conn: &Connection,
    mission_id: &str,
    mut each: impl FnMut(NodeRow<'_>) -> Result<(), Error>,
) -> Result<(), Error> {
    conn.each(
        "SELECT w.work_item_id, w.state, json_extract(w.contract, '$.dependencyPolicy'), x.state
         FROM work_items w
         LEFT JOIN work_deps d ON d.work_item_id = w.work_item_id
         LEFT JOIN work_items x ON x.work_item_id = d.depends_on
         WHERE w.mission_id = ?1
         ORDER BY w.work_item_id",
        [mission_id],
        |r| {
            each(NodeRow {
                work_item_id: r.text(0)?.unwrap_or_default(),
                state: r.text(1)?.unwrap_or_default(),
                policy: r.text(2)?,
                dependency: r.text(3)?,
            })
        },
    )
}
