//! [`Work`], the handle to Missions, WorkItems and their Commands (`store.work()`, DESIGN §10),
//! with the capability tokens of their leases (LSE-6/7). Each method hands over to the engine:
//! Commands in `command.rs`, expiry in `expiry.rs`, views in `listing.rs` and `missions.rs`,
//! tokens in `tokens.rs`.

use std::sync::Arc;

use weft_api::work::views::{
    CommandAccepted, MissionView, TokenIssued, TokenRequest, WorkGraph, WorkItemView,
};
use weft_api::{Envelope, Id};

use crate::access::Reader;
use crate::access::Session;
use crate::engine::Engine;
use crate::error::Error;

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
