//! The cache of resolved sessions ([`SessionCache`]), which `Sessions::authenticate` reads
//! before the index: an entry answers only while no change that can end a session has
//! committed since it was read.

use chrono::{DateTime, Utc};

use crate::access::Session;

/// Live sessions by token hash, each with the auth generation it was read at. An entry
/// answers only while the generation is unchanged (every change that can end a session moves
/// it, after its commit and before its answer) and the session has not expired; refusals are
/// never kept. Bounded: emptied when full.
#[derive(Debug, Default)]
pub(crate) struct SessionCache(std::sync::Mutex<std::collections::HashMap<[u8; 32], Cached>>);

/// A live session as read, with the auth generation it was read at and its expiry parsed once
/// (a cached answer compares instants; it never formats one).
#[derive(Debug)]
struct Cached {
    generation: u64,
    expires: DateTime<Utc>,
    session: Session,
}

/// Entries a [`SessionCache`] holds before it starts over.
const SESSION_CACHE_ENTRIES: usize = 65_536;

impl SessionCache {
    pub(super) fn get(
        &self,
        token_hash: &[u8; 32],
        generation: u64,
        now: DateTime<Utc>,
    ) -> Option<Session> {
        let cache = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match cache.get(token_hash) {
            Some(cached) if cached.generation == generation && cached.expires > now => {
                Some(cached.session.clone())
            }
            _ => None,
        }
    }

    /// Keeps `session` unless its expiry does not parse (it is then read again next time).
    pub(super) fn put(&self, token_hash: [u8; 32], generation: u64, session: Session) {
        let Ok(expires) = DateTime::parse_from_rfc3339(&session.expires_at) else {
            return;
        };
        let mut cache = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if cache.len() >= SESSION_CACHE_ENTRIES {
            cache.clear();
        }
        let expires = expires.with_timezone(&Utc);
        cache.insert(
            token_hash,
            Cached {
                generation,
                expires,
                session,
            },
        );
    }
}
