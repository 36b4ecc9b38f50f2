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

/// Body of `PUT /v1/groups/{g}/presence`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PresenceReport {
    pub free_slots: u32,
    pub capacity_state: CapacityState,
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
