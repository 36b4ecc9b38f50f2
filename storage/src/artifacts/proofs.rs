//! Proofs of any length, streamed (issue #15): the bao encoding of a range of a blob with an
//! outboard is written on a blocking thread as bao-tree walks the tree, reading the blob a
//! window at a time and the outboard a page at a time, and goes out in pieces through a
//! bounded channel. Memory stays flat with the range, as for a verified GET.
//!
//! ART-5: `encode_ranges_validated` checks every hash pair against its parent, from the root
//! (the blob's address, from the index), and every chunk group against its hash, before it
//! writes them: nothing unverified goes out. A mismatch part-way ends the body with an error
//! (the connection is cut, as for a GET), deletes the outboard and rebuilds it in the
//! background; the next read then finds out whether the bytes or the outboard were wrong.
//!
//! The caller checked the path from the root to the range's first chunk group before it
//! answered (`ranges::proof`), so a missing or wrong outboard is found before the headers.

use std::cell::RefCell;
use std::io::{self, Write};
use std::ops::Range;
use std::sync::Arc;

use bao_tree::io::EncodeError;
use bao_tree::io::sync::{Outboard, ReadAt};
use bao_tree::{BaoTree, TreeNode};
use bytes::{Bytes, BytesMut};
use futures::StreamExt as _;
use futures::stream::BoxStream;
use tokio::runtime::Handle;
use weft_api::Digests;
use weft_api::bao::{GROUP_BYTES, chunk_ranges, tree};

use crate::engine::Engine;
use crate::error::Error;

/// Blob bytes read per step (whole chunk groups).
const WINDOW: u64 = 4 * 1024 * 1024;
/// Outboard bytes read per step: the hash pairs of 64 nodes (bao-tree loads each node once,
/// in pre-order, so a page serves the nodes of the subtrees beside each other).
const PAGE: u64 = 4 * 1024;
/// Outboard pages kept: a short range's few nodes lie on about one page per level.
const PAGES: usize = 16;
/// Encoded bytes per piece of the answer.
const PIECE: usize = 64 * 1024;
/// Pieces in flight between the encoder and the connection.
const IN_FLIGHT: usize = 4;
/// Proofs encoded at once, each holding a blocking thread while its reader reads; more wait
/// for a turn (holding no thread).
pub(crate) const PROOF_ENCODERS: usize = 16;
/// How long the encoder waits for the reader to take a piece before it gives up: a reader
/// that stops reading frees its thread.
const READER_IDLE: std::time::Duration = std::time::Duration::from_secs(60);

/// The proof of `range` of a blob with an outboard, as a stream of pieces, once one of the
/// [`PROOF_ENCODERS`] turns is free.
pub(crate) async fn stream(
    engine: Arc<Engine>,
    digests: Digests,
    range: Range<u64>,
) -> Result<BoxStream<'static, Result<Bytes, Error>>, Error> {
    let turn = Arc::clone(&engine.proof_encoders)
        .acquire_owned()
        .await
        .map_err(Error::backend)?;
    let (sender, receiver) = tokio::sync::mpsc::channel(IN_FLIGHT);
    let handle = Handle::current();
    let encoder = Arc::clone(&engine);
    let task = tokio::task::spawn_blocking(move || {
        let _turn = turn;
        let source = Source {
            engine: &encoder,
            handle: &handle,
            digests,
            // The end of the last chunk group the range needs: no window reads past it.
            limit: range
                .end
                .div_ceil(GROUP_BYTES)
                .saturating_mul(GROUP_BYTES)
                .min(digests.size),
        };
        let mut out = Pieces {
            sender: &sender,
            handle: &handle,
            idle: READER_IDLE,
            buffer: BytesMut::with_capacity(PIECE),
            gave_up: false,
        };
        let outcome = bao_tree::io::sync::encode_ranges_validated(
            Data {
                source: &source,
                window: RefCell::new(None),
            },
            Hashes {
                source: &source,
                tree: tree(digests.size),
                pages: RefCell::new(Vec::with_capacity(PAGES)),
            },
            &chunk_ranges(&range),
            &mut out,
        )
        .and_then(|()| out.flush().map_err(EncodeError::Io));
        let (mismatch, error) = match outcome {
            Ok(()) => return None,
            // The reader went away or stopped reading: nobody to tell.
            Err(_) if out.gave_up => return None,
            Err(
                error @ (EncodeError::ParentHashMismatch(_)
                | EncodeError::LeafHashMismatch(_)
                | EncodeError::SizeMismatch),
            ) => (true, error),
            Err(error) => (false, error),
        };
        let ended = if mismatch {
            Error::Corrupt(digests.blake3)
        } else {
            Error::backend(io::Error::other(error.to_string()))
        };
        out.end(ended);
        if mismatch {
            Some(error)
        } else {
            tracing::warn!(artifact = %digests.blake3, %error, "a streamed proof could not be read");
            None
        }
    });
    // Once the encoder has ended (whether or not anyone still reads): a proof that failed
    // part-way is the outboard's or the bytes' fault; the outboard goes and is rebuilt,
    // which tells them apart.
    tokio::spawn(async move {
        if let Ok(Some(error)) = task.await {
            tracing::warn!(artifact = %digests.blake3, %error, "a streamed proof did not verify; rebuilding the outboard");
            metrics::counter!("weft_outboard_failures_total").increment(1);
            if let Err(error) = engine.blobs.remove_outboard(&digests.blake3).await {
                tracing::warn!(artifact = %digests.blake3, %error, "could not remove a failed outboard");
            }
            super::ranges::rebuild_in_background(engine, digests);
        }
    });
    Ok(
        futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|piece| (piece, receiver))
        })
        .boxed(),
    )
}

/// Where the encoder's reads go: the blob's object and outboard, through the async store.
struct Source<'a> {
    engine: &'a Engine,
    handle: &'a Handle,
    digests: Digests,
    limit: u64,
}

fn io_error(error: Error) -> io::Error {
    io::Error::other(error.to_string())
}

/// The blob's bytes, a window of whole chunk groups at a time (bao-tree reads them in order).
struct Data<'a> {
    source: &'a Source<'a>,
    window: RefCell<Option<(u64, Bytes)>>,
}

impl ReadAt for Data<'_> {
    fn read_at(&self, pos: u64, buf: &mut [u8]) -> io::Result<usize> {
        let size = self.source.limit;
        if pos >= size || buf.is_empty() {
            return Ok(0);
        }
        let mut window = self.window.borrow_mut();
        let held = window
            .as_ref()
            .is_some_and(|(base, bytes)| pos >= *base && pos < base + bytes.len() as u64);
        if !held {
            let base = pos / GROUP_BYTES * GROUP_BYTES;
            let end = (base + WINDOW).min(size);
            let bytes = self
                .source
                .handle
                .block_on(
                    self.source
                        .engine
                        .blobs
                        .read_range(&self.source.digests.blake3, base..end),
                )
                .map_err(io_error)?;
            *window = Some((base, bytes));
        }
        let Some((base, bytes)) = window.as_ref() else {
            return Ok(0);
        };
        let from = (pos - base) as usize;
        if from >= bytes.len() {
            // A shorter object than its row says: the encoder's read fails.
            return Ok(0);
        }
        let n = buf.len().min(bytes.len() - from);
        buf[..n].copy_from_slice(&bytes[from..from + n]);
        Ok(n)
    }
}

/// The outboard's hash pairs (post-order, 64 bytes a node), a page at a time; the few pages
/// the tree's upper levels need stay.
struct Hashes<'a> {
    source: &'a Source<'a>,
    tree: BaoTree,
    pages: RefCell<Vec<(u64, Bytes)>>,
}

impl Outboard for Hashes<'_> {
    fn root(&self) -> blake3::Hash {
        blake3::Hash::from_bytes(self.source.digests.blake3.0)
    }

    fn tree(&self) -> BaoTree {
        self.tree
    }

    fn load(&self, node: TreeNode) -> io::Result<Option<(blake3::Hash, blake3::Hash)>> {
        let Some(offset) = self.tree.post_order_offset(node) else {
            return Ok(None);
        };
        let at = offset.value() * 64;
        let page = at / PAGE * PAGE;
        let mut pages = self.pages.borrow_mut();
        let found = pages.iter().position(|(start, _)| *start == page);
        let index = match found {
            Some(index) => index,
            None => {
                let wanted = page..(page + PAGE).min(self.tree.outboard_size());
                let parts = self
                    .source
                    .handle
                    .block_on(self.source.engine.blobs.outboard_ranges(
                        &self.source.digests.blake3,
                        std::slice::from_ref(&wanted),
                    ))
                    .map_err(io_error)?
                    .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no outboard"))?;
                let bytes = parts.into_iter().next().unwrap_or_default();
                if pages.len() == PAGES {
                    pages.remove(0);
                }
                pages.push((page, bytes));
                pages.len() - 1
            }
        };
        let bytes = &pages[index].1;
        let from = (at - page) as usize;
        let pair = bytes
            .get(from..from + 64)
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "short outboard"))?;
        let mut left = [0u8; 32];
        let mut right = [0u8; 32];
        left.copy_from_slice(&pair[..32]);
        right.copy_from_slice(&pair[32..]);
        Ok(Some((
            blake3::Hash::from_bytes(left),
            blake3::Hash::from_bytes(right),
        )))
    }
}

/// The encoding, in pieces of [`PIECE`] bytes, to the connection; a closed connection, or a
/// reader that took no piece for `idle`, is a write error that stops the encoder.
struct Pieces<'a> {
    sender: &'a tokio::sync::mpsc::Sender<Result<Bytes, Error>>,
    handle: &'a Handle,
    idle: std::time::Duration,
    buffer: BytesMut,
    /// The reader went away or took no piece for `idle`.
    gave_up: bool,
}

impl Pieces<'_> {
    /// Hands `piece` to the reader, waiting at most `idle` for room.
    fn hand(&mut self, piece: Result<Bytes, Error>) -> io::Result<()> {
        let handed = self
            .handle
            .block_on(tokio::time::timeout(self.idle, self.sender.send(piece)));
        let refused = match handed {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(_)) => io::Error::new(io::ErrorKind::ConnectionReset, "the reader went away"),
            Err(_) => io::Error::new(io::ErrorKind::TimedOut, "the reader took no piece in time"),
        };
        self.gave_up = true;
        Err(refused)
    }

    /// Ends the answer with `error` (the connection is cut), unless the reader is gone.
    fn end(&mut self, error: Error) {
        if !self.gave_up {
            let _ = self.hand(Err(error));
        }
    }

    fn send(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let piece = self.buffer.split().freeze();
        self.buffer.reserve(PIECE);
        self.hand(Ok(piece))
    }
}

impl Write for Pieces<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= PIECE {
            self.send()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that takes no piece for `idle` frees the encoder's thread: the write fails,
    /// and the encoder knows not to report it as a bad proof.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_reader_that_stops_reading_ends_the_encoding() {
        let (sender, _receiver) = tokio::sync::mpsc::channel(1);
        let handle = Handle::current();
        let gave_up = tokio::task::spawn_blocking(move || {
            let mut out = Pieces {
                sender: &sender,
                handle: &handle,
                idle: std::time::Duration::from_millis(20),
                buffer: BytesMut::new(),
                gave_up: false,
            };
            // The first piece fills the channel; the second finds no room.
            out.write_all(&vec![7u8; PIECE]).expect("room for one");
            let error = out.write_all(&vec![7u8; PIECE]).expect_err("no room");
            (error.kind(), out.gave_up)
        })
        .await
        .expect("joined");
        assert_eq!(gave_up, (io::ErrorKind::TimedOut, true));
    }

    /// A reader that went away stops the encoder at its next piece.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_reader_that_went_away_ends_the_encoding() {
        let (sender, receiver) = tokio::sync::mpsc::channel(4);
        drop(receiver);
        let handle = Handle::current();
        let gave_up = tokio::task::spawn_blocking(move || {
            let mut out = Pieces {
                sender: &sender,
                handle: &handle,
                idle: READER_IDLE,
                buffer: BytesMut::new(),
                gave_up: false,
            };
            let error = out.write_all(&vec![7u8; PIECE]).expect_err("nobody reads");
            (error.kind(), out.gave_up)
        })
        .await
        .expect("joined");
        assert_eq!(gave_up, (io::ErrorKind::ConnectionReset, true));
    }
}
