//! Mission Commands (`mission.create`, `mission.approve|fail|cancel` with T16–T18
//! propagation), proposals (T1) and `work.authorize` (T2): what each does to the rows and
//! which Events it appends, in the transaction `command.rs` opened.

use weft_api::ErrorCode;
use weft_api::work::CommandType;
use weft_api::work::command::{MissionClose, MissionCreate, WorkAuthorize, WorkPropose};
use weft_api::work::events::{WorkEvent, WorkEventKind};
use weft_api::work::machine::{MissionState, WorkState, child_outcome, decide_mission, propagate};

use super::answer::Answered;
use super::ctx::{Ctx, detail, end_ownership, expect_new, group_mission, mission_event};
use super::{MissionRow, WorkRow, deps, load_work_item};
use crate::error::{Error, reject};
use crate::rows::{missions, proposals};

pub(super) fn mission_create(ctx: &mut Ctx<'_, '_>, p: &MissionCreate) -> Result<Answered, Error> {
    expect_new(ctx)?;
    crate::policy::check_mission_priority(ctx.tx, ctx.group(), p.priority_class)?;
    if missions::exists(ctx.tx, p.mission_id.as_str())? {
        return Err(reject(
            ErrorCode::Conflict,
            format!("Mission id {} is taken", p.mission_id),
        ));
    }
    super::child::refuse_parent(p.parent_work_item_id.as_ref())?;
    let row = MissionRow {
        mission_id: p.mission_id.clone(),
        group_id: ctx.command.group_id.clone(),
        title: p.title.clone(),
        priority_class: p.priority_class,
        budget: p.budget.clone(),
        state: MissionState::Active,
        revision: 1,
        parent_work_item_id: None,
        child_failure_policy: None,
    };
    missions::insert(ctx.tx, &row, 0)?;
    let event = mission_event(&row, detail(p)?)?;
    ctx.emit(WorkEventKind::MissionCreated, event)?;
    Ok(Answered::Mission(row))
}

/// `mission.approve|fail|cancel`, then T18 over its WorkItems and T16/T17 for its parent.
pub(super) fn mission_close(ctx: &mut Ctx<'_, '_>, p: &MissionClose) -> Result<Answered, Error> {
    let mut mission = group_mission(ctx, &p.mission_id)?;
    if let Some(expected) = ctx.command.expected_revision
        && expected != mission.revision
    {
        return Err(reject(
            ErrorCode::StaleRevision,
            format!(
                "the Mission is at revision {}, not {expected} (SM-3)",
                mission.revision
            ),
        ));
    }
    // Separation of duties: approving a child Mission verifies its parent WorkItem (T16).
    let caller = ctx.command.agent_id.as_str();
    let did_the_parent_work = match &mission.parent_work_item_id {
        Some(parent) if ctx.command.kind == CommandType::MissionApprove => {
            crate::standing::worked_on(ctx.tx, parent, &mission.group_id)?.contains(caller)
        }
        _ => false,
    };
    // T18/SM-12: approval never ends a live WorkItem; it waits until none is left.
    let live = if ctx.command.kind == CommandType::MissionApprove {
        live_work_items(ctx, &mission.mission_id)?
    } else {
        Vec::new()
    };
    mission.state = decide_mission(
        mission.state,
        ctx.command.kind,
        did_the_parent_work,
        !live.is_empty(),
    )
    .map_err(|code| {
            let why = if code == ErrorCode::Forbidden {
                format!(
                    "{caller} did the work of {}, whose child Mission this is (separation of duties): another coordinator approves it",
                    mission.parent_work_item_id.as_deref().unwrap_or_default()
                )
            } else if !live.is_empty() {
                format!(
                    "mission.approve: WorkItems {} are still live; accept, fail or cancel each first (T18, SM-12)",
                    live.join(", ")
                )
            } else {
                format!(
                    "{} on a Mission that is {:?}",
                    ctx.command.kind.as_str(),
                    mission.state
                )
            };
            reject(code, why)
        })?;
    mission.revision += 1;
    missions::save_state(ctx.tx, &mission, ctx.now)?;
    let kind = match mission.state {
        MissionState::Approved => WorkEventKind::MissionApproved,
        MissionState::Failed => WorkEventKind::MissionFailed,
        _ => WorkEventKind::MissionCancelled,
    };
    // T16: a child's approval is its parent's Evidence, so it needs verified work behind it.
    let verified = match (&mission.parent_work_item_id, mission.state) {
        (Some(_), MissionState::Approved) => super::child::verified_work(ctx, &mission)?,
        _ => Vec::new(),
    };
    let closed_at = ctx.emit(kind, mission_event(&mission, detail(p)?)?)?;
    close_mission_items(ctx, &mission, closed_at, &verified)?;
    Ok(Answered::Mission(mission))
}

/// The Mission's WorkItems that are still live (at most ten named, in id order).
fn live_work_items(ctx: &Ctx<'_, '_>, mission_id: &str) -> Result<Vec<String>, Error> {
    crate::rows::work_items::live_of_mission(ctx.tx, mission_id)
}

/// T18 (SM-12, GAP-3) for the Mission's WorkItems, then T16/T17 for its parent WorkItem.
fn close_mission_items(
    ctx: &mut Ctx<'_, '_>,
    mission: &MissionRow,
    closed_at: u64,
    verified: &[String],
) -> Result<(), Error> {
    let ids = crate::rows::work_items::ids_of_mission(ctx.tx, &mission.mission_id)?;
    for work_item in ids {
        let Some(mut row) = load_work_item(ctx.tx, &work_item)? else {
            continue;
        };
        if let Some(next) = propagate(mission.state, row.state) {
            end_ownership(ctx, &mut row)?;
            row.state = next;
            let why = serde_json::json!({"rule": "T18", "missionState": mission.state});
            ctx.record(&mut row, WorkEventKind::WorkPropagated, why)?;
            end_child_of(ctx, &row)?;
        }
    }
    if let (Some(parent), Some(policy)) =
        (&mission.parent_work_item_id, mission.child_failure_policy)
        && let Some(mut row) = load_work_item(ctx.tx, parent)?
        && row.state == WorkState::Blocked
        && row.child_mission_id.as_deref() == Some(mission.mission_id.as_str())
        && let Some(next) = child_outcome(mission.state, policy)
    {
        let rule = match mission.state {
            MissionState::Approved => "T16",
            _ => "T17",
        };
        // T16: the child's approval becomes Evidence for the parent.
        let evidence = if mission.state == MissionState::Approved {
            super::child::approval_evidence(ctx, &row, mission, closed_at, verified)?
        } else {
            Vec::new()
        };
        row.state = next;
        if next != WorkState::Blocked {
            row.child_mission_id = None;
        }
        let why = serde_json::json!({"rule": rule, "childMissionId": mission.mission_id, "childState": mission.state,
                                     "evidence": evidence});
        ctx.record(&mut row, WorkEventKind::WorkPropagated, why)?;
    }
    Ok(())
}

/// A WorkItem that ended (failed or cancelled) while its child Mission runs takes the child
/// with it: the child is cancelled (`mission.cancelled`, rule T18) and its own live WorkItems
/// follow, so no Mission keeps running, and charging the budget lineage, under a parent that
/// has ended (issue #49 review). Called after the parent's own Event, so the child's end does
/// not move the parent again (T17 looks for a `blocked` parent).
pub(super) fn end_child_of(ctx: &mut Ctx<'_, '_>, parent: &WorkRow) -> Result<(), Error> {
    let Some(child_id) = parent.child_mission_id.as_deref() else {
        return Ok(());
    };
    let Some(mut child) = super::load_mission(ctx.tx, child_id)? else {
        return Ok(());
    };
    if child.state.is_terminal() {
        return Ok(());
    }
    child.state = MissionState::Cancelled;
    child.revision += 1;
    missions::save_state(ctx.tx, &child, ctx.now)?;
    let why = serde_json::json!({"rule": "T18", "parentWorkItemId": parent.work_item_id,
                                 "parentState": parent.state});
    let at = ctx.emit(WorkEventKind::MissionCancelled, mission_event(&child, why)?)?;
    close_mission_items(ctx, &child, at, &[])
}

pub(super) fn propose(ctx: &mut Ctx<'_, '_>, p: &WorkPropose) -> Result<Answered, Error> {
    expect_new(ctx)?;
    let mission = group_mission(ctx, &p.mission_id)?;
    if mission.state.is_terminal() {
        return Err(reject(
            ErrorCode::IllegalTransition,
            "the Mission has ended",
        ));
    }
    super::caps::admit_proposal(
        ctx.tx,
        ctx.group(),
        ctx.command.agent_id.as_str(),
        ctx.max_open_proposals,
    )?;
    if proposals::exists(ctx.tx, p.proposal_id.as_str())? {
        return Err(reject(
            ErrorCode::Conflict,
            format!("proposal id {} is taken", p.proposal_id),
        ));
    }
    let event = WorkEvent {
        actor: None,
        mission_id: p.mission_id.clone(),
        work_item_id: None,
        mission_state: None,
        state: None,
        revision: 0,
        contract_revision: 0,
        ownership_epoch: 0,
        owner: None,
        detail: detail(p)?,
    };
    let sequence = ctx.emit(WorkEventKind::WorkProposed, event)?;
    proposals::insert(
        ctx.tx,
        &proposals::NewProposal {
            proposal_id: p.proposal_id.as_str(),
            group_id: ctx.group(),
            mission_id: p.mission_id.as_str(),
            proposer: ctx.command.agent_id.as_str(),
            contract: &p.contract,
            sequence,
        },
    )?;
    Ok(Answered::Value(
        serde_json::json!({"proposalId": p.proposal_id, "missionId": p.mission_id, "proposer": ctx.command.agent_id, "sequence": sequence}),
    ))
}

/// T2: `none` (or an open proposal) → `open`.
pub(super) fn authorize(ctx: &mut Ctx<'_, '_>, p: &WorkAuthorize) -> Result<Answered, Error> {
    expect_new(ctx)?;
    if crate::rows::work_items::exists(ctx.tx, p.work_item_id.as_str())? {
        // T2's source is "none": an existing WorkItem cannot be authorized again.
        return Err(reject(
            ErrorCode::IllegalTransition,
            format!("WorkItem id {} is taken", p.work_item_id),
        ));
    }
    let mission = group_mission(ctx, &p.mission_id)?;
    if mission.state.is_terminal() {
        return Err(reject(
            ErrorCode::IllegalTransition,
            "the Mission has ended",
        ));
    }
    if let Some(proposal) = &p.proposal_id {
        let found = proposals::place(ctx.tx, proposal.as_str())?;
        match found {
            Some((group, mission_id, false))
                if group == ctx.group() && mission_id == p.mission_id.as_str() => {}
            Some((group, _, true)) if group == ctx.group() => {
                return Err(reject(
                    ErrorCode::IllegalTransition,
                    format!("proposal {proposal} was authorized already"),
                ));
            }
            Some((group, _, _)) if group == ctx.group() => {
                return Err(reject(
                    ErrorCode::MissionMismatch,
                    format!("proposal {proposal} is for another Mission"),
                ));
            }
            _ => {
                return Err(reject(
                    ErrorCode::NotFound,
                    format!("no proposal {proposal} in {}", ctx.group()),
                ));
            }
        }
        proposals::authorize(ctx.tx, proposal.as_str())?;
    }
    deps::check(
        ctx.tx,
        ctx.group(),
        &mission.mission_id,
        p.work_item_id.as_str(),
        &p.contract.depends_on,
    )?;
    let mut row = WorkRow {
        work_item_id: p.work_item_id.clone(),
        group_id: ctx.command.group_id.clone(),
        mission_id: mission.mission_id.clone(),
        state: WorkState::Open,
        revision: 0,
        contract_revision: 1,
        contract: crate::rows::work_contract::Contract::new(p.contract.clone()),
        owner: None,
        ownership_epoch: 0,
        ownership_expires_at: None,
        approval_granted: false,
        child_mission_id: None,
        attempts: 0,
    };
    crate::rows::work_items::insert(ctx.tx, &row)?;
    crate::rows::work_deps::set(ctx.tx, &row.work_item_id, &p.contract.depends_on)?;
    ctx.record(&mut row, WorkEventKind::WorkAuthorized, detail(p)?)?;
    Ok(Answered::WorkItem(Box::new(row)))
}
