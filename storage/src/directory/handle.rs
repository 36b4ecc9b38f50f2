//! [`Directory`], the handle to who exists and where: Groups, Agents and their keys,
//! Memberships and the Group policy, as the operator administers them (`store.directory()`).
//! Each method hands over to the engine; the writes are in `agents.rs`, the reads in
//! `directory.rs`, the key lookup in `artifacts/verification.rs`.

use std::sync::Arc;

use weft_api::session::{AgentRecord, MemberList, Membership, Role};
use weft_api::{Id, KeyId};

use crate::engine::Engine;
use crate::error::Error;

/// Groups, Agents and Memberships; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Directory<'s>(pub(crate) &'s Arc<Engine>);

impl Directory<'_> {
    pub async fn create_group(&self, group_id: Id) -> Result<bool, Error> {
        self.0.create_group(group_id).await
    }

    /// Registers an Agent's key. `Ok((keyid, true))` if new, `(keyid, false)` if it was already
    /// registered with this key; another key for the same Agent is a conflict.
    pub async fn register_agent(
        &self,
        agent_id: Id,
        public_key: ed25519_dalek::VerifyingKey,
        agent_card_version: String,
    ) -> Result<(KeyId, bool), Error> {
        self.0
            .register_agent(agent_id, public_key, agent_card_version)
            .await
    }

    pub async fn set_membership(
        &self,
        group_id: Id,
        agent_id: Id,
        roles: Vec<Role>,
    ) -> Result<Membership, Error> {
        self.0.set_membership(group_id, agent_id, roles, None).await
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
        self.0
            .set_membership(group_id, agent_id, roles, missions)
            .await
    }

    /// Sets the Group's policy (SCH-6, SCH-7): the highest `priorityClass` a `mission.create`
    /// may ask for (`group.policy_set`); `unknown_group` for a Group that does not exist.
    pub async fn set_group_policy(
        &self,
        group_id: Id,
        mission_priority_ceiling: weft_api::work::contract::Level,
    ) -> Result<weft_api::kinds::GroupPolicySet, Error> {
        self.0
            .set_group_policy(group_id, mission_priority_ceiling)
            .await
    }

    /// Ends a Membership (`membership.removed`); answers its new epoch.
    pub async fn remove_membership(&self, group_id: Id, agent_id: Id) -> Result<u64, Error> {
        self.0.remove_membership(group_id, agent_id).await
    }

    /// Deactivates an Agent everywhere; answers the Groups that were told
    /// (`agent.deactivated`), none if it was deactivated already.
    pub async fn deactivate_agent(&self, agent_id: Id) -> Result<Vec<Id>, Error> {
        self.0.deactivate_agent(agent_id).await
    }

    /// Replaces an Agent's key (`agent.key_rotated`); answers the new keyid.
    pub async fn rotate_key(
        &self,
        agent_id: Id,
        public_key: ed25519_dalek::VerifyingKey,
    ) -> Result<KeyId, Error> {
        self.0.rotate_key(agent_id, public_key).await
    }

    /// Every live Membership of a Group (operator reads; `not_found` for no such Group).
    pub async fn list_members(&self, group_id: Id) -> Result<MemberList, Error> {
        self.0.list_members(group_id).await
    }

    /// An Agent with its key history and Memberships (operator reads; `not_found` if none).
    pub async fn agent_record(&self, agent_id: Id) -> Result<AgentRecord, Error> {
        self.0.agent_record(agent_id).await
    }

    /// The Agent and public key behind `keyid`, current or retired (to check a recorded
    /// signature).
    pub async fn recorded_key(
        &self,
        keyid: KeyId,
    ) -> Result<Option<(Id, ed25519_dalek::VerifyingKey)>, Error> {
        self.0.recorded_key(keyid).await
    }
}
