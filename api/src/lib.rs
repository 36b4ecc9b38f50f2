//! The protocol contract of weft: identifiers, digests, DSSE envelopes, the signed payloads
//! (artifact manifest, session request), the event chain, and the stable error codes.
//!
//! This crate does no I/O. Only the `client` module (cargo feature `client`) talks HTTP,
//! and it speaks exactly the shapes defined here, so a client and the server cannot drift.

pub mod audit;
pub mod bao;
pub mod context;
pub mod delivery;
pub mod digest;
pub mod dsse;
pub mod error;
pub mod event;
pub mod evidence;
pub mod group_state;
pub mod id;
pub mod idempotency;
pub mod json;
pub mod kinds;
pub mod lifecycle;
pub mod lineage;
pub mod manifest;
pub mod problem;
pub mod session;
pub mod signed;
pub mod tlog;
pub mod verdict;
pub mod views;
pub mod work;
pub mod worker;

#[cfg(feature = "client")]
pub mod client;
#[cfg(feature = "client")]
pub mod journal;
#[cfg(feature = "client")]
pub mod subscription;

pub use digest::{ArtifactId, Digest, Digests, Sha256Digest};
pub use dsse::{Envelope, KeyId, Verified};
pub use error::{ErrorCode, Rejection};
pub use event::{Event, EventHash};
pub use group_state::GroupState;
pub use id::Id;
pub use kinds::{EventKind, EventPayload};
pub use manifest::Manifest;
pub use problem::ErrorBody;
pub use session::SessionRequest;
pub use signed::SignedPayload;
