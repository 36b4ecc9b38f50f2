//! `work.decline_offer` (OFR-8, OFR-9): the candidate's structured decline is kept on the
//! offer; the WorkItem stays offered.

use weft_api::work::command::WorkDecline;

use super::Step;
use crate::error::Error;
use crate::rows::offers;
use crate::work::WorkRow;
use crate::work::ctx::{Ctx, detail};

pub(in crate::work) fn apply(
    ctx: &mut Ctx<'_, '_>,
    step: Step,
    p: &WorkDecline,
) -> Result<WorkRow, Error> {
    let Step {
        mut row,
        kind,
        payload,
        ..
    } = step;
    let mut declined = offers::declined(ctx.tx, &row.work_item_id, p.offer_id.as_str())?;
    declined.insert(ctx.command.agent_id.to_string(), detail(&p.reason)?);
    offers::set_declined(ctx.tx, &row.work_item_id, p.offer_id.as_str(), &declined)?;
    ctx.record(&mut row, kind, payload)?;
    Ok(row)
}
