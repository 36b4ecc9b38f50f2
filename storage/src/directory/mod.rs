//! Who exists and where: Groups, Agents and their keys, Memberships (`agents.rs`), the
//! Group's policy (`policy.rs`), and here the operator's reads: a Group's Memberships and an
//! Agent's record with its key history. Admin only (the HTTP layer checks the admin token).

mod agents;
mod cards;
pub(crate) mod handle;
mod policy;

use crate::sql::Connection;
use base64::Engine as _;
use weft_api::session::{AgentKey, AgentRecord, MemberList, Membership, Role};
use weft_api::{ErrorCode, Id, KeyId};

use crate::access::group_exists;
use crate::directory::handle::Directory;
use crate::error::{Error, reject};

impl Directory<'_> {
    /// Every Group's id, in order (operator work over all Groups: the witness pusher).
    pub async fn group_ids(&self) -> Result<Vec<String>, Error> {
        self.0.db.read(crate::rows::groups::ids).await
    }

    /// Every live Membership of `group_id`, by Agent id; `not_found` for an unknown Group.
    pub async fn list_members(&self, group_id: Id) -> Result<MemberList, Error> {
        self.0
            .db
            .read(move |conn| {
                if !group_exists(conn, group_id.as_str())? {
                    return Err(reject(ErrorCode::NotFound, format!("no Group {group_id}")));
                }
                let members = memberships(conn, "group_id", group_id.as_str())?;
                Ok(MemberList { group_id, members })
            })
            .await
    }

    /// An Agent, its keys (current first, then by retirement, newest first) and its live
    /// Memberships; `not_found` for an unknown Agent.
    pub async fn agent_record(&self, agent_id: Id) -> Result<AgentRecord, Error> {
        self.0
            .db
            .read(move |conn| {
                let row = crate::rows::agents::record(conn, agent_id.as_str())?;
                let Some((agent_card_version, registered_at, deactivated_at)) = row else {
                    return Err(reject(ErrorCode::NotFound, format!("no Agent {agent_id}")));
                };
                let keys = crate::rows::agent_keys::of_agent(conn, agent_id.as_str())?
                    .into_iter()
                    .map(|(keyid, public_key, added_at, retired_at)| {
                        let key = <[u8; 32]>::try_from(public_key.as_slice())
                            .ok()
                            .and_then(|bytes| ed25519_dalek::VerifyingKey::from_bytes(&bytes).ok())
                            .ok_or_else(|| {
                                Error::backend(std::io::Error::other(format!(
                                    "stored key {keyid} is not an Ed25519 key"
                                )))
                            })?;
                        Ok(AgentKey {
                            keyid: KeyId::of(&key),
                            public_key: weft_api::dsse::BASE64.encode(public_key),
                            added_at,
                            retired_at,
                        })
                    })
                    .collect::<Result<Vec<_>, Error>>()?;
                let memberships = memberships(conn, "agent_id", agent_id.as_str())?;
                Ok(AgentRecord {
                    agent_id,
                    agent_card_version,
                    registered_at,
                    deactivated_at,
                    keys,
                    memberships,
                })
            })
            .await
    }
}

/// Live Memberships where `column` (`group_id` or `agent_id`) is `value`, ordered by Group
/// then Agent.
fn memberships(conn: &Connection, column: &str, value: &str) -> Result<Vec<Membership>, Error> {
    let rows = if column == "group_id" {
        crate::rows::memberships::live_of_group(conn, value)?
    } else {
        crate::rows::memberships::live_of_agent(conn, value)?
    };
    rows.into_iter()
        .map(|row| {
            let (group_id, agent_id, roles, epoch, missions) = row;
            let roles: Vec<Role> = serde_json::from_str(&roles).map_err(Error::backend)?;
            let missions: Option<Vec<Id>> = missions
                .map(|text| serde_json::from_str(&text))
                .transpose()
                .map_err(Error::backend)?;
            Ok(Membership {
                group_id: Id::parse("groupId", &group_id)?,
                agent_id: Id::parse("agentId", &agent_id)?,
                roles,
                epoch,
                missions,
            })
        })
        .collect()
}
