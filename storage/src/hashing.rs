//! BLAKE3 and SHA-256 over one stream of bytes, one hash per core.
//!
//! Measured here (shared/DEPENDENCIES.md): both digests on one thread run at about 0.96 GB/s,
//! one per core at about 1.45 GB/s. Small bodies are hashed inline, because starting two
//! blocking tasks costs more than hashing a few hundred KiB. Large bodies are cut into batches
//! of [`BATCH`] bytes and each batch is sent to both hasher tasks over bounded channels, so the
//! memory in flight is at most `2 × DEPTH × BATCH` whatever the body's size.
//!
//! The BLAKE3 task hashes by 16 KiB chunk groups ([`crate::outboard::Builder`]), so a large
//! body's digest comes with its outboard (the hash tree that verified Range reads use) for
//! the cost of merging the group hashes; small bodies, hashed inline, get none.

use bytes::{Bytes, BytesMut};
use sha2::Digest as _;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use weft_api::{ArtifactId, Digests, Sha256Digest};

use crate::error::Error;

/// Bytes per hand-off to the hasher tasks.
pub(crate) const BATCH: usize = 1024 * 1024;
/// Batches queued per hasher before the producer waits.
const DEPTH: usize = 2;

struct Pipeline {
    to_blake3: mpsc::Sender<Bytes>,
    to_sha256: mpsc::Sender<Bytes>,
    blake3: JoinHandle<([u8; 32], Vec<u8>)>,
    sha256: JoinHandle<[u8; 32]>,
}

impl Pipeline {
    fn start() -> Self {
        let (to_blake3, mut blake3_rx) = mpsc::channel::<Bytes>(DEPTH);
        let (to_sha256, mut sha256_rx) = mpsc::channel::<Bytes>(DEPTH);
        let blake3 = tokio::task::spawn_blocking(move || {
            let mut builder = crate::outboard::Builder::default();
            while let Some(batch) = blake3_rx.blocking_recv() {
                builder.update(&batch);
            }
            builder.finish()
        });
        let sha256 = tokio::task::spawn_blocking(move || {
            let mut hasher = sha2::Sha256::new();
            while let Some(batch) = sha256_rx.blocking_recv() {
                hasher.update(&batch);
            }
            hasher.finalize().into()
        });
        Self {
            to_blake3,
            to_sha256,
            blake3,
            sha256,
        }
    }
}

/// Accumulates a stream into batches and hashes them; see the module docs.
#[derive(Default)]
pub(crate) struct DualHasher {
    pending: BytesMut,
    pipeline: Option<Pipeline>,
    size: u64,
}

impl std::fmt::Debug for DualHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DualHasher")
            .field("size", &self.size)
            .finish()
    }
}

fn stopped() -> Error {
    Error::backend(std::io::Error::other("hasher task stopped"))
}

impl DualHasher {
    /// Adds `chunk`; returns the batches that are now complete, for the caller to write
    /// onwards in order (they are the same bytes, cheaply cloned).
    pub(crate) async fn update(&mut self, chunk: &[u8]) -> Result<Vec<Bytes>, Error> {
        self.size += chunk.len() as u64;
        self.pending.extend_from_slice(chunk);
        let mut ready = Vec::new();
        while self.pending.len() >= BATCH {
            let batch = self.pending.split_to(BATCH).freeze();
            self.dispatch(batch.clone()).await?;
            ready.push(batch);
        }
        Ok(ready)
    }

    async fn dispatch(&mut self, batch: Bytes) -> Result<(), Error> {
        let pipeline = self.pipeline.get_or_insert_with(Pipeline::start);
        pipeline
            .to_blake3
            .send(batch.clone())
            .await
            .map_err(|_| stopped())?;
        pipeline
            .to_sha256
            .send(batch)
            .await
            .map_err(|_| stopped())?;
        Ok(())
    }

    /// Hashes what is left and returns the digests together with the final partial batch
    /// (possibly empty), which the caller still has to write.
    pub(crate) async fn finish(self) -> Result<(Digests, Bytes), Error> {
        let (digests, tail, _) = self.finish_with_outboard().await?;
        Ok((digests, tail))
    }

    /// [`DualHasher::finish`], with the outboard of a body large enough to have gone through
    /// the hasher tasks (at least [`BATCH`] bytes; `None` below).
    pub(crate) async fn finish_with_outboard(
        mut self,
    ) -> Result<(Digests, Bytes, Option<Vec<u8>>), Error> {
        let tail = std::mem::take(&mut self.pending).freeze();
        let (blake3, sha256, outboard) = match self.pipeline.take() {
            None => (
                *blake3::hash(&tail).as_bytes(),
                sha2::Sha256::digest(&tail).into(),
                None,
            ),
            Some(pipeline) => {
                if !tail.is_empty() {
                    pipeline
                        .to_blake3
                        .send(tail.clone())
                        .await
                        .map_err(|_| stopped())?;
                    pipeline
                        .to_sha256
                        .send(tail.clone())
                        .await
                        .map_err(|_| stopped())?;
                }
                drop(pipeline.to_blake3);
                drop(pipeline.to_sha256);
                let (blake3, outboard) = pipeline.blake3.await.map_err(Error::backend)?;
                let sha256 = pipeline.sha256.await.map_err(Error::backend)?;
                (blake3, sha256, Some(outboard))
            }
        };
        let digests = Digests {
            blake3: ArtifactId(blake3),
            sha256: Sha256Digest(sha256),
            size: self.size,
        };
        Ok((digests, tail, outboard))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes that matter: empty, one byte, one below / at / above a batch, several batches.
    #[tokio::test]
    async fn agrees_with_the_one_thread_hasher_at_every_boundary() {
        for size in [0, 1, BATCH - 1, BATCH, BATCH + 1, 3 * BATCH + 17] {
            let data: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
            let mut hasher = DualHasher::default();
            let mut written = Vec::new();
            // Feed in uneven chunks, as a network would.
            for chunk in data.chunks(7919) {
                for batch in hasher.update(chunk).await.expect("hashing") {
                    written.extend_from_slice(&batch);
                }
            }
            let (digests, tail, outboard) = hasher.finish_with_outboard().await.expect("hashing");
            written.extend_from_slice(&tail);
            // The outboard comes with every body that went through the hasher tasks.
            assert_eq!(outboard.is_some(), size >= BATCH, "size {size}");
            if let Some(outboard) = outboard {
                let tree = weft_api::bao::tree(size as u64);
                assert_eq!(outboard.len() as u64, tree.outboard_size(), "size {size}");
            }
            assert_eq!(written, data, "size {size}");
            assert_eq!(
                digests,
                weft_api::digest::Hasher::digest(&data),
                "size {size}"
            );
        }
    }
}
