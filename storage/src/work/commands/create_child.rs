//! `mission.create_child` (T15, SM-11, SCH-6): a child Mission under the WorkItem, which is
//! blocked, its ownership fenced, while the child runs.

use weft_api::ErrorCode;
use weft_api::work::command::MissionCreateChild;
use weft_api::work::events::WorkEventKind;
use weft_api::work::machine::MissionState;

use super::Step;
use crate::error::{Error, reject};
use crate::work::ctx::{Ctx, end_ownership, mission_event};
use crate::work::{MissionRow, WorkRow};

pub(in crate::work) fn apply(
    ctx: &mut Ctx<'_, '_>,
    step: Step,
    mission: &MissionRow,
    p: &MissionCreateChild,
) -> Result<WorkRow, Error> {
    let Step {
        mut row,
        next,
        kind,
        payload,
    } = step;
    expect_new_child(ctx, p.child_mission_id.as_str())?;
    // T15 / SM-11: ownership is fenced while the child Mission runs.
    end_ownership(ctx, &mut row)?;
    let child = MissionRow {
        mission_id: p.child_mission_id.clone(),
        group_id: ctx.command.group_id.clone(),
        title: p.title.clone(),
        // SCH-6: a child runs at its parent Mission's priority, which the Group's
        // policy bounded when the parent was created.
        priority_class: mission.priority_class,
        budget: row.contract.budgets.clone(),
        state: MissionState::Active,
        revision: 1,
        parent_work_item_id: Some(row.work_item_id.clone()),
        child_failure_policy: Some(p.child_failure_policy),
    };
    crate::rows::missions::insert(ctx.tx, &child, 0)?;
    ctx.emit(
        WorkEventKind::MissionCreated,
        mission_event(&child, payload.clone())?,
    )?;
    row.child_mission_id = Some(child.mission_id.clone());
    row.state = next;
    ctx.record(&mut row, kind, payload)?;
    Ok(row)
}

fn expect_new_child(ctx: &Ctx<'_, '_>, mission_id: &str) -> Result<(), Error> {
    if crate::rows::missions::exists(ctx.tx, mission_id)? {
        return Err(reject(
            ErrorCode::Conflict,
            format!("Mission id {mission_id} is taken"),
        ));
    }
    Ok(())
}
