//! The typed Event vocabulary: every Event type the Authority appends, as an [`EventKind`]
//! with one payload struct per kind ([`EventPayload`]).
//!
//! Payload fields are declared in the alphabetical order of their wire names, so a payload
//! serialises to the same bytes the log has always held (the chain hashes those bytes; the
//! stored text is never re-serialised, this only keeps new Events looking like old ones).
//! Parsing is lenient about extra fields: the log is authoritative and may hold Events
//! written by a newer version.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::context::EventRange;
use crate::digest::{ArtifactId, Sha256Digest};
use crate::dsse::KeyId;
use crate::error::{ErrorCode, Rejection};
use crate::event::Event;
use crate::evidence::{MethodKind, Outcome};
use crate::id::Id;
use crate::lifecycle::{ArtifactDisposed, HoldLifted, HoldPlaced, RecordsDisposed, RetentionSet};
use crate::session::Role;
use crate::work::events::{WorkEvent, WorkEventKind};

/// Every Event type, by its wire name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    GroupCreated,
    MembershipSet,
    SessionOpened,
    ArtifactPublished,
    ArtifactIntegrityFailure,
    EvidenceRecorded,
    MembershipRemoved,
    AgentDeactivated,
    AgentKeyRotated,
    ArtifactRepaired,
    /// An Artifact was published as reusable knowledge (CTX-6).
    ReusePublished,
    ContextPublished,
    ContextForwarded,
    /// The operator set the Group's policy (SCH-6, SCH-7).
    GroupPolicySet,
    /// The operator set a retention policy (issue #46).
    RetentionSet,
    /// A legal hold was placed, or lifted.
    HoldPlaced,
    HoldLifted,
    /// A blob's bytes were disposed of by policy; its manifests stay as tombstones.
    ArtifactDisposed,
    /// A Mission's records (manifests, Evidence) were disposed of by policy; tombstones stay.
    RecordsDisposed,
    /// A Mission or WorkItem Event (`crate::work::events`).
    Work(WorkEventKind),
}

impl EventKind {
    pub const ALL: [EventKind; 19] = [
        EventKind::GroupCreated,
        EventKind::MembershipSet,
        EventKind::SessionOpened,
        EventKind::ArtifactPublished,
        EventKind::ArtifactIntegrityFailure,
        EventKind::EvidenceRecorded,
        EventKind::MembershipRemoved,
        EventKind::AgentDeactivated,
        EventKind::AgentKeyRotated,
        EventKind::ArtifactRepaired,
        EventKind::ReusePublished,
        EventKind::ContextPublished,
        EventKind::ContextForwarded,
        EventKind::GroupPolicySet,
        EventKind::RetentionSet,
        EventKind::HoldPlaced,
        EventKind::HoldLifted,
        EventKind::ArtifactDisposed,
        EventKind::RecordsDisposed,
    ];

    /// The `type` of an Event of this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::GroupCreated => "group.created",
            EventKind::MembershipSet => "membership.set",
            EventKind::SessionOpened => "session.opened",
            EventKind::ArtifactPublished => "artifact.published",
            EventKind::ArtifactIntegrityFailure => "artifact.integrity_failure",
            EventKind::EvidenceRecorded => "evidence.recorded",
            EventKind::MembershipRemoved => "membership.removed",
            EventKind::AgentDeactivated => "agent.deactivated",
            EventKind::AgentKeyRotated => "agent.key_rotated",
            EventKind::Work(kind) => kind.as_str(),
            EventKind::ArtifactRepaired => "artifact.repaired",
            EventKind::ReusePublished => "artifact.reuse_published",
            EventKind::ContextPublished => "context.published",
            EventKind::ContextForwarded => "context.forwarded",
            EventKind::GroupPolicySet => "group.policy_set",
            EventKind::RetentionSet => "retention.set",
            EventKind::HoldPlaced => "hold.placed",
            EventKind::HoldLifted => "hold.lifted",
            EventKind::ArtifactDisposed => "artifact.disposed",
            EventKind::RecordsDisposed => "records.disposed",
        }
    }

    /// The kind of a wire name; `None` for a type this version does not know.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
            .or_else(|| WorkEventKind::parse(text).map(EventKind::Work))
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `group.created`
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupCreated {
    pub group_id: Id,
}

/// `membership.set`: a Membership was created or changed; its epoch moved on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MembershipSet {
    pub agent_id: Id,
    pub membership_epoch: u64,
    /// The Missions the Membership covers (CTX-5); absent (and not written) for the whole
    /// Group, so Events of unscoped Memberships keep their old bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missions: Option<Vec<Id>>,
    pub roles: Vec<Role>,
}

/// `session.opened`: a new session replaced the Agent's earlier ones in the Group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionOpened {
    pub agent_id: Id,
    pub membership_epoch: u64,
    pub session_epoch: u64,
}

/// `membership.removed`: the Agent is no longer a member; its sessions and streams in the
/// Group ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MembershipRemoved {
    pub agent_id: Id,
    pub membership_epoch: u64,
}

/// `agent.deactivated`: appended to every Group the Agent was a member of; it can open no
/// session and sign nothing new anywhere.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentDeactivated {
    pub agent_id: Id,
}

/// `agent.key_rotated`: appended to every Group the Agent is a member of; the old key
/// verifies what was recorded before this Event and nothing newer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentKeyRotated {
    pub agent_id: Id,
    pub keyid: KeyId,
    pub retired_keyid: KeyId,
}

/// `group.policy_set`: the operator set the Group's policy. SCH-6, SCH-7: the highest
/// `priorityClass` a Coordinator's `mission.create` may ask for is the Organization's to set,
/// not the Coordinator's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupPolicySet {
    pub group_id: Id,
    pub mission_priority_ceiling: crate::work::contract::Level,
}

/// `artifact.published`: a manifest about an artifact was accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactPublished {
    pub artifact: ArtifactId,
    pub lease_id: Id,
    pub manifest_id: ArtifactId,
    pub media_type: String,
    pub mission_id: Id,
    pub ownership_epoch: u64,
    pub producer: Id,
    pub sha256: Sha256Digest,
    pub size: u64,
    pub sources: Vec<ArtifactId>,
    pub work_item_id: Id,
}

/// `artifact.integrity_failure`: stored bytes no longer match their address; quarantined.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IntegrityFailure {
    pub artifact: ArtifactId,
    pub reason: String,
}

/// `artifact.repaired`: a quarantined blob's good bytes were uploaded again; reads work
/// again (appended to every Group that published it, like the integrity failure).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactRepaired {
    pub artifact: ArtifactId,
}

/// `artifact.reuse_published`: the Artifact is reusable knowledge in its Group (CTX-6): any
/// Mission of the Group may read and cite it. Names the approval Evidence (signed by an
/// Organization approver), the classification, and the Mission it came from (provenance).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReusePublished {
    pub approved_by: Id,
    pub artifact: ArtifactId,
    pub classification: crate::manifest::Classification,
    pub evidence_id: ArtifactId,
    pub mission_id: Id,
    pub published_by: Id,
}

/// `evidence.recorded`
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceRecorded {
    pub artifacts: Vec<ArtifactId>,
    pub criterion: String,
    pub evidence_id: ArtifactId,
    pub method: MethodKind,
    pub mission_id: Id,
    pub outcome: Outcome,
    pub producer: Id,
    pub supersedes: Option<ArtifactId>,
    pub work_item_id: Id,
}

/// `context.published`: a Context Package version was accepted (CTX-4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextPublished {
    pub artifacts: Vec<ArtifactId>,
    pub context_id: ArtifactId,
    pub generator: Id,
    pub mission_id: Id,
    pub package_id: Id,
    pub previous: Option<ArtifactId>,
    pub source_events: EventRange,
    pub version: u64,
    pub work_item_id: Option<Id>,
}

/// `context.forwarded`: a Context Package version was copied from one Group to another
/// (CTX-7); appended to both, each naming the other.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextForwarded {
    pub artifacts: Vec<ArtifactId>,
    pub context_id: ArtifactId,
    pub forwarder: Id,
    pub from_group_id: Id,
    pub package_id: Id,
    pub to_group_id: Id,
    pub version: u64,
}

/// One Event's payload, typed by its kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventPayload {
    GroupCreated(GroupCreated),
    MembershipSet(MembershipSet),
    SessionOpened(SessionOpened),
    ArtifactPublished(ArtifactPublished),
    ArtifactIntegrityFailure(IntegrityFailure),
    EvidenceRecorded(EvidenceRecorded),
    MembershipRemoved(MembershipRemoved),
    AgentDeactivated(AgentDeactivated),
    AgentKeyRotated(AgentKeyRotated),
    ArtifactRepaired(ArtifactRepaired),
    ReusePublished(ReusePublished),
    ContextPublished(ContextPublished),
    ContextForwarded(ContextForwarded),
    GroupPolicySet(GroupPolicySet),
    RetentionSet(RetentionSet),
    HoldPlaced(HoldPlaced),
    HoldLifted(HoldLifted),
    ArtifactDisposed(ArtifactDisposed),
    RecordsDisposed(RecordsDisposed),
    Work(WorkEventKind, WorkEvent),
}

impl EventPayload {
    pub fn kind(&self) -> EventKind {
        match self {
            EventPayload::GroupCreated(_) => EventKind::GroupCreated,
            EventPayload::MembershipSet(_) => EventKind::MembershipSet,
            EventPayload::SessionOpened(_) => EventKind::SessionOpened,
            EventPayload::ArtifactPublished(_) => EventKind::ArtifactPublished,
            EventPayload::ArtifactIntegrityFailure(_) => EventKind::ArtifactIntegrityFailure,
            EventPayload::EvidenceRecorded(_) => EventKind::EvidenceRecorded,
            EventPayload::MembershipRemoved(_) => EventKind::MembershipRemoved,
            EventPayload::AgentDeactivated(_) => EventKind::AgentDeactivated,
            EventPayload::AgentKeyRotated(_) => EventKind::AgentKeyRotated,
            EventPayload::ArtifactRepaired(_) => EventKind::ArtifactRepaired,
            EventPayload::ReusePublished(_) => EventKind::ReusePublished,
            EventPayload::ContextPublished(_) => EventKind::ContextPublished,
            EventPayload::ContextForwarded(_) => EventKind::ContextForwarded,
            EventPayload::GroupPolicySet(_) => EventKind::GroupPolicySet,
            EventPayload::RetentionSet(_) => EventKind::RetentionSet,
            EventPayload::HoldPlaced(_) => EventKind::HoldPlaced,
            EventPayload::HoldLifted(_) => EventKind::HoldLifted,
            EventPayload::ArtifactDisposed(_) => EventKind::ArtifactDisposed,
            EventPayload::RecordsDisposed(_) => EventKind::RecordsDisposed,
            EventPayload::Work(kind, _) => EventKind::Work(*kind),
        }
    }

    /// The Agent who acted (issue #50: search by an Agent finds what it did, not only what it
    /// produced): the signer of the Command behind a Mission or WorkItem Event, the producer
    /// of an artifact or Evidence, the Agent who opened a session, published or forwarded a
    /// Context Package, published reusable knowledge, or placed or lifted a hold as a Group's
    /// approver. `None` for what the operator or the
    /// Authority itself did (Groups, Memberships, keys, expiry, integrity). The index of
    /// `GET /v1/groups/{g}/agents/{agentId}/events` is this, stored beside each Event.
    pub fn actor(&self) -> Option<&Id> {
        match self {
            EventPayload::SessionOpened(p) => Some(&p.agent_id),
            EventPayload::ArtifactPublished(p) => Some(&p.producer),
            EventPayload::EvidenceRecorded(p) => Some(&p.producer),
            EventPayload::ReusePublished(p) => Some(&p.published_by),
            EventPayload::ContextPublished(p) => Some(&p.generator),
            EventPayload::ContextForwarded(p) => Some(&p.forwarder),
            EventPayload::Work(_, p) => p.actor.as_ref().map(|actor| &actor.agent_id),
            EventPayload::HoldPlaced(p) => p.placed_by.as_ref(),
            EventPayload::HoldLifted(p) => p.lifted_by.as_ref(),
            EventPayload::GroupCreated(_)
            | EventPayload::MembershipSet(_)
            | EventPayload::ArtifactIntegrityFailure(_)
            | EventPayload::MembershipRemoved(_)
            | EventPayload::AgentDeactivated(_)
            | EventPayload::AgentKeyRotated(_)
            | EventPayload::ArtifactRepaired(_)
            | EventPayload::GroupPolicySet(_)
            | EventPayload::RetentionSet(_)
            | EventPayload::ArtifactDisposed(_)
            | EventPayload::RecordsDisposed(_) => None,
        }
    }

    /// The payload's JSON text, as it is appended.
    pub fn to_json(&self) -> String {
        let text = match self {
            EventPayload::GroupCreated(p) => serde_json::to_string(p),
            EventPayload::MembershipSet(p) => serde_json::to_string(p),
            EventPayload::SessionOpened(p) => serde_json::to_string(p),
            EventPayload::ArtifactPublished(p) => serde_json::to_string(p),
            EventPayload::ArtifactIntegrityFailure(p) => serde_json::to_string(p),
            EventPayload::EvidenceRecorded(p) => serde_json::to_string(p),
            EventPayload::MembershipRemoved(p) => serde_json::to_string(p),
            EventPayload::AgentDeactivated(p) => serde_json::to_string(p),
            EventPayload::AgentKeyRotated(p) => serde_json::to_string(p),
            EventPayload::ArtifactRepaired(p) => serde_json::to_string(p),
            EventPayload::ReusePublished(p) => serde_json::to_string(p),
            EventPayload::ContextPublished(p) => serde_json::to_string(p),
            EventPayload::ContextForwarded(p) => serde_json::to_string(p),
            EventPayload::GroupPolicySet(p) => serde_json::to_string(p),
            EventPayload::RetentionSet(p) => serde_json::to_string(p),
            EventPayload::HoldPlaced(p) => serde_json::to_string(p),
            EventPayload::HoldLifted(p) => serde_json::to_string(p),
            EventPayload::ArtifactDisposed(p) => serde_json::to_string(p),
            EventPayload::RecordsDisposed(p) => serde_json::to_string(p),
            EventPayload::Work(_, p) => serde_json::to_string(p),
        };
        // These structs hold only strings, numbers, lists and maps with string keys.
        text.unwrap_or_else(|_| unreachable!("an Event payload always serialises"))
    }

    /// The typed payload of a stored Event; `Ok(None)` for a type this version does not know.
    pub fn of(event: &Event) -> Result<Option<Self>, Rejection> {
        let Some(kind) = EventKind::parse(&event.kind) else {
            return Ok(None);
        };
        let text = event.payload.get();
        fn parse<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, Rejection> {
            serde_json::from_str(text)
                .map_err(|e| Rejection::new(ErrorCode::BadRequest, format!("event payload: {e}")))
        }
        Ok(Some(match kind {
            EventKind::GroupCreated => EventPayload::GroupCreated(parse(text)?),
            EventKind::MembershipSet => EventPayload::MembershipSet(parse(text)?),
            EventKind::SessionOpened => EventPayload::SessionOpened(parse(text)?),
            EventKind::ArtifactPublished => EventPayload::ArtifactPublished(parse(text)?),
            EventKind::ArtifactIntegrityFailure => {
                EventPayload::ArtifactIntegrityFailure(parse(text)?)
            }
            EventKind::EvidenceRecorded => EventPayload::EvidenceRecorded(parse(text)?),
            EventKind::MembershipRemoved => EventPayload::MembershipRemoved(parse(text)?),
            EventKind::AgentDeactivated => EventPayload::AgentDeactivated(parse(text)?),
            EventKind::AgentKeyRotated => EventPayload::AgentKeyRotated(parse(text)?),
            EventKind::ArtifactRepaired => EventPayload::ArtifactRepaired(parse(text)?),
            EventKind::ReusePublished => EventPayload::ReusePublished(parse(text)?),
            EventKind::ContextPublished => EventPayload::ContextPublished(parse(text)?),
            EventKind::ContextForwarded => EventPayload::ContextForwarded(parse(text)?),
            EventKind::GroupPolicySet => EventPayload::GroupPolicySet(parse(text)?),
            EventKind::RetentionSet => EventPayload::RetentionSet(parse(text)?),
            EventKind::HoldPlaced => EventPayload::HoldPlaced(parse(text)?),
            EventKind::HoldLifted => EventPayload::HoldLifted(parse(text)?),
            EventKind::ArtifactDisposed => EventPayload::ArtifactDisposed(parse(text)?),
            EventKind::RecordsDisposed => EventPayload::RecordsDisposed(parse(text)?),
            EventKind::Work(kind) => EventPayload::Work(kind, parse(text)?),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire names round-trip and are distinct.
    #[test]
    fn kinds_round_trip_by_name() {
        for kind in EventKind::ALL {
            assert_eq!(EventKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(EventKind::parse("bench.tick"), None);
    }

    /// A typed payload serialises exactly as the untyped `json!` it replaced (keys sorted),
    /// so Events appended after the change look like those before it.
    #[test]
    fn payload_bytes_match_the_sorted_json_of_before() {
        let payload = EventPayload::SessionOpened(SessionOpened {
            agent_id: Id::parse("agentId", "a1").expect("id"),
            membership_epoch: 2,
            session_epoch: 3,
        });
        let before = serde_json::json!({"agentId": "a1", "sessionEpoch": 3, "membershipEpoch": 2});
        assert_eq!(
            payload.to_json(),
            serde_json::to_string(&before).expect("json")
        );
    }
}
