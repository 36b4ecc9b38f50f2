//! The Command envelope (DESIGN §10): a DSSE payload of type
//! `application/vnd.mwp.command.v1+json`, and the typed payload of each Command type. Parsed
//! only through [`SignedPayload`]: unknown fields are refused at every level, an unknown
//! critical extension is `unknown_extension`; the offline binding (`offline.rs`) is known.
//! It is longer than 600 lines because every Command type's payload is here, so the wire
//! shapes of DESIGN §10's table are read and reviewed in one place (with the offline
//! binding's envelope checks, OFL-6).

use chrono::{DateTime, FixedOffset};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::contract::{Budgets, ChildFailurePolicy, Level, SelectionBasis, WorkContract};
pub use super::conversation::{WorkAnswer, WorkAsk};
use super::offline::{Binding, OFFLINE_EXTENSION};
use crate::digest::ArtifactId;
use crate::error::{ErrorCode, Rejection};
use crate::id::Id;
use crate::signed::SignedPayload;

/// DSSE payload type of a Command.
pub const COMMAND_TYPE: &str = "application/vnd.mwp.command.v1+json";
/// Largest Command payload accepted (a contract fits many times over).
pub const MAX_COMMAND_BYTES: usize = 256 * 1024;

/// The Command types this Authority executes (DESIGN §10's table; Context Packages come
/// with their issue). Each is named in four places (the variant, [`CommandType::ALL`],
/// [`CommandType::as_str`] and its serde name); `wire_names_tests.rs` pins that they agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum CommandType {
    #[serde(rename = "mission.create")]
    MissionCreate,
    #[serde(rename = "mission.approve")]
    MissionApprove,
    #[serde(rename = "mission.fail")]
    MissionFail,
    #[serde(rename = "mission.cancel")]
    MissionCancel,
    #[serde(rename = "mission.create_child")]
    MissionCreateChild,
    #[serde(rename = "work.propose")]
    WorkPropose,
    #[serde(rename = "work.authorize")]
    WorkAuthorize,
    #[serde(rename = "work.revise_contract")]
    WorkReviseContract,
    #[serde(rename = "work.offer")]
    WorkOffer,
    #[serde(rename = "work.accept_offer")]
    WorkAcceptOffer,
    #[serde(rename = "work.decline_offer")]
    WorkDeclineOffer,
    #[serde(rename = "work.ask")]
    WorkAsk,
    #[serde(rename = "work.answer")]
    WorkAnswer,
    #[serde(rename = "approval.grant_execution")]
    ApprovalGrantExecution,
    #[serde(rename = "work.start")]
    WorkStart,
    #[serde(rename = "work.checkpoint")]
    WorkCheckpoint,
    #[serde(rename = "work.block")]
    WorkBlock,
    #[serde(rename = "work.unblock")]
    WorkUnblock,
    #[serde(rename = "work.submit")]
    WorkSubmit,
    #[serde(rename = "work.accept_result")]
    WorkAcceptResult,
    #[serde(rename = "work.fail")]
    WorkFail,
    #[serde(rename = "work.cancel")]
    WorkCancel,
    #[serde(rename = "lease.renew")]
    LeaseRenew,
    #[serde(rename = "work.progress")]
    WorkProgress,
    #[serde(rename = "preemption.request")]
    PreemptionRequest,
}

impl CommandType {
    pub const ALL: [CommandType; 25] = [
        Self::MissionCreate,
        Self::MissionApprove,
        Self::MissionFail,
        Self::MissionCancel,
        Self::MissionCreateChild,
        Self::WorkPropose,
        Self::WorkAuthorize,
        Self::WorkReviseContract,
        Self::WorkOffer,
        Self::WorkAcceptOffer,
        Self::WorkDeclineOffer,
        Self::WorkAsk,
        Self::WorkAnswer,
        Self::ApprovalGrantExecution,
        Self::WorkStart,
        Self::WorkCheckpoint,
        Self::WorkBlock,
        Self::WorkUnblock,
        Self::WorkSubmit,
        Self::WorkAcceptResult,
        Self::WorkFail,
        Self::WorkCancel,
        Self::LeaseRenew,
        Self::WorkProgress,
        Self::PreemptionRequest,
    ];

    /// The wire name, e.g. `work.offer`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MissionCreate => "mission.create",
            Self::MissionApprove => "mission.approve",
            Self::MissionFail => "mission.fail",
            Self::MissionCancel => "mission.cancel",
            Self::MissionCreateChild => "mission.create_child",
            Self::WorkPropose => "work.propose",
            Self::WorkAuthorize => "work.authorize",
            Self::WorkReviseContract => "work.revise_contract",
            Self::WorkOffer => "work.offer",
            Self::WorkAcceptOffer => "work.accept_offer",
            Self::WorkDeclineOffer => "work.decline_offer",
            Self::WorkAsk => "work.ask",
            Self::WorkAnswer => "work.answer",
            Self::ApprovalGrantExecution => "approval.grant_execution",
            Self::WorkStart => "work.start",
            Self::WorkCheckpoint => "work.checkpoint",
            Self::WorkBlock => "work.block",
            Self::WorkUnblock => "work.unblock",
            Self::WorkSubmit => "work.submit",
            Self::WorkAcceptResult => "work.accept_result",
            Self::WorkFail => "work.fail",
            Self::WorkCancel => "work.cancel",
            Self::LeaseRenew => "lease.renew",
            Self::WorkProgress => "work.progress",
            Self::PreemptionRequest => "preemption.request",
        }
    }

    /// The type of a wire name; `None` for one this Authority does not execute.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == text)
    }

    /// The Commands that act on an existing WorkItem (their payload names `workItemId`).
    pub fn targets_work_item(self) -> bool {
        !matches!(
            self,
            Self::MissionCreate
                | Self::MissionApprove
                | Self::MissionFail
                | Self::MissionCancel
                | Self::WorkPropose
                | Self::WorkAuthorize
        )
    }
}

/// An extension entry. The one this Authority understands is the bounded-offline-execution
/// binding ([`super::offline`]); any other critical one is refused `unknown_extension`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Extension {
    pub urn: String,
    pub critical: bool,
    pub value: serde_json::Value,
}

impl Extension {
    /// The critical bounded-offline-execution entry a buffered Command carries (OFL-6).
    pub fn offline(binding: &Binding) -> Extension {
        Extension {
            urn: OFFLINE_EXTENSION.to_owned(),
            critical: true,
            // A struct of ids, instants and numbers always serialises.
            value: serde_json::to_value(binding).unwrap_or_default(),
        }
    }
}

/// A Command as signed (DESIGN §10).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Command {
    pub command_id: Id,
    #[serde(rename = "type")]
    pub kind: CommandType,
    pub group_id: Id,
    pub agent_id: Id,
    pub issued_at: DateTime<FixedOffset>,
    pub session_epoch: u64,
    pub membership_epoch: u64,
    pub lease_id: Option<Id>,
    pub expected_revision: Option<u64>,
    pub extensions: Vec<Extension>,
    pub payload: serde_json::Value,
}

impl SignedPayload for Command {
    const PAYLOAD_TYPE: &'static str = COMMAND_TYPE;
    const NAME: &'static str = "command";
    const MAX_BYTES: usize = MAX_COMMAND_BYTES;
    const INVALID: ErrorCode = ErrorCode::InvalidCommand;

    fn signer_claim(&self) -> (&Id, Option<&str>) {
        (&self.agent_id, None)
    }

    fn validate(&self) -> Result<(), Rejection> {
        if self.extensions.len() > 16 {
            return Err(invalid("at most 16 extensions"));
        }
        if let Some(unknown) = self
            .extensions
            .iter()
            .find(|e| e.critical && e.urn != OFFLINE_EXTENSION)
        {
            return Err(Rejection::new(
                ErrorCode::UnknownExtension,
                format!("critical extension {} is not understood here", unknown.urn),
            ));
        }
        // The typed payload must parse too: a malformed one is refused before anything else.
        let body = self.body()?;
        if let Some(binding) = self.offline_binding()? {
            // One delta per buffered Command: the binding's (OFL-7); a payload `usage` may
            // only repeat it.
            if body.usage().is_some_and(|usage| *usage != binding.usage) {
                return Err(invalid(
                    "a buffered Command's usage is the binding's; the payload may only repeat it",
                ));
            }
        }
        Ok(())
    }
}

impl Command {
    /// The typed payload of this Command's type.
    pub fn body(&self) -> Result<CommandBody, Rejection> {
        use CommandType as T;
        Ok(match self.kind {
            T::MissionCreate => CommandBody::MissionCreate(self.typed()?),
            T::MissionApprove | T::MissionFail | T::MissionCancel => {
                CommandBody::MissionClose(self.typed()?)
            }
            T::MissionCreateChild => CommandBody::MissionCreateChild(self.typed()?),
            T::WorkPropose => CommandBody::WorkPropose(self.typed()?),
            T::WorkAuthorize => CommandBody::WorkAuthorize(self.typed()?),
            T::WorkReviseContract => CommandBody::WorkReviseContract(self.typed()?),
            T::WorkOffer => CommandBody::WorkOffer(self.typed()?),
            T::WorkAcceptOffer => CommandBody::OfferRef(self.typed()?),
            T::WorkDeclineOffer => CommandBody::WorkDecline(self.typed()?),
            T::WorkAsk => CommandBody::WorkAsk(self.typed()?),
            T::WorkAnswer => CommandBody::WorkAnswer(self.typed()?),
            T::ApprovalGrantExecution
            | T::WorkStart
            | T::WorkUnblock
            | T::WorkAcceptResult
            | T::LeaseRenew
            | T::PreemptionRequest => CommandBody::WorkRef(self.typed()?),
            T::WorkProgress => CommandBody::WorkProgress(self.typed()?),
            T::WorkCheckpoint => CommandBody::WorkCheckpoint(self.typed()?),
            T::WorkBlock => CommandBody::WorkBlock(self.typed()?),
            T::WorkSubmit => CommandBody::WorkSubmit(self.typed()?),
            T::WorkFail => CommandBody::WorkFail(self.typed()?),
            T::WorkCancel => CommandBody::WorkCancel(self.typed()?),
        })
    }

    /// The bounded-offline-execution binding (OFL-6/7), if the Command carries one: it then
    /// says it was buffered while its Worker was cut off. See [`super::offline`] for which
    /// Commands may carry it and why it must be critical.
    pub fn offline_binding(&self) -> Result<Option<Binding>, Rejection> {
        let mut found = self
            .extensions
            .iter()
            .filter(|e| e.urn == OFFLINE_EXTENSION);
        let Some(extension) = found.next() else {
            return Ok(None);
        };
        if found.next().is_some() {
            return Err(invalid("at most one bounded-offline-execution binding"));
        }
        if !extension.critical {
            return Err(invalid(
                "the bounded-offline-execution binding must be marked critical (OFL-6)",
            ));
        }
        if !matches!(
            self.kind,
            CommandType::WorkProgress | CommandType::WorkCheckpoint
        ) {
            return Err(invalid(format!(
                "{} cannot be buffered: only progress and checkpoints (OFL-3, OFL-5)",
                self.kind.as_str()
            )));
        }
        let binding: Binding = serde_json::from_value(extension.value.clone())
            .map_err(|e| invalid(format!("bounded-offline-execution binding: {e}")))?;
        binding.usage.validate_usage("binding usage")?;
        if binding.agent_id != self.agent_id || binding.group_id != self.group_id {
            return Err(Rejection::new(
                ErrorCode::OfflineBindingMismatch,
                "the binding names another Agent or Group than the Command",
            ));
        }
        Ok(Some(binding))
    }

    /// The usage delta this Command charges to its WorkItem's budget lineage: a buffered
    /// Command's binding's, otherwise its payload's `usage`.
    pub fn usage(&self) -> Result<Option<Budgets>, Rejection> {
        if let Some(binding) = self.offline_binding()? {
            return Ok(Some(binding.usage));
        }
        Ok(self.body()?.usage().cloned())
    }

    fn typed<T: DeserializeOwned + Validate>(&self) -> Result<T, Rejection> {
        let value: T = serde_json::from_value(self.payload.clone())
            .map_err(|e| invalid(format!("{} payload: {e}", self.kind.as_str())))?;
        value.validate()?;
        Ok(value)
    }
}

/// Checks of a typed payload beyond its shape.
trait Validate {
    fn validate(&self) -> Result<(), Rejection> {
        Ok(())
    }
}

/// The typed payload of a Command.
#[derive(Clone, Debug, PartialEq)]
pub enum CommandBody {
    MissionCreate(MissionCreate),
    MissionClose(MissionClose),
    MissionCreateChild(MissionCreateChild),
    WorkPropose(WorkPropose),
    WorkAuthorize(WorkAuthorize),
    WorkReviseContract(WorkReviseContract),
    WorkOffer(WorkOffer),
    OfferRef(OfferRef),
    WorkDecline(WorkDecline),
    /// CON-2 (`conversation.rs`).
    WorkAsk(WorkAsk),
    WorkAnswer(WorkAnswer),
    WorkRef(WorkRef),
    WorkCheckpoint(WorkCheckpoint),
    WorkBlock(WorkBlock),
    WorkSubmit(WorkSubmit),
    WorkFail(WorkFail),
    WorkCancel(WorkCancel),
    WorkProgress(WorkProgress),
}

impl CommandBody {
    /// The usage delta the payload reports (`work.progress`, `work.checkpoint`,
    /// `work.submit`; DESIGN §12).
    pub fn usage(&self) -> Option<&Budgets> {
        match self {
            Self::WorkProgress(p) => p.usage.as_ref(),
            Self::WorkCheckpoint(p) => p.usage.as_ref(),
            Self::WorkSubmit(p) => p.usage.as_ref(),
            _ => None,
        }
    }

    /// The WorkItem the Command acts on, if any.
    pub fn work_item_id(&self) -> Option<&Id> {
        match self {
            Self::MissionCreate(_) | Self::MissionClose(_) | Self::WorkPropose(_) => None,
            Self::WorkAuthorize(p) => Some(&p.work_item_id),
            Self::MissionCreateChild(p) => Some(&p.work_item_id),
            Self::WorkReviseContract(p) => Some(&p.work_item_id),
            Self::WorkOffer(p) => Some(&p.work_item_id),
            Self::OfferRef(p) => Some(&p.work_item_id),
            Self::WorkDecline(p) => Some(&p.work_item_id),
            Self::WorkAsk(p) => Some(&p.work_item_id),
            Self::WorkAnswer(p) => Some(&p.work_item_id),
            Self::WorkRef(p) => Some(&p.work_item_id),
            Self::WorkCheckpoint(p) => Some(&p.work_item_id),
            Self::WorkBlock(p) => Some(&p.work_item_id),
            Self::WorkSubmit(p) => Some(&p.work_item_id),
            Self::WorkFail(p) => Some(&p.work_item_id),
            Self::WorkCancel(p) => Some(&p.work_item_id),
            Self::WorkProgress(p) => Some(&p.work_item_id),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MissionCreate {
    pub mission_id: Id,
    pub title: String,
    pub priority_class: Level,
    pub budget: Budgets,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_work_item_id: Option<Id>,
}

impl Validate for MissionCreate {
    fn validate(&self) -> Result<(), Rejection> {
        title(&self.title)?;
        self.budget.validate_usage("budget")
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MissionClose {
    pub mission_id: Id,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Vec<ArtifactId>>,
}
impl Validate for MissionClose {}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MissionCreateChild {
    pub work_item_id: Id,
    pub child_mission_id: Id,
    pub title: String,
    pub child_failure_policy: ChildFailurePolicy,
}

impl Validate for MissionCreateChild {
    fn validate(&self) -> Result<(), Rejection> {
        title(&self.title)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkPropose {
    pub proposal_id: Id,
    pub mission_id: Id,
    pub contract: WorkContract,
}

impl Validate for WorkPropose {
    fn validate(&self) -> Result<(), Rejection> {
        self.contract.validate()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkAuthorize {
    pub work_item_id: Id,
    pub mission_id: Id,
    pub contract: WorkContract,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal_id: Option<Id>,
}

impl Validate for WorkAuthorize {
    fn validate(&self) -> Result<(), Rejection> {
        self.contract.validate()?;
        if self.contract.depends_on.contains(&self.work_item_id) {
            return Err(Rejection::new(
                ErrorCode::Cycle,
                "a WorkItem cannot depend on itself",
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkReviseContract {
    pub work_item_id: Id,
    pub contract: WorkContract,
}

impl Validate for WorkReviseContract {
    fn validate(&self) -> Result<(), Rejection> {
        self.contract.validate()?;
        if self.contract.depends_on.contains(&self.work_item_id) {
            return Err(Rejection::new(
                ErrorCode::Cycle,
                "a WorkItem cannot depend on itself",
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkOffer {
    pub work_item_id: Id,
    pub offer_id: Id,
    pub candidates: Vec<Id>,
    pub expires_at: DateTime<FixedOffset>,
    pub selection_basis: SelectionBasis,
}

impl Validate for WorkOffer {
    fn validate(&self) -> Result<(), Rejection> {
        let mut candidates: Vec<&str> = self.candidates.iter().map(Id::as_str).collect();
        candidates.sort_unstable();
        candidates.dedup();
        // OFR-4: a bounded set.
        if candidates.is_empty()
            || candidates.len() > 16
            || candidates.len() != self.candidates.len()
        {
            return Err(invalid("candidates: 1..=16 distinct agent ids"));
        }
        self.selection_basis.validate()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OfferRef {
    pub work_item_id: Id,
    pub offer_id: Id,
}
impl Validate for OfferRef {}

impl Validate for WorkAsk {
    fn validate(&self) -> Result<(), Rejection> {
        self.check()
    }
}

impl Validate for WorkAnswer {
    fn validate(&self) -> Result<(), Rejection> {
        self.check()
    }
}

/// OFR-9's structured decline reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeclineReason {
    Capacity,
    Deadline,
    Capability,
    Authorization,
    Dependency,
    Budget,
    Other,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkDecline {
    pub work_item_id: Id,
    pub offer_id: Id,
    pub reason: DeclineReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Validate for WorkDecline {
    fn validate(&self) -> Result<(), Rejection> {
        detail(self.detail.as_deref())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkRef {
    pub work_item_id: Id,
}
impl Validate for WorkRef {}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Checkpoint {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<ArtifactId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkCheckpoint {
    pub work_item_id: Id,
    pub checkpoint: Checkpoint,
    /// Spend since the last report, charged to the budget lineage (DESIGN §12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Budgets>,
}

impl Validate for WorkCheckpoint {
    fn validate(&self) -> Result<(), Rejection> {
        detail(self.checkpoint.note.as_deref())?;
        usage(self.usage.as_ref())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkBlock {
    pub work_item_id: Id,
    /// PRG-4: the resolution it needs.
    pub needs: String,
    /// T9, PRG-4: a block is a checkpoint plus a bounded blocked lease, so it carries the
    /// checkpoint itself (a `work.checkpoint` first would end the lease and leave the
    /// WorkItem `queued`, from which `work.block` is not a transition).
    pub checkpoint: Checkpoint,
}

impl Validate for WorkBlock {
    fn validate(&self) -> Result<(), Rejection> {
        if self.needs.trim().is_empty() {
            return Err(invalid("needs says what resolution the WorkItem waits for"));
        }
        detail(Some(&self.needs))?;
        detail(self.checkpoint.note.as_deref())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkSubmit {
    pub work_item_id: Id,
    pub artifacts: Vec<ArtifactId>,
    pub evidence: Vec<ArtifactId>,
    /// Spend since the last report, charged to the budget lineage (DESIGN §12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Budgets>,
}

impl Validate for WorkSubmit {
    fn validate(&self) -> Result<(), Rejection> {
        if self.artifacts.is_empty() || self.artifacts.len() > 1024 || self.evidence.len() > 1024 {
            return Err(invalid(
                "a submission names 1..=1024 artifacts and at most 1024 Evidence records",
            ));
        }
        usage(self.usage.as_ref())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailReason {
    WorkerError,
    ReviewFailed,
    Deadline,
    Budget,
    Dependency,
    RetriesExhausted,
    Other,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkFail {
    pub work_item_id: Id,
    pub evidence: Vec<ArtifactId>,
    pub reason: FailReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Validate for WorkFail {
    fn validate(&self) -> Result<(), Rejection> {
        detail(self.detail.as_deref())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkCancel {
    pub work_item_id: Id,
    pub reason: String,
}

impl Validate for WorkCancel {
    fn validate(&self) -> Result<(), Rejection> {
        detail(Some(&self.reason))
    }
}

/// PRG-1's revised estimate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Estimate {
    pub completion_at: Option<DateTime<FixedOffset>>,
    /// 0 to 1.
    pub confidence: f64,
}

/// `work.progress` (PRG-1): a structured report. `percent` is stored with it but is never
/// read by a decision (PRG-2); `usage` is charged to the budget lineage (DESIGN §12).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkProgress {
    pub work_item_id: Id,
    pub phase: String,
    pub milestones_done: Vec<String>,
    pub next_checkpoint: Option<String>,
    pub blockers: Vec<String>,
    pub estimate: Estimate,
    pub evidence: Vec<ArtifactId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Budgets>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<f64>,
}

impl Validate for WorkProgress {
    fn validate(&self) -> Result<(), Rejection> {
        if self.phase.trim().is_empty() || self.phase.len() > 512 {
            return Err(invalid("phase must be 1..=512 bytes"));
        }
        if self.milestones_done.len() > 256
            || self.blockers.len() > 256
            || self.evidence.len() > 1024
        {
            return Err(invalid(
                "at most 256 milestones, 256 blockers and 1024 Evidence records",
            ));
        }
        for text in self.milestones_done.iter().chain(&self.blockers) {
            detail(Some(text))?;
        }
        detail(self.next_checkpoint.as_deref())?;
        let confidence = self.estimate.confidence;
        if !confidence.is_finite() || !(0.0..=1.0).contains(&confidence) {
            return Err(invalid("estimate.confidence is between 0 and 1"));
        }
        if self
            .percent
            .is_some_and(|p| !p.is_finite() || !(0.0..=100.0).contains(&p))
        {
            return Err(invalid("percent is between 0 and 100"));
        }
        usage(self.usage.as_ref())
    }
}

/// A reported usage delta is finite and non-negative (OFL-12's "no negative spend").
fn usage(delta: Option<&Budgets>) -> Result<(), Rejection> {
    delta.map_or(Ok(()), |delta| delta.validate_usage("usage"))
}

fn title(text: &str) -> Result<(), Rejection> {
    if text.trim().is_empty() || text.len() > 512 || text.chars().any(char::is_control) {
        return Err(invalid("title must be 1..=512 printable bytes"));
    }
    Ok(())
}

fn detail(text: Option<&str>) -> Result<(), Rejection> {
    if text.is_some_and(|t| t.len() > 4096) {
        return Err(invalid("free text is at most 4 KiB"));
    }
    Ok(())
}

fn invalid(message: impl Into<String>) -> Rejection {
    Rejection::new(ErrorCode::InvalidCommand, message)
}
