//! Lease and ownership expiry, fencing and session revocation (LSE-1…3 expiry side, LSE-8,
//! LSE-9, GAP-1, SM-6, OFL-1): the Authority's own Events, appended without a Command.
//!
//! What expires, and where the WorkItem goes (the Authority-generated transitions that SM-3
//! permits alongside the table, DESIGN §10):
//! - `active` whose Execution Lease passed its `expiresAt`: the lease ends, `lease.expired`,
//!   the WorkItem returns to `queued` like a checkpoint without progress. The ownership is
//!   kept until its own deadline (not refreshed: a silent Worker earns no time), so the owner
//!   may start again under a new lease; past that deadline the next rule fences it at once.
//!   While `active` only the Execution Lease counts (LSE-11: nothing but the lease's expiry
//!   or revocation, the owner's checkpoint, cancellation or failure forces work out of
//!   `active`).
//! - `queued` or `blocked` whose ownership deadline (`ownership_expires_at`: the start
//!   deadline set at acceptance, refreshed at checkpoint; the blocked lease's expiry during a
//!   block) passed: the owner is fenced ([`super::ctx::fence_owner`]: its leases end, no
//!   owner, the epoch stays so it never matches again), `ownership.expired`; `queued` goes to
//!   `open` so the Coordinator may offer it again with a higher epoch (OFL-1), `blocked` stays
//!   `blocked` but ownerless, and `work.unblock` then answers `open` (SM-10).
//! - A replacement session of an Agent in a Group ([`revoke_for_new_session`], called by
//!   `sessions.rs` in the transaction that opens it) ends that Agent's Execution Leases there,
//!   `lease.revoked`, and returns each affected `active` WorkItem to `queued` (GAP-1) with its
//!   ownership deadline refreshed (the Agent just proved it is alive), before the new session
//!   can start anything. Blocked leases are not revoked: they hold ownership across a block
//!   (PRG-5), not the right to execute.
//!
//! How expiry is found: `Deadlines` (`engine/deadlines.rs`), an in-memory ordered set of
//! (instant, WorkItem) loaded at open ([`load`]) and noted whenever a Command leaves a
//! WorkItem with a deadline. It is lazy: an entry may be stale (a lease renewed, released or revoked since), so a due entry
//! only says "look at this WorkItem now"; [`expire_work_item`] reads the rows and appends
//! what is really due, then notes the WorkItem's next deadline. The timer
//! (`Store::expire_due`) therefore visits the due entries only, never every lease. Every
//! Command also runs [`expire_work_item`] on its own WorkItem first (`command.rs`), so
//! nothing depends on the timer having run.
//!
//! Threads: `Deadlines` is shared by the writer thread (Command jobs note deadlines) and the
//! timer; a `std::sync::Mutex` guards it for short critical sections with no `.await`.
//! Crash story: the set is memory only and the rows say what is due, so open rebuilds it.

use crate::sql::Connection;
use chrono::{DateTime, Utc};
use weft_api::work::events::WorkEventKind;
use weft_api::work::machine::WorkState;
use weft_api::{ErrorCode, EventPayload, Id};

use super::ctx::{fence_owner, save, work_event};
use super::{WorkRow, load_work_item};
use crate::clock::format_instant;
use crate::engine::deadlines::Deadline;
use crate::error::{Error, reject};
use crate::events;
use crate::rows::leases::{self, Claim, EndedBy, Refusal};
use crate::unit::Conn;
use crate::unit::Tx;

/// The most WorkItems one `expire_due` call handles in its one transaction; the rest stay due
/// for the next tick, so a burst of expiries never makes one huge write job.
pub(super) const MAX_PER_CALL: usize = 10_000;

/// Every deadline the rows hold, to fill `Deadlines` at open: unreleased leases and the
/// ownership deadlines of owned `queued` or `blocked` WorkItems. Stale ones cost one look when they fall due.
pub(crate) fn load(conn: &Connection) -> Result<Vec<(DateTime<Utc>, String)>, Error> {
    let mut found = leases::open_expiries(conn)?;
    found.extend(crate::rows::work_items::ownership_deadlines(conn)?);
    Ok(found)
}

/// Appends the Authority's own WorkItem Events (no `causationCommandId`).
struct Authority<'t, 'c> {
    tx: &'t Tx<'c>,
    now: DateTime<Utc>,
    n_events: usize,
}

impl<'t, 'c> Authority<'t, 'c> {
    fn new(tx: &'t Tx<'c>, now: DateTime<Utc>) -> Self {
        Self {
            tx,
            now,
            n_events: 0,
        }
    }

    /// Saves `row` at its next revision and appends `kind` describing it.
    fn record(
        &mut self,
        row: &mut WorkRow,
        kind: WorkEventKind,
        detail: serde_json::Value,
    ) -> Result<(), Error> {
        row.revision += 1;
        save(self.tx, row)?;
        let event = work_event(row, detail)?;
        let group = Id::parse("groupId", &row.group_id)?;
        let sequence = events::append(self.tx, &group, &EventPayload::Work(kind, event), self.now)?;
        crate::rows::work_history::insert(self.tx, &row.work_item_id, sequence, kind.as_str())?;
        self.n_events += 1;
        Ok(())
    }
}

/// The next instant at which something of `row` may expire: the Execution Lease's expiry
/// while `active`, the ownership deadline while `queued` or `blocked` with an owner.
pub(crate) fn deadline_of(
    conn: &(impl Conn + ?Sized),
    row: &WorkRow,
) -> Result<Option<DateTime<Utc>>, Error> {
    Ok(match row.state {
        WorkState::Active => leases::current(conn, &row.work_item_id)?
            .filter(|lease| lease.kind == leases::Kind::Execution)
            .map(|lease| lease.expires_at),
        WorkState::Queued | WorkState::Blocked if row.owner.is_some() => row.ownership_expires_at,
        _ => None,
    })
}

/// The WorkItem's next deadline as the rows say now (noted after every Command).
pub(crate) fn next_deadline(
    conn: &Connection,
    work_item_id: &str,
) -> Result<Option<DateTime<Utc>>, Error> {
    match load_work_item(conn, work_item_id)? {
        Some(row) => deadline_of(conn, &row),
        None => Ok(None),
    }
}

/// Appends what is due at `now` for one WorkItem (see the module comment for the rules);
/// answers how many Events it appended and the WorkItem's next deadline.
pub(crate) fn expire_work_item(
    tx: &Tx<'_>,
    work_item_id: &str,
    now: DateTime<Utc>,
) -> Result<(usize, Option<DateTime<Utc>>), Error> {
    // Another server may expire it at the same time: its Group's lock first, then the row.
    crate::rows::work_items::lock_group(tx, work_item_id)?;
    expire_from(tx, work_item_id, None, now)
}

/// [`expire_work_item`] for a WorkItem whose row the caller just loaded in this transaction:
/// the row is not read again unless something expired (issue #41, one load per row).
pub(crate) fn expire_loaded(
    tx: &Tx<'_>,
    row: WorkRow,
    now: DateTime<Utc>,
) -> Result<(usize, Option<DateTime<Utc>>), Error> {
    let work_item_id = row.work_item_id.clone();
    expire_from(tx, &work_item_id, Some(row), now)
}

fn expire_from(
    tx: &Tx<'_>,
    work_item_id: &str,
    mut loaded: Option<WorkRow>,
    now: DateTime<Utc>,
) -> Result<(usize, Option<DateTime<Utc>>), Error> {
    let mut authority = Authority::new(tx, now);
    // At most two rounds: an expired Execution Lease, then an ownership already past due.
    loop {
        let row = match loaded.take() {
            Some(row) => Some(row),
            None => load_work_item(tx, work_item_id)?,
        };
        let Some(mut row) = row else {
            return Ok((authority.n_events, None));
        };
        let Some(at) = deadline_of(tx, &row)? else {
            return Ok((authority.n_events, None));
        };
        if at > authority.now {
            return Ok((authority.n_events, Some(at)));
        }
        if row.state == WorkState::Active {
            // LSE-8: timeout expires the Execution Lease; back to the ready queue.
            let lease = leases::current(tx, work_item_id)?.map(|lease| lease.lease_id);
            if let Some(lease) = &lease {
                leases::end(tx, lease.as_str(), authority.now, EndedBy::Expired)?;
            }
            row.state = WorkState::Queued;
            authority.record(
                &mut row,
                WorkEventKind::LeaseExpired,
                serde_json::json!({"expiresAt": format_instant(at), "kind": "execution", "leaseId": lease,
                                   "rule": "LSE-8"}),
            )?;
            continue;
        }
        // OFL-1 / SM-6: a missed start deadline or an expired ownership fences the owner.
        let previous_owner = row.owner.clone();
        let leases = fence_owner(tx, &mut row, authority.now)?;
        if row.state == WorkState::Queued {
            row.state = WorkState::Open;
        }
        authority.record(
            &mut row,
            WorkEventKind::OwnershipExpired,
            serde_json::json!({"expiresAt": format_instant(at), "leases": leases,
                               "previousOwner": previous_owner, "rule": "OFL-1"}),
        )?;
        return Ok((authority.n_events, None));
    }
}

/// LSE-9 / GAP-1: the Execution Leases of `agent_id` in `group_id` end because a new session
/// (`session_epoch`) replaced the one they were granted under; each affected `active`
/// WorkItem returns to `queued`. Runs in the transaction that opens the session. Answers the
/// WorkItems touched with their next deadlines, for `Deadlines`.
pub(crate) fn revoke_for_new_session(
    tx: &Tx<'_>,
    group_id: &str,
    agent_id: &str,
    session_epoch: u64,
    now: DateTime<Utc>,
) -> Result<Vec<(String, Option<Deadline>)>, Error> {
    let work_items = leases::open_execution_work_items(tx, agent_id, group_id)?;
    let mut touched = Vec::new();
    for work_item_id in work_items {
        // A lease already past its expiry expired; it is not revoked.
        expire_work_item(tx, &work_item_id, now)?;
        let mut authority = Authority::new(tx, now);
        let Some(mut row) = load_work_item(tx, &work_item_id)? else {
            continue;
        };
        let Some(lease) = leases::current(tx, &work_item_id)?.filter(|lease| {
            lease.kind == leases::Kind::Execution && lease.agent_id.as_str() == agent_id
        }) else {
            touched.push((work_item_id.clone(), deadline_of(tx, &row)?));
            continue;
        };
        leases::end(tx, lease.lease_id.as_str(), authority.now, EndedBy::Revoked)?;
        if row.state == WorkState::Active {
            row.state = WorkState::Queued;
            let seconds = weft_api::work::capped_seconds(row.contract.leases.ownership_seconds);
            row.ownership_expires_at = Some(crate::clock::stored(now + seconds));
        }
        authority.record(
            &mut row,
            WorkEventKind::LeaseRevoked,
            serde_json::json!({"kind": lease.kind.as_str(), "leaseId": lease.lease_id,
                               "reason": "session_replaced", "rule": "LSE-9",
                               "sessionEpoch": session_epoch}),
        )?;
        touched.push((work_item_id, deadline_of(tx, &row)?));
    }
    Ok(touched)
}

/// LSE-5: a Command that quotes a lease must quote a live lease of its WorkItem; one that
/// ended (released, expired or revoked) or belongs to another WorkItem is `stale_lease`,
/// whatever the WorkItem's state now (the table would otherwise answer for a state the
/// Worker cannot know it left). Whether it is the *current* lease is `checks::check_lease`.
pub(crate) fn check_quoted_lease(
    c: &(impl crate::unit::Conn + ?Sized),
    quoted: &str,
    row: &WorkRow,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    // Mostly the WorkItem's current lease, which the job remembers for its view and its
    // checks: read once (one statement fewer for every Command under a lease).
    let lease = match leases::current(c, &row.work_item_id)? {
        Some(current) if current.lease_id.as_str() == quoted => Some(current),
        _ => leases::load(c.conn(), quoted)?,
    };
    let Some(lease) = lease else {
        return Err(reject(
            ErrorCode::StaleLease,
            format!("no lease {quoted} (LSE-5)"),
        ));
    };
    let claim = Claim {
        lease_id: quoted,
        work_item_id: &row.work_item_id,
        signer: None,
        acts_for: None,
    };
    let why = match lease.admits(&claim, now) {
        Ok(()) => return Ok(()),
        Err(Refusal::Ended) => format!(
            "lease {quoted} ended at {} (released, expired or revoked: LSE-8)",
            lease.released_at.map(format_instant).unwrap_or_default()
        ),
        Err(Refusal::Expired) => format!(
            "lease {quoted} expired at {}",
            format_instant(lease.expires_at)
        ),
        Err(_) => format!("lease {quoted} is not a lease of {}", row.work_item_id),
    };
    Err(reject(ErrorCode::StaleLease, format!("{why} (LSE-5)")))
}
