//! Who a write acts as, checked again inside the transaction that records it: bytes may
//! stream for long (a slow body has no overall deadline), so an upload or a publication with
//! its bytes commits only if its session, or its capability token with the owner's session
//! and lease, is still live at the commit, whatever the size of what it sent (LSE-7).
//! Also the grant re-checked right before it acts, for the features a token acts in
//! (publication, Evidence). Over `access` (what makes a session or a token live) and the
//! engine: no feature.

use crate::sql::Connection;

use crate::access::grant::{resolve, still_live};
use crate::access::session::live_session;
use crate::access::{Grant, Session};
use crate::clock::format_instant;
use crate::engine::Engine;
use crate::error::Error;

/// The caller of a write, by the hash of its bearer token.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Acting {
    /// A session.
    Session([u8; 32]),
    /// A capability token (its owner's session and lease are checked with it).
    Token([u8; 32]),
}

impl Acting {
    pub(crate) fn session(session: &Session) -> Self {
        Self::Session(session.token_hash())
    }

    pub(crate) fn token(grant: &Grant) -> Self {
        Self::Token(grant.token_hash())
    }

    /// Refuses, with the code an expired, revoked or replaced caller gets at the door, unless
    /// the caller is still live at `now` (`format_instant`), on the transaction's connection.
    pub(crate) fn check(self, conn: &Connection, now: &str) -> Result<(), Error> {
        match self {
            Self::Session(hash) => live_session(conn, hash, now).map(|_| ()),
            Self::Token(hash) => still_live(conn, hash, now),
        }
    }
}

impl Engine {
    /// The grant again, right before it acts: it may have died since the request began.
    pub(crate) async fn recheck_grant(&self, grant: &Grant) -> Result<Grant, Error> {
        let token_hash = grant.token_hash();
        let now = format_instant(self.clock.now());
        self.db
            .read(move |conn| resolve(conn, token_hash, &now))
            .await
    }
}
