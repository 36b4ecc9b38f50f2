//! The session request payload (DESIGN §8.1): an Agent proves possession of its key to open a
//! session in one Group.

use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};

use crate::error::{ErrorCode, Rejection};
use crate::id::Id;
use crate::json::parse_strict;

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

impl SessionRequest {
    pub fn parse(payload: &[u8]) -> Result<Self, Rejection> {
        let request: Self = parse_strict(payload, ErrorCode::BadRequest)?;
        let nonce_ok = (16..=128).contains(&request.nonce.len())
            && request
                .nonce
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_=+/".contains(&b));
        if !nonce_ok {
            return Err(Rejection::new(
                ErrorCode::BadRequest,
                "nonce must be 16..=128 characters of base64 or hex",
            ));
        }
        Ok(request)
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

/// What a Member may do in a Group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Worker,
    Coordinator,
    Reviewer,
    Auditor,
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
}

/// The answer to a membership change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Membership {
    pub group_id: Id,
    pub agent_id: Id,
    pub roles: Vec<Role>,
    pub epoch: u64,
}
