//! [`Delivery`], the handle to a Group's log as its readers get it (`store.delivery()`, DESIGN
//! §7–§8): replay, live follow, ACK cursors and signed checkpoints. Each method hands over to
//! the engine (`delivery.rs`).

use std::sync::Arc;

use futures::Stream;
use weft_api::Id;
use weft_api::event::Delivered;
use weft_api::views::{Cursor, SignedCheckpoint};

use crate::access::Reader;
use crate::access::Session;
use crate::engine::Engine;
use crate::error::Error;

/// A Group's log for its readers; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Delivery<'s>(pub(crate) &'s Arc<Engine>);

impl Delivery<'_> {
    /// A page of a Group's log after `after` (replay); a Mission-scoped reader gets `withheld`
    /// placeholders for other Missions' Events (CTX-5).
    pub async fn events(
        &self,
        group_id: Id,
        after: u64,
        limit: u32,
        reader: &Reader,
    ) -> Result<Vec<Delivered>, Error> {
        self.0.events(group_id, after, limit, reader).await
    }

    /// A Group's Events after `after`, then live ones as they commit: in order, no gaps.
    /// `after` past the head is refused (`cursor_ahead`).
    pub async fn follow(
        &self,
        group_id: Id,
        after: u64,
        reader: &Reader,
    ) -> Result<impl Stream<Item = Result<Delivered, Error>> + Send + use<>, Error> {
        self.0.follow(group_id, after, reader).await
    }

    /// Appends a filler Event of any type (the events benchmark's load) and returns its
    /// sequence once it is durable. Only with feature `bench-support`: the server appends
    /// typed Events only, each with the change it describes.
    #[cfg(feature = "bench-support")]
    pub async fn append(
        &self,
        group_id: Id,
        kind: &'static str,
        payload: serde_json::Value,
    ) -> Result<u64, Error> {
        self.0.append_filler(group_id, kind, payload).await
    }

    /// Records an Agent's ACK for a Group; never moves a cursor back (DLV-6, DLV-7).
    pub async fn ack(
        &self,
        group_id: Id,
        session: &Session,
        sequence: u64,
    ) -> Result<Cursor, Error> {
        self.0.ack(group_id, session, sequence).await
    }

    pub async fn cursors(
        &self,
        group_id: Id,
        reader: &Reader,
        all: bool,
    ) -> Result<Vec<Cursor>, Error> {
        self.0.cursors(group_id, reader, all).await
    }

    /// The Group's head `{groupId, sequence, hash}` signed by the authority key.
    pub async fn checkpoint(
        &self,
        group_id: Id,
        reader: &Reader,
    ) -> Result<SignedCheckpoint, Error> {
        self.0.checkpoint(group_id, reader).await
    }
}
