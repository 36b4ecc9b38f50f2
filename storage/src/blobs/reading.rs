//! Reading a local blob file on the blocking pool, window by window, into buffers that come
//! back when the last holder of their bytes drops them.
//!
//! A verified GET (ART-5) used to read each 1 MiB window into a fresh zeroed buffer on one
//! thread and hash it on another (`hashing::AddressHasher`). A profile of the 1 GiB GET
//! (`perf record -a` over the side-by-side bench, issue #15) put a fifth of the reading
//! thread's time in zeroing those buffers, and the hash read each window back from memory
//! on another core. A hashed read here hashes each window on the thread that read it, while
//! the window is still in that core's cache, before it is sent on: the bytes sent are
//! exactly the bytes hashed, and the root arrives once the last window has gone out.
//! Buffers are recycled, so none is zeroed after the first few.
//!
//! Memory stays flat: at most [`DEPTH`] windows wait for the reader, and a buffer whose
//! bytes are still held elsewhere (by a hasher, or by hyper writing it) is not reused until
//! they are dropped; one that comes back when the pool is full is freed.

use std::io::Read as _;

use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use tokio::sync::{mpsc, oneshot};

use crate::error::Error;

/// Bytes per window of a hashed read: small enough that the window is still in the reading
/// core's cache when it is hashed, large enough that the hand-offs cost nothing.
pub(crate) const HASHED_WINDOW: usize = 256 * 1024;
/// Windows read ahead of the consumer.
const DEPTH: usize = 8;

use crate::hashing::Root;

/// A window's bytes; dropping the last holder gives the buffer back to its reader.
struct Recycled {
    buffer: Vec<u8>,
    len: usize,
    home: std::sync::mpsc::SyncSender<Vec<u8>>,
}

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.buffer[..self.len]
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        // A full pool or a finished reader: the buffer is freed instead.
        let _ = self.home.try_send(std::mem::take(&mut self.buffer));
    }
}

/// Reads `file` to its end in windows of `window` bytes. With `hashed`, also the BLAKE3 root
/// of the bytes yielded, computed on the reading thread (see the module docs); it is never
/// sent if the read fails or the consumer goes away first.
pub(super) fn read_file(
    mut file: std::fs::File,
    window: usize,
    hashed: bool,
) -> (BoxStream<'static, Result<Bytes, Error>>, Option<Root>) {
    let (sender, mut receiver) = mpsc::channel::<Result<Bytes, Error>>(DEPTH);
    let (root_sender, root) = if hashed {
        let (sender, receiver) = oneshot::channel();
        (Some(sender), Some(receiver))
    } else {
        (None, None)
    };
    tokio::task::spawn_blocking(move || {
        let (home, spare) = std::sync::mpsc::sync_channel::<Vec<u8>>(DEPTH * 2);
        let mut hasher = root_sender.as_ref().map(|_| blake3::Hasher::new());
        loop {
            let mut buffer = spare.try_recv().unwrap_or_else(|_| vec![0u8; window]);
            let filled = match fill(&mut file, &mut buffer) {
                Ok(filled) => filled,
                Err(error) => {
                    let _ = sender.blocking_send(Err(Error::backend(error)));
                    return;
                }
            };
            if let Some(hasher) = hasher.as_mut() {
                hasher.update(&buffer[..filled]);
            }
            if filled > 0 {
                let bytes = Bytes::from_owner(Recycled {
                    buffer,
                    len: filled,
                    home: home.clone(),
                });
                if sender.blocking_send(Ok(bytes)).is_err() {
                    return; // the reader went away
                }
            }
            if filled < window {
                break;
            }
        }
        if let (Some(hasher), Some(root_sender)) = (hasher, root_sender) {
            let _ = root_sender.send(*hasher.finalize().as_bytes());
        }
    });
    let stream = futures::stream::poll_fn(move |cx| receiver.poll_recv(cx)).boxed();
    (stream, root)
}

/// Reads until `buffer` is full or the file ends; how many bytes were read.
fn fill(file: &mut std::fs::File, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use futures::TryStreamExt as _;

    use super::*;

    /// Every length around the window's edges: the bytes come back whole and in order, and
    /// the root is the BLAKE3 digest of exactly them.
    #[tokio::test]
    async fn a_hashed_read_yields_every_byte_and_their_root() {
        let window = 4096;
        for len in [
            0,
            1,
            window - 1,
            window,
            window + 1,
            3 * window,
            5 * window + 7,
        ] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let mut file = tempfile::tempfile().expect("temp file");
            file.write_all(&bytes).expect("write");
            file.sync_all().expect("sync");
            let file = reopened(file);
            let (stream, root) = read_file(file, window, true);
            let chunks: Vec<Bytes> = stream.try_collect().await.expect("read");
            assert!(chunks.iter().all(|c| !c.is_empty() && c.len() <= window));
            assert_eq!(chunks.concat(), bytes, "length {len}");
            let root = root.expect("a hashed read has a root").await.expect("sent");
            assert_eq!(&root, blake3::hash(&bytes).as_bytes(), "length {len}");
        }
    }

    /// Held windows are not overwritten by the windows read after them, however long the
    /// consumer keeps them: a buffer is reused only once every holder dropped it.
    #[tokio::test]
    async fn a_window_still_held_is_never_reused() {
        let window = 1024;
        let bytes: Vec<u8> = (0..window * 64).map(|i| (i / window) as u8).collect();
        let mut file = tempfile::tempfile().expect("temp file");
        file.write_all(&bytes).expect("write");
        let (mut stream, root) = read_file(reopened(file), window, false);
        assert!(root.is_none());
        let mut held = Vec::new();
        while let Some(chunk) = stream.try_next().await.expect("read") {
            // Keep every other window; drop the rest so their buffers come back.
            if held.len() % 2 == 0 || chunk[0] % 2 == 0 {
                held.push(chunk);
            }
        }
        for chunk in &held {
            let index = chunk[0];
            assert!(
                chunk.iter().all(|b| *b == index),
                "window {index} was overwritten"
            );
        }
    }

    /// A read that fails ends the stream with the error, and no root is ever sent, so a
    /// verified read cannot take the bytes before the failure for the whole blob.
    #[tokio::test]
    async fn a_failed_read_ends_with_its_error_and_no_root() {
        let dir = tempfile::tempdir().expect("temp dir");
        // Opening a directory succeeds on Linux; reading it fails (EISDIR).
        let file = std::fs::File::open(dir.path()).expect("open a directory");
        let (stream, root) = read_file(file, 4096, true);
        let items: Vec<Result<Bytes, Error>> = stream.collect().await;
        assert!(
            matches!(items.as_slice(), [Err(_)]),
            "one error and nothing else: {items:?}"
        );
        assert!(
            root.expect("asked for").await.is_err(),
            "no root after a failure"
        );
    }

    /// A file handle at offset 0 (`tempfile()` leaves the cursor at the end).
    fn reopened(mut file: std::fs::File) -> std::fs::File {
        use std::io::Seek as _;
        file.seek(std::io::SeekFrom::Start(0)).expect("seek");
        file
    }
}
