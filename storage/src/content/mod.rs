//! Verified content, shared by every feature that reads stored bytes (artifacts' reads and
//! verify-now, the built-in review, compaction's archives, fsck): [`Content`], a blob opened
//! for reading from memory, its row or its file, each byte re-hashed as it is served and a
//! blob whose bytes no longer match their address quarantined (ART-5). The stored bytes and
//! their verified stream are `stored.rs`, a Range of a large blob `ranges.rs`, a proof
//! `proofs.rs`, an outboard rebuilt in the background `rebuild.rs`.

mod proofs;
mod ranges;
mod rebuild;
mod stored;

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use weft_api::{ArtifactId, Digest, Digests, ErrorCode};

use crate::access::Reader;
use crate::engine::Engine;
use crate::engine::repairs::Seen;
use crate::error::{Error, reject};
use crate::hashing::AddressHasher;
use crate::limits::DownloadPermit;
use crate::rows::blobs::inline_bytes;

/// An artifact opened for reading: its digests and media type, and its bytes not yet read.
pub struct Content {
    pub digests: Digests,
    pub media_type: String,
    /// The bytes of a blob outside the index (snapshots); `None`: `memory`, or the blob,
    /// opened on demand.
    raw: Option<BoxStream<'static, Result<Bytes, Error>>>,
    /// The whole blob, when it is small and already in memory (from the cache or its row).
    memory: Option<Bytes>,
    inner: Arc<Engine>,
    /// What an intact re-hash is recorded as; `None` for blobs outside the index (snapshots).
    verified_by: Option<String>,
    /// Noted before any of these bytes (or the row they came with) were read: a repair after
    /// it means bad bytes here are the replaced copy (`repairs.rs`).
    seen: Seen,
    /// For bytes just read from their row: the small-artifact cache's generation before the
    /// read; the verification that answers them also keeps them there (`hot.rs`), so they
    /// are hashed once, not once for the cache and once for the answer.
    keep_hot: Option<u64>,
    /// The download slot of a read of a stored file for a client ([`Content::admitted`],
    /// [`Content::holding`]); the body that reads the file carries it (`downloads.rs`).
    download: Option<DownloadPermit>,
}

impl Content {
    pub(crate) fn new(
        digests: Digests,
        media_type: String,
        raw: BoxStream<'static, Result<Bytes, Error>>,
        inner: Arc<Engine>,
    ) -> Self {
        Self {
            digests,
            media_type,
            raw: Some(raw),
            memory: None,
            inner,
            verified_by: None,
            seen: Seen::OUTSIDE_THE_INDEX,
            keep_hot: None,
            download: None,
        }
    }

    /// A small blob already in memory (the cache of small blobs, `engine/hot.rs`), seen
    /// before it was read.
    pub(crate) fn in_memory(
        digests: Digests,
        media_type: String,
        bytes: Bytes,
        inner: Arc<Engine>,
        seen: Seen,
    ) -> Self {
        Self {
            digests,
            media_type,
            raw: None,
            memory: Some(bytes),
            inner,
            verified_by: None,
            seen,
            keep_hot: None,
            download: None,
        }
    }

    /// Takes a download slot for `reader`, to call once the answer will stream these bytes
    /// to a client (not for a 304, a HEAD or a refused Range, which read nothing). Bytes
    /// already in memory (a small artifact from the cache or its row) take none. The slot
    /// is held by the body until it ends, is dropped, or its client takes nothing for the
    /// body idle timeout (`downloads.rs`), so what one Agent or Group can keep open is bounded
    /// (`limits.rs`): `too_many_downloads` (429) or `overloaded` (503) otherwise.
    pub fn admitted(mut self, reader: &Reader) -> Result<Self, Error> {
        if self.memory.is_none() && self.download.is_none() {
            self.download = Some(admit_download(&self.inner, reader)?);
        }
        Ok(self)
    }

    /// These bytes, holding `slot` (taken before they were opened).
    pub(crate) fn holding(mut self, slot: DownloadPermit) -> Self {
        self.download = Some(slot);
        self
    }

    /// For a small blob already in memory: its bytes in `range` (all by default), verified
    /// now, so the answer can go out whole with its headers; `None` for a blob read from a
    /// file (use [`Content::into_body`]). Bytes that do not match their address quarantine
    /// the blob and answer [`Error::Corrupt`] before anything is sent (ART-5).
    pub fn verified_in_memory(
        &self,
        range: Option<Range<u64>>,
    ) -> Option<impl Future<Output = Result<Bytes, Error>> + Send + 'static> {
        let bytes = self.memory.clone()?;
        // The address, as every read checks it (`hashing::AddressHasher`).
        let intact = bytes.len() as u64 == self.digests.size
            && blake3::hash(&bytes).as_bytes() == &self.digests.blake3.0;
        let (digests, inner, seen) = (self.digests, Arc::clone(&self.inner), self.seen);
        if let (true, Some(generation)) = (intact, self.keep_hot) {
            inner.hot.keep(&digests, &bytes, generation);
        }
        Some(async move {
            if !intact {
                metrics::counter!("weft_verification_failures_total").increment(1);
                inner
                    .quarantine(
                        digests.blake3,
                        "stored bytes do not match their digests",
                        seen,
                    )
                    .await?;
                return Err(Error::Corrupt(digests.blake3));
            }
            let range = range.unwrap_or(0..digests.size);
            Ok(bytes.slice(range.start as usize..range.end as usize))
        })
    }

    /// Records this read's intact re-hash as `by` (ordinary reads record nothing).
    pub(crate) fn verified_by(mut self, by: String) -> Self {
        self.verified_by = Some(by);
        self
    }

    /// The bytes in `range` (all of them by default), verified before they go out; if the
    /// stored bytes do not match their address the stream ends with an error (never
    /// cleanly) and the blob is quarantined (ART-5). The whole blob is re-hashed while this
    /// is polled, except for a proper range of a blob with an outboard: then only the chunk
    /// groups that cover the range are read and verified (`ranges.rs`).
    pub fn into_body(self, range: Option<Range<u64>>) -> BoxStream<'static, Result<Bytes, Error>> {
        let whole = 0..self.digests.size;
        let range = range.unwrap_or(whole.clone());
        // Bytes already in memory become a stream only here, when someone streams them (the
        // HTTP answer takes `verified_in_memory` instead).
        let raw = self.raw.or_else(|| {
            self.memory
                .map(|bytes| futures::stream::once(futures::future::ready(Ok(bytes))).boxed())
        });
        let body = match raw {
            Some(raw) => stored::verified_stream(
                self.inner,
                (raw, AddressHasher::default()),
                self.digests,
                range,
                self.verified_by,
                self.seen,
            ),
            None if range != whole && self.digests.size >= ranges::OUTBOARD_MIN => {
                ranges::ranged_stream(self.inner, self.digests, range)
            }
            None => ranges::full_read(self.inner, self.digests, range, self.verified_by),
        };
        carrying(body, self.download)
    }

    /// The Range read without the outboard: every stored byte re-hashed (benchmark baseline).
    #[cfg(feature = "bench-support")]
    pub(crate) fn into_full_rehash_body(
        self,
        range: Range<u64>,
    ) -> BoxStream<'static, Result<Bytes, Error>> {
        ranges::full_read(self.inner, self.digests, range, None)
    }

    /// The proof of `range` (all the bytes by default): bao-tree's range encoding that a
    /// client verifies with `weft_api::bao::verify_range`, in pieces, of any length, memory
    /// flat (`proofs.rs`). An empty range is refused (`invalid_range`); bytes that do not
    /// verify before the first piece quarantine the blob and fail with [`Error::Corrupt`],
    /// and a failure part-way ends the stream with that error.
    pub async fn proof(
        self,
        range: Option<Range<u64>>,
    ) -> Result<BoxStream<'static, Result<Bytes, Error>>, Error> {
        let range = range.unwrap_or(0..self.digests.size);
        if range.is_empty() {
            return Err(reject(
                ErrorCode::InvalidRange,
                "a proof covers at least one byte; an empty artifact has none",
            ));
        }
        let encoded = proofs::proof(&self.inner, self.digests, range).await?;
        Ok(carrying(encoded, self.download))
    }
}

/// `body`, carrying `permit` (`downloads.rs`) when there is one.
fn carrying(
    body: BoxStream<'static, Result<Bytes, Error>>,
    permit: Option<DownloadPermit>,
) -> BoxStream<'static, Result<Bytes, Error>> {
    match permit {
        None => body,
        Some(permit) => {
            let idle = permit.idle();
            crate::downloads::carry(body, permit, idle)
        }
    }
}

/// One of `reader`'s download slots (`limits.rs`). The Authority reads on a Group's behalf
/// (the built-in review after a submission) under one Agent id every Group shares, so its
/// downloads count against the Group and the process only, never against a cap all Groups
/// would meet together.
pub(crate) fn admit_download(engine: &Engine, reader: &Reader) -> Result<DownloadPermit, Error> {
    let (agent, group) = match reader {
        Reader::Admin => (None, None),
        Reader::Agent {
            agent_id, group_id, ..
        } if agent_id.as_str() == weft_api::evidence::AUTHORITY_AGENT => {
            (None, Some(group_id.as_str()))
        }
        Reader::Agent {
            agent_id, group_id, ..
        } => (Some(agent_id.as_str()), Some(group_id.as_str())),
    };
    engine.limits.admit_download(agent, group)
}

impl std::fmt::Debug for Content {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Content")
            .field("digests", &self.digests)
            .field("media_type", &self.media_type)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// The content of an artifact `reader` may read: a small one from memory when it is there
    /// (`hot.rs`), else from the store.
    pub(crate) async fn open_content(
        self: &Arc<Self>,
        digest: Digest,
        reader: &Reader,
    ) -> Result<Content, Error> {
        let Digest::Blake3(id) = digest else {
            return self.open_stored_content(digest, reader, None).await;
        };
        let Some(media_type) = self.visible_in_memory(&id, reader) else {
            return self.open_stored_content(digest, reader, None).await;
        };
        let seen = self.repairs.seen(self.clock.now());
        if let Some(hot) = self.hot.get(&id) {
            let bytes = hot.bytes;
            return Ok(Content::in_memory(
                hot.digests,
                media_type,
                bytes,
                Arc::clone(self),
                seen,
            ));
        }
        self.open_stored_content(digest, reader, Some(media_type))
            .await
    }

    /// The media type a Group-wide reader sees for an artifact its Group published, decided
    /// from memory; `None` leaves visibility to the index (see `engine/hot.rs` for who
    /// qualifies). The bytes then come from `Hot::get` or the blob's row.
    pub(crate) fn visible_in_memory(
        &self,
        id: &ArtifactId,
        reader: &crate::access::Reader,
    ) -> Option<String> {
        let crate::access::Reader::Agent {
            group_id,
            scope: crate::access::MissionScope::Group,
            ..
        } = reader
        else {
            return None;
        };
        if self.hot.was_forwarded(id) {
            return None;
        }
        self.lineage.newest_media_type_in(id, group_id.as_str())
    }

    /// Why a blob marked unreadable cannot be read: its bytes were disposed of by policy
    /// (naming the `artifact.disposed` Event of the reader's Group, issue #46), or they failed
    /// a check (quarantined, ART-5).
    pub(crate) async fn unreadable(&self, blake3: ArtifactId, group: &Option<String>) -> Error {
        let group = group.clone();
        let disposed = self
            .db
            .read(move |conn| {
                if !crate::rows::blobs::is_disposed(conn, &blake3)? {
                    return Ok(None);
                }
                Ok(
                    crate::rows::blob_dispositions::latest(conn, group.as_deref(), &blake3)?
                        .map(|(_, sequence)| sequence)
                        .or(Some(0)),
                )
            })
            .await;
        match disposed {
            Ok(Some(sequence)) => Error::Disposed(blake3, sequence),
            Ok(None) => Error::Corrupt(blake3),
            Err(error) => error,
        }
    }

    /// The content of an artifact `reader` may read, from the store itself (never from
    /// memory): what verify-now re-hashes. `decided` is the media type when visibility was
    /// already decided from memory (`hot.rs`): then the read is only the blob's row.
    pub(crate) async fn open_stored_content(
        self: &Arc<Self>,
        digest: Digest,
        reader: &Reader,
        decided: Option<String>,
    ) -> Result<Content, Error> {
        let generation = self.hot.generation();
        let seen = self.repairs.seen(self.clock.now());
        let reader_group = match reader {
            Reader::Agent { group_id, .. } => Some(group_id.to_string()),
            Reader::Admin => None,
        };
        let reader = reader.clone();
        // Visibility decided from memory leaves one point lookup: it runs right here.
        let near = decided.is_some();
        let read = move |conn: &crate::sql::Connection| {
            let not_found = || {
                reject(
                    ErrorCode::NotFound,
                    format!("no artifact {digest} is visible to you"),
                )
            };
            if let (Some(media_type), Digest::Blake3(id)) = (decided, &digest) {
                let Some((digests, quarantined, inline)) =
                    crate::rows::blobs::with_inline(conn, id)?
                else {
                    return Err(not_found());
                };
                return Ok((digests, quarantined, media_type, inline));
            }
            // Visibility is decided in the first lookup: another Group's (or Mission's)
            // artifact costs what an absent one costs (`rows/manifests.rs`). The media type is the
            // newest visible manifest's: another Group's newer manifest must not show
            // through. An Artifact forwarded with a Context Package (CTX-7) shows its source
            // Group's.
            let visible =
                crate::rows::manifests::visible_manifests(conn, reader.seer(), &digest, false)?;
            let Some(newest) = visible.into_iter().next() else {
                return Err(not_found());
            };
            let (digests, quarantined, media_type) =
                (newest.digests, newest.quarantined, newest.media_type);
            // A small blob answers from this same read: no file to open.
            let inline = if quarantined {
                None
            } else {
                inline_bytes(conn, &digests.blake3)?
            };
            Ok((digests, quarantined, media_type, inline))
        };
        let (digests, quarantined, media_type, inline) = if near {
            self.db.read_here(read).await?
        } else {
            self.db.read(read).await?
        };
        if quarantined {
            return Err(self.unreadable(digests.blake3, &reader_group).await);
        }
        // A small blob answers from the row's own read, verified (and then kept in memory)
        // when answered; a file is opened when read (a Range of a large one reads only its
        // chunk groups, `ranges.rs`).
        let memory = inline.map(Bytes::from);
        self.check_stored_size(&digests, memory.as_ref(), seen)
            .await?;
        Ok(Content {
            digests,
            media_type,
            raw: None,
            keep_hot: memory.is_some().then_some(generation),
            download: None,
            memory,
            inner: Arc::clone(self),
            seen,
            // An ordinary read re-hashes every byte but records nothing: a durable write per
            // GET would put a commit on the read path (issue #15). verify-now and fsck record.
            verified_by: None,
        })
    }
}
