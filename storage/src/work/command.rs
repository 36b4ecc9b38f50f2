//! `POST /v1/groups/{g}/commands`: one Command, checked in DESIGN §10's order, executed in one
//! writer transaction with its Events, or refused with nothing appended. Long because the
//! checks are one ordered path, kept in one place to read top to bottom.
//!
//! Order: payload shape (`invalid_command`, `group_mismatch`, `unknown_extension`), the
//! signature (the one check; a key that is not the `agentId`'s is `producer_mismatch`), the
//! caller's session (its Group, its Agent), a retry of the same `commandId` of that Agent in
//! that Group (replayed, or `idempotency_key_reused`; looked up before the epochs, so an answer
//! lost across a reconnect is recovered), the epochs (`stale_session`, `stale_membership`), the role (GAP-5,
//! `forbidden` whatever the state), the aggregate (`unknown_work_item` / `not_found`, another
//! Group's answering the same), `expectedRevision` (`stale_revision`, SM-3), then the table
//! (`weft_api::work::machine::decide`) and the rule-specific checks.

use weft_api::dsse::BASE64;
use weft_api::session::Role;
use weft_api::work::machine::{Facts, OfferStanding, RetryStanding, decide, role_allows};
use weft_api::work::{Command, CommandBody, CommandType};
use weft_api::{Envelope, ErrorCode, Id, SignedPayload as _};

use super::answer::{Accepted, Answered};
use super::apply;
use super::ctx::Ctx;
use super::{WorkRow, load_mission, load_work_item};
use crate::access::MissionScope;
use crate::access::Session;
use crate::error::{Error, reject};
use crate::signatures::AuthorityMay;
use crate::unit::Tx;
use crate::work::handle::Work;

/// A Command past the checks that need no transaction (shape, signature, session), ready to
/// run in the writer.
#[derive(Clone)]
pub(crate) struct Prepared {
    command: Command,
    body: CommandBody,
    offline: Option<weft_api::work::offline::Binding>,
    usage: Option<weft_api::work::contract::Budgets>,
    request_hash: [u8; 32],
    /// The key that signed it.
    keyid: String,
    /// The DSSE envelope as received (JSON), kept with the answer (issue #50).
    envelope: String,
    /// The epochs of the session that sent it.
    session_epoch: u64,
    membership_epoch: u64,
    /// The Authority's key, for the records it signs in the Command's transaction (T16: a
    /// child Mission's approval as Evidence for its parent WorkItem).
    authority: std::sync::Arc<ed25519_dalek::SigningKey>,
    /// The Group's open-proposal cap (issue #40), checked in the writer.
    max_open_proposals: u64,
}

impl Work<'_> {
    /// Runs one signed Command in `group_id` for the caller's `session` (DESIGN §10): its
    /// Events and the aggregate's view after it, or a refusal that changed nothing.
    pub async fn execute_command(
        &self,
        route_group: Id,
        envelope: Envelope,
        session: &Session,
    ) -> Result<Accepted, Error> {
        let group = route_group.to_string();
        let prepared = self.prepare_command(route_group, envelope, session).await?;
        let clock = std::sync::Arc::clone(&self.0.clock);
        let deadlines = self.0.deadlines.clone();
        let faults = self.0.faults.clone();
        // A deadlock with another server's batch runs it again (`db/again.rs`).
        crate::db::write_again_if_raced(&self.0.db, &group, move |tx| {
            apply_prepared(tx, prepared.clone(), &*clock, &deadlines, faults.clone())
        })
        .await
    }

    /// Commands of one session applied in order in one writer transaction, each in a
    /// savepoint of its own: every accepted one commits (one fsync for all), the first refusal
    /// stops the batch with nothing of its own kept and nothing after it tried. Answers the
    /// accepted answers and the refusal with its index. The offline journal sends its
    /// buffered Commands this way (OFL-8: in order, stopping at the first refusal).
    pub async fn execute_commands(
        &self,
        route_group: Id,
        envelopes: Vec<Envelope>,
        session: &Session,
    ) -> Result<(Vec<Accepted>, Option<(usize, Error)>), Error> {
        let mut prepared = Vec::with_capacity(envelopes.len());
        let mut refused = None;
        for (index, envelope) in envelopes.into_iter().enumerate() {
            match self
                .prepare_command(route_group.clone(), envelope, session)
                .await
            {
                Ok(command) => prepared.push(command),
                Err(error) => {
                    refused = Some((index, error));
                    break;
                }
            }
        }
        let clock = std::sync::Arc::clone(&self.0.clock);
        let deadlines = self.0.deadlines.clone();
        let faults = self.0.faults.clone();
        // In the route Group's lane: every Command of the batch writes that Group.
        let group = route_group.to_string();
        let (accepted, failed) = self
            .0
            .db
            .write_in(&group, move |tx| {
                let mut accepted = Vec::with_capacity(prepared.len());
                for (index, command) in prepared.into_iter().enumerate() {
                    match tx.nested(|tx| {
                        apply_prepared(tx, command, &*clock, &deadlines, faults.clone())
                    }) {
                        Ok(answer) => accepted.push(answer),
                        Err(error) => return Ok((accepted, Some((index, error)))),
                    }
                }
                Ok((accepted, None))
            })
            .await?;
        Ok((accepted, failed.or(refused)))
    }

    /// DESIGN §10's checks that need no transaction: the shape, the signature, the session.
    async fn prepare_command(
        &self,
        route_group: Id,
        envelope: Envelope,
        session: &Session,
    ) -> Result<Prepared, Error> {
        use base64::Engine as _;
        // 1. Shape, before the signature is looked at.
        let payload = BASE64
            .decode(&envelope.payload)
            .map_err(|_| reject(ErrorCode::InvalidCommand, "payload is not canonical base64"))?;
        let shaped = Command::parse_payload(&payload)?;
        if shaped.group_id != route_group {
            return Err(reject(
                ErrorCode::GroupMismatch,
                format!(
                    "the Command is for {}, sent to {route_group}",
                    shaped.group_id
                ),
            ));
        }
        // 2. The signature, through the one check.
        // The payload the check verifies is the one decoded above (one base64 text), so the
        // shape parsed there is the Command: it is not parsed again.
        let signed = self
            .0
            .verify_parsed::<Command>(&envelope, AuthorityMay::NotSign, |_| Ok(shaped))
            .await?;
        // The blake3 of the signed payload bytes, computed by the signature check already.
        let payload_id = signed.payload_id.0;
        let keyid = signed.keyid.as_str().to_owned();
        let command = signed.value.into_inner();
        // 3. The session: its own Group only, its own Agent's Commands, current epochs.
        if session.group_id != route_group {
            return Err(reject(
                ErrorCode::NotAMember,
                format!("{} is not a member of {route_group}", session.agent_id),
            ));
        }
        if session.agent_id != command.agent_id {
            return Err(reject(
                ErrorCode::ProducerMismatch,
                "a session sends only its own Agent's Commands",
            ));
        }
        // The epochs are checked in the writer, after a stored answer is looked up: the same
        // bytes sent again after a reconnect replay their answer (DESIGN §10). The per-Agent
        // rate (issue #40) is taken once the signature and session checked out.
        self.0
            .limits
            .admit_command(command.agent_id.as_str(), self.0.clock.now())?;
        let body = command.body()?;
        // A buffered Command's binding (OFL-6/7) and the usage delta it charges (DESIGN §12).
        let offline = command.offline_binding()?;
        let usage = match &offline {
            Some(binding) => Some(binding.usage.clone()),
            None => body.usage().cloned(),
        };
        let request_hash = match &offline {
            // A buffered Command stays the same Command whatever session it was rebased onto
            // (OFL-8): sent again after yet another reconnect, it replays its answer and is
            // charged once. So its rebase fields are left out of what identifies it.
            Some(_) => {
                let mut unrebased = command.clone();
                unrebased.issued_at = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH.fixed_offset();
                unrebased.session_epoch = 0;
                unrebased.membership_epoch = 0;
                *blake3::hash(&serde_json::to_vec(&unrebased).map_err(Error::backend)?).as_bytes()
            }
            None => payload_id,
        };
        Ok(Prepared {
            envelope: serde_json::to_string(&envelope).map_err(Error::backend)?,
            keyid,
            command,
            body,
            offline,
            usage,
            request_hash,
            session_epoch: session.session_epoch,
            membership_epoch: session.membership_epoch,
            authority: self.0.authority.clone(),
            max_open_proposals: self.0.limits.max_open_proposals(),
        })
    }
}

/// The rest of DESIGN §10's order, inside the writer transaction: a retry, the epochs again,
/// the role, the scope, the table and the effects, then the stored answer.
fn apply_prepared(
    tx: &Tx<'_>,
    prepared: Prepared,
    clock: &dyn crate::clock::Clock,
    deadlines: &crate::engine::deadlines::Deadlines,
    faults: crate::faults::Faults,
) -> Result<Accepted, Error> {
    let Prepared {
        keyid,
        envelope,
        command,
        body,
        offline,
        usage,
        request_hash,
        session_epoch,
        membership_epoch: session_membership_epoch,
        authority,
        max_open_proposals,
    } = prepared;
    let group = command.group_id.as_str();
    let agent = command.agent_id.as_str();
    // Every check below reads what the Group's last commit left, in any process.
    crate::rows::groups::lock(tx, group)?;
    // And runs at the time it holds the lock: a Command that waited for it (another server's
    // batch held it, for up to the lock's 10 s) neither renews a lease that expired meanwhile
    // nor stamps its Events earlier than those committed before it.
    let now = clock.now();
    // The Membership and session epoch step 4 checks, sent ahead to travel with the lookup
    // (one round trip on PostgreSQL, not three); a replay never reads them.
    let membership = crate::rows::memberships::current_with_scope_ahead(tx, group, agent)?;
    let newest_epoch = crate::rows::session_epochs::current_ahead(tx, agent, group)?;
    // And whose key the signing key is now: a rotation or deactivation committed since the
    // door (through any server; it ended the sessions, but not their epochs) refuses it here.
    let key_holder = crate::rows::agents::active_id_by_keyid_ahead(tx, keyid.as_str())?;
    // So are the WorkItem a work Command names, which `run` reads first, and for a Command
    // that may quote an Execution Lease (a Worker's `work.fail` does) the current lease, which
    // its checks read; nothing before `run` changes either.
    let under_lease = super::apply::quotes_lease(command.kind, false);
    let work_item_ahead = match &body {
        CommandBody::MissionCreate(_)
        | CommandBody::MissionClose(_)
        | CommandBody::WorkPropose(_)
        | CommandBody::WorkAuthorize(_) => None,
        _ => match body.work_item_id() {
            Some(id) => Some((
                id.as_str(),
                crate::rows::work_items::load_ahead(tx, id.as_str())?,
                under_lease
                    .then(|| crate::rows::leases::current_ahead(tx, id.as_str()))
                    .transpose()?,
                // And the WorkItem's Mission, when this connection knows which it is (it read
                // the WorkItem before): `run` reads it next, and nothing before changes it.
                crate::rows::work_items::mission_known(tx, id.as_str())
                    .map(|mission| crate::rows::missions::load_ahead(tx, &mission))
                    .transpose()?,
            )),
            None => None,
        },
    };
    // 3. A retry of an accepted Command replays its answer, looked up first: the same Agent
    // sending the same bytes in the same Group gets its answer back even from a session that
    // replaced the one it was sent under (DESIGN §10). The id is the Agent's in its Group.
    let stored = crate::rows::commands::stored(tx, group, agent, command.command_id.as_str())?;
    if let Some((hash, answer)) = stored {
        if hash != request_hash {
            return Err(reject(
                ErrorCode::IdempotencyKeyReused,
                format!(
                    "commandId {} was used for another Command",
                    command.command_id
                ),
            ));
        }
        // Its answer was trimmed after the answer horizon (issue #46): said, never redone.
        if answer.is_empty() {
            return Err(reject(
                ErrorCode::CommandExpired,
                format!(
                    "commandId {} was accepted longer ago than answers are kept; it is not executed again",
                    command.command_id
                ),
            ));
        }
        return super::answer::replay(tx, &answer, group, agent, now);
    }
    let (work_item_read, mission_read) = match work_item_ahead {
        Some((id, row, lease, mission)) => {
            if let Some(lease) = lease {
                crate::rows::leases::remember_current(tx, id, lease.get(tx)?);
            }
            let row = row.get(tx)?;
            if let Some(row) = &row {
                crate::rows::work_items::learn_mission(tx, id, row.mission_id.as_str());
            }
            let mission = mission
                .map(|mission| mission.get(tx))
                .transpose()?
                .flatten();
            (Some(row), mission)
        }
        None => (None, None),
    };
    // 4. The epochs: the Command's must be its session's, and the session's still current
    // inside the transaction (a Membership may have changed).
    if command.session_epoch != session_epoch {
        return Err(reject(
            ErrorCode::StaleSession,
            format!(
                "sessionEpoch is {session_epoch}, not {}",
                command.session_epoch
            ),
        ));
    }
    if command.membership_epoch != session_membership_epoch {
        return Err(reject(
            ErrorCode::StaleMembership,
            format!(
                "membershipEpoch is {session_membership_epoch}, not {}",
                command.membership_epoch
            ),
        ));
    }
    let Some((roles, membership_epoch, missions)) = membership.get(tx)? else {
        return Err(reject(
            ErrorCode::StaleMembership,
            "the Membership was removed",
        ));
    };
    if membership_epoch != command.membership_epoch {
        return Err(reject(ErrorCode::StaleMembership, "the Membership changed"));
    }
    // 2, again in the transaction: the signing key is still the Agent's current one, refused
    // as the door refuses a retired key or a deactivated Agent.
    if key_holder.get(tx)?.as_deref() != Some(agent) {
        return Err(crate::access::key_refusal(
            tx,
            &keyid.parse::<weft_api::KeyId>()?,
        )?);
    }
    let current = newest_epoch.get(tx)?;
    if current != Some(session_epoch) {
        return Err(reject(
            ErrorCode::StaleSession,
            "a newer session replaced this one",
        ));
    }
    // 5. The role (GAP-5), whatever the state.
    if !role_allows(command.kind, &roles) {
        return Err(reject(
            ErrorCode::Forbidden,
            format!(
                "{} needs another role than {roles:?}",
                command.kind.as_str()
            ),
        ));
    }
    // CTX-5: a Mission-scoped member commands only its Missions; another Mission's
    // aggregate answers exactly as another Group's (unknown, whether or not it exists).
    let scope = crate::access::scope_of(missions)?;
    check_scope(tx, &command, &body, scope, work_item_read.as_ref())?;
    let mut ctx = Ctx::new(tx, &command, now, roles, session_epoch, faults);
    ctx.offline = offline;
    ctx.usage = usage;
    ctx.authority = Some(authority);
    ctx.max_open_proposals = max_open_proposals;
    ctx.actor = Some(weft_api::work::events::Actor {
        agent_id: command.agent_id.clone(),
        key_id: keyid,
    });
    ctx.work_item_read = work_item_read;
    ctx.mission_read = mission_read;
    let answered = run(&mut ctx, &body)?;
    // The WorkItem's deadline as this Command left it, for the expiry timer
    // (a stale entry costs one look; noted before the commit, which is harmless).
    // The row this Command saved last is the row as it is now, when it is this WorkItem's
    // (`save` is the only write of the fields a deadline depends on).
    let saved = ctx.saved.take().filter(|row| {
        body.work_item_id()
            .is_some_and(|id| *id == row.work_item_id)
    });
    let deadline = match (&saved, body.work_item_id()) {
        (Some(row), _) => super::expiry::deadline_of(tx, row)?,
        (None, Some(work_item_id)) => super::expiry::next_deadline(tx, work_item_id.as_str())?,
        (None, None) => None,
    };
    if let Some(work_item_id) = body.work_item_id()
        && let Some(at) = deadline
    {
        deadlines.note(work_item_id.as_str(), at);
    }
    let (answer, kept) = super::answer::accepted(
        tx,
        command.command_id.to_string(),
        std::mem::take(&mut ctx.appended),
        answered,
        now,
    )?;
    crate::rows::commands::insert(
        tx,
        command.command_id.as_str(),
        group,
        agent,
        &request_hash[..],
        &kept,
        &envelope,
        now,
    )?;
    Ok(answer)
}

/// Refuses a Command of a Mission-scoped member about a Mission its Membership does not cover,
/// with the code the aggregate's absence would get: `unknown_work_item` for a WorkItem,
/// `not_found` for a Mission. `read` is the WorkItem the Command names, when it was read ahead.
fn check_scope(
    tx: &crate::sql::Connection,
    command: &Command,
    body: &CommandBody,
    scope: MissionScope,
    read: Option<&Option<WorkRow>>,
) -> Result<(), Error> {
    let group = command.group_id.as_str();
    if scope == MissionScope::Group {
        return Ok(());
    }
    let named_mission = match body {
        CommandBody::MissionCreate(p) => Some(&p.mission_id),
        CommandBody::MissionClose(p) => Some(&p.mission_id),
        CommandBody::WorkPropose(p) => Some(&p.mission_id),
        CommandBody::WorkAuthorize(p) => Some(&p.mission_id),
        _ => None,
    };
    if let Some(mission) = named_mission {
        if !scope.covers(mission.as_str()) {
            return Err(reject(
                ErrorCode::NotFound,
                format!("no Mission {mission} in {group}"),
            ));
        }
        return Ok(());
    }
    let Some(work_item_id) = body.work_item_id() else {
        return Ok(());
    };
    let loaded = match read {
        Some(read) => read.clone(),
        None => load_work_item(tx, work_item_id.as_str())?,
    };
    if let Some(row) = loaded
        && row.group_id == group
        && !scope.covers(&row.mission_id)
    {
        return Err(reject(
            ErrorCode::UnknownWorkItem,
            format!("no WorkItem {work_item_id} in {group}"),
        ));
    }
    Ok(())
}

/// Dispatches an authorized Command; answers the aggregate it leaves.
fn run(ctx: &mut Ctx<'_, '_>, body: &CommandBody) -> Result<Answered, Error> {
    match body {
        CommandBody::MissionCreate(p) => super::missions::mission_create(ctx, p),
        CommandBody::MissionClose(p) => super::missions::mission_close(ctx, p),
        CommandBody::WorkPropose(p) => super::missions::propose(ctx, p),
        CommandBody::WorkAuthorize(p) => super::missions::authorize(ctx, p),
        _ => {
            let Some(work_item_id) = body.work_item_id() else {
                return Err(reject(ErrorCode::InvalidCommand, "no workItemId"));
            };
            let read = match ctx.work_item_read.take() {
                Some(read) => read,
                None => load_work_item(ctx.tx, work_item_id.as_str())?,
            };
            let row = match read {
                Some(row) if row.group_id == ctx.command.group_id.as_str() => {
                    // Expiry first, for this WorkItem only, so the Command sees the fenced
                    // state even if the timer never ran. These Events are the Authority's own
                    // (no causation, not in the answer's `events`), not the Command's; they
                    // commit with an accepted Command, and roll back with a refused one (so a
                    // refusal still changes nothing), to be appended by the timer or the next
                    // Command.
                    let (n_expired, _) =
                        super::expiry::expire_loaded(ctx.tx, row.clone(), ctx.now)?;
                    if n_expired == 0 {
                        row
                    } else {
                        load_work_item(ctx.tx, work_item_id.as_str())?.unwrap_or(row)
                    }
                }
                // Another Group's WorkItem answers as an unknown one.
                _ => {
                    return Err(reject(
                        ErrorCode::UnknownWorkItem,
                        format!("no WorkItem {work_item_id} in {}", ctx.command.group_id),
                    ));
                }
            };
            if let Some(expected) = ctx.command.expected_revision
                && expected != row.revision
            {
                return Err(reject(
                    ErrorCode::StaleRevision,
                    format!(
                        "the WorkItem is at revision {}, not {expected} (SM-3)",
                        row.revision
                    ),
                ));
            }
            // LSE-5: a quoted lease that ended is stale whatever the state it left behind;
            // a buffered Command's historical lease is judged by its binding instead (OFL-9).
            let standing = match &ctx.offline {
                Some(binding) => Some(super::offline::check(ctx, &row, binding)?),
                None => {
                    if let Some(quoted) = &ctx.command.lease_id {
                        super::expiry::check_quoted_lease(ctx.tx, quoted.as_str(), &row, ctx.now)?;
                    }
                    None
                }
            };
            let reconciling = standing == Some(super::offline::Standing::Reconciling);
            // The Mission read ahead is used only when it is this WorkItem's (it was read by
            // what the connection knew of the WorkItem).
            let mission = match ctx.mission_read.take() {
                Some(mission) if mission.mission_id() == row.mission_id.as_str() => {
                    Some(mission.parse()?)
                }
                _ => load_mission(ctx.tx, &row.mission_id)?,
            };
            let mission = mission.ok_or_else(|| {
                reject(
                    ErrorCode::NotFound,
                    format!("no Mission {}", row.mission_id),
                )
            })?;
            // PRG-8: whether a `work.start` resumes the current attempt, read once for the
            // retry standing here and the attempt count in `commands/start.rs`.
            ctx.resumes_attempt = ctx.command.kind == CommandType::WorkStart
                && super::owner::resumes_attempt(ctx, &row)?;
            let facts = facts(ctx, &row, mission.state.is_terminal(), body, reconciling)?;
            let coordinator = ctx.roles.contains(&Role::Coordinator);
            let transition = decide(row.state, ctx.command.kind, &facts, coordinator)
                .map_err(|code| refusal(code, ctx.command.kind, &row, &facts))?;
            apply::work(ctx, row, mission, transition, body)
        }
    }
}

/// A refusal of the table, with a message saying which rule answered.
fn refusal(code: ErrorCode, kind: CommandType, row: &WorkRow, facts: &Facts) -> Error {
    let command = kind.as_str();
    let state = row.state.as_str();
    let message = match code {
        ErrorCode::IllegalTransition if !facts.mission_active => {
            format!("{command}: the Mission has ended (T18, GAP-3)")
        }
        ErrorCode::IllegalTransition
            if facts.acceptance_stale && kind == CommandType::WorkStart =>
        {
            format!(
                "{command}: the contract was revised (revision {}); accept it again first with work.accept_offer naming the offer you accepted (CON-5)",
                row.contract_revision
            )
        }
        ErrorCode::IllegalTransition if facts.unresolved_question => {
            format!(
                "{command}: the caller's question on this offer is unanswered (CON-3): wait for work.answer or a new offer"
            )
        }
        ErrorCode::IllegalTransition => {
            format!("{command} is not a transition from {state} (SM-2, SM-3)")
        }
        ErrorCode::OfferExpired => format!("{command}: the offer expired (T5, SM-8)"),
        ErrorCode::OfferWithdrawn => {
            format!(
                "{command}: the offer was withdrawn (OFR-5: another candidate won, or it was replaced)"
            )
        }
        ErrorCode::Forbidden if facts.caller_did_the_work => {
            format!(
                "{command}: the caller did the work of {} (separation of duties): another coordinator accepts its result",
                row.work_item_id
            )
        }
        ErrorCode::Forbidden => {
            format!("{command}: only the current owner or a live offer's candidate (GAP-5)")
        }
        ErrorCode::ApprovalRequired => {
            format!("{command}: needs approval.grant_execution first (T6)")
        }
        ErrorCode::NotEligible | ErrorCode::BudgetExceeded
            if let Some(message) = super::owner::retry_refusal(row, facts.retry) =>
        {
            message
        }
        ErrorCode::NotEligible => format!("{command}: dependencies are not satisfied (DEP-3)"),
        ErrorCode::EvidenceMissing => {
            format!(
                "{command}: Evidence must cover every acceptance criterion (EVD-2) / a failure needs Evidence (T13)"
            )
        }
        ErrorCode::NotFound if kind == CommandType::WorkAnswer => {
            format!("{command}: no such question on {}", row.work_item_id)
        }
        ErrorCode::NotFound => format!("{command}: no such offer on {}", row.work_item_id),
        _ => format!("{command} refused in {state}"),
    };
    reject(code, message)
}

/// What the table needs besides the state, from the rows as they are in this transaction.
fn facts(
    ctx: &Ctx<'_, '_>,
    row: &WorkRow,
    mission_terminal: bool,
    body: &CommandBody,
    reconciling: bool,
) -> Result<Facts, Error> {
    let caller = ctx.command.agent_id.as_str();
    let live_owner = row.live_owner(ctx.now);
    let offer = match body {
        CommandBody::OfferRef(weft_api::work::command::OfferRef { offer_id, .. })
        | CommandBody::WorkDecline(weft_api::work::command::WorkDecline { offer_id, .. }) => {
            super::checks::offer_standing(ctx, row, offer_id.as_str())?
        }
        CommandBody::WorkAsk(p) => super::checks::offer_standing(ctx, row, p.offer_id.as_str())?,
        CommandBody::WorkAnswer(p) => super::questions::standing(ctx, row, p.question_id.as_str())?,
        _ => OfferStanding::Unknown,
    };
    let evidence_complete = match body {
        CommandBody::WorkSubmit(p) => {
            super::checks::covers_criteria(ctx, row, &p.artifacts, &p.evidence)?
        }
        CommandBody::WorkFail(p) => super::checks::cites_evidence(ctx, row, &p.evidence)?,
        CommandBody::WorkRef(_) if ctx.command.kind == CommandType::WorkAcceptResult => {
            super::checks::verdicts_pass(ctx, row)?
        }
        _ => true,
    };
    Ok(Facts {
        mission_active: !mission_terminal,
        live_owner,
        caller_is_owner: row.owner.as_deref() == Some(caller),
        offer,
        approval_pending: row.contract.needs_approval() && !row.approval_granted,
        // Only `work.start` reads it (DEP-3): the dependency query runs for that one.
        eligible: ctx.command.kind != CommandType::WorkStart || super::deps::eligible(ctx.tx, row)?,
        evidence_complete,
        retry: if matches!(body, CommandBody::WorkRef(_))
            && ctx.command.kind == CommandType::WorkStart
            && !ctx.resumes_attempt
        {
            super::owner::retry_standing(ctx, row)?
        } else {
            RetryStanding::Allowed
        },
        reconciling,
        // Separation of duties: only `work.accept_result` reads it, so only it pays the query.
        caller_did_the_work: ctx.command.kind == CommandType::WorkAcceptResult
            && crate::standing::worked_on(ctx.tx, &row.work_item_id, &row.group_id)?
                .contains(caller),
        acceptance_stale: matches!(
            ctx.command.kind,
            CommandType::WorkStart | CommandType::WorkAcceptOffer
        ) && super::checks::acceptance_stale(ctx, row)?,
        // CON-3: only `work.accept_offer` reads it.
        unresolved_question: match body {
            CommandBody::OfferRef(p) if ctx.command.kind == CommandType::WorkAcceptOffer => {
                super::questions::unresolved(ctx, row, p.offer_id.as_str())?
            }
            _ => false,
        },
    })
}
