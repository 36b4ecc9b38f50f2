//! `work.accept_offer` (T4, SM-7, OFR-5; CON-5 for a revised contract): in one step the offer
//! is accepted, the others withdrawn, and a new ownership epoch begins.

use weft_api::work::command::OfferRef;

use super::Step;
use crate::error::Error;
use crate::work::WorkRow;
use crate::work::ctx::{Ctx, withdraw_offers};

pub(in crate::work) fn apply(
    ctx: &mut Ctx<'_, '_>,
    step: Step,
    p: &OfferRef,
) -> Result<WorkRow, Error> {
    let Step {
        mut row,
        next,
        kind,
        payload,
    } = step;
    // The acceptance is of the current contract (CON-5: an owner accepting a revised
    // one again names the offer it accepted before).
    crate::rows::offers::accept(
        ctx.tx,
        &row.work_item_id,
        p.offer_id.as_str(),
        row.contract_revision,
    )?;
    row.ownership_epoch += 1;
    row.owner = Some(ctx.command.agent_id.clone());
    row.ownership_expires_at = Some(ctx.later(row.contract.leases.ownership_seconds));
    row.state = next;
    ctx.record(&mut row, kind, payload)?;
    withdraw_offers(
        ctx,
        &row,
        Some(p.offer_id.as_str()),
        "another candidate accepted",
    )?;
    Ok(row)
}
