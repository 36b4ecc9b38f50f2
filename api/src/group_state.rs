//! The projection of a Group's log: a pure fold of typed Events ([`GroupState::apply`]).
//!
//! The server writes it into every snapshot's state document, and a client restoring from
//! a snapshot folds the Events after it with the same function, so both agree by
//! construction. It is where WorkItems, offers and leases will be folded as well.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{ErrorCode, Rejection};
use crate::event::Event;
use crate::evidence::Outcome;
use crate::kinds::{AgentDeactivated, EventPayload, MembershipRemoved};
use crate::session::Role;

/// A Membership as the projection keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberState {
    pub membership_epoch: u64,
    /// The Missions it covers (CTX-5); absent: the whole Group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missions: Option<Vec<String>>,
    pub roles: Vec<Role>,
}

/// A published manifest as the projection keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactState {
    pub artifact: String,
    pub producer: String,
    pub sequence: u64,
    pub work_item_id: String,
}

/// A recorded Evidence as the projection keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceState {
    pub criterion: String,
    pub outcome: Outcome,
    pub sequence: u64,
    pub supersedes: Option<String>,
    pub work_item_id: String,
}

/// The projected state of a Group at a sequence: what a restoring Agent needs instead of
/// replaying the compacted Events.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupState {
    pub group_id: String,
    pub sequence: u64,
    /// Agent id → its Membership as of the last `membership.set`.
    pub memberships: BTreeMap<String, MemberState>,
    /// Agent id → session epoch.
    pub session_epochs: BTreeMap<String, u64>,
    /// Published artifacts by manifest id.
    pub artifacts: BTreeMap<String, ArtifactState>,
    /// Recorded Evidence by evidence id.
    pub evidence: BTreeMap<String, EvidenceState>,
    /// Artifacts published as reusable knowledge (CTX-6) → their classification.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reusable: BTreeMap<String, String>,
    /// Artifacts that failed verification.
    pub integrity_failures: Vec<String>,
    /// Missions and WorkItems as the log says they are.
    #[serde(default)]
    pub work: crate::work::events::WorkProjection,
    /// Events per type, compacted ones included.
    pub event_counts: BTreeMap<String, u64>,
}

impl GroupState {
    /// Reads a snapshot's state document, as the server wrote it: a restoring client then
    /// folds the Events after the snapshot into it with [`GroupState::apply`].
    pub fn from_document(document: &[u8]) -> Result<Self, Rejection> {
        serde_json::from_slice(document)
            .map_err(|e| Rejection::new(ErrorCode::BadRequest, format!("state document: {e}")))
    }

    /// Folds one Event in. An Event of a type this version does not know, or whose payload
    /// does not parse, is only counted.
    pub fn apply(&mut self, event: &Event) {
        match EventPayload::of(event).ok().flatten() {
            Some(EventPayload::MembershipSet(set)) => {
                self.memberships.insert(
                    set.agent_id.to_string(),
                    MemberState {
                        membership_epoch: set.membership_epoch,
                        missions: set
                            .missions
                            .map(|missions| missions.iter().map(ToString::to_string).collect()),
                        roles: set.roles,
                    },
                );
            }
            // A removed or deactivated member leaves the projection; its session epoch stays
            // (a later session counts on from it).
            Some(EventPayload::MembershipRemoved(MembershipRemoved { agent_id, .. }))
            | Some(EventPayload::AgentDeactivated(AgentDeactivated { agent_id })) => {
                self.memberships.remove(agent_id.as_str());
            }
            Some(EventPayload::SessionOpened(opened)) => {
                self.session_epochs
                    .insert(opened.agent_id.to_string(), opened.session_epoch);
            }
            Some(EventPayload::ArtifactPublished(published)) => {
                self.artifacts.insert(
                    published.manifest_id.to_string(),
                    ArtifactState {
                        artifact: published.artifact.to_string(),
                        producer: published.producer.to_string(),
                        sequence: event.sequence,
                        work_item_id: published.work_item_id.to_string(),
                    },
                );
            }
            Some(EventPayload::EvidenceRecorded(recorded)) => {
                self.evidence.insert(
                    recorded.evidence_id.to_string(),
                    EvidenceState {
                        criterion: recorded.criterion,
                        outcome: recorded.outcome,
                        sequence: event.sequence,
                        supersedes: recorded.supersedes.map(|id| id.to_string()),
                        work_item_id: recorded.work_item_id.to_string(),
                    },
                );
            }
            Some(EventPayload::ArtifactIntegrityFailure(failure)) => {
                self.integrity_failures.push(failure.artifact.to_string());
            }
            Some(EventPayload::Work(_, work)) => self.work.apply(event.sequence, &work),
            Some(EventPayload::ArtifactRepaired(repaired)) => {
                let artifact = repaired.artifact.to_string();
                self.integrity_failures.retain(|failed| *failed != artifact);
            }
            Some(EventPayload::ReusePublished(published)) => {
                self.reusable.insert(
                    published.artifact.to_string(),
                    published.classification.as_str().to_owned(),
                );
            }
            // Context Packages are summaries, never state (CTX-1): counted only. The Group's
            // policy (SCH-6) decides future Commands only; it is the `groups` row's. Retention,
            // holds and dispositions are the lifecycle tables' (issue #46): a disposed
            // artifact's manifest stays in the state, as it stays in the store.
            Some(
                EventPayload::GroupCreated(_)
                | EventPayload::GroupPolicySet(_)
                | EventPayload::RetentionSet(_)
                | EventPayload::HoldPlaced(_)
                | EventPayload::HoldLifted(_)
                | EventPayload::ArtifactDisposed(_)
                | EventPayload::RecordsDisposed(_)
                | EventPayload::AgentKeyRotated(_)
                | EventPayload::ContextPublished(_)
                | EventPayload::ContextForwarded(_),
            )
            | None => {}
        }
        *self.event_counts.entry(event.kind.clone()).or_default() += 1;
        self.sequence = event.sequence;
    }
}
