//! Outboard rebuilds (issue #15): a blob of [`OUTBOARD_MIN`] bytes or more whose outboard is
//! missing, or was deleted because it did not verify, gets a new one from a full read of its
//! bytes, stored only if the root of that read is the blob's address; if it is not, the bytes
//! are not what their address says and the blob is quarantined (ART-5).
//!
//! One rebuild runs per blob at a time, and every request that needs it shares it: a Range
//! read starts it and goes on through the full re-hash, a proof waits for it and then answers
//! through the new outboard. The rebuild runs as its own task, so a request that goes away
//! does not stop it, and on the local backend it spills the outboard to a file as it is
//! built, so memory stays at one buffer whatever the blob's size and however many requests
//! wait (without the sharing, each proof of a large blob without an outboard re-hashed the
//! whole blob in its request and held its outboard in memory, 4 MiB per GiB).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::FutureExt as _;
use futures::StreamExt as _;
use futures::future::{BoxFuture, Shared};
use weft_api::{ArtifactId, Digests};

use crate::engine::Engine;
use crate::error::Error;
use crate::outboard::Builder;

#[cfg(doc)]
use super::ranges::OUTBOARD_MIN;

/// What a rebuild came to: `Ok(true)`, the outboard is in place; `Ok(false)`, the bytes do not
/// hash to their address and the blob is quarantined; or why it could not be done.
type Rebuilt = Result<bool, Error>;

/// The rebuilds under way, by blob: each one's outcome, shared by everyone waiting for it.
#[derive(Default)]
pub(crate) struct Rebuilds(Mutex<HashMap<ArtifactId, Shared<BoxFuture<'static, Rebuilt>>>>);

impl std::fmt::Debug for Rebuilds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let under_way = self.0.lock().map(|map| map.len()).unwrap_or(0);
        f.debug_struct("Rebuilds")
            .field("under_way", &under_way)
            .finish()
    }
}

impl Rebuilds {
    /// The rebuild of `id` under way, or the one `start` begins: `start` runs only if none is.
    fn join(
        &self,
        id: ArtifactId,
        start: impl FnOnce() -> BoxFuture<'static, Rebuilt>,
    ) -> Shared<BoxFuture<'static, Rebuilt>> {
        let mut under_way = self.0.lock().unwrap_or_else(|p| p.into_inner());
        under_way
            .entry(id)
            .or_insert_with(|| start().shared())
            .clone()
    }

    /// Forgets the rebuild of `id` once it has ended, so a later need starts a new one.
    fn ended(&self, id: &ArtifactId) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }
}

/// The rebuild of `digests`' outboard: the one under way, or a new one. It runs as a task of
/// its own whether or not the returned future is awaited.
pub(crate) fn rebuild(
    engine: &Arc<Engine>,
    digests: Digests,
) -> Shared<BoxFuture<'static, Rebuilt>> {
    let id = digests.blake3;
    engine.rebuilds.join(id, || {
        let engine = Arc::clone(engine);
        let task = tokio::spawn(async move {
            let rebuilt = rebuild_now(&engine, digests).await;
            engine.rebuilds.ended(&id);
            rebuilt
        });
        async move {
            task.await.unwrap_or_else(|panicked| {
                Err(Error::backend(std::io::Error::other(panicked.to_string())))
            })
        }
        .boxed()
    })
}

/// Starts (or leaves running) the rebuild of `digests`' outboard, without waiting for it.
pub(crate) fn rebuild_in_background(engine: &Arc<Engine>, digests: Digests) {
    drop(rebuild(engine, digests));
}

/// One rebuild, start to end: the outboard placed, or the blob quarantined.
async fn rebuild_now(engine: &Engine, digests: Digests) -> Rebuilt {
    let id: ArtifactId = digests.blake3;
    metrics::counter!("weft_outboard_rebuilds_total").increment(1);
    let rebuilt = match engine.blobs.rebuild_spill(&id) {
        Some(Ok(spill)) => build_spilled(engine, &digests, spill).await,
        Some(Err(error)) => Err(Error::backend(error)),
        // Off the local backend (in memory): the outboard is built in memory, once.
        None => match build(engine, &digests, false).await {
            Ok((root, outboard, _)) if root == id.0 => engine
                .blobs
                .put_outboard(&id, outboard)
                .await
                .map(|()| true),
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
                .quarantine(id, "stored bytes do not hash to their address")
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Everyone who needs a blob's outboard while its rebuild runs waits for that one rebuild
    /// and hears its outcome; once it has ended, the next need starts a new one.
    #[tokio::test]
    async fn one_rebuild_per_blob_at_a_time_shared_by_everyone_waiting() {
        let rebuilds = Rebuilds::default();
        let (id, other) = (ArtifactId([7; 32]), ArtifactId([8; 32]));
        let started = AtomicUsize::new(0);
        let (release, gate) = tokio::sync::oneshot::channel::<()>();
        let gate = gate.shared();
        let start = || {
            started.fetch_add(1, Ordering::SeqCst);
            let gate = gate.clone();
            async move {
                let _ = gate.await;
                Ok(true)
            }
            .boxed()
        };
        let first = rebuilds.join(id, start);
        let second = rebuilds.join(id, start);
        assert_eq!(
            started.load(Ordering::SeqCst),
            1,
            "one rebuild for two waiters"
        );
        let elsewhere = rebuilds.join(other, || async { Ok(false) }.boxed());
        assert_eq!(
            started.load(Ordering::SeqCst),
            1,
            "another blob's is its own"
        );
        assert!(matches!(elsewhere.await, Ok(false)));
        release.send(()).expect("still waiting");
        assert!(matches!(first.await, Ok(true)));
        assert!(matches!(second.await, Ok(true)));
        rebuilds.ended(&id);
        let again = rebuilds.join(id, start);
        assert_eq!(
            started.load(Ordering::SeqCst),
            2,
            "a new need, a new rebuild"
        );
        assert!(matches!(again.await, Ok(true)));
    }
}
