//! The type of each Mission and WorkItem Event ([`WorkEventKind`]): the typed `event` of a
//! transition (`machine::Transition`) and the `type` of the Event appended for it. Its own file
//! so that the state machine (`machine.rs`) and the Event payloads (`events.rs`, which carry
//! its states) both use it without importing each other.

use serde::{Deserialize, Serialize};

/// The Event types of Missions and WorkItems (DESIGN §10), by wire name: the serde name of
/// each is its [`WorkEventKind::as_str`] (the Event `type` the chain hashes), which
/// `wire_names_tests.rs` pins for every kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum WorkEventKind {
    #[serde(rename = "mission.created")]
    MissionCreated,
    #[serde(rename = "mission.approved")]
    MissionApproved,
    #[serde(rename = "mission.failed")]
    MissionFailed,
    #[serde(rename = "mission.cancelled")]
    MissionCancelled,
    #[serde(rename = "mission.child_created")]
    MissionChildCreated,
    #[serde(rename = "work.proposed")]
    WorkProposed,
    #[serde(rename = "work.authorized")]
    WorkAuthorized,
    #[serde(rename = "work.contract_revised")]
    WorkContractRevised,
    #[serde(rename = "work.offered")]
    WorkOffered,
    #[serde(rename = "work.offer_accepted")]
    WorkOfferAccepted,
    #[serde(rename = "work.offer_declined")]
    WorkOfferDeclined,
    /// CON-2: a candidate's question on a live offer (`work.ask`).
    #[serde(rename = "work.question_asked")]
    WorkQuestionAsked,
    /// CON-2, CON-4: the Coordinator's answer (`work.answer`).
    #[serde(rename = "work.question_answered")]
    WorkQuestionAnswered,
    #[serde(rename = "offer.withdrawn")]
    OfferWithdrawn,
    #[serde(rename = "approval.execution_granted")]
    ApprovalExecutionGranted,
    #[serde(rename = "work.started")]
    WorkStarted,
    #[serde(rename = "work.checkpointed")]
    WorkCheckpointed,
    #[serde(rename = "work.blocked")]
    WorkBlocked,
    #[serde(rename = "work.unblocked")]
    WorkUnblocked,
    #[serde(rename = "work.submitted")]
    WorkSubmitted,
    #[serde(rename = "work.result_accepted")]
    WorkResultAccepted,
    #[serde(rename = "work.failed")]
    WorkFailed,
    #[serde(rename = "work.cancelled")]
    WorkCancelled,
    #[serde(rename = "ownership.expired")]
    OwnershipExpired,
    /// An Execution Lease ran out (LSE-8: timeout expires it); the Authority's own Event.
    #[serde(rename = "lease.expired")]
    LeaseExpired,
    /// A lease ended by a replacement session of its Agent (LSE-9, GAP-1); the Authority's own.
    #[serde(rename = "lease.revoked")]
    LeaseRevoked,
    /// T16/T17/T18: a WorkItem moved because a Mission ended (no Command of its own).
    #[serde(rename = "work.propagated")]
    WorkPropagated,
    /// EVD-3: a submission asks reviewer Agents for Evidence on the criteria no review covers.
    #[serde(rename = "work.review_requested")]
    WorkReviewRequested,
    #[serde(rename = "lease.renewed")]
    LeaseRenewed,
    #[serde(rename = "work.progress_reported")]
    WorkProgressReported,
    #[serde(rename = "work.preemption_requested")]
    WorkPreemptionRequested,
    /// OFL-11 step 1: a reconciled offline usage delta, naming the historical execution
    /// session and the reconciling one (DESIGN §12); caused by the buffered Command.
    #[serde(rename = "ext.missionweaveprotocol.core.resource_usage_recorded")]
    ResourceUsageRecorded,
}

impl WorkEventKind {
    pub const ALL: [WorkEventKind; 32] = [
        Self::MissionCreated,
        Self::MissionApproved,
        Self::MissionFailed,
        Self::MissionCancelled,
        Self::MissionChildCreated,
        Self::WorkProposed,
        Self::WorkAuthorized,
        Self::WorkContractRevised,
        Self::WorkOffered,
        Self::WorkOfferAccepted,
        Self::WorkOfferDeclined,
        Self::WorkQuestionAsked,
        Self::WorkQuestionAnswered,
        Self::OfferWithdrawn,
        Self::ApprovalExecutionGranted,
        Self::WorkStarted,
        Self::WorkCheckpointed,
        Self::WorkBlocked,
        Self::WorkUnblocked,
        Self::WorkSubmitted,
        Self::WorkResultAccepted,
        Self::WorkFailed,
        Self::WorkCancelled,
        Self::OwnershipExpired,
        Self::LeaseExpired,
        Self::LeaseRevoked,
        Self::WorkPropagated,
        Self::WorkReviewRequested,
        Self::LeaseRenewed,
        Self::WorkProgressReported,
        Self::WorkPreemptionRequested,
        Self::ResourceUsageRecorded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::MissionCreated => "mission.created",
            Self::MissionApproved => "mission.approved",
            Self::MissionFailed => "mission.failed",
            Self::MissionCancelled => "mission.cancelled",
            Self::MissionChildCreated => "mission.child_created",
            Self::WorkProposed => "work.proposed",
            Self::WorkAuthorized => "work.authorized",
            Self::WorkContractRevised => "work.contract_revised",
            Self::WorkOffered => "work.offered",
            Self::WorkOfferAccepted => "work.offer_accepted",
            Self::WorkOfferDeclined => "work.offer_declined",
            Self::WorkQuestionAsked => "work.question_asked",
            Self::WorkQuestionAnswered => "work.question_answered",
            Self::OfferWithdrawn => "offer.withdrawn",
            Self::ApprovalExecutionGranted => "approval.execution_granted",
            Self::WorkStarted => "work.started",
            Self::WorkCheckpointed => "work.checkpointed",
            Self::WorkBlocked => "work.blocked",
            Self::WorkUnblocked => "work.unblocked",
            Self::WorkSubmitted => "work.submitted",
            Self::WorkResultAccepted => "work.result_accepted",
            Self::WorkFailed => "work.failed",
            Self::WorkCancelled => "work.cancelled",
            Self::OwnershipExpired => "ownership.expired",
            Self::LeaseExpired => "lease.expired",
            Self::LeaseRevoked => "lease.revoked",
            Self::WorkPropagated => "work.propagated",
            Self::WorkReviewRequested => "work.review_requested",
            Self::LeaseRenewed => "lease.renewed",
            Self::WorkProgressReported => "work.progress_reported",
            Self::WorkPreemptionRequested => "work.preemption_requested",
            Self::ResourceUsageRecorded => "ext.missionweaveprotocol.core.resource_usage_recorded",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == text)
    }
}
