//! `work.checkpoint` (T8, PRG-4; OFL-9 for a reconciled one): the Execution Lease is released
//! and the owner keeps the WorkItem `queued` for its ownership period.

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
    // A reconciled checkpoint closed its historical lease when it was buffered: what
    // the Worker buffered after it is past the lease (OFL-9).
    if let Some(binding) = &ctx.offline {
        crate::rows::leases::close(
            ctx.tx,
            binding.lease_id.as_str(),
            binding.buffered_at.to_utc(),
        )?;
    }
    row.ownership_expires_at = Some(ctx.later(row.contract.leases.ownership_seconds));
    row.state = next;
    ctx.record(&mut row, kind, payload)?;
    Ok(row)
}
