//! The Agent Card and Presence (REQUIREMENTS terms; SCH-11).
//!
//! An Agent Card is a DSSE envelope of payloadType `application/vnd.mwp.agent-card.v1+json`
//! signed by the Agent's current key: `{agentId, version, capabilities: [{id, version}],
//! maxConcurrency, publicKey, issuedAt}`. `PUT /v1/agents/{agentId}/card` registers or
//! updates it; its `version` becomes the version manifests, Evidence and Context Packages
//! must claim. A card issued no later than the stored one is refused (`conflict`), so an old
//! card cannot be replayed to roll capabilities back.
//!
//! Presence is `PUT /v1/groups/{g}/presence` `{freeSlots, capacityState}` from a member's
//! session: a non-authoritative, rate-limited hint that a Coordinator reads with
//! `GET /v1/groups/{g}/presence`. Nothing the Authority decides depends on it.

use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};

use crate::error::{ErrorCode, Rejection};
use crate::id::Id;
use crate::signed::SignedPayload;
use crate::work::contract::Capability;

/// DSSE payload type of an Agent Card.
pub const AGENT_CARD_TYPE: &str = "application/vnd.mwp.agent-card.v1+json";
/// The most slots a card may declare.
pub const MAX_CONCURRENCY: u32 = 256;
/// The most capabilities a card may declare.
pub const MAX_CAPABILITIES: usize = 64;
/// A Presence report at most this often per Agent and Group, in seconds.
pub const PRESENCE_INTERVAL_SECONDS: i64 = 2;

/// The signed Agent Card.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentCard {
    pub agent_id: Id,
    pub version: String,
    pub capabilities: Vec<Capability>,
    pub max_concurrency: u32,
    /// Base64 of the 32-byte Ed25519 key that signs it (the Agent's current key).
    pub public_key: String,
    pub issued_at: DateTime<FixedOffset>,
}

fn printable(what: &str, text: &str, max: usize) -> Result<(), Rejection> {
    if text.is_empty() || text.len() > max || text.chars().any(char::is_control) {
        return Err(Rejection::new(
            ErrorCode::BadRequest,
            format!("{what} must be 1..={max} bytes of printable text"),
        ));
    }
    Ok(())
}

impl SignedPayload for AgentCard {
    const PAYLOAD_TYPE: &'static str = AGENT_CARD_TYPE;
    const NAME: &'static str = "agent card";
    const MAX_BYTES: usize = 16 * 1024;
    const INVALID: ErrorCode = ErrorCode::BadRequest;

    fn validate(&self) -> Result<(), Rejection> {
        printable("version", &self.version, 256)?;
        if !(1..=MAX_CONCURRENCY).contains(&self.max_concurrency) {
            return Err(Rejection::new(
                ErrorCode::BadRequest,
                format!("maxConcurrency must be 1..={MAX_CONCURRENCY}"),
            ));
        }
        if self.capabilities.len() > MAX_CAPABILITIES {
            return Err(Rejection::new(
                ErrorCode::BadRequest,
                format!("at most {MAX_CAPABILITIES} capabilities"),
            ));
        }
        for (i, c) in self.capabilities.iter().enumerate() {
            printable("capabilities[].id", &c.id, 128)?;
            printable("capabilities[].version", &c.version, 64)?;
            if self.capabilities[..i].contains(c) {
                return Err(Rejection::new(
                    ErrorCode::BadRequest,
                    format!("capability {} {} is listed twice", c.id, c.version),
                ));
            }
        }
        printable("publicKey", &self.public_key, 64)
    }

    fn signer_claim(&self) -> (&Id, Option<&str>) {
        // The card sets the version, so it claims none to be checked against.
        (&self.agent_id, None)
    }
}

/// What an Agent's capacity looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapacityState {
    /// Free slots now.
    Available,
    /// Every slot busy; offers are still admitted into the queue.
    Busy,
    /// The queue is full: offers are declined `capacity`.
    Saturated,
    /// Draining or cut off: accepts nothing new.
    Offline,
}

/// The most schedules one Presence report discloses.
pub const MAX_SCHEDULES: usize = 256;

/// Body of `PUT /v1/groups/{g}/presence`: capacity, and the schedule of each WorkItem of this
/// Group the Worker owns and has not finished (DIS-1). Only this Group's WorkItems, never
/// another Group's names or queue positions (DIS-2): the server refuses any other.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PresenceReport {
    pub free_slots: u32,
    pub capacity_state: CapacityState,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<Schedule>,
}

/// DIS-1: a WorkItem's schedule as its Worker estimates it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Schedule {
    pub work_item_id: Id,
    /// The estimated start window.
    pub start_from: DateTime<FixedOffset>,
    pub start_to: DateTime<FixedOffset>,
    pub completion_at: DateTime<FixedOffset>,
    /// 0…1
    pub confidence: f64,
    /// The estimated computation time, in seconds.
    pub compute_seconds: u64,
}

impl PresenceReport {
    /// Bounds the types cannot say.
    pub fn validate(&self) -> Result<(), Rejection> {
        if self.schedules.len() > MAX_SCHEDULES {
            return Err(Rejection::new(
                ErrorCode::BadRequest,
                format!("at most {MAX_SCHEDULES} schedules"),
            ));
        }
        for (i, s) in self.schedules.iter().enumerate() {
            if !(0.0..=1.0).contains(&s.confidence) || s.start_to < s.start_from {
                return Err(Rejection::new(
                    ErrorCode::BadRequest,
                    format!(
                        "schedule of {}: confidence is 0…1 and startTo is not before startFrom",
                        s.work_item_id
                    ),
                ));
            }
            if self.schedules[..i]
                .iter()
                .any(|o| o.work_item_id == s.work_item_id)
            {
                return Err(Rejection::new(
                    ErrorCode::BadRequest,
                    format!("{} is scheduled twice", s.work_item_id),
                ));
            }
        }
        Ok(())
    }
}

/// One Agent of the Group as `GET /v1/groups/{g}/presence` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PresenceView {
    pub agent_id: String,
    pub free_slots: u32,
    pub capacity_state: CapacityState,
    pub reported_at: String,
    /// From the Agent's card, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card: Option<CardSummary>,
    /// DIS-1: its WorkItems' schedules in this Group, as last reported.
    #[serde(default)]
    pub schedules: Vec<Schedule>,
}

/// What a Coordinator needs of a card to choose candidates.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CardSummary {
    pub version: String,
    pub capabilities: Vec<Capability>,
    pub max_concurrency: u32,
}

/// `GET /v1/groups/{g}/presence`: the members that reported, by Agent id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Presence {
    pub agents: Vec<PresenceView>,
}

/// `PUT /v1/agents/{agentId}/card` and `GET` of it: the envelope as registered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CardView {
    pub agent_id: String,
    pub version: String,
    pub registered_at: String,
    pub envelope: crate::dsse::Envelope,
}
