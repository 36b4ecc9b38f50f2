//! `approval.grant_execution` (T6): the Approver's grant that a contract needing approval
//! requires before `work.start`.

use super::Step;
use crate::error::Error;
use crate::work::WorkRow;
use crate::work::ctx::Ctx;

pub(in crate::work) fn apply(ctx: &mut Ctx<'_, '_>, step: Step) -> Result<WorkRow, Error> {
    let Step {
        mut row,
        kind,
        payload,
        ..
    } = step;
    row.approval_granted = true;
    ctx.record(&mut row, kind, payload)?;
    Ok(row)
}
