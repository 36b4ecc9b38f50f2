//! [`Evidence`], the handle to Evidence and the built-in reviewer (`store.evidence()`): recording
//! signed records (under a session or a capability token), reading them and the verdicts per
//! criterion, and running the deterministic review (EVD-3). Each method hands over to the
//! engine: records in `mod.rs`, the review in `reviewer.rs`, token checks in `work/tokens.rs`.

use std::sync::Arc;

use crate::engine::Engine;

/// Evidence and the built-in reviewer; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Evidence<'s>(pub(crate) &'s Arc<Engine>);

impl Evidence<'_> {}
