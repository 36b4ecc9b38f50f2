//! Reconciling a buffered Command (OFL-8…OFL-11, DESIGN §12), inside its writer transaction:
//! the binding is judged against the lease record it names (`weft_api::work::offline::judge`,
//! after the usual session and membership epochs, which the rebase made current, OFL-8), then
//! `apply.rs` appends `resource_usage_recorded`, charges the budget lineage and applies the
//! Command, in that order (OFL-11), or the transaction rolls all of it back.
//!
//! Which lease a buffered Command acts under: the historical one it is bound to. While that
//! lease still runs, the Command is an ordinary owner Command. When it expired, or was revoked
//! because the Worker's reconnect opened a new session (LSE-9, which returned the WorkItem to
//! `queued` under the same owner), the Command is *reconciling*: its progress or checkpoint is
//! recorded on the `queued` WorkItem (the table's OFL-11 rows), and the quoted-lease check of
//! LSE-5 accepts the historical lease id only through this valid binding. A lease closed by a
//! release, cancellation, failure or fencing closes the window (`offline_lease_closed`); a
//! newer Execution Lease makes the historical one stale (`stale_lease`, LSE-5).

use weft_api::work::offline::{Binding, Current, judge};
use weft_api::{ErrorCode, Id};

use super::WorkRow;
use super::ctx::Ctx;
use crate::error::{Error, reject};
use crate::rows::leases::{self, Claim, Kind, Lease};

/// What a valid binding found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Standing {
    /// The historical lease is still the WorkItem's running lease.
    LeaseRuns,
    /// It expired, or the reconnect revoked it: the Command reconciles (`Facts::reconciling`).
    Reconciling,
}

/// The Execution Lease a binding names, if there is one (OFL-9 judges its record).
fn bound_lease(ctx: &Ctx<'_, '_>, lease_id: &Id) -> Result<Option<Lease>, Error> {
    Ok(leases::load(ctx.tx, lease_id.as_str())?.filter(|lease| lease.kind == Kind::Execution))
}

/// OFL-9 and DESIGN §12 for a buffered Command on `row`; answers whether its historical lease
/// still runs or the Command reconciles.
pub(super) fn check(
    ctx: &Ctx<'_, '_>,
    row: &WorkRow,
    binding: &Binding,
) -> Result<Standing, Error> {
    if ctx
        .command
        .lease_id
        .as_ref()
        .is_some_and(|quoted| *quoted != binding.lease_id)
    {
        return Err(reject(
            ErrorCode::OfflineBindingMismatch,
            "the Command quotes another lease than its binding",
        ));
    }
    let lease = bound_lease(ctx, &binding.lease_id)?;
    let current = Current {
        work_item_id: row.work_item_id.to_string(),
        owner: row.owner.as_ref().map(ToString::to_string),
        ownership_epoch: row.ownership_epoch,
        contract_grace_seconds: row.contract.leases.grace_seconds,
        now: ctx.now.fixed_offset(),
    };
    let record = lease.as_ref().map(Lease::record);
    judge(binding, record.as_ref(), &current).map_err(|code| {
        let why = match code {
            ErrorCode::OfflineWrongWorkItem => format!(
                "the binding is for WorkItem {}, the Command for {} (OFL-9)",
                binding.work_item_id, row.work_item_id
            ),
            ErrorCode::OfflineBindingMismatch => format!(
                "the binding disagrees with the record of lease {}, or claims more than the contract's {} s of grace (DESIGN §12)",
                binding.lease_id, row.contract.leases.grace_seconds
            ),
            ErrorCode::OfflineOwnerChanged => format!(
                "WorkItem {} changed owner since ownership epoch {} (OFL-9)",
                row.work_item_id, binding.ownership_epoch
            ),
            ErrorCode::OfflineOutsideGrace => format!(
                "bufferedAt {} is outside lease {} plus {} s of grace (OFL-9)",
                binding.buffered_at, binding.lease_id, binding.grace_seconds
            ),
            ErrorCode::OfflineLeaseClosed => format!(
                "lease {} was closed before bufferedAt {} (OFL-9)",
                binding.lease_id, binding.buffered_at
            ),
            _ => format!("the binding was refused ({code})"),
        };
        reject(code, why)
    })?;
    // A checkpoint ends its lease; a lease that ended (released, a reconciled checkpoint,
    // cancellation, failure) takes no further checkpoint, whatever bufferedAt it claims:
    // otherwise each new buffered checkpoint, dated ever earlier, would move the ownership
    // deadline forward without a start (attacker review).
    if ctx.command.kind == weft_api::work::CommandType::WorkCheckpoint
        && record
            .as_ref()
            .is_some_and(|record| record.closed_at.is_some())
    {
        return Err(reject(
            ErrorCode::OfflineLeaseClosed,
            format!(
                "lease {} already ended; a buffered checkpoint cannot end it again (OFL-9)",
                binding.lease_id
            ),
        ));
    }
    // Whether the historical lease still runs: the WorkItem's current lease admits it, as it
    // admits a quote (`leases::Lease::admits`; expiry ran first in `command.rs`, so a lease
    // past its `expiresAt` has ended by now).
    let claim = Claim {
        lease_id: binding.lease_id.as_str(),
        work_item_id: &row.work_item_id,
        signer: None,
        acts_for: None,
    };
    let runs = leases::current(ctx.tx, &row.work_item_id)?
        .is_some_and(|lease| lease.admits(&claim, ctx.now).is_ok());
    Ok(if runs {
        Standing::LeaseRuns
    } else {
        Standing::Reconciling
    })
}

/// OFL-11 step 1's Event detail: the delta, the historical execution session and the
/// reconciling one (DESIGN §12).
pub(super) fn usage_detail(
    ctx: &Ctx<'_, '_>,
    binding: &Binding,
    usage: &weft_api::work::contract::Budgets,
) -> Result<serde_json::Value, Error> {
    Ok(serde_json::json!({
        "bufferedAt": binding.buffered_at,
        "commandId": ctx.command.command_id,
        "historicalSession": {"agentId": binding.agent_id, "sessionEpoch": binding.session_epoch},
        "leaseId": binding.lease_id,
        "reconcilingSession": {"agentId": ctx.command.agent_id, "sessionEpoch": ctx.session_epoch},
        "rule": "OFL-11",
        "usage": super::ctx::detail(usage)?,
        "workItemId": binding.work_item_id,
    }))
}
