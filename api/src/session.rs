//! The session request payload (DESIGN §8.1): an Agent proves possession of its key to open a
//! session in one Group.

use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};

use crate::dsse::SESSION_TYPE;
use crate::error::{ErrorCode, Rejection};
use crate::id::Id;
use crate::signed::SignedPayload;

/// How far `issuedAt` may be from the server clock, either way.
pub const MAX_CLOCK_SKEW_SECONDS: i64 = 300;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SessionRequest {
    pub agent_id: Id,
    pub group_id: Id,
    pub issued_at: DateTime<FixedOffset>,
    pub nonce: String,
}

/// Largest session request payload.
pub const MAX_SESSION_REQUEST_BYTES: usize = 4 * 1024;

impl SessionRequest {
    /// Parses and validates a session request (see [`SignedPayload::parse_payload`]).
    pub fn parse(payload: &[u8]) -> Result<Self, Rejection> {
        Self::parse_payload(payload)
    }
}

impl SignedPayload for SessionRequest {
    const PAYLOAD_TYPE: &'static str = SESSION_TYPE;
    const NAME: &'static str = "session request";
    const MAX_BYTES: usize = MAX_SESSION_REQUEST_BYTES;
    const INVALID: ErrorCode = ErrorCode::BadRequest;

    fn signer_claim(&self) -> (&Id, Option<&str>) {
        (&self.agent_id, None)
    }

    fn validate(&self) -> Result<(), Rejection> {
        let nonce_ok = (16..=128).contains(&self.nonce.len())
            && self
                .nonce
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_=+/".contains(&b));
        if !nonce_ok {
            return Err(Rejection::new(
                ErrorCode::BadRequest,
                "nonce must be 16..=128 characters of base64 or hex",
            ));
        }
        Ok(())
    }
}

/// The answer to `POST /v1/sessions`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionGrant {
    pub token: String,
    pub session_epoch: u64,
    pub membership_epoch: u64,
    pub expires_at: DateTime<chrono::Utc>,
}

/// The answer to `GET /v1/session`: the caller's own session, as the server resolved its
/// token (what `weft whoami` prints).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    pub agent_id: String,
    pub group_id: String,
    pub roles: Vec<Role>,
    /// The Missions a scoped Membership covers; absent for the whole Group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missions: Option<Vec<String>>,
    pub session_epoch: u64,
    pub membership_epoch: u64,
    /// RFC 3339.
    pub expires_at: String,
}

/// What a Member may do in a Group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Worker,
    Coordinator,
    Reviewer,
    Auditor,
    /// Grants execution approvals (T6) and approves reusable knowledge (CTX-6).
    Approver,
}

/// `POST /v1/admin/agents`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentRegistration {
    pub agent_id: Id,
    pub public_key: String,
    pub agent_card_version: String,
}

/// `PUT /v1/admin/groups/{groupId}/members/{agentId}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MembershipRequest {
    pub roles: Vec<Role>,
    /// The Missions the Membership covers (CTX-5); absent: the whole Group.
    #[serde(default)]
    pub missions: Option<Vec<Id>>,
}

/// The answer to a membership change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Membership {
    pub group_id: Id,
    pub agent_id: Id,
    pub roles: Vec<Role>,
    pub epoch: u64,
    /// The Missions it covers (CTX-5); absent: the whole Group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missions: Option<Vec<Id>>,
}

impl Role {
    /// Whether a Membership with this role sees the whole Group whatever its scope: a
    /// coordinator and an auditor do (CTX-5, DESIGN §11), so a Mission scope for them is refused.
    pub fn sees_whole_group(self) -> bool {
        matches!(self, Role::Coordinator | Role::Auditor)
    }
}

/// Answer to `GET /v1/admin/groups/{groupId}/members` (operator only): every Membership of
/// the Group, by Agent id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberList {
    pub group_id: Id,
    pub members: Vec<Membership>,
}

/// One key an Agent has had, newest first in [`AgentRecord::keys`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentKey {
    pub keyid: crate::KeyId,
    /// Base64 of the 32-byte Ed25519 public key.
    pub public_key: String,
    pub added_at: String,
    /// When a rotation retired it; absent: the Agent's current key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_at: Option<String>,
}

/// Answer to `GET /v1/admin/agents/{agentId}` (operator only): the Agent, its keys (the
/// current one first) and the Groups it is a member of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentRecord {
    pub agent_id: Id,
    pub agent_card_version: String,
    pub registered_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deactivated_at: Option<String>,
    pub keys: Vec<AgentKey>,
    pub memberships: Vec<Membership>,
}
