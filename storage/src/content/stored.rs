//! A blob's stored bytes as the index knows them (ART-5): raw or with the hasher that checks
//! them against their address, their stored size checked first, the stream that re-hashes
//! every byte it serves and records an intact re-hash, and the quarantine of bytes that do
//! not match. Every read path of `artifacts/` stands on these: whole reads (`reads.rs`),
//! verified ranges and their fallback (`ranges.rs`), proofs (`proofs.rs`) and outboard
//! rebuilds (`rebuild.rs`).

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use weft_api::{ArtifactId, Digests, EventPayload, Id, kinds};

use crate::clock::format_instant;
use crate::engine::Engine;
use crate::engine::repairs::Seen;
use crate::error::Error;
use crate::events;
use crate::hashing::AddressHasher;
use crate::rows::blobs::inline_bytes;

/// Wraps the raw blob stream: hashes every stored byte, yields only those in `range`, and at
/// the end compares with the recorded digests.
///
/// The last slice is held back until the whole blob has been verified. Otherwise a client
/// could receive every byte it asked for (and HTTP would see a complete body) before the
/// mismatch is known. On mismatch the blob is quarantined and the stream ends with an error
/// instead of its last slice, so the HTTP layer aborts the response. When intact, the
/// re-hash is recorded (`verified_by`) before the last slice goes out.
pub(crate) fn verified_stream(
    store: Arc<Engine>,
    (raw, hasher): (BoxStream<'static, Result<Bytes, Error>>, AddressHasher),
    expected: Digests,
    range: Range<u64>,
    verified_by: Option<String>,
    seen: Seen,
) -> futures::stream::BoxStream<'static, Result<Bytes, Error>> {
    struct State {
        raw: futures::stream::BoxStream<'static, Result<Bytes, Error>>,
        hasher: Option<AddressHasher>,
        held: Option<Bytes>,
        offset: u64,
        store: Arc<Engine>,
    }
    let state = State {
        raw,
        hasher: Some(hasher),
        held: None,
        offset: 0,
        store,
    };
    futures::stream::unfold(state, move |mut state| {
        let range = range.clone();
        let verified_by = verified_by.clone();
        async move {
            loop {
                let Some(hasher) = state.hasher.as_mut() else {
                    // Verified: release the held slice, then end.
                    return state.held.take().map(|slice| (Ok(slice), state));
                };
                match state.raw.next().await {
                    Some(Ok(chunk)) => {
                        if let Err(error) = hasher.update(&chunk).await {
                            state.hasher = None;
                            state.held = None;
                            return Some((Err(error), state));
                        }
                        let start = state.offset;
                        let end = start + chunk.len() as u64;
                        state.offset = end;
                        let from = range.start.max(start);
                        let to = range.end.min(end);
                        if from < to {
                            let slice = chunk.slice((from - start) as usize..(to - start) as usize);
                            if let Some(previous) = state.held.replace(slice) {
                                return Some((Ok(previous), state));
                            }
                        }
                    }
                    Some(Err(error)) => {
                        state.hasher = None;
                        state.held = None;
                        return Some((Err(error), state));
                    }
                    None => {
                        let hasher = state.hasher.take()?;
                        // A hasher that stopped says nothing of the bytes: the read fails,
                        // and nothing is quarantined.
                        let (root, size) = match hasher.finish().await {
                            Ok(outcome) => outcome,
                            Err(error) => {
                                state.held = None;
                                return Some((Err(error), state));
                            }
                        };
                        let intact = root == expected.blake3 && size == expected.size;
                        if intact {
                            // A failure to record loses only the audit note, never the read.
                            if let Some(by) = verified_by.clone()
                                && let Err(error) =
                                    state.store.record_verified(expected.blake3, by).await
                            {
                                tracing::warn!(%error, "could not record a verification");
                            }
                            continue;
                        }
                        state.held = None;
                        if let Err(error) = state
                            .store
                            .quarantine(
                                expected.blake3,
                                "stored bytes do not hash to their address",
                                seen,
                            )
                            .await
                        {
                            tracing::error!(%error, "could not record quarantine");
                        }
                        return Some((Err(Error::Corrupt(expected.blake3)), state));
                    }
                }
            }
        }
    })
    .boxed()
}

impl Engine {
    /// Records that `blake3`'s bytes were just re-hashed and found intact.
    pub(crate) async fn record_verified(
        &self,
        blake3: ArtifactId,
        by: String,
    ) -> Result<(), Error> {
        let now = format_instant(self.clock.now());
        self.db
            .write(move |txn| crate::rows::blob_verifications::record(txn, &blake3, &now, &by))
            .await
    }

    /// The raw, unverified bytes of a blob the index knows as `digests`: its inline copy or
    /// its file. A stored size that differs from the index quarantines the blob before a
    /// single byte is sent.
    pub(crate) async fn raw_bytes(
        &self,
        digests: &Digests,
    ) -> Result<BoxStream<'static, Result<Bytes, Error>>, Error> {
        Ok(self.stored_bytes(digests, false).await?.0)
    }

    /// [`Engine::raw_bytes`] with the hasher that checks them against their address: for a
    /// local blob file, the root its reading thread computed as it read (`blobs/reading.rs`);
    /// otherwise one that hashes them as they pass.
    pub(crate) async fn hashed_bytes(
        &self,
        digests: &Digests,
    ) -> Result<(BoxStream<'static, Result<Bytes, Error>>, AddressHasher), Error> {
        let (raw, root) = self.stored_bytes(digests, true).await?;
        Ok((
            raw,
            root.map_or_else(AddressHasher::default, AddressHasher::hashed_by),
        ))
    }

    async fn stored_bytes(
        &self,
        digests: &Digests,
        hashed: bool,
    ) -> Result<
        (
            BoxStream<'static, Result<Bytes, Error>>,
            Option<crate::hashing::Root>,
        ),
        Error,
    > {
        let blake3 = digests.blake3;
        let seen = self.repairs.seen(self.clock.now());
        let inline = self
            .db
            .read(move |conn| inline_bytes(conn, &blake3))
            .await?
            .map(Bytes::from);
        self.check_stored_size(digests, inline.as_ref(), seen)
            .await?;
        match inline {
            Some(bytes) => Ok((
                futures::stream::once(async move { Ok(bytes) }).boxed(),
                None,
            )),
            None if hashed => self.blobs.read_hashed(&digests.blake3).await,
            None => Ok((self.blobs.read(&digests.blake3).await?, None)),
        }
    }

    /// A blob whose stored size (its inline copy's, else its file's) is not the index's is
    /// corrupt before a single byte is sent: it is quarantined.
    pub(super) async fn check_stored_size(
        &self,
        digests: &Digests,
        inline: Option<&Bytes>,
        seen: Seen,
    ) -> Result<(), Error> {
        let size = match inline {
            Some(bytes) => Some(bytes.len() as u64),
            None => self.blobs.stored_size(&digests.blake3).await?,
        };
        if size != Some(digests.size) {
            self.quarantine(digests.blake3, "stored size does not match the index", seen)
                .await?;
            return Err(Error::Corrupt(digests.blake3));
        }
        Ok(())
    }

    /// Marks a blob corrupt: later reads fail at once, and every Group that published it gets
    /// an `artifact.integrity_failure` Event; unless it was repaired after `seen`, noted
    /// before the bad bytes were read: then they were the copy the repair replaced, and the
    /// mark is skipped (`repairs.rs`).
    pub(crate) async fn quarantine(
        &self,
        blake3: ArtifactId,
        reason: &str,
        seen: Seen,
    ) -> Result<(), Error> {
        let now = self.clock.now();
        let reason = reason.to_owned();
        let repairs = Arc::clone(&self.repairs);
        // Out of memory first, so no later read is answered from there (`hot.rs`).
        self.hot.forget(&blake3);
        // Every read that found bad bytes is counted; the mark below may be skipped (repaired
        // meanwhile, or already marked), and the log says which.
        tracing::error!(artifact = %blake3, %reason, "integrity failure: stored bytes do not verify");
        metrics::counter!("weft_integrity_failures_total").increment(1);
        self.faults.quarantines().pass().await;
        self.db
            .write(move |txn| {
                if repairs.since(&blake3, seen) {
                    tracing::warn!(artifact = %blake3, "not quarantining a blob repaired after its bad bytes were read");
                    return Ok(());
                }
                // Every Group that published it, locked in Group order before the blob's row,
                // as a file's repair takes them (the README's lock order): the two through
                // two servers wait for each other instead of deadlocking.
                let groups = crate::rows::manifests::groups_of(txn, &blake3)?;
                for group in &groups {
                    crate::rows::groups::lock(txn, group)?;
                }
                if !crate::rows::blobs::quarantine(txn, &blake3, now, seen.began())? {
                    tracing::warn!(artifact = %blake3, "not quarantining a blob already quarantined, or repaired since its bad bytes were read (its row says so)");
                    return Ok(());
                }
                tracing::error!(artifact = %blake3, "blob quarantined");
                for group in groups {
                    let group = Id::parse("groupId", &group)?;
                    let failure = kinds::IntegrityFailure { artifact: blake3, reason: reason.clone() };
                    events::append(txn, &group, &EventPayload::ArtifactIntegrityFailure(failure), now)?;
                }
                Ok(())
            })
            .await
    }
}
