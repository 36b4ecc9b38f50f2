//! [`Context`], the handle to Context Packages (`store.context()`, DESIGN §11): publishing a
//! version, reading versions, the Events and provenance they cite, and forwarding one to
//! another Group. Its methods are in `mod.rs` (writes) and `reads.rs`.

use std::sync::Arc;

use crate::engine::Engine;

/// Context Packages; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Context<'s>(pub(crate) &'s Arc<Engine>);
