//! [`Compaction`], the handle to online-log retention (`store.compaction()`, DLV-9, DLV-10):
//! compacting old Events into signed snapshots, and reading those snapshots and their blobs.
//! Its methods are in `compaction.rs`.

use std::sync::Arc;

use crate::engine::Engine;

/// Online-log retention and its snapshots; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Compaction<'s>(pub(crate) &'s Arc<Engine>);
