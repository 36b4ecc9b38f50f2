//! Small artifacts read from memory (issue #15): the bytes of recently uploaded or read
//! inline-sized blobs, bounded by bytes, least recently used first out.
//!
//! A content GET by a Group-wide reader decides visibility from memory: the lineage index
//! says whether the reader's Group published the artifact and with which media type (its
//! newest manifest there). A small artifact in this cache is then answered without the
//! index, any other with one read of the blob's row (and its inline bytes). Anyone else (an
//! Admin, a Mission-scoped member) and an artifact forwarded with a Context Package take the
//! ordinary read, which stays the authority on visibility; the memory path only ever answers
//! what that read would answer (`http/tests/hot.rs` compares them).
//!
//! Every answer is still verified: the cached bytes are re-hashed as they are sent (ART-5).
//! What the cache changes is where a small artifact is read from: bytes rotting in the index
//! are found by the next read that goes to the index (after an eviction or a restart),
//! verify-now or fsck, not by a read the cache answers.
//!
//! Invalidation: an entry only ever holds the bytes of its own address, so it never goes
//! stale; what it must not do is outlive a quarantine. [`Hot::forget`] runs before the
//! quarantine's transaction and bumps a generation, and a cold read inserts only if the
//! generation it saw before reading the index is unchanged, so a read racing a quarantine
//! cannot put the blob back. On a shared index, another server's disposals, quarantines
//! and forwards reach this one through the log (`lib.rs`, `follow_unreadable`), and a missed
//! stretch of it empties the cache.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use hashlink::LinkedHashMap;
use weft_api::{ArtifactId, Digests};

/// Artifact ids, hashed fast (they are BLAKE3 digests already).
pub(crate) type FastSet = std::collections::HashSet<ArtifactId, foldhash::fast::RandomState>;

/// One cached blob: its digests (as the index has them) and its bytes.
#[derive(Clone, Debug)]
pub(crate) struct HotBlob {
    pub(crate) digests: Digests,
    pub(crate) bytes: Bytes,
}

#[derive(Debug, Default)]
struct Lru {
    map: LinkedHashMap<ArtifactId, HotBlob>,
    bytes: u64,
}

/// The cache and what the fast path must leave to the ordinary read.
#[derive(Debug)]
pub(crate) struct Hot {
    /// Bytes of blob content held at most (0: the cache is off).
    budget: u64,
    lru: Mutex<Lru>,
    /// Moved by every quarantine, before its transaction.
    generation: AtomicU64,
    /// Artifacts forwarded into some Group with a Context Package (CTX-7): their visible
    /// manifests may be another Group's, which the fast path does not look at. Added before
    /// the forwarding commits, so the set may be larger than the table, never smaller.
    forwarded: Mutex<FastSet>,
    hits: AtomicU64,
}

impl Hot {
    pub(crate) fn new(budget: u64, forwarded: FastSet) -> Self {
        Self {
            budget,
            lru: Mutex::default(),
            generation: AtomicU64::new(0),
            forwarded: Mutex::new(forwarded),
            hits: AtomicU64::new(0),
        }
    }

    fn lru(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.lru.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The generation to hand back to [`Hot::insert`] after a read of the index.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The cached blob `id`, marked as just used.
    pub(crate) fn get(&self, id: &ArtifactId) -> Option<HotBlob> {
        if self.budget == 0 {
            return None;
        }
        let mut lru = self.lru();
        let blob = lru.map.to_back(id)?.clone();
        drop(lru);
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(blob)
    }

    /// Keeps `blob` (whose bytes the caller has verified or just hashed on upload) unless a
    /// quarantine happened since `generation` was read, or it is larger than a tenth of the
    /// budget. Evicts the least recently used to stay within the budget.
    pub(crate) fn insert(&self, blob: HotBlob, generation: u64) {
        let size = blob.bytes.len() as u64;
        if size > self.budget / 10 || blob.digests.size != size {
            return;
        }
        let mut lru = self.lru();
        // Checked under the lock `forget` also takes, so a quarantine either sees this entry
        // and removes it, or has already moved the generation and this insert stops here.
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        let id = blob.digests.blake3;
        if let Some(old) = lru.map.insert(id, blob) {
            lru.bytes -= old.bytes.len() as u64;
        }
        lru.bytes += size;
        while lru.bytes > self.budget {
            let Some((_, evicted)) = lru.map.pop_front() else {
                break;
            };
            lru.bytes -= evicted.bytes.len() as u64;
        }
    }

    /// Drops `id` and makes every read that started before this call unable to re-insert
    /// anything. Called before a quarantine commits.
    pub(crate) fn forget(&self, id: &ArtifactId) {
        let mut lru = self.lru();
        self.generation.fetch_add(1, Ordering::AcqRel);
        if let Some(old) = lru.map.remove(id) {
            lru.bytes -= old.bytes.len() as u64;
        }
    }

    /// Drops every entry, as [`Hot::forget`] drops one (another server's disposals or
    /// quarantines may have been missed).
    pub(crate) fn forget_all(&self) {
        let mut lru = self.lru();
        self.generation.fetch_add(1, Ordering::AcqRel);
        lru.map.clear();
        lru.bytes = 0;
    }

    /// Notes that `id` is being forwarded with a Context Package (before that commits).
    pub(crate) fn note_forwarded(&self, id: ArtifactId) {
        self.forwarded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id);
    }

    pub(crate) fn was_forwarded(&self, id: &ArtifactId) -> bool {
        self.forwarded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(id)
    }

    /// Keeps the bytes of an inline blob read from the index and just verified against
    /// `digests` by the caller (`generation` was read before the index was).
    pub(crate) fn keep(&self, digests: &Digests, bytes: &Bytes, generation: u64) {
        if self.budget == 0 || bytes.len() as u64 != digests.size {
            return;
        }
        let blob = HotBlob {
            digests: *digests,
            bytes: bytes.clone(),
        };
        self.insert(blob, generation);
    }

    /// Reads the cache answered, entries and bytes held.
    pub(crate) fn stats(&self) -> HotStats {
        let lru = self.lru();
        HotStats {
            hits: self.hits.load(Ordering::Relaxed),
            entries: lru.map.len() as u64,
            bytes: lru.bytes,
        }
    }
}

/// What the small-artifact cache holds and how often it answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HotStats {
    pub hits: u64,
    pub entries: u64,
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(n: u8, size: usize) -> HotBlob {
        let bytes = vec![n; size];
        HotBlob {
            digests: weft_api::digest::Hasher::digest(&bytes),
            bytes: Bytes::from(bytes),
        }
    }

    #[test]
    fn the_least_recently_used_goes_first_and_the_budget_holds() {
        let hot = Hot::new(10 * 1000, FastSet::default());
        let blobs: Vec<_> = (0..10u8).map(|n| blob(n, 1000)).collect();
        for b in &blobs {
            hot.insert(b.clone(), hot.generation());
        }
        assert_eq!(hot.stats().bytes, 10_000);
        assert!(
            hot.get(&blobs[0].digests.blake3).is_some(),
            "0 is now the newest"
        );
        hot.insert(blob(10, 1000), hot.generation());
        assert!(
            hot.get(&blobs[1].digests.blake3).is_none(),
            "1 was the oldest"
        );
        assert!(hot.get(&blobs[0].digests.blake3).is_some());
        assert_eq!(hot.stats().bytes, 10_000);
        hot.insert(blob(11, 1001), hot.generation());
        assert!(
            hot.get(&blob(11, 1001).digests.blake3).is_none(),
            "over a tenth of the budget"
        );
    }

    #[test]
    fn a_read_that_started_before_a_quarantine_cannot_put_the_blob_back() {
        let hot = Hot::new(1 << 20, FastSet::default());
        let b = blob(1, 100);
        hot.insert(b.clone(), hot.generation());
        let before = hot.generation();
        hot.forget(&b.digests.blake3);
        assert!(hot.get(&b.digests.blake3).is_none());
        hot.insert(b.clone(), before);
        assert!(hot.get(&b.digests.blake3).is_none(), "stale generation");
        hot.insert(b.clone(), hot.generation());
        assert!(hot.get(&b.digests.blake3).is_some(), "a read after it may");
    }

    #[test]
    fn an_off_cache_holds_nothing() {
        let hot = Hot::new(0, FastSet::default());
        let b = blob(1, 100);
        hot.insert(b.clone(), hot.generation());
        assert!(hot.get(&b.digests.blake3).is_none());
        assert_eq!(hot.stats(), HotStats::default());
    }
}
