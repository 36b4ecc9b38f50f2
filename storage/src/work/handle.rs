//! [`Work`], the handle to Missions, WorkItems and their Commands (`store.work()`, DESIGN §10),
//! with the capability tokens of their leases (LSE-6/7). Its methods are in this folder:
//! Commands in `command.rs`, the expiry timer in `timer.rs`, views in `mod.rs` and
//! `listing.rs`, tokens in `tokens.rs`; here only the read of a signed Command back.

use std::sync::Arc;

use weft_api::work::views::SignedCommand;
use weft_api::{ErrorCode, Id};

use crate::access::MissionScope;
use crate::access::Reader;
use crate::engine::Engine;
use crate::error::{Error, reject};

/// Missions, WorkItems and Commands; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Work<'s>(pub(crate) &'s Arc<Engine>);

impl Work<'_> {
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
}
