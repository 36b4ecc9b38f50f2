//! [`Sessions`], the handle to sessions and their liveness (`store.sessions()`): opening one,
//! resolving a bearer token (through the cache of resolved sessions), re-checking one, and
//! the signal that some session may have ended. Its methods are in
//! `sessions.rs`.

use std::sync::Arc;

use super::cache::SessionCache;
use crate::engine::Engine;

/// Sessions and their liveness; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Sessions<'s> {
    pub(crate) engine: &'s Arc<Engine>,
    pub(crate) cache: &'s SessionCache,
}
