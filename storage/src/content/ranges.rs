//! Verified ranges in O(range) (issue #15): a Range read of a blob with an outboard reads
//! only the 16 KiB chunk groups that cover the range and the parent hashes on their path,
//! and verifies them against the blob's address from the index before a byte goes out.
//!
//! ART-5 here is per byte served: a range verifies the chunk groups it returns (and their
//! path to the root), not the rest of the blob, so a flipped byte outside the range is found
//! by the next read that covers it, a full read, verify-now or fsck.
//!
//! Any failure of the fast path (no outboard, an outboard that does not verify, bytes that
//! do not) falls back to the full re-hash of `stored.rs` for what is left of the range, which
//! serves only verified bytes and quarantines a corrupt blob. An outboard that failed is
//! deleted; a missing or deleted one is rebuilt in the background from a full read, and
//! stored only if its root is the blob's address.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use weft_api::Digests;
use weft_api::bao::{GROUP_BYTES, chunk_ranges, tree};

use super::rebuild::rebuild_in_background;
use crate::engine::Engine;
use crate::error::Error;
use crate::outboard::{Partial, Window, plan};

/// Blobs at least this long have an outboard (those that went through the hasher tasks).
pub(crate) const OUTBOARD_MIN: u64 = crate::hashing::BATCH as u64;
/// Bytes verified and held per step of a long range: memory stays flat with the range.
const WINDOW: u64 = 4 * 1024 * 1024;

/// What one window's fast path found.
pub(crate) enum Checked {
    /// The exact bytes of the range, verified; and the proof when asked for.
    Verified(Bytes, Option<Bytes>),
    /// The blob has no outboard.
    NoOutboard,
    /// The outboard or the bytes did not verify against the address.
    Failed(String),
}

/// Verifies `range` of a blob through its outboard, reading only what the range needs.
pub(crate) async fn check(
    engine: &Engine,
    digests: &Digests,
    range: Range<u64>,
    with_proof: bool,
) -> Result<Checked, Error> {
    let seen = engine.repairs.seen(engine.clock.now());
    let tree = tree(digests.size);
    let ranges = chunk_ranges(&range);
    let (nodes, span) = plan(&tree, &ranges);
    let offsets: Vec<Range<u64>> = nodes.iter().map(|(_, at)| *at..*at + 64).collect();
    let pairs = match engine
        .blobs
        .outboard_ranges(&digests.blake3, &offsets)
        .await
    {
        Ok(Some(pairs)) => pairs,
        Ok(None) => return Ok(Checked::NoOutboard),
        // A short or unreadable outboard: the full re-hash decides.
        Err(error) => return Ok(Checked::Failed(error.to_string())),
    };
    let data = match engine.blobs.read_range(&digests.blake3, span.clone()).await {
        Ok(data) => data,
        // A read that fails on a blob whose stored size is not its row's: corrupt, as a full
        // read would find; any other failure to read is the answer.
        Err(error) => {
            engine.check_stored_size(digests, None, seen).await?;
            return Err(error);
        }
    };
    let root = blake3::Hash::from_bytes(digests.blake3.0);
    tokio::task::spawn_blocking(move || {
        let mut partial = Partial {
            root,
            tree,
            pairs: Default::default(),
        };
        for ((node, _), pair) in nodes.iter().zip(&pairs) {
            if let Err(error) = partial.insert(*node, pair) {
                return Checked::Failed(error.to_string());
            }
        }
        let window = Window {
            base: span.start,
            bytes: data,
        };
        // The range's bytes and a pair per node: the proof's length, so it is not regrown.
        let mut proof = Vec::with_capacity(if with_proof {
            (span.end - span.start) as usize + 64 * nodes.len()
        } else {
            0
        });
        let encoded = if with_proof {
            bao_tree::io::sync::encode_ranges_validated(&window, &partial, &ranges, &mut proof)
        } else {
            bao_tree::io::sync::encode_ranges_validated(&window, &partial, &ranges, std::io::sink())
        };
        match encoded {
            Ok(()) => {
                let from = (range.start - span.start) as usize;
                let to = (range.end - span.start) as usize;
                let bytes = window.bytes.slice(from..to);
                Checked::Verified(bytes, with_proof.then(|| Bytes::from(proof)))
            }
            Err(error) => Checked::Failed(error.to_string()),
        }
    })
    .await
    .map_err(Error::backend)
}

/// The full re-hash for `range` (opens the blob lazily).
pub(crate) fn full_read(
    engine: Arc<Engine>,
    digests: Digests,
    range: Range<u64>,
    verified_by: Option<String>,
) -> BoxStream<'static, Result<Bytes, Error>> {
    futures::stream::once(async move {
        let seen = engine.repairs.seen(engine.clock.now());
        match engine.hashed_bytes(&digests).await {
            Ok(raw) => {
                super::stored::verified_stream(engine, raw, digests, range, verified_by, seen)
            }
            Err(error) => futures::stream::once(async move { Err(error) }).boxed(),
        }
    })
    .flatten()
    .boxed()
}

/// What a failed or missing outboard leads to: the full re-hash of the rest of the range,
/// after deleting a bad outboard or starting the rebuild of a missing one.
pub(crate) async fn fall_back(
    engine: &Arc<Engine>,
    digests: Digests,
    checked: Checked,
) -> Result<(), Error> {
    match checked {
        Checked::NoOutboard => rebuild_in_background(engine, digests),
        Checked::Failed(reason) => {
            tracing::warn!(artifact = %digests.blake3, %reason, "outboard verification failed; re-hashing the whole blob");
            metrics::counter!("weft_outboard_failures_total").increment(1);
            engine.blobs.remove_outboard(&digests.blake3).await?;
            rebuild_in_background(engine, digests);
        }
        Checked::Verified(..) => {}
    }
    Ok(())
}

/// Where a window-by-window read stands: the next window's start, and whether an error
/// ended it (here and in `proofs.rs`).
pub(crate) struct Walk {
    pub(crate) engine: Arc<Engine>,
    pub(crate) next: u64,
    pub(crate) done: bool,
}

/// The bytes of `range` of a blob with at least [`OUTBOARD_MIN`] bytes, verified window by
/// window through its outboard (see the module docs for the fallback).
pub(crate) fn ranged_stream(
    engine: Arc<Engine>,
    digests: Digests,
    range: Range<u64>,
) -> BoxStream<'static, Result<Bytes, Error>> {
    let end = range.end;
    let state = Walk {
        engine,
        next: range.start,
        done: false,
    };
    futures::stream::unfold(state, move |mut state| async move {
        if state.done || state.next >= end {
            return None;
        }
        // Windows end on chunk-group boundaries, so no group is read twice.
        let aligned = (state.next + WINDOW) / GROUP_BYTES * GROUP_BYTES;
        let window = state.next..aligned.min(end);
        let engine = Arc::clone(&state.engine);
        let item = match check(&engine, &digests, window.clone(), false).await {
            Ok(Checked::Verified(bytes, _)) => {
                state.next = window.end;
                futures::stream::once(async move { Ok(bytes) }).boxed()
            }
            Ok(checked) => {
                state.done = true;
                match fall_back(&engine, digests, checked).await {
                    Ok(()) => full_read(engine, digests, state.next..end, None),
                    Err(error) => futures::stream::once(async move { Err(error) }).boxed(),
                }
            }
            Err(error) => {
                state.done = true;
                futures::stream::once(async move { Err(error) }).boxed()
            }
        };
        Some((item, state))
    })
    .flatten()
    .boxed()
}
