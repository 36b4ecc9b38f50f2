//! `work.unblock` (T10, SM-10): the blocked lease ends; the WorkItem goes back to its owner
//! (`queued`) or, with no live owner, to `open`.

use weft_api::work::machine::WorkState;

use super::Step;
use crate::error::Error;
use crate::work::WorkRow;
use crate::work::ctx::{Ctx, release_leases};

pub(in crate::work) fn apply(ctx: &mut Ctx<'_, '_>, step: Step) -> Result<WorkRow, Error> {
    let Step {
        mut row,
        next,
        kind,
        payload,
    } = step;
    release_leases(ctx, &row.work_item_id)?;
    if next == WorkState::Open {
        row.owner = None;
        row.ownership_expires_at = None;
    }
    row.state = next;
    ctx.record(&mut row, kind, payload)?;
    Ok(row)
}
