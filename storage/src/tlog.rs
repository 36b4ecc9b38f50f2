//! Each Group's log as a Merkle tree (issue #45, DESIGN §15): the shared service that keeps
//! the tree with the log and proves things from it. The rules (leaves, origin, the checkpoint
//! note, proof shapes, tile paths) are `weft_api::tlog`; the rows are
//! `rows/tlog_hashes.rs`; the tree arithmetic is `tlog_tiles`' (Go's sumdb/tlog, ported).
//!
//! - **Appending**: [`grow`] runs in the transaction that appends the Events (the writer
//!   calls it for each batch just before the commit, `db.rs`), under the Group's
//!   serialisation (the single writer on SQLite, the Group's row lock on PostgreSQL), so the
//!   tree is always exactly the log: leaf `sequence − 1` is stored with its Event or not at
//!   all. It never builds on a gap: a tree found behind its log is caught up from the online
//!   log first, or the batch fails.
//! - **Catching up at open**: a store whose log predates the tree (schema version 31) gets it
//!   when it opens (`lifecycle/trees.rs` feeds its Events, online or read back from the
//!   compaction archive, through [`extend`]).
//! - **Reading**: roots, proofs and tile hashes come from the stored hashes in a few indexed
//!   reads (O(log n) for a proof). Proofs and hash tiles carry hashes only, never an Event.

use std::cell::RefCell;

use tlog_tiles::{Hash, HashReader, Tile};

use crate::error::Error;
use crate::sql::Connection;

/// Group `group_id`'s stored hashes as `tlog_tiles` reads them; a database error is kept
/// and handed back as itself, not as a proof error.
struct Stored<'a> {
    conn: &'a Connection,
    group_id: &'a str,
    failure: RefCell<Option<Error>>,
}

impl<'a> Stored<'a> {
    fn new(conn: &'a Connection, group_id: &'a str) -> Self {
        Self {
            conn,
            group_id,
            failure: RefCell::new(None),
        }
    }

    /// `outcome` with a kept database error first, else a tree error as `what` fails.
    fn finish<T>(&self, outcome: Result<T, tlog_tiles::Error>, what: &str) -> Result<T, Error> {
        if let Some(error) = self.failure.borrow_mut().take() {
            return Err(error);
        }
        outcome.map_err(|e| {
            Error::backend(std::io::Error::other(format!(
                "group {}: {what}: {e}",
                self.group_id
            )))
        })
    }
}

impl HashReader for Stored<'_> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
        match crate::rows::tlog_hashes::read(self.conn, self.group_id, indexes) {
            Ok(Some(hashes)) => Ok(hashes.into_iter().map(Hash).collect()),
            Ok(None) => {
                *self.failure.borrow_mut() = Some(Error::backend(std::io::Error::other(format!(
                    "group {}: the Merkle tree lacks a stored hash (run `weft fsck`)",
                    self.group_id
                ))));
                Err(tlog_tiles::Error::IndexesNotInTree)
            }
            Err(error) => {
                *self.failure.borrow_mut() = Some(error);
                Err(tlog_tiles::Error::IndexesNotInTree)
            }
        }
    }
}

/// Grows each Group's tree by the leaves of `events` (appended in this transaction, in order;
/// `leaves[i]` is `events[i]`'s), just before the writer commits them: per Group, one read of
/// the stored hashes the new ones are built on (and of the leaf before the first, whose
/// absence would be a gap), the stored hashes computed in memory, and inserts of 32 rows
/// each. A tree found behind its log (another server of an older version appended without
/// it, during a rolling upgrade) is first caught up from the online log, under the same lock.
pub(crate) fn grow(
    conn: &Connection,
    events: &[weft_api::Event],
    leaves: &[[u8; 32]],
) -> Result<(), Error> {
    // (Group, first sequence, its leaves), in the order the Groups first appear.
    let mut runs: Vec<(&str, u64, Vec<[u8; 32]>)> = Vec::new();
    for (event, leaf) in events.iter().zip(leaves) {
        match runs
            .iter_mut()
            .find(|(group, _, _)| *group == event.group_id)
        {
            Some((group, first, run)) => {
                if event.sequence != *first + run.len() as u64 {
                    return Err(Error::backend(std::io::Error::other(format!(
                        "group {group}: Event {} appended out of order",
                        event.sequence
                    ))));
                }
                run.push(*leaf);
            }
            None => runs.push((&event.group_id, event.sequence, vec![*leaf])),
        }
    }
    for (group, first, run) in runs {
        let n0 = first - 1;
        if !grow_group(conn, group, n0, &run)? {
            catch_up_online(conn, group, n0)?;
            if !grow_group(conn, group, n0, &run)? {
                return Err(Error::backend(std::io::Error::other(format!(
                    "group {group}: the Merkle tree lacks what leaf {n0} is built on (run `weft fsck`)"
                ))));
            }
        }
    }
    Ok(())
}

/// Adds `leaves` as leaves `n0…` of Group `group_id`'s tree; `false` (nothing added) when the
/// tree does not hold what they are built on.
fn grow_group(
    conn: &Connection,
    group_id: &str,
    n0: u64,
    leaves: &[[u8; 32]],
) -> Result<bool, Error> {
    let end = n0 + leaves.len() as u64;
    // From the index: the leaf before the first, and every left sibling completed before n0.
    let mut needed = std::collections::BTreeSet::new();
    if n0 > 0 {
        needed.insert(tlog_tiles::stored_hash_index(0, n0 - 1));
    }
    for n in n0..end {
        for i in 0..(n + 1).trailing_zeros() {
            let sibling = (n >> i) - 1;
            let last_leaf = ((sibling + 1) << i) - 1;
            if last_leaf < n0 {
                needed.insert(tlog_tiles::stored_hash_index(i as u8, sibling));
            }
        }
    }
    let needed: Vec<u64> = needed.into_iter().collect();
    let Some(found) = crate::rows::tlog_hashes::read(conn, group_id, &needed)? else {
        return Ok(false);
    };
    let mut known = Prefetched(needed.into_iter().zip(found).collect());
    let mut stored = Vec::with_capacity(leaves.len() * 2);
    for (n, leaf) in (n0..end).zip(leaves) {
        let hashes =
            tlog_tiles::stored_hashes_for_record_hash(n, Hash(*leaf), &known).map_err(|e| {
                Error::backend(std::io::Error::other(format!(
                    "group {group_id}: stored hashes of leaf {n}: {e}"
                )))
            })?;
        let first = tlog_tiles::stored_hash_index(0, n);
        for (index, hash) in (first..).zip(&hashes) {
            known.0.insert(index, hash.0);
            stored.push(hash.0);
        }
    }
    crate::rows::tlog_hashes::insert(
        conn,
        group_id,
        tlog_tiles::stored_hash_index(0, n0),
        &stored,
    )?;
    Ok(true)
}

/// The most leaves [`grow`] adds to a tree behind the log in one transaction.
const INLINE_CATCH_UP: u64 = 100_000;

/// Adds the online Events before leaf `n` that the tree lacks, each checked against its
/// chain hash.
fn catch_up_online(conn: &Connection, group_id: &str, n: u64) -> Result<(), Error> {
    let behind =
        |why: String| Error::backend(std::io::Error::other(format!("group {group_id}: {why}")));
    let mut size = size(conn, group_id)?;
    if size >= n || n - size > INLINE_CATCH_UP {
        return Err(behind(format!(
            "the Merkle tree of {size} leaves cannot be caught up to {n} here (restart the server to build it)"
        )));
    }
    let rows = crate::rows::events::after(
        conn,
        group_id,
        size,
        u32::try_from(n - size).unwrap_or(u32::MAX),
    )?;
    // Each Event whole and linked to the one before (the Event the tree ends at).
    let mut prev = Some(hash_of_event(conn, group_id, size)?);
    for row in rows {
        let event = row.into_event()?;
        if event.sequence != size + 1
            || event.computed_hash() != event.hash
            || prev.is_some_and(|prev| prev != event.prev_hash)
        {
            return Err(behind(format!(
                "Event {} does not extend the Merkle tree of {size} leaves (compacted, a gap, or a broken chain)",
                event.sequence
            )));
        }
        prev = Some(event.hash);
        if !extend(conn, group_id, size, &event.canonical_bytes())? {
            return Err(behind(format!(
                "the Merkle tree has a gap below leaf {size}"
            )));
        }
        size += 1;
    }
    if size != n {
        return Err(behind(format!(
            "the online log ends at {size}, before leaf {n}"
        )));
    }
    Ok(())
}

/// The hash of Event `sequence` of `group_id`: the genesis for 0, the online Event's, or the
/// chain hash a snapshot that ends at it states; an error when none holds it (a gap).
pub(crate) fn hash_of_event(
    conn: &Connection,
    group_id: &str,
    sequence: u64,
) -> Result<weft_api::EventHash, Error> {
    if sequence == 0 {
        return Ok(weft_api::EventHash::GENESIS);
    }
    if let Some(hash) = crate::rows::events::hash_at(conn, group_id, sequence)? {
        return Ok(weft_api::EventHash(crate::rows::bytes32(hash)?));
    }
    match crate::rows::snapshots::newest(conn, group_id)? {
        Some((through, hash, _)) if through == sequence => {
            Ok(weft_api::EventHash(crate::rows::bytes32(hash)?))
        }
        _ => Err(Error::backend(std::io::Error::other(format!(
            "group {group_id}: Event {sequence} is neither online nor the end of its newest snapshot"
        )))),
    }
}

/// Adds leaf `n` (0-based) to a tree that holds leaves `0..n`; `false` (and nothing added)
/// when what it is built on, leaf `n − 1` included, is not stored: a gap is never built on.
pub(crate) fn extend(
    conn: &Connection,
    group_id: &str,
    n: u64,
    canonical: &[u8],
) -> Result<bool, Error> {
    // What `stored_hashes` reads: the complete left siblings on the new leaf's path (one per
    // trailing one bit of n), and, to prove there is no gap, leaf n − 1 itself.
    // Each trailing one bit of n completes a subtree with the one to its left (as Go's
    // `StoredHashesForRecordHash` reads them); the first of those is leaf n − 1.
    let completed = (n + 1).trailing_zeros();
    let mut needed: Vec<u64> = (0..completed)
        .map(|i| tlog_tiles::stored_hash_index(i as u8, (n >> i) - 1))
        .collect();
    if n > 0 && completed == 0 {
        needed.push(tlog_tiles::stored_hash_index(0, n - 1));
    }
    let Some(found) = crate::rows::tlog_hashes::read(conn, group_id, &needed)? else {
        return Ok(false);
    };
    let prefetched = Prefetched(needed.into_iter().zip(found).collect());
    let hashes = tlog_tiles::stored_hashes(n, canonical, &prefetched).map_err(|e| {
        Error::backend(std::io::Error::other(format!(
            "group {group_id}: stored hashes of leaf {n}: {e}"
        )))
    })?;
    let hashes: Vec<[u8; 32]> = hashes.into_iter().map(|h| h.0).collect();
    crate::rows::tlog_hashes::insert(conn, group_id, tlog_tiles::stored_hash_index(0, n), &hashes)?;
    Ok(true)
}

/// The hashes [`extend`] read before building a leaf's.
struct Prefetched(std::collections::HashMap<u64, [u8; 32]>);

impl HashReader for Prefetched {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
        indexes
            .iter()
            .map(|index| {
                self.0
                    .get(index)
                    .map(|h| Hash(*h))
                    .ok_or(tlog_tiles::Error::IndexesNotInTree)
            })
            .collect()
    }
}

/// How many leaves Group `group_id`'s tree holds.
pub(crate) fn size(conn: &Connection, group_id: &str) -> Result<u64, Error> {
    let Some(highest) = crate::rows::tlog_hashes::highest(conn, group_id)? else {
        return Ok(0);
    };
    // A tree of n leaves holds stored hashes 0 … stored_hash_count(n) − 1; find that n.
    let (mut low, mut high) = (0u64, highest + 1);
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        if tlog_tiles::stored_hash_count(mid) <= highest + 1 {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    Ok(low)
}

/// The root of the first `size` leaves of Group `group_id`'s tree.
pub(crate) fn root(conn: &Connection, group_id: &str, size: u64) -> Result<[u8; 32], Error> {
    let stored = Stored::new(conn, group_id);
    let root = tlog_tiles::tree_hash(size, &stored);
    Ok(stored.finish(root, "tree hash")?.0)
}

/// The inclusion proof of leaf `index` in the tree of `size` leaves.
pub(crate) fn inclusion(
    conn: &Connection,
    group_id: &str,
    index: u64,
    size: u64,
) -> Result<Vec<[u8; 32]>, Error> {
    let stored = Stored::new(conn, group_id);
    let proof = tlog_tiles::prove_record(size, index, &stored);
    Ok(stored
        .finish(proof, "inclusion proof")?
        .into_iter()
        .map(|h| h.0)
        .collect())
}

/// The consistency proof of the tree of `from` leaves with the tree of `to` leaves.
pub(crate) fn consistency(
    conn: &Connection,
    group_id: &str,
    from: u64,
    to: u64,
) -> Result<Vec<[u8; 32]>, Error> {
    if from == 0 || from == to {
        return Ok(Vec::new());
    }
    let stored = Stored::new(conn, group_id);
    let proof = tlog_tiles::prove_tree(to, from, &stored);
    Ok(stored
        .finish(proof, "consistency proof")?
        .into_iter()
        .map(|h| h.0)
        .collect())
}

/// The bytes of hash tile `tile` (its width × 32), which the caller checked lies within the
/// tree.
pub(crate) fn tile(conn: &Connection, group_id: &str, tile: &Tile) -> Result<Vec<u8>, Error> {
    let stored = Stored::new(conn, group_id);
    let data = tile.read_data(&stored);
    stored.finish(data, "tile")
}

/// Leaves per batch of [`check`].
const CHECK_BATCH: u64 = 4_096;

/// fsck's check of Group `group_id`'s tree against its log, whose head is `head`: the tree
/// holds exactly `head` leaves, every stored hash is the one its leaves give (recomputed in
/// order from the stored leaf hashes, keeping only the right edge in memory), and every
/// online Event's leaf hash is its canonical bytes'. Returns one line per problem.
pub(crate) fn check(conn: &Connection, group_id: &str, head: u64) -> Result<Vec<String>, Error> {
    let mut problems = Vec::new();
    let size = size(conn, group_id)?;
    if size != head {
        problems.push(format!(
            "group {group_id}: the Merkle tree holds {size} leaves, the log {head} Events"
        ));
        return Ok(problems);
    }
    // The right edge: the newest complete node at each level.
    let mut edge: Vec<(u64, [u8; 32])> = Vec::new();
    let mut n = 0;
    while n < size {
        let end = (n + CHECK_BATCH).min(size);
        let stored = crate::rows::tlog_hashes::range(
            conn,
            group_id,
            tlog_tiles::stored_hash_index(0, n),
            tlog_tiles::stored_hash_count(end),
        )?;
        let stored: std::collections::HashMap<u64, [u8; 32]> = stored.into_iter().collect();
        for leaf in n..end {
            let first = tlog_tiles::stored_hash_index(0, leaf);
            let Some(record) = stored.get(&first) else {
                problems.push(format!("group {group_id}: the tree has no leaf {leaf}"));
                return Ok(problems);
            };
            let reader = Prefetched(edge.iter().copied().collect());
            let computed = tlog_tiles::stored_hashes_for_record_hash(leaf, Hash(*record), &reader)
                .map_err(|e| {
                    Error::backend(std::io::Error::other(format!(
                        "group {group_id}: leaf {leaf}: {e}"
                    )))
                })?;
            for (level, hash) in computed.iter().enumerate() {
                let index = first + level as u64;
                if stored.get(&index) != Some(&hash.0) {
                    problems.push(format!(
                        "group {group_id}: stored hash {index} of the Merkle tree is not what its leaves give"
                    ));
                    return Ok(problems);
                }
                let node = tlog_tiles::stored_hash_index(level as u8, leaf >> level);
                match edge.get_mut(level) {
                    Some(slot) => *slot = (node, hash.0),
                    None => edge.push((node, hash.0)),
                }
            }
        }
        // The online Events of this batch: each leaf is its Event's canonical bytes.
        for row in crate::rows::events::after(
            conn,
            group_id,
            n,
            u32::try_from(end - n).unwrap_or(u32::MAX),
        )? {
            if row.sequence > end {
                break;
            }
            let event = row.into_event()?;
            let leaf = event.sequence - 1;
            let stored_leaf = stored.get(&tlog_tiles::stored_hash_index(0, leaf));
            if stored_leaf != Some(&weft_api::tlog::leaf_hash(&event.canonical_bytes())) {
                problems.push(format!(
                    "group {group_id}: leaf {leaf} of the Merkle tree is not Event {}'s",
                    event.sequence
                ));
                return Ok(problems);
            }
        }
        n = end;
    }
    Ok(problems)
}
