//! The bytes of a resumable upload session on a store that cannot append (S3, and the memory
//! store of the tests): each chunk is an object of its own, `uploads/<upload id>/<offset>`
//! (the offset in 20 digits, so the listing is in order), so memory stays at a few parts
//! whatever the session's size.
//!
//! A chunk streams into a staged multipart upload (`multipart.rs`, swept at start if a crash
//! cuts it) and is copied to its key once complete, so a chunk object is always whole. The
//! caller then commits the session's new length; a chunk whose commit failed is removed by
//! [`Blobs::cut_chunks`], and any chunk at or past the durable length is removed before the
//! next one is written. The finish streams the chunks below the durable length, in order,
//! through the same hashing and staging as a one-shot upload.

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt as _, TryStreamExt as _};
use object_store::ObjectStoreExt as _;
use object_store::path::Path;

use super::{Blobs, Staged, body_error, multipart, too_large};
use crate::error::Error;

/// One chunk object: where its bytes start in the session, how many, and its key.
struct Chunk {
    offset: u64,
    size: u64,
    key: Path,
}

fn chunk_key(session: &Path, offset: u64) -> Path {
    Path::from(format!("{session}/{offset:020}"))
}

impl Blobs {
    /// The session's chunk objects, in order.
    async fn chunks(&self, session: &Path) -> Result<Vec<Chunk>, Error> {
        let mut chunks: Vec<Chunk> = self
            .store
            .list(Some(session))
            .map_err(Error::from)
            .try_filter_map(|meta| async move {
                let offset = meta
                    .location
                    .filename()
                    .and_then(|name| name.parse::<u64>().ok());
                Ok(offset.map(|offset| Chunk {
                    offset,
                    size: meta.size,
                    key: meta.location,
                }))
            })
            .try_collect()
            .await?;
        chunks.sort_by_key(|chunk| chunk.offset);
        Ok(chunks)
    }

    /// Appends `body` as the chunk at `received` (see [`Blobs::append_upload`]).
    pub(super) async fn append_chunk<S>(
        &self,
        session: &Path,
        received: u64,
        body: S,
        room: u64,
    ) -> Result<u64, Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        self.cut_chunks(session, received).await?;
        let Some(parts) = &self.multipart else {
            return Err(Error::backend(std::io::Error::other(
                "chunked upload objects need multipart uploads",
            )));
        };
        let staged = Path::from(format!("staging/{}", uuid::Uuid::new_v4()));
        let mut writer = multipart::Writer::start(
            std::sync::Arc::clone(&self.store),
            std::sync::Arc::clone(&parts.0),
            staged.clone(),
        )
        .await?;
        let written = async {
            let mut body = std::pin::pin!(body);
            let mut appended = 0u64;
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(body_error)?;
                appended += chunk.len() as u64;
                if appended > room {
                    return Err(too_large(received.saturating_add(room)));
                }
                writer.put(chunk).await?;
            }
            Ok(appended)
        }
        .await;
        let appended = match written {
            Ok(appended) => appended,
            Err(error) => {
                writer.abort().await;
                return Err(error);
            }
        };
        writer.finish().await?;
        let placed = if appended == 0 {
            Ok(())
        } else {
            self.store
                .copy(&staged, &chunk_key(session, received))
                .await
                .map_err(Error::from)
        };
        if let Err(error) = self.store.delete(&staged).await {
            tracing::warn!(%staged, %error, "could not remove a staged chunk; the next start will");
        }
        placed.map(|()| appended)
    }

    /// Removes every chunk at or past `received` (a chunk whose length was never committed).
    pub(super) async fn cut_chunks(&self, session: &Path, received: u64) -> Result<(), Error> {
        for chunk in self.chunks(session).await? {
            if chunk.offset >= received {
                match self.store.delete(&chunk.key).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        Ok(())
    }

    /// Removes every chunk of the session.
    pub(super) async fn remove_chunks(&self, session: &Path) -> Result<(), Error> {
        self.cut_chunks(session, 0).await
    }

    /// The session's bytes `start..end`, streamed from its chunks.
    pub(super) async fn read_chunks(
        &self,
        session: &Path,
        start: u64,
        end: u64,
    ) -> Result<BoxStream<'static, Result<Bytes, Error>>, Error> {
        let mut pieces = Vec::new();
        for chunk in self.chunks(session).await? {
            let (from, to) = (start.max(chunk.offset), end.min(chunk.offset + chunk.size));
            if from < to {
                pieces.push((chunk.key, from - chunk.offset..to - chunk.offset));
            }
        }
        let reads = std::sync::Arc::clone(&self.reads);
        Ok(futures::stream::iter(pieces)
            .then(move |(key, range)| {
                let reads = std::sync::Arc::clone(&reads);
                async move {
                    let options = object_store::GetOptions {
                        range: Some(object_store::GetRange::Bounded(range)),
                        ..Default::default()
                    };
                    Ok::<_, Error>(reads.get_opts(&key, options).await?.into_stream())
                }
            })
            .map_ok(|stream| stream.map_err(Error::from))
            .try_flatten()
            .boxed())
    }

    /// Hashes the session's first `received` bytes into a staged object, as a one-shot
    /// upload is (see [`Blobs::hash_upload`]).
    pub(super) async fn hash_chunks(&self, session: &Path, received: u64) -> Result<Staged, Error> {
        let bytes = self
            .read_chunks(session, 0, received)
            .await?
            .map_err(std::io::Error::other);
        let staged = self.stage_file(bytes, received).await?;
        if staged.digests.size != received {
            return Err(Error::backend(std::io::Error::other(format!(
                "upload {session} holds {} bytes, its session recorded {received}",
                staged.digests.size
            ))));
        }
        Ok(staged)
    }
}
