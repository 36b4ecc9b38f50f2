//! [`Lifespan`], the handle to retention policies, legal holds, usage and quotas
//! (`store.lifespan()`); its methods are in this folder.

use std::sync::Arc;

use crate::engine::Engine;

/// Retention policies, holds, usage and quotas; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Lifespan<'s>(pub(crate) &'s Arc<Engine>);
