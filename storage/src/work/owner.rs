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

use crate::sql::Cached as _;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension as _, params};
use weft_api::ErrorCode;
use weft_api::idempotency::operation_key;
use weft_api::work::command::WorkProgress;
use weft_api::work::events::WorkEventKind;
use weft_api::work::machine::RetryStanding;
use weft_api::work::views::{Preemption, ProgressView};

use super::ctx::{Ctx, id};
use super::{WorkRow, from_json, to_json};
use crate::clock::format_instant;
use crate::error::{Error, reject};
use crate::rows::leases::{self, Lease};

/// `lease.renew`: the current Execution Lease (the one quoted, already checked unexpired)
/// lasts the contract's `executionSeconds` from now; the renewal is kept (LSE-3).
pub(super) fn renew(
    ctx: &mut Ctx<'_, '_>,
    row: &mut WorkRow,
    kind: WorkEventKind,
    payload: serde_json::Value,
) -> Result<(), Error> {
    let lease = execution_lease(ctx, row)?;
    let expires = ctx.now + weft_api::work::capped_seconds(row.contract.leases.execution_seconds);
    let expires_at = format_instant(expires);
    leases::renew(ctx.tx, &lease, expires)?;
    ctx.tx.run(
        "INSERT INTO lease_renewals (lease_id, renewed_at, expires_at) VALUES (?1, ?2, ?3)",
        params![lease, ctx.now_text, expires_at],
    )?;
    // An Execution Lease never outlives the ownership it works under (LSE-1: both are
    // renewable); otherwise a renewing owner would be fenced mid-execution.
    if row
        .ownership_expires_at
        .as_deref()
        .is_none_or(|at| *at < *expires_at)
    {
        row.ownership_expires_at = Some(expires_at.clone());
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
    ctx.tx.run(
        "INSERT OR REPLACE INTO work_progress (work_item_id, sequence, agent_id, reported_at, report)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            row.work_item_id,
            sequence,
            ctx.command.agent_id.as_str(),
            ctx.now_text,
            to_json(report)?
        ],
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

/// The WorkItem's last `work.failed`, through its own history. `CROSS JOIN` fixes the loop
/// order: left to the planner, SQLite walked every Event of the Group looking for the type,
/// and `work.start` slowed linearly with the Group's log (29 → 8 leases/s at 10,000 leases).
const LAST_FAILURE: &str = "SELECT max(e.appended_at) FROM work_history h
     CROSS JOIN events e ON e.group_id = ?1 AND e.sequence = h.sequence
     WHERE h.work_item_id = ?2 AND e.type = 'work.failed'";

/// The WorkItem's newest `work.started` or `work.failed`, through its own history, newest
/// first (`CROSS JOIN` for the same reason as [`LAST_FAILURE`]), with the ownership epoch the
/// Event left the WorkItem at.
const LAST_START_OR_FAILURE: &str = "SELECT e.type, json_extract(e.payload, '$.ownershipEpoch')
     FROM work_history h
     CROSS JOIN events e ON e.group_id = ?1 AND e.sequence = h.sequence
     WHERE h.work_item_id = ?2 AND e.type IN ('work.started', 'work.failed')
     ORDER BY h.sequence DESC LIMIT 1";

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
    let newest: Option<(String, Option<u64>)> = ctx
        .tx
        .row(
            LAST_START_OR_FAILURE,
            params![row.group_id, row.work_item_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
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
    let last_failure: Option<String> =
        ctx.tx
            .row(LAST_FAILURE, params![row.group_id, row.work_item_id], |r| {
                r.get(0)
            })?;
    if let Some(failed_at) = last_failure {
        let failed_at: DateTime<Utc> = DateTime::parse_from_rfc3339(&failed_at)
            .map_err(Error::backend)?
            .to_utc();
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

/// The renewal instants of a lease, oldest first (LSE-3).
pub(crate) fn renewals(conn: &Connection, lease_id: &str) -> Result<Vec<String>, Error> {
    let mut statement = conn.prepare_cached(
        "SELECT renewed_at FROM lease_renewals WHERE lease_id = ?1 ORDER BY rowid",
    )?;
    let renewals = statement
        .query_map([lease_id], |r| r.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(renewals)
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

/// The latest progress report of a WorkItem.
pub(crate) fn latest_progress(
    conn: &Connection,
    work_item_id: &str,
) -> Result<Option<ProgressView>, Error> {
    let found: Option<(u64, String, String, String)> = conn
        .row(
            "SELECT sequence, agent_id, reported_at, report FROM work_progress WHERE work_item_id = ?1",
            [work_item_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()?;
    found
        .map(|(sequence, agent_id, reported_at, report)| {
            Ok(ProgressView {
                sequence,
                agent_id,
                reported_at,
                report: from_json(&report)?,
            })
        })
        .transpose()
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

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    /// `work.start`'s retry look-up reads one WorkItem's history, never a Group's whole log.
    #[test]
    fn the_last_failure_is_found_without_scanning_the_log() {
        let conn = Connection::open_in_memory().expect("open");
        crate::schema::migrate(&conn).expect("schema");
        let mut plan = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", super::LAST_FAILURE))
            .expect("plan");
        let steps: Vec<String> = plan
            .query_map(["g", "w"], |row| row.get(3))
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("steps");
        assert!(
            steps.iter().all(|step| step.starts_with("SEARCH")),
            "{steps:?}"
        );
        assert!(
            steps[0].contains(" h "),
            "the history drives the loop: {steps:?}"
        );
    }
}
