//! The answers of the Command route and the Mission and WorkItem reads (DESIGN §10).

use serde::{Deserialize, Serialize};

use super::command::WorkProgress;
use super::contract::{Budgets, SelectionBasis, WorkContract};
use super::machine::{MissionState, WorkState};

/// One Event a Command appended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendedEvent {
    pub sequence: u64,
    #[serde(rename = "type")]
    pub kind: String,
}

/// `201` of `POST /v1/groups/{g}/commands`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandAccepted {
    pub command_id: String,
    pub events: Vec<AppendedEvent>,
    /// The aggregate's view after the Command: a [`WorkItemView`], a [`MissionView`], or a
    /// proposal.
    pub state: serde_json::Value,
    /// Whether this answer is a stored one replayed for a retried `commandId` (nothing was
    /// done this time). Not on the wire.
    #[serde(skip)]
    pub replayed: bool,
}

/// `GET /v1/groups/{g}/commands/{commandId}`: an accepted Command as its Agent signed it
/// (issue #50), for an auditor to check the signature with the Agent's registered key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignedCommand {
    pub group_id: String,
    pub command_id: String,
    pub agent_id: String,
    /// The DSSE envelope as the Agent sent it.
    pub envelope: crate::Envelope,
}

/// The current owner of a WorkItem.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    pub agent_id: String,
    pub ownership_epoch: u64,
    pub expires_at: Option<String>,
}

/// A lease record (DESIGN §10).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    pub lease_id: String,
    pub kind: String,
    pub agent_id: String,
    pub session_epoch: u64,
    pub work_item_id: String,
    pub ownership_epoch: u64,
    pub started_at: String,
    /// When it was renewed: the newest (at most 64) renewals, oldest first (LSE-3); the
    /// Group's log has every `lease.renewed`.
    pub renewals: Vec<String>,
    /// Whether it was renewed more often than `renewals` shows (issue #44: a view of every
    /// renewal made each renewal cost the lease's age).
    #[serde(default)]
    pub renewals_truncated: bool,
    pub expires_at: String,
}

/// A pending preemption request of the current Execution Lease (LSE-12 step 1); it ends
/// with that lease (the owner's checkpoint releases it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preemption {
    pub requested_at: String,
    pub requested_by: String,
    pub lease_id: String,
}

/// An inert audit record (OFL-2): a manifest refused `stale_lease` because its producer's
/// lease was of an ownership epoch older than the WorkItem's. It completes nothing, and is in
/// no listing, lineage or Evidence check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InertPublication {
    /// `blake3:<hex>` of the manifest payload, as a published manifest's id would be.
    pub manifest_id: crate::ArtifactId,
    pub producer: String,
    pub lease_id: String,
    pub ownership_epoch: u64,
    pub received_at: String,
}

/// The latest `work.progress` of a WorkItem (PRG-1; its `percent` decides nothing, PRG-2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressView {
    /// The `work.progress_reported` Event.
    pub sequence: u64,
    pub agent_id: String,
    pub reported_at: String,
    pub report: WorkProgress,
}

/// An offer as recorded (OFR-10: with its structured selection basis).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OfferView {
    pub offer_id: String,
    pub candidates: Vec<String>,
    pub expires_at: String,
    /// `live`, `expired`, `accepted` or `withdrawn`.
    pub status: String,
    pub contract_revision: u64,
    pub selection_basis: SelectionBasis,
    /// Candidate → its structured decline reason (OFR-9).
    pub declined: serde_json::Map<String, serde_json::Value>,
}

/// Limit and spending in the six dimensions (spending is recorded with the budgets issue).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BudgetView {
    pub limit: Budgets,
    pub spent: Budgets,
}

/// `GET /v1/workitems/{id}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkItemView {
    pub work_item_id: String,
    pub group_id: String,
    pub mission_id: String,
    pub state: WorkState,
    pub revision: u64,
    pub contract_revision: u64,
    pub contract: WorkContract,
    pub owner: Option<Owner>,
    pub lease: Option<Lease>,
    /// Its newest offers (at most 16), oldest first; the live one is among them.
    pub offers: Vec<OfferView>,
    /// Whether older offers exist beyond those shown (then the log has them).
    #[serde(default)]
    pub offers_truncated: bool,
    pub depends_on: Vec<String>,
    pub eligible: bool,
    pub approval_granted: bool,
    pub child_mission_id: Option<String>,
    pub budget: BudgetView,
    /// `work.start`s so far (PRG-8: bounded by `retryPolicy.maxAttempts`).
    pub attempts: u32,
    /// PRG-9: the key of the current attempt, derived from the DLV-11 operation key
    /// (`operation_key(mission, workItem, ownershipEpoch, "attempt-<attempts>")`); absent
    /// before the first start.
    pub attempt_key: Option<String>,
    pub progress: Option<ProgressView>,
    pub preemption_requested: Option<Preemption>,
    /// Manifests a fenced owner published after the WorkItem was reassigned (OFL-2): kept for
    /// audit, refused `stale_lease`, never artifacts of the WorkItem; the newest 32, oldest
    /// first.
    pub inert_publications: Vec<InertPublication>,
    /// The conversation before acceptance (CON-2): the newest questions (at most
    /// `conversation::QUESTIONS_SHOWN`, oldest first) with their answers; the log has them all.
    #[serde(default)]
    pub questions: Vec<super::conversation::QuestionView>,
    /// Whether older inert records exist beyond the newest ones shown (issue #40).
    #[serde(default)]
    pub inert_publications_truncated: bool,
    /// Sequences of the newest (at most 64) Events that touched it, oldest first; the Group's
    /// log has them all.
    pub history: Vec<u64>,
    /// Whether older Events touched it too (then the log has them).
    #[serde(default)]
    pub history_truncated: bool,
}

/// A WorkItem as a node of its Mission's graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkNode {
    pub work_item_id: String,
    pub state: WorkState,
    pub eligible: bool,
}

/// A `dependsOn` edge: `from` depends on `to`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkEdge {
    pub from: String,
    pub to: String,
}

/// `GET /v1/missions/{id}/workitems`: the DAG (DEP-1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkGraph {
    pub nodes: Vec<WorkNode>,
    pub edges: Vec<WorkEdge>,
}

/// `GET /v1/missions/{id}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MissionView {
    pub mission_id: String,
    pub group_id: String,
    pub title: String,
    pub priority_class: super::contract::Level,
    pub state: MissionState,
    pub revision: u64,
    pub budget: BudgetView,
    pub parent_work_item_id: Option<String>,
    pub work_items: Vec<WorkNode>,
}

/// What a capability token lets its bearer do (DESIGN §10, LSE-6): each scope opens exactly
/// one kind of write, for the lease's WorkItem only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TokenScope {
    /// Blob uploads (`POST /v1/blobs`, `PUT /v1/blobs/{digest}`).
    #[serde(rename = "blob:write")]
    BlobWrite,
    /// `POST /v1/artifacts` for the lease's WorkItem.
    #[serde(rename = "artifact:publish")]
    ArtifactPublish,
    /// `POST /v1/evidence` for the lease's WorkItem.
    #[serde(rename = "evidence:record")]
    EvidenceRecord,
}

impl TokenScope {
    /// The wire name, as in `scope`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BlobWrite => "blob:write",
            Self::ArtifactPublish => "artifact:publish",
            Self::EvidenceRecord => "evidence:record",
        }
    }
}

/// Body of `POST /v1/leases/{leaseId}/tokens`. `replaces` names a token of the same lease
/// that the new one rotates out: it is revoked in the transaction that issues the new one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TokenRequest {
    pub scope: Vec<TokenScope>,
    pub ttl_seconds: u64,
    #[serde(default)]
    pub replaces: Option<String>,
}

/// `201` of `POST /v1/leases/{leaseId}/tokens`. `token` is shown once; the server keeps only
/// its hash. `expiresAt` is no later than the lease's expiry (LSE-7).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenIssued {
    pub token_id: String,
    pub token: String,
    pub scope: Vec<TokenScope>,
    pub expires_at: String,
}

/// CTX-8: what a Worker's global Scheduler may see of a WorkItem (`GET
/// /v1/workitems/{id}/scheduling`): urgency, deadline, budget state, dependencies and
/// classification, and no content (no objective, contract prose, inputs, Artifacts or
/// Context).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SchedulingView {
    pub work_item_id: String,
    pub group_id: String,
    pub mission_id: String,
    pub state: super::machine::WorkState,
    pub eligible: bool,
    pub urgency: super::contract::Level,
    pub priority_class: super::contract::Level,
    pub deadline: chrono::DateTime<chrono::FixedOffset>,
    pub business_impact: super::contract::Impact,
    pub risk: super::contract::Risk,
    pub approval_required: bool,
    pub budget: BudgetView,
    pub depends_on: Vec<String>,
    /// The highest classification of the WorkItem's inputs visible to the caller (`internal`
    /// when it has none).
    pub classification: crate::manifest::Classification,
}

/// The most Commands one batch carries (`POST /v1/groups/{g}/commands/batch`).
pub const MAX_BATCH_COMMANDS: usize = 256;

/// `POST /v1/groups/{g}/commands/batch`: signed Commands of the caller's session, applied in
/// order in one transaction, each in a savepoint of its own, stopping at the first refusal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CommandBatch {
    pub commands: Vec<crate::dsse::Envelope>,
}

/// Its answer: the accepted Commands' answers, in order, and the refusal that stopped it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchAccepted {
    pub accepted: Vec<CommandAccepted>,
    pub refused: Option<BatchRefusal>,
}

/// The first refused Command of a batch: its index and the problem it was refused with.
/// Nothing of it and nothing after it was applied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchRefusal {
    pub index: usize,
    pub problem: crate::problem::ErrorBody,
}
