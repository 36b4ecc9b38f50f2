//! `work.block` (T9, PRG-5): the Execution Lease gives way to a blocked lease, for which the
//! owner keeps its ownership.

use super::Step;
use crate::error::Error;
use crate::work::WorkRow;
use crate::work::ctx::{Ctx, new_lease, release_leases};

pub(in crate::work) fn apply(ctx: &mut Ctx<'_, '_>, step: Step) -> Result<WorkRow, Error> {
    let Step {
        mut row,
        next,
        kind,
        payload,
    } = step;
    release_leases(ctx, &row.work_item_id)?;
    let seconds = row.contract.leases.blocked_seconds;
    new_lease(ctx, &row, crate::rows::leases::Kind::Blocked, seconds)?;
    // PRG-5: ownership is kept for the blocked lease.
    row.ownership_expires_at = Some(ctx.later(seconds));
    row.state = next;
    ctx.record(&mut row, kind, payload)?;
    Ok(row)
}
