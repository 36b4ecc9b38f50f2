//! `work.start` (T7; LSE-1, LSE-11, PRG-8, PRG-9): a new Execution Lease, the ownership
//! stretched to cover it, and a new attempt unless it resumes the current one.

use super::Step;
use crate::error::Error;
use crate::work::WorkRow;
use crate::work::ctx::{Ctx, new_lease};

pub(in crate::work) fn apply(ctx: &mut Ctx<'_, '_>, step: Step) -> Result<WorkRow, Error> {
    let Step {
        mut row,
        next,
        kind,
        payload,
    } = step;
    let seconds = row.contract.leases.execution_seconds;
    let lease = new_lease(ctx, &row, crate::rows::leases::Kind::Execution, seconds)?;
    // LSE-1, LSE-11: the ownership lasts at least as long as the live Execution
    // Lease it runs under, so an owner that starts late in its start window is
    // never refused, nor fenced by a new offer, while its lease is live.
    let lease_expires_at = ctx.later(seconds);
    if row
        .ownership_expires_at
        .is_none_or(|at| at < lease_expires_at)
    {
        row.ownership_expires_at = Some(lease_expires_at);
    }
    // PRG-8, LSE-12: only a start after a failure (or the first) is a new
    // attempt; a resume after a checkpoint, a preemption, an unblock, an expired
    // lease or a replaced session goes on with the same attempt and its key.
    let resumed = ctx.resumes_attempt;
    if !resumed {
        row.attempts += 1;
    }
    row.state = next;
    let mut payload = payload;
    if let serde_json::Value::Object(map) = &mut payload {
        map.insert("leaseId".into(), lease.clone().into());
        // PRG-9: the attempt key external operations of this attempt use.
        map.insert(
            "attemptKey".into(),
            crate::work::owner::attempt_key(&row)?.into(),
        );
        map.insert("attempt".into(), row.attempts.into());
        map.insert("resumed".into(), resumed.into());
    }
    ctx.record(&mut row, kind, payload)?;
    let started = ctx.appended.last().map_or(0, |e| e.sequence);
    crate::rows::leases::note_started(ctx.tx, &lease, started)?;
    Ok(row)
}
