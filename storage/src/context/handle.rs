//! [`Context`], the handle to Context Packages (`store.context()`, DESIGN §11): publishing a
//! version, reading versions, the Events and provenance they cite, and forwarding one to
//! another Group. Each method hands over to the engine (`mod.rs`, `reads.rs`).

use std::sync::Arc;

use weft_api::context::{
    ContextForwardedAnswer, ContextPublishedAnswer, ContextRecord, ContextVersions, ForwardRequest,
};
use weft_api::{Envelope, Id};

use crate::access::Reader;
use crate::engine::Engine;
use crate::error::Error;
use crate::lineage_index::{Lineage, Query as LineageQuery};

/// Context Packages; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Context<'s>(pub(crate) &'s Arc<Engine>);

impl Context<'_> {
    /// Publishes a signed Context Package version in `group_id` (`context.published`);
    /// `Ok((answer, false))` when it was already published there.
    pub async fn publish_context(
        &self,
        group_id: Id,
        envelope: Envelope,
        caller: &Reader,
    ) -> Result<(ContextPublishedAnswer, bool), Error> {
        self.0.publish_context(group_id, envelope, caller).await
    }

    /// Version `version` of a package in the reader's Group (the latest when `None`).
    pub async fn context_version(
        &self,
        package_id: Id,
        version: Option<u64>,
        reader: &Reader,
    ) -> Result<ContextRecord, Error> {
        self.0.context_version(package_id, version, reader).await
    }

    pub async fn context_versions(
        &self,
        package_id: Id,
        reader: &Reader,
    ) -> Result<ContextVersions, Error> {
        self.0.context_versions(package_id, reader).await
    }

    /// The Events a version cites, when the reader's Membership covers that log (CTX-3).
    pub async fn context_events(
        &self,
        package_id: Id,
        version: Option<u64>,
        reader: &Reader,
    ) -> Result<(ContextRecord, Vec<weft_api::event::Delivered>), Error> {
        self.0.context_events(package_id, version, reader).await
    }

    /// The package's versions (`revisionOf`), what they cite (`cites`) and those Artifacts'
    /// lineage under `query`.
    pub async fn context_provenance(
        &self,
        package_id: Id,
        query: LineageQuery,
        reader: &Reader,
    ) -> Result<Lineage, Error> {
        self.0.context_provenance(package_id, query, reader).await
    }

    /// Forwards a version to another Group (CTX-7, `context.forwarded` in both).
    pub async fn forward_context(
        &self,
        package_id: Id,
        request: ForwardRequest,
        caller: &Reader,
    ) -> Result<(ContextForwardedAnswer, bool), Error> {
        self.0.forward_context(package_id, request, caller).await
    }
}
