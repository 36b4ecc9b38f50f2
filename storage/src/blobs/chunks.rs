//! The bytes of a resumable upload session on a store that cannot append (S3, and the memory
//! store of the tests): each chunk is an object of its own,
//! `uploads/<upload id>/<offset>.<nonce>.<previous chunk's nonce>` (the offset in 20 digits),
//! so memory stays at a few parts whatever the session's size.
//!
//! A chunk streams into a staged multipart upload (`multipart.rs`, swept at start if a crash
//! cuts it) and is copied to its key once complete, so a chunk object is always whole. The
//! caller then commits the session's new length and the chunk's name (`last_chunk`); the
//! session's bytes are the chain of chunks back from that name, each naming the one before
//! it. Two servers writing a chunk at one offset at once (a client retrying on another while
//! the first still streams, issue #43) write two objects: the one whose commit won is in the
//! chain, and the other's writer removes its own object, never the winner's. Objects off the
//! chain (a writer that crashed before removing its own) are ignored, and removed with the
//! session. A session older than V43 found its chunks by offset (`<offset>` alone): those
//! still are, below the first chunk named by the newer scheme.

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

/// What a chunk's name says: its offset, and (newer scheme) its nonce and its predecessor's.
struct Named {
    offset: u64,
    link: Option<(String, String)>,
}

/// The predecessor of a session's first chunk.
const FIRST: &str = "0";
/// The predecessor of the first newer-scheme chunk of a session started before V43: the
/// chunks below it are found by offset.
const OLDER: &str = "L";

fn parse_name(name: &str) -> Option<Named> {
    let mut parts = name.split('.');
    let offset = parts.next()?.parse::<u64>().ok()?;
    let link = match (parts.next(), parts.next(), parts.next()) {
        (None, _, _) => None,
        (Some(nonce), Some(before), None) => Some((nonce.to_owned(), before.to_owned())),
        _ => return None,
    };
    Some(Named { offset, link })
}

fn nonce_of(name: &str) -> Option<&str> {
    name.split('.').nth(1)
}

fn broken(session: &Path, why: impl std::fmt::Display) -> Error {
    Error::backend(std::io::Error::other(format!(
        "upload {session}: its chunks do not make its durable length: {why}"
    )))
}

impl Blobs {
    /// The session's chunk objects holding its first `received` bytes, in order: the chain
    /// back from `last` (and below it, or with no `last`, the older scheme's by offset).
    async fn chunks(
        &self,
        session: &Path,
        received: u64,
        last: Option<&str>,
    ) -> Result<Vec<Chunk>, Error> {
        let listed: Vec<(Named, Chunk)> = self
            .store
            .list(Some(session))
            .map_err(Error::from)
            .try_filter_map(|meta| async move {
                let named = meta.location.filename().and_then(parse_name);
                Ok(named.map(|named| {
                    let chunk = Chunk {
                        offset: named.offset,
                        size: meta.size,
                        key: meta.location,
                    };
                    (named, chunk)
                }))
            })
            .try_collect()
            .await?;
        chain(session, listed, received, last)
    }

    /// Appends `body` as the chunk at `received` after the chunk named `last` (see
    /// [`Blobs::append_upload`]); how many bytes, and the new chunk's name (none for none).
    /// Nothing already there is removed: another server may be writing its own chunk at the
    /// same offset, and only the commit decides whose is kept.
    pub(super) async fn append_chunk<S>(
        &self,
        session: &Path,
        received: u64,
        last: Option<&str>,
        body: S,
        room: u64,
    ) -> Result<(u64, Option<String>), Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        let before = match last.and_then(nonce_of) {
            Some(nonce) => nonce.to_owned(),
            None if received == 0 => FIRST.to_owned(),
            None => OLDER.to_owned(),
        };
        let nonce = format!("{:016x}", rand::random::<u64>());
        let name = format!("{received:020}.{nonce}.{before}");
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
            Ok(None)
        } else {
            self.store
                .copy(&staged, &session.clone().join(name.as_str()))
                .await
                .map(|()| Some(name))
                .map_err(Error::from)
        };
        if let Err(error) = self.store.delete(&staged).await {
            tracing::warn!(%staged, %error, "could not remove a staged chunk; the next start will");
        }
        placed.map(|name| (appended, name))
    }

    /// Removes the chunk `name` this server wrote and could not commit.
    pub(super) async fn drop_chunk(&self, session: &Path, name: &str) -> Result<(), Error> {
        match self.store.delete(&session.clone().join(name)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Removes every chunk of the session, on the chain or not.
    pub(super) async fn remove_chunks(&self, session: &Path) -> Result<(), Error> {
        let keys: Vec<Path> = self
            .store
            .list(Some(session))
            .map_ok(|meta| meta.location)
            .try_collect()
            .await?;
        for key in keys {
            match self.store.delete(&key).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }

    /// The session's bytes `start..end`, streamed from its chunks.
    pub(super) async fn read_chunks(
        &self,
        session: &Path,
        start: u64,
        end: u64,
        last: Option<&str>,
    ) -> Result<BoxStream<'static, Result<Bytes, Error>>, Error> {
        let mut pieces = Vec::new();
        for chunk in self.chunks(session, end, last).await? {
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
    pub(super) async fn hash_chunks(
        &self,
        session: &Path,
        received: u64,
        last: Option<&str>,
    ) -> Result<Staged, Error> {
        let bytes = self
            .read_chunks(session, 0, received, last)
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

/// The chunks holding a session's first `received` bytes, in order, among those `listed`:
/// the chain back from the chunk named `last`, then below it (or with no `last`) the older
/// scheme's chunks by offset. A chain that does not end exactly at `received`, or names a
/// chunk not listed, is an error: nothing is read from a session whose bytes are not whole.
fn chain(
    session: &Path,
    listed: Vec<(Named, Chunk)>,
    received: u64,
    last: Option<&str>,
) -> Result<Vec<Chunk>, Error> {
    let (mut linked, mut older) = (std::collections::HashMap::new(), Vec::new());
    for (named, chunk) in listed {
        match named.link {
            Some((nonce, before)) => {
                linked.insert(nonce, (before, chunk));
            }
            None => older.push(chunk),
        }
    }
    older.sort_by_key(|chunk| chunk.offset);
    let mut chain = Vec::new();
    let mut next = match last {
        Some(name) => match nonce_of(name) {
            Some(nonce) => Some(nonce.to_owned()),
            None => return Err(broken(session, format_args!("{name} is no chunk's name"))),
        },
        None => None,
    };
    // Below this offset, the older scheme's chunks (none once the chain reaches a first).
    let mut below = received;
    while let Some(nonce) = next.take() {
        let Some((before, chunk)) = linked.remove(&nonce) else {
            return Err(broken(session, format_args!("chunk {nonce} is missing")));
        };
        if chunk.offset + chunk.size != below {
            return Err(broken(
                session,
                format_args!("chunk {nonce} ends elsewhere"),
            ));
        }
        below = chunk.offset;
        chain.push(chunk);
        match before.as_str() {
            FIRST if below == 0 => {}
            FIRST => return Err(broken(session, "its first chunk does not start at 0")),
            OLDER => {}
            _ => next = Some(before),
        }
    }
    // The older scheme below: one object per offset, strays past the length ignored; they
    // must make exactly the bytes below, from 0.
    let older: Vec<Chunk> = older.into_iter().filter(|c| c.offset < below).collect();
    let mut end = 0;
    for chunk in &older {
        if chunk.offset != end {
            return Err(broken(session, format_args!("nothing holds bytes {end}..")));
        }
        end += chunk.size;
    }
    if end != below {
        return Err(broken(
            session,
            format_args!("its older chunks end at {end}, not {below}"),
        ));
    }
    chain.extend(older.into_iter().rev());
    chain.reverse();
    Ok(chain)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(names: &[(&str, u64)]) -> Vec<(Named, Chunk)> {
        let session = Path::from("uploads/up-1");
        names
            .iter()
            .map(|(name, size)| {
                let named = parse_name(name).expect("a chunk's name");
                let chunk = Chunk {
                    offset: named.offset,
                    size: *size,
                    key: session.clone().join(*name),
                };
                (named, chunk)
            })
            .collect()
    }

    fn keys(chunks: &[Chunk]) -> Vec<String> {
        chunks
            .iter()
            .map(|chunk| chunk.key.filename().unwrap_or("").to_owned())
            .collect()
    }

    const A: &str = "00000000000000000000.aaaa.0";
    const B: &str = "00000000000000000010.bbbb.aaaa";
    /// Written at B's offset by another server whose commit lost.
    const LOST: &str = "00000000000000000010.cccc.aaaa";
    const OLD_0: &str = "00000000000000000000";
    const OLD_7: &str = "00000000000000000007";

    /// The chain back from the session's last chunk, whatever else lies at the same offsets
    /// (a losing server's chunk, a crashed writer's): only the committed ones, in order.
    #[test]
    fn the_committed_chunks_are_the_chain_back_from_the_last() {
        let session = Path::from("uploads/up-1");
        let all = || listed(&[(A, 10), (LOST, 5), (B, 4)]);
        let found = chain(&session, all(), 14, Some(B)).expect("whole");
        assert_eq!(keys(&found), [A, B]);
        let found = chain(&session, all(), 15, Some(LOST)).expect("whole");
        assert_eq!(keys(&found), [A, LOST]);
        assert!(chain(&session, all(), 10, Some(A)).is_ok_and(|c| keys(&c) == [A]));
        assert!(chain(&session, all(), 0, None).is_ok_and(|c| c.is_empty()));
        // A length the chain does not end at, or a chunk missing from it, reads nothing.
        assert!(chain(&session, all(), 15, Some(B)).is_err());
        assert!(chain(&session, listed(&[(B, 4)]), 14, Some(B)).is_err());
        assert!(chain(&session, all(), 14, Some("bbbb")).is_err());
    }

    /// A session started before V43 keeps its chunks named by offset alone: found by offset
    /// below the first chunk of the newer scheme, and alone when it has none.
    #[test]
    fn chunks_of_the_older_scheme_are_found_by_offset_below_the_chain() {
        let session = Path::from("uploads/up-1");
        let newer = "00000000000000000010.dddd.L";
        let all = || listed(&[(OLD_0, 7), (OLD_7, 3), (newer, 6)]);
        let found = chain(&session, all(), 16, Some(newer)).expect("whole");
        assert_eq!(keys(&found), [OLD_0, OLD_7, newer]);
        let found = chain(&session, all(), 10, None).expect("whole");
        assert_eq!(keys(&found), [OLD_0, OLD_7]);
        // A gap, or older chunks that end short of the newer scheme's first, read nothing.
        assert!(chain(&session, listed(&[(OLD_7, 3)]), 10, None).is_err());
        assert!(chain(&session, listed(&[(OLD_0, 7), (newer, 6)]), 16, Some(newer)).is_err());
    }
}
