//! `work.revise_contract` (CON-5): the new contract and its dependencies; live offers are
//! withdrawn and acceptance must be renewed.

use weft_api::work::command::WorkReviseContract;

use super::Step;
use crate::error::Error;
use crate::work::ctx::{Ctx, withdraw_offers};
use crate::work::{WorkRow, deps};

pub(in crate::work) fn apply(
    ctx: &mut Ctx<'_, '_>,
    step: Step,
    p: &WorkReviseContract,
) -> Result<WorkRow, Error> {
    let Step {
        mut row,
        next,
        kind,
        payload,
    } = step;
    deps::check(
        ctx.tx,
        ctx.group(),
        &row.mission_id,
        &row.work_item_id,
        &p.contract.depends_on,
    )?;
    crate::rows::work_deps::set(ctx.tx, &row.work_item_id, &p.contract.depends_on)?;
    // CON-5: renewed acceptance. Live offers go (an `offered` WorkItem waits for a new
    // one); a `queued` owner keeps its ownership and accepts again before it starts.
    withdraw_offers(ctx, &row, None, "the contract was revised (CON-5)")?;
    row.contract = crate::rows::work_contract::Contract::new(p.contract.clone());
    row.contract_revision += 1;
    row.approval_granted = false;
    row.state = next;
    ctx.record(&mut row, kind, payload)?;
    Ok(row)
}
