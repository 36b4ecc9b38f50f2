//! `work.offer` (T3, OFR): fences an owner whose ownership expired (SM-6), withdraws the live
//! offers it replaces and records the new one with the Event's sequence.

use weft_api::ErrorCode;
use weft_api::work::command::WorkOffer;
use weft_api::work::events::WorkEventKind;

use super::Step;
use crate::access::membership;
use crate::error::{Error, reject};
use crate::rows::offers;
use crate::work::WorkRow;
use crate::work::ctx::{Ctx, fence_owner, withdraw_offers};

pub(in crate::work) fn apply(
    ctx: &mut Ctx<'_, '_>,
    step: Step,
    p: &WorkOffer,
) -> Result<WorkRow, Error> {
    let Step {
        mut row,
        next,
        kind,
        payload,
    } = step;
    if p.expires_at.to_utc() <= ctx.now {
        return Err(reject(
            ErrorCode::InvalidCommand,
            "expiresAt is not in the future",
        ));
    }
    for candidate in &p.candidates {
        // CTX-5: a member scoped to other Missions is no candidate for this one.
        if membership(ctx.tx, ctx.group(), candidate.as_str())?.is_none()
            || !crate::access::mission_scope(ctx.tx, ctx.group(), candidate.as_str())?
                .covers(&row.mission_id)
        {
            return Err(reject(
                ErrorCode::NotAMember,
                format!(
                    "candidate {candidate} is not a member of {} for Mission {}",
                    ctx.group(),
                    row.mission_id
                ),
            ));
        }
    }
    if offers::exists(ctx.tx, &row.work_item_id, p.offer_id.as_str())? {
        return Err(reject(
            ErrorCode::Conflict,
            format!("offer id {} is taken", p.offer_id),
        ));
    }
    // SM-6: an expired owner is fenced before the offer takes effect (the table
    // refused the offer if the ownership were live). The Command's own expiry step
    // (`expiry.rs`) fenced a queued or blocked owner already; what is left here is an
    // active owner whose ownership deadline passed while its lease ran.
    if let Some(previous_owner) = row.owner.clone() {
        let expired_at = row.ownership_expires_at.map(crate::clock::format_instant);
        let leases = fence_owner(ctx.tx, &mut row, ctx.now)?;
        ctx.record(
            &mut row,
            WorkEventKind::OwnershipExpired,
            serde_json::json!({"expiresAt": expired_at, "leases": leases,
                               "previousOwner": previous_owner, "rule": "SM-6"}),
        )?;
    }
    // T3: the new offer replaces live ones.
    withdraw_offers(ctx, &row, None, "replaced by a new offer")?;
    offers::insert(
        ctx.tx,
        &offers::NewOffer {
            work_item_id: &row.work_item_id,
            offer_id: p.offer_id.as_str(),
            candidates: &p.candidates,
            expires_at: p.expires_at.to_utc(),
            selection_basis: &p.selection_basis,
            contract_revision: row.contract_revision,
        },
    )?;
    row.state = next;
    ctx.record(&mut row, kind, payload)?;
    let sequence = ctx.appended.last().map_or(0, |e| e.sequence);
    offers::set_sequence(ctx.tx, &row.work_item_id, p.offer_id.as_str(), sequence)?;
    Ok(row)
}
