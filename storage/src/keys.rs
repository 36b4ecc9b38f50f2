//! Registered signing keys by keyid, answered from memory (issue #15: every signed payload
//! looked its key up with a read of its own before its transaction).
//!
//! An entry answers only while the auth generation it was read at is unchanged; every commit
//! that changes an Agent or its keys (registration, card version, rotation, deactivation)
//! moves it before its answer, as for the session cache (`sessions.rs`). Refusals are never
//! kept, and the transaction that records a signed payload checks its key again.

use std::collections::HashMap;
use std::sync::Mutex;

use ed25519_dalek::VerifyingKey;
use weft_api::{Id, KeyId};

/// A key's Agent, public key and registered card version.
pub(crate) type KeyEntry = (Id, VerifyingKey, String);

/// Entries held before the cache starts over.
const KEY_CACHE_ENTRIES: usize = 65_536;

#[derive(Debug, Default)]
pub(crate) struct KeyCache(Mutex<HashMap<KeyId, (u64, KeyEntry)>>);

impl KeyCache {
    /// The entry for `keyid` if it was read at `generation`.
    pub(crate) fn get(&self, keyid: &KeyId, generation: u64) -> Option<KeyEntry> {
        let entries = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match entries.get(keyid) {
            Some((read_at, entry)) if *read_at == generation => Some(entry.clone()),
            _ => None,
        }
    }

    /// Keeps what a read started at `generation` found.
    pub(crate) fn put(&self, keyid: KeyId, generation: u64, entry: KeyEntry) {
        let mut entries = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= KEY_CACHE_ENTRIES {
            entries.clear();
        }
        entries.insert(keyid, (generation, entry));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_read_before_a_change_is_not_answered_after_it() {
        let cache = KeyCache::default();
        let key = weft_api::dsse::generate_key().verifying_key();
        let keyid = KeyId::of(&key);
        let entry = (Id::parse("agentId", "a1").expect("id"), key, "1".to_owned());
        cache.put(keyid.clone(), 7, entry.clone());
        assert_eq!(cache.get(&keyid, 7).map(|e| e.0), Some(entry.0));
        assert!(cache.get(&keyid, 8).is_none(), "the generation moved");
    }
}
