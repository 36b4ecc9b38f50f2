//! Proofs of any length, streamed (issue #15): the bao encoding of a range of a blob with an
//! outboard goes out window by window, each window verified and encoded by `ranges::check`
//! as a Range read's are (the chunk groups it covers and the hash pairs on their paths, read
//! and checked against the blob's address from the index), so memory stays flat with the
//! range and nothing is held while the reader is slow: the next window is read only when
//! the connection asks for it.
//!
//! Windows end on chunk-group boundaries. The encoding of a range is the pre-order walk of
//! the tree restricted to it, so the encoding of two adjacent ranges is the first range's
//! followed by the second's without the parents it shares with the first: those are the
//! nodes that start before the second range does, which the first one's walk already wrote,
//! in the same place. Each later window's encoding is trimmed of them
//! ([`trim_shared_parents`]); the tests compare the result with bao-tree's encoding of the
//! whole range.
//!
//! ART-5: every hash pair and chunk group is checked before its window goes out. The first
//! window is checked before the answer, so a missing or wrong outboard at the start is
//! rebuilt first (`ranges::proof`); a failure in a later window ends the body with an error
//! (the connection is cut, as for a GET) and deletes and rebuilds the outboard, and the
//! rebuild quarantines the blob if its bytes do not hash to the address.

use std::ops::Range;
use std::sync::Arc;

use bao_tree::BaoTree;
use bao_tree::iter::BaoChunk;
use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use weft_api::Digests;
use weft_api::bao::{GROUP_BYTES, chunk_ranges, tree};

use super::ranges::{Checked, WINDOW, check, fall_back};
use crate::engine::Engine;
use crate::error::Error;

/// The end of the window that starts at `start` (on a chunk-group boundary, or at the range's
/// start for the first) within a range ending at `end`.
fn window_end(start: u64, end: u64) -> u64 {
    ((start + WINDOW) / GROUP_BYTES * GROUP_BYTES).min(end)
}

/// The proof of `range` of a blob with an outboard, as a stream of windows' encodings; or,
/// when the first window does not verify through the outboard, what `check` found, before
/// anything is answered.
pub(crate) async fn stream(
    engine: Arc<Engine>,
    digests: Digests,
    range: Range<u64>,
) -> Result<Result<BoxStream<'static, Result<Bytes, Error>>, Checked>, Error> {
    let first = range.start..window_end(range.start, range.end);
    let encoded = match check(&engine, &digests, first.clone(), true).await? {
        Checked::Verified(_, Some(encoded)) => Bytes::from(encoded),
        other => return Ok(Err(other)),
    };
    struct State {
        engine: Arc<Engine>,
        next: u64,
        done: bool,
    }
    let end = range.end;
    let state = State {
        engine,
        next: first.end,
        done: false,
    };
    let rest = futures::stream::unfold(state, move |mut state| async move {
        if state.done || state.next >= end {
            return None;
        }
        let window = state.next..window_end(state.next, end);
        let checked = check(&state.engine, &digests, window.clone(), true).await;
        let item = match checked {
            Ok(Checked::Verified(_, Some(encoded))) => {
                state.next = window.end;
                Ok(trim_shared_parents(&tree(digests.size), &window, encoded))
            }
            Ok(checked) => {
                state.done = true;
                tracing::warn!(artifact = %digests.blake3, at = window.start, "a proof's window did not verify; cutting it");
                match fall_back(&state.engine, digests, checked).await {
                    Ok(()) => Err(Error::Corrupt(digests.blake3)),
                    Err(error) => Err(error),
                }
            }
            Err(error) => {
                state.done = true;
                Err(error)
            }
        };
        Some((item, state))
    });
    Ok(Ok(futures::stream::once(async move { Ok(encoded) })
        .chain(rest)
        .boxed()))
}

/// The encoding of `window` (a later window: it starts on a chunk-group boundary) without
/// the parents an earlier window's encoding wrote: those whose subtree starts before it.
/// Parents are 64 bytes; every chunk group of a later window is whole except perhaps the
/// range's last, which ends the encoding.
pub(crate) fn trim_shared_parents(tree: &BaoTree, window: &Range<u64>, encoded: Vec<u8>) -> Bytes {
    let mut kept = Vec::with_capacity(encoded.len());
    let mut at = 0usize;
    for item in tree.ranges_pre_order_chunks_iter_ref(&chunk_ranges(window), 0) {
        match item {
            BaoChunk::Parent { node, .. } => {
                let pair = encoded.get(at..at + 64).unwrap_or_default();
                if node.chunk_range().start.to_bytes() >= window.start {
                    kept.extend_from_slice(pair);
                }
                at += 64;
            }
            BaoChunk::Leaf { size, ranges, .. } if ranges.is_all() => {
                kept.extend_from_slice(encoded.get(at..at + size).unwrap_or_default());
                at += size;
            }
            // A partly covered group: the range's last, whose encoding runs to the end.
            BaoChunk::Leaf { .. } => {
                kept.extend_from_slice(encoded.get(at..).unwrap_or_default());
                at = encoded.len();
            }
        }
    }
    Bytes::from(kept)
}
