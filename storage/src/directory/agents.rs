//! Groups, Agents and Memberships: the rows that say who exists and where, and the operations
//! that change them, each with its Event: registration, Membership set and removed, Agent
//! deactivated, key rotated. Every operation that can end a session signals open streams
//! after its commit (`sessions.rs`).

use crate::sql::Connection;
use ed25519_dalek::VerifyingKey;
use weft_api::kinds;
use weft_api::session::{Membership, Role};
use weft_api::{ErrorCode, EventPayload, Id, KeyId};

use crate::access::{group_exists, membership};
use crate::clock::format_instant;
use crate::directory::handle::Directory;
use crate::error::{Error, reject};
use crate::events::{self};
use crate::rows;

impl Directory<'_> {
    pub async fn create_group(&self, group_id: Id) -> Result<bool, Error> {
        let now = self.0.clock.now();
        self.0
            .db
            .write(move |txn| {
                // Created once, whichever server asks first (another's concurrent insert
                // makes this one find it).
                if !crate::rows::groups::insert(txn, group_id.as_str(), now)? {
                    return Ok(false);
                }
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

    /// Registers an Agent's key. `Ok((keyid, true))` if new, `(keyid, false)` if it was already
    /// registered with this key; another key for the same Agent is a conflict.
    pub async fn register_agent(
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
        if key == self.0.authority.verifying_key() {
            return Err(reject(ErrorCode::Conflict, "this key is the server's own"));
        }
        let keyid = KeyId::of(&key);
        let now = self.0.clock.now();
        let registered = self
            .0
            .db
            .write(move |txn| {
                // An existing Agent's key and card are read under its row's lock: a card or a
                // rotation committed through another server meanwhile has finished first (and
                // is read here) or waits for this. (Two registrations of one new id through
                // two servers: one inserts, the other's insert fails and answers 503; its
                // retry reads the first.)
                rows::agents::lock(txn, agent_id.as_str())?;
                let existing = rows::agents::public_key(txn, agent_id.as_str())?;
                match existing {
                    Some(stored) if stored == key.as_bytes() => {
                        // An Agent with a signed card sets its version itself: the operator's
                        // word may not contradict the card it serves.
                        let carded = rows::agents::card(txn, agent_id.as_str())?.is_some();
                        let current = rows::agents::record(txn, agent_id.as_str())?.map(|r| r.0);
                        if carded && current.as_deref() != Some(card_version.as_str()) {
                            return Err(reject(
                                ErrorCode::Conflict,
                                format!(
                                    "{agent_id}'s signed Agent Card sets its version; the Agent sends a new card instead"
                                ),
                            ));
                        }
                        rows::agents::set_card_version(txn, agent_id.as_str(), &card_version)?;
                        Ok((keyid, false))
                    }
                    Some(_) => Err(reject(
                        ErrorCode::Conflict,
                        format!("agent {agent_id} is registered with another key"),
                    )),
                    None => {
                        let taken = rows::agent_keys::agent_of(txn, keyid.as_str())?.is_some();
                        if taken {
                            return Err(reject(
                                ErrorCode::Conflict,
                                "this key is registered to another agent",
                            ));
                        }
                        rows::agents::insert(
                            txn,
                            agent_id.as_str(),
                            &key.as_bytes()[..],
                            keyid.as_str(),
                            &card_version,
                            &format_instant(now),
                        )?;
                        rows::agent_keys::insert(
                            txn,
                            keyid.as_str(),
                            agent_id.as_str(),
                            &key.as_bytes()[..],
                            &format_instant(now),
                        )?;
                        Ok((keyid, true))
                    }
                }
            })
            .await?;
        // A new Agent, or a new card version: signed payloads check it from now on (`keys.rs`).
        self.0.auth_changed();
        Ok(registered)
    }

    /// Sets a Membership of the whole Group (`membership.set`).
    pub async fn set_membership(
        &self,
        group_id: Id,
        agent_id: Id,
        roles: Vec<Role>,
    ) -> Result<Membership, Error> {
        self.set_scoped_membership(group_id, agent_id, roles, None)
            .await
    }

    /// Sets a Membership that covers only `missions` of its Group (CTX-5; `None`: the whole
    /// Group). A scope for a coordinator or auditor, or an empty one, is refused `bad_request`.
    pub async fn set_scoped_membership(
        &self,
        group_id: Id,
        agent_id: Id,
        roles: Vec<Role>,
        missions: Option<Vec<Id>>,
    ) -> Result<Membership, Error> {
        let membership = self
            .write_membership(group_id, agent_id, roles, missions)
            .await?;
        // Its Agent's sessions in that Group are stale now; their streams end at once.
        self.0.auth_changed();
        Ok(membership)
    }

    async fn write_membership(
        &self,
        group_id: Id,
        agent_id: Id,
        mut roles: Vec<Role>,
        missions: Option<Vec<Id>>,
    ) -> Result<Membership, Error> {
        roles.sort();
        roles.dedup();
        if roles.is_empty() {
            return Err(reject(
                ErrorCode::BadRequest,
                "roles must name at least one role",
            ));
        }
        let missions = checked_scope(&roles, missions)?;
        let now = self.0.clock.now();
        self.0
            .db
            .write(move |txn| {
                if !group_exists(txn, group_id.as_str())? {
                    return Err(reject(
                        ErrorCode::UnknownGroup,
                        format!("group {group_id} does not exist"),
                    ));
                }
                // The epoch below is read under the Group's lock (several servers).
                crate::rows::groups::lock(txn, group_id.as_str())?;
                // The Agent's state under its row's share: a deactivation or rotation through
                // another server has committed, or waits for this Membership and adds it.
                rows::agents::share(txn, agent_id.as_str())?;
                require_active(txn, &agent_id)?;
                // A removed Membership's epoch keeps counting, so no session of it ever
                // matches again.
                let epoch = any_membership_epoch(txn, group_id.as_str(), agent_id.as_str())?
                    .unwrap_or(0)
                    + 1;
                let roles_json = serde_json::to_string(&roles).map_err(Error::backend)?;
                let missions_json = missions
                    .as_ref()
                    .map(|missions| serde_json::to_string(missions).map_err(Error::backend))
                    .transpose()?;
                rows::memberships::upsert(
                    txn,
                    group_id.as_str(),
                    agent_id.as_str(),
                    &roles_json,
                    epoch,
                    missions_json.as_deref(),
                )?;
                events::append(
                    txn,
                    &group_id,
                    &EventPayload::MembershipSet(kinds::MembershipSet {
                        agent_id: agent_id.clone(),
                        membership_epoch: epoch,
                        missions: missions.clone(),
                        roles: roles.clone(),
                    }),
                    now,
                )?;
                Ok(Membership {
                    group_id,
                    agent_id,
                    roles,
                    epoch,
                    missions,
                })
            })
            .await
    }

    /// `DELETE /v1/admin/groups/{g}/members/{a}`: the Membership ends (`membership.removed`);
    /// its sessions answer `stale_membership` from now on and their streams close.
    pub async fn remove_membership(&self, group_id: Id, agent_id: Id) -> Result<u64, Error> {
        let now = self.0.clock.now();
        let epoch = self
            .0
            .db
            .write(move |txn| {
                if !group_exists(txn, group_id.as_str())? {
                    return Err(reject(
                        ErrorCode::UnknownGroup,
                        format!("group {group_id} does not exist"),
                    ));
                }
                // The Group's lock first, as a Membership set takes it (several servers): the
                // Membership's row before it, a removal and a set deadlocked, and the epoch
                // read before it could be the one a set was giving.
                crate::rows::groups::lock(txn, group_id.as_str())?;
                let Some((_, epoch)) = membership(txn, group_id.as_str(), agent_id.as_str())?
                else {
                    return Err(reject(
                        ErrorCode::NotAMember,
                        format!("{agent_id} is not a member of {group_id}"),
                    ));
                };
                let epoch = epoch + 1;
                rows::memberships::remove(
                    txn,
                    group_id.as_str(),
                    agent_id.as_str(),
                    epoch,
                    &format_instant(now),
                )?;
                rows::presence::forget(txn, group_id.as_str(), agent_id.as_str())?;
                events::append(
                    txn,
                    &group_id,
                    &EventPayload::MembershipRemoved(kinds::MembershipRemoved {
                        agent_id: agent_id.clone(),
                        membership_epoch: epoch,
                    }),
                    now,
                )?;
                Ok(epoch)
            })
            .await?;
        self.0.auth_changed();
        Ok(epoch)
    }

    /// `POST /v1/admin/agents/{a}/deactivate`: the Agent opens no session and signs nothing
    /// new anywhere; its sessions end (`agent.deactivated` in each of its Groups). What it
    /// signed before stays verifiable. Deactivating twice answers the same and appends nothing.
    pub async fn deactivate_agent(&self, agent_id: Id) -> Result<Vec<Id>, Error> {
        let now = self.0.clock.now();
        let groups = self
            .0
            .db
            .write(move |txn| {
                // Its Groups' locks, then its row, then its state (read under both: a rotation
                // through another server has finished or waits).
                let groups = current_groups(txn, &agent_id)?;
                lock_in_order(txn, &groups)?;
                rows::agents::lock(txn, agent_id.as_str())?;
                let groups = joined_meanwhile(txn, &agent_id, groups)?;
                let state = rows::agents::deactivated_at(txn, agent_id.as_str())?;
                match state {
                    None => {
                        return Err(reject(
                            ErrorCode::UnknownAgent,
                            format!("agent {agent_id} is not registered"),
                        ));
                    }
                    Some(Some(_)) => return Ok(Vec::new()),
                    Some(None) => {}
                }
                rows::agents::deactivate(txn, agent_id.as_str(), &format_instant(now))?;
                rows::sessions::delete_of_agent(txn, agent_id.as_str())?;
                rows::presence::forget_agent(txn, agent_id.as_str())?;
                rows::agents::forget_card(txn, agent_id.as_str())?;
                for group in &groups {
                    events::append(
                        txn,
                        group,
                        &EventPayload::AgentDeactivated(kinds::AgentDeactivated {
                            agent_id: agent_id.clone(),
                        }),
                        now,
                    )?;
                }
                Ok(groups)
            })
            .await?;
        self.0.auth_changed();
        Ok(groups)
    }

    /// `POST /v1/admin/agents/{a}/keys`: `key` becomes the Agent's only current key; the
    /// old one stays on record (with the instant it was retired) so what it signed before
    /// still verifies, and anything it signs from now on is refused `key_retired`. The
    /// Agent's sessions end (they were opened with the old key).
    pub async fn rotate_key(&self, agent_id: Id, key: VerifyingKey) -> Result<KeyId, Error> {
        if key == self.0.authority.verifying_key() {
            return Err(reject(ErrorCode::Conflict, "this key is the server's own"));
        }
        let keyid = KeyId::of(&key);
        let now = self.0.clock.now();
        let new_keyid = keyid.clone();
        self.0
            .db
            .write(move |txn| {
                // Its Groups' locks, then its row, then its state and current key: a second
                // rotation through another server reads the key the first one set, and
                // retires it (read before the row's lock, the first one's key stayed current
                // in `agent_keys` beside the second's).
                let groups = current_groups(txn, &agent_id)?;
                lock_in_order(txn, &groups)?;
                rows::agents::lock(txn, agent_id.as_str())?;
                let groups = joined_meanwhile(txn, &agent_id, groups)?;
                require_active(txn, &agent_id)?;
                let used_by = rows::agent_keys::agent_of(txn, keyid.as_str())?;
                if used_by.is_some() {
                    // A key is never reused, not even by its own Agent: a retired key must
                    // stay retired.
                    return Err(reject(
                        ErrorCode::Conflict,
                        "this key is or was registered already",
                    ));
                }
                let retired = rows::agents::keyid(txn, agent_id.as_str())?;
                let instant = format_instant(now);
                rows::agent_keys::retire_current(txn, agent_id.as_str(), &instant)?;
                rows::agent_keys::insert(
                    txn,
                    keyid.as_str(),
                    agent_id.as_str(),
                    &key.as_bytes()[..],
                    &instant,
                )?;
                rows::agents::set_key(txn, agent_id.as_str(), &key.as_bytes()[..], keyid.as_str())?;
                rows::sessions::delete_of_agent(txn, agent_id.as_str())?;
                rows::agents::forget_card(txn, agent_id.as_str())?;
                let retired_keyid: KeyId = retired.parse()?;
                for group in groups {
                    events::append(
                        txn,
                        &group,
                        &EventPayload::AgentKeyRotated(kinds::AgentKeyRotated {
                            agent_id: agent_id.clone(),
                            keyid: keyid.clone(),
                            retired_keyid: retired_keyid.clone(),
                        }),
                        now,
                    )?;
                }
                Ok(())
            })
            .await?;
        self.0.auth_changed();
        Ok(new_keyid)
    }

    /// The Agent and public key behind `keyid`, current or retired (to check a recorded
    /// signature).
    pub async fn recorded_key(
        &self,
        keyid: KeyId,
    ) -> Result<Option<(Id, ed25519_dalek::VerifyingKey)>, Error> {
        self.0
            .db
            .read(move |conn| crate::access::recorded_key(conn, &keyid))
            .await
    }
}

/// A Membership's Mission scope, sorted and deduplicated (CTX-5). A coordinator or an auditor
/// sees the whole Group (DESIGN §11), so a scope for either is refused rather than ignored: the
/// operator would otherwise believe a restriction that does not hold. An empty list is refused
/// too (a Membership that covers nothing is a removal; use DELETE).
fn checked_scope(roles: &[Role], missions: Option<Vec<Id>>) -> Result<Option<Vec<Id>>, Error> {
    let Some(mut missions) = missions else {
        return Ok(None);
    };
    if let Some(role) = roles.iter().find(|role| role.sees_whole_group()) {
        return Err(reject(
            ErrorCode::BadRequest,
            format!("a {role:?} Membership covers the whole Group; it takes no missions (CTX-5)"),
        ));
    }
    missions.sort();
    missions.dedup();
    if missions.is_empty() {
        return Err(reject(
            ErrorCode::BadRequest,
            "missions must name at least one Mission (or be absent for the whole Group)",
        ));
    }
    Ok(Some(missions))
}

/// The Agent exists and is not deactivated.
fn require_active(conn: &Connection, agent_id: &Id) -> Result<(), Error> {
    let state = rows::agents::deactivated_at(conn, agent_id.as_str())?;
    match state {
        None => Err(reject(
            ErrorCode::UnknownAgent,
            format!("agent {agent_id} is not registered"),
        )),
        Some(Some(_)) => Err(reject(
            ErrorCode::AgentDeactivated,
            format!("agent {agent_id} was deactivated"),
        )),
        Some(None) => Ok(()),
    }
}

/// The epoch of a Membership, removed or not.
fn any_membership_epoch(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
) -> Result<Option<u64>, Error> {
    rows::memberships::any_epoch(conn, group_id, agent_id)
}

/// The Groups the Agent is a current member of, in id order.
/// Takes the locks of `groups` (in Group order, as `current_groups` answers them) before a
/// job writes any row of the Agent's: a job that locks a Group first and then writes or
/// references those rows (a Membership set or removed, a publication naming its producer)
/// would otherwise wait for this one while this one waits for its Group (PostgreSQL, several
/// servers or lanes).
fn lock_in_order(tx: &crate::unit::Tx<'_>, groups: &[Id]) -> Result<(), Error> {
    for group in groups {
        crate::rows::groups::lock(tx, group.as_str())?;
    }
    Ok(())
}

/// The Agent's Groups again, now that its row is held: a Membership set through another
/// server that held the Agent's row's share (`rows::agents::share`) committed before the
/// row was ours, and its Group, read as none of `groups` before, is locked now. Out of the
/// Groups' order, but only then: a set of that Group waiting on the Agent's row meanwhile
/// deadlocks with this job, and PostgreSQL refuses one of the two (503, retry later) rather
/// than leave a Membership the deactivation or rotation never saw.
fn joined_meanwhile(
    tx: &crate::unit::Tx<'_>,
    agent_id: &Id,
    mut groups: Vec<Id>,
) -> Result<Vec<Id>, Error> {
    if crate::unit::Conn::conn(tx).engine() != crate::sql::Engine::Postgres {
        return Ok(groups);
    }
    let now = current_groups(tx, agent_id)?;
    let joined: Vec<Id> = now.into_iter().filter(|g| !groups.contains(g)).collect();
    lock_in_order(tx, &joined)?;
    groups.extend(joined);
    groups.sort();
    Ok(groups)
}

fn current_groups(conn: &Connection, agent_id: &Id) -> Result<Vec<Id>, Error> {
    let groups = rows::memberships::current_groups(conn, agent_id.as_str())?;
    groups
        .iter()
        .map(|group| Ok(Id::parse("groupId", group)?))
        .collect()
}
