//! What an accepted Command does: the row changes and the Events, in the writer transaction
//! that `command.rs` opened. Every Event is a `WorkEvent` carrying the aggregate's state after
//! it and the Command's payload (`detail`), with `causationCommandId`; every WorkItem Event is
//! listed in `work_history`.
//!
//! Mission Commands and `work.authorize` are in `missions.rs`; the rule-specific checks
//! (offer standing, Evidence, the quoted lease) in `checks.rs`. The decisions themselves are
//! in `weft_api::work::machine`. The file is long (about 670 lines) because the effect of each
//! WorkItem Command stays in one match, so a Command's row changes read in one place, and the
//! usage charge that precedes every effect (`charge_usage`, OFL-11) sits beside it.

use crate::sql::Cached as _;
use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension as _, params};
use weft_api::session::Role;
use weft_api::work::events::{WorkEvent, WorkEventKind};
use weft_api::work::machine::{MissionState, Transition, WorkState};
use weft_api::work::views::AppendedEvent;
use weft_api::work::{Command, CommandBody, CommandType};
use weft_api::{ErrorCode, EventPayload, Id};

use super::command::{now_text, quotes_lease};
use super::{MissionRow, WorkRow, deps, from_json, load_mission, name, to_json};
use weft_api::work::contract::Budgets;
use weft_api::work::offline::Binding;

use crate::access::membership;
use crate::db::Tx;
use crate::error::{Error, reject};
use crate::events;
use crate::faults::{Faults, ReconcileStep};
use crate::rows::leases::{self, EndedBy, Kind};

/// One Command's execution: the transaction, the Command, and the Events appended so far.
pub(super) struct Ctx<'t, 'c> {
    pub(super) tx: &'t Tx<'c>,
    pub(super) command: &'t Command,
    pub(super) now: DateTime<Utc>,
    pub(super) now_text: String,
    pub(super) roles: Vec<Role>,
    pub(super) session_epoch: u64,
    pub(super) appended: Vec<AppendedEvent>,
    /// The binding of a buffered Command (OFL-6/7), checked in `command.rs`.
    pub(super) offline: Option<Binding>,
    /// The usage delta the Command charges (DESIGN §12).
    pub(super) usage: Option<Budgets>,
    pub(super) faults: Faults,
    /// The Authority's key, for records it signs in this transaction (T16).
    pub(super) authority: Option<std::sync::Arc<ed25519_dalek::SigningKey>>,
    /// The Group's open-proposal cap (issue #40; 0: none), for `work.propose`.
    pub(super) max_open_proposals: u64,
    /// A `work.start` resumes the current attempt (PRG-8), read once in `command.rs`.
    pub(super) resumes_attempt: bool,
}

impl<'t, 'c> Ctx<'t, 'c> {
    pub(super) fn new(
        tx: &'t Tx<'c>,
        command: &'t Command,
        now: DateTime<Utc>,
        roles: Vec<Role>,
        session_epoch: u64,
    ) -> Self {
        Self {
            tx,
            command,
            now,
            now_text: now_text(now),
            roles,
            session_epoch,
            appended: Vec::new(),
            offline: None,
            usage: None,
            faults: Faults::default(),
            authority: None,
            max_open_proposals: 0,
            resumes_attempt: false,
        }
    }

    pub(super) fn group(&self) -> &str {
        self.command.group_id.as_str()
    }

    pub(super) fn later(&self, seconds: u64) -> String {
        now_text(self.now + weft_api::work::capped_seconds(seconds))
    }

    /// Appends one Event caused by this Command.
    pub(super) fn emit(&mut self, kind: WorkEventKind, event: WorkEvent) -> Result<u64, Error> {
        let sequence = events::append_caused(
            self.tx,
            &self.command.group_id,
            &EventPayload::Work(kind, event.clone()),
            self.command.command_id.as_str(),
            self.now,
        )?;
        if let Some(work_item) = &event.work_item_id {
            self.tx.run(
                "INSERT INTO work_history (work_item_id, sequence) VALUES (?1, ?2)",
                params![work_item.as_str(), sequence],
            )?;
        }
        self.appended.push(AppendedEvent {
            sequence,
            kind: kind.as_str().to_owned(),
        });
        Ok(sequence)
    }

    /// Saves `row` at its next revision and appends `kind` describing it.
    pub(super) fn record(
        &mut self,
        row: &mut WorkRow,
        kind: WorkEventKind,
        detail: serde_json::Value,
    ) -> Result<(), Error> {
        row.revision += 1;
        save(self.tx, row)?;
        let event = work_event(row, detail)?;
        self.emit(kind, event)?;
        Ok(())
    }
}

pub(super) fn id(text: &str) -> Result<Id, Error> {
    Ok(Id::parse("id", text)?)
}

pub(super) fn work_event(row: &WorkRow, detail: serde_json::Value) -> Result<WorkEvent, Error> {
    Ok(WorkEvent {
        mission_id: id(&row.mission_id)?,
        work_item_id: Some(id(&row.work_item_id)?),
        mission_state: None,
        state: Some(row.state),
        revision: row.revision,
        contract_revision: row.contract_revision,
        ownership_epoch: row.ownership_epoch,
        owner: row.owner.as_deref().map(id).transpose()?,
        detail,
    })
}

pub(super) fn mission_event(
    row: &MissionRow,
    detail: serde_json::Value,
) -> Result<WorkEvent, Error> {
    Ok(WorkEvent {
        mission_id: id(&row.mission_id)?,
        work_item_id: None,
        mission_state: Some(row.state),
        state: None,
        revision: row.revision,
        contract_revision: 0,
        ownership_epoch: 0,
        owner: None,
        detail,
    })
}

pub(super) fn save(tx: &Tx<'_>, row: &WorkRow) -> Result<(), Error> {
    crate::rows::work_items::save(tx, row)
}

pub(super) fn insert_mission(
    tx: &Tx<'_>,
    row: &MissionRow,
    sequence_hint: u64,
) -> Result<(), Error> {
    tx.run(
        "INSERT INTO missions (mission_id, group_id, title, priority_class, budget, state, revision,
                               parent_work_item_id, child_failure_policy, created_sequence)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            row.mission_id,
            row.group_id,
            row.title,
            name(&row.priority_class)?,
            to_json(&row.budget)?,
            name(&row.state)?,
            row.revision,
            row.parent_work_item_id,
            row.child_failure_policy.as_ref().map(name).transpose()?,
            sequence_hint
        ],
    )?;
    Ok(())
}

/// Ids of Missions and WorkItems are unique in the whole store (DESIGN §10).
pub(super) fn id_taken(tx: &Tx<'_>, table: &str, column: &str, id: &str) -> Result<bool, Error> {
    Ok(tx
        .row(
            &format!("SELECT 1 FROM {table} WHERE {column} = ?1"),
            [id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

pub(super) fn expect_new(ctx: &Ctx<'_, '_>) -> Result<(), Error> {
    match ctx.command.expected_revision {
        Some(0) | None => Ok(()),
        Some(other) => Err(reject(
            ErrorCode::StaleRevision,
            format!("a new aggregate is at revision 0, not {other} (SM-3)"),
        )),
    }
}

/// The Mission as this Group sees it: another Group's is `not_found`.
pub(super) fn group_mission(ctx: &Ctx<'_, '_>, mission_id: &Id) -> Result<MissionRow, Error> {
    match load_mission(ctx.tx, mission_id.as_str())? {
        Some(row) if row.group_id == ctx.group() => Ok(row),
        _ => Err(reject(
            ErrorCode::NotFound,
            format!("no Mission {mission_id} in {}", ctx.group()),
        )),
    }
}

pub(super) fn detail(value: &impl serde::Serialize) -> Result<serde_json::Value, Error> {
    serde_json::to_value(value).map_err(Error::backend)
}

/// Releases every unreleased lease of the WorkItem.
pub(super) fn release_leases(ctx: &Ctx<'_, '_>, work_item_id: &str) -> Result<(), Error> {
    leases::close_open(ctx.tx, work_item_id, ctx.now, EndedBy::Released)?;
    Ok(())
}

/// Withdraws every live offer of the WorkItem but `except`, each with its `offer.withdrawn`.
pub(super) fn withdraw_offers(
    ctx: &mut Ctx<'_, '_>,
    row: &WorkRow,
    except: Option<&str>,
    why: &str,
) -> Result<(), Error> {
    let mut statement = ctx.tx.prepare_cached(
        "SELECT offer_id FROM offers WHERE work_item_id = ?1 AND status = 'live' ORDER BY sequence",
    )?;
    let live = statement
        .query_map([&row.work_item_id], |r| r.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    drop(statement);
    for offer in live.iter().filter(|o| Some(o.as_str()) != except) {
        ctx.tx.run(
            "UPDATE offers SET status = 'withdrawn' WHERE work_item_id = ?1 AND offer_id = ?2",
            params![row.work_item_id, offer],
        )?;
        let event = work_event(row, serde_json::json!({"offerId": offer, "reason": why}))?;
        ctx.emit(WorkEventKind::OfferWithdrawn, event)?;
    }
    Ok(())
}

/// Fences the owner of `row` (SM-6, OFL-1): every unreleased lease of the WorkItem ends at
/// `now_text`, the owner and its ownership deadline are cleared. The ownership epoch stays, so
/// the fenced owner's epoch never matches again and the next acceptance starts a higher one.
/// The caller saves the row and appends the Event that says why (`ownership.expired` for the
/// Authority's expiry and for `work.offer`'s SM-6 fencing). Answers the ids of the leases ended.
pub(super) fn fence_owner(
    tx: &Tx<'_>,
    row: &mut WorkRow,
    now_text: &str,
) -> Result<Vec<String>, Error> {
    let ended = leases::close_open(
        tx,
        &row.work_item_id,
        crate::rows::instant(now_text)?,
        EndedBy::Fenced,
    )?;
    row.owner = None;
    row.ownership_expires_at = None;
    Ok(ended)
}

/// Ends the owner's hold (leases released, no owner, live offers withdrawn); the ownership
/// epoch stays, so a fenced owner's epoch never matches again.
pub(super) fn end_ownership(ctx: &mut Ctx<'_, '_>, row: &mut WorkRow) -> Result<(), Error> {
    fence_owner(ctx.tx, row, &ctx.now_text)?;
    withdraw_offers(ctx, row, None, "the WorkItem moved on")?;
    Ok(())
}

fn new_lease(ctx: &Ctx<'_, '_>, row: &WorkRow, kind: Kind, seconds: u64) -> Result<String, Error> {
    let lease_id = format!("lease-{}", uuid::Uuid::now_v7());
    leases::insert(
        ctx.tx,
        &leases::New {
            lease_id: &lease_id,
            work_item_id: &row.work_item_id,
            kind,
            agent_id: ctx.command.agent_id.as_str(),
            session_epoch: ctx.session_epoch,
            ownership_epoch: row.ownership_epoch,
            started_at: ctx.now,
            expires_at: ctx.now + weft_api::work::capped_seconds(seconds),
        },
    )?;
    Ok(lease_id)
}

/// A WorkItem Command the table accepted: its effect and Events.
pub(super) fn work(
    ctx: &mut Ctx<'_, '_>,
    mut row: WorkRow,
    mission: MissionRow,
    transition: Transition,
    body: &CommandBody,
) -> Result<serde_json::Value, Error> {
    let coordinator = ctx.roles.contains(&Role::Coordinator);
    // T15–T17: while the child Mission runs, only its outcome (or a cancel or failure of
    // the parent) moves the parent WorkItem.
    if let Some(child) = &row.child_mission_id
        && matches!(
            ctx.command.kind,
            CommandType::WorkOffer | CommandType::WorkUnblock | CommandType::MissionCreateChild
        )
        && load_mission(ctx.tx, child)?.is_some_and(|m| !m.state.is_terminal())
    {
        return Err(reject(
            ErrorCode::IllegalTransition,
            format!("child Mission {child} is still running (T15-T17)"),
        ));
    }
    if quotes_lease(ctx.command.kind, coordinator) {
        super::checks::check_lease(ctx, &row)?;
    }
    let kind = WorkEventKind::parse(transition.event).ok_or_else(|| {
        reject(
            ErrorCode::Internal,
            format!("no Event kind {}", transition.event),
        )
    })?;
    let mut payload = command_detail(body)?;
    if ctx.offline.is_some()
        && let serde_json::Value::Object(map) = &mut payload
    {
        // A reconciled Command's delta is in its `resource_usage_recorded`; its own Event
        // leaves it out, so a fold of the log counts it once (fsck).
        map.remove("usage");
    }
    let reconcile = charge_usage(ctx, &mut row)?;
    match body {
        CommandBody::WorkOffer(p) => {
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
            if id_taken_offer(ctx, &row, p.offer_id.as_str())? {
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
                let expired_at = row.ownership_expires_at.clone();
                let leases = fence_owner(ctx.tx, &mut row, &ctx.now_text)?;
                ctx.record(
                    &mut row,
                    WorkEventKind::OwnershipExpired,
                    serde_json::json!({"expiresAt": expired_at, "leases": leases,
                                       "previousOwner": previous_owner, "rule": "SM-6"}),
                )?;
            }
            // T3: the new offer replaces live ones.
            withdraw_offers(ctx, &row, None, "replaced by a new offer")?;
            let sequence_placeholder = 0;
            ctx.tx.run(
                "INSERT INTO offers (work_item_id, offer_id, candidates, expires_at, selection_basis, contract_revision,
                                     status, declined, sequence)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'live', '{}', ?7)",
                params![
                    row.work_item_id,
                    p.offer_id.as_str(),
                    to_json(&p.candidates)?,
                    now_text(p.expires_at.to_utc()),
                    to_json(&p.selection_basis)?,
                    row.contract_revision,
                    sequence_placeholder
                ],
            )?;
            row.state = transition.next;
            ctx.record(&mut row, kind, payload)?;
            let sequence = ctx.appended.last().map_or(0, |e| e.sequence);
            ctx.tx.run(
                "UPDATE offers SET sequence = ?3 WHERE work_item_id = ?1 AND offer_id = ?2",
                params![row.work_item_id, p.offer_id.as_str(), sequence],
            )?;
        }
        CommandBody::OfferRef(p) if ctx.command.kind == CommandType::WorkAcceptOffer => {
            // T4 / SM-7 / OFR-5: one step: the offer is accepted, the others withdrawn, a new
            // ownership epoch begins.
            // The acceptance is of the current contract (CON-5: an owner accepting a revised
            // one again names the offer it accepted before).
            ctx.tx.run(
                "UPDATE offers SET status = 'accepted', contract_revision = ?3 WHERE work_item_id = ?1 AND offer_id = ?2",
                params![row.work_item_id, p.offer_id.as_str(), row.contract_revision],
            )?;
            row.ownership_epoch += 1;
            row.owner = Some(ctx.command.agent_id.to_string());
            row.ownership_expires_at = Some(ctx.later(row.contract.leases.ownership_seconds));
            row.state = transition.next;
            ctx.record(&mut row, kind, payload)?;
            withdraw_offers(
                ctx,
                &row,
                Some(p.offer_id.as_str()),
                "another candidate accepted",
            )?;
        }
        CommandBody::WorkDecline(p) => {
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
        }
        CommandBody::WorkAsk(p) => super::questions::ask(ctx, &mut row, kind, payload, p)?,
        CommandBody::WorkAnswer(p) => super::questions::answer(ctx, &mut row, kind, payload, p)?,
        CommandBody::WorkRef(_) => match ctx.command.kind {
            CommandType::ApprovalGrantExecution => {
                row.approval_granted = true;
                ctx.record(&mut row, kind, payload)?;
            }
            CommandType::WorkStart => {
                let seconds = row.contract.leases.execution_seconds;
                let lease = new_lease(ctx, &row, Kind::Execution, seconds)?;
                // LSE-1, LSE-11: the ownership lasts at least as long as the live Execution
                // Lease it runs under, so an owner that starts late in its start window is
                // never refused, nor fenced by a new offer, while its lease is live.
                let lease_expires_at = ctx.later(seconds);
                if row
                    .ownership_expires_at
                    .as_deref()
                    .is_none_or(|at| *at < *lease_expires_at)
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
                row.state = transition.next;
                let mut payload = payload;
                if let serde_json::Value::Object(map) = &mut payload {
                    map.insert("leaseId".into(), lease.clone().into());
                    // PRG-9: the attempt key external operations of this attempt use.
                    map.insert("attemptKey".into(), super::owner::attempt_key(&row)?.into());
                    map.insert("attempt".into(), row.attempts.into());
                    map.insert("resumed".into(), resumed.into());
                }
                ctx.record(&mut row, kind, payload)?;
                let started = ctx.appended.last().map_or(0, |e| e.sequence);
                leases::note_started(ctx.tx, &lease, started)?;
            }
            CommandType::LeaseRenew => super::owner::renew(ctx, &mut row, kind, payload)?,
            CommandType::PreemptionRequest => {
                super::owner::request_preemption(ctx, &mut row, kind, payload)?;
            }
            CommandType::WorkUnblock => {
                release_leases(ctx, &row.work_item_id)?;
                if transition.next == WorkState::Open {
                    row.owner = None;
                    row.ownership_expires_at = None;
                }
                row.state = transition.next;
                ctx.record(&mut row, kind, payload)?;
            }
            _ => {
                // work.accept_result (T12)
                release_leases(ctx, &row.work_item_id)?;
                row.ownership_expires_at = None;
                row.state = transition.next;
                ctx.record(&mut row, kind, payload)?;
            }
        },
        CommandBody::WorkProgress(p) => super::owner::progress(ctx, &mut row, kind, payload, p)?,
        CommandBody::WorkCheckpoint(_) => {
            release_leases(ctx, &row.work_item_id)?;
            // A reconciled checkpoint closed its historical lease when it was buffered: what
            // the Worker buffered after it is past the lease (OFL-9).
            if let Some(binding) = &ctx.offline {
                leases::close(
                    ctx.tx,
                    binding.lease_id.as_str(),
                    binding.buffered_at.to_utc(),
                )?;
            }
            row.ownership_expires_at = Some(ctx.later(row.contract.leases.ownership_seconds));
            row.state = transition.next;
            ctx.record(&mut row, kind, payload)?;
        }
        CommandBody::WorkBlock(_) => {
            release_leases(ctx, &row.work_item_id)?;
            let seconds = row.contract.leases.blocked_seconds;
            new_lease(ctx, &row, Kind::Blocked, seconds)?;
            // PRG-5: ownership is kept for the blocked lease.
            row.ownership_expires_at = Some(ctx.later(seconds));
            row.state = transition.next;
            ctx.record(&mut row, kind, payload)?;
        }
        CommandBody::WorkSubmit(_) => {
            release_leases(ctx, &row.work_item_id)?;
            row.state = transition.next;
            ctx.record(&mut row, kind, payload)?;
            // EVD-3: reviewers (subscribed to the Group's stream) are asked for the criteria
            // no review covers yet; `work.accept_result` waits for the combined Evidence.
            let awaiting = super::checks::criteria_awaiting_review(ctx, &row)?;
            if !awaiting.is_empty() {
                let detail = serde_json::json!({"criteria": awaiting, "rule": "EVD-3"});
                ctx.emit(
                    WorkEventKind::WorkReviewRequested,
                    work_event(&row, detail)?,
                )?;
            }
        }
        CommandBody::WorkFail(_) | CommandBody::WorkCancel(_) => {
            end_ownership(ctx, &mut row)?;
            row.state = transition.next;
            ctx.record(&mut row, kind, payload)?;
            super::missions::end_child_of(ctx, &row)?;
        }
        CommandBody::WorkReviseContract(p) => {
            deps::check(
                ctx.tx,
                ctx.group(),
                &row.mission_id,
                &row.work_item_id,
                &p.contract.depends_on,
            )?;
            deps::set(ctx.tx, &row.work_item_id, &p.contract.depends_on)?;
            // CON-5: renewed acceptance. Live offers go (an `offered` WorkItem waits for a new
            // one); a `queued` owner keeps its ownership and accepts again before it starts.
            withdraw_offers(ctx, &row, None, "the contract was revised (CON-5)")?;
            row.contract = p.contract.clone();
            row.contract_revision += 1;
            row.approval_granted = false;
            row.state = transition.next;
            ctx.record(&mut row, kind, payload)?;
        }
        CommandBody::MissionCreateChild(p) => {
            expect_new_child(ctx, p.child_mission_id.as_str())?;
            // T15 / SM-11: ownership is fenced while the child Mission runs.
            end_ownership(ctx, &mut row)?;
            let child = MissionRow {
                mission_id: p.child_mission_id.to_string(),
                group_id: ctx.group().to_owned(),
                title: p.title.clone(),
                // SCH-6: a child runs at its parent Mission's priority, which the Group's
                // policy bounded when the parent was created.
                priority_class: mission.priority_class,
                budget: row.contract.budgets.clone(),
                state: MissionState::Active,
                revision: 1,
                parent_work_item_id: Some(row.work_item_id.clone()),
                child_failure_policy: Some(p.child_failure_policy),
            };
            insert_mission(ctx.tx, &child, 0)?;
            ctx.emit(
                WorkEventKind::MissionCreated,
                mission_event(&child, payload.clone())?,
            )?;
            row.child_mission_id = Some(child.mission_id.clone());
            row.state = transition.next;
            ctx.record(&mut row, kind, payload)?;
        }
        _ => {
            return Err(reject(
                ErrorCode::InvalidCommand,
                format!("{} does not act on a WorkItem", ctx.command.kind.as_str()),
            ));
        }
    }
    if reconcile {
        ctx.faults.after(ReconcileStep::CommandApplied)?;
    }
    detail(&super::work_view(ctx.tx, &row, &ctx.now_text)?)
}

/// The Command's usage delta, before its effect: a buffered Command's first appends
/// `resource_usage_recorded` (OFL-11 step 1); either is then charged to the whole budget
/// lineage or refused `budget_exceeded` (step 2, OFL-12). Answers whether this was a
/// reconciliation (a nonzero offline delta), whose step 3 is the Command's own effect.
fn charge_usage(ctx: &mut Ctx<'_, '_>, row: &mut WorkRow) -> Result<bool, Error> {
    let Some(delta) = ctx.usage.clone().filter(|usage| !usage.is_zero()) else {
        return Ok(false);
    };
    let reconcile = match ctx.offline.clone() {
        Some(binding) => {
            let detail = super::offline::usage_detail(ctx, &binding, &delta)?;
            ctx.record(row, WorkEventKind::ResourceUsageRecorded, detail)?;
            ctx.faults.after(ReconcileStep::UsageRecorded)?;
            true
        }
        None => false,
    };
    let whole_group = crate::access::mission_scope(
        ctx.tx,
        ctx.command.group_id.as_str(),
        ctx.command.agent_id.as_str(),
    )? == crate::access::MissionScope::Group;
    super::budget::charge_lineage(ctx.tx, row, &delta, whole_group)?;
    if reconcile {
        ctx.faults.after(ReconcileStep::LineageCharged)?;
    }
    Ok(reconcile)
}

fn expect_new_child(ctx: &Ctx<'_, '_>, mission_id: &str) -> Result<(), Error> {
    if id_taken(ctx.tx, "missions", "mission_id", mission_id)? {
        return Err(reject(
            ErrorCode::Conflict,
            format!("Mission id {mission_id} is taken"),
        ));
    }
    Ok(())
}

fn id_taken_offer(ctx: &Ctx<'_, '_>, row: &WorkRow, offer_id: &str) -> Result<bool, Error> {
    Ok(ctx
        .tx
        .row(
            "SELECT 1 FROM offers WHERE work_item_id = ?1 AND offer_id = ?2",
            params![row.work_item_id, offer_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// The Command's payload as the Event's `detail`.
fn command_detail(body: &CommandBody) -> Result<serde_json::Value, Error> {
    match body {
        CommandBody::WorkOffer(p) => detail(p),
        CommandBody::OfferRef(p) => detail(p),
        CommandBody::WorkDecline(p) => detail(p),
        CommandBody::WorkAsk(p) => detail(p),
        CommandBody::WorkAnswer(p) => detail(p),
        CommandBody::WorkRef(p) => detail(p),
        CommandBody::WorkCheckpoint(p) => detail(p),
        CommandBody::WorkBlock(p) => detail(p),
        CommandBody::WorkSubmit(p) => detail(p),
        CommandBody::WorkFail(p) => detail(p),
        CommandBody::WorkCancel(p) => detail(p),
        CommandBody::WorkReviseContract(p) => detail(p),
        CommandBody::MissionCreateChild(p) => detail(p),
        CommandBody::MissionCreate(p) => detail(p),
        CommandBody::MissionClose(p) => detail(p),
        CommandBody::WorkPropose(p) => detail(p),
        CommandBody::WorkAuthorize(p) => detail(p),
        CommandBody::WorkProgress(p) => detail(p),
    }
}
