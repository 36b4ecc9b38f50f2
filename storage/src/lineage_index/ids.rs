//! Artifact id → node number, in two parts so that a restart need not build a hash table:
//! the ids a snapshot stored, sorted (read back as they are and searched by bisection), and
//! a hash map of every node numbered since.
//!
//! At 1 M artifacts, inserting every id into a hash table was the longest part of reading a
//! snapshot back (about 0.45 s of the 0.83 s to ready on the shared 2-core machine: a random
//! write per artifact into a 40 MB table); checking a sorted run is one sequential pass. A
//! lookup in the loaded part goes through a table of where each leading-bits bucket of ids
//! starts (ids are BLAKE3 outputs, so 8 to 16 to a bucket), then bisects that bucket: a
//! miss or two, like a hash probe. Ids an uploader ground to share leading bits only make
//! their bucket's bisection longer, never more than the whole run's.

use weft_api::ArtifactId;

use super::FastMap;

#[derive(Debug, Default)]
pub(super) struct Ids {
    /// As a snapshot stored them: strictly ascending by id, each node once.
    loaded: Vec<(ArtifactId, u32)>,
    /// `starts[b]`: the first entry of `loaded` whose id's leading `bits` bits are `b` or more;
    /// one more entry at the end, `loaded.len()`.
    starts: Vec<u32>,
    bits: u32,
    /// Every node numbered since the snapshot was read (or since the rebuild began).
    added: FastMap<ArtifactId, u32>,
}

impl Ids {
    /// `sorted` must be strictly ascending by id (the snapshot decoder checks it).
    pub(super) fn loaded(sorted: Vec<(ArtifactId, u32)>) -> Self {
        debug_assert!(sorted.windows(2).all(|w| w[0].0 < w[1].0));
        // 8 to 16 ids to a bucket, at most 2^20 buckets (4 MiB of starts).
        let bits = (sorted.len() / 8).max(1).ilog2().min(20);
        let mut starts = Vec::with_capacity((1 << bits) + 1);
        for (at, (id, _)) in sorted.iter().enumerate() {
            let bucket = bucket(id, bits);
            while starts.len() <= bucket {
                starts.push(at as u32);
            }
        }
        starts.resize((1 << bits) + 1, sorted.len() as u32);
        Self {
            loaded: sorted,
            starts,
            bits,
            added: FastMap::default(),
        }
    }

    pub(super) fn get(&self, id: &ArtifactId) -> Option<u32> {
        if let Some(&n) = self.added.get(id) {
            return Some(n);
        }
        if self.loaded.is_empty() {
            return None;
        }
        let bucket = bucket(id, self.bits);
        let (from, to) = (self.starts[bucket], self.starts[bucket + 1]);
        let run = &self.loaded[from as usize..to as usize];
        let at = run.binary_search_by(|(key, _)| key.cmp(id)).ok()?;
        Some(run[at].1)
    }

    /// This index, now `Ids::loaded` of a `sorted()` taken when the graph had `n_nodes`
    /// nodes, keeps the ids `old` numbered since then (node `n_nodes` on); returns what is
    /// left of `old`, for its caller to free outside the graph's lock.
    pub(super) fn adopt(&mut self, mut old: Ids, n_nodes: usize) -> Ids {
        old.added.retain(|_, n| *n as usize >= n_nodes);
        // A newer run adopted in between (two encodes at once: saves take turns, tests need
        // not) holds ids numbered after this one was taken; it lists every node then.
        if old.loaded.len() > n_nodes {
            let newer = old.loaded.iter().filter(|(_, n)| *n as usize >= n_nodes);
            old.added.extend(newer.copied());
        }
        std::mem::swap(&mut self.added, &mut old.added);
        old
    }

    /// Numbers `id` as node `n`; the caller has found it absent.
    pub(super) fn insert(&mut self, id: ArtifactId, n: u32) {
        debug_assert!(self.get(&id).is_none());
        self.added.insert(id, n);
    }

    /// Every `(id, node)`, ascending by id, as a snapshot stores them.
    pub(super) fn sorted(&self) -> Vec<(ArtifactId, u32)> {
        let mut added: Vec<(ArtifactId, u32)> =
            self.added.iter().map(|(&id, &n)| (id, n)).collect();
        added.sort_unstable_by_key(|&(id, _)| id);
        // Merge two ascending runs.
        let mut all = Vec::with_capacity(self.loaded.len() + added.len());
        let (mut old, mut new) = (self.loaded.iter().peekable(), added.into_iter().peekable());
        loop {
            let take_old = match (old.peek(), new.peek()) {
                (Some(a), Some(b)) => a.0 < b.0,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            match take_old {
                true => all.extend(old.next().copied()),
                false => all.extend(new.next()),
            }
        }
        all
    }

    /// Bytes held on the heap (for the index's size figure).
    pub(super) fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(ArtifactId, u32)>();
        self.loaded.capacity() * entry
            + self.starts.capacity() * 4
            + self.added.capacity() * (entry + 1)
    }
}

/// The leading `bits` bits of `id` (at most 32), which order buckets as ids are ordered.
fn bucket(id: &ArtifactId, bits: u32) -> usize {
    let lead = u32::from_be_bytes([id.0[0], id.0[1], id.0[2], id.0[3]]);
    lead.checked_shr(32 - bits).unwrap_or(0) as usize
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Ids that differ in their leading bytes and, for half of them, only in their last
    /// (all in one bucket), so both the bucket table and the bisection inside a bucket count.
    fn id(byte: u8) -> ArtifactId {
        let mut id = [0; 32];
        if byte < 128 {
            id = [byte; 32];
        } else {
            id[31] = byte;
        }
        ArtifactId(id)
    }

    /// Two encodes at once: the run taken first is adopted last, and keeps the ids the newer
    /// one had and it had not.
    #[test]
    fn an_older_run_adopted_after_a_newer_one_loses_nothing() {
        let mut index = Ids::default();
        for n in 0..10u8 {
            index.insert(id(n), u32::from(n));
        }
        let older = index.sorted(); // encode A, at 10 nodes
        index.insert(id(10), 10);
        index.insert(id(11), 11);
        let newer = index.sorted(); // encode B, at 12 nodes, adopted first
        let old = std::mem::replace(&mut index, Ids::loaded(newer));
        drop(index.adopt(old, 12));
        index.insert(id(12), 12);
        let old = std::mem::replace(&mut index, Ids::loaded(older));
        drop(index.adopt(old, 10));
        for n in 0..13u8 {
            assert_eq!(index.get(&id(n)), Some(u32::from(n)), "id {n}");
        }
        assert_eq!(index.sorted().len(), 13);
    }

    proptest! {
        /// Whatever was loaded and whatever was added since, every id answers its node and
        /// `sorted` lists them all in order, as one hash map of them would; so again once a
        /// save's sorted run is adopted while more ids were being added.
        #[test]
        fn loaded_and_added_answer_as_one_map(loaded in prop::collection::btree_set(any::<u8>(), 0..200), added in prop::collection::btree_set(any::<u8>(), 0..40), later in prop::collection::btree_set(any::<u8>(), 0..40)) {
            let mut sorted: Vec<(ArtifactId, u32)> = loaded.iter().enumerate().map(|(n, &b)| (id(b), n as u32)).collect();
            sorted.sort_unstable_by_key(|&(id, _)| id);
            let mut ids = Ids::loaded(sorted);
            let mut reference: std::collections::BTreeMap<ArtifactId, u32> = ids.loaded.iter().copied().collect();
            for b in added.difference(&loaded) {
                let n = reference.len() as u32;
                ids.insert(id(*b), n);
                reference.insert(id(*b), n);
            }
            for b in 0..=u8::MAX {
                prop_assert_eq!(ids.get(&id(b)), reference.get(&id(b)).copied());
            }
            prop_assert_eq!(ids.sorted(), reference.iter().map(|(&id, &n)| (id, n)).collect::<Vec<_>>());
            // A save's sorted run adopted, with ids numbered after it was taken (`later`).
            let taken_at = reference.len();
            let mut fresh = Ids::loaded(ids.sorted());
            for b in later.difference(&loaded).filter(|b| !added.contains(b)) {
                let n = reference.len() as u32;
                ids.insert(id(*b), n);
                reference.insert(id(*b), n);
            }
            let left = fresh.adopt(ids, taken_at);
            prop_assert!(left.added.is_empty());
            for b in 0..=u8::MAX {
                prop_assert_eq!(fresh.get(&id(b)), reference.get(&id(b)).copied());
            }
            prop_assert_eq!(fresh.sorted(), reference.into_iter().collect::<Vec<_>>());
        }
    }
}
