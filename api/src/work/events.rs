//! The Events of Missions and WorkItems. Every one carries the aggregate's state after it
//! (state, revision, contract revision, ownership epoch and owner) plus what changed
//! (`detail`: the Command's payload, or what the Authority decided), so the projection is a
//! plain fold of the log ([`WorkItemProjection::apply`]) and `fsck` can compare the stored
//! projection with a replay.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::contract::Budgets;
use super::machine::{MissionState, WorkState};
use crate::id::Id;

/// The Event types of Missions and WorkItems (DESIGN §10), by wire name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkEventKind {
    MissionCreated,
    MissionApproved,
    MissionFailed,
    MissionCancelled,
    MissionChildCreated,
    WorkProposed,
    WorkAuthorized,
    WorkContractRevised,
    WorkOffered,
    WorkOfferAccepted,
    WorkOfferDeclined,
    /// CON-2: a candidate's question on a live offer (`work.ask`).
    WorkQuestionAsked,
    /// CON-2, CON-4: the Coordinator's answer (`work.answer`).
    WorkQuestionAnswered,
    OfferWithdrawn,
    ApprovalExecutionGranted,
    WorkStarted,
    WorkCheckpointed,
    WorkBlocked,
    WorkUnblocked,
    WorkSubmitted,
    WorkResultAccepted,
    WorkFailed,
    WorkCancelled,
    OwnershipExpired,
    /// An Execution Lease ran out (LSE-8: timeout expires it); the Authority's own Event.
    LeaseExpired,
    /// A lease ended by a replacement session of its Agent (LSE-9, GAP-1); the Authority's own.
    LeaseRevoked,
    /// T16/T17/T18: a WorkItem moved because a Mission ended (no Command of its own).
    WorkPropagated,
    /// EVD-3: a submission asks reviewer Agents for Evidence on the criteria no review covers.
    WorkReviewRequested,
    LeaseRenewed,
    WorkProgressReported,
    WorkPreemptionRequested,
    /// OFL-11 step 1: a reconciled offline usage delta, naming the historical execution
    /// session and the reconciling one (DESIGN §12); caused by the buffered Command.
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

/// The payload of every Mission and WorkItem Event. Fields are in alphabetical order of
/// their wire names and `detail` is a `serde_json::Value` (sorted keys), so an Event parsed
/// into a `serde_json::Value` and written again keeps its bytes, and so its hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkEvent {
    #[serde(default)]
    pub contract_revision: u64,
    /// What changed: the Command's payload as accepted, or what the Authority decided.
    pub detail: serde_json::Value,
    pub mission_id: Id,
    /// The Mission's state after the Event (Mission Events only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mission_state: Option<MissionState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Id>,
    #[serde(default)]
    pub ownership_epoch: u64,
    #[serde(default)]
    pub revision: u64,
    /// The WorkItem's state after it (with its revision, contract revision, ownership epoch
    /// and owner above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<WorkState>,
    /// Absent for Mission Events and proposals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_item_id: Option<Id>,
}

/// A WorkItem as the log says it is: the fold of its Events.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkItemProjection {
    pub mission_id: String,
    pub state: Option<WorkState>,
    pub revision: u64,
    pub contract_revision: u64,
    pub ownership_epoch: u64,
    pub owner: Option<String>,
    /// The sequences of the Events that touched it.
    pub history: Vec<u64>,
    /// Its own usage so far: the sum of the `usage` its Events' `detail` carries (an owner
    /// Command's delta, or a reconciled one's `resource_usage_recorded`; the reconciled
    /// Command's own Event leaves it out, so nothing counts twice). What a Mission or a parent
    /// WorkItem spent is this summed over the WorkItems below it.
    #[serde(default)]
    pub usage: Budgets,
}

impl WorkItemProjection {
    pub fn apply(&mut self, sequence: u64, event: &WorkEvent) {
        self.mission_id = event.mission_id.to_string();
        self.state = event.state.or(self.state);
        self.revision = event.revision;
        self.contract_revision = event.contract_revision;
        self.ownership_epoch = event.ownership_epoch;
        self.owner = event.owner.as_ref().map(Id::to_string);
        self.history.push(sequence);
        if let Some(Ok(usage)) = event
            .detail
            .get("usage")
            .map(|usage| serde_json::from_value::<Budgets>(usage.clone()))
        {
            self.usage = self.usage.saturating_add(&usage);
        }
    }
}

/// Missions and WorkItems of a Group as the log says they are.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkProjection {
    pub missions: BTreeMap<String, MissionState>,
    pub work_items: BTreeMap<String, WorkItemProjection>,
}

impl WorkProjection {
    pub fn apply(&mut self, sequence: u64, event: &WorkEvent) {
        if let Some(state) = event.mission_state {
            self.missions.insert(event.mission_id.to_string(), state);
        }
        if let (Some(work_item), Some(_)) = (&event.work_item_id, event.state) {
            self.work_items
                .entry(work_item.to_string())
                .or_default()
                .apply(sequence, event);
        }
    }
}
