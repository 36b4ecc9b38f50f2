//! Proofs of any length, streamed (issue #15): the bao encoding of a range of a blob with an
//! outboard goes out window by window, each window verified and encoded by `ranges::check`
//! as a Range read's are (the chunk groups it covers and the hash pairs on their paths, read
//! and checked against the blob's address from the index), so memory stays flat with the
//! range: the next window is read only when the connection takes the last one, and a slow
//! reader holds one window of [`WINDOW`] bytes and no thread. Windows are small because of
//! that; each costs only a re-read of the twenty-odd hash pairs on its path to the root.
//!
//! Windows end on chunk-group boundaries. The encoding of a range is the pre-order walk of
//! the tree restricted to it, so the encoding of two adjacent ranges is the first range's
//! followed by the second's without the parents it shares with the first: those are the
//! nodes that start before the second range does, which the first one's walk already wrote,
//! and which pre-order puts before every node that starts at or after it: a prefix of the
//! second range's encoding. Each later window's encoding is trimmed of it
//! ([`trim_shared_parents`]); the tests compare the result with bao-tree's encoding of the
//! whole range.
//!
//! ART-5: every hash pair and chunk group is checked before its window goes out. The first
//! window is checked before the answer, so a missing or wrong outboard at the start is
//! rebuilt first ([`proof`]); a failure in a later window ends the body with an error
//! (the connection is cut, unlike a Range read, which goes on through the full re-hash) and
//! deletes and rebuilds the outboard, and the rebuild quarantines the blob if its bytes do
//! not hash to the address.

use std::ops::Range;
use std::sync::Arc;

use bao_tree::BaoTree;
use bao_tree::iter::BaoChunk;
use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use weft_api::Digests;
use weft_api::bao::{GROUP_BYTES, chunk_ranges, tree};

use super::ranges::{Checked, OUTBOARD_MIN, Walk, check, fall_back};
use super::rebuild::{build, rebuild};
use crate::engine::Engine;
use crate::error::{Error, reject};

/// Bytes of the range verified and encoded per window: sixteen chunk groups.
const WINDOW: u64 = 256 * 1024;

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
        Checked::Verified(_, Some(encoded)) => encoded,
        other => return Ok(Err(other)),
    };
    let end = range.end;
    let state = Walk {
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
                trim_shared_parents(&tree(digests.size), &window, encoded)
            }
            // Another request found the outboard wrong and removed it meanwhile: the bytes
            // may be fine, and the rebuild is under way.
            Ok(Checked::NoOutboard) => Err(outboard_gone()),
            Ok(checked) => {
                tracing::warn!(artifact = %digests.blake3, at = window.start, "a proof's window did not verify; cutting it");
                match fall_back(&state.engine, digests, checked).await {
                    Ok(()) => Err(Error::Corrupt(digests.blake3)),
                    Err(error) => Err(error),
                }
            }
            Err(error) => Err(error),
        };
        // An error ends the answer: nothing comes after it.
        state.done = item.is_err();
        Some((item, state))
    });
    Ok(Ok(futures::stream::once(async move { Ok(encoded) })
        .chain(rest)
        .boxed()))
}

/// A proof of `range`, in pieces: for a blob with an outboard, window by window through it
/// (`stream`), once the first window has verified; for a large blob without a usable one,
/// the same once the blob's one rebuild (`rebuild.rs`), which re-hashes it whole first, has
/// put a new one in place; a small blob's, built in memory from a full read that checks the
/// root first.
pub(crate) async fn proof(
    engine: &Arc<Engine>,
    digests: Digests,
    range: Range<u64>,
) -> Result<BoxStream<'static, Result<Bytes, Error>>, Error> {
    if digests.size >= OUTBOARD_MIN {
        match stream(Arc::clone(engine), digests, range.clone()).await? {
            Ok(stream) => return Ok(stream),
            Err(Checked::NoOutboard | Checked::Verified(..)) => {}
            Err(Checked::Failed(reason)) => {
                tracing::warn!(artifact = %digests.blake3, %reason, "outboard verification failed; re-hashing the whole blob");
                metrics::counter!("weft_outboard_failures_total").increment(1);
                engine.blobs.remove_outboard(&digests.blake3).await?;
            }
        }
        // Shared with every other request that needs it: one full read, flat memory. Twice
        // at most: a request that found the old outboard wrong may remove the new one just
        // after the rebuild put it in place.
        let mut again = true;
        loop {
            if !rebuild(engine, digests).await? {
                // The rebuild quarantined the blob.
                return Err(Error::Corrupt(digests.blake3));
            }
            match stream(Arc::clone(engine), digests, range.clone()).await? {
                Ok(stream) => return Ok(stream),
                Err(Checked::NoOutboard) if again => again = false,
                Err(Checked::NoOutboard) => return Err(outboard_gone()),
                Err(_) => return Err(Error::Corrupt(digests.blake3)),
            }
        }
    }
    // A small blob: its proof is built from the whole blob, which is verified first.
    let seen = engine.repairs.seen(engine.clock.now());
    let (root, _, data) = build(engine, &digests, true).await?;
    if root != digests.blake3.0 {
        engine
            .quarantine(
                digests.blake3,
                "stored bytes do not hash to their address",
                seen,
            )
            .await?;
        return Err(Error::Corrupt(digests.blake3));
    }
    let data = data.unwrap_or_default();
    let proof = tokio::task::spawn_blocking(move || {
        let outboard =
            bao_tree::io::outboard::PreOrderMemOutboard::create(&data, weft_api::bao::BLOCK_SIZE);
        let mut proof = Vec::new();
        bao_tree::io::sync::encode_ranges_validated(
            &data[..],
            &outboard,
            &chunk_ranges(&range),
            &mut proof,
        )
        .map_err(Error::backend)?;
        Ok::<_, Error>(proof)
    })
    .await
    .map_err(Error::backend)??;
    Ok(futures::stream::once(async move { Ok(Bytes::from(proof)) }).boxed())
}

/// What a proof answers when its blob's outboard went away while it was read.
pub(crate) fn outboard_gone() -> Error {
    reject(
        weft_api::ErrorCode::StorageUnavailable,
        "the blob's outboard is being rebuilt; ask again shortly",
    )
}

/// The encoding of `window` (a later window: it starts on a chunk-group boundary) without
/// the parents an earlier window's encoding wrote: those whose subtree starts before it,
/// which pre-order puts first.
pub(crate) fn trim_shared_parents(
    tree: &BaoTree,
    window: &Range<u64>,
    encoded: Bytes,
) -> Result<Bytes, Error> {
    let shared = tree
        .ranges_pre_order_chunks_iter_ref(&chunk_ranges(window), 0)
        .take_while(|item| match item {
            BaoChunk::Parent { node, .. } => node.chunk_range().start.to_bytes() < window.start,
            BaoChunk::Leaf { .. } => false,
        })
        .count();
    let cut = shared * 64;
    if cut > encoded.len() {
        return Err(Error::backend(std::io::Error::other(format!(
            "a window's encoding of {} bytes has no {shared} leading parents",
            encoded.len()
        ))));
    }
    Ok(encoded.slice(cut..))
}
