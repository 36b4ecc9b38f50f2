//! What an accepted WorkItem Command does, in the writer transaction `command.rs` opened: the
//! checks every effect shares (a running child Mission, the quoted lease, the usage charge that
//! precedes every effect, OFL-11), then an exhaustive `match` on the Command type that
//! delegates to the Command's own file in `commands/` (or its family's: `owner.rs`,
//! `questions.rs`). The match has no wildcard arm, so a new `CommandType` does not compile
//! until it has an effect. Mission Commands and `work.authorize` never get here (`missions.rs`).
//!
//! `Ctx` and the row changes effects are made of are in `ctx.rs`; the rule-specific checks
//! (offer standing, Evidence, the quoted lease) in `checks.rs`; the decisions themselves in
//! `weft_api::work::machine`.

use weft_api::ErrorCode;
use weft_api::session::Role;
use weft_api::work::events::WorkEventKind;
use weft_api::work::machine::Transition;
use weft_api::work::{CommandBody, CommandType};

use super::answer::Answered;
use super::commands::{self, Step};
use super::ctx::{Ctx, detail};
use super::{MissionRow, WorkRow, load_mission};
use crate::error::{Error, reject};
use crate::faults::ReconcileStep;

/// A WorkItem Command the table accepted: its effect and Events.
pub(super) fn work(
    ctx: &mut Ctx<'_, '_>,
    mut row: WorkRow,
    mission: MissionRow,
    transition: Transition,
    body: &CommandBody,
) -> Result<Answered, Error> {
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
    let mut payload = command_detail(body)?;
    if ctx.offline.is_some()
        && let serde_json::Value::Object(map) = &mut payload
    {
        // A reconciled Command's delta is in its `resource_usage_recorded`; its own Event
        // leaves it out, so a fold of the log counts it once (fsck).
        map.remove("usage");
    }
    let reconcile = charge_usage(ctx, &mut row)?;
    let step = Step {
        row,
        next: transition.next,
        kind: transition.event,
        payload,
    };
    use CommandBody as B;
    use CommandType as C;
    let row = match (ctx.command.kind, body) {
        (C::WorkOffer, B::WorkOffer(p)) => commands::offer::apply(ctx, step, p)?,
        (C::WorkAcceptOffer, B::OfferRef(p)) => commands::accept_offer::apply(ctx, step, p)?,
        (C::WorkDeclineOffer, B::WorkDecline(p)) => commands::decline_offer::apply(ctx, step, p)?,
        (C::WorkAsk, B::WorkAsk(p)) => in_place(ctx, step, |ctx, row, kind, payload| {
            super::questions::ask(ctx, row, kind, payload, p)
        })?,
        (C::WorkAnswer, B::WorkAnswer(p)) => in_place(ctx, step, |ctx, row, kind, payload| {
            super::questions::answer(ctx, row, kind, payload, p)
        })?,
        (C::ApprovalGrantExecution, B::WorkRef(_)) => commands::grant_execution::apply(ctx, step)?,
        (C::WorkStart, B::WorkRef(_)) => commands::start::apply(ctx, step)?,
        (C::LeaseRenew, B::WorkRef(_)) => in_place(ctx, step, super::owner::renew)?,
        (C::PreemptionRequest, B::WorkRef(_)) => {
            in_place(ctx, step, super::owner::request_preemption)?
        }
        (C::WorkProgress, B::WorkProgress(p)) => in_place(ctx, step, |ctx, row, kind, payload| {
            super::owner::progress(ctx, row, kind, payload, p)
        })?,
        (C::WorkUnblock, B::WorkRef(_)) => commands::unblock::apply(ctx, step)?,
        (C::WorkAcceptResult, B::WorkRef(_)) => commands::accept_result::apply(ctx, step)?,
        (C::WorkCheckpoint, B::WorkCheckpoint(_)) => commands::checkpoint::apply(ctx, step)?,
        (C::WorkBlock, B::WorkBlock(_)) => commands::block::apply(ctx, step)?,
        (C::WorkSubmit, B::WorkSubmit(_)) => commands::submit::apply(ctx, step)?,
        (C::WorkFail, B::WorkFail(_)) | (C::WorkCancel, B::WorkCancel(_)) => {
            commands::end::apply(ctx, step)?
        }
        (C::WorkReviseContract, B::WorkReviseContract(p)) => {
            commands::revise_contract::apply(ctx, step, p)?
        }
        (C::MissionCreateChild, B::MissionCreateChild(p)) => {
            commands::create_child::apply(ctx, step, &mission, p)?
        }
        // `command.rs` runs these before any WorkItem is loaded (`missions.rs`).
        (
            C::MissionCreate
            | C::MissionApprove
            | C::MissionFail
            | C::MissionCancel
            | C::WorkPropose
            | C::WorkAuthorize,
            _,
        ) => {
            return Err(reject(
                ErrorCode::InvalidCommand,
                format!("{} does not act on a WorkItem", ctx.command.kind.as_str()),
            ));
        }
        // `Command::body` gives each type its one payload shape, so none of these is reached.
        (
            C::WorkOffer
            | C::WorkAcceptOffer
            | C::WorkDeclineOffer
            | C::WorkAsk
            | C::WorkAnswer
            | C::ApprovalGrantExecution
            | C::WorkStart
            | C::LeaseRenew
            | C::PreemptionRequest
            | C::WorkProgress
            | C::WorkUnblock
            | C::WorkAcceptResult
            | C::WorkCheckpoint
            | C::WorkBlock
            | C::WorkSubmit
            | C::WorkFail
            | C::WorkCancel
            | C::WorkReviseContract
            | C::MissionCreateChild,
            _,
        ) => {
            return Err(reject(
                ErrorCode::Internal,
                format!(
                    "{} came with another type's payload",
                    ctx.command.kind.as_str()
                ),
            ));
        }
    };
    if reconcile {
        ctx.faults.after(ReconcileStep::CommandApplied)?;
    }
    Ok(Answered::WorkItem(Box::new(row)))
}

/// Runs an effect of a family file that changes the row in place (`owner.rs`,
/// `questions.rs`) and answers the row after it.
fn in_place(
    ctx: &mut Ctx<'_, '_>,
    step: Step,
    effect: impl FnOnce(
        &mut Ctx<'_, '_>,
        &mut WorkRow,
        WorkEventKind,
        serde_json::Value,
    ) -> Result<(), Error>,
) -> Result<WorkRow, Error> {
    let Step {
        mut row,
        kind,
        payload,
        ..
    } = step;
    effect(ctx, &mut row, kind, payload)?;
    Ok(row)
}

/// Whether `kind` is an owner Command that must quote the current Execution Lease (LSE-4).
/// Exhaustive too: a new Command type says whether it quotes one.
pub(super) fn quotes_lease(kind: CommandType, coordinator: bool) -> bool {
    use CommandType as C;
    match kind {
        C::WorkCheckpoint | C::WorkBlock | C::WorkSubmit | C::LeaseRenew | C::WorkProgress => true,
        C::WorkFail => !coordinator,
        C::MissionCreate
        | C::MissionApprove
        | C::MissionFail
        | C::MissionCancel
        | C::MissionCreateChild
        | C::WorkPropose
        | C::WorkAuthorize
        | C::WorkReviseContract
        | C::WorkOffer
        | C::WorkAcceptOffer
        | C::WorkDeclineOffer
        | C::WorkAsk
        | C::WorkAnswer
        | C::ApprovalGrantExecution
        | C::WorkStart
        | C::WorkUnblock
        | C::WorkAcceptResult
        | C::WorkCancel
        | C::PreemptionRequest => false,
    }
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
