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

use crate::sql::Cached as _;
use chrono::{DateTime, FixedOffset};
use rusqlite::{Connection, OptionalExtension as _};
use weft_api::work::offline::{Binding, Current, LeaseRecord, judge};
use weft_api::{ErrorCode, Id};

use super::WorkRow;
use super::apply::Ctx;
use crate::error::{Error, reject};

/// What a valid binding found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Standing {
    /// The historical lease is still the WorkItem's running lease.
    LeaseRuns,
    /// It expired, or the reconnect revoked it: the Command reconciles (`Facts::reconciling`).
    Reconciling,
}

fn instant(text: &str) -> Result<DateTime<FixedOffset>, Error> {
    DateTime::parse_from_rfc3339(text).map_err(Error::backend)
}

/// The lease record a binding names, with its close time (OFL-9).
fn lease_record(conn: &Connection, lease_id: &Id) -> Result<Option<LeaseRecord>, Error> {
    type Row = (String, String, u64, u64, String, String, Option<String>);
    // `closed_at` is NULL while the lease runs, and after it expired or the reconnect revoked
    // it (neither closes the window, DESIGN §12); a lease that ended before schema v12 said
    // why counts as closed when it was released.
    let found: Option<Row> = conn
        .row(
            "SELECT work_item_id, agent_id, session_epoch, ownership_epoch, started_at, expires_at,
                    CASE WHEN ended_by IS NULL THEN released_at ELSE closed_at END
             FROM leases WHERE lease_id = ?1 AND kind = 'execution'",
            [lease_id.as_str()],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ))
            },
        )
        .optional()?;
    let Some((work_item_id, agent_id, session_epoch, ownership_epoch, started, expires, closed)) =
        found
    else {
        return Ok(None);
    };
    let closed_at = closed.as_deref().map(instant).transpose()?;
    Ok(Some(LeaseRecord {
        work_item_id,
        agent_id,
        session_epoch,
        ownership_epoch,
        started_at: instant(&started)?,
        expires_at: instant(&expires)?,
        closed_at,
    }))
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
    let lease = lease_record(ctx.tx, &binding.lease_id)?;
    let current = Current {
        work_item_id: row.work_item_id.clone(),
        owner: row.owner.clone(),
        ownership_epoch: row.ownership_epoch,
        contract_grace_seconds: row.contract.leases.grace_seconds,
        now: ctx.now.fixed_offset(),
    };
    judge(binding, lease.as_ref(), &current).map_err(|code| {
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
        && lease
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
    let runs = super::current_lease(ctx.tx, &row.work_item_id)?
        .is_some_and(|lease| lease.lease_id == binding.lease_id.as_str());
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
        "usage": super::apply::detail(usage)?,
        "workItemId": binding.work_item_id,
    }))
}
