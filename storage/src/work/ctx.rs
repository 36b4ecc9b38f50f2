//! One Command's execution context ([`Ctx`]: the writer transaction, the Command, the Events
//! appended so far) and the row changes every Command's effect is made of: saving a WorkItem
//! with the Event that describes it (`Ctx::record`), the Event payloads, leases released or
//! fenced, offers withdrawn, a new lease, a new Mission row. Every Event is a `WorkEvent`
//! carrying the aggregate's state after it and the Command's payload (`detail`), with
//! `causationCommandId`; every WorkItem Event is listed in `work_history`.
//!
//! The effects that use these are in `commands/` (one file per WorkItem Command or small
//! family), `missions.rs`, `owner.rs`, `questions.rs` and `expiry.rs`.

use chrono::{DateTime, Utc};
use weft_api::session::Role;
use weft_api::work::Command;
use weft_api::work::events::{WorkEvent, WorkEventKind};
use weft_api::work::views::AppendedEvent;
use weft_api::{ErrorCode, EventPayload, Id};

use super::{MissionRow, WorkRow, load_mission};
use weft_api::work::contract::Budgets;
use weft_api::work::offline::Binding;

use crate::clock::format_instant;
use crate::error::{Error, reject};
use crate::events;
use crate::faults::Faults;
use crate::rows::leases::{self, EndedBy, Kind};
use crate::rows::offers;
use crate::unit::Tx;

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
    /// The WorkItem row this Command saved last, as saved: what the expiry timer's deadline
    /// is computed from after the Command, without reading the row again (issue #41).
    pub(super) saved: Option<WorkRow>,
    /// Who signed the Command: named in every Event it causes (issue #50).
    pub(super) actor: Option<weft_api::work::events::Actor>,
    /// The WorkItem the Command names, as read ahead with its lookup of an earlier answer
    /// (`command.rs`), before the job changed anything: what `run` would have loaded.
    pub(super) work_item_read: Option<Option<WorkRow>>,
    /// The Mission of that WorkItem as read ahead with it, when the connection knew which
    /// it was (`rows::work_items::mission_known`); checked against the row before its use.
    pub(super) mission_read: Option<crate::rows::missions::Unparsed>,
}

impl<'t, 'c> Ctx<'t, 'c> {
    pub(super) fn new(
        tx: &'t Tx<'c>,
        command: &'t Command,
        now: DateTime<Utc>,
        roles: Vec<Role>,
        session_epoch: u64,
        faults: Faults,
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
            faults,
            authority: None,
            max_open_proposals: 0,
            resumes_attempt: false,
            saved: None,
            actor: None,
            work_item_read: None,
            mission_read: None,
        }
    }

    pub(super) fn group(&self) -> &str {
        self.command.group_id.as_str()
    }

    /// `seconds` from now (capped), as the index keeps instants.
    pub(super) fn later(&self, seconds: u64) -> DateTime<Utc> {
        crate::clock::stored(self.now + weft_api::work::capped_seconds(seconds))
    }

    /// Appends one Event caused by this Command.
    pub(super) fn emit(&mut self, kind: WorkEventKind, mut event: WorkEvent) -> Result<u64, Error> {
        event.actor = self.actor.clone();
        let sequence = events::append_caused(
            self.tx,
            &self.command.group_id,
            &EventPayload::Work(kind, event.clone()),
            self.command.command_id.as_str(),
            self.now,
        )?;
        if let Some(work_item) = &event.work_item_id {
            crate::rows::work_history::insert(
                self.tx,
                work_item.as_str(),
                sequence,
                kind.as_str(),
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
        self.saved = Some(row.clone());
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
        actor: None,
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
        actor: None,
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
    let live = offers::live_ids(ctx.tx, &row.work_item_id)?;
    for offer in live.iter().filter(|o| Some(o.as_str()) != except) {
        offers::withdraw(ctx.tx, &row.work_item_id, offer)?;
        let event = work_event(row, serde_json::json!({"offerId": offer, "reason": why}))?;
        ctx.emit(WorkEventKind::OfferWithdrawn, event)?;
    }
    Ok(())
}

/// Fences the owner of `row` (SM-6, OFL-1): every unreleased lease of the WorkItem ends at
/// `now`, the owner and its ownership deadline are cleared. The ownership epoch stays, so
/// the fenced owner's epoch never matches again and the next acceptance starts a higher one.
/// The caller saves the row and appends the Event that says why (`ownership.expired` for the
/// Authority's expiry and for `work.offer`'s SM-6 fencing). Answers the ids of the leases ended.
pub(super) fn fence_owner(
    tx: &Tx<'_>,
    row: &mut WorkRow,
    now: DateTime<Utc>,
) -> Result<Vec<String>, Error> {
    let ended = leases::close_open(tx, &row.work_item_id, now, EndedBy::Fenced)?;
    row.owner = None;
    row.ownership_expires_at = None;
    Ok(ended)
}

/// Ends the owner's hold (leases released, no owner, live offers withdrawn); the ownership
/// epoch stays, so a fenced owner's epoch never matches again.
pub(super) fn end_ownership(ctx: &mut Ctx<'_, '_>, row: &mut WorkRow) -> Result<(), Error> {
    fence_owner(ctx.tx, row, ctx.now)?;
    withdraw_offers(ctx, row, None, "the WorkItem moved on")?;
    Ok(())
}

pub(super) fn new_lease(
    ctx: &Ctx<'_, '_>,
    row: &WorkRow,
    kind: Kind,
    seconds: u64,
) -> Result<String, Error> {
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

pub(super) fn now_text(now: DateTime<Utc>) -> String {
    format_instant(now)
}
