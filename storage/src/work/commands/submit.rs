//! `work.submit` (T11, EVD-2, EVD-3): the lease is released, the WorkItem is `submitted`, and
//! reviewers are asked for the criteria no review covers yet.

use weft_api::work::events::WorkEventKind;

use super::Step;
use crate::error::Error;
use crate::work::WorkRow;
use crate::work::ctx::{Ctx, release_leases, work_event};

pub(in crate::work) fn apply(ctx: &mut Ctx<'_, '_>, step: Step) -> Result<WorkRow, Error> {
    let Step {
        mut row,
        next,
        kind,
        payload,
    } = step;
    release_leases(ctx, &row.work_item_id)?;
    row.state = next;
    ctx.record(&mut row, kind, payload)?;
    // EVD-3: reviewers (subscribed to the Group's stream) are asked for the criteria
    // no review covers yet; `work.accept_result` waits for the combined Evidence.
    let awaiting = crate::work::checks::criteria_awaiting_review(ctx, &row)?;
    if !awaiting.is_empty() {
        let detail = serde_json::json!({"criteria": awaiting, "rule": "EVD-3"});
        ctx.emit(
            WorkEventKind::WorkReviewRequested,
            work_event(&row, detail)?,
        )?;
    }
    Ok(row)
}
