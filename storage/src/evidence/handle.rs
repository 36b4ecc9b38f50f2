//! [`Evidence`], the handle to Evidence and the built-in reviewer (`store.evidence()`): recording
//! signed records (under a session or a capability token), reading them and the verdicts per
//! criterion, and running the deterministic review (EVD-3). Its methods are in this
//! folder: records in `mod.rs` and `with_token.rs`, the review in `reviewer.rs`.

use std::sync::Arc;

use crate::engine::Engine;

/// Evidence and the built-in reviewer; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Evidence<'s>(pub(crate) &'s Arc<Engine>);
