//! [`Work`], the handle to Missions, WorkItems and their Commands (`store.work()`, DESIGN §10),
//! with the capability tokens of their leases (LSE-6/7). Each method hands over to the engine:
//! Commands in `command.rs`, expiry in `expiry.rs`, views in `listing.rs` and `missions.rs`,
//! tokens in `tokens.rs`.

use std::sync::Arc;

use weft_api::work::views::{
    CommandAccepted, MissionView, SignedCommand, TokenIssued, TokenRequest, WorkGraph, WorkItemView,
};
use weft_api::{Envelope, ErrorCode, Id};

use crate::access::MissionScope;
use crate::access::Reader;
use crate::access::Session;
use crate::engine::Engine;
use crate::error::{Error, reject};

use crate::access::Grant;

/// Missions, WorkItems and Commands; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Work<'s>(pub(crate) &'s Arc<Engine>);

impl Work<'_> {
    /// Commands of one session applied in order in one transaction, each in a savepoint of
    /// its own; stops at the first refusal (its index and error).
    pub async fn execute_commands(
        &self,
        group_id: Id,
        envelopes: Vec<Envelope>,
        session: &Session,
    ) -> Result<(Vec<CommandAccepted>, Option<(usize, Error)>), Error> {
        self.0.execute_commands(group_id, envelopes, session).await
    }

    /// Runs one signed Command in `group_id` for the caller's `session` (DESIGN §10): its
    /// Events and the aggregate's view after it, or a refusal that changed nothing.
    pub async fn execute_command(
        &self,
        group_id: Id,
        envelope: Envelope,
        session: &Session,
    ) -> Result<CommandAccepted, Error> {
        self.0.execute_command(group_id, envelope, session).await
    }

    /// Appends the lease and ownership expiry Events due at `now` (`lease.expired`,
    /// `ownership.expired`) in one writer transaction; answers how many. Finds them in an
    /// in-memory set of deadlines, never by scanning every lease; the server calls it on a
    /// timer, and every Command also expires its own WorkItem first.
    pub async fn expire_due(&self, now: chrono::DateTime<chrono::Utc>) -> Result<usize, Error> {
        self.0.expire_due(now).await
    }

    /// An accepted Command of `group_id` as its Agent signed it (issue #50); with several
    /// Agents' Commands under one id, `agent_id` names the one. The operator and the Group's
    /// Group-wide members may read it; anyone else, and a Command accepted before envelopes
    /// were kept, is answered `not_found`, as an unknown id.
    pub async fn command(
        &self,
        group_id: Id,
        command_id: Id,
        agent_id: Option<Id>,
        reader: &Reader,
    ) -> Result<SignedCommand, Error> {
        let absent = || {
            reject(
                ErrorCode::NotFound,
                format!("no Command {command_id} in {group_id} is visible to you"),
            )
        };
        let may_read = match reader {
            Reader::Admin => true,
            Reader::Agent {
                group_id: own,
                scope,
                ..
            } => *own == group_id && *scope == MissionScope::Group,
        };
        if !may_read {
            return Err(absent());
        }
        let (group, id) = (group_id.to_string(), command_id.to_string());
        let found = self
            .0
            .db
            .read(move |conn| crate::rows::commands::envelopes(conn, &group, &id, 16))
            .await?;
        let mut matching: Vec<(String, Option<String>)> = found
            .into_iter()
            .filter(|(agent, _)| agent_id.as_ref().is_none_or(|wanted| wanted == agent))
            .collect();
        if matching.len() > 1 {
            let agents: Vec<String> = matching.into_iter().map(|(agent, _)| agent).collect();
            return Err(reject(
                ErrorCode::BadRequest,
                format!(
                    "Agents {} each sent a Command {command_id}; name one with agentId",
                    agents.join(", ")
                ),
            ));
        }
        let Some((agent, Some(envelope))) = matching.pop() else {
            return Err(absent());
        };
        Ok(SignedCommand {
            group_id: group_id.to_string(),
            command_id: command_id.to_string(),
            agent_id: agent,
            envelope: serde_json::from_str(&envelope).map_err(Error::backend)?,
        })
    }

    pub async fn work_item(&self, id: Id, reader: &Reader) -> Result<WorkItemView, Error> {
        self.0.work_item(id, reader).await
    }

    pub async fn mission(&self, id: Id, reader: &Reader) -> Result<MissionView, Error> {
        self.0.mission(id, reader).await
    }

    /// The Missions `reader` may see, newest first (at most `limit`).
    pub async fn missions(&self, reader: &Reader, limit: u32) -> Result<Vec<MissionView>, Error> {
        self.0.visible_missions(reader, limit).await
    }

    pub async fn mission_graph(&self, id: Id, reader: &Reader) -> Result<WorkGraph, Error> {
        self.0.mission_graph(id, reader).await
    }

    /// Issues a capability token for lease `lease_id` to its owner `session`, expiring no
    /// later than the lease; `replaces` revokes a previous token of the lease in the same step.
    pub async fn issue_token(
        &self,
        lease_id: Id,
        request: TokenRequest,
        session: &Session,
    ) -> Result<TokenIssued, Error> {
        self.0.issue_token(lease_id, request, session).await
    }

    /// Revokes token `token_id` of lease `lease_id` (its owner `session` only).
    pub async fn revoke_token(
        &self,
        lease_id: Id,
        token_id: Id,
        session: &Session,
    ) -> Result<(), Error> {
        self.0.revoke_token(lease_id, token_id, session).await
    }

    /// Resolves a capability token to what it may do now: its token, lease and lease owner's
    /// session are re-read at each call (`unauthorized` once any of them ended).
    pub async fn authorize_token(&self, token: &str) -> Result<Grant, Error> {
        self.0.authorize_token(token).await
    }
}
