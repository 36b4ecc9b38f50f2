//! Outboards on the blob store (issue #15): each large blob's BLAKE3 outboard at
//! `outboards/<64 hex>`, put whole or placed from a file it was spilled to as it was built,
//! read by ranges for a verified Range read, compared as a stream by fsck, removed with its
//! blob.

use bytes::Bytes;
use futures::TryStreamExt as _;
use object_store::ObjectStoreExt as _;
use weft_api::ArtifactId;

use super::{Blobs, outboard_path, owner_only_file};
use crate::error::Error;
use crate::faults::{FaultSite, Faults};

impl Blobs {
    /// Deletes a blob's outboard (with its blob, or when it failed verification).
    pub(crate) async fn remove_outboard(&self, id: &ArtifactId) -> Result<(), Error> {
        match self.store.delete(&outboard_path(id)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Stores a blob's outboard (durably on the local backend: fsync is on).
    pub(crate) async fn put_outboard(
        &self,
        id: &ArtifactId,
        outboard: Vec<u8>,
    ) -> Result<(), Error> {
        let path = outboard_path(id);
        self.store.put(&path, Bytes::from(outboard).into()).await?;
        if let Some(root) = &self.local_root {
            owner_only_file(&root.join(path.as_ref()))?;
        }
        Ok(())
    }

    /// A file in `staging/` to spill a rebuilt outboard of `id` into as it is built (flat
    /// memory), and the faults of its writes; `None` off the local backend (an in-memory
    /// store holds everything in memory anyway). The start-up sweep of `staging/` removes a
    /// crash's leftover.
    pub(crate) fn rebuild_spill(
        &self,
        id: &ArtifactId,
    ) -> Option<std::io::Result<(std::path::PathBuf, std::fs::File, Faults)>> {
        let (path, faults) = self.spill_path(id, "")?;
        Some(std::fs::File::create_new(&path).map(|file| (path, file, faults)))
    }

    /// A new path in `staging/` for an outboard of `id` spilled as it is built (its name
    /// starting with `prefix`, then the id, ending in `.outboard`), and the faults of its
    /// writes; `None` off the local backend (see [`Blobs::rebuild_spill`]).
    pub(crate) fn spill_path(
        &self,
        id: &ArtifactId,
        prefix: &str,
    ) -> Option<(std::path::PathBuf, Faults)> {
        let root = self.local_root.as_ref()?;
        let path = root.join("staging").join(format!(
            "{prefix}{}-{}.outboard",
            id.hex(),
            uuid::Uuid::new_v4()
        ));
        Some((path, self.faults.clone()))
    }

    /// Moves an outboard written (and fsynced) while its upload was hashed, or while it was
    /// rebuilt, into its place, and makes the rename durable. Local backend only: only it
    /// spills.
    pub(crate) fn place_spilled_outboard(
        &self,
        id: &ArtifactId,
        file: &std::path::Path,
    ) -> Result<(), Error> {
        let Some(root) = &self.local_root else {
            return Err(Error::backend(std::io::Error::other(
                "a spilled outboard without a local backend",
            )));
        };
        let to = root.join(outboard_path(id).as_ref());
        let mut renamed = false;
        let result = (|| {
            self.faults.check(FaultSite::Outboard)?;
            std::fs::rename(file, &to)?;
            renamed = true;
            owner_only_file(&to).map_err(std::io::Error::other)?;
            if let Some(dir) = to.parent() {
                self.faults.check(FaultSite::Outboard)?;
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok::<_, std::io::Error>(())
        })();
        if result.is_err() {
            // Wherever it failed, neither the spill file nor a half-placed outboard stays.
            let _ = std::fs::remove_file(if renamed { &to } else { file });
        }
        result.map_err(Error::backend)
    }

    /// Sends an outboard spilled to a local file while its upload was hashed (the S3
    /// backend) to its place: streamed into a staged multipart upload, copied to
    /// `outboards/<hex>`, so memory stays at a few parts whatever its size. The file goes
    /// with its `Staged` value.
    pub(crate) async fn upload_spilled_outboard(
        &self,
        id: &ArtifactId,
        file: &std::path::Path,
    ) -> Result<(), Error> {
        use tokio::io::AsyncReadExt as _;
        let Some(parts) = &self.multipart else {
            return Err(Error::backend(std::io::Error::other(
                "a spilled outboard without a local backend or multipart uploads",
            )));
        };
        let staged = object_store::path::Path::from(format!("staging/{}", uuid::Uuid::new_v4()));
        let mut writer = super::multipart::Writer::start(
            std::sync::Arc::clone(&self.store),
            std::sync::Arc::clone(&parts.0),
            staged.clone(),
        )
        .await?;
        let sent = async {
            let mut reader = tokio::fs::File::open(file).await.map_err(Error::backend)?;
            loop {
                let mut buffer = bytes::BytesMut::with_capacity(1 << 20);
                if reader.read_buf(&mut buffer).await.map_err(Error::backend)? == 0 {
                    return Ok::<_, Error>(());
                }
                writer.put(buffer.freeze()).await?;
            }
        }
        .await;
        if let Err(error) = sent {
            writer.abort().await;
            return Err(error);
        }
        writer.finish().await?;
        let placed = self.store.copy(&staged, &outboard_path(id)).await;
        if let Err(error) = self.store.delete(&staged).await {
            tracing::warn!(%staged, %error, "could not remove a staged outboard; the next start will");
        }
        Ok(placed?)
    }

    /// Whether a blob's stored outboard is byte for byte `computed` (fsck), or `None` if it
    /// has none. Both are read as streams, so neither is ever whole in memory.
    pub(crate) async fn outboard_is(
        &self,
        id: &ArtifactId,
        computed: &crate::outboard::Built,
    ) -> Result<Option<bool>, Error> {
        use tokio::io::AsyncReadExt as _;
        let stored = match self.reads.get(&outboard_path(id)).await {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        let (length, mut expected): (u64, Box<dyn tokio::io::AsyncRead + Send + Unpin + '_>) =
            match computed {
                crate::outboard::Built::Memory(bytes) => (bytes.len() as u64, Box::new(&bytes[..])),
                crate::outboard::Built::Spilled(path) => {
                    let file = tokio::fs::File::open(path).await.map_err(Error::backend)?;
                    let length = file.metadata().await.map_err(Error::backend)?.len();
                    (length, Box::new(tokio::io::BufReader::new(file)))
                }
            };
        if stored.meta.size != length {
            return Ok(Some(false));
        }
        let mut stream = stored.into_stream();
        let (mut buffer, mut compared) = (Vec::new(), 0u64);
        while let Some(chunk) = stream.try_next().await? {
            compared += chunk.len() as u64;
            if compared > length {
                return Ok(Some(false));
            }
            buffer.resize(chunk.len(), 0);
            // The lengths agree, so a short read here is a file changed under fsck.
            expected
                .read_exact(&mut buffer)
                .await
                .map_err(Error::backend)?;
            if buffer[..] != chunk[..] {
                return Ok(Some(false));
            }
        }
        // A stored stream that ended short of its listed size is not the outboard either.
        Ok(Some(compared == length))
    }

    /// Byte ranges of a blob's outboard (the hash pairs one range read needs), or `None` if
    /// it has none.
    pub(crate) async fn outboard_ranges(
        &self,
        id: &ArtifactId,
        ranges: &[std::ops::Range<u64>],
    ) -> Result<Option<Vec<Bytes>>, Error> {
        match self.reads.get_ranges(&outboard_path(id), ranges).await {
            Ok(parts) => Ok(Some(parts)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// Whether a blob has an outboard (whether it verifies is for its reader to find).
    pub(crate) async fn has_outboard(&self, id: &ArtifactId) -> Result<bool, Error> {
        match self.reads.head(&outboard_path(id)).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(error) => Err(error.into()),
        }
    }
}
