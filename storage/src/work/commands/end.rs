//! `work.fail` (T13) and `work.cancel` (T14): the owner's hold ends (leases fenced, live
//! offers withdrawn) and a child Mission still running under the WorkItem ends with it.

use super::Step;
use crate::error::Error;
use crate::work::WorkRow;
use crate::work::ctx::{Ctx, end_ownership};

pub(in crate::work) fn apply(ctx: &mut Ctx<'_, '_>, step: Step) -> Result<WorkRow, Error> {
    let Step {
        mut row,
        next,
        kind,
        payload,
    } = step;
    end_ownership(ctx, &mut row)?;
    row.state = next;
    ctx.record(&mut row, kind, payload)?;
    crate::work::missions::end_child_of(ctx, &row)?;
    Ok(row)
}
