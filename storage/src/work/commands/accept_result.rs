//! `work.accept_result` (T12, EVD-3): the submitted result is verified; the WorkItem's leases
//! are released and its ownership deadline cleared.

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
    row.ownership_expires_at = None;
    row.state = next;
    ctx.record(&mut row, kind, payload)?;
    Ok(row)
}
