//! `work.decline_offer` (OFR-8, OFR-9): the candidate's structured decline is kept on the
//! offer; the WorkItem stays offered.

use crate::sql::Cached as _;
use rusqlite::params;
use weft_api::work::command::WorkDecline;

use super::Step;
use crate::error::Error;
use crate::work::ctx::{Ctx, detail};
use crate::work::{WorkRow, from_json, to_json};

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
    let declined: String = ctx.tx.row(
        "SELECT declined FROM offers WHERE work_item_id = ?1 AND offer_id = ?2",
        params![row.work_item_id, p.offer_id.as_str()],
        |r| r.get(0),
    )?;
    let mut declined: serde_json::Map<String, serde_json::Value> = from_json(&declined)?;
    declined.insert(ctx.command.agent_id.to_string(), detail(&p.reason)?);
    ctx.tx.run(
        "UPDATE offers SET declined = ?3 WHERE work_item_id = ?1 AND offer_id = ?2",
        params![row.work_item_id, p.offer_id.as_str(), to_json(&declined)?],
    )?;
    ctx.record(&mut row, kind, payload)?;
    Ok(row)
}
