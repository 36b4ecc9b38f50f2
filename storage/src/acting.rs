//! Who a write acts as, checked again inside the transaction that records it: bytes may
//! stream for long (a slow body has no overall deadline), so an upload or a publication with
//! its bytes commits only if its session, or its capability token with the owner's session
//! and lease, is still live at the commit, whatever the size of what it sent (LSE-7).
//! Its own module because it reads both `sessions` and `work::tokens`, which must not import
//! each other both ways.

use rusqlite::Connection;

use crate::error::Error;
use crate::sessions::{Session, live_session};
use crate::work::tokens::still_live;

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

    pub(crate) fn token(grant: &crate::Grant) -> Self {
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
