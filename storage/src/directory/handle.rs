//! [`Directory`], the handle to who exists and where: Groups, Agents and their keys,
//! Memberships and the Group policy, as the operator administers them (`store.directory()`).
//! Its methods are in this folder: the writes and the key lookup in `agents.rs`, the policy
//! in `policy.rs`, the reads in `mod.rs`.

use std::sync::Arc;

use crate::engine::Engine;

/// Groups, Agents and Memberships; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Directory<'s>(pub(crate) &'s Arc<Engine>);
