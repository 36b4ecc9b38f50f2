//! Walking the store's blob and outboard objects a page at a time, for the sweep of objects no
//! row names (`artifacts/strays.rs`): each call goes on where the last one stopped and wraps
//! round at the end, so every object is seen once per pass however large the store is.
//!
//! A sorted store (S3, memory) is listed from the last key seen (`list_with_offset`: S3's
//! `start-after`, one request per page). A local directory's listing is a directory walk in
//! no particular order, so there a step is one shard (`blobs/blake3/<two hex>/`, a 256th of
//! the blobs) and then the outboards' directory.

use chrono::{DateTime, Utc};
use futures::TryStreamExt as _;
use object_store::path::Path;
use weft_api::ArtifactId;

use super::Blobs;
use crate::error::Error;

/// Where a walk goes on from.
#[derive(Clone, Debug, Default)]
pub(crate) struct Walk {
    /// Outboards after blobs.
    in_outboards: bool,
    /// A sorted store: the last key listed.
    after: Option<Path>,
    /// A local directory: the next shard of blobs.
    shard: u16,
}

/// An object the walk found: the blob it is (or is the outboard of), and when it was written
/// (the store's clock).
pub(crate) type Found = (ArtifactId, DateTime<Utc>);

const SHARDS: u16 = 256;

impl Blobs {
    /// The next objects of `walk`: at least `page` unless the pass ends first, and whether it
    /// ended (the next call starts again at the beginning).
    pub(crate) async fn walk_page(
        &self,
        walk: &mut Walk,
        page: usize,
    ) -> Result<(Vec<Found>, bool), Error> {
        let mut found = Vec::new();
        loop {
            let ended = match self.local_root {
                Some(_) => self.local_step(walk, &mut found).await?,
                None => {
                    self.sorted_step(walk, page - found.len().min(page), &mut found)
                        .await?
                }
            };
            if ended || found.len() >= page {
                return Ok((found, ended));
            }
        }
    }

    /// One shard of blobs, or the outboards; answers whether the pass ended.
    async fn local_step(&self, walk: &mut Walk, found: &mut Vec<Found>) -> Result<bool, Error> {
        if walk.in_outboards {
            self.listed(Path::from("outboards"), None, usize::MAX, found)
                .await?;
            *walk = Walk::default();
            return Ok(true);
        }
        let prefix = Path::from(format!("blobs/blake3/{:02x}", walk.shard));
        self.listed(prefix, None, usize::MAX, found).await?;
        walk.shard += 1;
        if walk.shard == SHARDS {
            walk.in_outboards = true;
        }
        Ok(false)
    }

    /// Up to `want` keys after the last one; answers whether the pass ended.
    async fn sorted_step(
        &self,
        walk: &mut Walk,
        want: usize,
        found: &mut Vec<Found>,
    ) -> Result<bool, Error> {
        let prefix = Path::from(match walk.in_outboards {
            true => "outboards",
            false => "blobs/blake3",
        });
        let want = want.max(1);
        let (n, last) = self
            .listed(prefix, walk.after.as_ref(), want, found)
            .await?;
        if n == want {
            walk.after = last;
            return Ok(false);
        }
        // This prefix is done: outboards next, or the pass is over.
        let ended = walk.in_outboards;
        *walk = Walk {
            in_outboards: !walk.in_outboards,
            ..Walk::default()
        };
        Ok(ended)
    }

    /// Lists at most `want` objects under `prefix` (after `after`), adding those named by a
    /// digest to `found`; answers how many were listed and the last key.
    async fn listed(
        &self,
        prefix: Path,
        after: Option<&Path>,
        want: usize,
        found: &mut Vec<Found>,
    ) -> Result<(usize, Option<Path>), Error> {
        let listing = match after {
            Some(after) => self.store.list_with_offset(Some(&prefix), after),
            None => self.store.list(Some(&prefix)),
        };
        let mut listing = listing.map_err(Error::from);
        let (mut n, mut last) = (0, None);
        while n < want {
            let Some(meta) = listing.try_next().await? else {
                break;
            };
            n += 1;
            if let Some(name) = meta.location.filename()
                && let Ok(id) = ArtifactId::parse(&format!("blake3:{name}"))
            {
                found.push((id, meta.last_modified));
            }
            last = Some(meta.location);
        }
        Ok((n, last))
    }
}

/// An object under `uploads/`: the upload session it belongs to, its key, and when it was
/// written (the store's clock).
pub(crate) type UploadObject = (String, Path, DateTime<Utc>);

/// The upload session an object's name under `uploads/` belongs to: `up-<32 hex>`, or its
/// outboard spilled during a finish (`<id>.outboard`, `blobs/resumable.rs`). Anything else
/// is no session's, and the sweep leaves it alone.
fn session_of(name: &object_store::path::PathPart<'_>) -> Option<String> {
    let name = name.as_ref();
    let id = name.strip_suffix(".outboard").unwrap_or(name);
    let hex = id.strip_prefix("up-")?;
    (hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_owned())
}

impl Blobs {
    /// Every outboard object of the store, with when it was written (fsck, on every backend).
    pub(crate) async fn outboard_objects(&self) -> Result<Vec<Found>, Error> {
        let mut found = Vec::new();
        self.listed(Path::from("outboards"), None, usize::MAX, &mut found)
            .await?;
        Ok(found)
    }

    /// Objects under `uploads/` (`uploads/<id>` locally, `uploads/<id>/<offset>` on a store
    /// that cannot append, `blobs/chunks.rs`): on a sorted store the `page` after `after`, and
    /// where the next page starts (none once the listing ended); a local directory (one file
    /// per session) all at once.
    pub(crate) async fn walk_uploads(
        &self,
        after: Option<Path>,
        page: usize,
    ) -> Result<(Vec<UploadObject>, Option<Path>), Error> {
        let prefix = Path::from("uploads");
        let (listing, want) = match (&self.local_root, &after) {
            (Some(_), _) => (self.store.list(Some(&prefix)), usize::MAX),
            (None, Some(after)) => (self.store.list_with_offset(Some(&prefix), after), page),
            (None, None) => (self.store.list(Some(&prefix)), page),
        };
        let mut listing = listing.map_err(Error::from);
        let mut found = Vec::new();
        let mut last = None;
        while found.len() < want {
            let Some(meta) = listing.try_next().await? else {
                return Ok((found, None));
            };
            last = Some(meta.location.clone());
            if let Some(id) = meta.location.parts().nth(1).as_ref().and_then(session_of) {
                found.push((id, meta.location, meta.last_modified));
            }
        }
        Ok((found, last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt as _;

    /// A store walked a page at a time sees every blob and outboard once per pass, and the
    /// pass starts again after its end: sorted (memory) and a local directory.
    #[tokio::test]
    async fn a_walk_sees_every_object_once_per_pass() {
        let dir = tempfile::tempdir().expect("tempdir");
        for backend in [
            super::super::Backend::Memory,
            super::super::Backend::Local(dir.path().to_path_buf()),
        ] {
            walk_all(backend).await;
        }
    }

    async fn walk_all(backend: super::super::Backend) {
        let blobs =
            Blobs::open(&backend, crate::faults::Faults::default(), false, None).expect("store");
        let ids: Vec<ArtifactId> = (0..25u32)
            .map(|i| ArtifactId::of(&i.to_le_bytes()))
            .collect();
        for id in &ids {
            blobs
                .store
                .put(
                    &super::super::blob_path(id),
                    bytes::Bytes::from_static(b"x").into(),
                )
                .await
                .expect("put");
        }
        blobs
            .store
            .put(
                &super::super::outboard_path(&ids[0]),
                bytes::Bytes::from_static(b"o").into(),
            )
            .await
            .expect("put");
        let mut walk = Walk::default();
        for pass in 0..2 {
            let mut seen = Vec::new();
            loop {
                let (page, done) = blobs.walk_page(&mut walk, 10).await.expect("page");
                seen.extend(page.into_iter().map(|(id, _)| id));
                if done {
                    break;
                }
            }
            assert_eq!(
                seen.len(),
                26,
                "{backend:?} pass {pass}: 25 blobs, one outboard"
            );
            let mut want = ids.clone();
            want.push(ids[0]);
            want.sort();
            seen.sort();
            assert_eq!(seen, want, "{backend:?} pass {pass}");
        }
    }
}
