//! [`Sessions`], the handle to sessions and their liveness (`store.sessions()`): opening one,
//! resolving a bearer token (through the cache of resolved sessions), re-checking one, and
//! the signal that some session may have ended. The work is in `sessions.rs`.

use std::sync::Arc;

use weft_api::Envelope;
use weft_api::session::SessionGrant;

use super::SessionCache;
use crate::access::Session;
use crate::engine::Engine;
use crate::error::Error;

/// Sessions and their liveness; borrowed from a [`Store`](crate::Store).
#[derive(Clone, Copy, Debug)]
pub struct Sessions<'s> {
    pub(crate) engine: &'s Arc<Engine>,
    pub(crate) cache: &'s SessionCache,
}

impl Sessions<'_> {
    /// Verifies a signed session request and opens a session (DESIGN §8.1).
    pub async fn open_session(&self, envelope: Envelope) -> Result<SessionGrant, Error> {
        self.engine.open_session(envelope).await
    }

    /// Resolves a bearer token to a live session.
    pub async fn authenticate(&self, token: &str) -> Result<Session, Error> {
        self.cache.authenticate(self.engine, token).await
    }

    /// Whether a session a stream was opened with is still live now.
    pub async fn recheck(&self, session: &Session) -> Result<(), Error> {
        self.engine.recheck(session).await
    }

    /// Changes whenever some session may have ended (a new session, a Membership set or
    /// removed, an Agent deactivated, a key rotated): streams re-check theirs then.
    pub fn auth_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.engine.auth_changes()
    }
}
