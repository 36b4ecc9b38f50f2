//! Verified ranges in O(range) (issue #15): a Range read of a blob with an outboard reads
//! only the 16 KiB chunk groups that cover the range and the parent hashes on their path,
//! and verifies them against the blob's address from the index before a byte goes out.
//!
//! ART-5 here is per byte served: a range verifies the chunk groups it returns (and their
//! path to the root), not the rest of the blob, so a flipped byte outside the range is found
//! by the next read that covers it, a full read, verify-now or fsck.
//!
//! Any failure of the fast path (no outboard, an outboard that does not verify, bytes that
//! do not) falls back to the full re-hash of `reads.rs` for what is left of the range, which
//! serves only verified bytes and quarantines a corrupt blob. An outboard that failed is
//! deleted; a missing or deleted one is rebuilt in the background from a full read, and
//! stored only if its root is the blob's address.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use weft_api::bao::{GROUP_BYTES, chunk_ranges, tree};
use weft_api::{ArtifactId, Digests};

use crate::engine::Engine;
use crate::error::Error;
use crate::outboard::{Builder, Partial, Window, plan};

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
            engine.check_stored_size(digests, None).await?;
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
        match engine.raw_bytes(&digests).await {
            Ok(raw) => super::reads::verified_stream(engine, raw, digests, range, verified_by),
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
        Checked::NoOutboard => rebuild_in_background(Arc::clone(engine), digests),
        Checked::Failed(reason) => {
            tracing::warn!(artifact = %digests.blake3, %reason, "outboard verification failed; re-hashing the whole blob");
            metrics::counter!("weft_outboard_failures_total").increment(1);
            engine.blobs.remove_outboard(&digests.blake3).await?;
            rebuild_in_background(Arc::clone(engine), digests);
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

/// A proof of `range`, in pieces: for a blob with an outboard, window by window through it
/// (`proofs.rs`), once the first window has verified; else, or when that failed, built from
/// a full read that checks the root first (a small blob's proof in memory; a large blob's
/// outboard stored, then window by window through it).
pub(crate) async fn proof(
    engine: &Arc<Engine>,
    digests: Digests,
    range: Range<u64>,
) -> Result<BoxStream<'static, Result<Bytes, Error>>, Error> {
    if digests.size >= OUTBOARD_MIN {
        match super::proofs::stream(Arc::clone(engine), digests, range.clone()).await? {
            Ok(stream) => return Ok(stream),
            // Rebuilt below, from the same full read that checks the root.
            Err(Checked::NoOutboard | Checked::Verified(..)) => {}
            Err(Checked::Failed(reason)) => {
                tracing::warn!(artifact = %digests.blake3, %reason, "outboard verification failed; re-hashing the whole blob");
                metrics::counter!("weft_outboard_failures_total").increment(1);
                engine.blobs.remove_outboard(&digests.blake3).await?;
            }
        }
    }
    // No usable outboard: the proof is built from the whole blob, which is verified first.
    let (root, outboard, data) = build(engine, &digests, digests.size < OUTBOARD_MIN).await?;
    if root != digests.blake3.0 {
        engine
            .quarantine(digests.blake3, "stored bytes do not hash to their address")
            .await?;
        return Err(Error::Corrupt(digests.blake3));
    }
    let Some(data) = data else {
        // A large blob: its outboard is now stored; answer through it.
        engine.blobs.put_outboard(&digests.blake3, outboard).await?;
        return match super::proofs::stream(Arc::clone(engine), digests, range).await? {
            Ok(stream) => Ok(stream),
            // Removed again meanwhile by a request that found it wrong.
            Err(Checked::NoOutboard) => Err(super::proofs::outboard_gone()),
            Err(_) => Err(Error::Corrupt(digests.blake3)),
        };
    };
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

/// Reads a whole blob and computes its root and outboard off the async threads; keeps the
/// bytes too when `keep` (small blobs).
async fn build(
    engine: &Engine,
    digests: &Digests,
    keep: bool,
) -> Result<([u8; 32], Vec<u8>, Option<Vec<u8>>), Error> {
    let mut raw = engine.raw_bytes(digests).await?;
    let (sender, mut receiver) = tokio::sync::mpsc::channel::<Bytes>(2);
    let task = tokio::task::spawn_blocking(move || {
        let mut builder = Builder::default();
        let mut kept = keep.then(Vec::new);
        while let Some(batch) = receiver.blocking_recv() {
            builder.update(&batch);
            if let Some(kept) = kept.as_mut() {
                kept.extend_from_slice(&batch);
            }
        }
        let (root, outboard) = builder.finish();
        (root, outboard, kept)
    });
    while let Some(chunk) = raw.next().await {
        if sender.send(chunk?).await.is_err() {
            break;
        }
    }
    drop(sender);
    task.await.map_err(Error::backend)
}

/// Rebuilds the outboard of `digests` into the spill file as it reads the blob (memory stays
/// at one buffer, whatever the size), and puts it in place if its root is the address:
/// `Ok(false)` (and the file removed) if not.
async fn build_spilled(
    engine: &Engine,
    digests: &Digests,
    (path, file, faults): (std::path::PathBuf, std::fs::File, crate::faults::Faults),
) -> Result<bool, Error> {
    // Removes the spill file on every way out but its placing.
    struct Leftover(Option<std::path::PathBuf>);
    impl Drop for Leftover {
        fn drop(&mut self) {
            if let Some(path) = self.0.take() {
                let _ = std::fs::remove_file(path);
            }
        }
    }
    let mut leftover = Leftover(Some(path.clone()));
    let mut raw = engine.raw_bytes(digests).await?;
    let (sender, mut receiver) = tokio::sync::mpsc::channel::<Bytes>(2);
    let task = tokio::task::spawn_blocking(move || {
        let mut builder = Builder::spilling(file, faults);
        while let Some(batch) = receiver.blocking_recv() {
            builder.update(&batch);
        }
        builder.finish_spilled()
    });
    while let Some(chunk) = raw.next().await {
        if sender.send(chunk?).await.is_err() {
            break;
        }
    }
    drop(sender);
    let (root, _) = task
        .await
        .map_err(Error::backend)?
        .map_err(Error::backend)?;
    if root != digests.blake3.0 {
        return Ok(false);
    }
    let id = digests.blake3;
    leftover.0 = None;
    engine.blobs.place_spilled_outboard(&id, &path)?;
    Ok(true)
}

/// Rebuilds a missing outboard from a full read, once per blob at a time; stores it only if
/// its root is the blob's address, and quarantines the blob if it is not.
pub(crate) fn rebuild_in_background(engine: Arc<Engine>, digests: Digests) {
    let id: ArtifactId = digests.blake3;
    match engine.rebuilding.lock() {
        Ok(mut rebuilding) => {
            if !rebuilding.insert(id) {
                return;
            }
        }
        Err(_) => return,
    }
    tokio::spawn(async move {
        let rebuilt = match engine.blobs.rebuild_spill(&id) {
            Some(spill) => match spill {
                Ok(spill) => build_spilled(&engine, &digests, spill).await,
                Err(error) => Err(Error::backend(error)),
            },
            None => match build(&engine, &digests, false).await {
                Ok((root, outboard, _)) if root == id.0 => engine
                    .blobs
                    .put_outboard(&id, outboard)
                    .await
                    .map(|()| true),
                Ok(_) => Ok(false),
                Err(error) => Err(error),
            },
        };
        match rebuilt {
            Ok(true) => tracing::info!(artifact = %id, "outboard rebuilt"),
            // The whole blob was just re-hashed and is not what its address says (ART-5).
            Ok(false) => {
                tracing::warn!(artifact = %id, "not rebuilding the outboard of bytes that do not hash to their address; quarantining them");
                if let Err(error) = engine
                    .quarantine(id, "stored bytes do not hash to their address")
                    .await
                {
                    tracing::warn!(artifact = %id, %error, "could not quarantine");
                }
            }
            Err(error) => tracing::warn!(artifact = %id, %error, "could not rebuild an outboard"),
        }
        if let Ok(mut rebuilding) = engine.rebuilding.lock() {
            rebuilding.remove(&id);
        }
    });
}
