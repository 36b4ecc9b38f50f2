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

pub use super::event_kind::WorkEventKind;

/// The payload of every Mission and WorkItem Event. Fields are in alphabetical order of
/// their wire names and `detail` is a `serde_json::Value` (sorted keys), so an Event parsed
/// into a `serde_json::Value` and written again keeps its bytes, and so its hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkEvent {
    /// Who signed the Command that caused it (issue #50: who offered, accepted, failed);
    /// absent on the Authority's own Events (expiry, revocation) and on Events appended
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<Actor>,
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

/// The signer of the Command an Event records: its Agent and the key that signed (a key id,
/// as `GET /v1/agents/{id}/keys` lists them). Fields in alphabetical order, as `WorkEvent`'s.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Actor {
    pub agent_id: Id,
    pub key_id: String,
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
