//! What the owner does while it executes (issue #12): `lease.renew` (LSE-1, LSE-3), structured
//! `work.progress` (PRG-1, PRG-2), and `preemption.request` from the Scheduler or the owner's
//! own scheduler (LSE-11, LSE-12 step 1); plus the retry policy's standing for a new
//! `work.start` (PRG-8) and the attempt key (PRG-9).
//!
//! Each runs after `machine::decide` accepted the Command and, for the owner Commands that
//! quote a lease, after `checks::check_lease` (LSE-4, LSE-5), inside the Command's writer
//! transaction. Nothing here moves the WorkItem out of `active` (LSE-11): the owner's
//! checkpoint releases the lease, which also ends a pending preemption request, since that
//! request is recorded on the lease it asks to end.

use weft_api::ErrorCode;
use weft_api::idempotency::operation_key;
use weft_api::work::command::WorkProgress;
use weft_api::work::events::WorkEventKind;
use weft_api::work::machine::RetryStanding;
use weft_api::work::views::Preemption;

use super::WorkRow;
use super::ctx::{Ctx, id};
use crate::clock::format_instant;
use crate::error::{Error, reject};
use crate::rows::leases::{self, Lease};
use crate::rows::work_history;

/// `lease.renew`: the current Execution Lease (the one quoted, already checked unexpired)
/// lasts the contract's `executionSeconds` from now; the renewal is kept (LSE-3).
pub(super) fn renew(
    ctx: &mut Ctx<'_, '_>,
    row: &mut WorkRow,
    kind: WorkEventKind,
    payload: serde_json::Value,
) -> Result<(), Error> {
    let lease = execution_lease(ctx, row)?;
    let expires = crate::clock::stored(
        ctx.now + weft_api::work::capped_seconds(row.contract.leases.execution_seconds),
    );
    let expires_at = format_instant(expires);
    leases::renew(ctx.tx, &lease, expires)?;
    crate::rows::lease_renewals::insert(ctx.tx, &lease, ctx.now, expires)?;
    // An Execution Lease never outlives the ownership it works under (LSE-1: both are
    // renewable); otherwise a renewing owner would be fenced mid-execution.
    if row.ownership_expires_at.is_none_or(|at| at < expires) {
        row.ownership_expires_at = Some(expires);
    }
    let payload = with(
        payload,
        &[
            ("leaseId", lease.into()),
            ("renewedAt", ctx.now_text.clone().into()),
            ("expiresAt", expires_at.into()),
        ],
    );
    ctx.record(row, kind, payload)
}

/// `work.progress` (PRG-1): recorded in its Event and kept as the WorkItem's latest report.
/// The Evidence it cites must be this WorkItem's; `percent` is stored and never read (PRG-2).
pub(super) fn progress(
    ctx: &mut Ctx<'_, '_>,
    row: &mut WorkRow,
    kind: WorkEventKind,
    payload: serde_json::Value,
    report: &WorkProgress,
) -> Result<(), Error> {
    super::checks::cites_evidence(ctx, row, &report.evidence)?;
    ctx.record(row, kind, payload)?;
    let sequence = ctx.appended.last().map_or(0, |event| event.sequence);
    crate::rows::work_progress::replace(
        ctx.tx,
        &row.work_item_id,
        sequence,
        ctx.command.agent_id.as_str(),
        &ctx.now_text,
        report,
    )?;
    Ok(())
}

/// `preemption.request` (LSE-12 step 1): recorded on the current Execution Lease; the
/// WorkItem stays `active` until its owner checkpoints (steps 2–5, T8).
pub(super) fn request_preemption(
    ctx: &mut Ctx<'_, '_>,
    row: &mut WorkRow,
    kind: WorkEventKind,
    payload: serde_json::Value,
) -> Result<(), Error> {
    let lease = execution_lease(ctx, row)?;
    leases::request_preemption(ctx.tx, &lease, ctx.now, ctx.command.agent_id.as_str())?;
    let payload = with(payload, &[("leaseId", lease.into())]);
    ctx.record(row, kind, payload)
}

/// PRG-8, LSE-12: does a `work.start` now resume the current attempt? It does when the newest
/// start was under the current ownership epoch and no `work.failed` came after it: a resume
/// after a checkpoint (T8), a preemption (LSE-12 step 5), an unblock (T10), an expired lease
/// or a replaced session (GAP-1) is the same attempt, under the same attempt key (PRG-9: the
/// key is derived from the epoch and the attempt's number). A start under a new ownership
/// epoch (a re-offer after a failure or a fencing, or a re-acceptance of a revised contract,
/// CON-5) is a new attempt, and so is a start after a failure: only those meet the retry
/// policy, so a crash-looping Worker re-offered again and again is still bounded by it.
pub(super) fn resumes_attempt(ctx: &Ctx<'_, '_>, row: &WorkRow) -> Result<bool, Error> {
    if row.attempts == 0 {
        return Ok(false);
    }
    let newest = work_history::last_start_or_failure(ctx.tx, &row.group_id, &row.work_item_id)?;
    Ok(matches!(newest, Some((kind, Some(epoch)))
        if kind == "work.started" && epoch == row.ownership_epoch))
}

/// PRG-8: may the WorkItem start another attempt? Only a new attempt asks (a resume does
/// not, [`resumes_attempt`]); the bound is
/// `retryPolicy.maxAttempts` (0 is read as 1: the first attempt is never refused), the
/// retry deadline and `maxCost` (the WorkItem's financial spend so far) bind every attempt
/// after the first, and `backoffSeconds` runs from the WorkItem's last `work.failed`.
pub(super) fn retry_standing(ctx: &Ctx<'_, '_>, row: &WorkRow) -> Result<RetryStanding, Error> {
    let policy = &row.contract.retry_policy;
    if row.attempts >= policy.max_attempts.max(1) {
        return Ok(RetryStanding::Exhausted);
    }
    if row.attempts > 0 && policy.deadline.is_some_and(|at| at.to_utc() <= ctx.now) {
        return Ok(RetryStanding::PastDeadline);
    }
    // The cost bound: once the WorkItem has spent `maxCost` (financial), no retry starts.
    if row.attempts > 0 {
        let spent = crate::rows::work_items::spent(ctx.tx, &row.work_item_id)?;
        if spent.financial >= policy.max_cost {
            return Ok(RetryStanding::CostExhausted);
        }
    }
    if let Some(failed_at) = work_history::last_failure(ctx.tx, &row.group_id, &row.work_item_id)? {
        let backoff = weft_api::work::capped_seconds(policy.backoff_seconds);
        if ctx.now < failed_at + backoff {
            return Ok(RetryStanding::BackingOff);
        }
    }
    Ok(RetryStanding::Allowed)
}

/// A message for a refused `work.start` saying which bound of the retry policy answered.
pub(super) fn retry_refusal(row: &WorkRow, standing: RetryStanding) -> Option<String> {
    let policy = &row.contract.retry_policy;
    match standing {
        RetryStanding::Allowed => None,
        RetryStanding::Exhausted => Some(format!(
            "work.start: {} of retryPolicy.maxAttempts {} attempts made (PRG-8); the Coordinator ends it with work.fail reason retries_exhausted (PRG-10)",
            row.attempts, policy.max_attempts
        )),
        RetryStanding::PastDeadline => {
            Some("work.start: past retryPolicy.deadline (PRG-8)".to_owned())
        }
        RetryStanding::CostExhausted => Some(format!(
            "work.start: the WorkItem has spent retryPolicy.maxCost {} (PRG-8)",
            policy.max_cost
        )),
        RetryStanding::BackingOff => Some(format!(
            "work.start: within retryPolicy.backoffSeconds {} of the last failure (PRG-8)",
            policy.backoff_seconds
        )),
    }
}

/// PRG-9: the current attempt's key, derived from the DLV-11 operation key of the WorkItem
/// under its ownership epoch; `None` before the first start.
pub(crate) fn attempt_key(row: &WorkRow) -> Result<Option<String>, Error> {
    if row.attempts == 0 {
        return Ok(None);
    }
    Ok(Some(operation_key(
        &id(&row.mission_id)?,
        &id(&row.work_item_id)?,
        row.ownership_epoch,
        &format!("attempt-{}", row.attempts),
    )))
}

/// The pending preemption request of a lease, if any.
pub(crate) fn preemption(lease: &Lease) -> Option<Preemption> {
    lease
        .preemption
        .as_ref()
        .map(|(requested_at, requested_by)| Preemption {
            requested_at: format_instant(*requested_at),
            requested_by: requested_by.to_string(),
            lease_id: lease.lease_id.to_string(),
        })
}

/// The current lease of an `active` WorkItem, which is its Execution Lease.
fn execution_lease(ctx: &Ctx<'_, '_>, row: &WorkRow) -> Result<String, Error> {
    match leases::current(ctx.tx, &row.work_item_id)? {
        Some(lease) if lease.kind == leases::Kind::Execution => Ok(lease.lease_id.to_string()),
        _ => Err(reject(
            ErrorCode::StaleLease,
            format!("{} holds no Execution Lease", row.work_item_id),
        )),
    }
}

/// `payload` (an object) with `fields` added.
fn with(mut payload: serde_json::Value, fields: &[(&str, serde_json::Value)]) -> serde_json::Value {
    if let serde_json::Value::Object(map) = &mut payload {
        for (name, value) in fields {
            map.insert((*name).to_owned(), value.clone());
        }
    }
    payload
}
