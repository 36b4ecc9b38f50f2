//! The WorkItem state machine (SM-1…SM-12, T1…T18) and the Mission's, as pure functions of
//! `state × Command × facts`: storage computes the facts from the aggregate inside the
//! writer transaction, asks [`decide`], and appends exactly the Event it answers, or nothing.
//! `fixtures/state_machine.json` holds the whole table as data and `api/tests/state_machine.rs`
//! checks every row against these functions.
//!
//! Order of checks (DESIGN §10): role first ([`role_allows`], GAP-5: `forbidden` whatever the
//! state), then the aggregate and its revision (storage), then the table (`illegal_transition`),
//! then the rule-specific checks: owner or candidate (`forbidden`), offer standing
//! (`offer_expired`, `offer_withdrawn`: answered whatever the state), approval and eligibility
//! gates, the retry policy (PRG-8), Evidence.

use serde::{Deserialize, Serialize};

use super::command::CommandType;
use super::event_kind::WorkEventKind;
use crate::error::ErrorCode;
use crate::session::Role;

/// SM-1: the nine WorkItem states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkState {
    Open,
    Offered,
    Queued,
    Active,
    Blocked,
    Submitted,
    Verified,
    Failed,
    Cancelled,
}

impl WorkState {
    pub const ALL: [WorkState; 9] = [
        Self::Open,
        Self::Offered,
        Self::Queued,
        Self::Active,
        Self::Blocked,
        Self::Submitted,
        Self::Verified,
        Self::Failed,
        Self::Cancelled,
    ];

    /// SM-4: no outgoing transition (`failed` leaves only by a new offer, SM-5).
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Verified | Self::Cancelled)
    }

    /// T13, T14, T18's source states: the six non-terminal, non-failed states (SM-12).
    pub fn is_live(self) -> bool {
        matches!(
            self,
            Self::Open
                | Self::Offered
                | Self::Queued
                | Self::Active
                | Self::Blocked
                | Self::Submitted
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Offered => "offered",
            Self::Queued => "queued",
            Self::Active => "active",
            Self::Blocked => "blocked",
            Self::Submitted => "submitted",
            Self::Verified => "verified",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// A Mission's states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissionState {
    Active,
    Approved,
    Failed,
    Cancelled,
}

impl MissionState {
    pub fn is_terminal(self) -> bool {
        self != Self::Active
    }
}

/// The standing of the offer an `accept_offer` or `decline_offer` names, for its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OfferStanding {
    /// No such offer on this WorkItem.
    Unknown,
    /// Live, and the caller is one of its candidates.
    Candidate,
    /// Live, but the caller is not a candidate.
    NotCandidate,
    /// Past its `expiresAt` (T5: nothing was appended; SM-8).
    Expired,
    /// Withdrawn: another candidate won, the contract was revised, or a new offer replaced it.
    Withdrawn,
}

/// Whether the retry policy of the contract lets the WorkItem start again (PRG-8), for
/// `work.start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryStanding {
    /// Within every bound.
    Allowed,
    /// `retryPolicy.maxAttempts` starts were made (PRG-8, PRG-10: the Coordinator ends it
    /// with `work.fail` reason `retries_exhausted`).
    Exhausted,
    /// A retry after `retryPolicy.deadline`.
    PastDeadline,
    /// Within `retryPolicy.backoffSeconds` of the last failure.
    BackingOff,
    /// A retry after the WorkItem's financial spend reached `retryPolicy.maxCost`.
    CostExhausted,
}

/// What the table needs to know besides the state; storage computes it inside the writer
/// transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Facts {
    /// The Mission the WorkItem belongs to is `active` (T18: a terminal Mission takes no
    /// more work, GAP-3).
    pub mission_active: bool,
    /// An owner holds an unexpired, unrevoked ownership (SM-6).
    pub live_owner: bool,
    /// The caller is that owner (GAP-5).
    pub caller_is_owner: bool,
    /// The offer named by `work.accept_offer` / `work.decline_offer`.
    pub offer: OfferStanding,
    /// The contract needs an execution approval that was not granted yet (T6).
    pub approval_pending: bool,
    /// The dependencies satisfy the contract's policy (DEP-3).
    pub eligible: bool,
    /// The Command brings the Evidence it needs: for `work.submit` every acceptance
    /// criterion is covered (EVD-2), for `work.fail` at least one record, for
    /// `work.accept_result` every criterion's verdict in force passes (EVD-3).
    pub evidence_complete: bool,
    /// The retry policy's standing for a new attempt (PRG-8).
    pub retry: RetryStanding,
    /// The Command is a buffered one whose binding checked out (OFL-9) and whose historical
    /// Execution Lease ended without being closed: it expired, or the reconnect's new session
    /// revoked it (LSE-9), which left the WorkItem `queued` under the same owner. Its progress
    /// or checkpoint is then applied there (OFL-11 step 3).
    #[serde(default)]
    pub reconciling: bool,
    /// The caller did this WorkItem's work (owned it, held a lease of it or published for
    /// it): separation of duties, it may not accept its own result (`work.accept_result`).
    #[serde(default)]
    pub caller_did_the_work: bool,
    /// The owner accepted an older contract revision than the current one (CON-5): the
    /// contract was revised while it was `queued`, so it must accept again before it starts.
    #[serde(default)]
    pub acceptance_stale: bool,
    /// CON-3: the caller asked a question on the offer it names that is not answered yet
    /// (`work.accept_offer` only).
    #[serde(default)]
    pub unresolved_question: bool,
}

impl Facts {
    /// The facts of a WorkItem in `state` whose caller may do everything the state allows:
    /// the baseline of every fixture row, which names only the facts it changes.
    pub fn favourable(state: WorkState) -> Self {
        let owned = matches!(
            state,
            WorkState::Queued | WorkState::Active | WorkState::Blocked | WorkState::Submitted
        );
        Self {
            mission_active: true,
            live_owner: owned,
            caller_is_owner: owned,
            offer: OfferStanding::Candidate,
            approval_pending: false,
            eligible: true,
            evidence_complete: true,
            retry: RetryStanding::Allowed,
            reconciling: false,
            caller_did_the_work: false,
            acceptance_stale: false,
            unresolved_question: false,
        }
    }
}

/// What an accepted Command does to the WorkItem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    pub next: WorkState,
    /// The Event appended for the Command.
    pub event: WorkEventKind,
}

/// GAP-5: who may issue each Command type, by Membership role. Ownership and candidacy are
/// checked after the table ([`decide`]); an owner Command also needs the `worker` role.
pub fn role_allows(command: CommandType, roles: &[Role]) -> bool {
    use CommandType as C;
    let has = |role: Role| roles.contains(&role);
    match command {
        // Any member but a read-only one (issue #40: an auditor's role is read-only).
        C::WorkPropose => roles.iter().any(|role| *role != Role::Auditor),
        C::MissionCreate
        | C::MissionApprove
        | C::MissionFail
        | C::MissionCancel
        | C::MissionCreateChild
        | C::WorkAuthorize
        | C::WorkReviseContract
        | C::WorkOffer
        | C::WorkUnblock
        | C::WorkAcceptResult
        | C::WorkCancel
        | C::WorkAnswer => has(Role::Coordinator),
        C::ApprovalGrantExecution => has(Role::Approver),
        C::WorkAcceptOffer
        | C::WorkDeclineOffer
        | C::WorkAsk
        | C::WorkStart
        | C::WorkCheckpoint
        | C::WorkBlock
        | C::WorkSubmit
        | C::LeaseRenew
        | C::WorkProgress => has(Role::Worker),
        // The Coordinator (the Scheduler) or the Worker's own scheduler, i.e. the owner.
        C::WorkFail | C::PreemptionRequest => has(Role::Coordinator) || has(Role::Worker),
    }
}

/// The transition table for a Command on an existing WorkItem in `state`, then the
/// rule-specific checks. `work.authorize` on an existing WorkItem is `illegal_transition`
/// (T2's source is "none"); Mission Commands go to [`decide_mission`].
pub fn decide(
    state: WorkState,
    command: CommandType,
    facts: &Facts,
    caller_is_coordinator: bool,
) -> Result<Transition, ErrorCode> {
    use CommandType as C;
    use WorkEventKind as K;
    use WorkState as S;
    // The offer's standing answers first, whatever the state (DESIGN §10's exception).
    if command == C::WorkAcceptOffer {
        match facts.offer {
            OfferStanding::Expired => return Err(ErrorCode::OfferExpired),
            OfferStanding::Withdrawn => return Err(ErrorCode::OfferWithdrawn),
            _ => {}
        }
    }
    let go = |next: S, event: K| Ok(Transition { next, event });
    let illegal = Err(ErrorCode::IllegalTransition);
    // T18 / GAP-3: nothing moves under a terminal Mission (its propagation already moved
    // every non-terminal WorkItem).
    if !facts.mission_active {
        return illegal;
    }
    let owner_only = || {
        if facts.caller_is_owner && facts.live_owner {
            Ok(())
        } else {
            Err(ErrorCode::Forbidden)
        }
    };
    match (command, state) {
        // T3 (SM-6: an expired owner is fenced first by the caller of `decide`).
        (C::WorkOffer, S::Open | S::Offered | S::Queued | S::Active | S::Blocked | S::Failed) => {
            if facts.live_owner {
                illegal
            } else {
                go(S::Offered, K::WorkOffered)
            }
        }
        // T4 / SM-7: atomic; a new ownership epoch begins.
        (C::WorkAcceptOffer, S::Offered) => match facts.offer {
            // CON-3: not while the candidate's own question on this offer is unanswered.
            OfferStanding::Candidate if facts.unresolved_question => illegal,
            OfferStanding::Candidate => go(S::Queued, K::WorkOfferAccepted),
            OfferStanding::NotCandidate => Err(ErrorCode::Forbidden),
            _ => Err(ErrorCode::NotFound),
        },
        // OFR-8/9: a structured decline; the WorkItem stays offered.
        (C::WorkDeclineOffer, S::Offered) => match facts.offer {
            OfferStanding::Candidate => go(S::Offered, K::WorkOfferDeclined),
            OfferStanding::NotCandidate => Err(ErrorCode::Forbidden),
            OfferStanding::Expired => Err(ErrorCode::OfferExpired),
            OfferStanding::Withdrawn => Err(ErrorCode::OfferWithdrawn),
            OfferStanding::Unknown => Err(ErrorCode::NotFound),
        },
        // CON-5: the owner accepts the revised contract again, naming the offer it accepted;
        // the WorkItem stays `queued` and a new ownership epoch begins (SM-7).
        (C::WorkAcceptOffer, S::Queued)
            if facts.acceptance_stale && facts.offer == OfferStanding::Candidate =>
        {
            owner_only().and(go(S::Queued, K::WorkOfferAccepted))
        }
        // CON-2: the WorkItem conversation before acceptance. Not transitions: a candidate of
        // the live offer asks, the Coordinator answers a question of a live offer, and the
        // WorkItem stays `offered` (`conversation.rs`). `facts.offer` is the standing of the
        // offer asked on (for `work.answer`, the question's offer; unknown question: unknown).
        (C::WorkAsk, S::Offered) => match facts.offer {
            OfferStanding::Candidate => go(S::Offered, K::WorkQuestionAsked),
            OfferStanding::NotCandidate => Err(ErrorCode::Forbidden),
            OfferStanding::Expired => Err(ErrorCode::OfferExpired),
            OfferStanding::Withdrawn => Err(ErrorCode::OfferWithdrawn),
            OfferStanding::Unknown => Err(ErrorCode::NotFound),
        },
        (C::WorkAnswer, S::Offered) => match facts.offer {
            OfferStanding::Candidate | OfferStanding::NotCandidate => {
                go(S::Offered, K::WorkQuestionAnswered)
            }
            // CON-4: a question of a replaced offer was answered by the new offer.
            OfferStanding::Expired => Err(ErrorCode::OfferExpired),
            OfferStanding::Withdrawn => Err(ErrorCode::OfferWithdrawn),
            OfferStanding::Unknown => Err(ErrorCode::NotFound),
        },
        // T6
        (C::ApprovalGrantExecution, S::Queued) => go(S::Queued, K::ApprovalExecutionGranted),
        // T7: owner, approved if required, eligible (DEP-3).
        (C::WorkStart, S::Queued) => {
            owner_only()?;
            if facts.acceptance_stale {
                // CON-5: the revised contract is not accepted yet.
                Err(ErrorCode::IllegalTransition)
            } else if facts.approval_pending {
                Err(ErrorCode::ApprovalRequired)
            } else if !facts.eligible {
                Err(ErrorCode::NotEligible)
            } else {
                // PRG-8: attempts and the retry deadline are budgets; the backoff only delays.
                match facts.retry {
                    RetryStanding::Allowed => go(S::Active, K::WorkStarted),
                    RetryStanding::Exhausted
                    | RetryStanding::PastDeadline
                    | RetryStanding::CostExhausted => Err(ErrorCode::BudgetExceeded),
                    RetryStanding::BackingOff => Err(ErrorCode::NotEligible),
                }
            }
        }
        // LSE-1, LSE-3: the owner extends its Execution Lease (the quoted one, LSE-4).
        (C::LeaseRenew, S::Active) => owner_only().and(go(S::Active, K::LeaseRenewed)),
        // PRG-1/PRG-2: a structured report; nothing in it moves the WorkItem.
        (C::WorkProgress, S::Active) => owner_only().and(go(S::Active, K::WorkProgressReported)),
        // LSE-11/LSE-12 step 1: recorded only; the WorkItem stays active until its owner
        // checkpoints (or the lease expires, is revoked, or the work is cancelled or failed).
        (C::PreemptionRequest, S::Active) => {
            if !caller_is_coordinator {
                owner_only()?;
            }
            go(S::Active, K::WorkPreemptionRequested)
        }
        // OFL-3, OFL-11: a reconciled buffered report or checkpoint of the historical lease,
        // which expired or was revoked by the reconnect (the WorkItem went back to `queued`
        // under the same owner): recorded there; the checkpoint keeps it `queued` (T8's end).
        (C::WorkProgress, S::Queued) if facts.reconciling => {
            owner_only().and(go(S::Queued, K::WorkProgressReported))
        }
        (C::WorkCheckpoint, S::Queued) if facts.reconciling => {
            owner_only().and(go(S::Queued, K::WorkCheckpointed))
        }
        // T8, T9 (PRG-4)
        (C::WorkCheckpoint, S::Active) => owner_only().and(go(S::Queued, K::WorkCheckpointed)),
        (C::WorkBlock, S::Active) => owner_only().and(go(S::Blocked, K::WorkBlocked)),
        // T10 / SM-10
        (C::WorkUnblock, S::Blocked) => go(
            if facts.live_owner { S::Queued } else { S::Open },
            K::WorkUnblocked,
        ),
        // T11 (EVD-2)
        (C::WorkSubmit, S::Active) => {
            owner_only()?;
            if facts.evidence_complete {
                go(S::Submitted, K::WorkSubmitted)
            } else {
                Err(ErrorCode::EvidenceMissing)
            }
        }
        // T12 (GAP-2: a failed review is `work.fail`); EVD-3: only once the combined Evidence
        // passes (every criterion's verdict in force is `pass`, uncontested); separation of
        // duties: never by an Agent that did the work.
        (C::WorkAcceptResult, S::Submitted) => {
            if facts.caller_did_the_work {
                Err(ErrorCode::Forbidden)
            } else if facts.evidence_complete {
                go(S::Verified, K::WorkResultAccepted)
            } else {
                Err(ErrorCode::EvidenceMissing)
            }
        }
        // T13: the Coordinator, or the owner (which quotes its lease, LSE-4); failure Evidence
        // required.
        (C::WorkFail, s) if s.is_live() => {
            if !caller_is_coordinator {
                owner_only()?;
            }
            if facts.evidence_complete {
                go(S::Failed, K::WorkFailed)
            } else {
                Err(ErrorCode::EvidenceMissing)
            }
        }
        // T14
        (C::WorkCancel, s) if s.is_live() => go(S::Cancelled, K::WorkCancelled),
        // T15 / SM-11: ownership is fenced while the child Mission runs.
        (C::MissionCreateChild, S::Open | S::Offered | S::Queued | S::Active | S::Blocked) => {
            go(S::Blocked, K::MissionChildCreated)
        }
        // CON-5: a revised contract needs renewed acceptance, and the WorkItem keeps its state
        // (SM-2 has no transition out of these states for it): live offers are withdrawn, so
        // an `offered` one waits for a new offer (T3); a `queued` owner keeps its ownership
        // but must accept again before it starts (above).
        (C::WorkReviseContract, s @ (S::Open | S::Offered | S::Queued | S::Failed)) => {
            go(s, K::WorkContractRevised)
        }
        _ => illegal,
    }
}

/// A Mission Command on a Mission in `state`: the terminal Commands leave `active` only.
///
/// `live_work_items`: some WorkItem of the Mission is still live (`open` … `submitted`).
/// Approval is refused then (`illegal_transition`): T18 and SM-12 propagate only a Mission's
/// failure or cancellation, so approval never ends a WorkItem; the Coordinator accepts,
/// fails or cancels each one first.
pub fn decide_mission(
    state: MissionState,
    command: CommandType,
    caller_did_the_parent_work: bool,
    live_work_items: bool,
) -> Result<MissionState, ErrorCode> {
    use CommandType as C;
    match (command, state) {
        (C::MissionApprove, MissionState::Active) if live_work_items => {
            Err(ErrorCode::IllegalTransition)
        }
        // Separation of duties: approving a child Mission verifies its parent WorkItem (T16),
        // so an Agent that did that WorkItem's work may not approve it.
        (C::MissionApprove, MissionState::Active) if caller_did_the_parent_work => {
            Err(ErrorCode::Forbidden)
        }
        (C::MissionApprove, MissionState::Active) => Ok(MissionState::Approved),
        (C::MissionFail, MissionState::Active) => Ok(MissionState::Failed),
        (C::MissionCancel, MissionState::Active) => Ok(MissionState::Cancelled),
        _ => Err(ErrorCode::IllegalTransition),
    }
}

/// T18 / SM-12: what a terminal Mission does to a WorkItem in `state`: live states follow
/// (`failed` for a failed Mission, `cancelled` for a cancelled one), `failed`, `verified` and
/// `cancelled` stay (GAP-3). An approved Mission moves nothing: it had no live WorkItem left
/// ([`decide_mission`]).
pub fn propagate(mission: MissionState, state: WorkState) -> Option<WorkState> {
    if !state.is_live() {
        return None;
    }
    match mission {
        MissionState::Active | MissionState::Approved => None,
        MissionState::Failed => Some(WorkState::Failed),
        MissionState::Cancelled => Some(WorkState::Cancelled),
    }
}

/// T16 / T17: what a terminal child Mission does to its parent WorkItem (blocked under it):
/// approval verifies it, failure blocks or fails it by the declared policy, cancellation
/// fails it.
pub fn child_outcome(
    child: MissionState,
    policy: super::contract::ChildFailurePolicy,
) -> Option<WorkState> {
    use super::contract::ChildFailurePolicy as P;
    match child {
        MissionState::Active => None,
        MissionState::Approved => Some(WorkState::Verified),
        MissionState::Failed => Some(match policy {
            P::Block => WorkState::Blocked,
            P::Fail => WorkState::Failed,
        }),
        MissionState::Cancelled => Some(WorkState::Failed),
    }
}
