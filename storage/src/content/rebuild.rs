//! Outboard rebuilds (issue #15): a blob of `ranges::OUTBOARD_MIN` bytes or more whose
//! outboard is missing, or was deleted because it did not verify, gets a new one from a full
//! read of its bytes, stored only if the root of that read is the blob's address; if it is
//! not, the bytes are not what their address says and the blob is quarantined (ART-5).
//!
//! One rebuild runs per blob at a time, and every request that needs it shares it: a Range
//! read starts it and goes on through the full re-hash, a proof waits for it and then answers
//! through the new outboard (the rebuilds under way are the engine's, `engine/rebuilds.rs`). On
//! the local backend it spills the outboard to a file as it is
//! built, so memory stays at one buffer whatever the blob's size and however many requests
//! wait (without the sharing, each proof of a large blob without an outboard re-hashed the
//! whole blob in its request and held its outboard in memory, 4 MiB per GiB).

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt as _;
use weft_api::{ArtifactId, Digests};

use crate::engine::Engine;
use crate::engine::rebuilds::{Outcome, Rebuilt};
use crate::error::Error;
use crate::outboard::Builder;

/// The rebuild of `digests`' outboard: the one under way, or a new one. It runs as a task of
/// its own whether or not the returned future is awaited.
pub(crate) fn rebuild(engine: &Arc<Engine>, digests: Digests) -> Outcome {
    let engine = Arc::clone(engine);
    engine
        .rebuilds
        .clone()
        .run(digests.blake3, move || async move {
            rebuild_now(&engine, digests).await
        })
}

/// Starts (or leaves running) the rebuild of `digests`' outboard, without waiting for it.
pub(crate) fn rebuild_in_background(engine: &Arc<Engine>, digests: Digests) {
    drop(rebuild(engine, digests));
}

/// One rebuild, start to end: the outboard placed, or the blob quarantined.
async fn rebuild_now(engine: &Engine, digests: Digests) -> Rebuilt {
    let id: ArtifactId = digests.blake3;
    let seen = engine.repairs.seen(engine.clock.now());
    // One placed since its need was seen (a rebuild that just ended): every path that found
    // an outboard wrong removed it before asking for a rebuild.
    if engine.blobs.has_outboard(&id).await? {
        return Ok(true);
    }
    metrics::counter!("weft_outboard_rebuilds_total").increment(1);
    let rebuilt = match engine.blobs.rebuild_spill(&id) {
        Some(Ok(spill)) => build_spilled(engine, &digests, spill).await,
        Some(Err(error)) => Err(Error::backend(error)),
        // Off the local backend (in memory): the outboard is built in memory, once.
        None => match build(engine, &digests, false).await {
            Ok((root, outboard, _)) if root == id.0 => match still_stored(engine, id).await? {
                Some(_not_swept) => engine
                    .blobs
                    .put_outboard(&id, outboard)
                    .await
                    .map(|()| true),
                None => Ok(true),
            },
            Ok(_) => Ok(false),
            Err(error) => Err(error),
        },
    };
    match &rebuilt {
        Ok(true) => tracing::info!(artifact = %id, "outboard rebuilt"),
        // The whole blob was just re-hashed and is not what its address says (ART-5).
        Ok(false) => {
            tracing::warn!(artifact = %id, "not rebuilding the outboard of bytes that do not hash to their address; quarantining them");
            engine
                .quarantine(id, "stored bytes do not hash to their address", seen)
                .await?;
        }
        Err(error) => tracing::warn!(artifact = %id, %error, "could not rebuild an outboard"),
    }
    rebuilt
}

/// Reads a whole blob and computes its root and outboard off the async threads; keeps the
/// bytes too when `keep` (small blobs).
pub(super) async fn build(
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
    let mut leftover = crate::blobs::SpillGuard(Some(path.clone()));
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
    let Some(_not_swept) = still_stored(engine, id).await? else {
        return Ok(true); // `leftover` removes the spill file
    };
    leftover.0 = None;
    engine.blobs.place_spilled_outboard(&id, &path)?;
    Ok(true)
}

/// The sweep's shared guard if `id` still has its row: an outboard is placed only under it,
/// so none outlives a blob the sweep removed while the rebuild read it (the sweep takes the
/// guard exclusively, and removes rows before objects).
async fn still_stored(
    engine: &Engine,
    id: ArtifactId,
) -> Result<Option<tokio::sync::RwLockReadGuard<'_, ()>>, Error> {
    let guard = engine.sweep_lock.read().await;
    let stored = engine
        .db
        .read(move |conn| {
            Ok(crate::rows::blobs::row(conn, &weft_api::Digest::Blake3(id))?.is_some())
        })
        .await?;
    Ok(stored.then_some(guard))
}
