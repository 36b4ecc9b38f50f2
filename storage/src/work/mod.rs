//! Missions and WorkItems (DESIGN §10): the projection rows of their Events and the reads
//! over them. `command.rs` runs a Command (checks in DESIGN §10's order, then the pure table
//! of `weft_api::work::machine`), `apply.rs` turns an accepted Command into row changes and
//! Events in the one writer transaction, delegating to each Command's file in `commands/`
//! (`ctx.rs` holds what every effect is made of), `deps.rs` keeps each Mission's dependency DAG
//! (petgraph) and eligibility, `owner.rs` the owner's Commands while it executes (lease
//! renewal, progress, preemption requests) and the retry policy at `work.start`, `budget.rs`
//! the budget lineage and its spend (CON-1.7, OFL-12), `offline.rs` the judgement of a
//! buffered Command's binding against its lease record (OFL-9).
//! Just over 600 lines (why: the rows, every view and fsck's projection check share their row types).
//!
//! **Invariant:** every row change here is made in the transaction that appends the Event
//! describing it (a `WorkEvent` carrying the state after it), so `GroupState` folded from
//! the log agrees with these rows (fsck compares them).

pub(crate) mod answer;
mod apply;
mod budget;
mod caps;
mod checks;
mod child;
mod command;
mod commands;
mod ctx;
mod deps;
pub(crate) mod expiry;
pub(crate) mod handle;
mod inert;
mod listing;
mod missions;
mod offline;
mod owner;
mod questions;
mod timer;
pub(crate) mod tokens;
#[cfg(test)]
mod visibility_tests;

use crate::sql::Connection;
use chrono::{DateTime, Utc};
use weft_api::work::machine::MissionState;
use weft_api::work::views::{
    BudgetView, Lease, MissionView, OfferView, Owner, WorkEdge, WorkGraph, WorkItemView, WorkNode,
};
use weft_api::{ErrorCode, Id};

use crate::access::Reader;
use crate::clock::format_instant;
use crate::error::{Error, reject};
use crate::rows::offers::SHOWN as SHOWN_OFFERS;
use crate::rows::{leases, work_items};
use crate::unit::Conn;
use crate::work::handle::Work;

pub(crate) use crate::rows::missions::MissionRow;
pub(crate) use crate::rows::work_items::WorkRow;
pub(crate) use crate::rows::{name, parse_name};
// A Mission's or WorkItem's row by id, whoever asks: the rows' own loads, under the names
// every Command file uses.
pub(crate) use crate::rows::missions::load as load_mission;
pub(crate) use crate::rows::work_items::load as load_work_item;

fn work_item_where(conn: &Connection, id: &str, reader: &Reader) -> Result<Option<WorkRow>, Error> {
    work_items::load_seen(conn, id, &reader.seer())
}

fn mission_where(
    conn: &Connection,
    id: &str,
    reader: &Reader,
) -> Result<Option<MissionRow>, Error> {
    crate::rows::missions::load_seen(conn, id, &reader.seer())
}

/// The WorkItem as the reader may see it: another Group's, or another Mission's for a
/// Mission-scoped member (CTX-5), is unknown.
fn visible_work_item(conn: &Connection, reader: &Reader, id: &str) -> Result<WorkRow, Error> {
    match work_item_where(conn, id, reader)? {
        Some(row) => Ok(row),
        _ => Err(reject(
            ErrorCode::UnknownWorkItem,
            format!("no WorkItem {id} is visible to you"),
        )),
    }
}

fn visible_mission(conn: &Connection, reader: &Reader, id: &str) -> Result<MissionRow, Error> {
    match mission_where(conn, id, reader)? {
        Some(row) => Ok(row),
        _ => Err(reject(
            ErrorCode::NotFound,
            format!("no Mission {id} is visible to you"),
        )),
    }
}

/// The view of lease `row` with its newest renewals (`RENEWALS_SHOWN` + 1 read, to know
/// whether there are older ones).
fn lease_view(row: &leases::Lease, mut renewals: Vec<String>) -> Lease {
    let renewals_truncated = renewals.len() as u64 > RENEWALS_SHOWN;
    if renewals_truncated {
        renewals.remove(0);
    }
    Lease {
        lease_id: row.lease_id.to_string(),
        kind: row.kind.as_str().to_owned(),
        agent_id: row.agent_id.to_string(),
        session_epoch: row.session_epoch,
        work_item_id: row.work_item_id.to_string(),
        ownership_epoch: row.ownership_epoch,
        started_at: format_instant(row.started_at),
        renewals,
        renewals_truncated,
        expires_at: format_instant(row.expires_at),
    }
}

/// The newest [`SHOWN_OFFERS`] offers of a WorkItem, oldest first, and whether there are
/// older ones (a new offer withdraws the live ones, T3, so the live offer is among them).
fn offers(
    mut rows: Vec<crate::rows::offers::OfferRow>,
    now: DateTime<Utc>,
) -> Result<(Vec<OfferView>, bool), Error> {
    let truncated = rows.len() as u64 > SHOWN_OFFERS;
    if truncated {
        rows.remove(0);
    }
    let views = rows
        .into_iter()
        .map(|offer| {
            Ok(OfferView {
                status: offer.shown_status(now).to_owned(),
                expires_at: offer.expires_at_text(),
                offer_id: offer.offer_id,
                candidates: offer.candidates,
                contract_revision: offer.contract_revision,
                selection_basis: offer.selection_basis,
                declined: offer.declined,
            })
        })
        .collect::<Result<_, Error>>()?;
    Ok((views, truncated))
}

/// How many of a lease's newest renewals its view lists (the rows file keeps no more).
pub(crate) const RENEWALS_SHOWN: u64 = crate::rows::lease_renewals::SHOWN;

/// How many of a WorkItem's newest Event sequences its view lists (`historyTruncated` says
/// whether there are older ones).
pub(crate) const HISTORY_SHOWN: u64 = 64;

/// The full view of a WorkItem (its answer to a Command and to `GET /v1/workitems/{id}`).
pub(crate) fn work_view(
    c: &(impl Conn + ?Sized),
    row: &WorkRow,
    now: DateTime<Utc>,
) -> Result<WorkItemView, Error> {
    let conn = c.conn();
    let id = row.work_item_id.as_str();
    // Its reads are sent together, then read: on PostgreSQL one round trip for all of them
    // (`sql/ahead.rs`); the lease, the dependencies and the progress often come from what
    // the job remembers.
    // The newest HISTORY_SHOWN sequences (one more read to know whether there are older
    // ones): every Command answers this view and stores the answer, so a whole history (or
    // even counting it) made each Command cost its WorkItem's age; a reconciled 10,000-Command
    // journal grew to gigabytes. The log holds all of it.
    let history = crate::rows::work_history::newest(conn, id, HISTORY_SHOWN + 1)?;
    let offer_rows = crate::rows::offers::newest(conn, id, SHOWN_OFFERS + 1)?;
    let inert = inert::newest(conn, id)?;
    let spent = work_items::spent_ahead(conn, id)?;
    let questions = questions::view(conn, id, &format_instant(now))?;
    let current = leases::current(c, id)?;
    let renewals = current
        .as_ref()
        .map(|lease| {
            crate::rows::lease_renewals::newest(conn, lease.lease_id.as_str(), RENEWALS_SHOWN + 1)
        })
        .transpose()?;
    // One read of the edges and their states: the ids listed, the states for DEP-3.
    let dependencies = work_items::dependencies(c, id)?;
    let progress = crate::rows::work_progress::latest(c, id)?;
    let mut history = history.get(conn)?;
    let history_truncated = history.len() as u64 > HISTORY_SHOWN;
    history.truncate(HISTORY_SHOWN as usize);
    history.reverse();
    let owner = row.owner.as_ref().map(|agent_id| Owner {
        agent_id: agent_id.to_string(),
        ownership_epoch: row.ownership_epoch,
        expires_at: row.ownership_expires_at.map(format_instant),
    });
    let (offers, offers_truncated) = offers(offer_rows.get(conn)?, now)?;
    let (inert_publications, inert_publications_truncated) = inert.get(conn)?;
    let (lease, preemption_requested) = match (current, renewals) {
        (Some(lease), Some(renewals)) => {
            let view = lease_view(&lease, renewals.get(conn)?);
            (Some(view), owner::preemption(&lease))
        }
        _ => (None, None),
    };
    Ok(WorkItemView {
        work_item_id: row.work_item_id.to_string(),
        group_id: row.group_id.to_string(),
        mission_id: row.mission_id.to_string(),
        state: row.state,
        revision: row.revision,
        contract_revision: row.contract_revision,
        contract: (*row.contract).clone(),
        owner,
        lease,
        offers,
        offers_truncated,
        eligible: deps::satisfied(row, dependencies.iter().filter_map(|(_, state)| *state)),
        depends_on: dependencies.into_iter().map(|(id, _)| id).collect(),
        approval_granted: row.approval_granted,
        child_mission_id: row.child_mission_id.as_ref().map(ToString::to_string),
        budget: BudgetView {
            limit: row.contract.budgets.clone(),
            spent: spent.get(conn)?,
        },
        attempts: row.attempts,
        attempt_key: owner::attempt_key(row)?,
        progress,
        preemption_requested,
        questions: questions.get(conn)?,
        inert_publications,
        inert_publications_truncated,
        history,
        history_truncated,
    })
}

fn nodes(conn: &Connection, mission_id: &str) -> Result<Vec<WorkNode>, Error> {
    deps::mission_nodes(conn, mission_id)
}

pub(crate) fn mission_view(conn: &Connection, row: &MissionRow) -> Result<MissionView, Error> {
    Ok(MissionView {
        mission_id: row.mission_id.to_string(),
        group_id: row.group_id.to_string(),
        title: row.title.clone(),
        priority_class: row.priority_class,
        state: row.state,
        revision: row.revision,
        budget: BudgetView {
            limit: row.budget.clone(),
            spent: crate::rows::missions::spent(conn, &row.mission_id)?,
        },
        parent_work_item_id: row.parent_work_item_id.as_ref().map(ToString::to_string),
        work_items: nodes(conn, &row.mission_id)?,
    })
}

/// Where the Mission and WorkItem rows of `group_id` differ from `folded`, the fold of the
/// Group's log (fsck).
pub(crate) fn check_projection(
    conn: &Connection,
    group_id: &str,
    folded: &weft_api::work::events::WorkProjection,
) -> Result<Vec<String>, Error> {
    let mut problems = Vec::new();
    let missions = crate::rows::missions::states_of_group(conn, group_id)?;
    if missions.len() != folded.missions.len() {
        problems.push(format!(
            "group {group_id}: {} Missions in the index, {} in the log",
            missions.len(),
            folded.missions.len()
        ));
    }
    for (mission_id, state) in missions {
        let state: MissionState = parse_name(&state)?;
        if folded.missions.get(&mission_id) != Some(&state) {
            problems.push(format!(
                "group {group_id}: Mission {mission_id} is {state:?} in the index, {:?} in the log",
                folded.missions.get(&mission_id)
            ));
        }
    }
    let ids = work_items::ids_of_group(conn, group_id)?;
    if ids.len() != folded.work_items.len() {
        problems.push(format!(
            "group {group_id}: {} WorkItems in the index, {} in the log",
            ids.len(),
            folded.work_items.len()
        ));
    }
    for id in ids {
        let Some(row) = load_work_item(conn, &id)? else {
            continue;
        };
        let agrees = folded.work_items.get(&id).is_some_and(|f| {
            row.mission_id == f.mission_id
                && f.state == Some(row.state)
                && f.revision == row.revision
                && f.contract_revision == row.contract_revision
                && f.ownership_epoch == row.ownership_epoch
                && f.owner.as_deref() == row.owner.as_deref()
        });
        if !agrees {
            problems.push(format!(
                "group {group_id}: WorkItem {id} in the index differs from the fold of its Events"
            ));
        }
    }
    problems.extend(budget::check_spent(conn, group_id, folded)?);
    Ok(problems)
}

impl Work<'_> {
    pub async fn work_item(&self, id: Id, reader: &Reader) -> Result<WorkItemView, Error> {
        let reader = reader.clone();
        let now = self.0.clock.now();
        self.0
            .db
            .read(move |conn| {
                let row = visible_work_item(conn, &reader, id.as_str())?;
                work_view(conn, &row, now)
            })
            .await
    }

    pub async fn mission(&self, id: Id, reader: &Reader) -> Result<MissionView, Error> {
        let reader = reader.clone();
        self.0
            .db
            .read(move |conn| {
                let row = visible_mission(conn, &reader, id.as_str())?;
                mission_view(conn, &row)
            })
            .await
    }

    pub async fn mission_graph(&self, id: Id, reader: &Reader) -> Result<WorkGraph, Error> {
        let reader = reader.clone();
        self.0
            .db
            .read(move |conn| {
                let row = visible_mission(conn, &reader, id.as_str())?;
                let nodes = nodes(conn, &row.mission_id)?;
                let edges = work_items::mission_edges(conn, &row.mission_id)?
                    .into_iter()
                    .map(|(from, to)| WorkEdge { from, to })
                    .collect();
                Ok(WorkGraph { nodes, edges })
            })
            .await
    }
}
