//! [`Delivery`], the handle to a Group's log as its readers get it (`store.delivery()`, DESIGN
//! §7–§8): replay, live follow, ACK cursors and signed checkpoints. Its methods are in
//! `delivery.rs`.

use std::sync::Arc;

use crate::engine::Engine;

/// A Group's log for its readers; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Delivery<'s>(pub(crate) &'s Arc<Engine>);
