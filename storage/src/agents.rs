//! Groups, Agents, Memberships and sessions: the rows that say who exists and where, and
//! the operations that change them (each with its Event).

use base64::Engine as _;
use ed25519_dalek::VerifyingKey;
use rusqlite::{OptionalExtension as _, params};
use weft_api::kinds;
use weft_api::session::{Membership, Role, SessionGrant};
use weft_api::{Envelope, ErrorCode, EventPayload, Id, KeyId, SessionRequest};

use crate::access::{AuthorityMay, Signed, group_exists, membership};
use crate::clock::format_instant;
use crate::engine::Engine;
use crate::error::{Error, reject};
use crate::events::{self};

/// A live session, resolved from its bearer token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    pub agent_id: Id,
    pub group_id: Id,
    pub session_epoch: u64,
    pub membership_epoch: u64,
}

impl Engine {
    pub(crate) async fn create_group(&self, group_id: Id) -> Result<bool, Error> {
        let now = self.clock.now();
        self.db
            .write(move |txn| {
                if group_exists(txn, group_id.as_str())? {
                    return Ok(false);
                }
                txn.execute(
                    "INSERT INTO groups (group_id, created_at) VALUES (?1, ?2)",
                    params![group_id.as_str(), format_instant(now)],
                )?;
                events::append(
                    txn,
                    &group_id,
                    &EventPayload::GroupCreated(kinds::GroupCreated {
                        group_id: group_id.clone(),
                    }),
                    now,
                )?;
                Ok(true)
            })
            .await
    }

    pub(crate) async fn register_agent(
        &self,
        agent_id: Id,
        key: VerifyingKey,
        card_version: String,
    ) -> Result<(KeyId, bool), Error> {
        if card_version.is_empty()
            || card_version.len() > 256
            || card_version.chars().any(char::is_control)
        {
            return Err(reject(
                ErrorCode::BadRequest,
                "agentCardVersion must be 1..=256 printable bytes",
            ));
        }
        if agent_id.as_str() == weft_api::evidence::AUTHORITY_AGENT {
            return Err(reject(
                ErrorCode::Conflict,
                "this agent id is reserved for the server",
            ));
        }
        if key == self.authority.verifying_key() {
            return Err(reject(ErrorCode::Conflict, "this key is the server's own"));
        }
        let keyid = KeyId::of(&key);
        let now = self.clock.now();
        self.db
            .write(move |txn| {
                let existing: Option<Vec<u8>> = txn
                    .query_row("SELECT public_key FROM agents WHERE agent_id = ?1", [agent_id.as_str()], |row| row.get(0))
                    .optional()?;
                match existing {
                    Some(stored) if stored == key.as_bytes() => {
                        txn.execute(
                            "UPDATE agents SET agent_card_version = ?2 WHERE agent_id = ?1",
                            params![agent_id.as_str(), card_version],
                        )?;
                        Ok((keyid, false))
                    }
                    Some(_) => Err(reject(ErrorCode::Conflict, format!("agent {agent_id} is registered with another key"))),
                    None => {
                        let taken = txn
                            .query_row("SELECT 1 FROM agents WHERE keyid = ?1", [keyid.as_str()], |_| Ok(()))
                            .optional()?
                            .is_some();
                        if taken {
                            return Err(reject(ErrorCode::Conflict, "this key is registered to another agent"));
                        }
                        txn.execute(
                            "INSERT INTO agents (agent_id, public_key, keyid, agent_card_version, registered_at)
                             VALUES (?1, ?2, ?3, ?4, ?5)",
                            params![agent_id.as_str(), &key.as_bytes()[..], keyid.as_str(), card_version, format_instant(now)],
                        )?;
                        Ok((keyid, true))
                    }
                }
            })
            .await
    }

    pub(crate) async fn set_membership(
        &self,
        group_id: Id,
        agent_id: Id,
        roles: Vec<Role>,
    ) -> Result<Membership, Error> {
        let membership = self.write_membership(group_id, agent_id, roles).await?;
        // Committed: the in-memory membership projection follows (memberships are only added
        // or changed, never removed).
        self.member_groups
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(membership.agent_id.to_string())
            .or_default()
            .insert(membership.group_id.to_string());
        Ok(membership)
    }

    async fn write_membership(
        &self,
        group_id: Id,
        agent_id: Id,
        mut roles: Vec<Role>,
    ) -> Result<Membership, Error> {
        roles.sort();
        roles.dedup();
        if roles.is_empty() {
            return Err(reject(
                ErrorCode::BadRequest,
                "roles must name at least one role",
            ));
        }
        let now = self.clock.now();
        self.db
            .write(move |txn| {
                if !group_exists(txn, group_id.as_str())? {
                    return Err(reject(ErrorCode::UnknownGroup, format!("group {group_id} does not exist")));
                }
                let agent_known = txn
                    .query_row("SELECT 1 FROM agents WHERE agent_id = ?1", [agent_id.as_str()], |_| Ok(()))
                    .optional()?
                    .is_some();
                if !agent_known {
                    return Err(reject(ErrorCode::UnknownAgent, format!("agent {agent_id} is not registered")));
                }
                let epoch = membership(txn, group_id.as_str(), agent_id.as_str())?.map_or(0, |(_, epoch)| epoch) + 1;
                let roles_json = serde_json::to_string(&roles).map_err(Error::backend)?;
                txn.execute(
                    "INSERT INTO memberships (group_id, agent_id, roles, epoch) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (group_id, agent_id) DO UPDATE SET roles = excluded.roles, epoch = excluded.epoch",
                    params![group_id.as_str(), agent_id.as_str(), roles_json, epoch],
                )?;
                events::append(
                    txn,
                    &group_id,
                    &EventPayload::MembershipSet(kinds::MembershipSet {
                        agent_id: agent_id.clone(),
                        membership_epoch: epoch,
                        roles: roles.clone(),
                    }),
                    now,
                )?;
                Ok(Membership { group_id, agent_id, roles, epoch })
            })
            .await
    }

    pub(crate) async fn open_session(&self, envelope: Envelope) -> Result<SessionGrant, Error> {
        let Signed {
            signer: agent_id,
            value,
            ..
        } = self
            .verify_signed::<SessionRequest>(&envelope, AuthorityMay::NotSign)
            .await?;
        let request = value.into_inner();
        let now = self.clock.now();
        // Rate-limited per Agent only now that its signature checked out (limits.rs).
        self.limits.admit_login(agent_id.as_str(), now)?;
        let skew = (now - request.issued_at.to_utc()).num_seconds().abs();
        if skew > weft_api::session::MAX_CLOCK_SKEW_SECONDS {
            return Err(reject(
                ErrorCode::ClockSkew,
                "issuedAt is more than 5 minutes from the server clock",
            ));
        }
        let token_bytes: [u8; 32] = rand::random();
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token_bytes);
        let token_hash = *blake3::hash(token.as_bytes()).as_bytes();
        let expires_at = now + self.session_ttl;
        self.db
            .write(move |txn| {
                if !group_exists(txn, request.group_id.as_str())? {
                    return Err(reject(ErrorCode::UnknownGroup, format!("group {} does not exist", request.group_id)));
                }
                let Some((_, membership_epoch)) = membership(txn, request.group_id.as_str(), agent_id.as_str())? else {
                    return Err(reject(ErrorCode::NotAMember, format!("{agent_id} is not a member of {}", request.group_id)));
                };
                let fresh = txn.execute(
                    "INSERT OR IGNORE INTO session_nonces (agent_id, nonce, seen_at) VALUES (?1, ?2, ?3)",
                    params![agent_id.as_str(), request.nonce, format_instant(now)],
                )?;
                if fresh == 0 {
                    return Err(reject(ErrorCode::NonceReused, "this session request was already used"));
                }
                let session_epoch: u64 = txn
                    .query_row(
                        "INSERT INTO session_epochs (agent_id, group_id, epoch) VALUES (?1, ?2, 1)
                         ON CONFLICT (agent_id, group_id) DO UPDATE SET epoch = epoch + 1
                         RETURNING epoch",
                        params![agent_id.as_str(), request.group_id.as_str()],
                        |row| row.get(0),
                    )?;
                txn.execute(
                    "INSERT INTO sessions (token_hash, agent_id, group_id, session_epoch, membership_epoch, expires_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![&token_hash[..], agent_id.as_str(), request.group_id.as_str(), session_epoch, membership_epoch, format_instant(expires_at)],
                )?;
                events::append(
                    txn,
                    &request.group_id,
                    &EventPayload::SessionOpened(kinds::SessionOpened {
                        agent_id: agent_id.clone(),
                        membership_epoch,
                        session_epoch,
                    }),
                    now,
                )?;
                Ok(SessionGrant { token, session_epoch, membership_epoch, expires_at })
            })
            .await
    }

    pub(crate) async fn authenticate(&self, token: &str) -> Result<crate::agents::Session, Error> {
        let token_hash = *blake3::hash(token.as_bytes()).as_bytes();
        let now = self.clock.now();
        self.db
            .read(move |conn| {
                let row = conn
                    .query_row(
                        "SELECT agent_id, group_id, session_epoch, membership_epoch, expires_at
                         FROM sessions WHERE token_hash = ?1",
                        [&token_hash[..]],
                        |row| {
                            Ok((
                                row.get::<_, String>(0)?,
                                row.get::<_, String>(1)?,
                                row.get::<_, u64>(2)?,
                                row.get::<_, u64>(3)?,
                                row.get::<_, String>(4)?,
                            ))
                        },
                    )
                    .optional()?;
                let Some((agent_id, group_id, session_epoch, membership_epoch, expires_at)) = row
                else {
                    return Err(reject(ErrorCode::Unauthorized, "unknown or revoked token"));
                };
                if expires_at <= format_instant(now) {
                    return Err(reject(ErrorCode::Unauthorized, "the session has expired"));
                }
                match membership(conn, &group_id, &agent_id)? {
                    Some((_, epoch)) if epoch == membership_epoch => {}
                    _ => {
                        return Err(reject(
                            ErrorCode::StaleSession,
                            "the membership changed since this session was opened",
                        ));
                    }
                }
                let current_epoch: u64 = conn.query_row(
                    "SELECT epoch FROM session_epochs WHERE agent_id = ?1 AND group_id = ?2",
                    params![agent_id, group_id],
                    |row| row.get(0),
                )?;
                if current_epoch != session_epoch {
                    return Err(reject(
                        ErrorCode::StaleSession,
                        "a newer session replaced this one",
                    ));
                }
                Ok(crate::agents::Session {
                    agent_id: Id::parse("agentId", &agent_id)?,
                    group_id: Id::parse("groupId", &group_id)?,
                    session_epoch,
                    membership_epoch,
                })
            })
            .await
    }
}
